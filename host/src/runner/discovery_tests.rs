//! Fleet entries that discover their cluster's jobs (no `job-id`) when the cluster cannot be
//! reached at start: the entry waits and tries again while the other jobs go on, its jobs start
//! once the cluster answers, and a reload that removes or changes it ends the wait.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use flowscale_tests::flink::wait_for;
use flowscale_tests::refusing_address;

use crate::alignment::NoCustomModes;
use crate::config::parse_fleet;
use crate::engine::flink::fake_server::{FakeFlink, Reply};
use crate::events::{Event, EventReason};
use crate::plan::{FleetPlan, plan_fleet};
use crate::runner::{CycleReport, FleetSource, JobRun, RunOptions, run_fleet_reloading, wall_ms};
use crate::state::{InMemoryStateStore, StateStore};

const JOB: &str = "8930b1fd94e042463a80e45360195d7e";
const OTHER_JOB: &str = "0000000000000000000000000000beef";
const OVERVIEW: &str = include_str!("../engine/flink/testdata/jobs_overview.json");

/// What discovery reports while it waits.
const WAITING: &str = "cannot list the cluster's jobs";

/// A cluster running the fixture's one job ([`JOB`]), restarting.
fn cluster_at(addr: SocketAddr) -> FakeFlink {
    let fake = FakeFlink::start_at(addr);
    fake.json("GET /jobs/overview", OVERVIEW);
    fake.serve_restarting(JOB);
    fake
}

/// A fleet, every 100 ms, of `a` (the job [`OTHER_JOB`] at `steady`) and, when given, `disc`,
/// which discovers the jobs at `discovering`.
fn plan(steady: &str, discovering: Option<&str>) -> FleetPlan {
    let mut text = format!(
        "[host]\ninterval = \"100ms\"\n\n[[jobs]]\nname = \"a\"\nengine = \"flink\"\n\
         rest = \"{steady}\"\njob-id = \"{OTHER_JOB}\"\n"
    );
    if let Some(rest) = discovering {
        text.push_str(&format!(
            "\n[[jobs]]\nname = \"disc\"\nengine = \"flink\"\nrest = \"{rest}\"\n"
        ));
    }
    let fleet = parse_fleet(Path::new("fleet.toml"), &text).expect("a valid fleet");
    plan_fleet(fleet, &NoCustomModes).expect("a valid plan")
}

/// The plans a test hands over while the fleet runs, and what applying them said.
#[derive(Default)]
struct Reloads {
    pending: Mutex<Vec<FleetPlan>>,
    applied: Mutex<Vec<(i64, Event)>>,
    left: Mutex<Vec<JobRun>>,
}

struct Source<'a>(&'a Reloads);

impl FleetSource for Source<'_> {
    fn poll(&mut self) -> Option<FleetPlan> {
        let mut pending = self.0.pending.lock().expect("pending");
        (!pending.is_empty()).then(|| pending.remove(0))
    }

    fn applied(&mut self, event: Event) {
        self.0
            .applied
            .lock()
            .expect("applied")
            .push((wall_ms(), event));
    }

    fn left(&mut self, runs: Vec<JobRun>) {
        self.0.left.lock().expect("left").extend(runs);
    }
}

/// A fleet running in the background; the test looks at its reports and stops it.
struct Fleet {
    stop: AtomicBool,
    reports: Mutex<Vec<CycleReport>>,
    reloads: Reloads,
}

impl Fleet {
    fn new() -> Fleet {
        Fleet {
            stop: AtomicBool::new(false),
            reports: Mutex::new(Vec::new()),
            reloads: Reloads::default(),
        }
    }

