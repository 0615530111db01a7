//! The timeline a run records: one row per tick, and how much of it is kept.

use super::state::Simulation;
use crate::sim::spec::VertexKind;
use crate::sim::timeline::{Timeline, TimelineRow, VertexRow};

impl Simulation {
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

    /// Appends this tick's row, with the events since the last one, to the timeline (when one is
    /// recorded).
    pub(super) fn record_row(&mut self) {
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
