//! The job graph of one observation, in topological order, with inputs and outputs per vertex.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use flowscale_sdk::ShipStrategy;

use crate::engine::JobObservation;

use super::error::CycleError;

/// A vertex with its edges, as the pipeline walks it.
#[derive(Debug, Clone)]
pub(crate) struct VertexInfo {
    /// The engine's id, shared with [`VertexIds`] (and through it with the samples collected
    /// on this graph).
    pub(crate) id: Arc<str>,
    /// The engine's name, shared with every cycle's record of the vertex.
    pub(crate) name: Arc<str>,
    pub(crate) parallelism: u32,
    pub(crate) max_parallelism: u32,
    pub(crate) source_partitions: u32,
    pub(crate) finished: bool,
    /// Upstream vertex indices (into [`Topology::vertices`]) with the edge's ship strategy.
    pub(crate) inputs: Vec<(usize, ShipStrategy)>,
    /// The ship strategies of `inputs`, in their order, shared with the alignment requests
    /// of every cycle on this graph (built once with the graph, not once per request).
    pub(crate) input_strategies: Arc<[ShipStrategy]>,
    /// Downstream vertex indices.
    pub(crate) outputs: Vec<usize>,
}

impl VertexInfo {
    pub(crate) fn is_source(&self) -> bool {
        self.inputs.is_empty()
    }
}

/// Vertices in topological order (Kahn's algorithm by levels; inside a level the observation's
/// order is kept, which makes the order deterministic).
///
/// A topology owns its data, so that a job keeps it between cycles ([`GraphCache`]) and
/// rebuilds it only when the observed graph changes.
#[derive(Debug, Clone)]
pub(crate) struct Topology {
    pub(crate) vertices: Vec<VertexInfo>,
    /// The vertex ids in topological order, with their indices.
    pub(crate) index: Arc<VertexIds>,
}

impl Topology {
    #[cfg(test)]
    pub(crate) fn from_observation(obs: &JobObservation) -> Result<Topology, CycleError> {
        Ok(build(obs)?.0)
    }

    /// The SDK's view of the graph, for alignment contexts.
    pub(crate) fn to_sdk(&self) -> flowscale_sdk::JobTopology {
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

/// The vertex ids of one topology in its order, each with its index: one allocation per id
/// for as long as the graph does not change. The samples collected on a graph share its ids
/// (`Arc`), so that finding a vertex in a sample of the same graph is an index, not a search.
#[derive(Debug, Clone, Default)]
pub(crate) struct VertexIds {
    ids: Vec<Arc<str>>,
    /// The indices in the order of their ids.
    in_id_order: Vec<usize>,
    positions: HashMap<Arc<str>, usize, BuildHasherDefault<IdHasher>>,
}

impl VertexIds {
    /// The ids in this order, each listed once.
    pub(crate) fn new(ids: Vec<Arc<str>>) -> VertexIds {
        let mut positions = HashMap::with_capacity_and_hasher(ids.len(), Default::default());
        positions.extend(ids.iter().enumerate().map(|(i, id)| (Arc::clone(id), i)));
        let mut in_id_order: Vec<usize> = (0..ids.len()).collect();
        in_id_order.sort_unstable_by(|&a, &b| ids[a].cmp(&ids[b]));
        VertexIds {
            ids,
            in_id_order,
            positions,
        }
    }

    /// The index of vertex `id`.
    pub(crate) fn get(&self, id: &str) -> Option<&usize> {
        self.positions.get(id)
    }

    /// True when `id` is one of the vertices.
    pub(crate) fn contains_key(&self, id: &str) -> bool {
        self.positions.contains_key(id)
    }

    /// The ids, by index.
    pub(crate) fn ids(&self) -> &[Arc<str>] {
        &self.ids
    }

    /// The indices in the order of their ids (for maps keyed by id, built without sorting).
    pub(crate) fn in_id_order(&self) -> &[usize] {
        &self.in_id_order
    }
}

/// A job's topology kept between cycles, with what tells whether an observation still has the
/// same graph. Not part of the persisted state: it is rebuilt from the first observation after a
/// restore.
#[derive(Debug, Clone, Default)]
pub(crate) struct GraphCache {
    current: Option<CachedGraph>,
}

#[derive(Debug, Clone)]
struct CachedGraph {
    topology: Topology,
    /// What the observation the topology was built from said, for telling whether the next
    /// one says the same.
    observed: ObservedGraph,
    /// The SDK's view of the graph, built on first use.
    sdk: OnceCell<Arc<flowscale_sdk::JobTopology>>,
}

impl PartialEq for GraphCache {
    /// Always equal: a cache holds nothing that is not in the observation, so it never makes
    /// two states differ.
    fn eq(&self, _: &GraphCache) -> bool {
        true
    }
}

impl GraphCache {
    /// The kept topology with its SDK view (built on first use): the kept one when `obs`
    /// describes the same graph (vertices in the same order with the same ids, names,
    /// parallelisms and flags; the same edges in the same order), else a new one, which is kept.
    pub(crate) fn current(
        &mut self,
        obs: &JobObservation,
    ) -> Result<(&Topology, &OnceCell<Arc<flowscale_sdk::JobTopology>>), CycleError> {
        let graph = match self.current.take() {
            Some(kept) if kept.describes(obs) => kept,
            _ => CachedGraph::of(obs)?,
        };
        let graph = self.current.insert(graph);
        Ok((&graph.topology, &graph.sdk))
    }

    /// True when no topology is kept.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.current.is_none()
    }
}

impl CachedGraph {
    fn of(obs: &JobObservation) -> Result<CachedGraph, CycleError> {
        let (topology, by_position, edges) = build(obs)?;
        let observed = ObservedGraph::of(obs, &by_position, &edges.resolved);
        Ok(CachedGraph {
            topology,
            observed,
            sdk: OnceCell::new(),
        })
    }

