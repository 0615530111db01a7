//! Turning Flink's job details and plan into the engine-neutral topology: vertices in
//! topological order, edges with their ship strategies, status and IO counters.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::rest::{JobDetails, JobVertexDetails, Plan, PlanNode};
use crate::engine::{EngineError, IoMetrics, JobStatus, ObservedEdge, ObservedVertex};

/// The topology of a job as read from the REST API.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Topology {
    /// Vertices, inputs before outputs.
    pub(crate) vertices: Vec<ObservedVertex>,
    /// Edges in plan order.
    pub(crate) edges: Vec<ObservedEdge>,
    /// Vertex ids without inputs.
    pub(crate) sources: BTreeSet<String>,
    /// IO counters per vertex id (zeros for finished vertices, as the Flink autoscaler does).
    pub(crate) io: BTreeMap<String, IoMetrics>,
}

/// Maps Flink's job state to [`JobStatus`]. Like the Flink autoscaler's standalone fetcher, a RUNNING job
/// whose tasks are not all running or finished (still deploying, or rescaling) reads as CREATED
/// so nothing decides on a half-deployed job.
pub(crate) fn map_status(state: &str, all_tasks_up: bool) -> JobStatus {
    match state.to_ascii_uppercase().as_str() {
        "RUNNING" if all_tasks_up => JobStatus::Running,
        "RUNNING" | "CREATED" | "INITIALIZING" | "RECONCILING" => JobStatus::Created,
        "RESTARTING" | "FAILING" | "SUSPENDED" => JobStatus::Restarting,
        "FINISHED" => JobStatus::Finished,
        "FAILED" => JobStatus::Failed,
        "CANCELLING" | "CANCELED" | "CANCELLED" => JobStatus::Canceled,
        // An unknown state is treated as "not yet running": the loop waits instead of acting.
        _ => JobStatus::Created,
    }
}

/// Whether every task is RUNNING or FINISHED, from per-state task counts (any key case).
pub(crate) fn all_tasks_up<'a>(
    counts: impl IntoIterator<Item = &'a BTreeMap<String, i64>>,
) -> bool {
    let (mut total, mut up) = (0i64, 0i64);
    for map in counts {
        for (state, n) in map {
            match state.to_ascii_uppercase().as_str() {
                // The overview carries a precomputed total; the details do not.
                "TOTAL" => continue,
                "RUNNING" | "FINISHED" => up += n,
                _ => {}
            }
            total += n;
        }
    }
    total > 0 && up == total
}

