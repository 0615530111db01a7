//! The control loop on the simulator: cooldown spacing and rate control, seen in the timeline.

use std::collections::BTreeMap;

use super::JobRunner;
use super::job::REPORT_HEADER_QUEUED;
use super::report::format_time;
use crate::alignment::{JobAlignment, NoCustomModes};
use crate::config::JobConfig;
use crate::events::EventReason;
use crate::plan::JobSettings;
use crate::scaling::{CycleStage, REPORT_HEADER_ENABLED};
use crate::sim::Simulation;

fn example(name: &str) -> Simulation {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/jobs")
        .join(name);
    let mut sim = Simulation::from_file(&path).expect("the example job loads");
    sim.record_timeline(true);
    sim
}

fn runner(sim: Simulation, pairs: &[(&str, &str)]) -> JobRunner<Simulation> {
    let config = JobConfig::from_pairs(pairs.iter().copied());
    let settings = JobSettings::from_config(&config).expect("valid settings");
    let alignment = JobAlignment::resolve("job", &config, &NoCustomModes).expect("resolves");
    JobRunner::new("job", sim, alignment, &settings, 10_000)
}

/// Runs for `hours` of simulated time; returns the instants (s) at which rescales were requested.
fn run(runner: &mut JobRunner<Simulation>, hours: i64) -> Vec<i64> {
    run_observed(runner, 0, hours).0
}

/// Runs from hour `from` to hour `to`, also returning the most records queued inside the job
/// over that span.
fn run_observed(runner: &mut JobRunner<Simulation>, from: i64, to: i64) -> (Vec<i64>, u64) {
    let end = to * 3_600_000;
    let mut now = from * 3_600_000;
    let mut most_in_flight = 0;
    while now <= end {
        runner.step(now, Vec::new());
        most_in_flight = most_in_flight.max(runner.engine().records_in_flight());
        now += runner.step_ms();
    }
    let rescales = runner
        .engine()
        .timeline()
        .rows
        .iter()
        .filter(|row| row.events.iter().any(|e| e.starts_with("rescale")))
        .map(|row| row.t_ms / 1000)
        .collect();
    (rescales, most_in_flight)
}

const FAST: &[(&str, &str)] = &[
    ("metrics.window", "3 min"),
    ("stabilization.interval", "1 min"),
    ("scale-down.interval", "0"),
];

#[test]
fn rescales_are_never_closer_than_the_cooldown_period() {
    let mut without = runner(
        example("diurnal.toml"),
        &[FAST, &[("scaling-cooldown-period", "0")]].concat(),
    );
    let free = run(&mut without, 30);
    let mut with = runner(
        example("diurnal.toml"),
        &[FAST, &[("scaling-cooldown-period", "45 min")]].concat(),
    );
    let cooled = run(&mut with, 30);
    let gaps = |times: &[i64]| times.windows(2).map(|w| w[1] - w[0]).collect::<Vec<_>>();
    assert!(
        gaps(&free).iter().any(|&g| g < 45 * 60),
        "without cooldown some rescales come closer than 45 min: {free:?}"
    );
    assert!(cooled.len() >= 2, "the cooled job still scales: {cooled:?}");
    assert!(
        gaps(&cooled).iter().all(|&g| g >= 45 * 60),
        "with a 45 min cooldown no two rescales are closer: {cooled:?}"
    );
    let queued = with
        .events()
        .events()
        .filter(|e| e.event.reason == EventReason::CooldownQueued)
        .count();
    assert!(
        queued > 0,
        "some scaling events waited for the end of a period"
    );
}

