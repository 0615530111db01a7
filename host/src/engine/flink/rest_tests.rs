//! The engine against an in-process fake of Flink's REST API, with answers captured from a
//! Flink 2.3 cluster: parsing, request shapes, and failures becoming `EngineError`s.

use std::collections::BTreeMap;
use std::time::Duration;

use super::fake_server::{FakeFlink, Reply};
use super::jobs::FlinkJob;
use super::rest::ResourceRequirements;
use super::*;
use crate::engine::{Collector, EngineError, JobStatus, Realizer};

const JOB: &str = "8930b1fd94e042463a80e45360195d7e";
const SRC: &str = "e5a72f353fc1e6bbf3bd96a41384998c";
const COST: &str = "cfb31ddc17acace6f3c9cb0d6be81b38";
const COUNT: &str = "b71731f1c0df9c3076c4a455334d0ad6";
const SINK: &str = "2e588ce1c86a9d46e2e85186773ce4fd";

const DETAILS: &str = include_str!("testdata/job_details.json");
const PLAN: &str = include_str!("testdata/plan.json");
const OVERVIEW: &str = include_str!("testdata/jobs_overview.json");

fn options(url: String) -> FlinkOptions {
    FlinkOptions {
        rest_url: url,
        request_timeout: Duration::from_millis(400),
        connect_timeout: Duration::from_millis(400),
        retries: 2,
        backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(20),
        metrics_prime_after: Duration::from_secs(60),
        metrics_prime_delay: Duration::from_millis(5),
    }
}

fn client(fake: &FakeFlink) -> FlinkClient {
    FlinkClient::new(options(fake.url()))
}

fn requirements_json(bounds: &[(&str, i64)]) -> String {
    let entries: Vec<String> = bounds
        .iter()
        .map(|(id, upper)| {
            format!(r#""{id}":{{"parallelism":{{"lowerBound":1,"upperBound":{upper}}}}}"#)
        })
        .collect();
    format!("{{{}}}", entries.join(","))
}

fn metrics_path(vertex: &str) -> String {
    format!("GET /jobs/{JOB}/vertices/{vertex}/subtasks/metrics")
}

/// A running job with metric names and values for every vertex.
fn serve_running_job(fake: &FakeFlink) {
    fake.json(&format!("GET /jobs/{JOB}"), DETAILS);
    fake.json(
        &metrics_path(SRC),
        r#"[{"id":"Source__source.numRecordsOut"},{"id":"busyTimeMsPerSecond"},
            {"id":"backPressuredTimeMsPerSecond"},{"id":"Source__source.numRecordsInPerSecond"},
            {"id":"Source__source.numRecordsIn"},{"id":"numBytesIn"},
            {"id":"0.Source__source.KafkaSourceReader.topic.t.partition.0.currentOffset"},
            {"id":"0.Source__source.KafkaSourceReader.topic.t.partition.1.currentOffset"}]"#,
    );
    fake.json(
        &format!(
            "{}?get=busyTimeMsPerSecond,backPressuredTimeMsPerSecond,Source__source.numRecordsInPerSecond,Source__source.numRecordsIn,Source__source.numRecordsOut",
            metrics_path(SRC)
        ),
        r#"[{"id":"busyTimeMsPerSecond","min":0.0,"max":0.0,"avg":0.0,"sum":0.0,"skew":0.0},
            {"id":"backPressuredTimeMsPerSecond","min":900.0,"max":900.0,"avg":900.0,"sum":900.0,"skew":0.0},
            {"id":"Source__source.numRecordsInPerSecond","min":0.0,"max":0.0,"avg":0.0,"sum":0.0,"skew":0.0},
            {"id":"Source__source.numRecordsIn","min":0.0,"max":0.0,"avg":0.0,"sum":0.0,"skew":0.0},
            {"id":"Source__source.numRecordsOut","min":11846.0,"max":11846.0,"avg":11846.0,"sum":11846.0,"skew":0.0}]"#,
    );
    for vertex in [COST, COUNT] {
        fake.json(
            &metrics_path(vertex),
            r#"[{"id":"numRecordsInPerSecond"},{"id":"busyTimeMsPerSecond"},{"id":"numRecordsIn"}]"#,
        );
        fake.json(
            &format!("{}?get=busyTimeMsPerSecond,numRecordsInPerSecond", metrics_path(vertex)),
            r#"[{"id":"busyTimeMsPerSecond","min":958.0,"max":958.0,"avg":958.0,"sum":958.0,"skew":0.0},
                {"id":"numRecordsInPerSecond","min":60.9,"max":60.9,"avg":60.9,"sum":60.9,"skew":0.0}]"#,
        );
    }
    // Per-subtask load: the vertex metrics endpoint, names prefixed with the subtask index.
    // Only `cost` answers; the others' 404 must leave them without per-subtask load.
    fake.json(
        &format!("GET /jobs/{JOB}/vertices/{COST}/metrics?get=0.busyTimeMsPerSecond,0.numRecordsInPerSecond"),
        r#"[{"id":"0.busyTimeMsPerSecond","value":"958.0"},{"id":"0.numRecordsInPerSecond","value":"60.9"}]"#,
    );
    // The sink lists a busy time but answers no value for it: it must degrade, not fail.
    fake.json(
        &metrics_path(SINK),
        r#"[{"id":"numBytesIn"},{"id":"busyTimeMsPerSecond"}]"#,
    );
    fake.json(
        &format!("{}?get=busyTimeMsPerSecond", metrics_path(SINK)),
        "[]",
    );
    fake.json(
        "GET /jobmanager/metrics?get=taskSlotsTotal,taskSlotsAvailable",
        r#"[{"id":"taskSlotsTotal","value":"8"},{"id":"taskSlotsAvailable","value":"4"}]"#,
    );
    // No GC metric on this cluster: the full query answers nothing, the reduced one answers.
    fake.json(
        "GET /taskmanagers/metrics?get=Status.JVM.Memory.Heap.Max,Status.JVM.Memory.Heap.Used,Status.Flink.Memory.Managed.Used,Status.JVM.Memory.Metaspace.Used,Status.JVM.GarbageCollector.All.TimeMsPerSecond&agg=max",
        "[]",
    );
    fake.json(
        "GET /taskmanagers/metrics?get=Status.JVM.Memory.Heap.Max,Status.JVM.Memory.Heap.Used,Status.Flink.Memory.Managed.Used,Status.JVM.Memory.Metaspace.Used&agg=max",
        r#"[{"id":"Status.JVM.Memory.Heap.Max","max":5.0E8},{"id":"Status.JVM.Memory.Heap.Used","max":1.0E8}]"#,
    );
}

