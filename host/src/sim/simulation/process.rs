//! One vertex's tick: each subtask takes what its input holds, up to its capacity, its share of
//! a source's rate limit and what the downstream buffers can accept; the time this costs is
//! split into busy, backpressured and idle; the output is split between the feedback edges and
//! the regular ones, then emitted. Records move as integer counts, so conservation is exact;
//! fractional effects (capacity, rate limit, selectivity, feedback fraction) carry their
//! remainders to the next tick.
//!
//! This runs for every subtask of every vertex in every tick: it allocates nothing (all buffers
//! are the simulation's [`Scratch`]), and the per-subtask helpers are `#[inline(always)]`: left
//! to the optimizer's judgement they are inlined too late to be optimized with the loop around
//! them, and a tick costs about 2% more instructions.

use super::counts::{floor_u64, to_f64};
use super::state::{Iteration, Partition, Scratch, Simulation, Subtask, VertexState};
use crate::sim::queue::Queue;
use crate::sim::routing::apportion;
use crate::sim::spec::VertexKind;

/// What one subtask of a vertex may do in this tick.
#[derive(Debug, Clone, Copy)]
struct TickBudget {
    /// Records one subtask processes in a tick at 100% busy.
    cap_tick: f64,
    /// A source subtask's share of the rate limit in this tick, if one is set.
    limit: Option<f64>,
    /// Records out per record in.
    selectivity: f64,
    /// Simulated seconds per tick.
    tick_s: f64,
    /// Sources read partitions; the others read their input queues.
    is_source: bool,
}

impl Simulation {
    /// Processes vertex `v` for one tick, then does its termination bookkeeping. `sc` is the
    /// simulation's scratch, taken out once per tick by the caller (moving it costs more than
    /// the work of a small vertex).
    pub(super) fn process_vertex(&mut self, v: usize, tick_s: f64, sc: &mut Scratch) {
        let spec = &self.spec.vertices[v];
        let (capacity, selectivity, is_source) = (
            spec.capacity,
            spec.selectivity,
            spec.kind == VertexKind::Source,
        );
        let offset = self.tick as usize;
        if self.vertices[v].finished {
            self.vertices[v].idle_finished();
            return;
        }
        let (pooled, pointwise) = self.output_allowance(v, &mut sc.per);
        let vertex = &mut self.vertices[v];
        let budget = TickBudget {
            cap_tick: capacity * tick_s,
            limit: vertex
                .rate_limit
                .map(|l| l * tick_s / active_readers(vertex) as f64),
            selectivity,
            tick_s,
            is_source,
        };

        // `extend` from the slices' iterators: one capacity check per vertex, not per subtask.
        sc.demand.clear();
        let partitions = &vertex.partitions;
        sc.demand.extend(
            vertex
                .subtasks
                .iter_mut()
                .map(|s| s.demand(partitions, budget)),
        );
        sc.grant_demands(pooled, pointwise, offset);

        // Take the granted records and account for the time they cost.
        sc.out.clear();
        let mut processed = 0u64;
        let (partitions, weights, take) = (&mut vertex.partitions, &mut sc.weights, &mut sc.take);
        let granted = vertex.subtasks.iter_mut().zip(&sc.grant).zip(&sc.demand);
        sc.out.extend(granted.map(|((s, &g), &d)| {
            if is_source {
                s.read_partitions(partitions, g, offset, weights, take);
            } else {
                s.pop_queues(g, offset, weights, take);
            }
            processed += g;
            s.account(g, d, budget)
        }));
        vertex.state_bytes += processed as f64 * spec.state_bytes_per_record;
        vertex.total_in += processed;
        let emitted: u64 = sc.out.iter().sum();
        vertex.total_out += emitted;

        vertex.split_feedback(&mut self.iterations, emitted, offset, sc);
        self.emit_records(v, sc);
        self.after_processing(v);
    }
}

