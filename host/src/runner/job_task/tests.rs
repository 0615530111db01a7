//! One entry's jobs on the scheduler: engines that restart, disappear, fail or cannot read
//! their state.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use super::*;
use crate::alignment::NoCustomModes;
use crate::config::parse_fleet;
use crate::engine::flink::ClusterLimits;
use crate::engine::{Clock, Collector, Engine, EngineError, JobObservation, Realizer};
use crate::events::{Event, EventReason};
use crate::plan::JobPlan;
use crate::plan::{FleetPlan, plan_fleet};
use crate::runner::JobRunner;
use crate::runner::engines::NamedEngine;
use crate::runner::fleet::{JobRun, RunOptions, wall_ms};
use crate::runner::job_task::{EntryOutcome, Env, Start, engine_tasks};
use crate::runner::live::LiveEntry;
use crate::runner::report::CycleReport;
use crate::runner::scheduler::{PoolConfig, Scheduler};
use crate::runner::slot_share::ClusterShares;
use crate::state::InMemoryStateStore;
use crate::state::StateStore;

/// Runs one entry's engines as the supervisor would, with a plan no reload changes.
fn run_entry(
    job: &JobPlan,
    engines: Vec<NamedEngine>,
    interval_ms: i64,
    options: &RunOptions<'_>,
    sink: &(dyn Fn(&CycleReport) + Sync),
) -> Vec<JobRun> {
    let live = Arc::new(LiveEntry::new(job.clone(), interval_ms));
    let limits = ClusterLimits::new(4);
    let shares = ClusterShares::new(true);
    let env = Env {
        options,
        sink,
        limits: &limits,
        shares: &shares,
    };
    let outcome = Arc::new(EntryOutcome::default());
    let config = PoolConfig {
        workers: 2,
        network_threads: 4,
        stuck_after: None,
        max_substitutes: 0,
    };
    std::thread::scope(|scope| {
        let pool = Scheduler::start(scope, config, options.stop, None);
        let start = Start {
            env,
            live: &live,
            outcome: &outcome,
            job,
            interval_ms,
        };
        for task in engine_tasks(&start, false, engines, None) {
            pool.submit(task);
        }
        pool.wait_idle();
    });
    outcome.take_runs()
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
    fn rescale_fenced(
        &mut self,
        _: &BTreeMap<String, u32>,
        _: &dyn crate::engine::WriteFence,
    ) -> Result<(), EngineError> {
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
    use crate::runner::CooldownState;
    use crate::runner::cooldown::QueuedScalingEvent;
    use crate::scaling::CycleStage;
    use crate::state::{save, sections};

    const JOB: &str = "8930b1fd94e042463a80e45360195d7e";
    const COST: &str = "cfb31ddc17acace6f3c9cb0d6be81b38";
    const DETAILS: &str = include_str!("../../engine/flink/testdata/job_details.json");

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
        let error = format!("org.apache.flink.runtime.rest.NotFoundException: Job {JOB} not found");
        Reply::Json(404, serde_json::json!({ "errors": [error] }).to_string())
    }

    fn plan(job_id: Option<&str>, rest: &str) -> FleetPlan {
        let id = job_id.map_or(String::new(), |id| format!("job-id = \"{id}\"\n"));
        let text =
            format!("[[jobs]]\nname = \"cluster\"\nengine = \"flink\"\nrest = \"{rest}\"\n{id}");
        let fleet = parse_fleet(Path::new("fleet.toml"), &text).expect("a valid fleet");
        plan_fleet(fleet, &NoCustomModes).expect("a valid plan")
    }

    /// Runs the entry's one engine for at most `limit` (100 ms steps); the runs and every
    /// report the sink saw.
    fn run(plan: &FleetPlan, fake: &FakeFlink, limit: Duration) -> (Vec<JobRun>, Vec<CycleReport>) {
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
            wall_duration: Some(limit),
            ..RunOptions::new(&stop, &store)
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
        let alignment = JobAlignment::resolve("job", &config, &NoCustomModes).expect("resolves");
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
        // Every step after the first was due at a set time: how late it started goes with its
        // report (for the server's histogram), as does the job's interval.
        let late: Vec<Option<Duration>> = reports.iter().map(|r| r.lateness).collect();
        assert_eq!(late[0], None, "{late:?}");
        assert!(
            late[1..]
                .iter()
                .all(|l| l.is_some_and(|l| l < Duration::from_millis(SLOW_MS as u64 - 50))),
            "{late:?}"
        );
        assert!(
            reports
                .iter()
                .all(|r| r.decision_interval == Some(Duration::from_millis(INTERVAL_MS as u64))),
            "{reports:?}"
        );
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
    let store: Mutex<Box<dyn StateStore + Send>> = Mutex::new(Box::new(InMemoryStateStore::new()));
    let options = RunOptions {
        wall_duration: Some(Duration::from_millis(600)),
        ..RunOptions::new(&stop, &store)
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
        ..RunOptions::new(&stop, &store)
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
