//! Advancing time. Per tick, in order: a pending restart completes if its downtime is over;
//! records arrive in the source partitions (also while restarting: the source system keeps
//! filling); then, if the job is running, iteration sources forward fed-back records into their
//! heads and every vertex, in topological order, processes its input.

use super::state::Simulation;
use crate::sim::routing::apportion;

impl Simulation {
    /// Advances by ticks until `t_ms` is reached (the tick starting before `t_ms` is the last).
    pub fn advance_to(&mut self, t_ms: i64) {
        while self.now_ms < t_ms {
            self.step();
        }
    }

    /// Runs until the job finishes or `limit_ms` passes; true if it finished.
    #[cfg(test)]
    pub(crate) fn run_until_finished(&mut self, limit_ms: i64) -> bool {
        while !self.is_finished() && self.now_ms < limit_ms {
            self.step();
        }
        self.is_finished()
    }

    /// Simulates one tick.
    pub(crate) fn step(&mut self) {
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
        self.drift_keys();
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
            let mut scratch = std::mem::take(&mut self.scratch);
            for v in 0..self.vertices.len() {
                self.process_vertex(v, tick_s, &mut scratch);
            }
            self.scratch = scratch;
        }
        self.record_row();
        self.now_ms += self.spec.tick_ms;
        self.tick += 1;
    }

    /// Records arriving at the sources in this tick (the rate's noise is seeded), spread over
    /// their partitions by the partitions' shares.
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
            // The scratch buffers: a tick allocates nothing.
            let (shares, parts) = (&mut self.scratch.weights, &mut self.scratch.parts);
            shares.clear();
            shares.extend(vertex.partitions.iter().map(|p| p.share));
            parts.clear();
            parts.resize(shares.len(), 0);
            apportion(n, shares, offset, parts);
            for (p, k) in vertex.partitions.iter_mut().zip(parts.iter()) {
                p.pending += k;
            }
        }
    }
}
