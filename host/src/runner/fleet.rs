//! Running a fleet: every job on its own thread, each with its own engine and clock, so that a
//! slow or failing job never holds up the others.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::engine::{Clock, Engine};
use crate::events::{Event, EventReason, Severity};
use crate::plan::{FleetPlan, JobPlan};
use crate::scaling::CycleStage;
use crate::sim::{Simulation, Summary, Timeline};
use crate::state::StateStore;

use super::engines::{NamedEngine, OpenedEngines, open_engines};
use super::job::{JobRunner, PersistError};
use super::report::CycleReport;

/// Simulated time a simulated job runs for when neither the fleet nor the command says.
pub const DEFAULT_SIMULATED_DURATION: Duration = Duration::from_secs(2 * 3600);
/// The longest a bounded simulated job may take to finish.
pub const MAX_SIMULATED_DURATION: Duration = Duration::from_secs(30 * 86_400);

/// How long and how the fleet runs.
pub struct RunOptions<'a> {
    /// One step per job, then stop.
    pub once: bool,
    /// Stop wall-clock jobs after this long (they run until stopped otherwise).
    pub wall_duration: Option<Duration>,
    /// Overrides every simulated job's duration.
    pub simulated_duration: Option<Duration>,
    /// Set to stop every job at its next step (Ctrl-C).
    pub stop: &'a AtomicBool,
    /// Where wall-clock jobs persist their state.
    pub store: &'a Mutex<Box<dyn StateStore + Send>>,
}

/// How one job's run went.
#[derive(Debug, Clone)]
pub struct JobRun {
    /// The job (a Flink entry covering several jobs yields one run each).
    pub name: String,
    /// The alignment mode it used.
    pub mode: String,
    /// Steps that ran.
    pub steps: usize,
    /// Steps whose cycle failed or whose engine could not be reached.
    pub failed_steps: usize,
    /// Why the job could not run at all.
    pub error: Option<String>,
    /// A simulated job's timeline and summary.
    pub simulation: Option<(Timeline, Summary)>,
}

/// Why a job's run has no result when its thread panicked.
const PANICKED: &str = "the job's control loop panicked; the other jobs went on";

impl JobRun {
    /// A job that could not run at all: one failed step and why.
    fn failed(name: String, mode: String, error: impl Into<String>) -> JobRun {
        JobRun {
            name,
            mode,
            steps: 0,
            failed_steps: 1,
            error: Some(error.into()),
            simulation: None,
        }
    }
}

/// Runs every job of `plan`, passing each step's report to `sink` as it happens.
pub fn run_fleet(
    plan: &FleetPlan,
    options: &RunOptions<'_>,
    sink: &(dyn Fn(&CycleReport) + Sync),
) -> Vec<JobRun> {
    let interval_ms = i64::try_from(plan.fleet.host.interval.as_millis()).unwrap_or(i64::MAX);
    std::thread::scope(|scope| {
        let handles: Vec<_> = plan
            .jobs
            .iter()
            .map(|job| {
                let handle = scope.spawn(move || run_job(job, interval_ms, options, sink));
                (job.spec.name.clone(), job.alignment.mode_id(), handle)
            })
            .collect();
        let mut runs = Vec::new();
        for (name, mode, handle) in handles {
            match handle.join() {
                Ok(job_runs) => runs.extend(job_runs),
                Err(_) => runs.push(JobRun::failed(name, mode, PANICKED)),
            }
        }
        runs
    })
}

fn run_job(
    job: &JobPlan,
    interval_ms: i64,
    options: &RunOptions<'_>,
    sink: &(dyn Fn(&CycleReport) + Sync),
) -> Vec<JobRun> {
    match open_engines(&job.spec.name, &job.spec.engine) {
        Ok(OpenedEngines::Simulated {
            simulation,
            duration,
        }) => {
            let duration = options
                .simulated_duration
                .or(duration)
                .unwrap_or(DEFAULT_SIMULATED_DURATION);
            vec![run_simulation(
                job,
                *simulation,
                duration,
                interval_ms,
                options,
                sink,
            )]
        }
        Ok(OpenedEngines::Jobs(engines)) => run_engines(job, engines, interval_ms, options, sink),
        Err(err) => vec![JobRun::failed(
            job.spec.name.clone(),
            job.alignment.mode_id(),
            err.to_string(),
        )],
    }
}