#[test]
fn a_queued_decision_reports_that_the_cooldown_queued_it_and_until_when() {
    const PERIOD_MS: i64 = 45 * 60_000;
    let mut runner = runner(
        example("diurnal.toml"),
        &[FAST, &[("scaling-cooldown-period", "45 min")]].concat(),
    );
    let mut last_operation_ms = None;
    let (mut queued, mut executed) = (0, 0);
    let mut now = 0;
    while now <= 30 * 3_600_000 {
        if let Some(report) = runner.step(now, Vec::new()) {
            let scaling_reports: Vec<&str> = report
                .events
                .iter()
                .filter(|e| e.reason == EventReason::ScalingReport)
                .map(|e| e.message.as_str())
                .collect();
            if report.operation.is_some() {
                last_operation_ms = Some(now);
            }
            for message in scaling_reports {
                if report.queued {
                    queued += 1;
                    // The period started by the last operation ends one period later.
                    let end_ms = last_operation_ms.expect("a period runs") + PERIOD_MS;
                    let expected = format!(
                        "{REPORT_HEADER_QUEUED} {}, {} s from now (`scaling-cooldown-period`), \
                         then scaling vertices:{{ Vertex ID ",
                        format_time(end_ms),
                        (end_ms - now + 999) / 1000
                    );
                    assert!(message.starts_with(&expected), "{message}\n{expected}");
                } else if report.operation.is_some() {
                    executed += 1;
                    assert!(message.starts_with(REPORT_HEADER_ENABLED), "{message}");
                }
            }
        }
        now += runner.step_ms();
    }
    assert!(
        queued > 0 && executed > 0,
        "{queued} queued, {executed} executed"
    );
}

#[test]
fn a_reconfigured_job_keeps_what_it_learned_and_decides_with_the_new_mode() {
    let mut runner = runner(
        example("diurnal.toml"),
        &[FAST, &[("scaling-cooldown-period", "45 min")]].concat(),
    );
    let mut now = 0;
    while now <= 6 * 3_600_000 {
        runner.step(now, Vec::new());
        now += runner.step_ms();
    }
    let learned = runner.scaling_state().clone();
    let cooldown = runner.cooldown_state().clone();
    let events = runner.events().len();
    assert!(
        !learned.scaling_history.vertices.is_empty(),
        "it scaled before"
    );

    let config =
        JobConfig::from_pairs([FAST, &[("scaling.alignment.mode", "EVENLY_SPREAD")]].concat());
    let settings = JobSettings::from_config(&config).expect("valid settings");
    let alignment = JobAlignment::resolve("job", &config, &NoCustomModes).expect("resolves");
    runner.reconfigure(alignment, &settings, 10_000);
    // Compared as text: the metric window holds NaNs, which never compare equal.
    assert!(
        format!("{:?}", runner.scaling_state()) == format!("{learned:?}"),
        "the window and history are kept"
    );
    assert_eq!(runner.cooldown_state(), &cooldown);
    assert_eq!(runner.events().len(), events);
    assert_eq!(runner.alignment().mode_id(), "EVENLY_SPREAD");

    let mut modes = Vec::new();
    while now <= 30 * 3_600_000 {
        if let Some(report) = runner.step(now, Vec::new()) {
            modes.extend(report.vertices.iter().filter_map(|v| v.mode.clone()));
        }
        now += runner.step_ms();
    }
    assert!(!modes.is_empty(), "it decided again");
    assert!(modes.iter().all(|m| &**m == "EVENLY_SPREAD"), "{modes:?}");
}

/// A keyed job whose operator (8 × 300 records/s) cannot keep up with 5,000 records/s, with
/// deep input buffers: without rate control the source fills them.
const OVERLOADED: &str = r#"
[job]
name = "overloaded"
seed = 1

[[vertices]]
id = "src"
name = "Source: events"
kind = "source"
parallelism = 4
capacity = 1000000
partitions = 4

[[vertices]]
id = "agg"
kind = "operator"
parallelism = 8
max_parallelism = 128
capacity = 300
buffer = 2000

[[vertices]]
id = "sink"
kind = "sink"
parallelism = 2
capacity = 10000000

[[edges]]
from = "src"
to = "agg"
ship = "HASH"

[[edges]]
from = "agg"
to = "sink"
ship = "REBALANCE"

[workload.src]
[[workload.src.rate]]
kind = "constant"
rate = 5000
"#;