/// The plain text of a plan description (`"cost<br/>"` -> `"cost"`).
pub(crate) fn strip_html(description: &str) -> String {
    let mut text = String::with_capacity(description.len());
    let mut in_tag = false;
    for c in description.chars() {
        match c {
            '<' => {
                in_tag = true;
                text.push(' ');
            }
            '>' if in_tag => in_tag = false,
            _ if !in_tag => text.push(c),
            _ => {}
        }
    }
    let text = text
        .replace("&gt;", ">")
        .replace("&lt;", "<")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn positive_u32(value: Option<i64>) -> Option<u32> {
    value.filter(|v| *v > 0).and_then(|v| u32::try_from(v).ok())
}

/// A number from the details' vertex metrics, which may be a JSON number or a string such as
/// `"NaN"`.
fn metric_number(metrics: &BTreeMap<String, Value>, key: &str) -> Option<f64> {
    match metrics.get(key)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
}

fn io_metrics(vertex: &JobVertexDetails) -> IoMetrics {
    IoMetrics {
        num_records_in: metric_number(&vertex.metrics, "read-records").unwrap_or(0.0),
        num_records_out: metric_number(&vertex.metrics, "write-records").unwrap_or(0.0),
        accumulated_busy_time: metric_number(&vertex.metrics, "accumulated-busy-time")
            .unwrap_or(f64::NAN),
    }
}

/// Builds the topology from the details and the plan (the plan's parallelism is the one used
/// everywhere, as in the Flink autoscaler; max parallelism and status come from the details).
pub(crate) fn build_topology(details: &JobDetails, plan: &Plan) -> Result<Topology, EngineError> {
    if plan.nodes.is_empty() {
        return Err(EngineError::NotReady(
            "no nodes found in the plan, job is not ready yet".into(),
        ));
    }
    let by_id: BTreeMap<&str, &JobVertexDetails> = details
        .vertices
        .iter()
        .map(|v| (v.id.as_str(), v))
        .collect();
    let edges = plan_edges(plan)?;
    let mut vertices = Vec::with_capacity(plan.nodes.len());
    let mut io = BTreeMap::new();
    let mut sources = BTreeSet::new();
    for node in &plan.nodes {
        let (vertex, vertex_io) = observed_vertex(node, by_id.get(node.id.as_str()).copied())?;
        if node.inputs.is_empty() {
            sources.insert(node.id.clone());
        }
        io.insert(node.id.clone(), vertex_io);
        vertices.push(vertex);
    }
    let vertices = topological_order(vertices, &edges)?;
    Ok(Topology {
        vertices,
        edges,
        sources,
        io,
    })
}

/// Every input of every plan node as an edge, in plan order; an input from outside the plan is
/// an error.
fn plan_edges(plan: &Plan) -> Result<Vec<ObservedEdge>, EngineError> {
    let node_ids: BTreeSet<&str> = plan.nodes.iter().map(|n| n.id.as_str()).collect();
    let mut edges = Vec::new();
    for node in &plan.nodes {
        for input in &node.inputs {
            if !node_ids.contains(input.id.as_str()) {
                return Err(EngineError::Other(format!(
                    "plan node {} has an input {} that is not in the plan",
                    node.id, input.id
                )));
            }
            edges.push(ObservedEdge {
                from: input.id.clone(),
                to: node.id.clone(),
                ship_strategy: input.ship_strategy.to_ascii_uppercase(),
            });
        }
    }
    Ok(edges)
}

/// A plan node as a vertex, with its IO counters, from its `detail` when the job details list
/// it.
fn observed_vertex(
    node: &PlanNode,
    detail: Option<&JobVertexDetails>,
) -> Result<(ObservedVertex, IoMetrics), EngineError> {
    let finished = detail.is_some_and(|d| d.status.eq_ignore_ascii_case("FINISHED"));
    let parallelism = positive_u32(node.parallelism)
        .or_else(|| detail.and_then(|d| positive_u32(d.parallelism)))
        .ok_or_else(|| {
            EngineError::NotReady(format!("vertex {} has no parallelism yet", node.id))
        })?;
    let max_parallelism = detail
        .and_then(|d| positive_u32(d.max_parallelism))
        .ok_or_else(|| {
            EngineError::NotReady(format!("vertex {} has no max parallelism", node.id))
        })?;
    let name = match detail {
        Some(d) if !d.name.trim().is_empty() => d.name.trim().to_string(),
        _ => strip_html(&node.description),
    };
    let io = match detail {
        Some(d) if !finished => io_metrics(d),
        // Finished vertices count as idle, with no IO (the Flink autoscaler's convention).
        _ => IoMetrics {
            num_records_in: 0.0,
            num_records_out: 0.0,
            accumulated_busy_time: if finished { 0.0 } else { f64::NAN },
        },
    };
    let vertex = ObservedVertex {
        id: node.id.clone(),
        name,
        parallelism,
        max_parallelism,
        source_partitions: 0,
        finished,
        // Flink 1.19+ names each vertex's group in the details; an older Flink leaves it out,
        // and the resource quota is then not checked (as the Flink autoscaler does).
        slot_sharing_group: detail.and_then(|d| d.slot_sharing_group_id.clone()),
    };
    Ok((vertex, io))
}

/// Kahn's algorithm by levels; inside a level the plan's order is kept.
fn topological_order(
    vertices: Vec<ObservedVertex>,
    edges: &[ObservedEdge],
) -> Result<Vec<ObservedVertex>, EngineError> {
    let mut indegree: BTreeMap<&str, usize> = vertices.iter().map(|v| (v.id.as_str(), 0)).collect();
    for edge in edges {
        if let Some(n) = indegree.get_mut(edge.to.as_str()) {
            *n += 1;
        }
    }
    let mut placed = vec![false; vertices.len()];
    let mut order: Vec<usize> = Vec::with_capacity(vertices.len());
    while order.len() < vertices.len() {
        let level: Vec<usize> = (0..vertices.len())
            .filter(|&i| !placed[i] && indegree.get(vertices[i].id.as_str()) == Some(&0))
            .collect();
        if level.is_empty() {
            return Err(EngineError::Other("the job graph has a cycle".into()));
        }
        let level_ids: BTreeSet<&str> = level.iter().map(|&i| vertices[i].id.as_str()).collect();
        for edge in edges.iter().filter(|e| level_ids.contains(e.from.as_str())) {
            if let Some(n) = indegree.get_mut(edge.to.as_str()) {
                *n = n.saturating_sub(1);
            }
        }
        for &i in &level {
            placed[i] = true;
        }
        order.extend(level);
    }
    let mut slots: Vec<Option<ObservedVertex>> = vertices.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::flink::rest::{PlanInput, PlanNode};

    fn vertex(id: &str, status: &str) -> JobVertexDetails {
        JobVertexDetails {
            id: id.into(),
            name: String::new(),
            parallelism: Some(2),
            max_parallelism: Some(128),
            slot_sharing_group_id: None,
            status: status.into(),
            tasks: BTreeMap::new(),
            metrics: BTreeMap::new(),
        }
    }

    fn node(id: &str, inputs: &[(&str, &str)]) -> PlanNode {
        PlanNode {
            id: id.into(),
            parallelism: Some(3),
            description: format!("Op &gt; {id}<br/>"),
            inputs: inputs
                .iter()
                .map(|(i, s)| PlanInput {
                    id: i.to_string(),
                    ship_strategy: s.to_string(),
                })
                .collect(),
        }
    }

    #[test]
    fn running_needs_every_task_up() {
        let up: BTreeMap<String, i64> = [("RUNNING".into(), 2), ("FINISHED".into(), 1)].into();
        let deploying: BTreeMap<String, i64> =
            [("RUNNING".into(), 1), ("DEPLOYING".into(), 1)].into();
        assert!(all_tasks_up([&up]));
        assert!(!all_tasks_up([&up, &deploying]));
        assert!(!all_tasks_up(std::iter::empty()));
        let overview: BTreeMap<String, i64> = [
            ("running".into(), 4),
            ("total".into(), 4),
            ("created".into(), 0),
        ]
        .into();
        assert!(all_tasks_up([&overview]));
        assert_eq!(map_status("RUNNING", true), JobStatus::Running);
        assert_eq!(map_status("RUNNING", false), JobStatus::Created);
        assert_eq!(map_status("RESTARTING", true), JobStatus::Restarting);
        assert_eq!(map_status("CANCELED", true), JobStatus::Canceled);
        assert_eq!(map_status("SOMETHING_NEW", true), JobStatus::Created);
    }

    #[test]
    fn html_is_stripped_from_descriptions() {
        assert_eq!(strip_html("Source: src<br/>"), "Source: src");
        assert_eq!(
            strip_html("a &amp; b<br/>+- x &gt; y<br/>"),
            "a & b +- x > y"
        );
    }

    #[test]
    fn topology_orders_inputs_first_and_reads_finished_and_io() {
        // Plan lists the sink first to check the ordering.
        let plan = Plan {
            nodes: vec![
                node("sink", &[("map", "forward")]),
                node("map", &[("src", "HASH")]),
                node("src", &[]),
            ],
        };
        let mut src = vertex("src", "FINISHED");
        src.metrics.insert("read-records".into(), Value::from(5));
        let mut map = vertex("map", "RUNNING");
        map.metrics.insert("read-records".into(), Value::from(10));
        map.metrics.insert("write-records".into(), Value::from(7));
        map.metrics
            .insert("accumulated-busy-time".into(), Value::from("NaN"));
        let details = JobDetails {
            state: "RUNNING".into(),
            vertices: vec![src, map, vertex("sink", "RUNNING")],
            ..JobDetails::default()
        };
        let t = build_topology(&details, &plan).unwrap();
        let ids: Vec<&str> = t.vertices.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, ["src", "map", "sink"]);
        assert_eq!(t.vertices[0].parallelism, 3, "plan parallelism wins");
        assert_eq!(t.vertices[0].max_parallelism, 128);
        assert!(t.vertices[0].finished);
        assert_eq!(t.vertices[1].name, "Op > map");
        assert_eq!(
            t.io["src"].num_records_in, 0.0,
            "finished vertices have no IO"
        );
        assert_eq!(t.io["map"].num_records_in, 10.0);
        assert_eq!(t.io["map"].num_records_out, 7.0);
        assert!(t.io["map"].accumulated_busy_time.is_nan());
        assert_eq!(t.edges[0].ship_strategy, "FORWARD");
        assert_eq!(t.sources.iter().collect::<Vec<_>>(), ["src"]);
    }

    #[test]
    fn empty_plans_and_cycles_are_errors_not_panics() {
        let details = JobDetails::default();
        assert!(matches!(
            build_topology(&details, &Plan::default()),
            Err(EngineError::NotReady(_))
        ));
        let plan = Plan {
            nodes: vec![node("a", &[("b", "HASH")]), node("b", &[("a", "HASH")])],
        };
        let details = JobDetails {
            vertices: vec![vertex("a", "RUNNING"), vertex("b", "RUNNING")],
            ..JobDetails::default()
        };
        assert!(matches!(
            build_topology(&details, &plan),
            Err(EngineError::Other(_))
        ));
        let plan = Plan {
            nodes: vec![node("a", &[("ghost", "HASH")])],
        };
        assert!(build_topology(&details, &plan).is_err());
    }
}
