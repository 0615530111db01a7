//! A job's own families beside its vertices': its events by reason
//! (`flowscale_events_total{job,reason}`), how late its cycles started
//! (`flowscale_cycle_lateness_seconds`, a histogram), and five gauges: the times of its last
//! decision cycle and last rescale, its decision interval, its catch-up target, and whether a
//! decision waits in its cooldown's queue.
//!
//! Like the vertex families they are atomics the loop stores into and a scrape reads; a reason
//! the job has not had yet is the only thing that changes their shape (the job's series are
//! copied then, as for a new vertex), so a reason's series appears with its first event and
//! counts on from there.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::exposition::{Kind, family_header, push_f64, sample_f64};
use crate::events::EventReason;
use crate::runner::LATENESS_BOUNDS_MS;

/// `flowscale_events_total{job, reason}`: name (without `_total`) and help text.
pub(super) const EVENTS: (&str, &str) = (
    "flowscale_events",
    "Events recorded for the job, by reason (identical events held back as repeats are not \
     counted)",
);

/// `flowscale_cycle_lateness_seconds{job}`: name and help text.
pub(super) const LATENESS: (&str, &str) = (
    "flowscale_cycle_lateness_seconds",
    "How late the job's cycles started after they were due (wall-clock and paced jobs)",
);

/// How many gauges a job has.
pub(super) const GAUGE_COUNT: usize = 5;

/// A job's gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum JobGauge {
    LastRescale = 0,
    LastDecision = 1,
    DecisionInterval = 2,
    CatchUpTarget = 3,
    CooldownQueued = 4,
}

/// The gauges' names and help texts, at the places of [`JobGauge`].
pub(super) const GAUGES: [(&str, &str); GAUGE_COUNT] = [
    (
        "flowscale_last_rescale_timestamp_seconds",
        "Unix time (this host's clock) when a rescale of the job was last realized on its \
         engine; absent before the first",
    ),
    (
        "flowscale_last_decision_timestamp_seconds",
        "Unix time (this host's clock) of the job's last decision cycle, as counted by \
         flowscale_decisions_total",
    ),
    (
        "flowscale_decision_interval_seconds",
        "The time between two decision cycles of the job ([host] interval)",
    ),
    (
        "flowscale_catch_up_target_seconds",
        "The time within which the job should catch up its lag (scaling.catch-up.duration)",
    ),
    (
        "flowscale_cooldown_queued",
        "1 while a decision of the job waits in the cooldown's queue (for the end of the \
         cooldown period, or for free slots), else 0",
    ),
];

/// The histogram's buckets: one per bound of [`LATENESS_BOUNDS_MS`], and `+Inf`.
const BUCKETS: usize = LATENESS_BOUNDS_MS.len() + 1;

/// A job's counters and gauges.
pub(super) struct JobGauges {
    /// `f64` bits of [`GAUGES`]; NaN when not known.
    values: [AtomicU64; GAUGE_COUNT],
    /// The reasons the job had, in the order it first had them, with their counts.
    reasons: Vec<(EventReason, AtomicU64)>,
    /// Cycles per bucket (not cumulative: each in the first bucket whose bound it is within).
    lateness: [AtomicU64; BUCKETS],
    /// `f64` bits of the sum of the lateness, seconds.
    lateness_sum: AtomicU64,
}

fn copy(a: &AtomicU64) -> AtomicU64 {
    AtomicU64::new(a.load(Ordering::Relaxed))
}

impl JobGauges {
    /// Nothing known, nothing counted.
    pub(super) fn new() -> JobGauges {
        JobGauges {
            values: [f64::NAN.to_bits(); GAUGE_COUNT].map(AtomicU64::new),
            reasons: Vec::new(),
            lateness: [0; BUCKETS].map(AtomicU64::new),
            lateness_sum: AtomicU64::new(0.0_f64.to_bits()),
        }
    }

    /// A copy with the same values.
    pub(super) fn copy(&self) -> JobGauges {
        JobGauges {
            values: self.values.each_ref().map(copy),
            reasons: self.reasons.iter().map(|(r, n)| (*r, copy(n))).collect(),
            lateness: self.lateness.each_ref().map(copy),
            lateness_sum: copy(&self.lateness_sum),
        }
    }

    /// Sets `gauge` to `value` (NaN: not known).
    pub(super) fn set(&self, gauge: JobGauge, value: f64) {
        self.values[gauge as usize].store(value.to_bits(), Ordering::Relaxed);
    }

