//! What one step of a job produced, for people and for machines.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::Arc;

use serde::Serialize;

use crate::events::Event;
use crate::scaling::{CycleStage, EvaluatedVertices, VertexDecision};
use crate::state::LoggedEvent;
use crate::utc::UtcTime;

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
    /// The evaluated metrics of the job's vertices, by vertex id, when the cycle evaluated the
    /// job (empty otherwise): the per-vertex gauges of `/metrics` are set from them.
    #[serde(skip)]
    pub evaluated: EvaluatedVertices,
    /// The job's decision interval (`[host] interval`), set by the job's runner: the
    /// `flowscale_decision_interval_seconds` gauge, against which an alert tells a job that
    /// stopped deciding.
    #[serde(skip)]
    pub decision_interval: Option<std::time::Duration>,
    /// The job's `scaling.catch-up.duration`, set by the job's runner: the lag target an alert
    /// compares the sources' lag with.
    #[serde(skip)]
    pub catch_up_target: Option<std::time::Duration>,
    /// After the step, a decision waits in the cooldown's queue (for the end of the period, or
    /// for slots); `None` in a report made outside the job's runner.
    #[serde(skip)]
    pub cooldown_queued: Option<bool>,
    /// How late the step's cycle started after it was due (see `runner/lateness.rs`); `None`
    /// when it had no due time (an unpaced virtual clock) or the report is no cycle's.
    #[serde(skip)]
    pub lateness: Option<std::time::Duration>,
    /// The run of the fleet entry whose job took the step; `None` for a report made outside a
    /// fleet's tasks (the stuck-job watchdog, tests). The server shows a report only while its
    /// entry is in the fleet and only from the entry's current run: a step that was in flight
    /// when a reload removed the job must not bring it back.
    #[serde(skip)]
    pub(crate) entry: Option<EntryRun>,
}

/// Which run of which fleet entry a report comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EntryRun {
    /// The entry's name. A Flink entry without a job id runs the cluster's jobs under their
    /// own names: their reports name the job, this names the entry they belong to.
    pub(crate) entry: Arc<str>,
    /// The run's number: every start of an entry (with the fleet, or when a reload adds or
    /// restarts it) takes a number above every earlier one ([`super::live::next_entry_run`]).
    pub(crate) run: u64,
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
            evaluated: EvaluatedVertices::default(),
            decision_interval: None,
            catch_up_target: None,
            cooldown_queued: None,
            lateness: None,
            entry: None,
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

/// Engine times below this are simulated time (counted from 0); the others are wall-clock
/// times, milliseconds since the epoch.
const SIMULATED_BELOW_MS: i64 = 100 * 86_400_000;

/// Engine time for people: simulated time as the time elapsed since its start
/// ([`format_elapsed`]), a wall-clock time as a UTC calendar time in RFC 3339
/// (`2026-12-02T16:31:13Z`, with `.mmm` when the time has milliseconds).
pub(crate) fn format_time(at_ms: i64) -> String {
    if at_ms < SIMULATED_BELOW_MS {
        format_elapsed(at_ms)
    } else {
        UtcTime::from_ms(at_ms).rfc3339()
    }
}

/// A span of time for people, `HH:MM:SS` (whole seconds; the hours grow past 99 as needed).
pub(crate) fn format_elapsed(ms: i64) -> String {
    let s = ms / 1000;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{EventReason, Severity};

    // The calendar times are counted by hand in `utc`'s tests.
    #[test]
    fn wall_clock_times_read_as_utc_calendar_times_and_simulated_ones_as_elapsed_time() {
        assert_eq!(format_time(0), "00:00:00");
        assert_eq!(format_time(90_061_000), "25:01:01");
        // 100 days less a second: still simulated time.
        assert_eq!(format_time(8_640_000_000 - 1_000), "2399:59:59");
        assert_eq!(format_time(1_796_229_073_000), "2026-12-02T16:31:13Z");
        assert_eq!(format_time(1_796_229_073_456), "2026-12-02T16:31:13.456Z");
        // A span is elapsed time, however long.
        assert_eq!(format_elapsed(200 * 86_400_000), "4800:00:00");

        let mut printer = Printer::new(Vec::new(), false, false);
        let event = Event::new(
            EventReason::StateFileIgnored,
            Severity::Warning,
            "state file",
        )
        .job("gone");
        printer
            .print_event(1_796_229_073_456, &event)
            .expect("a Vec takes the line");
        let mut report = CycleReport::new("orders", 1_796_229_073_000);
        report.events.push(event);
        printer.print(&report).expect("a Vec takes the line");
        assert_eq!(
            String::from_utf8(printer.into_inner()).expect("UTF-8"),
            "2026-12-02T16:31:13.456Z gone StateFileIgnored: state file\n\
             2026-12-02T16:31:13Z orders StateFileIgnored: state file\n"
        );
    }
}