#[test]
fn the_collector_reads_topology_metrics_and_partitions() {
    let fake = FakeFlink::start();
    serve_running_job(&fake);
    let mut collector = FlinkCollector::new(client(&fake), JOB);
    let observation = collector.observe(0).unwrap();

    assert_eq!(observation.status, JobStatus::Running);
    assert_eq!(observation.running_since_ms, 1_795_954_749_743);
    let names: Vec<&str> = observation
        .vertices
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(names, ["Source: source", "cost", "count", "sink: Writer"]);
    assert!(
        observation
            .vertices
            .iter()
            .all(|v| v.max_parallelism == 128 && v.parallelism == 1)
    );
    assert_eq!(observation.vertices[0].source_partitions, 2);
    assert_eq!(observation.vertices[1].source_partitions, 0);
    let strategies: Vec<(&str, &str, &str)> = observation
        .edges
        .iter()
        .map(|e| (e.from.as_str(), e.to.as_str(), e.ship_strategy.as_str()))
        .collect();
    assert_eq!(
        strategies,
        [
            (SRC, COST, "FORWARD"),
            (COST, COUNT, "HASH"),
            (COUNT, SINK, "FORWARD")
        ]
    );

    let src = &observation.metrics[SRC];
    assert_eq!(src.io.num_records_out, 8487.0);
    assert_eq!(src.io.accumulated_busy_time, 665.0);
    assert_eq!(
        src.aggregated["backPressuredTimeMsPerSecond"].avg,
        Some(900.0)
    );
    assert_eq!(
        src.aggregated["Source__source.numRecordsOut"].sum,
        Some(11846.0)
    );
    assert!(!src.aggregated.contains_key("numBytesIn"));
    assert_eq!(
        observation.metrics[COST].aggregated["busyTimeMsPerSecond"].max,
        Some(958.0)
    );
    assert!(observation.metrics[SINK].aggregated.is_empty());
    assert_eq!(
        observation.metrics[COST].subtasks,
        [crate::engine::SubtaskMetrics {
            busy_time_ms_per_second: Some(958.0),
            num_records_in_per_second: Some(60.9),
        }]
    );
    assert!(
        observation.metrics[COUNT].subtasks.is_empty(),
        "a 404 reads as none"
    );
    assert!(observation.metrics[SINK].subtasks.is_empty());
    // One per-subtask request per vertex that lists either metric, none for the others.
    let per_subtask = |v: &str| {
        fake.requests()
            .iter()
            .filter(|r| {
                r.target
                    .starts_with(&format!("/jobs/{JOB}/vertices/{v}/metrics?"))
            })
            .count()
    };
    assert_eq!(
        [
            per_subtask(SRC),
            per_subtask(COST),
            per_subtask(COUNT),
            per_subtask(SINK)
        ],
        [1, 1, 1, 1]
    );
    assert_eq!(observation.global["taskSlotsTotal"], 8.0);
    assert_eq!(observation.global["taskSlotsAvailable"], 4.0);
    assert_eq!(observation.global["Status.JVM.Memory.Heap.Max"], 5.0e8);

    // Quiet start: the details were read twice (prime, then re-read).
    assert_eq!(fake.count("GET", &format!("/jobs/{JOB}")), 2);
    // A second observation soon after: no priming, only the source's names re-listed.
    collector.observe(1).unwrap();
    assert_eq!(fake.count("GET", &format!("/jobs/{JOB}")), 3);
    let listed = |v: &str| fake.count("GET", &format!("/jobs/{JOB}/vertices/{v}/subtasks/metrics"));
    assert_eq!(listed(SRC), 2);
    assert_eq!(listed(COST), 1);
}