/// Runs a simulated job for `duration` of simulated time (or until it finishes) and summarises
/// its timeline.
fn run_simulation(
    job: &JobPlan,
    simulation: Simulation,
    duration: Duration,
    interval_ms: i64,
    options: &RunOptions<'_>,
    sink: &(dyn Fn(&CycleReport) + Sync),
) -> JobRun {
    let name = &job.spec.name;
    let mut runner = JobRunner::new(
        name,
        simulation,
        job.alignment.clone(),
        &job.settings,
        interval_ms,
    );
    let (steps, failed_steps) = drive(&mut runner, Some(duration), Vec::new(), options, sink);
    let timeline = runner.engine().timeline();
    let summary = Summary::from_timeline(&timeline);
    JobRun {
        name: name.clone(),
        mode: job.alignment.mode_id(),
        steps,
        failed_steps,
        error: None,
        simulation: Some((timeline, summary)),
    }
}

/// Drives every engine of one fleet entry, each on its own thread. A Flink entry without
/// `job-id` covers every RUNNING job of the cluster, and a wall-clock job runs until the whole
/// run ends: driven one after the other, the second job would wait for the first to stop.
fn run_engines(
    job: &JobPlan,
    engines: Vec<NamedEngine>,
    interval_ms: i64,
    options: &RunOptions<'_>,
    sink: &(dyn Fn(&CycleReport) + Sync),
) -> Vec<JobRun> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = engines
            .into_iter()
            .map(|(label, engine)| {
                let name = label.clone();
                let handle = scope.spawn(move || {
                    let mut runner = JobRunner::new(
                        &label,
                        engine,
                        job.alignment.clone(),
                        &job.settings,
                        interval_ms,
                    );
                    let restored = match options.store.lock() {
                        Ok(mut store) => runner.restore(store.as_mut()),
                        Err(_) => Ok(Vec::new()),
                    };
                    let first_events = match restored {
                        Ok(events) => events,
                        // Its state is ambiguous: the job does not run, the others do.
                        Err(err) => {
                            return JobRun::failed(label, job.alignment.mode_id(), err.to_string());
                        }
                    };
                    let (steps, failed_steps) =
                        drive(&mut runner, None, first_events, options, sink);
                    JobRun {
                        name: label,
                        mode: job.alignment.mode_id(),
                        steps,
                        failed_steps,
                        error: None,
                        simulation: None,
                    }
                });
                (name, handle)
            })
            .collect();
        handles
            .into_iter()
            .map(|(name, handle)| {
                handle
                    .join()
                    .unwrap_or_else(|_| JobRun::failed(name, job.alignment.mode_id(), PANICKED))
            })
            .collect()
    })
}

/// Steps a runner until its time is up, it finishes, or the fleet is stopped; its first step
/// reports `first_events` (what restoring its state found). Returns how many steps ran and how
/// many of them failed.
fn drive<E: Engine>(
    runner: &mut JobRunner<E>,
    simulated: Option<Duration>,
    first_events: Vec<Event>,
    options: &RunOptions<'_>,
    sink: &(dyn Fn(&CycleReport) + Sync),
) -> (usize, usize) {
    let mut tally = Tally {
        steps: 0,
        failed: 0,
        sink,
    };
    match runner.engine().clock() {
        Clock::Virtual { start_ms, end_ms } => {
            let end = virtual_end(start_ms, end_ms, simulated);
            drive_virtual(runner, start_ms, end, first_events, options, &mut tally);
        }
        Clock::Wall => drive_wall(runner, first_events, options, &mut tally),
    }
    (tally.steps, tally.failed)
}

/// Counts one runner's steps, and those that failed, while passing its reports on.
struct Tally<'s> {
    steps: usize,
    failed: usize,
    sink: &'s (dyn Fn(&CycleReport) + Sync),
}

impl Tally<'_> {
    fn account(&mut self, report: &CycleReport) {
        self.steps += 1;
        let bad = matches!(report.stage, Some(CycleStage::Failed(_)))
            || report.engine_failed
            || report
                .events
                .iter()
                .any(|e| e.reason == EventReason::EngineError);
        if bad {
            self.failed += 1;
        }
        (self.sink)(report);
    }
}

/// The last instant of a virtual clock that starts at `start_ms`: the engine's end or the end of
/// the `simulated` time, whichever comes first; [`MAX_SIMULATED_DURATION`] when neither exists.
fn virtual_end(start_ms: i64, end_ms: Option<i64>, simulated: Option<Duration>) -> i64 {
    let limit = simulated.map(|d| start_ms + duration_ms(d));
    match (end_ms, limit) {
        (Some(end), Some(limit)) => end.min(limit),
        (Some(end), None) => end,
        (None, Some(limit)) => limit,
        (None, None) => start_ms + duration_ms(MAX_SIMULATED_DURATION),
    }
}

