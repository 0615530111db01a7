//! The simulated job: state and the physics of one tick.
//!
//! Per tick, in order: a pending restart completes if its downtime is over; records arrive in the
//! source partitions (also while restarting: the source system keeps filling); then, if the job
//! is running, iteration sources forward fed-back records into their heads and every vertex, in
//! topological order, takes what its buffers hold up to its capacity and what its downstream
//! buffers can accept, and emits the result. Records move as integer counts (so conservation is
//! exact and "a record in flight" is well defined); fractional effects (selectivity, capacity,
//! feedback fraction) carry their remainders to the next tick.

use std::collections::BTreeMap;

use flowscale_sdk::ShipStrategy;

use super::queue::{Queue, Token};
use super::rng::SplitMix64;
use super::routing::{Route, apportion, route};
use super::spec::{SimulatedJobSpec, VertexKind};
use super::timeline::{Timeline, TimelineRow, VertexRow};
use crate::engine::{EngineError, JobStatus};

/// Where a vertex input comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InputFrom {
    /// A regular edge (index into the job's edges).
    Edge(usize),
    /// The loop input of an iteration head (index into the iterations).
    Loop(usize),
}

/// One source partition in the source system.
#[derive(Debug, Clone)]
pub(crate) struct Partition {
    pub(crate) pending: u64,
    pub(crate) share: f64,
}

/// One subtask.
#[derive(Debug, Clone, Default)]
pub(crate) struct Subtask {
    /// One queue per vertex input (same order as `VertexState::inputs`).
    pub(crate) queues: Vec<Queue>,
    /// Markers passed per input.
    pub(crate) markers: Vec<u64>,
    /// End-of-input reached per input.
    pub(crate) ended: Vec<bool>,
    /// Partitions this source subtask reads.
    pub(crate) partitions: Vec<usize>,
    capacity_carry: f64,
    limit_carry: f64,
    out_carry: f64,
    /// Last tick, in ms per second of that tick.
    pub(crate) busy_ms: f64,
    pub(crate) backpressured_ms: f64,
    pub(crate) idle_ms: f64,
    /// Last tick's records.
    pub(crate) records_in: u64,
    pub(crate) records_out: u64,
    /// Since the last (re)start.
    pub(crate) cum_in: u64,
    pub(crate) cum_out: u64,
    pub(crate) cum_busy_ms: f64,
}

/// One vertex at run time.
#[derive(Debug, Clone)]
pub(crate) struct VertexState {
    pub(crate) parallelism: u32,
    pub(crate) inputs: Vec<InputFrom>,
    pub(crate) outputs: Vec<usize>,
    /// Feedback edges leaving this vertex: (iteration index, tail slot, fraction).
    pub(crate) feedback_out: Vec<(usize, usize, f64)>,
    feedback_carry: f64,
    pub(crate) subtasks: Vec<Subtask>,
    pub(crate) finished: bool,
    /// Iteration whose head this is.
    pub(crate) head_of: Option<usize>,
    head_initiated: bool,
    markers_emitted: u64,
    pub(crate) partitions: Vec<Partition>,
    arrival_carry: f64,
    pub(crate) generated: u64,
    /// Arrival rate of the last tick (records/s), sources only.
    pub(crate) arrival_rate: f64,
    /// Over the whole run (never reset).
    pub(crate) total_in: u64,
    pub(crate) total_out: u64,
    pub(crate) state_bytes: f64,
    pub(crate) rate_limit: Option<f64>,
}

/// One edge at run time.
#[derive(Debug, Clone)]
pub(crate) struct EdgeState {
    pub(crate) from: usize,
    pub(crate) to: usize,
    pub(crate) ship: ShipStrategy,
    shares: Vec<f64>,
    pub(crate) route: Route,
    /// Index of this edge among the downstream vertex's inputs.
    pub(crate) slot: usize,
}

/// An iteration: the iteration source of one head, fed by its tails.
#[derive(Debug, Clone)]
pub(crate) struct Iteration {
    pub(crate) head: usize,
    /// One FIFO per tail (feedback edge).
    pub(crate) queues: Vec<Queue>,
    markers: Vec<u64>,
    ended: Vec<bool>,
    passed: u64,
    records_since_marker: u64,
    /// The head's loop input slot.
    pub(crate) slot: usize,
    pub(crate) terminated: bool,
    /// Records that reached a terminated iteration source (must stay 0: termination is never
    /// early).
    pub(crate) dropped: u64,
}

/// A rescale waiting for its restart downtime to pass.
#[derive(Debug, Clone)]
struct PendingRestart {
    until_ms: i64,
    parallelism: Vec<u32>,
}