/// The resource quota's inputs: each vertex's slot-sharing group from the details, and one
/// TaskManager's size from `/jobmanager/config` and `/taskmanagers` (answers of a Flink 2.3
/// cluster), read once per start of the job.
#[test]
fn the_collector_reports_slot_sharing_groups_and_the_task_manager_size() {
    let fake = FakeFlink::start();
    serve_running_job(&fake);
    // Without the two endpoints (a 404 each) the size is unknown, and asked for again.
    let mut collector = FlinkCollector::new(client(&fake), JOB);
    let observation = collector.observe(0).unwrap();
    assert_eq!(observation.task_managers, None);
    // Every vertex of the captured job is in Flink's default group.
    for vertex in &observation.vertices {
        assert_eq!(
            vertex.slot_sharing_group.as_deref(),
            Some("f2efe23a64a008a8dfd1a99c18aa7136"),
            "{}",
            vertex.name
        );
    }
    collector.observe(1).unwrap();
    assert_eq!(fake.count("GET", "/taskmanagers"), 2);

    fake.json(
        "GET /jobmanager/config",
        include_str!("testdata/jobmanager_config.json"),
    );
    fake.json(
        "GET /taskmanagers",
        include_str!("testdata/taskmanagers.json"),
    );
    let observation = collector.observe(2).unwrap();
    // 8.0 cores (the TaskManager's totalResource: no CPU configured), `1536m`, 8 slots.
    assert_eq!(
        observation.task_managers,
        Some(crate::engine::TaskManagerResources {
            cpu_cores: Some(8.0),
            memory_bytes: Some(1536 << 20),
            slots: Some(8),
        })
    );
    // Kept while the job runs since the same instant: no further requests.
    let again = collector.observe(3).unwrap();
    assert_eq!(again.task_managers, observation.task_managers);
    assert_eq!(fake.count("GET", "/taskmanagers"), 3);
    assert_eq!(fake.count("GET", "/jobmanager/config"), 3);
    // A restart (another timestamps.RUNNING) reads them again.
    fake.replace_json(
        &format!("GET /jobs/{JOB}"),
        &DETAILS.replace("\"RUNNING\": 1795954749743", "\"RUNNING\": 1795954800000"),
    );
    collector.observe(4).unwrap();
    assert_eq!(fake.count("GET", "/taskmanagers"), 4);
}

#[test]
fn a_job_with_deploying_tasks_reads_as_created_and_is_not_queried() {
    let fake = FakeFlink::start();
    let deploying = DETAILS.replacen("\"DEPLOYING\": 0", "\"DEPLOYING\": 1", 1);
    assert_ne!(deploying, DETAILS, "fixture changed");
    fake.json(&format!("GET /jobs/{JOB}"), &deploying);
    let observation = FlinkCollector::new(client(&fake), JOB).observe(0).unwrap();
    assert_eq!(observation.status, JobStatus::Created);
    assert_eq!(observation.vertices.len(), 4);
    assert!(
        fake.requests()
            .iter()
            .all(|r| !r.target.contains("/vertices/"))
    );
}

#[test]
fn the_plan_endpoint_is_used_when_the_details_carry_none() {
    let fake = FakeFlink::start();
    let mut details: serde_json::Value = serde_json::from_str(DETAILS).unwrap();
    details.as_object_mut().unwrap().remove("plan");
    details["state"] = "CREATED".into();
    fake.json(&format!("GET /jobs/{JOB}"), &details.to_string());
    fake.json(&format!("GET /jobs/{JOB}/plan"), PLAN);
    let observation = FlinkCollector::new(client(&fake), JOB).observe(0).unwrap();
    assert_eq!(observation.status, JobStatus::Created);
    assert_eq!(observation.edges.len(), 3);
}

