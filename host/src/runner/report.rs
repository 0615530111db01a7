//! What one step of a job produced, for people and for machines.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use crate::events::Event;
use crate::scaling::{CycleStage, VertexDecision};
use crate::state::LoggedEvent;

/// One step of one job: a decision cycle, a rate-control batch, or both.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CycleReport {
    /// The job.
    pub(crate) job: String,
    /// When (engine time, ms).
    pub(crate) at_ms: i64,
    /// Where the decision cycle ended; `None` when only rate control ran.
    pub stage: Option<CycleStage>,
    /// Per-vertex decisions of the cycle.
    pub vertices: Vec<VertexDecision>,
    /// The scaling operation realized on the engine (changed vertices only).
    pub operation: Option<BTreeMap<String, u32>>,
    /// A scaling event was decided and queued by the cooldown.
    pub(crate) queued: bool,
    /// A new source rate limit was published (records/s for the whole job).
    pub(crate) rate_limit: Option<f64>,
    /// Events recorded in this step (after the per-job rate limit on identical events).
    pub events: Vec<Event>,
    /// An engine call failed in this step. Its event may have been held back as a repeat
    /// (`events` is rate-limited), so the run's count of failed steps reads this instead.
    #[serde(skip)]
    pub(crate) engine_failed: bool,
    /// The engine no longer knows the job (a `JobGone` event says so, once per event
    /// interval): the job's loop stops or waits for it to come back, instead of polling it
    /// as if it were about to be ready.
    #[serde(skip)]
    pub(crate) job_gone: bool,
    /// The job runs on a virtual clock (a simulation or a recording): its steps come much
    /// faster than real time, so a readable log orders them by time across jobs.
    #[serde(skip)]
    pub(crate) virtual_clock: bool,
    /// Records per second the job's sources were asked to read in this cycle (the sum of their
    /// target data rates), once the metrics were evaluated: the load a dashboard plots.
    #[serde(skip)]
    pub load: Option<f64>,
    /// The end of the cooldown period the job is in (engine time, ms), if it is in one.
    #[serde(skip)]
    pub(crate) cooldown_until_ms: Option<i64>,
    /// How long the step took (wall clock).
    #[serde(skip)]
    pub elapsed: std::time::Duration,
}

impl CycleReport {
    /// An empty report.
    pub fn new(job: &str, at_ms: i64) -> CycleReport {
        CycleReport {
            job: job.to_string(),
            at_ms,
            stage: None,
            vertices: Vec::new(),
            operation: None,
            queued: false,
            rate_limit: None,
            events: Vec::new(),
            engine_failed: false,
            job_gone: false,
            virtual_clock: false,
            load: None,
            cooldown_until_ms: None,
            elapsed: std::time::Duration::ZERO,
        }
    }

    /// True when there is something a person would want to read.
    pub(crate) fn is_noteworthy(&self) -> bool {
        self.operation.is_some()
            || self.queued
            || self.stage == Some(CycleStage::Scaled)
            || !self.events.is_empty()
    }
}

/// Prints reports: readable lines, or JSON Lines of `{"type": "cycle", "data": ...}`.
pub(crate) struct Printer<W: Write> {
    out: W,
    json: bool,
    verbose: bool,
}

impl<W: Write> Printer<W> {
    /// A printer writing to `out`.
    pub(crate) fn new(out: W, json: bool, verbose: bool) -> Printer<W> {
        Printer { out, json, verbose }
    }

    /// Prints one report (human output skips quiet cycles unless verbose).
    pub(crate) fn print(&mut self, report: &CycleReport) -> io::Result<()> {
        if self.json {
            serde_json::to_writer(
                &mut self.out,
                &serde_json::json!({ "type": "cycle", "data": report }),
            )?;
            return writeln!(self.out);
        }
        if !self.verbose && !report.is_noteworthy() {
            return Ok(());
        }
        let at = format_time(report.at_ms);
        let scaled = report.stage == Some(CycleStage::Scaled);
        for v in &report.vertices {
            let changed = v.proposed.is_some_and(|p| p != v.current);
            if !((scaled && changed) || self.verbose) {
                continue;
            }
            let target = v.target.map_or("-".to_string(), |t| t.to_string());
            let aligned = v.aligned.map_or("-".to_string(), |t| t.to_string());
            writeln!(
                self.out,
                "{at} {job} {vertex}: {current} -> target {target} -> aligned {aligned} [{mode}] {reason}",
                job = report.job,
                vertex = v.name,
                current = v.current,
                mode = v.mode.as_deref().unwrap_or("-"),
                reason = v.reason,
            )?;
        }
        if let Some(op) = &report.operation {
            let changes: Vec<String> = op.iter().map(|(v, p)| format!("{v}={p}")).collect();
            writeln!(
                self.out,
                "{at} {} rescaled: {}",
                report.job,
                changes.join(", ")
            )?;
        }
        if report.queued {
            writeln!(
                self.out,
                "{at} {} scaling event queued (cooldown)",
                report.job
            )?;
        }
        if let Some(rate) = report.rate_limit.filter(|_| self.verbose) {
            writeln!(
                self.out,
                "{at} {} rate limit {rate:.0} records/s",
                report.job
            )?;
        }
        for event in &report.events {
            writeln!(
                self.out,
                "{at} {} {}: {}",
                report.job,
                event.reason.as_str(),
                event.message
            )?;
        }
        Ok(())
    }

    /// Prints an event that belongs to no step of a job (what the host found in its state
    /// directory when it started): a readable line, or JSON Lines of
    /// `{"type": "event", "data": {"at_ms": ..., "event": ...}}`.
    pub(crate) fn print_event(&mut self, at_ms: i64, event: &Event) -> io::Result<()> {
        if self.json {
            let logged = LoggedEvent {
                at_ms,
                event: event.clone(),
            };
            serde_json::to_writer(
                &mut self.out,
                &serde_json::json!({ "type": "event", "data": logged }),
            )?;
            return writeln!(self.out);
        }
        writeln!(
            self.out,
            "{} {} {}: {}",
            format_time(at_ms),
            event.job.as_deref().unwrap_or("-"),
            event.reason.as_str(),
            event.message
        )
    }

    /// The writer, for text printed elsewhere (such as the ordered log of simulated jobs).
    pub(crate) fn out(&mut self) -> &mut W {
        &mut self.out
    }

    /// The writer back.
    pub(crate) fn into_inner(self) -> W {
        self.out
    }
}

/// Engine time for people: `HH:MM:SS` of simulated time (small values), else ms since the epoch
/// as `T+<seconds>`.
pub(crate) fn format_time(at_ms: i64) -> String {
    if at_ms < 100 * 86_400_000 {
        let s = at_ms / 1000;
        format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
    } else {
        format!("T{}", at_ms / 1000)
    }
}