#[test]
fn rate_control_bounds_what_waits_inside_the_job() {
    // Scaling off (advisor mode): only rate control acts.
    let advisor: &[(&str, &str)] = &[("scaling.enabled", "false")];
    let sim = || {
        let mut sim: Simulation = OVERLOADED.parse().expect("the job parses");
        sim.record_timeline(true);
        sim
    };
    // The first minutes fill the buffers before the controller has two batches to estimate
    // from; what matters is what waits inside the job once it has engaged.
    let mut uncontrolled = runner(sim(), &[FAST, advisor].concat());
    run_observed(&mut uncontrolled, 0, 1);
    let (_, queued_uncontrolled) = run_observed(&mut uncontrolled, 1, 2);
    let mut controlled = runner(
        sim(),
        &[FAST, advisor, &[("backpressure.enabled", "true")]].concat(),
    );
    run_observed(&mut controlled, 0, 1);
    let (_, queued_controlled) = run_observed(&mut controlled, 1, 2);
    let limits: Vec<f64> = controlled
        .engine()
        .timeline()
        .rows
        .iter()
        .filter_map(|row| row.rate_limits.first().copied().flatten())
        .collect();
    assert!(
        !limits.is_empty(),
        "the PID controller published rate limits"
    );
    let last = limits[limits.len() - 1];
    assert!(
        (last - 2400.0).abs() < 2400.0 * 0.1,
        "the limit settles near what the job can process (2,400 records/s): {last}"
    );
    assert!(
        queued_uncontrolled > 10_000 && queued_controlled * 10 < queued_uncontrolled,
        "most records queued inside the job in its second hour: {queued_controlled} with rate control, {queued_uncontrolled} without"
    );
}

/// An engine that cannot be reached for its first `failures` observations.
struct Flaky {
    inner: Simulation,
    failures: usize,
}

impl crate::engine::Collector for Flaky {
    fn observe(
        &mut self,
        now_ms: i64,
    ) -> Result<crate::engine::JobObservation, crate::engine::EngineError> {
        if self.failures > 0 {
            self.failures -= 1;
            return Err(crate::engine::EngineError::Unreachable(
                "connection refused".into(),
            ));
        }
        self.inner.observe(now_ms)
    }
}

impl crate::engine::Realizer for Flaky {
    fn rescale_fenced(
        &mut self,
        parallelism: &BTreeMap<String, u32>,
        fence: &dyn crate::engine::WriteFence,
    ) -> Result<(), crate::engine::EngineError> {
        self.inner.rescale_fenced(parallelism, fence)
    }
}

impl crate::engine::Engine for Flaky {
    fn clock(&self) -> crate::engine::Clock {
        self.inner.clock()
    }
}

#[test]
fn an_unreachable_engine_is_an_event_and_the_loop_goes_on() {
    let config = JobConfig::from_pairs(FAST.iter().copied());
    let settings = JobSettings::from_config(&config).expect("valid");
    let alignment = JobAlignment::resolve("job", &config, &NoCustomModes).expect("resolves");
    let flaky = Flaky {
        inner: example("keyed-step-spike.toml"),
        failures: 2,
    };
    let mut r = JobRunner::new("job", flaky, alignment, &settings, 10_000);
    let first = r.step(0, Vec::new()).expect("a step");
    assert_eq!(first.events.len(), 1);
    assert_eq!(first.events[0].reason, EventReason::EngineError);
    assert!(first.events[0].message.contains("connection refused"));
    // The same failure again within the event interval is counted but not reported twice.
    let second = r.step(10_000, Vec::new()).expect("a step");
    assert!(second.events.is_empty(), "{:?}", second.events);
    assert!(first.engine_failed && second.engine_failed);
    let third = r.step(20_000, Vec::new()).expect("a step");
    assert!(
        third.stage.is_some(),
        "the engine answers again and the cycle runs"
    );
    assert!(!third.engine_failed);
}

#[test]
fn a_queued_decision_enters_the_history_when_it_is_executed() {
    let mut r = runner(
        example("diurnal.toml"),
        &[FAST, &[("scaling-cooldown-period", "45 min")]].concat(),
    );
    let mut queued_at = None;
    let mut now = 0;
    while now <= 30 * 3_600_000 {
        let report = r.step(now, Vec::new());
        if let Some(report) = report {
            let state = r.scaling_state();
            let at_now = |t: i64| {
                state
                    .scaling_history
                    .vertices
                    .values()
                    .any(|e| e.contains_key(&t))
                    || state.scaling_tracking.records.contains_key(&t)
            };
            if report.queued && queued_at.is_none() {
                assert!(!at_now(now), "a queued decision is not history yet");
                assert!(!state.pending_summaries.is_empty());
                queued_at = Some(now);
            } else if let (Some(_), Some(operation)) = (queued_at, &report.operation) {
                assert!(at_now(now), "the executed operation is history at {now}");
                for vertex in operation.keys() {
                    let entries = &state.scaling_history.vertices[vertex];
                    assert_eq!(entries[&now].new_parallelism, operation[vertex]);
                }
                assert!(state.pending_summaries.is_empty());
                return;
            }
        }
        now += r.step_ms();
    }
    panic!("no queued decision was executed (queued at {queued_at:?})");
}