/// The subtasks of a source that read at least one partition (at least 1): a rate limit is
/// split over them.
fn active_readers(vertex: &VertexState) -> usize {
    vertex
        .subtasks
        .iter()
        .filter(|s| !s.partitions.is_empty())
        .count()
        .max(1)
}

impl VertexState {
    /// A finished vertex does nothing: idle all tick.
    fn idle_finished(&mut self) {
        for s in &mut self.subtasks {
            (s.busy_ms, s.backpressured_ms, s.idle_ms) = (0.0, 0.0, 1000.0);
            (s.records_in, s.records_out) = (0, 0);
        }
    }

    /// Splits off what the feedback edges carry back (into their iteration queues) from the
    /// subtasks' output `sc.out`, leaving in `sc.regular` what goes downstream.
    #[inline]
    fn split_feedback(
        &mut self,
        iterations: &mut [Iteration],
        emitted: u64,
        offset: usize,
        sc: &mut Scratch,
    ) {
        if self.feedback_out.is_empty() || emitted == 0 {
            // All of it goes downstream: the output becomes `regular` as it is, without a copy
            // (`out` is rebuilt by the next vertex).
            std::mem::swap(&mut sc.regular, &mut sc.out);
            return;
        }
        sc.regular.clear();
        sc.regular.extend_from_slice(&sc.out);
        let p = sc.out.len();
        let fraction: f64 = self.feedback_out.iter().map(|f| f.2).sum::<f64>().min(1.0);
        let exact = emitted as f64 * fraction + self.feedback_carry;
        let back = exact as u64;
        self.feedback_carry = exact - back as f64;
        sc.weights.clear();
        sc.weights.extend(self.feedback_out.iter().map(|f| f.2));
        sc.take.resize(sc.weights.len(), 0);
        apportion(back, &sc.weights, offset, &mut sc.take);
        for ((it, tail, _), n) in self.feedback_out.iter().zip(&sc.take) {
            iterations[*it].queues[*tail].push_records(*n);
        }
        sc.weights.clear();
        sc.weights.extend(sc.out.iter().map(|&o| o as f64));
        sc.take.resize(p, 0);
        apportion(back, &sc.weights, offset, &mut sc.take);
        for i in 0..p {
            sc.regular[i] -= sc.take[i].min(sc.regular[i]);
        }
    }
}

impl Scratch {
    /// Turns `demand` into `grant`: when the demands exceed the `pooled` allowance of the
    /// all-to-all edges they share it in proportion, and each is then capped by its own
    /// pointwise allowance (`per`, only when there is a `pointwise` edge: otherwise it is
    /// infinite and caps nothing).
    #[inline]
    fn grant_demands(&mut self, pooled: f64, pointwise: bool, offset: usize) {
        let total: u64 = self.demand.iter().sum();
        self.grant.clear();
        self.grant.extend_from_slice(&self.demand);
        if (total as f64) > pooled {
            self.weights.clear();
            self.weights.extend(self.demand.iter().map(|&d| d as f64));
            apportion(pooled as u64, &self.weights, offset, &mut self.grant);
            for (g, &d) in self.grant.iter_mut().zip(&self.demand) {
                *g = (*g).min(d);
            }
        }
        if pointwise {
            for (g, &per) in self.grant.iter_mut().zip(&self.per) {
                // `floor_u64`, not `as u64`: the unsigned conversion is a branchy sequence,
                // and an infinite allowance ends up under the demand either way.
                *g = (*g).min(floor_u64(per));
            }
        }
    }
}

impl Subtask {
    /// What this subtask could take: its input (the pending records of its partitions, for a
    /// source), bounded by its capacity and, for a source, its share of the rate limit. Notes
    /// its capacity in whole records for [`Subtask::account`].
    #[inline(always)]
    fn demand(&mut self, partitions: &[Partition], budget: TickBudget) -> u64 {
        let available: u64 = if budget.is_source {
            self.partitions.iter().map(|&k| partitions[k].pending).sum()
        } else if let [queue] = self.queues.as_slice() {
            queue.records()
        } else {
            self.queues.iter().map(Queue::records).sum()
        };
        self.capacity_floor = floor_u64(budget.cap_tick + self.capacity_carry);
        let mut d = available.min(self.capacity_floor);
        if let (true, Some(l)) = (budget.is_source, budget.limit) {
            d = d.min(floor_u64(l + self.limit_carry));
        }
        d
    }

