//! Running a fleet: every job on its own thread, each with its own engine and clock, so that a
//! slow or failing job never holds up the others.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::config::EngineSpec;
use crate::engine::{Clock, Engine};
use crate::events::{Event, EventReason, Severity};
use crate::plan::JobPlan;
use crate::scaling::CycleStage;
use crate::sim::{Simulation, Summary, Timeline};
use crate::state::StateStore;

use super::engines::{NamedEngine, OpenedEngines, open_engines};
use super::job::{JobRunner, PersistError};
use super::live::{Follower, LiveEntry};
use super::pace::{self, Pace};
use super::report::CycleReport;

/// Simulated time a simulated job runs for when neither the fleet nor the command says.
pub const DEFAULT_SIMULATED_DURATION: Duration = Duration::from_secs(2 * 3600);
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
}

/// A job on a virtual clock (a simulation or a recording) that was stopped, by Ctrl-C, before
/// the end of its time: its results cover only the time up to `at_ms`, which a reader of the
/// summary has to be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted {
    /// The last instant that was stepped (engine time, ms).
    pub at_ms: i64,
    /// The instant the run would have ended at (engine time, ms).
    pub end_ms: i64,
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
    /// A simulated job's timeline (with [`RunOptions::timelines`]) and summary.
    pub simulation: Option<(Option<Timeline>, Summary)>,
    /// Set when the job's virtual time was cut short by a stop (Ctrl-C). Wall-clock jobs run
    /// until stopped, so a stop is their normal end and never sets it.
    pub interrupted: Option<Interrupted>,
    /// The engine no longer knew the job when its run ended (a `JobGone` event said so).
    pub gone: bool,
}

/// Why a job's run has no result when its thread panicked.
const PANICKED: &str = "the job's control loop panicked; the other jobs went on";

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
        }
    }
}

/// Runs one fleet entry until it ends or leaves the fleet. With `fresh`, wall-clock jobs do not
/// resume from the store: their engine changed, so what was learned about the old one is wrong.
pub(super) fn run_job(
    live: &LiveEntry,
    fresh: bool,
    options: &RunOptions<'_>,
    sink: &(dyn Fn(&CycleReport) + Sync),
) -> Vec<JobRun> {
    let (job, interval_ms) = live.current();
    let job = job.as_ref();
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
                (interval_ms, live),
                options,
                sink,
            )]
        }
        Ok(OpenedEngines::Jobs(engines)) => {
            run_engines(job, engines, (interval_ms, live), fresh, options, sink)
        }
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
    mut simulation: Simulation,
    duration: Duration,
    (interval_ms, live): (i64, &LiveEntry),
    options: &RunOptions<'_>,
    sink: &(dyn Fn(&CycleReport) + Sync),
) -> JobRun {
    let name = &job.spec.name;
    simulation.record_timeline(options.timelines);
    // The last step is at the end of `duration` and simulates up to it: one tick more than the
    // duration holds, at most.
    let tick_ms = u64::try_from(simulation.spec().tick_ms.max(1)).unwrap_or(1);
    let duration_ticks = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX) / tick_ms;
    simulation.summarise_at_most(duration_ticks.saturating_add(2));
    let mut runner = JobRunner::new(
        name,
        simulation,
        job.alignment.clone(),
        &job.settings,
        interval_ms,
    );
    let driven = drive(
        &mut runner,
        Some(duration),
        false,
        Vec::new(),
        Steering { options, live },
        sink,
    );
    let summary = runner.engine().summary();
    let timeline = options.timelines.then(|| runner.engine().timeline());
    JobRun {
        name: name.clone(),
        mode: runner.alignment().mode_id(),
        steps: driven.steps,
        failed_steps: driven.failed,
        error: None,
        simulation: Some((timeline, summary)),
        interrupted: driven.interrupted,
        gone: driven.gone,
    }
}