/// A simulated job. Build it with [`Simulation::from_file`] or [`Simulation::from_toml_str`];
/// drive it with [`Simulation::step`] / [`Simulation::advance_to`], or through the
/// [`Collector`](crate::engine::Collector) and [`Realizer`](crate::engine::Realizer) seams like
/// any engine.
#[derive(Debug, Clone)]
pub struct Simulation {
    pub(crate) spec: SimulatedJobSpec,
    pub(crate) now_ms: i64,
    pub(crate) tick: u64,
    pub(crate) running_since_ms: i64,
    pending: Option<PendingRestart>,
    pub(crate) vertices: Vec<VertexState>,
    pub(crate) edges: Vec<EdgeState>,
    pub(crate) iterations: Vec<Iteration>,
    noise: SplitMix64,
    pub(crate) timeline: Option<Timeline>,
    events: Vec<String>,
    pub(crate) restarts: u32,
    pub(crate) restarting_ms: i64,
    scratch: Scratch,
    timeline_limit: Option<usize>,
}

/// A record count as a float. Counts stay far below 2^63, and the signed conversion is one
/// instruction where the unsigned one is a branchy sequence; this runs per subtask per tick.
fn to_f64(n: u64) -> f64 {
    n as i64 as f64
}

/// The floor of a non-negative finite value as a count (0 for negative or NaN input), by the
/// same single-instruction signed conversion.
fn floor_u64(x: f64) -> u64 {
    if x >= 0.0 { x as i64 as u64 } else { 0 }
}

/// Buffers reused by every vertex in every tick, so a tick allocates nothing.
#[derive(Debug, Clone, Default)]
struct Scratch {
    per: Vec<f64>,
    demand: Vec<u64>,
    grant: Vec<u64>,
    out: Vec<u64>,
    regular: Vec<u64>,
    parts: Vec<u64>,
    take: Vec<u64>,
    weights: Vec<f64>,
}

