//! The per-tick record of a run, exportable as CSV or JSON.

#[cfg(test)]
use std::fmt::Write as _;

use serde::Serialize;

#[cfg(test)]
use super::error::SimError;
use super::spec::{SimulatedJobSpec, VertexKind};

/// One vertex in one tick.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct VertexRow {
    /// Running parallelism.
    pub(crate) parallelism: u32,
    /// Busiest subtask's busy time (ms/s).
    pub(crate) busy_max: f64,
    /// Average busy time (ms/s).
    pub(crate) busy_avg: f64,
    /// Average backpressured time (ms/s).
    pub(crate) backpressured_avg: f64,
    /// Records taken in per second (all subtasks).
    pub(crate) records_in_per_s: f64,
    /// Max over mean of the per-subtask records taken in (1 = perfectly even).
    pub(crate) skew: f64,
}

/// One tick.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct TimelineRow {
    /// Tick start (ms).
    pub(crate) t_ms: i64,
    /// The job was restarting (nothing processed).
    pub(crate) restarting: bool,
    /// The job had finished.
    pub(crate) finished: bool,
    /// Records arriving at the sources per second (all sources): the load.
    pub(crate) source_rate: f64,
    /// Records the sources read per second.
    pub(crate) read_per_s: f64,
    /// Records pending in the source system (all sources).
    pub(crate) pending: u64,
    /// Rate limit per source (in `Timeline::source_ids` order).
    pub(crate) rate_limits: Vec<Option<f64>>,
    /// Per vertex (in `Timeline::vertex_ids` order).
    pub(crate) vertices: Vec<VertexRow>,
    /// What happened in this tick (rescale requested, restarted, rate limit, iteration ended).
    pub(crate) events: Vec<String>,
}

impl TimelineRow {
    /// Seconds of arrivals the pending records represent (pending / arrival rate, with the rate
    /// floored at 1 record/s).
    pub(crate) fn lag_s(&self) -> f64 {
        self.pending as f64 / self.source_rate.max(1.0)
    }
}

/// A run's timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Timeline {
    /// Job name.
    pub(crate) job: String,
    /// Tick length (ms).
    pub(crate) tick_ms: i64,
    /// Vertex ids, in topological order.
    pub(crate) vertex_ids: Vec<String>,
    /// Source vertex ids.
    pub(crate) source_ids: Vec<String>,
    /// One row per tick.
    pub(crate) rows: Vec<TimelineRow>,
}

impl Timeline {
    /// An empty timeline for `spec`.
    pub(crate) fn new(spec: &SimulatedJobSpec) -> Timeline {
        Timeline {
            job: spec.name.clone(),
            tick_ms: spec.tick_ms,
            vertex_ids: spec.vertices.iter().map(|v| v.id.clone()).collect(),
            source_ids: spec
                .vertices
                .iter()
                .filter(|v| v.kind == VertexKind::Source)
                .map(|v| v.id.clone())
                .collect(),
            rows: Vec::new(),
        }
    }

    /// CSV with a header: time, status, load, pending, lag, then per source its rate limit and
    /// per vertex parallelism / busy / backpressure / input rate / skew, then events (`;`-joined).
    #[cfg(test)]
    pub(crate) fn to_csv(&self) -> String {
        let mut out = String::from("t_s,status,source_rate,read_per_s,pending,lag_s");
        for s in &self.source_ids {
            let _ = write!(out, ",{s}.rate_limit");
        }
        for v in &self.vertex_ids {
            let _ = write!(
                out,
                ",{v}.parallelism,{v}.busy_max,{v}.busy_avg,{v}.backpressured_avg,{v}.records_in_per_s,{v}.skew"
            );
        }
        out.push_str(",events\n");
        for r in &self.rows {
            let status = if r.finished {
                "FINISHED"
            } else if r.restarting {
                "RESTARTING"
            } else {
                "RUNNING"
            };
            let _ = write!(
                out,
                "{},{status},{:.3},{:.3},{},{:.3}",
                r.t_ms as f64 / 1000.0,
                r.source_rate,
                r.read_per_s,
                r.pending,
                r.lag_s()
            );
            for l in &r.rate_limits {
                match l {
                    Some(l) => {
                        let _ = write!(out, ",{l:.3}");
                    }
                    None => out.push(','),
                }
            }
            for v in &r.vertices {
                let _ = write!(
                    out,
                    ",{},{:.1},{:.1},{:.1},{:.3},{:.4}",
                    v.parallelism,
                    v.busy_max,
                    v.busy_avg,
                    v.backpressured_avg,
                    v.records_in_per_s,
                    v.skew
                );
            }
            let events = r.events.join(";").replace([',', '"', '\n'], " ");
            let _ = writeln!(out, ",{events}");
        }
        out
    }

    /// The whole timeline as JSON.
    #[cfg(test)]
    pub(crate) fn to_json(&self) -> Result<String, SimError> {
        serde_json::to_string_pretty(self).map_err(|e| SimError::Encode {
            what: "the timeline as JSON".to_string(),
            message: e.to_string(),
        })
    }
}