#[test]
fn a_restarted_host_resumes_the_window_history_and_cooldown() {
    use crate::state::{InMemoryStateStore, StateStore};
    let config: &[(&str, &str)] = &[FAST, &[("scaling-cooldown-period", "45 min")]].concat();
    // Run until a decision is queued by the cooldown, then "restart the host".
    let (first, _) = queued_runner(config);
    let mut store = InMemoryStateStore::new();
    first.persist(&mut store).expect("persisted");
    store.flush().expect("flushed");

    let mut second = runner(example("diurnal.toml"), config);
    let reported = second.restore(&mut store).expect("restored");
    assert!(reported.is_empty(), "{reported:?}");
    // Compared as persisted JSON: the state holds NaN halves of metrics, which never compare equal.
    let sections = |r: &JobRunner<Simulation>| {
        serde_json::to_string(&r.scaling_state().to_sections().expect("serializable"))
            .expect("json")
    };
    assert!(
        sections(&second) == sections(&first),
        "the decision state survived"
    );
    assert!(!second.scaling_state().metric_history.samples.is_empty());
    assert!(!second.scaling_state().pending_summaries.is_empty());
    assert_eq!(second.cooldown_state(), first.cooldown_state());
    assert!(
        !second.cooldown_state().queue.is_empty(),
        "the queued event survived"
    );
    assert_eq!(
        second.events().events().count(),
        first.events().events().count(),
        "the recent events survived"
    );
}

/// A runner of the diurnal job with a cooldown, stepped until a decision is queued; returns it
/// and the instant of the queued decision.
fn queued_runner(config: &[(&str, &str)]) -> (JobRunner<Simulation>, i64) {
    let mut r = runner(example("diurnal.toml"), config);
    let mut now = 0;
    loop {
        assert!(now <= 30 * 3_600_000, "no decision was queued");
        if r.step(now, Vec::new()).is_some_and(|report| report.queued) {
            return (r, now);
        }
        now += r.step_ms();
    }
}

#[test]
fn one_unreadable_section_starts_empty_and_every_other_one_resumes() {
    use crate::scaling::SECTION_SCALING_HISTORY;
    use crate::state::{InMemoryStateStore, StateStore, sections};
    let config: &[(&str, &str)] = &[FAST, &[("scaling-cooldown-period", "45 min")]].concat();
    let (first, queued_at) = queued_runner(config);
    let mut store = InMemoryStateStore::new();
    first.persist(&mut store).expect("persisted");
    let as_stored = store.sections("job").expect("stored").clone();
    // Valid JSON of the wrong type in one section.
    store.put("job", SECTION_SCALING_HISTORY, serde_json::json!("garbage"));

    let mut second = runner(example("diurnal.toml"), config);
    let reported = second.restore(&mut store).expect("restored");
    assert_eq!(reported.len(), 1, "{reported:?}");
    assert_eq!(reported[0].reason, EventReason::StateQuarantined);
    assert!(
        reported[0].message.contains(SECTION_SCALING_HISTORY),
        "{}",
        reported[0].message
    );
    // What it held is kept.
    let (job, kept) = &store.quarantined()[0];
    assert_eq!(job, "job");
    assert_eq!(kept[SECTION_SCALING_HISTORY], serde_json::json!("garbage"));

    // Only that section starts empty. Before, all six of the pipeline did.
    assert!(second.scaling_state().scaling_history.vertices.is_empty());
    assert!(!first.scaling_state().scaling_history.vertices.is_empty());
    let mut persisted = InMemoryStateStore::new();
    second.persist(&mut persisted).expect("persisted");
    let resumed = persisted.sections("job").expect("stored");
    for (section, value) in &as_stored {
        // The event log resumes its events; its dedupe memory starts afresh at every start.
        let (resumed, value) = if section == sections::EVENTS {
            (&resumed[section]["events"], &value["events"])
        } else {
            (&resumed[section], value)
        };
        if section != SECTION_SCALING_HISTORY {
            // Compared as text: metric samples hold NaN, which never compares equal.
            assert_eq!(
                resumed.to_string(),
                value.to_string(),
                "section `{section}` resumed"
            );
        }
    }
    assert!(
        !second.cooldown_state().queue.is_empty(),
        "the queued operation survived"
    );
    assert!(resumed.contains_key(sections::EVENTS));

    // The first step reports it, in the step's events (the readable log and the JSON stream).
    let step = second.step(queued_at + 10_000, reported).expect("a step");
    assert!(
        step.events
            .iter()
            .any(|e| e.reason == EventReason::StateQuarantined),
        "{:?}",
        step.events
    );
}