    /// A source subtask reads `granted` records from its partitions, in proportion to what each
    /// holds.
    #[inline(always)]
    fn read_partitions(
        &self,
        partitions: &mut [Partition],
        granted: u64,
        offset: usize,
        weights: &mut Vec<f64>,
        take: &mut Vec<u64>,
    ) {
        if self.partitions.len() == 1 {
            partitions[self.partitions[0]].pending -= granted;
        } else if granted > 0 {
            weights.clear();
            weights.extend(
                self.partitions
                    .iter()
                    .map(|&k| partitions[k].pending as f64),
            );
            take.resize(weights.len(), 0);
            apportion(granted, weights, offset, take);
            for (k, t) in self.partitions.iter().zip(take.iter()) {
                let p = &mut partitions[*k].pending;
                *p = p.saturating_sub(*t);
            }
        }
    }

    /// Takes `granted` records from the input queues, in proportion to what each holds, and
    /// notes the markers and ends passed on the way.
    #[inline(always)]
    fn pop_queues(
        &mut self,
        granted: u64,
        offset: usize,
        weights: &mut Vec<f64>,
        take: &mut Vec<u64>,
    ) {
        if let ([queue], [markers], [ended]) = (
            self.queues.as_mut_slice(),
            self.markers.as_mut_slice(),
            self.ended.as_mut_slice(),
        ) {
            let popped = queue.pop(granted);
            *markers += popped.markers;
            *ended |= popped.end;
        } else {
            weights.clear();
            weights.extend(self.queues.iter().map(|q| q.records() as f64));
            take.resize(weights.len(), 0);
            apportion(granted, weights, offset, take);
            for (slot, t) in take.iter().enumerate() {
                let popped = self.queues[slot].pop(*t);
                self.markers[slot] += popped.markers;
                self.ended[slot] |= popped.end;
            }
        }
    }

    /// Books `granted` of `demand` records as processed: the carries of capacity, rate limit and
    /// output, the split of the tick into busy, backpressured (granted less than it could take)
    /// and idle time, and the counters. Returns the records emitted.
    #[inline(always)]
    fn account(&mut self, granted: u64, demand: u64, budget: TickBudget) -> u64 {
        let gf = to_f64(granted);
        let capacity = budget.cap_tick + self.capacity_carry;
        self.capacity_carry = if granted == self.capacity_floor {
            capacity - gf
        } else {
            0.0
        };
        if let Some(l) = budget.limit {
            let lb = l + self.limit_carry;
            self.limit_carry = if granted == floor_u64(lb) {
                lb - gf
            } else {
                0.0
            };
        }
        let o = if budget.selectivity == 1.0 && self.out_carry == 0.0 {
            // What the general case computes when nothing is fractional: `granted` records out
            // (a count is exact as a float), nothing carried.
            self.out_carry = 0.0;
            granted
        } else {
            let exact = gf * budget.selectivity + self.out_carry;
            let o = floor_u64(exact);
            self.out_carry = exact - to_f64(o);
            o
        };
        let busy = if budget.cap_tick > 0.0 {
            (gf / budget.cap_tick * 1000.0).min(1000.0)
        } else {
            0.0
        };
        let rest = 1000.0 - busy;
        self.busy_ms = busy;
        (self.backpressured_ms, self.idle_ms) = if granted < demand {
            (rest, 0.0)
        } else {
            (0.0, rest)
        };
        self.records_in = granted;
        self.records_out = o;
        self.cum_in += granted;
        self.cum_out += o;
        self.cum_busy_ms += busy * budget.tick_s;
        o
    }
}