/// Steps back to back from `start_ms` to `end` in engine time: nothing waits for real time.
fn drive_virtual<E: Engine>(
    runner: &mut JobRunner<E>,
    start_ms: i64,
    end: i64,
    mut first_events: Vec<Event>,
    options: &RunOptions<'_>,
    tally: &mut Tally<'_>,
) {
    let step_ms = runner.step_ms();
    let mut now = start_ms;
    while now <= end && !runner.is_finished() && !options.stop.load(Ordering::Relaxed) {
        if let Some(mut report) = runner.step(now, std::mem::take(&mut first_events)) {
            report.virtual_clock = true;
            tally.account(&report);
        }
        if options.once {
            break;
        }
        now += step_ms;
    }
}

/// Steps on the wall clock, persisting the job's state after every step, until the run's
/// duration is over, the job finishes or the fleet is stopped.
fn drive_wall<E: Engine>(
    runner: &mut JobRunner<E>,
    mut first_events: Vec<Event>,
    options: &RunOptions<'_>,
    tally: &mut Tally<'_>,
) {
    let step_ms = runner.step_ms();
    let started = Instant::now();
    loop {
        let now = wall_ms();
        if let Some(report) = runner.step(now, std::mem::take(&mut first_events)) {
            tally.account(&report);
        }
        persist(runner, options.store, now, tally);
        if options.once
            || runner.is_finished()
            || options
                .wall_duration
                .is_some_and(|d| started.elapsed() >= d)
        {
            break;
        }
        if !sleep_unless_stopped(step_ms, options.stop) {
            break;
        }
    }
}

/// Writes the runner's state into `store` and flushes it. A failure does not stop the job: it
/// is reported as an event, in a step of its own.
fn persist<E: Engine>(
    runner: &JobRunner<E>,
    store: &Mutex<Box<dyn StateStore + Send>>,
    now_ms: i64,
    tally: &mut Tally<'_>,
) {
    let Ok(mut store) = store.lock() else {
        return;
    };
    let persisted = runner
        .persist(store.as_mut())
        .and_then(|()| store.flush().map_err(PersistError::from));
    if let Err(err) = persisted {
        let event = Event::new(
            EventReason::AutoscalerError,
            Severity::Warning,
            format!("cannot persist the job's state: {err}"),
        )
        .job(runner.name());
        let mut report = CycleReport::new(runner.name(), now_ms);
        report.events.push(event);
        tally.account(&report);
    }
}

/// Waits `step_ms`, looking at `stop` every 100 ms; false when the fleet was stopped.
fn sleep_unless_stopped(step_ms: i64, stop: &AtomicBool) -> bool {
    let wake = Instant::now() + Duration::from_millis(u64::try_from(step_ms).unwrap_or(1000));
    while Instant::now() < wake && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(
            Duration::from_millis(100).min(wake.saturating_duration_since(Instant::now())),
        );
    }
    !stop.load(Ordering::Relaxed)
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4)
}