/// Drives every engine of one fleet entry, each on its own thread. A Flink entry without
/// `job-id` covers every RUNNING job of the cluster, and a wall-clock job runs until the whole
/// run ends: driven one after the other, the second job would wait for the first to stop.
///
/// A job the engine no longer knows stops its loop, unless the entry names it by `job-id`:
/// the fleet asks for that job, so its loop waits for a job with that id to come back.
fn run_engines(
    job: &JobPlan,
    engines: Vec<NamedEngine>,
    (interval_ms, live): (i64, &LiveEntry),
    fresh: bool,
    options: &RunOptions<'_>,
    sink: &(dyn Fn(&CycleReport) + Sync),
) -> Vec<JobRun> {
    let named = matches!(
        job.spec.engine,
        EngineSpec::Flink {
            job_id: Some(_),
            ..
        }
    );
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
                        Ok(_) if fresh => Ok(Vec::new()),
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
                    let steering = Steering { options, live };
                    let driven = drive(&mut runner, None, named, first_events, steering, sink);
                    JobRun {
                        name: label,
                        mode: runner.alignment().mode_id(),
                        steps: driven.steps,
                        failed_steps: driven.failed,
                        error: None,
                        simulation: None,
                        interrupted: driven.interrupted,
                        gone: driven.gone,
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

/// What driving one runner came to.
struct Driven {
    /// Steps that ran.
    steps: usize,
    /// Steps that failed.
    failed: usize,
    /// A virtual clock stopped before its end.
    interrupted: Option<Interrupted>,
    /// The engine no longer knew the job at the end.
    gone: bool,
}

/// Steps a runner until its time is up, it finishes, the fleet is stopped, or its job is gone
/// from the engine (unless `await_return`); its first step reports `first_events` (what
/// restoring its state found).
fn drive<E: Engine>(
    runner: &mut JobRunner<E>,
    simulated: Option<Duration>,
    await_return: bool,
    first_events: Vec<Event>,
    steering: Steering<'_, '_>,
    sink: &(dyn Fn(&CycleReport) + Sync),
) -> Driven {
    let mut tally = Tally {
        steps: 0,
        failed: 0,
        sink,
    };
    let mut follower = steering.live.follow();
    let (interrupted, gone) = match runner.engine().clock() {
        Clock::Virtual { start_ms, end_ms } => {
            let end = virtual_end(start_ms, end_ms, simulated);
            let follower = &mut follower;
            drive_virtual(
                runner,
                (start_ms, end),
                first_events,
                steering,
                follower,
                &mut tally,
            )
        }
        Clock::Wall => (
            None,
            drive_wall(
                runner,
                await_return,
                first_events,
                steering,
                &mut follower,
                &mut tally,
            ),
        ),
    };
    Driven {
        steps: tally.steps,
        failed: tally.failed,
        interrupted,
        gone,
    }
}

/// What steers a job thread besides its runner: the fleet's options and stop, and its entry's
/// live plan (a reload's changes, or its removal from the fleet).
#[derive(Clone, Copy)]
struct Steering<'o, 'l> {
    options: &'o RunOptions<'o>,
    live: &'l LiveEntry,
}

impl Steering<'_, '_> {
    /// True once the fleet was stopped or the entry left it.
    fn stopped(&self) -> bool {
        self.options.stop.load(Ordering::Relaxed) || self.live.is_removed()
    }
}

/// Gives `runner` its entry's new plan, if a reload changed it since the last step; the events
/// the plan brings (a mode that fell back to BALANCED) are for the runner's next step.
fn take_changes<E: Engine>(runner: &mut JobRunner<E>, follower: &mut Follower<'_>) -> Vec<Event> {
    let Some((plan, interval_ms)) = follower.changed() else {
        return Vec::new();
    };
    runner.reconfigure(plan.alignment.clone(), &plan.settings, interval_ms);
    plan.notes
        .iter()
        .map(|note| note.clone().job(runner.name()))
        .collect()
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

/// Steps from `start_ms` to `end` in engine time: back to back, or with a pace, each step once
/// the wall clock has caught up with it (its deadline is computed from the start, so the time
/// the steps take does not add up to drift). Returns where it stopped when the fleet was
/// stopped with time left to run, and whether the engine lost the job (which ends the run: a
/// virtual clock has nothing to wait for).
fn drive_virtual<E: Engine>(
    runner: &mut JobRunner<E>,
    (start_ms, end): (i64, i64),
    mut first_events: Vec<Event>,
    steering: Steering<'_, '_>,
    follower: &mut Follower<'_>,
    tally: &mut Tally<'_>,
) -> (Option<Interrupted>, bool) {
    let options = steering.options;
    let started = Instant::now();
    let mut now = start_ms;
    let mut reached = start_ms;
    while now <= end && !runner.is_finished() && !steering.stopped() {
        if let Some(pace) = options.pace {
            let elapsed = Duration::from_millis(u64::try_from(now - start_ms).unwrap_or(0));
            if !pace::wait_until(pace::deadline(pace, started, elapsed), &|| {
                steering.stopped()
            }) {
                break;
            }
        }
        first_events.extend(take_changes(runner, follower));
        if let Some(mut report) = runner.step(now, std::mem::take(&mut first_events)) {
            report.virtual_clock = true;
            tally.account(&report);
            if report.job_gone {
                return (None, true);
            }
        }
        reached = now;
        if options.once {
            return (None, false);
        }
        now += runner.step_ms();
    }
    // A job that left the fleet by a reload was not interrupted: it ended as asked.
    let cut_short = now <= end && !runner.is_finished() && options.stop.load(Ordering::Relaxed);
    let interrupted = cut_short.then_some(Interrupted {
        at_ms: reached,
        end_ms: end,
    });
    (interrupted, false)
}

/// Steps on the wall clock, persisting the job's state after every step, until the run's
/// duration is over, the job finishes, the fleet is stopped, or the engine lost the job.
/// With `await_return` a lost job is asked for at every step until it is back (its `JobGone`
/// event is repeated once per event interval only). Returns whether the job was gone at the
/// end.
fn drive_wall<E: Engine>(
    runner: &mut JobRunner<E>,
    await_return: bool,
    mut first_events: Vec<Event>,
    steering: Steering<'_, '_>,
    follower: &mut Follower<'_>,
    tally: &mut Tally<'_>,
) -> bool {
    let options = steering.options;
    let started = Instant::now();
    let mut gone = false;
    loop {
        first_events.extend(take_changes(runner, follower));
        let now = wall_ms();
        let step_started = Instant::now();
        if let Some(report) = runner.step(now, std::mem::take(&mut first_events)) {
            gone = report.job_gone;
            tally.account(&report);
        }
        persist(runner, options.store, now, tally);
        if options.once
            || runner.is_finished()
            || (gone && !await_return)
            || options
                .wall_duration
                .is_some_and(|d| started.elapsed() >= d)
        {
            break;
        }
        let stopped = || steering.stopped();
        if !sleep_until_next_step(now, step_started, runner.step_ms(), &stopped) {
            break;
        }
    }
    gone
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

/// Waits until `step_ms` after the start of the step that began at wall time `started_ms`
/// (`started` on the monotonic clock), looking at `stop` every 100 ms; false when the fleet was
/// stopped.
///
/// The interval is measured from step start to step start: time the step itself took (an
/// engine's metric-priming wait, a slow REST answer) is not added to it. The step starts once
/// the wall clock reached `started_ms + step_ms`, so the runner finds its next cycle due; the
/// monotonic bound (twice the step) keeps a wall clock set back from stalling the loop.
fn sleep_until_next_step(
    started_ms: i64,
    started: Instant,
    step_ms: i64,
    stopped: &dyn Fn() -> bool,
) -> bool {
    let step = Duration::from_millis(u64::try_from(step_ms).unwrap_or(1000));
    let due_ms = started_ms.saturating_add(step_ms);
    let latest = started + step * 2;
    loop {
        if stopped() {
            return false;
        }
        let left_ms = due_ms.saturating_sub(wall_ms());
        if left_ms <= 0 || Instant::now() >= latest {
            return true;
        }
        let left = Duration::from_millis(u64::try_from(left_ms).unwrap_or(0));
        std::thread::sleep(Duration::from_millis(100).min(left));
    }
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
    use crate::plan::{FleetPlan, plan_fleet};
    use crate::state::InMemoryStateStore;

    /// Runs one entry's engines as the supervisor would, with a plan no reload changes.
    fn run_entry(
        job: &JobPlan,
        engines: Vec<NamedEngine>,
        interval_ms: i64,
        options: &RunOptions<'_>,
        sink: &(dyn Fn(&CycleReport) + Sync),
    ) -> Vec<JobRun> {
        let live = LiveEntry::new(job.clone(), interval_ms);
        run_engines(job, engines, (interval_ms, &live), false, options, sink)
    }

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

    mod flink {
        //! The loop on Flink jobs that restart or disappear, against the fake REST server.

        use super::*;
        use crate::alignment::JobAlignment;
        use crate::config::JobConfig;
        use crate::engine::flink::fake_server::{FakeFlink, Reply};
        use crate::engine::flink::{FlinkClient, FlinkEngine, FlinkOptions};
        use crate::plan::JobSettings;
        use crate::runner::{CooldownState, QueuedScalingEvent};
        use crate::scaling::CycleStage;
        use crate::state::{save, sections};

        const JOB: &str = "8930b1fd94e042463a80e45360195d7e";
        const COST: &str = "cfb31ddc17acace6f3c9cb0d6be81b38";
        const DETAILS: &str = include_str!("../engine/flink/testdata/job_details.json");

        fn client(fake: &FakeFlink) -> FlinkClient {
            FlinkClient::new(FlinkOptions {
                request_timeout: Duration::from_millis(400),
                connect_timeout: Duration::from_millis(400),
                backoff: Duration::from_millis(10),
                max_backoff: Duration::from_millis(20),
                ..FlinkOptions::new(fake.url())
            })
        }

        /// The fixture job restarting: state RESTARTING, no plan nodes yet.
        fn restarting() -> String {
            let mut details: serde_json::Value = serde_json::from_str(DETAILS).expect("fixture");
            details["state"] = "RESTARTING".into();
            details["plan"]["nodes"] = serde_json::json!([]);
            details.to_string()
        }

        fn serve_restarting(fake: &FakeFlink) {
            fake.json(&format!("GET /jobs/{JOB}"), &restarting());
            fake.json(
                &format!("GET /jobs/{JOB}/plan"),
                &format!(r#"{{"plan":{{"jid":"{JOB}","nodes":[]}}}}"#),
            );
        }

        /// Flink's answer about a job it does not know.
        fn not_found() -> Reply {
            let error =
                format!("org.apache.flink.runtime.rest.NotFoundException: Job {JOB} not found");
            Reply::Json(404, serde_json::json!({ "errors": [error] }).to_string())
        }

        fn plan(job_id: Option<&str>, rest: &str) -> FleetPlan {
            let id = job_id.map_or(String::new(), |id| format!("job-id = \"{id}\"\n"));
            let text = format!(
                "[[jobs]]\nname = \"cluster\"\nengine = \"flink\"\nrest = \"{rest}\"\n{id}"
            );
            let fleet = parse_fleet(Path::new("fleet.toml"), &text).expect("a valid fleet");
            plan_fleet(fleet, &NoCustomModes).expect("a valid plan")
        }

        /// Runs the entry's one engine for at most `limit` (100 ms steps); the runs and every
        /// report the sink saw.
        fn run(
            plan: &FleetPlan,
            fake: &FakeFlink,
            limit: Duration,
        ) -> (Vec<JobRun>, Vec<CycleReport>) {
            run_every(plan, fake, 100, limit)
        }

        /// Runs the entry's one engine with steps every `interval_ms` for at most `limit`.
        fn run_every(
            plan: &FleetPlan,
            fake: &FakeFlink,
            interval_ms: i64,
            limit: Duration,
        ) -> (Vec<JobRun>, Vec<CycleReport>) {
            let engine: Box<dyn Engine> = Box::new(FlinkEngine::new(client(fake), JOB));
            let stop = AtomicBool::new(false);
            let store: Mutex<Box<dyn StateStore + Send>> =
                Mutex::new(Box::new(InMemoryStateStore::new()));
            let options = RunOptions {
                once: false,
                wall_duration: Some(limit),
                simulated_duration: None,
                pace: None,
                stop: &stop,
                store: &store,
                timelines: false,
            };
            let reports = Mutex::new(Vec::new());
            let runs = run_entry(
                &plan.jobs[0],
                vec![("cluster".to_string(), engine)],
                interval_ms,
                &options,
                &|r| reports.lock().expect("reports").push(r.clone()),
            );
            (runs, reports.into_inner().expect("reports"))
        }

        fn events(reports: &[CycleReport], reason: EventReason) -> usize {
            reports
                .iter()
                .flat_map(|r| &r.events)
                .filter(|e| e.reason == reason)
                .count()
        }

        #[test]
        fn a_restarting_job_is_waiting_and_keeps_its_queued_decision() {
            let fake = FakeFlink::start();
            serve_restarting(&fake);
            let config = JobConfig::new();
            let settings = JobSettings::from_config(&config).expect("valid settings");
            let alignment =
                JobAlignment::resolve("job", &config, &NoCustomModes).expect("resolves");
            let engine = FlinkEngine::new(client(&fake), JOB);
            let mut runner = JobRunner::new("job", engine, alignment, &settings, 10_000);
            // A decision queued by the cooldown, whose period ended long ago: due now.
            let mut store = InMemoryStateStore::new();
            let queued = CooldownState {
                period_start_ms: Some(0),
                queue: vec![QueuedScalingEvent {
                    at_ms: 1,
                    parallelism: [(COST.to_string(), 4)].into(),
                }],
                last_operation: None,
            };
            save(&mut store, "job", sections::COOLDOWN, &queued).expect("save");
            let now = wall_ms();
            let restored = runner.restore(&mut store).expect("the saved queue decodes");
            assert!(restored.is_empty(), "{restored:?}");

            let report = runner.step(now, Vec::new()).expect("a step");
            assert_eq!(report.stage, Some(CycleStage::NotRunning));
            assert!(report.events.is_empty(), "{:?}", report.events);
            assert!(!report.engine_failed && !report.job_gone);
            // The queue waits for the job to run: nothing was asked of the realizer.
            assert_eq!(runner.cooldown_state().queue, queued.queue);
            assert_eq!(
                fake.count("GET", &format!("/jobs/{JOB}/resource-requirements")),
                0
            );
            assert_eq!(
                fake.requests().iter().filter(|r| r.method == "PUT").count(),
                0
            );
        }

        #[test]
        fn the_interval_runs_from_step_start_to_step_start() {
            const INTERVAL_MS: i64 = 500;
            const SLOW_MS: i64 = 250;
            let fake = FakeFlink::start();
            fake.route(
                &format!("GET /jobs/{JOB}"),
                Reply::Slow(
                    Duration::from_millis(SLOW_MS as u64),
                    200,
                    restarting().to_string(),
                ),
            );
            fake.json(
                &format!("GET /jobs/{JOB}/plan"),
                &format!(r#"{{"plan":{{"jid":"{JOB}","nodes":[]}}}}"#),
            );
            // Steps start at 0, 500, 1000 and 1500 ms, each taking 250 ms; the run ends after
            // the step that ends past 1600 ms. Counting the step's own time into the interval
            // would start them at 0, 750 and 1500 ms: three steps.
            let (runs, reports) = run_every(
                &plan(None, &fake.url()),
                &fake,
                INTERVAL_MS,
                Duration::from_millis(1600),
            );
            assert!(runs[0].steps >= 4, "{:?}", runs[0]);
            let starts: Vec<i64> = reports.iter().map(|r| r.at_ms).collect();
            for pair in starts.windows(2) {
                let gap = pair[1] - pair[0];
                // Never early; late only by scheduling noise, far less than the slow answer.
                assert!(
                    (INTERVAL_MS..INTERVAL_MS + SLOW_MS - 50).contains(&gap),
                    "steps started at {starts:?}"
                );
            }
        }

        #[test]
        fn restarting_steps_are_not_failed_steps() {
            let fake = FakeFlink::start();
            serve_restarting(&fake);
            let (runs, reports) = run(&plan(None, &fake.url()), &fake, Duration::from_millis(500));
            assert!(runs[0].steps >= 3, "{:?}", runs[0]);
            assert_eq!(runs[0].failed_steps, 0, "{:?}", runs[0]);
            assert_eq!(events(&reports, EventReason::EngineError), 0, "{reports:?}");
            assert!(!runs[0].gone);
        }

        #[test]
        fn a_job_gone_from_the_cluster_is_an_event_and_its_loop_stops() {
            let fake = FakeFlink::start();
            fake.route(&format!("GET /jobs/{JOB}"), not_found());
            let started = Instant::now();
            let (runs, reports) = run(&plan(None, &fake.url()), &fake, Duration::from_secs(5));
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "the loop went on for {:?}",
                started.elapsed()
            );
            assert!(runs[0].gone, "{:?}", runs[0]);
            assert_eq!(
                (runs[0].steps, runs[0].failed_steps),
                (1, 0),
                "{:?}",
                runs[0]
            );
            assert_eq!(events(&reports, EventReason::JobGone), 1, "{reports:?}");
            assert_eq!(events(&reports, EventReason::EngineError), 0, "{reports:?}");
            assert_eq!(fake.count("GET", &format!("/jobs/{JOB}")), 1);
        }

        #[test]
        fn a_job_the_fleet_names_is_awaited_and_resumes_when_it_is_back() {
            let fake = FakeFlink::start();
            // Gone for two steps, then back (restarting), from then on.
            fake.route(&format!("GET /jobs/{JOB}"), not_found());
            fake.route(&format!("GET /jobs/{JOB}"), not_found());
            serve_restarting(&fake);
            let (runs, reports) = run(
                &plan(Some(JOB), &fake.url()),
                &fake,
                Duration::from_millis(700),
            );
            assert!(!runs[0].gone, "back at the end: {:?}", runs[0]);
            assert!(runs[0].steps >= 4, "{:?}", runs[0]);
            assert_eq!(runs[0].failed_steps, 0, "{:?}", runs[0]);
            // Reported once (the repeat is within the event interval), then the loop resumed.
            assert_eq!(events(&reports, EventReason::JobGone), 1, "{reports:?}");
            let gone: Vec<bool> = reports.iter().map(|r| r.job_gone).collect();
            assert_eq!(&gone[..3], [true, true, false], "{gone:?}");
            assert!(
                reports[2..]
                    .iter()
                    .all(|r| r.stage == Some(CycleStage::NotRunning)),
                "{reports:?}"
            );
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
            pace: None,
            stop: &stop,
            store: &store,
            timelines: false,
        };
        let started = Instant::now();
        let runs = run_entry(&plan.jobs[0], engines, 100, &options, &|_| {});
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
            pace: None,
            stop: &stop,
            store: &store,
            timelines: false,
        };
        let reports = Mutex::new(Vec::new());
        let runs = run_entry(&plan.jobs[0], engines, 100, &options, &|report| {
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