    /// Runs `plan` until `drive` returns, then stops it; the runs it returned.
    fn run(&self, plan: FleetPlan, drive: impl FnOnce(&Fleet)) -> Vec<JobRun> {
        let store: Mutex<Box<dyn StateStore + Send>> =
            Mutex::new(Box::new(InMemoryStateStore::new()));
        std::thread::scope(|scope| {
            let running = scope.spawn(|| {
                let options = RunOptions::new(&self.stop, &store);
                let sink = |r: &CycleReport| self.reports.lock().expect("reports").push(r.clone());
                let mut source = Source(&self.reloads);
                run_fleet_reloading(plan, &options, &sink, Some(&mut source))
            });
            // Stopped however `drive` ends: a failed assertion must not leave the fleet running.
            let stop = StopOnDrop(&self.stop);
            drive(self);
            drop(stop);
            running.join().expect("the fleet ends")
        })
    }

    fn reports(&self) -> Vec<CycleReport> {
        self.reports.lock().expect("reports").clone()
    }

    /// The messages of `job`'s events of `reason`, with when they were reported.
    fn events(&self, job: &str, reason: EventReason) -> Vec<(i64, String)> {
        self.reports()
            .iter()
            .filter(|r| r.job == job)
            .flat_map(|r| r.events.iter().map(move |e| (r.at_ms, e)))
            .filter(|(_, e)| e.reason == reason)
            .map(|(at, e)| (at, e.message.clone()))
            .collect()
    }

    /// The reports of `job` that are decision cycles of its control loop (discovery's waiting
    /// reports none: its failures are repeated without their event within the event interval).
    fn steps(&self, job: &str) -> usize {
        self.reports()
            .iter()
            .filter(|r| r.job == job && r.stage.is_some())
            .count()
    }

    fn reload(&self, plan: FleetPlan) -> i64 {
        let before = self.reloads.applied.lock().expect("applied").len();
        self.reloads.pending.lock().expect("pending").push(plan);
        wait_for("the reload", Duration::from_secs(10), || {
            let applied = self.reloads.applied.lock().expect("applied");
            applied.get(before).map(|(at, _)| *at)
        })
    }
}

/// Sets the flag when dropped, also while a panic unwinds.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn an_entry_whose_cluster_is_down_at_start_waits_and_starts_its_jobs_once_it_answers() {
    let steady = FakeFlink::start();
    steady.serve_restarting(OTHER_JOB);
    let addr = refusing_address();
    let rest = format!("http://{addr}");
    let fleet = Fleet::new();
    let mut up = None;
    let runs = fleet.run(plan(&steady.url(), Some(&rest)), |fleet| {
        // The cluster refuses connections: one line naming its address and the cause.
        let waiting = wait_for("a failed discovery", Duration::from_secs(20), || {
            fleet
                .events("disc", EventReason::EngineError)
                .into_iter()
                .next()
        });
        let line = &waiting.1;
        assert!(line.contains(WAITING), "{line}");
        assert!(line.contains(&rest), "names the address: {line}");
        assert!(line.to_lowercase().contains("refused"), "the cause: {line}");
        assert!(!line.contains('\n'), "one line: {line}");
        // The other job goes on meanwhile, and the entry is not given up.
        let before = fleet.steps("a");
        wait_for("the other job's steps", Duration::from_secs(20), || {
            (fleet.steps("a") >= before + 3).then_some(())
        });
        assert_eq!(fleet.steps("disc"), 0, "no job of the cluster runs yet");
        // The cluster comes up at the address: its job is found and runs.
        up = Some(cluster_at(addr));
        wait_for(
            "the discovered job's steps",
            Duration::from_secs(20),
            || (fleet.steps("disc") >= 2).then_some(()),
        );
    });
    let up = up.expect("the cluster came up");
    assert!(up.count("GET", "/jobs/overview") >= 1);
    assert!(
        up.count("GET", &format!("/jobs/{JOB}")) >= 2,
        "the job is observed"
    );
    let disc = runs
        .iter()
        .find(|r| r.name == "disc")
        .expect("the discovered job's run");
    assert_eq!(disc.error, None, "{disc:?}");
    assert!(disc.steps >= 2, "{disc:?}");
    let a = runs.iter().find(|r| r.name == "a").expect("a's run");
    assert_eq!(a.error, None, "{a:?}");
}

