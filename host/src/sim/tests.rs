//! Physics, engine-seam and termination tests of the simulator.

use std::collections::BTreeMap;
use std::path::PathBuf;

use proptest::prelude::*;

use super::*;
use crate::engine::{Collector, JobStatus, Realizer};

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/jobs")
}

/// source -> keyed operator (HASH, K key groups) -> sink.
fn keyed_job(rate: f64, k: u32, p: u32, capacity: f64) -> String {
    format!(
        r#"
[job]
name = "keyed"
seed = 1

[[vertices]]
id = "src"
kind = "source"
parallelism = 4
capacity = 1000000
partitions = 4

[[vertices]]
id = "agg"
kind = "operator"
parallelism = {p}
max_parallelism = {k}
capacity = {capacity}
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
rate = {rate}

[restart]
downtime = "10s"
"#
    )
}

fn sim(text: &str) -> Simulation {
    match Simulation::from_toml_str(text) {
        Ok(s) => s,
        Err(e) => panic!("invalid test job: {e}"),
    }
}

#[test]
fn every_example_job_loads_and_runs() {
    let mut seen = 0;
    for entry in std::fs::read_dir(examples_dir()).expect("examples/jobs exists") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let mut s = Simulation::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
            s.advance_to(600_000);
            assert!(s.timeline().rows.len() >= 1, "{}", path.display());
            seen += 1;
        }
    }
    assert!(seen >= 5, "expected the five example jobs, saw {seen}");
}

#[test]
fn records_are_conserved_through_a_pipeline() {
    let mut s = sim(&keyed_job(5000.0, 128, 8, 300.0));
    s.advance_to(300_000);
    let generated = s.generated("src").expect("source");
    let (read, _) = s.vertex_totals("src").expect("source");
    let (agg_in, agg_out) = s.vertex_totals("agg").expect("agg");
    let (sink_in, _) = s.vertex_totals("sink").expect("sink");
    assert_eq!(generated, read + s.pending_records());
    assert_eq!(read, agg_in + s.records_in_flight() - (agg_out - sink_in));
    assert_eq!(agg_in, agg_out, "selectivity 1");
    assert!(
        s.pending_records() > 0,
        "8 x 300/s cannot keep up with 5000/s"
    );
}

/// Throughput of the keyed vertex when saturated.
fn saturated_throughput(k: u32, p: u32) -> f64 {
    let mut s = sim(&keyed_job(1_000_000.0, k, p, 100.0));
    s.advance_to(120_000);
    let before = s.vertex_totals("agg").expect("agg").0;
    s.advance_to(180_000);
    (s.vertex_totals("agg").expect("agg").0 - before) as f64 / 60.0
}

#[test]
fn misaligned_keyed_vertex_runs_at_its_busiest_subtask() {
    // K=128, p=24: the busiest subtask owns 6 of 128 key groups, so the vertex handles
    // 100 * 128 / 6 = 2133 records/s, not 24 * 100.
    let misaligned = saturated_throughput(128, 24);
    let balanced = saturated_throughput(128, 26);
    let aligned = saturated_throughput(128, 32);
    assert!((misaligned - 2133.3).abs() < 30.0, "p=24 ran {misaligned}");
    assert!((balanced - 2560.0).abs() < 30.0, "p=26 ran {balanced}");
    assert!((aligned - 3200.0).abs() < 30.0, "p=32 ran {aligned}");
}

#[test]
fn misaligned_vertex_reports_skew_and_backpressure() {
    let mut s = sim(&keyed_job(1_000_000.0, 128, 24, 100.0));
    // The start fills every buffer; by 300 s only the 6-group subtasks' buffers stay full.
    let obs = s.observe(300_000).expect("observe");
    let agg = &obs.metrics["agg"].aggregated;
    let busy = agg["busyTimeMsPerSecond"];
    assert_eq!(busy.max, Some(1000.0));
    assert!(
        busy.min.unwrap_or(0.0) < 900.0,
        "5-group subtasks are not saturated: {busy:?}"
    );
    let src = &obs.metrics["src"].aggregated;
    assert!(src["backPressuredTimeMsPerSecond"].avg.unwrap_or(0.0) > 900.0);
    let timeline = s.timeline();
    let last = timeline.rows.last().expect("rows");
    assert!(
        (last.vertices[1].skew - 6.0 / (128.0 / 24.0)).abs() < 0.02,
        "skew {}",
        last.vertices[1].skew
    );
    assert!(Summary::from_timeline(&timeline).skew > 1.05);
}