#[test]
fn the_realizer_puts_the_full_map_with_the_new_bound() {
    let fake = FakeFlink::start();
    fake.json(&format!("GET /jobs/{JOB}"), DETAILS);
    let current = requirements_json(&[(SRC, 1), (COST, 1), (COUNT, 1), (SINK, 1)]);
    fake.json(&format!("GET /jobs/{JOB}/resource-requirements"), &current);
    fake.json(&format!("PUT /jobs/{JOB}/resource-requirements"), "{}");
    let mut realizer = FlinkRealizer::new(client(&fake), JOB);

    realizer.rescale(&[(COST.to_string(), 4)].into()).unwrap();
    let puts: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "PUT")
        .collect();
    assert_eq!(puts.len(), 1);
    let sent: ResourceRequirements = serde_json::from_str(&puts[0].body).unwrap();
    let expected: ResourceRequirements = serde_json::from_str(&requirements_json(&[
        (SRC, 1),
        (COST, 4),
        (COUNT, 1),
        (SINK, 1),
    ]))
    .unwrap();
    assert_eq!(sent, expected);

    // Flink now holds what was sent; asking for it again changes nothing: nothing is sent.
    fake.replace_json(
        &format!("GET /jobs/{JOB}/resource-requirements"),
        &requirements_json(&[(SRC, 1), (COST, 4), (COUNT, 1), (SINK, 1)]),
    );
    realizer.rescale(&[(COST.to_string(), 4)].into()).unwrap();
    assert_eq!(
        fake.count("PUT", &format!("/jobs/{JOB}/resource-requirements")),
        1
    );

    assert!(matches!(
        realizer.set_rate_limit(SRC, Some(10.0)),
        Err(EngineError::Unsupported(_))
    ));
}

#[test]
fn a_change_by_another_writer_is_not_overwritten_and_the_next_rescale_builds_on_it() {
    let fake = FakeFlink::start();
    fake.json(&format!("GET /jobs/{JOB}"), DETAILS);
    let reqs = |cost| {
        let json = requirements_json(&[(SRC, 1), (COST, cost), (COUNT, 1), (SINK, 1)]);
        fake.replace_json(&format!("GET /jobs/{JOB}/resource-requirements"), &json);
    };
    let puts = || fake.count("PUT", &format!("/jobs/{JOB}/resource-requirements"));
    fake.json(&format!("PUT /jobs/{JOB}/resource-requirements"), "{}");
    let mut realizer = FlinkRealizer::new(client(&fake), JOB);
    // The first rescale builds on what Flink holds, whoever set it.
    reqs(3);
    realizer.rescale(&[(COST.to_string(), 4)].into()).unwrap();
    assert_eq!(puts(), 1);
    // Another writer sets 6 over this realizer's 4: the next rescale sends nothing.
    reqs(6);
    let err = realizer
        .rescale(&[(COST.to_string(), 2)].into())
        .unwrap_err();
    assert!(
        matches!(err, EngineError::Conflict(ref m) if m.contains(&format!("{COST}: 6")) && m.contains(&format!("{COST}: 4"))),
        "{err:?}"
    );
    assert_eq!(puts(), 1);
    // What Flink held then is the new base: a rescale decided from it goes out.
    realizer.rescale(&[(COST.to_string(), 2)].into()).unwrap();
    assert_eq!(puts(), 2);
    // A new owner (forget_writes) builds on whatever Flink holds.
    reqs(9);
    realizer.forget_writes();
    realizer.rescale(&[(COST.to_string(), 5)].into()).unwrap();
    assert_eq!(puts(), 3);
}

#[test]
fn a_put_whose_outcome_is_unknown_leaves_either_map_expected() {
    let fake = FakeFlink::start();
    fake.json(&format!("GET /jobs/{JOB}"), DETAILS);
    let reqs = |cost| {
        let json = requirements_json(&[(SRC, 1), (COST, cost), (COUNT, 1), (SINK, 1)]);
        fake.replace_json(&format!("GET /jobs/{JOB}/resource-requirements"), &json);
    };
    // Every attempt of the PUT hangs up: whether Flink applied it is unknown.
    fake.route(
        &format!("PUT /jobs/{JOB}/resource-requirements"),
        Reply::HangUp,
    );
    let mut realizer = FlinkRealizer::new(client(&fake), JOB);
    reqs(1);
    assert!(matches!(
        realizer.rescale(&[(COST.to_string(), 4)].into()),
        Err(EngineError::Unreachable(_))
    ));
    // It did apply: the next rescale builds on it, no conflict.
    reqs(4);
    fake.replace_json(&format!("PUT /jobs/{JOB}/resource-requirements"), "{}");
    realizer.rescale(&[(COST.to_string(), 7)].into()).unwrap();
    // A value neither read nor set is a conflict again.
    reqs(2);
    assert!(matches!(
        realizer.rescale(&[(COST.to_string(), 8)].into()),
        Err(EngineError::Conflict(_))
    ));
}

