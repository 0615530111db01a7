//! The job graph of one observation, in topological order, with inputs and outputs per vertex.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use flowscale_sdk::ShipStrategy;

use crate::engine::JobObservation;

use super::error::CycleError;

/// A vertex with its edges, as the pipeline walks it.
#[derive(Debug, Clone)]
pub(crate) struct VertexInfo<'a> {
    pub(crate) id: &'a str,
    pub(crate) name: &'a str,
    pub(crate) parallelism: u32,
    pub(crate) max_parallelism: u32,
    pub(crate) source_partitions: u32,
    pub(crate) finished: bool,
    /// Upstream vertex indices (into [`Topology::vertices`]) with the edge's ship strategy.
    pub(crate) inputs: Vec<(usize, ShipStrategy)>,
    /// Downstream vertex indices.
    pub(crate) outputs: Vec<usize>,
}

impl VertexInfo<'_> {
    pub(crate) fn is_source(&self) -> bool {
        self.inputs.is_empty()
    }
}

/// Vertices in topological order (Kahn's algorithm by levels; inside a level the observation's
/// order is kept, which makes the order deterministic).
#[derive(Debug, Clone)]
pub(crate) struct Topology<'a> {
    pub(crate) vertices: Vec<VertexInfo<'a>>,
    pub(crate) index: IdMap<'a>,
}

impl<'a> Topology<'a> {
    pub(crate) fn from_observation(obs: &'a JobObservation) -> Result<Topology<'a>, CycleError> {
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
                    id: v.id.as_str(),
                    name: v.name.as_str(),
                    parallelism: v.parallelism,
                    max_parallelism: v.max_parallelism,
                    source_partitions: v.source_partitions,
                    finished: v.finished,
                    inputs: edges
                        .inputs(old)
                        .iter()
                        .map(|&(u, s)| (new_index[u], s))
                        .collect(),
                    outputs: edges.outputs(old).iter().map(|&o| new_index[o]).collect(),
                }
            })
            .collect::<Vec<_>>();
        let mut index = IdMap::with_capacity_and_hasher(vertices.len(), Default::default());
        index.extend(vertices.iter().enumerate().map(|(i, v)| (v.id, i)));
        Ok(Topology { vertices, index })
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

/// Vertex ids to indices. Ids are engine-assigned (Flink: 32 hex digits), not adversarial, so a
/// multiply-rotate hash does instead of SipHash, which was most of building a topology.
pub(crate) type IdMap<'a> = HashMap<&'a str, usize, BuildHasherDefault<IdHasher>>;

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
