//! The timeline a run records: one row per tick, and how much of it is kept.

use super::counts::to_f64;
use super::state::{Simulation, VertexState};
use crate::sim::spec::VertexKind;
use crate::sim::timeline::{Timeline, VertexRow};

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
    #[cfg(test)]
    pub(crate) fn record_event(&mut self, event: impl Into<String>) {
        self.events.push(event.into());
    }

    /// Keeps only about the last `max_rows` ticks of the timeline (`None`: everything), so a
    /// simulation driven indefinitely (the `run` command) does not grow without bound. Between
    /// `max_rows` and twice that many rows are kept; the oldest go in batches.
    #[cfg(test)]
    pub(crate) fn limit_timeline(&mut self, max_rows: Option<usize>) {
        self.timeline_limit = max_rows.map(|m| m.max(1));
    }

    /// The recorded timeline (empty when recording is off).
    pub(crate) fn timeline(&self) -> Timeline {
        self.timeline
            .clone()
            .unwrap_or_else(|| Timeline::new(&self.spec))
    }

    /// Promises that the run will be summarised over at most `ticks` ticks in all, so that its
    /// summary keeps about 1% of them (for the 99th percentiles) instead of every tick; the
    /// summary stays exact as long as the promise holds.
    pub(crate) fn summarise_at_most(&mut self, ticks: u64) {
        self.summary.expect_at_most(ticks);
    }

    /// Builds this tick's row, with the events since the last one, adds it to the summary and
    /// appends it to the timeline (when one is recorded).
    pub(super) fn record_row(&mut self) {
        let tick_s = self.spec.tick_ms as f64 / 1000.0;
        let finished = self.is_finished();
        let recorded = self.timeline.is_some();
        let row = &mut self.row;
        row.t_ms = self.now_ms;
        row.restarting = self.pending.is_some();
        row.finished = finished;
        row.rate_limits.clear();
        row.vertices.clear();
        let mut source_rate = 0.0;
        let mut pending = 0u64;
        let mut read = 0u64;
        for (v, state) in self.vertices.iter().enumerate() {
            let is_source = self.spec.vertices[v].kind == VertexKind::Source;
            if is_source {
                source_rate += state.arrival_rate;
                pending += state.partitions.iter().map(|p| p.pending).sum::<u64>();
                row.rate_limits.push(state.rate_limit);
                read += state.subtasks.iter().map(|s| s.records_in).sum::<u64>();
            }
            row.vertices.push(vertex_row(state, tick_s, recorded));
        }
        row.source_rate = source_rate;
        row.read_per_s = read as f64 / tick_s;
        row.pending = pending;
        std::mem::swap(&mut row.events, &mut self.events);
        self.events.clear();
        self.summary.add(row);
        if let Some(timeline) = &mut self.timeline {
            timeline.rows.push(row.clone());
            if let Some(limit) = self.timeline_limit {
                if timeline.rows.len() >= 2 * limit {
                    let excess = timeline.rows.len() - limit;
                    timeline.rows.drain(..excess);
                }
            }
        }
    }
}

/// One vertex's part of a tick's row. The busy and backpressured times only go to a recorded
/// timeline (the summary does not read them): without one they are left at 0.
fn vertex_row(state: &VertexState, tick_s: f64, recorded: bool) -> VertexRow {
    let n = state.subtasks.len().max(1) as f64;
    // Integer sums and maxima, converted once: the counts stay far below 2^53, so this is the
    // float sum exactly, at a fraction of the cost.
    let (sum, max) = state.subtasks.iter().fold((0u64, 0u64), |(sum, max), s| {
        (sum + s.records_in, max.max(s.records_in))
    });
    let (sum, max) = (to_f64(sum), to_f64(max));
    let mut row = VertexRow {
        parallelism: state.parallelism,
        busy_max: 0.0,
        busy_avg: 0.0,
        backpressured_avg: 0.0,
        records_in_per_s: sum / tick_s,
        skew: if sum > 0.0 { max / (sum / n) } else { 1.0 },
    };
    if recorded {
        row.busy_max = state.subtasks.iter().map(|s| s.busy_ms).fold(0.0, f64::max);
        row.busy_avg = state.subtasks.iter().map(|s| s.busy_ms).sum::<f64>() / n;
        row.backpressured_avg = state
            .subtasks
            .iter()
            .map(|s| s.backpressured_ms)
            .sum::<f64>()
            / n;
    }
    row
}