impl Simulation {
    /// A simulation of `spec` at time 0, recording a timeline.
    pub fn new(spec: SimulatedJobSpec) -> Simulation {
        let rng = SplitMix64::derive(spec.seed, 0);
        let n = spec.vertices.len();
        let mut vertices: Vec<VertexState> = spec
            .vertices
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
            .collect();
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
                route: Route::Broadcast,
                slot,
            });
        }
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
        let mut sim = Simulation {
            timeline: Some(Timeline::new(&spec)),
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
        };
        for v in 0..n {
            let p = sim.vertices[v].parallelism;
            sim.vertices[v].subtasks = (0..p).map(|_| sim.new_subtask(v)).collect();
            sim.assign_partitions(v);
        }
        sim.reroute();
        sim
    }

    /// The job description.
    pub fn spec(&self) -> &SimulatedJobSpec {
        &self.spec
    }

    /// Simulated time (ms since the start).
    pub fn now_ms(&self) -> i64 {
        self.now_ms
    }

    /// Ticks simulated so far.
    pub fn ticks(&self) -> u64 {
        self.tick
    }

    /// The job's status.
    pub fn status(&self) -> JobStatus {
        if self.is_finished() {
            JobStatus::Finished
        } else if self.pending.is_some() {
            JobStatus::Restarting
        } else {
            JobStatus::Running
        }
    }

    /// True once every vertex (and every iteration source) has finished.
    pub fn is_finished(&self) -> bool {
        self.vertices.iter().all(|v| v.finished) && self.iterations.iter().all(|i| i.terminated)
    }

    /// Current parallelism per vertex id.
    pub fn parallelism(&self) -> BTreeMap<String, u32> {
        self.spec
            .vertices
            .iter()
            .zip(&self.vertices)
            .map(|(s, v)| (s.id.clone(), v.parallelism))
            .collect()
    }

    /// Stops (or resumes) recording the timeline; long benchmark runs do not need it.
    pub fn record_timeline(&mut self, on: bool) {
        match (on, self.timeline.is_some()) {
            (true, false) => self.timeline = Some(Timeline::new(&self.spec)),
            (false, true) => self.timeline = None,
            _ => {}
        }
    }

    /// Adds an event (e.g. a decision of the autoscaler driving this simulation) to the
    /// timeline row of the next tick.
    pub fn record_event(&mut self, event: impl Into<String>) {
        self.events.push(event.into());
    }

    /// Keeps only about the last `max_rows` ticks of the timeline (`None`: everything), so a
    /// simulation driven indefinitely (the `run` command) does not grow without bound. Between
    /// `max_rows` and twice that many rows are kept; the oldest go in batches.
    pub fn limit_timeline(&mut self, max_rows: Option<usize>) {
        self.timeline_limit = max_rows.map(|m| m.max(1));
    }

    /// The recorded timeline (empty when recording is off).
    pub fn timeline(&self) -> Timeline {
        self.timeline
            .clone()
            .unwrap_or_else(|| Timeline::new(&self.spec))
    }

    /// Records in flight inside the job: in buffers and feedback queues (not pending in the
    /// source system).
    pub fn records_in_flight(&self) -> u64 {
        let queued: u64 = self
            .vertices
            .iter()
            .flat_map(|v| &v.subtasks)
            .flat_map(|s| &s.queues)
            .map(Queue::records)
            .sum();
        let fed_back: u64 = self
            .iterations
            .iter()
            .flat_map(|i| &i.queues)
            .map(Queue::records)
            .sum();
        queued + fed_back
    }

    /// Records waiting in the source system, over all sources.
    pub fn pending_records(&self) -> u64 {
        self.vertices
            .iter()
            .flat_map(|v| &v.partitions)
            .map(|p| p.pending)
            .sum()
    }

    /// Records that reached an iteration source after it had terminated (0 unless termination
    /// detection fired early).
    pub fn dropped_records(&self) -> u64 {
        self.iterations.iter().map(|i| i.dropped).sum()
    }

    /// Records processed by vertex `id` over the whole run, and records it emitted.
    pub fn vertex_totals(&self, id: &str) -> Option<(u64, u64)> {
        let v = self.spec.vertex_index(id)?;
        Some((self.vertices[v].total_in, self.vertices[v].total_out))
    }

    /// Records generated so far by source `id` (arrived in its partitions).
    pub fn generated(&self, id: &str) -> Option<u64> {
        Some(self.vertices[self.spec.vertex_index(id)?].generated)
    }

    /// Advances by ticks until `t_ms` is reached (the tick starting before `t_ms` is the last).
    pub fn advance_to(&mut self, t_ms: i64) {
        while self.now_ms < t_ms {
            self.step();
        }
    }

    /// Runs until the job finishes or `limit_ms` passes; true if it finished.
    pub fn run_until_finished(&mut self, limit_ms: i64) -> bool {
        while !self.is_finished() && self.now_ms < limit_ms {
            self.step();
        }
        self.is_finished()
    }

    /// Simulates one tick.
    pub fn step(&mut self) {
        let tick_s = self.spec.tick_ms as f64 / 1000.0;
        if let Some(p) = &self.pending {
            if self.now_ms >= p.until_ms {
                let p = self
                    .pending
                    .take()
                    .map(|p| p.parallelism)
                    .unwrap_or_default();
                self.apply_parallelism(&p);
                self.running_since_ms = self.now_ms;
                self.events.push("restarted".to_string());
            }
        }
        self.arrive(tick_s);
        if self.pending.is_some() {
            self.restarting_ms += self.spec.tick_ms;
            for v in &mut self.vertices {
                for s in &mut v.subtasks {
                    (s.busy_ms, s.backpressured_ms, s.idle_ms) = (0.0, 0.0, 0.0);
                    (s.records_in, s.records_out) = (0, 0);
                }
            }
        } else if !self.is_finished() {
            for it in 0..self.iterations.len() {
                self.forward_feedback(it);
            }
            for v in 0..self.vertices.len() {
                self.process_vertex(v, tick_s);
            }
        }
        self.record_row();
        self.now_ms += self.spec.tick_ms;
        self.tick += 1;
    }

    /// Requests a rescale: the job restarts and the new parallelism applies once the restart
    /// downtime has passed. Vertices not in `parallelism` keep theirs.
    pub(crate) fn request_rescale(
        &mut self,
        parallelism: &BTreeMap<String, u32>,
    ) -> Result<(), EngineError> {
        let mut target: Vec<u32> = match &self.pending {
            Some(p) => p.parallelism.clone(),
            None => self.vertices.iter().map(|v| v.parallelism).collect(),
        };
        for (id, &p) in parallelism {
            let v = self
                .spec
                .vertex_index(id)
                .ok_or_else(|| EngineError::InvalidRequest(format!("unknown vertex `{id}`")))?;
            let max = self.spec.vertices[v].max_parallelism;
            if p == 0 || p > max {
                return Err(EngineError::InvalidRequest(format!(
                    "parallelism {p} for `{id}` is outside 1..={max}"
                )));
            }
            target[v] = p;
        }
        let current: Vec<u32> = self.vertices.iter().map(|v| v.parallelism).collect();
        if self.pending.is_none() && target == current {
            return Ok(());
        }
        let state: f64 = self.vertices.iter().map(|v| v.state_bytes).sum();
        let downtime = self.spec.restart.downtime_ms
            + (self.spec.restart.per_gib_ms as f64 * state / f64::from(1u32 << 30)) as i64;
        let changes: Vec<String> = self
            .spec
            .vertices
            .iter()
            .zip(current.iter().zip(&target))
            .filter(|(_, (c, t))| c != t)
            .map(|(v, (c, t))| format!("{}:{c}->{t}", v.id))
            .collect();
        self.events.push(format!("rescale {}", changes.join(",")));
        self.restarts += 1;
        self.pending = Some(PendingRestart {
            until_ms: self.now_ms + downtime,
            parallelism: target,
        });
        Ok(())
    }

    /// Sets or lifts the intake limit of a source.
    pub(crate) fn limit_rate(&mut self, id: &str, limit: Option<f64>) -> Result<(), EngineError> {
        let v = self
            .spec
            .vertex_index(id)
            .ok_or_else(|| EngineError::InvalidRequest(format!("unknown vertex `{id}`")))?;
        if self.spec.vertices[v].kind != VertexKind::Source {
            return Err(EngineError::InvalidRequest(format!(
                "`{id}` is not a source"
            )));
        }
        if let Some(l) = limit {
            if !l.is_finite() || l < 0.0 {
                return Err(EngineError::InvalidRequest(format!(
                    "rate limit {l} for `{id}` is not a rate"
                )));
            }
        }
        if self.vertices[v].rate_limit != limit {
            self.events.push(match limit {
                Some(l) => format!("rate-limit {id}={l:.0}"),
                None => format!("rate-limit {id}=none"),
            });
        }
        self.vertices[v].rate_limit = limit;
        Ok(())
    }

    fn new_subtask(&self, v: usize) -> Subtask {
        let inputs = self.vertices[v].inputs.len();
        Subtask {
            queues: vec![Queue::default(); inputs],
            markers: vec![0; inputs],
            ended: vec![false; inputs],
            ..Subtask::default()
        }
    }

    /// Partition `i` is read by subtask `i mod p`.
    fn assign_partitions(&mut self, v: usize) {
        let vertex = &mut self.vertices[v];
        let p = vertex.subtasks.len().max(1);
        for s in &mut vertex.subtasks {
            s.partitions.clear();
        }
        for i in 0..vertex.partitions.len() {
            vertex.subtasks[i % p].partitions.push(i);
        }
    }

    fn reroute(&mut self) {
        for e in &mut self.edges {
            e.route = route(
                &e.ship,
                &e.shares,
                self.vertices[e.from].parallelism,
                self.vertices[e.to].parallelism,
            );
        }
    }

    /// Applies a new parallelism after a restart: rebuilds subtasks, spreads queued records by the
    /// new routes, reassigns partitions, and starts a fresh termination round.
    fn apply_parallelism(&mut self, target: &[u32]) {
        for (v, &p) in target.iter().enumerate() {
            self.vertices[v].parallelism = p;
        }
        self.reroute();
        for v in 0..self.vertices.len() {
            let inputs = self.vertices[v].inputs.clone();
            let queued: Vec<u64> = (0..inputs.len())
                .map(|slot| {
                    self.vertices[v]
                        .subtasks
                        .iter()
                        .map(|s| s.queues[slot].records())
                        .sum()
                })
                .collect();
            let p = self.vertices[v].parallelism as usize;
            let mut subtasks: Vec<Subtask> = (0..p).map(|_| self.new_subtask(v)).collect();
            let mut parts = vec![0u64; p];
            for (slot, input) in inputs.iter().enumerate() {
                let (weights, upstream_done) = match input {
                    InputFrom::Edge(e) => (
                        self.downstream_weights(*e),
                        self.vertices[self.edges[*e].from].finished,
                    ),
                    InputFrom::Loop(it) => (vec![1.0; p], self.iterations[*it].terminated),
                };
                apportion(queued[slot], &weights, 0, &mut parts);
                for (s, n) in subtasks.iter_mut().zip(&parts) {
                    s.queues[slot].push_records(*n);
                    if upstream_done {
                        s.queues[slot].push_end();
                    }
                }
            }
            let vertex = &mut self.vertices[v];
            vertex.subtasks = subtasks;
            vertex.head_initiated = false;
            vertex.markers_emitted = 0;
            self.assign_partitions(v);
        }
        for it in &mut self.iterations {
            for q in &mut it.queues {
                q.clear_markers();
            }
            it.markers.iter_mut().for_each(|m| *m = 0);
            it.passed = 0;
            it.records_since_marker = 0;
        }
    }

    /// The share of an edge's records each downstream subtask receives.
    fn downstream_weights(&self, e: usize) -> Vec<f64> {
        let p = self.vertices[self.edges[e].to].parallelism as usize;
        match &self.edges[e].route {
            Route::Shared(w) => w.clone(),
            Route::Broadcast => vec![1.0; p],
            Route::Pointwise(lists) => {
                let mut w = vec![0.0; p];
                for (j, share) in lists.iter().flatten() {
                    w[*j] += share;
                }
                w
            }
        }
    }

    fn arrive(&mut self, tick_s: f64) {
        let t_s = self.now_ms as f64 / 1000.0;
        let offset = self.tick as usize;
        for (v, spec) in self.spec.vertices.iter().enumerate() {
            let Some(w) = &spec.workload else { continue };
            let mut rate = w.rate_at(t_s);
            if w.noise > 0.0 {
                rate *= 1.0 + w.noise * (2.0 * self.noise.next_f64() - 1.0);
            }
            let vertex = &mut self.vertices[v];
            let exact = rate.max(0.0) * tick_s + vertex.arrival_carry;
            let mut n = exact.floor() as u64;
            vertex.arrival_carry = exact - n as f64;
            if let Some(total) = w.total_records {
                n = n.min(total - vertex.generated);
            }
            vertex.generated += n;
            vertex.arrival_rate = n as f64 / tick_s;
            let shares: Vec<f64> = vertex.partitions.iter().map(|p| p.share).collect();
            let mut parts = vec![0u64; shares.len()];
            apportion(n, &shares, offset, &mut parts);
            for (p, k) in vertex.partitions.iter_mut().zip(parts) {
                p.pending += k;
            }
        }
    }

    /// Moves fed-back records, markers and ends from the tails into the head's loop input.
    fn forward_feedback(&mut self, it: usize) {
        let head = self.iterations[it].head;
        let slot = self.iterations[it].slot;
        let p = self.vertices[head].subtasks.len();
        let offset = self.tick as usize;
        let mut parts = vec![0u64; p];
        for tail in 0..self.iterations[it].queues.len() {
            let tokens = self.iterations[it].queues[tail].drain();
            for token in tokens {
                let iteration = &mut self.iterations[it];
                if iteration.terminated {
                    if let Token::Records(n) = token {
                        iteration.dropped += n;
                    }
                    continue;
                }
                match token {
                    Token::Records(n) => {
                        iteration.records_since_marker += n;
                        apportion(n, &vec![1.0; p], offset, &mut parts);
                        for (s, k) in self.vertices[head].subtasks.iter_mut().zip(&parts) {
                            s.queues[slot].push_records(*k);
                        }
                    }
                    Token::Marker => iteration.markers[tail] += 1,
                    Token::End => iteration.ended[tail] = true,
                }
                self.iteration_round(it);
            }
        }
    }

    /// Passes a marker once one has arrived from every tail that has not ended; terminates on
    /// two consecutive markers with no record in between (or when every tail has ended).
    fn iteration_round(&mut self, it: usize) {
        let head = self.iterations[it].head;
        let slot = self.iterations[it].slot;
        loop {
            let iteration = &mut self.iterations[it];
            if iteration.terminated {
                return;
            }
            let open: Vec<u64> = iteration
                .markers
                .iter()
                .zip(&iteration.ended)
                .filter(|(_, e)| !**e)
                .map(|(m, _)| *m)
                .collect();
            let all_ended = open.is_empty();
            let aligned = !all_ended && open.iter().all(|&m| m > iteration.passed);
            if all_ended || (aligned && iteration.passed > 0 && iteration.records_since_marker == 0)
            {
                iteration.terminated = true;
                for s in &mut self.vertices[head].subtasks {
                    s.queues[slot].push_end();
                }
                self.events.push(format!(
                    "iteration {} terminated",
                    self.spec.vertices[head].id
                ));
                return;
            }
            if !aligned {
                return;
            }
            iteration.passed += 1;
            iteration.records_since_marker = 0;
            for s in &mut self.vertices[head].subtasks {
                s.queues[slot].push_marker();
            }
        }
    }

    /// How many input records each subtask may take given the free space downstream: a pooled
    /// allowance shared by all subtasks (all-to-all edges, returned) and a per-subtask one
    /// (pointwise edges, written to `per`).
    fn output_allowance(&self, v: usize, per: &mut Vec<f64>) -> f64 {
        let vertex = &self.vertices[v];
        let p = vertex.subtasks.len();
        let selectivity = self.spec.vertices[v].selectivity;
        let mut pooled = f64::INFINITY;
        per.clear();
        per.resize(p, f64::INFINITY);
        if selectivity <= 0.0 {
            return pooled;
        }
        for &e in &vertex.outputs {
            let edge = &self.edges[e];
            let down = &self.vertices[edge.to];
            let buffer = self.spec.vertices[edge.to].buffer;
            // One record of headroom: apportioning can round a share up by one.
            let free = |j: usize| {
                to_f64(buffer.saturating_sub(down.subtasks[j].queues[edge.slot].records() + 1))
            };
            match &edge.route {
                Route::Shared(w) => {
                    for (j, wj) in w.iter().enumerate() {
                        if *wj > 0.0 {
                            pooled = pooled.min(free(j) / wj);
                        }
                    }
                }
                Route::Broadcast => {
                    for j in 0..down.subtasks.len() {
                        pooled = pooled.min(free(j));
                    }
                }
                Route::Pointwise(lists) => {
                    let feeders =
                        |j: usize| lists.iter().flatten().filter(|(k, _)| *k == j).count();
                    let shared = lists.len() > down.subtasks.len();
                    for (i, list) in lists.iter().enumerate().take(p) {
                        for (j, wj) in list {
                            if *wj > 0.0 {
                                let n = if shared { feeders(*j) as f64 } else { 1.0 };
                                per[i] = per[i].min(free(*j) / n / wj);
                            }
                        }
                    }
                }
            }
        }
        per.iter_mut().for_each(|x| *x /= selectivity);
        pooled / selectivity
    }

    fn process_vertex(&mut self, v: usize, tick_s: f64) {
        let spec = &self.spec.vertices[v];
        let (capacity, selectivity, is_source) = (
            spec.capacity,
            spec.selectivity,
            spec.kind == VertexKind::Source,
        );
        let offset = self.tick as usize;
        let p = self.vertices[v].subtasks.len();
        if self.vertices[v].finished {
            for s in &mut self.vertices[v].subtasks {
                (s.busy_ms, s.backpressured_ms, s.idle_ms) = (0.0, 0.0, 1000.0);
                (s.records_in, s.records_out) = (0, 0);
            }
            return;
        }
        let mut sc = std::mem::take(&mut self.scratch);
        let pooled = self.output_allowance(v, &mut sc.per);
        let vertex = &mut self.vertices[v];
        let active = vertex
            .subtasks
            .iter()
            .filter(|s| !s.partitions.is_empty())
            .count()
            .max(1);
        let limit = vertex.rate_limit.map(|l| l * tick_s / active as f64);
        let cap_tick = capacity * tick_s;

        // What each subtask could take: its input, its capacity and, for sources, the rate limit.
        sc.demand.clear();
        for s in &vertex.subtasks {
            let available: u64 = if is_source {
                s.partitions
                    .iter()
                    .map(|&k| vertex.partitions[k].pending)
                    .sum()
            } else {
                s.queues.iter().map(Queue::records).sum()
            };
            let mut d = available.min(floor_u64(cap_tick + s.capacity_carry));
            if let (true, Some(l)) = (is_source, limit) {
                d = d.min(floor_u64(l + s.limit_carry));
            }
            sc.demand.push(d);
        }
        let total: u64 = sc.demand.iter().sum();
        sc.grant.clear();
        sc.grant.extend_from_slice(&sc.demand);
        if (total as f64) > pooled {
            sc.weights.clear();
            sc.weights.extend(sc.demand.iter().map(|&d| d as f64));
            apportion(pooled as u64, &sc.weights, offset, &mut sc.grant);
        }
        for i in 0..p {
            sc.grant[i] = sc.grant[i].min(sc.demand[i]).min(sc.per[i].max(0.0) as u64);
        }

        // Take the granted records and account for the time they cost.
        sc.out.clear();
        let mut processed = 0u64;
        for i in 0..p {
            let g = sc.grant[i];
            let s = &mut vertex.subtasks[i];
            if is_source {
                if s.partitions.len() == 1 {
                    vertex.partitions[s.partitions[0]].pending -= g;
                } else if g > 0 {
                    sc.weights.clear();
                    sc.weights.extend(
                        s.partitions
                            .iter()
                            .map(|&k| vertex.partitions[k].pending as f64),
                    );
                    sc.take.resize(sc.weights.len(), 0);
                    apportion(g, &sc.weights, offset, &mut sc.take);
                    for (k, t) in s.partitions.iter().zip(&sc.take) {
                        let p = &mut vertex.partitions[*k].pending;
                        *p = p.saturating_sub(*t);
                    }
                }
            } else if s.queues.len() == 1 {
                let popped = s.queues[0].pop(g);
                s.markers[0] += popped.markers;
                s.ended[0] |= popped.end;
            } else {
                sc.weights.clear();
                sc.weights
                    .extend(s.queues.iter().map(|q| q.records() as f64));
                sc.take.resize(sc.weights.len(), 0);
                apportion(g, &sc.weights, offset, &mut sc.take);
                for (slot, t) in sc.take.iter().enumerate() {
                    let popped = s.queues[slot].pop(*t);
                    s.markers[slot] += popped.markers;
                    s.ended[slot] |= popped.end;
                }
            }
            let gf = to_f64(g);
            let budget = cap_tick + s.capacity_carry;
            s.capacity_carry = if g == floor_u64(budget) {
                budget - gf
            } else {
                0.0
            };
            if let Some(l) = limit {
                let lb = l + s.limit_carry;
                s.limit_carry = if g == floor_u64(lb) { lb - gf } else { 0.0 };
            }
            let exact = gf * selectivity + s.out_carry;
            let o = floor_u64(exact);
            s.out_carry = exact - to_f64(o);
            sc.out.push(o);
            let busy = if cap_tick > 0.0 {
                (gf / cap_tick * 1000.0).min(1000.0)
            } else {
                0.0
            };
            let rest = 1000.0 - busy;
            s.busy_ms = busy;
            (s.backpressured_ms, s.idle_ms) = if g < sc.demand[i] {
                (rest, 0.0)
            } else {
                (0.0, rest)
            };
            s.records_in = g;
            s.records_out = o;
            s.cum_in += g;
            s.cum_out += o;
            s.cum_busy_ms += busy * tick_s;
            processed += g;
        }
        vertex.state_bytes += processed as f64 * spec.state_bytes_per_record;
        vertex.total_in += processed;
        let emitted: u64 = sc.out.iter().sum();
        vertex.total_out += emitted;

        // Split off what the feedback edges carry back, then emit the rest downstream.
        sc.regular.clear();
        sc.regular.extend_from_slice(&sc.out);
        if !vertex.feedback_out.is_empty() && emitted > 0 {
            let fraction: f64 = vertex
                .feedback_out
                .iter()
                .map(|f| f.2)
                .sum::<f64>()
                .min(1.0);
            let exact = emitted as f64 * fraction + vertex.feedback_carry;
            let back = exact as u64;
            vertex.feedback_carry = exact - back as f64;
            sc.weights.clear();
            sc.weights.extend(vertex.feedback_out.iter().map(|f| f.2));
            sc.take.resize(sc.weights.len(), 0);
            apportion(back, &sc.weights, offset, &mut sc.take);
            for ((it, tail, _), n) in vertex.feedback_out.iter().zip(&sc.take) {
                self.iterations[*it].queues[*tail].push_records(*n);
            }
            sc.weights.clear();
            sc.weights.extend(sc.out.iter().map(|&o| o as f64));
            sc.take.resize(p, 0);
            apportion(back, &sc.weights, offset, &mut sc.take);
            for i in 0..p {
                sc.regular[i] -= sc.take[i].min(sc.regular[i]);
            }
        }
        self.emit_records(v, &mut sc);
        self.scratch = sc;
        self.after_processing(v);
    }

    /// Pushes `sc.regular` (records emitted per subtask) into every output edge's queues.
    fn emit_records(&mut self, v: usize, sc: &mut Scratch) {
        let offset = self.tick as usize;
        let pooled: u64 = sc.regular.iter().sum();
        for k in 0..self.vertices[v].outputs.len() {
            let e = self.vertices[v].outputs[k];
            let edge = &self.edges[e];
            let (to, slot) = (edge.to, edge.slot);
            let q = self.vertices[to].subtasks.len();
            sc.parts.clear();
            sc.parts.resize(q, 0);
            match &edge.route {
                Route::Shared(w) => apportion(pooled, w, offset, &mut sc.parts),
                Route::Broadcast => sc.parts.iter_mut().for_each(|x| *x = pooled),
                Route::Pointwise(lists) => {
                    for (i, list) in lists.iter().enumerate() {
                        let n = sc.regular.get(i).copied().unwrap_or(0);
                        if let [(j, _)] = list.as_slice() {
                            sc.parts[*j] += n;
                            continue;
                        }
                        sc.weights.clear();
                        sc.weights.extend(list.iter().map(|(_, w)| *w));
                        sc.take.resize(list.len(), 0);
                        apportion(n, &sc.weights, offset, &mut sc.take);
                        for ((j, _), n) in list.iter().zip(&sc.take) {
                            sc.parts[*j] += n;
                        }
                    }
                }
            }
            for (s, n) in self.vertices[to].subtasks.iter_mut().zip(&sc.parts) {
                s.queues[slot].push_records(*n);
            }
        }
    }

    fn broadcast(&mut self, v: usize, token: Token) {
        for &e in &self.vertices[v].outputs.clone() {
            let (to, slot) = (self.edges[e].to, self.edges[e].slot);
            for s in &mut self.vertices[to].subtasks {
                match token {
                    Token::Marker => s.queues[slot].push_marker(),
                    Token::End => s.queues[slot].push_end(),
                    Token::Records(n) => s.queues[slot].push_records(n),
                }
            }
        }
        for (it, tail, _) in self.vertices[v].feedback_out.clone() {
            let q = &mut self.iterations[it].queues[tail];
            match token {
                Token::Marker => q.push_marker(),
                Token::End => q.push_end(),
                Token::Records(n) => q.push_records(n),
            }
        }
    }

    /// Termination bookkeeping after a vertex processed its tick: heads start a round once their
    /// regular inputs are done; every vertex passes a marker on once one has arrived on each
    /// input that has not ended; a vertex whose inputs have all ended and whose buffers are empty
    /// finishes. Bounded sources finish once everything they will ever produce has been read.
    fn after_processing(&mut self, v: usize) {
        let vertex = &self.vertices[v];
        if self.spec.vertices[v].kind == VertexKind::Source {
            let bounded_done = self.spec.vertices[v]
                .workload
                .as_ref()
                .and_then(|w| w.total_records)
                .is_some_and(|t| vertex.generated >= t)
                && vertex.partitions.iter().all(|p| p.pending == 0);
            if bounded_done {
                self.vertices[v].finished = true;
                self.broadcast(v, Token::End);
            }
            return;
        }
        let n_inputs = vertex.inputs.len();
        let ended = |slot: usize| vertex.subtasks.iter().all(|s| s.ended[slot]);
        let all_ended = (0..n_inputs).all(ended);
        if all_ended
            && vertex
                .subtasks
                .iter()
                .all(|s| s.queues.iter().all(Queue::is_empty))
        {
            self.vertices[v].finished = true;
            self.broadcast(v, Token::End);
            return;
        }
        if self.iterations.is_empty() {
            // Markers only start at iteration heads: without iterations there are none.
            return;
        }
        let mut emit = 0;
        let head = vertex.head_of.is_some();
        let mut emitted = vertex.markers_emitted;
        let mut initiated = vertex.head_initiated;
        if head && !initiated {
            let regular_done = vertex
                .inputs
                .iter()
                .enumerate()
                .all(|(slot, input)| matches!(input, InputFrom::Loop(_)) || ended(slot));
            if !regular_done {
                return;
            }
            initiated = true;
            emit += 1;
            emitted += 1;
        }
        let received = (0..n_inputs)
            .filter(|&slot| !ended(slot))
            .map(|slot| {
                vertex
                    .subtasks
                    .iter()
                    .map(|s| s.markers[slot])
                    .min()
                    .unwrap_or(0)
            })
            .min();
        if let Some(received) = received {
            let extra = u64::from(!head);
            while received >= emitted + extra {
                emit += 1;
                emitted += 1;
            }
        }
        self.vertices[v].head_initiated = initiated;
        self.vertices[v].markers_emitted = emitted;
        for _ in 0..emit {
            self.broadcast(v, Token::Marker);
        }
    }

    fn record_row(&mut self) {
        let Some(timeline) = &mut self.timeline else {
            self.events.clear();
            return;
        };
        let tick_s = self.spec.tick_ms as f64 / 1000.0;
        let restarting = self.pending.is_some();
        let mut source_rate = 0.0;
        let mut pending = 0u64;
        let mut limits = Vec::new();
        let mut vertices = Vec::with_capacity(self.vertices.len());
        let mut read = 0u64;
        for (v, state) in self.vertices.iter().enumerate() {
            let is_source = self.spec.vertices[v].kind == VertexKind::Source;
            if is_source {
                source_rate += state.arrival_rate;
                pending += state.partitions.iter().map(|p| p.pending).sum::<u64>();
                limits.push(state.rate_limit);
                read += state.subtasks.iter().map(|s| s.records_in).sum::<u64>();
            }
            let n = state.subtasks.len().max(1) as f64;
            let sum = state
                .subtasks
                .iter()
                .map(|s| s.records_in as f64)
                .sum::<f64>();
            let max = state
                .subtasks
                .iter()
                .map(|s| s.records_in as f64)
                .fold(0.0, f64::max);
            vertices.push(VertexRow {
                parallelism: state.parallelism,
                busy_max: state.subtasks.iter().map(|s| s.busy_ms).fold(0.0, f64::max),
                busy_avg: state.subtasks.iter().map(|s| s.busy_ms).sum::<f64>() / n,
                backpressured_avg: state
                    .subtasks
                    .iter()
                    .map(|s| s.backpressured_ms)
                    .sum::<f64>()
                    / n,
                records_in_per_s: sum / tick_s,
                skew: if sum > 0.0 { max / (sum / n) } else { 1.0 },
            });
        }
        timeline.rows.push(TimelineRow {
            t_ms: self.now_ms,
            restarting,
            finished: self.vertices.iter().all(|v| v.finished)
                && self.iterations.iter().all(|i| i.terminated),
            source_rate,
            read_per_s: read as f64 / tick_s,
            pending,
            rate_limits: limits,
            vertices,
            events: std::mem::take(&mut self.events),
        });
        if let Some(limit) = self.timeline_limit {
            if timeline.rows.len() >= 2 * limit {
                let excess = timeline.rows.len() - limit;
                timeline.rows.drain(..excess);
            }
        }
    }
}