/// Milliseconds since the epoch.
pub fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(duration_ms)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::alignment::NoCustomModes;
    use crate::config::parse_fleet;
    use crate::engine::{Collector, EngineError, JobObservation, Realizer};
    use crate::plan::plan_fleet;
    use crate::state::InMemoryStateStore;

    /// A wall-clock engine that records when it was first observed and answers nothing.
    struct Unreachable {
        first: Arc<Mutex<Option<Instant>>>,
    }

    impl Collector for Unreachable {
        fn observe(&mut self, _now_ms: i64) -> Result<JobObservation, EngineError> {
            if let Ok(mut first) = self.first.lock() {
                first.get_or_insert_with(Instant::now);
            }
            Err(EngineError::Unreachable("test".into()))
        }
    }

    impl Realizer for Unreachable {
        fn rescale(&mut self, _: &BTreeMap<String, u32>) -> Result<(), EngineError> {
            Ok(())
        }
        fn set_rate_limit(&mut self, _: &str, _: Option<f64>) -> Result<(), EngineError> {
            Ok(())
        }
    }

    impl Engine for Unreachable {
        fn clock(&self) -> Clock {
            Clock::Wall
        }
    }

    #[test]
    fn the_jobs_of_one_entry_run_side_by_side() {
        let text = r#"
[host]
interval = "100ms"
[[jobs]]
name = "cluster"
engine = "flink"
rest = "http://127.0.0.1:9"
"#;
        let fleet = parse_fleet(Path::new("fleet.toml"), text).expect("a valid fleet");
        let plan = plan_fleet(fleet, &NoCustomModes).expect("a valid plan");
        let firsts: Vec<Arc<Mutex<Option<Instant>>>> =
            (0..2).map(|_| Arc::new(Mutex::new(None))).collect();
        let engines: Vec<NamedEngine> = firsts
            .iter()
            .enumerate()
            .map(|(i, first)| {
                let engine: Box<dyn Engine> = Box::new(Unreachable {
                    first: Arc::clone(first),
                });
                (format!("cluster/job{i}"), engine)
            })
            .collect();
        let stop = AtomicBool::new(false);
        let store: Mutex<Box<dyn StateStore + Send>> =
            Mutex::new(Box::new(InMemoryStateStore::new()));
        let options = RunOptions {
            once: false,
            wall_duration: Some(Duration::from_millis(600)),
            simulated_duration: None,
            stop: &stop,
            store: &store,
        };
        let started = Instant::now();
        let runs = run_engines(&plan.jobs[0], engines, 100, &options, &|_| {});
        let elapsed = started.elapsed();

        let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["cluster/job0", "cluster/job1"]);
        for (run, first) in runs.iter().zip(&firsts) {
            assert!(run.steps >= 3, "{run:?}");
            // Every step failed, though only the first one's event was reported.
            assert_eq!(run.failed_steps, run.steps, "{run:?}");
            let first = first.lock().expect("lock").expect("observed");
            assert!(
                first.duration_since(started) < Duration::from_millis(300),
                "{} started {:?} after the run",
                run.name,
                first.duration_since(started)
            );
        }
        // One after the other they would take two durations.
        assert!(elapsed < Duration::from_millis(1100), "{elapsed:?}");
    }

    #[test]
    fn state_that_cannot_be_read_is_reported_at_the_first_step_and_stops_no_other_job() {
        use crate::state::FileStateStore;
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("write a state file")
        };
        // Two files name job0; job1's cooldown section has the wrong type.
        write(
            "cluster%2Fjob0.json",
            r#"{"job": "cluster/job0", "sections": {}}"#,
        );
        write(
            "job0-backup.json",
            r#"{"job": "cluster/job0", "sections": {}}"#,
        );
        write(
            "cluster%2Fjob1.json",
            r#"{"job": "cluster/job1", "sections": {"cooldown": [1, 2]}}"#,
        );
        let text = "[host]\ninterval = \"100ms\"\n[[jobs]]\nname = \"cluster\"\nengine = \"flink\"\nrest = \"http://127.0.0.1:9\"\n";
        let fleet = parse_fleet(Path::new("fleet.toml"), text).expect("a valid fleet");
        let plan = plan_fleet(fleet, &NoCustomModes).expect("a valid plan");
        let engines: Vec<NamedEngine> = (0..2)
            .map(|i| {
                let engine: Box<dyn Engine> = Box::new(Unreachable {
                    first: Arc::default(),
                });
                (format!("cluster/job{i}"), engine)
            })
            .collect();
        let stop = AtomicBool::new(false);
        let store: Mutex<Box<dyn StateStore + Send>> = Mutex::new(Box::new(
            FileStateStore::open(dir.path()).expect("the store opens"),
        ));
        let options = RunOptions {
            once: true,
            wall_duration: None,
            simulated_duration: None,
            stop: &stop,
            store: &store,
        };
        let reports = Mutex::new(Vec::new());
        let runs = run_engines(&plan.jobs[0], engines, 100, &options, &|report| {
            reports.lock().expect("lock").push(report.clone());
        });

        // Before: the later-sorted file silently won and job0 ran on it.
        let error = runs[0].error.as_deref().expect("job0 does not start");
        assert!(
            error.contains("cluster%2Fjob0.json") && error.contains("job0-backup.json"),
            "{error}"
        );
        assert_eq!(runs[1].error, None, "job1 runs");
        let reports = reports.into_inner().expect("lock");
        let first = reports
            .iter()
            .find(|r| r.job == "cluster/job1")
            .expect("job1 stepped");
        let quarantined: Vec<&Event> = first
            .events
            .iter()
            .filter(|e| e.reason == EventReason::StateQuarantined)
            .collect();
        assert_eq!(quarantined.len(), 1, "{:?}", first.events);
        assert!(
            quarantined[0].message.contains("`cooldown`"),
            "{}",
            quarantined[0].message
        );
        assert!(
            quarantined[0].message.contains("quarantine"),
            "{}",
            quarantined[0].message
        );
        // Both files of job0 are untouched.
        assert_eq!(
            std::fs::read_to_string(dir.path().join("job0-backup.json")).expect("kept"),
            r#"{"job": "cluster/job0", "sections": {}}"#
        );
    }
}
