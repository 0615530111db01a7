//! Running a fleet: how long and how it runs, and what each job's run came to. The jobs run as
//! tasks of a bounded scheduler (`job_task`, `scheduler`), each with its own engine and clock,
//! so that a slow or failing job never holds up the others.

use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::sim::{Summary, Timeline};
use crate::state::StateStore;

use super::lateness::Lateness;
use super::pace::Pace;

/// Simulated time a simulated job runs for when neither the fleet nor the command says.
pub(crate) const DEFAULT_SIMULATED_DURATION: Duration = Duration::from_secs(2 * 3600);
/// The longest a bounded simulated job may take to finish.
pub(super) const MAX_SIMULATED_DURATION: Duration = Duration::from_secs(30 * 86_400);

/// How long and how the fleet runs.
pub struct RunOptions<'a> {
    /// One step per job, then stop.
    pub once: bool,
    /// Stop wall-clock jobs after this long (they run until stopped otherwise).
    pub wall_duration: Option<Duration>,
    /// Overrides every simulated job's duration.
    pub simulated_duration: Option<Duration>,
    /// Runs virtual clocks at this many simulated seconds per wall second instead of as fast as
    /// possible (wall-clock jobs are not affected).
    pub pace: Option<Pace>,
    /// Set to stop every job at its next step (Ctrl-C).
    pub stop: &'a AtomicBool,
    /// Where wall-clock jobs persist their state.
    pub store: &'a Mutex<Box<dyn StateStore + Send>>,
    /// Keep every simulated job's whole timeline, for a chart. Without it a simulated job keeps
    /// only its summary, built tick by tick, so its memory does not grow with its duration.
    pub timelines: bool,
    /// Share each cluster's slots through its arbiter (the default). False: every job of a
    /// shared simulated cluster decides alone, as if it had every slot, and runs on what the
    /// cluster gives it: the comparison the arbiter is measured against.
    pub arbiter: bool,
}

impl<'a> RunOptions<'a> {
    /// Every job runs until `stop` is set or its own time ends, at full speed, keeping only
    /// summaries: the options a caller starts from and overrides what it needs.
    pub(crate) fn new(
        stop: &'a AtomicBool,
        store: &'a Mutex<Box<dyn StateStore + Send>>,
    ) -> RunOptions<'a> {
        RunOptions {
            once: false,
            wall_duration: None,
            simulated_duration: None,
            pace: None,
            stop,
            store,
            timelines: false,
            arbiter: true,
        }
    }
}

/// A job on a virtual clock (a simulation or a recording) that was stopped, by Ctrl-C, before
/// the end of its time: its results cover only the time up to `at_ms`, which a reader of the
/// summary has to be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Interrupted {
    /// The last instant that was stepped (engine time, ms).
    pub(crate) at_ms: i64,
    /// The instant the run would have ended at (engine time, ms).
    pub(crate) end_ms: i64,
}

/// How one job's run went.
#[derive(Debug, Clone)]
pub struct JobRun {
    /// The job (a Flink entry covering several jobs yields one run each).
    pub(crate) name: String,
    /// The alignment mode it used.
    pub(crate) mode: String,
    /// Steps that ran.
    pub steps: usize,
    /// Steps whose cycle failed or whose engine could not be reached.
    pub(crate) failed_steps: usize,
    /// Why the job could not run at all.
    pub error: Option<String>,
    /// A simulated job's timeline (with [`RunOptions::timelines`]) and summary.
    pub(crate) simulation: Option<(Option<Timeline>, Summary)>,
    /// Set when the job's virtual time was cut short by a stop (Ctrl-C). Wall-clock jobs run
    /// until stopped, so a stop is their normal end and never sets it.
    pub(crate) interrupted: Option<Interrupted>,
    /// The engine no longer knew the job when its run ended (a `JobGone` event said so).
    pub(crate) gone: bool,
    /// How late its cycles started, for those with a due time (wall-clock and paced jobs).
    pub lateness: Lateness,
    /// A job of a shared simulated cluster: the cluster's slots and the most in use at once
    /// while it ran.
    pub(crate) slots: Option<SlotsUse>,
}

/// A shared simulated cluster's slots, as a run of one of its jobs saw them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct SlotsUse {
    /// The cluster.
    pub(crate) cluster: String,
    /// Its slots.
    pub(crate) slots: u32,
    /// The most slots its jobs held at once, up to the end of this job's run.
    pub(crate) max_in_use: u32,
}

impl JobRun {
    /// A job that could not run at all: one failed step and why.
    pub(super) fn failed(name: String, mode: String, error: impl Into<String>) -> JobRun {
        JobRun {
            name,
            mode,
            steps: 0,
            failed_steps: 1,
            error: Some(error.into()),
            simulation: None,
            interrupted: None,
            gone: false,
            lateness: Lateness::default(),
            slots: None,
        }
    }
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4)
}

/// Milliseconds since the epoch.
pub(crate) fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(duration_ms)
        .unwrap_or(0)
}