#[test]
fn an_engine_still_unreachable_after_a_restart_is_reported_at_its_first_step() {
    use crate::state::{InMemoryStateStore, StateStore};
    let config = JobConfig::from_pairs(FAST.iter().copied());
    let settings = JobSettings::from_config(&config).expect("valid");
    let unreachable = || {
        let alignment = JobAlignment::resolve("job", &config, &NoCustomModes).expect("resolves");
        let flaky = Flaky {
            inner: example("keyed-step-spike.toml"),
            failures: usize::MAX,
        };
        JobRunner::new("job", flaky, alignment, &settings, 10_000)
    };
    let engine_errors = |report: &super::CycleReport| {
        report
            .events
            .iter()
            .filter(|e| e.reason == EventReason::EngineError)
            .count()
    };
    let mut before = unreachable();
    assert_eq!(
        engine_errors(&before.step(0, Vec::new()).expect("a step")),
        1
    );
    assert_eq!(
        engine_errors(&before.step(10_000, Vec::new()).expect("a step")),
        0
    );
    let mut store = InMemoryStateStore::new();
    before.persist(&mut store).expect("persisted");
    store.flush().expect("flushed");

    // Restarted a minute later, well within the 30 min event interval.
    let mut after = unreachable();
    let reported = after.restore(&mut store).expect("restored");
    let first = after.step(60_000, reported).expect("a step");
    assert_eq!(engine_errors(&first), 1, "{:?}", first.events);
    assert_eq!(
        engine_errors(&after.step(70_000, Vec::new()).expect("a step")),
        0
    );
}

/// Leases that admit every rescale until `refuse` is set, recording each attempt.
#[derive(Default)]
struct StubLeases {
    refuse: std::sync::atomic::AtomicBool,
    attempts: std::sync::Mutex<Vec<(i64, bool)>>,
    /// The token `held` answers with (no lease when `None`).
    holding: std::sync::Mutex<Option<i64>>,
}

impl crate::state::JobLeases for StubLeases {
    fn host_id(&self) -> &str {
        "stub"
    }
    fn want(&self, _: &str) {}
    fn unwant(&self, _: &str) {}
    fn set_busy(&self, _: &str, _: bool) {}
    fn lease(&self, _: &str) -> Option<crate::state::HeldLease> {
        let token = (*self.holding.lock().expect("holding"))?;
        let now = std::time::Instant::now();
        let hour = std::time::Duration::from_secs(3600);
        Some(crate::state::HeldLease {
            token,
            since: now.checked_sub(hour).unwrap_or(now),
            until: now + hour,
        })
    }
    fn owners(&self) -> BTreeMap<String, crate::state::LeaseOwner> {
        BTreeMap::new()
    }
    fn claim_now(&self) -> Result<(), crate::state::StateError> {
        Ok(())
    }
    fn admit(
        &self,
        _: &str,
        token: i64,
        _: &BTreeMap<String, u32>,
    ) -> Result<(), crate::state::Fenced> {
        let refused = self.refuse.load(std::sync::atomic::Ordering::Relaxed);
        self.attempts
            .lock()
            .expect("attempts")
            .push((token, !refused));
        if refused {
            Err(crate::state::Fenced::Superseded {
                token,
                current: token + 1,
                owner: Some("other".into()),
            })
        } else {
            Ok(())
        }
    }
}

