//! Building a simulation from a validated job, and laying out what a parallelism determines
//! (subtasks, partition assignment, routes), at the start and again after every restart.

use flowscale_sdk::ShipStrategy;

use super::state::{
    EdgeState, InputFrom, Iteration, Partition, Scratch, Simulation, Subtask, VertexState,
};
use crate::sim::queue::Queue;
use crate::sim::rng::SplitMix64;
use crate::sim::routing::{Route, route};
use crate::sim::spec::SimulatedJobSpec;
use crate::sim::summary::SummaryBuilder;
use crate::sim::timeline::{Timeline, TimelineRow};

impl Simulation {
    /// A simulation of `spec` at time 0, recording a timeline.
    pub(crate) fn new(spec: SimulatedJobSpec) -> Simulation {
        let rng = SplitMix64::derive(spec.seed, 0);
        let n = spec.vertices.len();
        let mut vertices = vertex_states(&spec);
        let edges = edge_states(&spec, &mut vertices);
        let iterations = iterations(&spec, &mut vertices);
        let mut sim = Simulation {
            timeline: Some(Timeline::new(&spec)),
            summary: SummaryBuilder::new(n, spec.tick_ms, None),
            row: TimelineRow {
                t_ms: 0,
                restarting: false,
                finished: false,
                source_rate: 0.0,
                read_per_s: 0.0,
                pending: 0,
                rate_limits: Vec::new(),
                vertices: Vec::with_capacity(n),
                events: Vec::new(),
            },
            spec,
            now_ms: 0,
            tick: 0,
            running_since_ms: 0,
            pending: None,
            vertices,
            edges,
            iterations,
            noise: rng,
            events: Vec::new(),
            restarts: 0,
            restarting_ms: 0,
            scratch: Scratch::default(),
            timeline_limit: None,
            seat: None,
        };
        for v in 0..n {
            let p = sim.vertices[v].parallelism;
            sim.vertices[v].subtasks = (0..p).map(|_| sim.new_subtask(v)).collect();
            sim.assign_partitions(v);
        }
        sim.reroute();
        sim
    }

    /// A subtask of vertex `v` with one empty queue per input.
    pub(super) fn new_subtask(&self, v: usize) -> Subtask {
        let inputs = self.vertices[v].inputs.len();
        Subtask {
            queues: vec![Queue::default(); inputs],
            markers: vec![0; inputs],
            ended: vec![false; inputs],
            ..Subtask::default()
        }
    }

    /// Partition `i` is read by subtask `i mod p`.
    pub(super) fn assign_partitions(&mut self, v: usize) {
        let vertex = &mut self.vertices[v];
        let p = vertex.subtasks.len().max(1);
        for s in &mut vertex.subtasks {
            s.partitions.clear();
        }
        for i in 0..vertex.partitions.len() {
            vertex.subtasks[i % p].partitions.push(i);
        }
    }

    /// Draws new shares for every drifting edge whose drift period changed, and reroutes it.
    /// Period 0 keeps the shares drawn at build time.
    pub(super) fn drift_keys(&mut self) {
        for (ei, e) in self.edges.iter_mut().enumerate() {
            let Some(drift_ms) = self.spec.edges[ei].drift_ms else {
                continue;
            };
            let period = self.now_ms / drift_ms.max(1);
            if period == e.period {
                continue;
            }
            e.period = period;
            let label = (2000 + ei as u64) ^ (period as u64).wrapping_mul(0x1_0000_0001);
            e.shares = self.spec.edges[ei].keys.shares(
                e.shares.len(),
                &mut SplitMix64::derive(self.spec.seed, label),
            );
            e.route = route(
                &e.ship,
                &e.shares,
                self.vertices[e.from].parallelism,
                self.vertices[e.to].parallelism,
            );
        }
    }

    /// Routes every edge by the current parallelism at both ends.
    pub(super) fn reroute(&mut self) {
        for e in &mut self.edges {
            e.route = route(
                &e.ship,
                &e.shares,
                self.vertices[e.from].parallelism,
                self.vertices[e.to].parallelism,
            );
        }
    }
}

/// Every vertex at its starting parallelism, without subtasks yet; a source's partitions get
/// their shares of the arrivals (seeded per vertex).
fn vertex_states(spec: &SimulatedJobSpec) -> Vec<VertexState> {
    spec.vertices
        .iter()
        .enumerate()
        .map(|(vi, v)| {
            let shares = match &v.workload {
                Some(w) => w.partition_skew.shares(
                    v.partitions as usize,
                    &mut SplitMix64::derive(spec.seed, 1000 + vi as u64),
                ),
                None => Vec::new(),
            };
            VertexState {
                parallelism: v.parallelism,
                inputs: Vec::new(),
                outputs: Vec::new(),
                feedback_out: Vec::new(),
                feedback_carry: 0.0,
                subtasks: Vec::new(),
                finished: false,
                head_of: None,
                head_initiated: false,
                markers_emitted: 0,
                partitions: shares
                    .into_iter()
                    .map(|share| Partition { pending: 0, share })
                    .collect(),
                arrival_carry: 0.0,
                generated: 0,
                arrival_rate: 0.0,
                total_in: 0,
                total_out: 0,
                state_bytes: v.state_bytes,
                rate_limit: None,
            }
        })
        .collect()
}

/// Every edge, with its key-group (HASH) or bucket (CUSTOM) shares seeded per edge, registered
/// as an output of its upstream vertex and an input of its downstream one. Routes are set once
/// subtasks exist.
fn edge_states(spec: &SimulatedJobSpec, vertices: &mut [VertexState]) -> Vec<EdgeState> {
    let mut edges = Vec::new();
    for (ei, e) in spec.edges.iter().enumerate() {
        let slots = match e.ship {
            ShipStrategy::Hash => spec.vertices[e.to].max_parallelism as usize,
            ShipStrategy::Custom { buckets } => buckets as usize,
            _ => 0,
        };
        let shares = e
            .keys
            .shares(slots, &mut SplitMix64::derive(spec.seed, 2000 + ei as u64));
        let slot = vertices[e.to].inputs.len();
        vertices[e.to].inputs.push(InputFrom::Edge(ei));
        vertices[e.from].outputs.push(ei);
        edges.push(EdgeState {
            from: e.from,
            to: e.to,
            ship: e.ship,
            shares,
            period: 0,
            route: Route::Broadcast,
            slot,
        });
    }
    edges
}

/// One iteration source per head, with one queue per tail feeding it; the head gets a loop
/// input after its regular ones, and each tail a feedback output.
fn iterations(spec: &SimulatedJobSpec, vertices: &mut [VertexState]) -> Vec<Iteration> {
    let mut iterations: Vec<Iteration> = Vec::new();
    for f in &spec.feedback {
        let it = match iterations.iter().position(|it| it.head == f.to) {
            Some(it) => it,
            None => {
                let slot = vertices[f.to].inputs.len();
                vertices[f.to]
                    .inputs
                    .push(InputFrom::Loop(iterations.len()));
                vertices[f.to].head_of = Some(iterations.len());
                iterations.push(Iteration {
                    head: f.to,
                    queues: Vec::new(),
                    markers: Vec::new(),
                    ended: Vec::new(),
                    passed: 0,
                    records_since_marker: 0,
                    slot,
                    terminated: false,
                    dropped: 0,
                });
                iterations.len() - 1
            }
        };
        let tail_slot = iterations[it].queues.len();
        iterations[it].queues.push(Queue::default());
        iterations[it].markers.push(0);
        iterations[it].ended.push(false);
        vertices[f.from]
            .feedback_out
            .push((it, tail_slot, f.fraction));
    }
    iterations
}