#[test]
fn source_subtasks_above_the_partition_count_read_nothing() {
    let text = keyed_job(2000.0, 128, 8, 1000.0).replace(
        "parallelism = 4\ncapacity = 1000000",
        "parallelism = 6\ncapacity = 1000000",
    );
    let mut s = sim(&text);
    let obs = s.observe(30_000).expect("observe");
    let src = &s.vertices[0];
    assert_eq!(src.subtasks.len(), 6);
    for (i, t) in src.subtasks.iter().enumerate() {
        if i >= 4 {
            assert!(t.partitions.is_empty());
            assert_eq!(t.records_in, 0);
            assert_eq!(t.idle_ms, 1000.0);
        } else {
            assert_eq!(t.partitions, vec![i]);
            assert!(t.records_in > 0);
        }
    }
    let m = &obs.metrics["src"].aggregated;
    assert_eq!(m["Source__src.numRecordsInPerSecond"].min, Some(0.0));
    assert!((m["Source__src.numRecordsInPerSecond"].sum.unwrap_or(0.0) - 2000.0).abs() < 2.0);
    assert_eq!(obs.vertices[0].source_partitions, 4);
}

#[test]
fn observation_uses_flink_metric_names() {
    let mut s =
        Simulation::from_file(examples_dir().join("keyed-step-spike.toml")).expect("example");
    let obs = s.observe(10_000).expect("observe");
    assert_eq!(obs.status, JobStatus::Running);
    let src = &obs.metrics["src"];
    for name in [
        "busyTimeMsPerSecond",
        "backPressuredTimeMsPerSecond",
        "idleTimeMsPerSecond",
        "numRecordsInPerSecond",
        "numRecordsOutPerSecond",
        "Source__clicks.numRecordsInPerSecond",
        "Source__clicks.numRecordsIn",
        "Source__clicks.numRecordsOut",
        "Source__clicks.pendingRecords",
    ] {
        assert!(src.aggregated.contains_key(name), "missing {name}");
    }
    assert!(
        !obs.metrics["agg"]
            .aggregated
            .keys()
            .any(|k| k.starts_with("Source__"))
    );
    assert!(src.io.num_records_in > 0.0);
    assert!(obs.metrics["agg"].io.accumulated_busy_time > 0.0);
    assert_eq!(obs.edges[0].ship_strategy, "HASH");
    assert_eq!(obs.global["taskSlotsTotal"], 24.0);
    for m in obs.metrics.values() {
        for (name, agg) in &m.aggregated {
            if name.ends_with("TimeMsPerSecond") {
                assert!(agg.max.unwrap_or(0.0) <= 1000.0 && agg.min.unwrap_or(0.0) >= 0.0);
            }
        }
    }
}

#[test]
fn rescale_restarts_then_applies_and_redistributes() {
    let mut s = sim(&keyed_job(3000.0, 128, 24, 100.0));
    s.advance_to(60_000);
    let in_flight = s.records_in_flight();
    s.rescale(&BTreeMap::from([("agg".to_string(), 32)]))
        .expect("rescale");
    let obs = s.observe(65_000).expect("observe");
    assert_eq!(obs.status, JobStatus::Restarting);
    assert!(obs.metrics.is_empty());
    assert_eq!(obs.vertices[1].parallelism, 24);
    assert_eq!(
        s.records_in_flight(),
        in_flight,
        "nothing moves while restarting"
    );
    let obs = s.observe(75_000).expect("observe");
    assert_eq!(obs.status, JobStatus::Running);
    assert_eq!(obs.running_since_ms, 70_000);
    assert_eq!(obs.vertices[1].parallelism, 32);
    assert_eq!(s.vertices[1].subtasks.len(), 32);
    let summary = Summary::from_timeline(&s.timeline());
    assert_eq!(summary.rescales, 1);
    assert_eq!(summary.restarting_s, 10.0);
    assert!(
        s.rescale(&BTreeMap::from([("agg".to_string(), 129)]))
            .is_err()
    );
    assert!(
        s.rescale(&BTreeMap::from([("nope".to_string(), 2)]))
            .is_err()
    );
}

#[test]
fn source_rate_limit_bounds_in_job_queues() {
    // Unlimited, the source floods the slow operator's buffers; limited below its capacity, the
    // buffers stay nearly empty and the backlog stays in the source system.
    let mut flooded = sim(&keyed_job(5000.0, 128, 8, 300.0));
    flooded.advance_to(120_000);
    assert!(flooded.records_in_flight() > 8 * 1000);

    let mut limited = sim(&keyed_job(5000.0, 128, 8, 300.0));
    limited.set_rate_limit("src", Some(2000.0)).expect("limit");
    let mut max_in_flight = 0;
    for _ in 0..120 {
        limited.step();
        max_in_flight = max_in_flight.max(limited.records_in_flight());
    }
    assert!(max_in_flight <= 200, "in flight {max_in_flight}");
    let (read, _) = limited.vertex_totals("src").expect("src");
    assert!((read as f64 - 240_000.0).abs() < 100.0, "read {read}");
    assert!(limited.set_rate_limit("agg", Some(1.0)).is_err());
}