#[test]
fn a_taken_over_job_resumes_its_state_and_a_fenced_rescale_is_not_sent() {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use crate::state::{InMemoryStateStore, JobLeases, StateStore};
    let config: &[(&str, &str)] = &[FAST, &[("scaling-cooldown-period", "45 min")]].concat();
    // The previous owner queued a decision and stored its state.
    let (first, queued_at) = queued_runner(config);
    let mut store = InMemoryStateStore::new();
    first.persist(&mut store).expect("persisted");
    store.flush().expect("flushed");

    // A runner that ran on its own before (stale state) takes the job over: it resumes the
    // stored cooldown queue and events, not its own.
    let mut heir = runner(
        example("diurnal.toml"),
        &[FAST, &[("scaling-cooldown-period", "0")]].concat(),
    );
    run(&mut heir, 2);
    let leases = Arc::new(StubLeases::default());
    *leases.holding.lock().expect("holding") = Some(5);
    let reported = heir
        .take_over(&mut store, Arc::clone(&leases) as Arc<dyn JobLeases>, 5)
        .expect("taken over");
    assert!(reported.is_empty(), "{reported:?}");
    assert_eq!(heir.cooldown_state(), first.cooldown_state());
    assert_eq!(
        heir.events().events().count(),
        first.events().events().count()
    );

    // Run on (after the heir's own 2 h): every rescale passes the fence with the heir's
    // token and reaches the engine; once the fence refuses, none does.
    let mut now = queued_at.max(2 * 3_600_000) + heir.step_ms();
    let attempts = |l: &StubLeases| l.attempts.lock().expect("attempts").len();
    let mut sent = 0;
    while attempts(&leases) == 0 {
        assert!(now <= 40 * 3_600_000, "no rescale was attempted");
        sent += usize::from(
            heir.step(now, Vec::new())
                .is_some_and(|r| r.operation.is_some()),
        );
        now += heir.step_ms();
    }
    assert_eq!(sent, 1, "the admitted rescale was sent");
    leases.refuse.store(true, Ordering::Relaxed);
    let mut sent_after = 0;
    while attempts(&leases) == 1 {
        assert!(now <= 80 * 3_600_000, "no rescale was attempted");
        sent_after += usize::from(
            heir.step(now, Vec::new())
                .is_some_and(|r| r.operation.is_some()),
        );
        now += heir.step_ms();
    }
    assert_eq!(sent_after, 0, "the refused rescale was not sent");
    let attempts = leases.attempts.lock().expect("attempts").clone();
    assert_eq!(attempts, [(5, true), (5, false)]);
    assert!(
        heir.events()
            .events()
            .any(|e| e.event.reason == EventReason::RescaleFenced),
        "the refusal is reported"
    );
}

#[test]
fn a_lease_lost_and_taken_again_between_steps_reports_the_loss_then_the_new_token() {
    use std::sync::{Arc, Mutex};

    use super::lease::JobLease;
    use crate::events::Event;
    use crate::state::{InMemoryStateStore, JobLeases, StateStore};

    let leases = Arc::new(StubLeases::default());
    let mut lease = JobLease::over(Arc::clone(&leases) as Arc<dyn JobLeases>, "job");
    let store: Mutex<Box<dyn StateStore + Send>> = Mutex::new(Box::new(InMemoryStateStore::new()));
    let mut runner = runner(example("diurnal.toml"), FAST);
    let mut step = |holding: Option<i64>| -> (bool, Vec<(EventReason, Option<i64>)>) {
        *leases.holding.lock().expect("holding") = holding;
        let mut events: Vec<Event> = Vec::new();
        let acts = lease.before_step(&mut runner, &store, &mut events);
        let seen = events
            .iter()
            .map(|e| {
                let token = e.details.get("token").copied();
                (e.reason, token)
            })
            .collect();
        (acts, seen)
    };
    use EventReason::{LeaseAcquired, LeaseLost};
    assert_eq!(step(None), (false, vec![]));
    assert_eq!(step(Some(3)), (true, vec![(LeaseAcquired, Some(3))]));
    assert_eq!(step(Some(3)), (true, vec![]));
    // Lost to another host and claimed back before the next step: both are reported.
    assert_eq!(
        step(Some(5)),
        (true, vec![(LeaseLost, Some(3)), (LeaseAcquired, Some(5))])
    );
    assert_eq!(step(None), (false, vec![(LeaseLost, Some(5))]));
    assert_eq!(step(None), (false, vec![]));
}