    /// True when `reason` has its counter.
    pub(super) fn counts_reason(&self, reason: EventReason) -> bool {
        self.reasons.iter().any(|(r, _)| *r == reason)
    }

    /// Adds a counter for `reason`, at 0, unless it has one.
    pub(super) fn add_reason(&mut self, reason: EventReason) {
        if !self.counts_reason(reason) {
            self.reasons.push((reason, AtomicU64::new(0)));
        }
    }

    /// Counts an event of `reason` (one that has its counter, [`JobGauges::add_reason`]).
    pub(super) fn count_event(&self, reason: EventReason) {
        if let Some((_, count)) = self.reasons.iter().find(|(r, _)| *r == reason) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a cycle that started `late` after it was due.
    pub(super) fn observe_lateness(&self, late: Duration) {
        let bucket = LATENESS_BOUNDS_MS
            .iter()
            .position(|&ms| late <= Duration::from_millis(ms))
            .unwrap_or(LATENESS_BOUNDS_MS.len());
        self.lateness[bucket].fetch_add(1, Ordering::Relaxed);
        // One writer per job (the loop records a job's steps under the server's lock): the
        // update needs no retry, but is one anyway should that change.
        let _ = self
            .lateness_sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + late.as_secs_f64()).to_bits())
            });
    }
}

/// Writes the per-job families for `jobs` (each a job's escaped `job="..."` label text and its
/// gauges), in their order.
pub(super) fn write(jobs: &[(&str, &JobGauges)], openmetrics: bool, out: &mut String) {
    let (name, help) = EVENTS;
    family_header(out, name, help, Kind::Counter, openmetrics);
    let total = format!("{name}_total");
    let mut labels = String::new();
    for (job_label, gauges) in jobs {
        for (reason, count) in &gauges.reasons {
            labels.clear();
            labels.push_str(job_label);
            labels.push_str(",reason=\"");
            // A reason's name is an identifier: nothing to escape.
            labels.push_str(reason.as_str());
            labels.push('"');
            out.push_str(&total);
            out.push('{');
            out.push_str(&labels);
            out.push_str("} ");
            // Writing into a String cannot fail.
            let _ = write!(out, "{}", count.load(Ordering::Relaxed));
            out.push('\n');
        }
    }
    write_lateness(jobs, openmetrics, out);
    for (i, (name, help)) in GAUGES.iter().enumerate() {
        family_header(out, name, help, Kind::Gauge, openmetrics);
        for (job_label, gauges) in jobs {
            let value = f64::from_bits(gauges.values[i].load(Ordering::Relaxed));
            if !value.is_nan() {
                sample_f64(out, name, job_label, value);
            }
        }
    }
}

/// The histogram of every job with at least one cycle counted: cumulative buckets, `+Inf`
/// (equal to `_count`: both come from the same reading of the buckets), `_sum`, `_count`.
fn write_lateness(jobs: &[(&str, &JobGauges)], openmetrics: bool, out: &mut String) {
    let (name, help) = LATENESS;
    family_header(out, name, help, Kind::Histogram, openmetrics);
    let mut bounds: Vec<String> = LATENESS_BOUNDS_MS
        .iter()
        .map(|&ms| {
            let mut bound = String::new();
            push_f64(&mut bound, ms as f64 / 1000.0);
            bound
        })
        .collect();
    bounds.push("+Inf".to_string());
    let bucket = format!("{name}_bucket");
    let sum = format!("{name}_sum");
    let count = format!("{name}_count");
    let mut labels = String::new();
    for (job_label, gauges) in jobs {
        let counts = gauges
            .lateness
            .each_ref()
            .map(|c| c.load(Ordering::Relaxed));
        let cycles: u64 = counts.iter().sum();
        if cycles == 0 {
            continue;
        }
        let mut cumulative = 0;
        for (n, bound) in counts.iter().zip(&bounds) {
            cumulative += n;
            labels.clear();
            labels.push_str(job_label);
            labels.push_str(",le=\"");
            labels.push_str(bound);
            labels.push('"');
            out.push_str(&bucket);
            out.push('{');
            out.push_str(&labels);
            out.push_str("} ");
            // Writing into a String cannot fail.
            let _ = write!(out, "{}", cumulative);
            out.push('\n');
        }
        let total = f64::from_bits(gauges.lateness_sum.load(Ordering::Relaxed));
        sample_f64(out, &sum, job_label, total);
        out.push_str(&count);
        out.push('{');
        out.push_str(job_label);
        out.push_str("} ");
        // Writing into a String cannot fail.
        let _ = write!(out, "{}", cycles);
        out.push('\n');
    }
}