#[test]
fn an_entry_refused_at_start_names_the_cause_and_runs_once_it_is_let_in() {
    let steady = FakeFlink::start();
    steady.serve_restarting(OTHER_JOB);
    let cluster = FakeFlink::start();
    let refused = r#"{"errors":["Unauthorized"]}"#;
    for _ in 0..3 {
        cluster.route("GET /jobs/overview", Reply::Json(401, refused.to_string()));
    }
    cluster.json("GET /jobs/overview", OVERVIEW);
    cluster.serve_restarting(JOB);
    let fleet = Fleet::new();
    let runs = fleet.run(plan(&steady.url(), Some(&cluster.url())), |fleet| {
        wait_for(
            "the discovered job's steps",
            Duration::from_secs(30),
            || (fleet.steps("disc") >= 2).then_some(()),
        );
    });
    let refusals = fleet.events("disc", EventReason::EngineError);
    let line = &refusals.first().expect("the refusal is reported").1;
    assert!(line.contains(WAITING), "{line}");
    assert!(line.contains(&cluster.url()), "names the address: {line}");
    assert!(
        line.contains("HTTP 401: authentication refused"),
        "the cause: {line}"
    );
    assert_eq!(
        cluster.count("GET", "/jobs/overview"),
        4,
        "three refusals, then found"
    );
    let disc = runs.iter().find(|r| r.name == "disc").expect("disc's run");
    assert_eq!(disc.error, None, "{disc:?}");
}

#[test]
fn a_reload_that_changes_or_removes_a_waiting_entry_ends_its_wait() {
    let steady = FakeFlink::start();
    steady.serve_restarting(OTHER_JOB);
    let down = format!("http://{}", refusing_address());
    let fleet = Fleet::new();
    let live = FakeFlink::start();
    live.json("GET /jobs/overview", OVERVIEW);
    live.serve_restarting(JOB);
    let runs = fleet.run(plan(&steady.url(), Some(&down)), |fleet| {
        wait_for("a failed discovery", Duration::from_secs(20), || {
            fleet
                .events("disc", EventReason::EngineError)
                .into_iter()
                .next()
        });
        // Pointed at a cluster that answers: the waiting entry ends, the new one runs.
        let changed = fleet.reload(plan(&steady.url(), Some(&live.url())));
        wait_for("the new entry's steps", Duration::from_secs(20), || {
            (fleet.steps("disc") >= 2).then_some(())
        });
        // The old entry no longer tries its address once the reload is applied (one attempt
        // may have been under way: a connection refused takes well under 100 ms to fail, and
        // its retries under a second).
        let late: Vec<_> = fleet
            .events("disc", EventReason::EngineError)
            .into_iter()
            .filter(|(at, message)| message.contains(&down) && *at > changed + 1500)
            .collect();
        assert!(late.is_empty(), "the old entry still tries: {late:?}");
        // Removed: its job stops.
        let removed = fleet.reload(plan(&steady.url(), None));
        std::thread::sleep(Duration::from_millis(500));
        let after: Vec<_> = fleet
            .reports()
            .into_iter()
            .filter(|r| r.job == "disc" && r.at_ms > removed + 300)
            .collect();
        assert!(after.is_empty(), "{after:?}");
    });
    let messages: Vec<String> = fleet
        .reloads
        .applied
        .lock()
        .expect("applied")
        .iter()
        .map(|(_, e)| e.message.clone())
        .collect();
    assert_eq!(
        messages,
        [
            "configuration reloaded: restarted without saved state (engine changed) disc",
            "configuration reloaded: removed disc",
        ]
    );
    // The waiting entry left without a run (it ran nothing), the discovered job with its steps.
    let left = fleet.reloads.left.lock().expect("left");
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].name, "disc");
    assert!(left[0].steps >= 2 && left[0].error.is_none(), "{left:?}");
    assert!(runs.iter().all(|r| r.name == "a"), "{runs:?}");
}