/// A custom mode that records the jobs it was told to forget.
#[derive(Default)]
struct Forgetful(std::sync::Mutex<Vec<String>>);

impl crate::alignment::HostMode for Forgetful {
    fn is_applicable(
        &self,
        _: &flowscale_sdk::AlignmentContext,
    ) -> Result<bool, flowscale_sdk::ModeError> {
        Ok(false)
    }
    fn align(
        &self,
        ctx: &flowscale_sdk::AlignmentContext,
    ) -> Result<u32, flowscale_sdk::ModeError> {
        Ok(ctx.target_parallelism())
    }
    fn validate(&self, _: &flowscale_sdk::ModeParams) -> Result<(), flowscale_sdk::ModeError> {
        Ok(())
    }
    fn forget_job(&self, job: &str) {
        self.0.lock().expect("forgotten").push(job.to_string());
    }
}

/// The catalog of one custom mode, `forgetful`.
struct OneForgetful(std::sync::Arc<Forgetful>);

impl crate::alignment::ModeCatalog for OneForgetful {
    fn find(&self, id: &str) -> Option<crate::alignment::CustomMode> {
        (id == "forgetful").then(|| crate::alignment::CustomMode {
            id: id.to_string(),
            description: String::new(),
            origin: crate::alignment::ModeOrigin::Linked,
            mode: std::sync::Arc::clone(&self.0) as std::sync::Arc<dyn crate::alignment::HostMode>,
        })
    }
    fn ids(&self) -> Vec<String> {
        vec!["forgetful".to_string()]
    }
}

#[test]
fn a_custom_mode_forgets_a_job_whose_loop_ended_or_left_it() {
    let mode = std::sync::Arc::new(Forgetful::default());
    let catalog = OneForgetful(std::sync::Arc::clone(&mode));
    let pairs = [
        ("scaling.alignment.mode", "mine"),
        ("scaling.alignment.mode.mine.class", "forgetful"),
    ];
    let config = JobConfig::from_pairs(pairs.iter().copied());
    let settings = JobSettings::from_config(&config).expect("valid settings");
    let resolve = |name: &str| JobAlignment::resolve(name, &config, &catalog).expect("resolves");
    let forgotten = || mode.0.lock().expect("forgotten").clone();

    let mut moved = JobRunner::new(
        "moved",
        example("diurnal.toml"),
        resolve("moved"),
        &settings,
        10_000,
    );
    let ended = JobRunner::new(
        "ended",
        example("diurnal.toml"),
        resolve("ended"),
        &settings,
        10_000,
    );
    // The same mode again: it keeps the job.
    moved.reconfigure(resolve("moved"), &settings, 10_000);
    assert_eq!(forgotten(), Vec::<String>::new());
    // Another mode: the custom one forgets the job.
    let balanced = JobConfig::from_pairs([("scaling.alignment.mode", "BALANCED")]);
    let other = JobAlignment::resolve("moved", &balanced, &catalog).expect("resolves");
    moved.reconfigure(other, &settings, 10_000);
    assert_eq!(forgotten(), ["moved"]);
    drop(ended);
    assert_eq!(forgotten(), ["moved", "ended"]);
    drop(moved);
    assert_eq!(
        forgotten(),
        ["moved", "ended"],
        "BALANCED keeps nothing to forget"
    );
}

/// The value of the sample `name{labels}` in the Prometheus text `text`.
fn sample(text: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = format!("{name}{{{labels}}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| match v {
            "+Inf" => f64::INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("{name}{{{labels}}} {v}")),
        })
}