#[test]
fn same_seed_same_run() {
    let run = || {
        let mut s = Simulation::from_file(examples_dir().join("kafka-prime-partitions.toml"))
            .expect("example");
        s.advance_to(1_200_000);
        s.rescale(&BTreeMap::from([("kafka".to_string(), 13)]))
            .expect("rescale");
        s.advance_to(2_400_000);
        s.timeline()
    };
    assert_eq!(run(), run());
}

#[test]
fn prime_partition_source_is_bounded_by_its_busiest_subtask() {
    let mut s =
        Simulation::from_file(examples_dir().join("kafka-prime-partitions.toml")).expect("example");
    s.advance_to(3_000_000);
    let obs = s.observation();
    let pending = obs.metrics["kafka"].aggregated["Source__orders.pendingRecords"];
    // At 32k/s over 37 partitions, a 4-partition subtask needs ~3.5k/s > 3k/s capacity.
    assert!(pending.sum.unwrap_or(0.0) > 100_000.0, "{pending:?}");
    assert!(pending.min.unwrap_or(0.0) < pending.max.unwrap_or(0.0));
}

#[test]
fn bounded_iterative_example_terminates_with_nothing_in_flight() {
    let mut s =
        Simulation::from_file(examples_dir().join("iterative-bounded.toml")).expect("example");
    assert!(s.run_until_finished(3_600_000), "did not finish");
    assert_eq!(s.records_in_flight(), 0);
    assert_eq!(s.dropped_records(), 0);
    assert_eq!(s.pending_records(), 0);
    assert_eq!(s.status(), JobStatus::Finished);
    let (read, _) = s.vertex_totals("src").expect("src");
    assert_eq!(read, 200_000);
    let (head_in, _) = s.vertex_totals("head").expect("head");
    assert!(head_in > 400_000, "records circulated: {head_in}");
    let events: Vec<String> = s
        .timeline()
        .rows
        .iter()
        .flat_map(|r| r.events.clone())
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("iteration head terminated")),
        "{events:?}"
    );
}

#[test]
fn unbounded_iteration_never_terminates() {
    let text = std::fs::read_to_string(examples_dir().join("iterative-bounded.toml"))
        .expect("example")
        .replace("total_records = 200000\n", "");
    let mut s = sim(&text);
    assert!(!s.run_until_finished(600_000));
    assert!(s.iterations.iter().all(|i| !i.terminated));
}

#[test]
fn timeline_exports_csv_and_json_and_summary_compares() {
    let mut s = Simulation::from_file(examples_dir().join("custom-buckets.toml")).expect("example");
    s.advance_to(1_800_000);
    let t = s.timeline();
    let csv = t.to_csv();
    let mut lines = csv.lines();
    let header = lines.next().unwrap_or_default();
    assert!(header.starts_with("t_s,status,source_rate"));
    assert!(header.contains("route.parallelism"));
    assert_eq!(lines.count(), 1800);
    assert!(t.to_json().expect("json").contains("\"vertex_ids\""));
    let summary = Summary::from_timeline(&t);
    assert_eq!(summary.convergence.len(), 1, "one step at 20 min");
    assert!((summary.convergence[0].0 - 1200.0).abs() < 1.0);
    let table = render_comparison_table(&[
        ("OFF".to_string(), summary.clone()),
        ("BUCKETS".to_string(), summary),
    ]);
    assert!(table.lines().next().unwrap_or_default().contains("BUCKETS"));
    assert!(table.contains("subtask-seconds"));
}

#[test]
fn custom_partitioner_aligned_to_buckets_removes_skew() {
    let run = |p: u32| {
        let mut s =
            Simulation::from_file(examples_dir().join("custom-buckets.toml")).expect("example");
        s.rescale(&BTreeMap::from([("route".to_string(), p)]))
            .expect("rescale");
        s.advance_to(1_800_000);
        Summary::from_timeline(&s.timeline())
    };
    let (p10, p12, p16) = (run(10), run(12), run(16));
    assert!(p12.skew < 1.01, "12 divides 48: {}", p12.skew);
    assert!(p16.skew < 1.01, "16 divides 48: {}", p16.skew);
    assert!(p10.skew > 1.03, "{}", p10.skew);
    assert!(p12.max_pending < p10.max_pending);
}