/// A fence that lets `allowed` attempts out, each bounded by `left`, and counts the checks.
struct CountingFence {
    allowed: usize,
    left: Option<Duration>,
    checks: std::cell::Cell<usize>,
}

impl crate::engine::WriteFence for CountingFence {
    fn check(&self) -> Result<Option<Duration>, String> {
        let n = self.checks.get() + 1;
        self.checks.set(n);
        if n <= self.allowed {
            Ok(self.left)
        } else {
            Err("the lease is gone".into())
        }
    }
    fn writer(&self) -> Option<(&str, i64)> {
        Some(("h1", 42))
    }
}

/// A fake job whose requirements PUT fails with a 503, then a reset, then passes.
fn flaky_put() -> FakeFlink {
    let fake = FakeFlink::start();
    fake.json(&format!("GET /jobs/{JOB}"), DETAILS);
    let current = requirements_json(&[(SRC, 1), (COST, 1), (COUNT, 1), (SINK, 1)]);
    fake.json(&format!("GET /jobs/{JOB}/resource-requirements"), &current);
    let put = format!("PUT /jobs/{JOB}/resource-requirements");
    fake.route(&put, Reply::Json(503, r#"{"errors":["busy"]}"#.into()));
    fake.route(&put, Reply::HangUp);
    fake.json(&put, "{}");
    fake
}

#[test]
fn a_put_is_not_retried_once_the_fence_refuses_and_carries_its_writer() {
    let puts = |fake: &FakeFlink| -> Vec<super::fake_server::Recorded> {
        let requests = fake.requests().into_iter();
        requests.filter(|r| r.method == "PUT").collect()
    };
    // Without a fence, the 503 and the reset are retried until the PUT gets through.
    let fake = flaky_put();
    FlinkRealizer::new(client(&fake), JOB)
        .rescale(&[(COST.to_string(), 4)].into())
        .unwrap();
    assert_eq!(puts(&fake).len(), 3);
    assert!(!puts(&fake)[0].headers.contains_key("x-flowscale-host"));

    // Under a fence that refuses after three checks (the two GETs and the first PUT), the
    // failed PUT is not retried.
    let fake = flaky_put();
    let fence = CountingFence {
        allowed: 3,
        left: None,
        checks: Default::default(),
    };
    let err = FlinkRealizer::new(client(&fake), JOB)
        .rescale_fenced(&[(COST.to_string(), 4)].into(), &fence)
        .unwrap_err();
    assert!(
        matches!(err, EngineError::Abandoned(ref m) if m.contains("the lease is gone") && m.contains("not retried after 1")),
        "{err:?}"
    );
    assert_eq!(fence.checks.get(), 4);
    let sent = puts(&fake);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].headers.get("x-flowscale-host").map(String::as_str),
        Some("h1")
    );
    assert_eq!(
        sent[0]
            .headers
            .get("x-flowscale-fencing-token")
            .map(String::as_str),
        Some("42")
    );
}