#[test]
fn the_servers_metrics_show_what_each_cycle_evaluated_and_decided() {
    let mut runner = runner(
        example("keyed-step-spike.toml"),
        &[FAST, &[("catch-up.duration", "5 min")]].concat(),
    );
    let view = crate::serve::FleetView::new();
    view.add_job("job", "sim", "BALANCED");
    let source = "job=\"job\",vertex=\"Source: clicks\"";
    let mut events: BTreeMap<&str, u64> = BTreeMap::new();
    let (mut lagging, mut evaluated, mut scaled, mut within) = (0, 0, 0, 0);
    // The series name a vertex from the first cycle that decided on a full window on.
    let mut named = false;
    let mut now = 0;
    while now <= 3 * 3_600_000 {
        if let Some(report) = runner.step(now, Vec::new()) {
            for event in &report.events {
                *events.entry(event.reason.as_str()).or_default() += 1;
            }
            view.record(&report);
            let text = view.metrics().encode_text();
            let job = |name: &str| sample(&text, name, "job=\"job\"");
            assert_eq!(job("flowscale_decision_interval_seconds"), Some(10.0));
            assert_eq!(job("flowscale_catch_up_target_seconds"), Some(300.0));
            if report.queued {
                assert_eq!(job("flowscale_cooldown_queued"), Some(1.0), "{text}");
            }
            named |= !report.vertices.is_empty();
            if named && !report.evaluated.is_empty() {
                evaluated += 1;
                // The source's lag is what the simulation holds pending at the cycle's instant.
                let pending = runner.engine().pending_records() as f64;
                let lag = sample(&text, "flowscale_vertex_lag_records", source);
                assert_eq!(lag, Some(pending), "at {now} ms:\n{text}");
                lagging += usize::from(pending > 0.0);
                let target = sample(
                    &text,
                    "flowscale_vertex_target_data_rate_records_per_second",
                    source,
                )
                .expect("the source's target rate");
                let seconds = sample(&text, "flowscale_vertex_lag_seconds", source);
                let expected = if pending == 0.0 {
                    0.0
                } else {
                    pending / target
                };
                assert_eq!(seconds, Some(expected), "at {now} ms:\n{text}");
                for v in &report.vertices {
                    let labels = format!("job=\"job\",vertex=\"{}\"", v.name);
                    let value = |name: &str| sample(&text, name, &labels);
                    let load = value("flowscale_vertex_load_ratio").expect("a load");
                    assert!((0.0..=1.0).contains(&load), "{labels}: {load}");
                    let up = value("flowscale_vertex_scale_up_rate_threshold_records_per_second");
                    let down =
                        value("flowscale_vertex_scale_down_rate_threshold_records_per_second");
                    assert!(up.zip(down).is_some_and(|(u, d)| u <= d), "{up:?} {down:?}");
                    assert!(
                        value("flowscale_vertex_true_processing_rate_records_per_second")
                            .is_some_and(|r| r >= 0.0)
                    );
                    let recommended = sample(
                        &text,
                        "flowscale_vertex_parallelism",
                        &format!("{labels},kind=\"recommended\""),
                    );
                    // The decided parallelism: the operation's for a vertex it changes, the
                    // running one otherwise.
                    match (&report.stage, &report.operation) {
                        (Some(CycleStage::Scaled), Some(op)) => {
                            scaled += 1;
                            let decided = op.get(&*v.vertex).copied().unwrap_or(v.current);
                            assert_eq!(recommended, Some(f64::from(decided)), "{labels}");
                        }
                        (Some(CycleStage::WithinBounds), None) => {
                            within += 1;
                            assert_eq!(recommended, Some(f64::from(v.current)), "{labels}");
                        }
                        _ => {}
                    }
                }
            }
        }
        now += runner.step_ms();
    }
    assert!(
        evaluated > 0 && lagging > 0 && scaled > 0 && within > 0,
        "{evaluated} evaluated, {lagging} with a backlog, {scaled} scaled, {within} within bounds"
    );
    let text = view.metrics().encode_text();
    for (reason, count) in &events {
        let labels = format!("job=\"job\",reason=\"{reason}\"");
        assert_eq!(
            sample(&text, "flowscale_events_total", &labels),
            Some(*count as f64),
            "{reason}"
        );
    }
    assert!(events.contains_key("ScalingReport"), "{events:?}");
    assert!(
        sample(
            &text,
            "flowscale_last_rescale_timestamp_seconds",
            "job=\"job\""
        )
        .is_some(),
        "{text}"
    );
}