#[test]
fn chart_is_written() {
    let mut runs = Vec::new();
    for p in [24, 32] {
        let mut s = sim(&keyed_job(2500.0, 128, p, 100.0));
        s.advance_to(60_000);
        s.rescale(&BTreeMap::from([("agg".to_string(), p + 4)]))
            .expect("rescale");
        s.advance_to(180_000);
        runs.push((format!("p{p}"), s.timeline()));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("chart.svg");
    plot_svg(&runs, &path).expect("written");
    let svg = std::fs::read_to_string(&path).expect("read");
    assert!(svg.starts_with("<svg"));
    assert!(svg.contains("parallelism of agg"));
    assert_eq!(svg.matches("<path").count(), 1 + 2 + 3 * 2);
}

/// A random bounded job with one iteration: src -> [pre] -> head -> body... -> tail -> [sink],
/// tail feeds `fraction` back to head.
fn iterative_job(
    body: usize,
    fraction: f64,
    total: u64,
    parallelism: &[u32],
    ships: &[&str],
    capacity: &[u32],
    sink: bool,
) -> String {
    let mut t = String::from("[job]\nname = \"prop\"\nseed = 9\n");
    let mut ids = vec!["src".to_string(), "head".to_string()];
    for b in 0..body {
        ids.push(format!("b{b}"));
    }
    if sink {
        ids.push("sink".to_string());
    }
    for (i, id) in ids.iter().enumerate() {
        let kind = match i {
            0 => "source",
            _ if sink && i == ids.len() - 1 => "sink",
            _ => "operator",
        };
        let partitions = if i == 0 { "partitions = 3\n" } else { "" };
        let _ = std::fmt::Write::write_fmt(
            &mut t,
            format_args!(
                "[[vertices]]\nid = \"{id}\"\nkind = \"{kind}\"\nparallelism = {}\nmax_parallelism = 16\ncapacity = {}\nbuffer = 50\n{partitions}\n",
                parallelism[i % parallelism.len()],
                capacity[i % capacity.len()]
            ),
        );
    }
    for i in 1..ids.len() {
        let _ = std::fmt::Write::write_fmt(
            &mut t,
            format_args!(
                "[[edges]]\nfrom = \"{}\"\nto = \"{}\"\nship = \"{}\"\n\n",
                ids[i - 1],
                ids[i],
                ships[i % ships.len()]
            ),
        );
    }
    let tail = if body == 0 {
        "head".to_string()
    } else {
        format!("b{}", body - 1)
    };
    if body > 0 {
        let _ = std::fmt::Write::write_fmt(
            &mut t,
            format_args!(
                "[[feedback]]\nfrom = \"{tail}\"\nto = \"head\"\nfraction = {fraction}\n\n"
            ),
        );
    }
    let _ = std::fmt::Write::write_fmt(
        &mut t,
        format_args!(
            "[workload.src]\ntotal_records = {total}\n[[workload.src.rate]]\nkind = \"constant\"\nrate = 40\n"
        ),
    );
    t
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Never early (nothing in flight once finished, nothing reaches a terminated iteration
    /// source), never stuck (finishes within a bound), and the same seed gives the same finish.
    #[test]
    fn iteration_termination_is_exact(
        body in 1usize..4,
        fraction in 0.0f64..0.9,
        total in 0u64..400,
        parallelism in proptest::collection::vec(1u32..5, 1..6),
        ships in proptest::collection::vec(prop_oneof!["HASH", "REBALANCE", "FORWARD", "RESCALE", "BROADCAST", "CUSTOM:7"], 1..6),
        capacity in proptest::collection::vec(5u32..200, 1..6),
        sink in any::<bool>(),
    ) {
        // BROADCAST inside a loop multiplies records; keep the loop's gain below one.
        let broadcast_in_loop = ships.iter().any(|s| s == "BROADCAST");
        let ships: Vec<&str> = ships.iter().map(String::as_str).collect();
        let fraction = if broadcast_in_loop { fraction / 8.0 } else { fraction };
        let text = iterative_job(body, fraction, total, &parallelism, &ships, &capacity, sink);
        let run = || {
            let mut s = sim(&text);
            let mut finished_at = None;
            for _ in 0..20_000 {
                s.step();
                if s.is_finished() {
                    prop_assert_eq!(s.records_in_flight(), 0, "finished with records in flight");
                    prop_assert_eq!(s.pending_records(), 0);
                    finished_at.get_or_insert(s.now_ms());
                    break;
                }
                prop_assert_eq!(s.dropped_records(), 0, "a terminated iteration source got records");
            }
            Ok((finished_at, s.dropped_records()))
        };
        let (first, dropped) = run()?;
        prop_assert_eq!(dropped, 0);
        prop_assert!(first.is_some(), "stuck:\n{}", text);
        let (second, _) = run()?;
        prop_assert_eq!(first, second);
    }
}
