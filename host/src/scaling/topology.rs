//! The job graph of one observation, in topological order, with inputs and outputs per vertex.

use std::collections::HashMap;

use flowscale_sdk::ShipStrategy;

use crate::engine::JobObservation;

use super::error::CycleError;

/// A vertex with its edges, as the pipeline walks it.
#[derive(Debug, Clone)]
pub(crate) struct VertexInfo<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub parallelism: u32,
    pub max_parallelism: u32,
    pub source_partitions: u32,
    pub finished: bool,
    /// Upstream vertex indices (into [`Topology::vertices`]) with the edge's ship strategy.
    pub inputs: Vec<(usize, ShipStrategy)>,
    /// Downstream vertex indices.
    pub outputs: Vec<usize>,
}

impl VertexInfo<'_> {
    pub fn is_source(&self) -> bool {
        self.inputs.is_empty()
    }
}

/// Vertices in topological order (Kahn's algorithm by levels; inside a level the observation's
/// order is kept, which makes the order deterministic).
#[derive(Debug, Clone)]
pub(crate) struct Topology<'a> {
    pub vertices: Vec<VertexInfo<'a>>,
    pub index: HashMap<&'a str, usize>,
}

impl<'a> Topology<'a> {
    pub fn from_observation(obs: &'a JobObservation) -> Result<Topology<'a>, CycleError> {
        if obs.vertices.is_empty() {
            return Err(CycleError::NotReady(
                "No nodes found in the plan, job is not ready yet".into(),
            ));
        }
        let position = positions(obs)?;
        let (inputs, outputs) = edges(obs, &position)?;
        let order = topological_order(&inputs, &outputs)?;
        let mut new_index = vec![0usize; order.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new;
        }
        let vertices = order
            .iter()
            .map(|&old| {
                let v = &obs.vertices[old];
                VertexInfo {
                    id: v.id.as_str(),
                    name: v.name.as_str(),
                    parallelism: v.parallelism,
                    max_parallelism: v.max_parallelism,
                    source_partitions: v.source_partitions,
                    finished: v.finished,
                    inputs: inputs[old]
                        .iter()
                        .map(|&(u, s)| (new_index[u], s))
                        .collect(),
                    outputs: outputs[old].iter().map(|&o| new_index[o]).collect(),
                }
            })
            .collect::<Vec<_>>();
        let index = vertices
            .iter()
            .enumerate()
            .map(|(i, v)| (v.id, i))
            .collect();
        Ok(Topology { vertices, index })
    }

    /// The SDK's view of the graph, for alignment contexts.
    pub fn to_sdk(&self) -> flowscale_sdk::JobTopology {
        flowscale_sdk::JobTopology {
            vertices: self
                .vertices
                .iter()
                .map(|v| flowscale_sdk::TopologyVertex {
                    id: v.id.to_string(),
                    name: v.name.to_string(),
                    parallelism: v.parallelism,
                    max_parallelism: v.max_parallelism,
                    source_partitions: v.source_partitions,
                })
                .collect(),
            edges: self
                .vertices
                .iter()
                .flat_map(|v| {
                    v.inputs.iter().map(|&(u, s)| flowscale_sdk::TopologyEdge {
                        from: self.vertices[u].id.to_string(),
                        to: v.id.to_string(),
                        ship_strategy: s,
                    })
                })
                .collect(),
        }
    }
}

/// Each vertex's position in the observation; every vertex listed once, with positive
/// parallelism and max parallelism.
fn positions(obs: &JobObservation) -> Result<HashMap<&str, usize>, CycleError> {
    let mut position: HashMap<&str, usize> = HashMap::with_capacity(obs.vertices.len());
    for (i, v) in obs.vertices.iter().enumerate() {
        if position.insert(v.id.as_str(), i).is_some() {
            return Err(CycleError::InvalidObservation(format!(
                "vertex `{}` is listed twice",
                v.id
            )));
        }
    }
    if let Some(v) = obs
        .vertices
        .iter()
        .find(|v| v.parallelism == 0 || v.max_parallelism == 0)
    {
        return Err(CycleError::InvalidObservation(format!(
            "vertex `{}` reports parallelism {} and max parallelism {}; both must be positive",
            v.id, v.parallelism, v.max_parallelism
        )));
    }
    Ok(position)
}

/// Inputs (with their ship strategies) and outputs per vertex, by position in the observation.
type Edges = (Vec<Vec<(usize, ShipStrategy)>>, Vec<Vec<usize>>);

fn edges(obs: &JobObservation, position: &HashMap<&str, usize>) -> Result<Edges, CycleError> {
    let n = obs.vertices.len();
    let mut inputs: Vec<Vec<(usize, ShipStrategy)>> = vec![Vec::new(); n];
    let mut outputs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for e in &obs.edges {
        let (Some(&from), Some(&to)) = (position.get(e.from.as_str()), position.get(e.to.as_str()))
        else {
            return Err(CycleError::InvalidObservation(format!(
                "edge {} -> {} names an unknown vertex",
                e.from, e.to
            )));
        };
        inputs[to].push((from, e.strategy()));
        outputs[from].push(to);
    }
    Ok((inputs, outputs))
}

/// Kahn's algorithm by levels over the observation's positions; inside a level the positions
/// are sorted, which makes the order deterministic.
fn topological_order(
    inputs: &[Vec<(usize, ShipStrategy)>],
    outputs: &[Vec<usize>],
) -> Result<Vec<usize>, CycleError> {
    let n = inputs.len();
    let mut indegree: Vec<usize> = inputs.iter().map(Vec::len).collect();
    let mut order: Vec<usize> = Vec::with_capacity(n);
    let mut level: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    while !level.is_empty() {
        let mut next = Vec::new();
        for &v in &level {
            order.push(v);
            for &o in &outputs[v] {
                indegree[o] -= 1;
                if indegree[o] == 0 {
                    next.push(o);
                }
            }
        }
        next.sort_unstable();
        level = next;
    }
    if order.len() != n {
        return Err(CycleError::InvalidObservation(
            "the job graph has a cycle".into(),
        ));
    }
    Ok(order)
}