#[test]
fn each_attempt_is_bounded_by_the_time_the_fence_has_left() {
    let fake = FakeFlink::start();
    // The client's own timeout is 400 ms; the fence leaves 100 ms.
    fake.route(
        &format!("GET /jobs/{JOB}/resource-requirements"),
        Reply::Stall(Duration::from_secs(2)),
    );
    let mut realizer = FlinkRealizer::new(client(&fake), JOB);
    let fence = CountingFence {
        allowed: 1,
        left: Some(Duration::from_millis(100)),
        checks: Default::default(),
    };
    let started = std::time::Instant::now();
    let err = realizer
        .rescale_fenced(&[(COST.to_string(), 4)].into(), &fence)
        .unwrap_err();
    assert!(matches!(err, EngineError::Abandoned(_)), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_millis(350),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn the_realizer_never_sends_an_invalid_map() {
    let fake = FakeFlink::start();
    fake.json(&format!("GET /jobs/{JOB}"), DETAILS);
    // Flink may hand back -1 for a vertex; sending it back would kill the JobManager.
    let current = requirements_json(&[(SRC, -1), (COST, 1), (COUNT, 1), (SINK, 1)]);
    fake.json(&format!("GET /jobs/{JOB}/resource-requirements"), &current);
    fake.json(&format!("PUT /jobs/{JOB}/resource-requirements"), "{}");
    let mut realizer = FlinkRealizer::new(client(&fake), JOB);
    let err = realizer
        .rescale(&[(COST.to_string(), 4)].into())
        .unwrap_err();
    assert!(matches!(err, EngineError::InvalidRequest(ref m) if m.contains("upperBound -1")));
    let err = realizer
        .rescale(&[(COST.to_string(), 129)].into())
        .unwrap_err();
    assert!(matches!(err, EngineError::InvalidRequest(_)));
    assert_eq!(
        fake.count("PUT", &format!("/jobs/{JOB}/resource-requirements")),
        0
    );
}

#[test]
fn the_realizer_refuses_a_job_that_is_not_running() {
    let fake = FakeFlink::start();
    fake.json(
        &format!("GET /jobs/{JOB}"),
        &DETAILS.replacen("\"state\": \"RUNNING\"", "\"state\": \"RESTARTING\"", 1),
    );
    let current = requirements_json(&[(SRC, 1), (COST, 1), (COUNT, 1), (SINK, 1)]);
    fake.json(&format!("GET /jobs/{JOB}/resource-requirements"), &current);
    let err = FlinkRealizer::new(client(&fake), JOB)
        .rescale(&[(COST.to_string(), 2)].into())
        .unwrap_err();
    assert!(matches!(err, EngineError::InvalidRequest(ref m) if m.contains("RESTARTING")));
    assert_eq!(
        fake.count("PUT", &format!("/jobs/{JOB}/resource-requirements")),
        0
    );
}

/// A realizer on a job whose details are `details`, asked to rescale COST to 4 (a change): the
/// error, after checking that no PUT was sent.
fn rescale_refused(details: &str) -> EngineError {
    let fake = FakeFlink::start();
    fake.json(&format!("GET /jobs/{JOB}"), details);
    let current = requirements_json(&[(SRC, 1), (COST, 1), (COUNT, 1), (SINK, 1)]);
    fake.json(&format!("GET /jobs/{JOB}/resource-requirements"), &current);
    fake.json(&format!("PUT /jobs/{JOB}/resource-requirements"), "{}");
    let err = FlinkRealizer::new(client(&fake), JOB)
        .rescale(&[(COST.to_string(), 4)].into())
        .unwrap_err();
    assert_eq!(
        fake.count("PUT", &format!("/jobs/{JOB}/resource-requirements")),
        0,
        "nothing is sent to a job that may not run the adaptive scheduler"
    );
    err
}

#[test]
fn the_realizer_refuses_a_job_on_another_scheduler() {
    let default = DETAILS.replacen(
        "\"schedulerType\": \"Adaptive\"",
        "\"schedulerType\": \"Default\"",
        1,
    );
    assert_ne!(default, DETAILS, "fixture changed");
    let err = rescale_refused(&default);
    assert!(
        matches!(err, EngineError::Unsupported(ref m) if m.contains("adaptive scheduler") && m.contains("Default")),
        "{err}"
    );
}

#[test]
fn the_realizer_refuses_a_job_whose_scheduler_is_not_reported() {
    let mut details: serde_json::Value = serde_json::from_str(DETAILS).unwrap();
    assert!(
        details
            .as_object_mut()
            .unwrap()
            .remove("schedulerType")
            .is_some(),
        "fixture changed"
    );
    let err = rescale_refused(&details.to_string());
    assert!(
        matches!(err, EngineError::Unsupported(ref m) if m.contains("no schedulerType")),
        "{err}"
    );
}

#[test]
fn discovery_lists_running_jobs_or_the_given_one() {
    let fake = FakeFlink::start();
    let overview = OVERVIEW.replacen(
        "\"jobs\": [",
        r#""jobs": [{"jid":"00ff","name":"done","state":"FINISHED","tasks":{"total":1,"finished":1}},"#,
        1,
    );
    assert_ne!(overview, OVERVIEW, "fixture changed");
    fake.json("GET /jobs/overview", &overview);
    fake.json(&format!("GET /jobs/{JOB}"), DETAILS);
    let jobs = discover_jobs(&client(&fake), None).unwrap();
    assert_eq!(
        jobs,
        [FlinkJob {
            id: JOB.into(),
            name: "flowscale-load".into(),
            status: JobStatus::Running
        }]
    );
    let given = discover_jobs(&client(&fake), Some(JOB)).unwrap();
    assert_eq!(given[0].status, JobStatus::Running);
    assert!(matches!(
        discover_jobs(&client(&fake), Some("../x")),
        Err(EngineError::InvalidRequest(_))
    ));
}

#[test]
fn http_failures_become_engine_errors() {
    let fake = FakeFlink::start();
    fake.route(
        "GET /jobs/a",
        Reply::Json(500, r#"{"errors":["Internal server error."]}"#.into()),
    );
    fake.route(
        "GET /jobs/b",
        Reply::Json(400, r#"{"errors":["bad request"]}"#.into()),
    );
    fake.json("GET /jobs/c", "this is not json");
    fake.route("GET /jobs/d", Reply::Stall(Duration::from_secs(2)));
    fake.route("GET /jobs/e", Reply::HangUp);
    let client = client(&fake);

    let err = client.get_json("/jobs/a").unwrap_err();
    assert!(
        matches!(err, EngineError::Refused(ref m) if m.contains("HTTP 500")),
        "{err}"
    );
    assert_eq!(fake.count("GET", "/jobs/a"), 1, "500 is not retried");
    assert!(matches!(
        client.get_json("/jobs/b"),
        Err(EngineError::Refused(_))
    ));
    assert!(matches!(
        client.get_json("/jobs/c"),
        Err(EngineError::Other(_))
    ));
    assert!(matches!(
        client.get_json("/jobs/nothing"),
        Err(EngineError::NotReady(_))
    ));

    let started = std::time::Instant::now();
    assert!(matches!(
        client.get_json("/jobs/d"),
        Err(EngineError::Unreachable(_))
    ));
    assert_eq!(
        fake.count("GET", "/jobs/d"),
        3,
        "timeouts are retried, boundedly"
    );
    assert!(started.elapsed() < Duration::from_secs(3));

    assert!(matches!(
        client.get_json("/jobs/e"),
        Err(EngineError::Unreachable(_))
    ));
    assert_eq!(fake.count("GET", "/jobs/e"), 3);
}

#[test]
fn a_passing_outage_is_retried_and_a_dead_port_is_unreachable() {
    let fake = FakeFlink::start();
    fake.route("GET /overview", Reply::Json(503, "{}".into()));
    fake.json("GET /overview", r#"{"taskmanagers":1}"#);
    let value = client(&fake).get_json("/overview").unwrap();
    assert_eq!(value["taskmanagers"], 1);
    assert_eq!(fake.count("GET", "/overview"), 2);

    // A port nobody listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dead = FlinkClient::new(options(format!("http://127.0.0.1:{port}")));
    let err = FlinkCollector::new(dead, JOB).observe(0).unwrap_err();
    assert!(matches!(err, EngineError::Unreachable(_)), "{err}");
}

#[test]
fn requirements_are_read_back() {
    let fake = FakeFlink::start();
    fake.json(
        &format!("GET /jobs/{JOB}/resource-requirements"),
        &requirements_json(&[(SRC, 1), (COST, 4)]),
    );
    let read = FlinkRealizer::new(client(&fake), JOB)
        .requirements()
        .unwrap();
    let expected: BTreeMap<&str, i64> = [(SRC, 1), (COST, 4)].into();
    let got: BTreeMap<&str, i64> = read
        .iter()
        .map(|(k, v)| (k.as_str(), v.parallelism.upper_bound))
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn a_vertex_that_has_not_reported_yet_is_listed_again() {
    let fake = FakeFlink::start();
    // Right after a start the metric store knows no names for the map yet.
    fake.json(&metrics_path(COST), "[]");
    serve_running_job(&fake);
    let mut collector = FlinkCollector::new(client(&fake), JOB);
    let first = collector.observe(0).unwrap();
    assert!(first.metrics[COST].aggregated.is_empty());
    let second = collector.observe(1).unwrap();
    assert_eq!(
        second.metrics[COST].aggregated["busyTimeMsPerSecond"].max,
        Some(958.0)
    );
    let listed = |v: &str| fake.count("GET", &format!("/jobs/{JOB}/vertices/{v}/subtasks/metrics"));
    assert_eq!(listed(COST), 2);
    assert_eq!(
        listed(COUNT),
        2,
        "an incomplete cache re-lists every vertex"
    );
}

#[test]
fn a_restart_drops_the_metric_name_cache() {
    let fake = FakeFlink::start();
    serve_running_job(&fake);
    let mut collector = FlinkCollector::new(client(&fake), JOB);
    collector.observe(0).unwrap();
    // The job restarted (a rescale): a new RUNNING timestamp.
    let restarted = DETAILS.replacen("1795954749743", "1795954799999", 1);
    assert_ne!(restarted, DETAILS, "fixture changed");
    fake.replace_json(&format!("GET /jobs/{JOB}"), &restarted);
    let second = collector.observe(1).unwrap();
    assert_eq!(second.running_since_ms, 1_795_954_799_999);
    let listed = |v: &str| fake.count("GET", &format!("/jobs/{JOB}/vertices/{v}/subtasks/metrics"));
    assert_eq!(listed(COST), 2);
}

#[test]
fn a_running_job_without_a_running_timestamp_is_not_ready() {
    let fake = FakeFlink::start();
    let details = DETAILS.replacen("\"RUNNING\": 1795954749743", "\"RUNNING\": 0", 1);
    assert_ne!(details, DETAILS, "fixture changed");
    fake.json(&format!("GET /jobs/{JOB}"), &details);
    let err = FlinkCollector::new(client(&fake), JOB)
        .observe(0)
        .unwrap_err();
    assert!(matches!(err, EngineError::NotReady(_)), "{err}");
}

/// The fixture job's details in `state` during a restart: the plan has no nodes yet, and the
/// plan endpoint answers an empty one (as Flink does while it rebuilds the graph).
fn serve_restarting_job(fake: &FakeFlink, state: &str) {
    let mut details: serde_json::Value = serde_json::from_str(DETAILS).unwrap();
    details["state"] = state.into();
    details["plan"]["nodes"] = serde_json::json!([]);
    fake.json(&format!("GET /jobs/{JOB}"), &details.to_string());
    fake.json(
        &format!("GET /jobs/{JOB}/plan"),
        &format!(r#"{{"plan":{{"jid":"{JOB}","name":"flowscale-load","nodes":[]}}}}"#),
    );
}

/// Flink's answer to a request about a job it does not know.
fn job_not_found() -> Reply {
    let error = format!(
        "org.apache.flink.runtime.rest.NotFoundException: Job {JOB} not found\n\tat org.apache.flink.runtime.rest.handler.job.AbstractExecutionGraphHandler"
    );
    Reply::Json(404, serde_json::json!({ "errors": [error] }).to_string())
}

#[test]
fn a_restarting_job_with_an_empty_plan_is_waiting_not_an_error() {
    for (state, status) in [
        ("RESTARTING", JobStatus::Restarting),
        ("CREATED", JobStatus::Created),
        ("INITIALIZING", JobStatus::Created),
    ] {
        let fake = FakeFlink::start();
        serve_restarting_job(&fake, state);
        let observation = FlinkCollector::new(client(&fake), JOB)
            .observe(0)
            .unwrap_or_else(|e| panic!("{state}: {e}"));
        assert_eq!(observation.status, status, "{state}");
        assert!(observation.vertices.is_empty(), "{state}: {observation:?}");
        assert!(observation.edges.is_empty(), "{state}: {observation:?}");
        assert!(
            fake.requests()
                .iter()
                .all(|r| !r.target.contains("/vertices/")),
            "{state}: metrics are not read while the job restarts"
        );
    }
}

#[test]
fn a_restarting_job_whose_plan_cannot_be_read_is_waiting() {
    let fake = FakeFlink::start();
    let mut details: serde_json::Value = serde_json::from_str(DETAILS).unwrap();
    details["state"] = "RESTARTING".into();
    details.as_object_mut().unwrap().remove("plan");
    fake.json(&format!("GET /jobs/{JOB}"), &details.to_string());
    fake.route(
        &format!("GET /jobs/{JOB}/plan"),
        Reply::Json(
            503,
            r#"{"errors":["Service temporarily unavailable"]}"#.into(),
        ),
    );
    let observation = FlinkCollector::new(client(&fake), JOB).observe(0).unwrap();
    assert_eq!(observation.status, JobStatus::Restarting);
}

#[test]
fn a_running_job_whose_plan_is_still_empty_is_waiting() {
    let fake = FakeFlink::start();
    serve_restarting_job(&fake, "RUNNING");
    let observation = FlinkCollector::new(client(&fake), JOB).observe(0).unwrap();
    assert_eq!(observation.status, JobStatus::Created);
    assert!(observation.vertices.is_empty());
    assert!(
        fake.requests()
            .iter()
            .all(|r| !r.target.contains("/vertices/"))
    );
}

#[test]
fn a_job_deleted_from_the_cluster_is_gone() {
    let fake = FakeFlink::start();
    fake.route(&format!("GET /jobs/{JOB}"), job_not_found());
    fake.route(
        &format!("GET /jobs/{JOB}/resource-requirements"),
        job_not_found(),
    );
    let err = FlinkCollector::new(client(&fake), JOB)
        .observe(0)
        .unwrap_err();
    assert!(
        matches!(err, EngineError::JobGone(ref m) if m.contains(JOB) && m.contains("HTTP 404")),
        "{err}"
    );
    assert_eq!(
        fake.count("GET", &format!("/jobs/{JOB}")),
        1,
        "a 404 is not retried"
    );
    let err = FlinkRealizer::new(client(&fake), JOB)
        .rescale(&[(COST.to_string(), 2)].into())
        .unwrap_err();
    assert!(matches!(err, EngineError::JobGone(_)), "{err}");
    // A 404 that does not say the job is unknown (a wrong path behind a proxy) is no proof.
    let other = FakeFlink::start();
    other.route(
        &format!("GET /jobs/{JOB}"),
        Reply::Json(404, r#"{"errors":["Not found: /jobs"]}"#.into()),
    );
    let err = FlinkCollector::new(client(&other), JOB)
        .observe(0)
        .unwrap_err();
    assert!(matches!(err, EngineError::NotReady(_)), "{err}");
}
