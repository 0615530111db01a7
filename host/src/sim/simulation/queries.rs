//! What a simulation reports about itself between ticks: time, status, parallelism and record
//! counts.

#[cfg(test)]
use std::collections::BTreeMap;

use super::state::Simulation;
use crate::engine::JobStatus;
#[cfg(test)]
use crate::sim::queue::Queue;
use crate::sim::spec::SimulatedJobSpec;

impl Simulation {
    /// The job description.
    pub fn spec(&self) -> &SimulatedJobSpec {
        &self.spec
    }

    /// Simulated time (ms since the start).
    pub(crate) fn now_ms(&self) -> i64 {
        self.now_ms
    }

    /// Ticks simulated so far.
    #[cfg(test)]
    pub(crate) fn ticks(&self) -> u64 {
        self.tick
    }

    /// The lag of the last tick simulated (pending records over the arrival rate, as the
    /// summary defines it); 0 before the first tick.
    pub(crate) fn last_lag_s(&self) -> f64 {
        self.row.lag_s()
    }

    /// The job's status.
    pub(crate) fn status(&self) -> JobStatus {
        if self.is_finished() {
            JobStatus::Finished
        } else if self.pending.is_some() {
            JobStatus::Restarting
        } else {
            JobStatus::Running
        }
    }

    /// True once every vertex (and every iteration source) has finished.
    pub(crate) fn is_finished(&self) -> bool {
        self.vertices.iter().all(|v| v.finished) && self.iterations.iter().all(|i| i.terminated)
    }

    /// Current parallelism per vertex id.
    #[cfg(test)]
    pub(crate) fn parallelism(&self) -> BTreeMap<String, u32> {
        self.spec
            .vertices
            .iter()
            .zip(&self.vertices)
            .map(|(s, v)| (s.id.clone(), v.parallelism))
            .collect()
    }

    /// Records in flight inside the job: in buffers and feedback queues (not pending in the
    /// source system).
    #[cfg(test)]
    pub(crate) fn records_in_flight(&self) -> u64 {
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
    #[cfg(test)]
    pub(crate) fn pending_records(&self) -> u64 {
        self.vertices
            .iter()
            .flat_map(|v| &v.partitions)
            .map(|p| p.pending)
            .sum()
    }

    /// Records that reached an iteration source after it had terminated (0 unless termination
    /// detection fired early).
    #[cfg(test)]
    pub(crate) fn dropped_records(&self) -> u64 {
        self.iterations.iter().map(|i| i.dropped).sum()
    }

    /// Records processed by vertex `id` over the whole run, and records it emitted.
    #[cfg(test)]
    pub(crate) fn vertex_totals(&self, id: &str) -> Option<(u64, u64)> {
        let v = self.spec.vertex_index(id)?;
        Some((self.vertices[v].total_in, self.vertices[v].total_out))
    }

    /// Records generated so far by source `id` (arrived in its partitions).
    #[cfg(test)]
    pub(crate) fn generated(&self, id: &str) -> Option<u64> {
        Some(self.vertices[self.spec.vertex_index(id)?].generated)
    }
}