    /// True when `obs` describes exactly the graph this topology was built from: the same
    /// vertices in the same order with the same ids, names, parallelisms and flags; the same
    /// edges in the same order, between the same vertices, with the same strategies as spelled.
    fn describes(&self, obs: &JobObservation) -> bool {
        let Some(numbers) = self.observed.numbers.as_deref() else {
            return false;
        };
        let vertex_count = obs.vertices.len();
        if numbers.len() != vertex_count + obs.edges.len() * EDGE_WORDS {
            return false;
        }
        let (by_position, edges) = numbers.split_at(vertex_count);
        let vertices = &self.topology.vertices;
        let same_vertices = obs.vertices.iter().zip(by_position).all(|(o, &i)| {
            vertices.get(i as usize).is_some_and(|v| {
                *v.id == *o.id
                    && *v.name == *o.name
                    && v.parallelism == o.parallelism
                    && v.max_parallelism == o.max_parallelism
                    && v.source_partitions == o.source_partitions
                    && v.finished == o.finished
            })
        });
        if !same_vertices {
            return false;
        }
        let strategies = self.observed.strategies.as_bytes();
        let is = |at: u32, id: &str| vertices.get(at as usize).is_some_and(|v| *v.id == *id);
        let mut start = 0;
        for (e, numbers) in obs.edges.iter().zip(edges.chunks_exact(EDGE_WORDS)) {
            let &[from, to, end] = numbers else {
                return false;
            };
            if strategies.get(start as usize..end as usize) != Some(e.ship_strategy.as_bytes())
                || !is(from, &e.from)
                || !is(to, &e.to)
            {
                return false;
            }
            start = end;
        }
        true
    }
}

/// What the observation a topology was built from said beyond the topology's vertices, in two
/// buffers: the numbers (each observed vertex's index in the topology by its position, then
/// each edge's endpoints as topology indices and where its strategy ends) in one list, and the
/// edges' ship strategies as spelled, one after the other, in one text.
///
/// Every cycle of every job compares its observation with the graph it kept, and at 10,000
/// jobs the kept graph is out of the cache when its job's turn comes. The vertices' ids and
/// names are compared through the topology, whose vertices, ids and names the rest of the cycle
/// reads anyway (comparing them elsewhere only moves those cache misses to the next reader);
/// what only this comparison reads is kept in a few consecutive lines instead of a list of
/// edges with one heap string per strategy.
#[derive(Debug, Clone)]
struct ObservedGraph {
    /// One number per vertex, then [`EDGE_WORDS`] per edge. `None` when the observation does
    /// not fit (strategies or indices beyond `u32`): such a graph is never taken as unchanged,
    /// which only costs a rebuild.
    numbers: Option<Box<[u32]>>,
    /// The edges' ship strategies in edge order.
    strategies: Box<str>,
}

/// Numbers per edge: its endpoints' indices in the topology, end of its strategy.
const EDGE_WORDS: usize = 3;

impl ObservedGraph {
    /// The graph of `obs`, whose vertices have topology indices `by_position` (by observation
    /// position) and whose edges `endpoints` has as observation positions (as [`build`]
    /// resolved them, in edge order).
    fn of(
        obs: &JobObservation,
        by_position: &[usize],
        endpoints: &[(usize, usize, ShipStrategy)],
    ) -> ObservedGraph {
        let text_len: usize = obs.edges.iter().map(|e| e.ship_strategy.len()).sum();
        let mut strategies = String::with_capacity(text_len);
        let fits = u32::try_from(text_len).is_ok()
            && u32::try_from(by_position.len()).is_ok()
            && endpoints.len() == obs.edges.len();
        if !fits {
            return ObservedGraph {
                numbers: None,
                strategies: strategies.into_boxed_str(),
            };
        }
        // Every text end is at most `text_len` and every index below the vertex count, both of
        // which fit in `u32`.
        let index = |at: usize| by_position.get(at).map_or(u32::MAX, |&i| i as u32);
        let mut numbers = Vec::with_capacity(by_position.len() + obs.edges.len() * EDGE_WORDS);
        numbers.extend(by_position.iter().map(|&i| i as u32));
        for (e, &(from, to, _)) in obs.edges.iter().zip(endpoints) {
            strategies.push_str(&e.ship_strategy);
            numbers.extend([index(from), index(to), strategies.len() as u32]);
        }
        ObservedGraph {
            numbers: Some(numbers.into_boxed_slice()),
            strategies: strategies.into_boxed_str(),
        }
    }
}

/// The topology of an observation, with each observed vertex's index in it (by position in the
/// observation) and its edges by observation position.
fn build(obs: &JobObservation) -> Result<(Topology, Vec<usize>, Edges), CycleError> {
    if obs.vertices.is_empty() {
        return Err(CycleError::NotReady(
            "No nodes found in the plan, job is not ready yet".into(),
        ));
    }
    let position = positions(obs)?;
    let edges = Edges::of(obs, &position)?;
    let order = topological_order(&edges)?;
    let mut new_index = vec![0usize; order.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    let vertices = order
        .iter()
        .map(|&old| {
            let v = &obs.vertices[old];
            VertexInfo {
                id: Arc::from(v.id.as_str()),
                name: Arc::from(v.name.as_str()),
                parallelism: v.parallelism,
                max_parallelism: v.max_parallelism,
                source_partitions: v.source_partitions,
                finished: v.finished,
                inputs: edges
                    .inputs(old)
                    .iter()
                    .map(|&(u, s)| (new_index[u], s))
                    .collect(),
                input_strategies: edges.inputs(old).iter().map(|&(_, s)| s).collect(),
                outputs: edges.outputs(old).iter().map(|&o| new_index[o]).collect(),
            }
        })
        .collect::<Vec<_>>();
    let index = Arc::new(VertexIds::new(
        vertices.iter().map(|v| Arc::clone(&v.id)).collect(),
    ));
    Ok((Topology { vertices, index }, new_index, edges))
}

/// Vertex ids to indices. Ids are engine-assigned (Flink: 32 hex digits), not adversarial, so a
/// multiply-rotate hash does instead of SipHash, which was most of building a topology.
type IdMap<'a> = HashMap<&'a str, usize, BuildHasherDefault<IdHasher>>;

/// A word-at-a-time multiply-rotate hasher (the Fx hash) for vertex ids.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }
    fn write_u8(&mut self, b: u8) {
        self.write(&[b]);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Each vertex's position in the observation; every vertex listed once, with positive
/// parallelism and max parallelism.
fn positions(obs: &JobObservation) -> Result<IdMap<'_>, CycleError> {
    let mut position = IdMap::with_capacity_and_hasher(obs.vertices.len(), Default::default());
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

/// Inputs (with their ship strategies) and outputs per vertex, by position in the observation,
/// each kept in edge order; one flat list per direction instead of a list per vertex.
struct Edges {
    /// Each edge's endpoints and strategy, in edge order.
    resolved: Vec<(usize, usize, ShipStrategy)>,
    input_start: Vec<usize>,
    inputs: Vec<(usize, ShipStrategy)>,
    output_start: Vec<usize>,
    outputs: Vec<usize>,
}

impl Edges {
    fn of(obs: &JobObservation, position: &IdMap<'_>) -> Result<Edges, CycleError> {
        let n = obs.vertices.len();
        let mut resolved = Vec::with_capacity(obs.edges.len());
        for e in &obs.edges {
            let (Some(&from), Some(&to)) =
                (position.get(e.from.as_str()), position.get(e.to.as_str()))
            else {
                return Err(CycleError::InvalidObservation(format!(
                    "edge {} -> {} names an unknown vertex",
                    e.from, e.to
                )));
            };
            resolved.push((from, to, e.strategy()));
        }
        // Counting sort by endpoint keeps the edge order within each vertex's list.
        let mut input_start = vec![0usize; n + 1];
        let mut output_start = vec![0usize; n + 1];
        for &(from, to, _) in &resolved {
            input_start[to + 1] += 1;
            output_start[from + 1] += 1;
        }
        for i in 0..n {
            input_start[i + 1] += input_start[i];
            output_start[i + 1] += output_start[i];
        }
        let mut inputs = vec![(0usize, ShipStrategy::Forward); resolved.len()];
        let mut outputs = vec![0usize; resolved.len()];
        let mut next_in = input_start.clone();
        let mut next_out = output_start.clone();
        for &(from, to, strategy) in &resolved {
            inputs[next_in[to]] = (from, strategy);
            next_in[to] += 1;
            outputs[next_out[from]] = to;
            next_out[from] += 1;
        }
        Ok(Edges {
            resolved,
            input_start,
            inputs,
            output_start,
            outputs,
        })
    }

    fn len(&self) -> usize {
        self.input_start.len() - 1
    }

    fn inputs(&self, v: usize) -> &[(usize, ShipStrategy)] {
        &self.inputs[self.input_start[v]..self.input_start[v + 1]]
    }

    fn outputs(&self, v: usize) -> &[usize] {
        &self.outputs[self.output_start[v]..self.output_start[v + 1]]
    }
}

/// Kahn's algorithm by levels over the observation's positions; inside a level the positions
/// are sorted, which makes the order deterministic.
fn topological_order(edges: &Edges) -> Result<Vec<usize>, CycleError> {
    let n = edges.len();
    let mut indegree: Vec<usize> = (0..n).map(|v| edges.inputs(v).len()).collect();
    let mut order: Vec<usize> = Vec::with_capacity(n);
    order.extend((0..n).filter(|&i| indegree[i] == 0));
    // The levels are consecutive runs of `order`: each is built from the one before it.
    let mut level_start = 0;
    while level_start < order.len() {
        let level_end = order.len();
        for at in level_start..level_end {
            let v = order[at];
            for &o in edges.outputs(v) {
                indegree[o] -= 1;
                if indegree[o] == 0 {
                    order.push(o);
                }
            }
        }
        order[level_end..].sort_unstable();
        level_start = level_end;
    }
    if order.len() != n {
        return Err(CycleError::InvalidObservation(
            "the job graph has a cycle".into(),
        ));
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaling::testing::Job;

    /// a -> c <- b, c -> d.
    fn job() -> Job {
        Job::new()
            .vertex("d", 2, 128)
            .vertex("c", 3, 128)
            .vertex("b", 1, 128)
            .vertex("a", 1, 128)
            .edge("a", "c", "HASH")
            .edge("b", "c", "REBALANCE")
            .edge("c", "d", "FORWARD")
    }

    fn ids(t: &Topology) -> Vec<&str> {
        t.vertices.iter().map(|v| &*v.id).collect()
    }

    /// What a topology says about the graph, for comparing a kept one with a fresh one.
    fn shape(t: &Topology) -> String {
        t.vertices
            .iter()
            .map(|v| {
                format!(
                    "{} {} {} {} {} {} {:?} {:?}\n",
                    v.id,
                    v.name,
                    v.parallelism,
                    v.max_parallelism,
                    v.source_partitions,
                    v.finished,
                    v.inputs,
                    v.outputs
                )
            })
            .collect()
    }

    #[test]
    fn orders_by_levels_keeping_the_observed_order_inside_a_level() {
        let t = Topology::from_observation(&job().obs).unwrap();
        // Level 0: b and a in observation order (b listed before a); then c; then d.
        assert_eq!(ids(&t), vec!["b", "a", "c", "d"]);
        assert_eq!(
            t.vertices[2].inputs,
            vec![(1, ShipStrategy::Hash), (0, ShipStrategy::Rebalance)]
        );
        assert_eq!(t.vertices[2].outputs, vec![3]);
        assert_eq!(t.index.get("c"), Some(&2));
        assert_eq!(t.index.in_id_order(), &[1, 0, 2, 3]);
        assert!(!t.index.contains_key("e"));
    }

    #[test]
    fn an_unchanged_graph_keeps_its_topology() {
        let mut cache = GraphCache::default();
        let mut obs = job().obs;
        let first = {
            let (t, sdk) = cache.current(&obs).unwrap();
            sdk.get_or_init(|| Arc::new(t.to_sdk()));
            Arc::clone(&t.index)
        };
        // The metrics and the status move every cycle; the graph does not.
        obs.running_since_ms += 10_000;
        obs.metrics.clear();
        let (t, sdk) = cache.current(&obs).unwrap();
        assert!(Arc::ptr_eq(&first, &t.index), "rebuilt an unchanged graph");
        assert!(sdk.get().is_some(), "the SDK view was dropped");
    }

    /// A change to an observation, named.
    type Change = (&'static str, fn(&mut JobObservation));

    /// Changes of the graph an observation describes, each one alone.
    fn graph_changes() -> Vec<Change> {
        vec![
            ("parallelism", |o| o.vertices[1].parallelism = 4),
            ("max parallelism", |o| o.vertices[0].max_parallelism = 256),
            ("source partitions", |o| o.vertices[3].source_partitions = 8),
            ("finished", |o| o.vertices[0].finished = true),
            ("name", |o| o.vertices[2].name = "renamed".into()),
            ("longer name", |o| o.vertices[3].name.push('x')),
            ("empty name", |o| o.vertices[1].name.clear()),
            ("vertex order", |o| o.vertices.swap(2, 3)),
            ("id and name shifted", |o| {
                // "c" + "c" becomes "cc" + "": the same text, split elsewhere.
                o.vertices[1].id = "cc".into();
                o.vertices[1].name = String::new();
                o.edges[1].to = "cc".into();
                o.edges[0].to = "cc".into();
                o.edges[2].from = "cc".into();
            }),
            ("vertex id", |o| {
                o.vertices[0].id = "e".into();
                o.edges[2].to = "e".into();
            }),
            ("ship strategy", |o| {
                o.edges[0].ship_strategy = "REBALANCE".into()
            }),
            ("ship strategy spelling", |o| {
                o.edges[0].ship_strategy = "hash".into()
            }),
            ("strategy text moved", |o| {
                o.edges[0].ship_strategy = "HASHREBALANCE".into();
                o.edges[1].ship_strategy = String::new();
            }),
            ("edge order", |o| o.edges.swap(0, 1)),
            ("edge endpoint", |o| o.edges[1].from = "a".into()),
            ("edge end", |o| o.edges[2].to = "c".into()),
            ("edge reversed", |o| {
                o.edges[2].from = "d".into();
                o.edges[2].to = "c".into();
            }),
            ("added edge", |o| {
                o.edges.push(crate::engine::ObservedEdge {
                    from: "a".into(),
                    to: "d".into(),
                    ship_strategy: "FORWARD".into(),
                })
            }),
            ("removed edge", |o| {
                o.edges.pop();
            }),
            ("removed vertex", |o| {
                o.vertices.remove(0);
                o.edges.pop();
            }),
            ("added vertex", |o| {
                let mut e = o.vertices[0].clone();
                e.id = "e".into();
                o.vertices.push(e);
            }),
        ]
    }

    #[test]
    fn a_changed_graph_is_rebuilt() {
        let changes = graph_changes();
        for (what, change) in changes {
            let mut cache = GraphCache::default();
            let before = job().obs;
            let kept = Arc::clone(&cache.current(&before).unwrap().0.index);
            let mut after = before.clone();
            change(&mut after);
            let Ok(fresh) = Topology::from_observation(&after) else {
                // Not a graph (a cycle, say): an error, never the kept topology.
                assert!(
                    cache.current(&after).is_err(),
                    "{what}: took an invalid graph"
                );
                continue;
            };
            let (t, sdk) = cache.current(&after).unwrap();
            assert!(
                !Arc::ptr_eq(&kept, &t.index),
                "{what}: kept a stale topology"
            );
            assert!(sdk.get().is_none(), "{what}: kept a stale SDK view");
            assert_eq!(shape(t), shape(&fresh), "{what}");
            // And back: the first graph is rebuilt again, not mixed up with the second.
            let (t, _) = cache.current(&before).unwrap();
            assert_eq!(
                shape(t),
                shape(&Topology::from_observation(&before).unwrap()),
                "{what}"
            );
        }
    }

    /// The comparison the kept graph made before it was kept in two buffers: through the
    /// topology's vertices (each observed vertex by its index) and the observed edges.
    fn describes_by_topology(before: &JobObservation, obs: &JobObservation) -> bool {
        let t = Topology::from_observation(before).unwrap();
        let by_position: Vec<usize> = before
            .vertices
            .iter()
            .map(|v| *t.index.get(&v.id).unwrap())
            .collect();
        let at = |id: &str| *t.index.get(id).unwrap();
        let edges: Vec<(usize, usize, String)> = before
            .edges
            .iter()
            .map(|e| (at(&e.from), at(&e.to), e.ship_strategy.clone()))
            .collect();
        let vertices = &t.vertices;
        if obs.vertices.len() != by_position.len() || obs.edges.len() != edges.len() {
            return false;
        }
        let same_vertices = obs.vertices.iter().zip(&by_position).all(|(o, &i)| {
            let v = &vertices[i];
            *v.id == *o.id
                && *v.name == *o.name
                && v.parallelism == o.parallelism
                && v.max_parallelism == o.max_parallelism
                && v.source_partitions == o.source_partitions
                && v.finished == o.finished
        });
        same_vertices
            && obs
                .edges
                .iter()
                .zip(&edges)
                .all(|(e, (from, to, strategy))| {
                    let is = |at: usize, id: &str| vertices.get(at).is_some_and(|v| *v.id == *id);
                    is(*from, &e.from) && is(*to, &e.to) && *strategy == e.ship_strategy
                })
    }

    #[test]
    fn the_kept_graph_compares_as_the_topology_did() {
        let mut changes: Vec<Change> = vec![("none", |_| {})];
        changes.extend(graph_changes());
        let variants: Vec<(&str, JobObservation)> = changes
            .iter()
            .map(|(what, change)| {
                let mut obs = job().obs;
                change(&mut obs);
                (*what, obs)
            })
            .collect();
        for (kept_what, kept) in &variants {
            let Ok(cached) = CachedGraph::of(kept) else {
                continue;
            };
            for (what, obs) in &variants {
                assert_eq!(
                    cached.describes(obs),
                    describes_by_topology(kept, obs),
                    "kept {kept_what}, observed {what}"
                );
                assert_eq!(
                    cached.describes(obs),
                    kept == obs,
                    "kept {kept_what}, observed {what}"
                );
            }
        }
    }

    #[test]
    fn an_invalid_graph_is_an_error_and_keeps_nothing() {
        let mut cache = GraphCache::default();
        let good = job().obs;
        cache.current(&good).unwrap();
        let mut cyclic = good.clone();
        cyclic.edges.push(crate::engine::ObservedEdge {
            from: "d".into(),
            to: "a".into(),
            ship_strategy: "HASH".into(),
        });
        assert!(matches!(
            cache.current(&cyclic),
            Err(CycleError::InvalidObservation(_))
        ));
        assert!(cache.is_empty());
        let mut empty = good.clone();
        empty.vertices.clear();
        empty.edges.clear();
        assert!(matches!(
            cache.current(&empty),
            Err(CycleError::NotReady(_))
        ));
        assert_eq!(
            ids(cache.current(&good).unwrap().0),
            vec!["b", "a", "c", "d"]
        );
    }

    #[test]
    fn caches_never_make_states_differ() {
        let mut kept = GraphCache::default();
        kept.current(&job().obs).unwrap();
        assert_eq!(kept, GraphCache::default());
    }
}
