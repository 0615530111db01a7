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
            assert!(!s.timeline().rows.is_empty(), "{}", path.display());
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

/// The keyed job on TaskManagers of 2 cores, 4 GiB and 2 slots, `agg` (parallelism 5) in a
/// group of its own: the observation names each vertex's group, reports the TaskManager size,
/// and counts slots per group (max(src 4, sink 2) = 4 in `default`, plus 5 for `heavy`).
#[test]
fn observation_reports_slot_sharing_groups_and_the_task_manager_size() {
    let text = keyed_job(100.0, 128, 5, 1000.0)
        .replace(
            "capacity = 1000\nbuffer",
            "capacity = 1000\nslot_sharing_group = \"heavy\"\nbuffer",
        )
        .replace(
            "[restart]",
            "[taskmanager]\ncpu = 2.0\nmemory = \"4 gb\"\nslots = 2\n\n[restart]",
        );
    assert!(text.contains("\"heavy\""), "fixture changed");
    let obs = sim(&text).observe(1000).expect("observe");
    let group = |id: &str| {
        obs.vertices
            .iter()
            .find(|v| v.id == id)
            .and_then(|v| v.slot_sharing_group.clone())
    };
    assert_eq!(group("src").as_deref(), Some("default"));
    assert_eq!(group("agg").as_deref(), Some("heavy"));
    assert_eq!(group("sink").as_deref(), Some("default"));
    assert_eq!(
        obs.task_managers,
        Some(crate::engine::TaskManagerResources {
            cpu_cores: Some(2.0),
            memory_bytes: Some(4 << 30),
            slots: Some(2),
        })
    );
    assert_eq!(obs.global["taskSlotsTotal"], 9.0);
    // Without the table the engine reports no size.
    let plain = sim(&keyed_job(100.0, 128, 5, 1000.0))
        .observe(1000)
        .expect("observe");
    assert_eq!(plain.task_managers, None);
    assert_eq!(plain.global["taskSlotsTotal"], 5.0);
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

/// The shape of a random bounded job with one iteration.
#[derive(Debug, Clone)]
struct LoopJob {
    /// Operators after the head; the last is the tail (0: the head is its own tail).
    body: usize,
    fraction: f64,
    total: u64,
    parallelism: Vec<u32>,
    /// Ship strategies of the edges inside the loop (cycled).
    ships: Vec<&'static str>,
    capacity: Vec<u32>,
    /// A sink after the tail, fed by this strategy.
    sink: Option<&'static str>,
    /// A side sink hanging off the head (outside the loop).
    side: bool,
    /// A second bounded source feeding the first body operator (a regular input inside the loop).
    second_source: Option<u64>,
}

impl LoopJob {
    fn toml(&self) -> String {
        use std::fmt::Write as _;
        let mut t = String::from("[job]\nname = \"prop\"\nseed = 9\n\n");
        let vertex = |t: &mut String, n: usize, id: &str, kind: &str| {
            let partitions = if kind == "source" {
                "partitions = 3\n"
            } else {
                ""
            };
            let _ = write!(
                t,
                "[[vertices]]\nid = \"{id}\"\nkind = \"{kind}\"\nparallelism = {}\nmax_parallelism = 16\ncapacity = {}\nbuffer = 50\n{partitions}\n",
                self.parallelism[n % self.parallelism.len()],
                self.capacity[n % self.capacity.len()]
            );
        };
        let edge = |t: &mut String, from: &str, to: &str, ship: &str| {
            let _ = write!(
                t,
                "[[edges]]\nfrom = \"{from}\"\nto = \"{to}\"\nship = \"{ship}\"\n\n"
            );
        };
        vertex(&mut t, 0, "src", "source");
        vertex(&mut t, 1, "head", "operator");
        edge(&mut t, "src", "head", "REBALANCE");
        let mut last = "head".to_string();
        for b in 0..self.body {
            let id = format!("b{b}");
            vertex(&mut t, 2 + b, &id, "operator");
            edge(&mut t, &last, &id, self.ships[b % self.ships.len()]);
            last = id;
        }
        if let Some(ship) = self.sink {
            vertex(&mut t, 7, "sink", "sink");
            edge(&mut t, &last, "sink", ship);
        }
        if self.side {
            vertex(&mut t, 8, "side", "sink");
            edge(&mut t, "head", "side", "HASH");
        }
        if let (Some(total), true) = (self.second_source, self.body > 0) {
            vertex(&mut t, 9, "src2", "source");
            edge(&mut t, "src2", "b0", "REBALANCE");
            let _ = write!(
                t,
                "[workload.src2]\ntotal_records = {total}\n[[workload.src2.rate]]\nkind = \"constant\"\nrate = 3\n\n"
            );
        }
        let _ = write!(
            t,
            "[[feedback]]\nfrom = \"{last}\"\nto = \"head\"\nfraction = {}\n\n",
            self.fraction
        );
        let _ = write!(
            t,
            "[workload.src]\ntotal_records = {}\n[[workload.src.rate]]\nkind = \"constant\"\nrate = 40\n",
            self.total
        );
        t
    }
}

fn loop_job() -> impl Strategy<Value = LoopJob> {
    (
        0usize..4,
        0.0f64..0.9,
        0u64..400,
        proptest::collection::vec(1u32..5, 1..6),
        proptest::collection::vec(
            prop_oneof![
                Just("HASH"),
                Just("REBALANCE"),
                Just("FORWARD"),
                Just("RESCALE"),
                Just("CUSTOM:7")
            ],
            1..4,
        ),
        proptest::collection::vec(5u32..200, 1..6),
        proptest::option::of(prop_oneof![
            Just("BROADCAST"),
            Just("FORWARD"),
            Just("HASH")
        ]),
        any::<bool>(),
        proptest::option::of(0u64..100),
    )
        .prop_map(
            |(body, fraction, total, parallelism, ships, capacity, sink, side, second_source)| {
                LoopJob {
                    body,
                    fraction,
                    total,
                    parallelism,
                    ships,
                    capacity,
                    sink,
                    side,
                    second_source,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Never early (nothing in flight once finished, nothing ever reaches a terminated
    /// iteration source), never stuck (finishes within a bound), and the same seed gives the
    /// same finish time.
    #[test]
    fn iteration_termination_is_exact(job in loop_job()) {
        let text = job.toml();
        let expected = [("src", job.total), ("src2", job.second_source.filter(|_| job.body > 0).unwrap_or(0))];
        let run = || {
            let mut s = sim(&text);
            let mut finished_at = None;
            let mut quiet_since = None;
            for _ in 0..20_000 {
                s.step();
                prop_assert_eq!(s.dropped_records(), 0, "a terminated iteration source got records");
                // Never late: once every record has been produced and nothing is in flight,
                // the two marker rounds (a loop trip takes at most a tick) end the job within two ticks.
                let all_generated = expected.iter().all(|(id, n)| s.generated(id).is_none_or(|g| g == *n));
                let quiet = all_generated && s.records_in_flight() == 0 && s.pending_records() == 0;
                let since = *quiet_since.get_or_insert(if quiet { s.ticks() } else { u64::MAX });
                if !quiet {
                    quiet_since = None;
                }
                prop_assert!(since == u64::MAX || s.ticks() - since <= 2 || s.is_finished(), "late: quiet since tick {since}, now {}", s.ticks());
                if s.is_finished() {
                    prop_assert_eq!(s.records_in_flight(), 0, "finished with records in flight");
                    prop_assert_eq!(s.pending_records(), 0);
                    finished_at = Some(s.now_ms());
                    break;
                }
            }
            Ok(finished_at)
        };
        let first = run()?;
        prop_assert!(first.is_some(), "stuck:\n{}", text);
        prop_assert_eq!(first, run()?);
    }
}

/// Two manual "modes" on the keyed example: react to the step with p=26 or p=32. Set
/// `FLOWSCALE_SIM_CHART` to a path to keep the chart for a look.
#[test]
fn keyed_example_chart_and_comparison() {
    let run = |target: u32| {
        let mut s =
            Simulation::from_file(examples_dir().join("keyed-step-spike.toml")).expect("example");
        s.advance_to(1_860_000);
        s.rescale(&BTreeMap::from([("agg".to_string(), target)]))
            .expect("rescale");
        s.advance_to(5_400_000);
        s.rescale(&BTreeMap::from([("agg".to_string(), 64)]))
            .expect("rescale");
        s.advance_to(5_760_000);
        s.rescale(&BTreeMap::from([("agg".to_string(), target)]))
            .expect("rescale");
        s.advance_to(7_200_000);
        s.timeline()
    };
    let runs = vec![
        ("BALANCED".to_string(), run(26)),
        ("EVENLY_SPREAD".to_string(), run(32)),
    ];
    let summaries: Vec<(String, Summary)> = runs
        .iter()
        .map(|(m, t)| (m.clone(), Summary::from_timeline(t)))
        .collect();
    // After the step, 40k/s over 128 key groups: a 5-group subtask (p=26) needs 1562/s > 1500,
    // a 4-group one (p=32) 1250/s. Only the aligned run keeps up, at a higher cost.
    assert!(
        summaries[0].1.max_lag_s > 60.0,
        "{}",
        summaries[0].1.max_lag_s
    );
    assert!(
        summaries[1]
            .1
            .convergence
            .first()
            .is_some_and(|c| c.1.is_some()),
        "{:?}",
        summaries[1].1.convergence
    );
    assert!(summaries[1].1.max_pending < summaries[0].1.max_pending);
    assert!(summaries[1].1.subtask_seconds > summaries[0].1.subtask_seconds);
    let table = render_comparison_table(&summaries);
    assert!(table.contains("EVENLY_SPREAD"));
    if let Some(path) = std::env::var_os("FLOWSCALE_SIM_CHART") {
        plot_svg(&runs, std::path::Path::new(&path)).expect("chart");
        std::fs::write(format!("{}.txt", path.to_string_lossy()), table).expect("table");
    }
}

#[test]
fn restart_downtime_grows_with_state() {
    let text = keyed_job(1000.0, 128, 8, 1000.0)
        .replace(
            "buffer = 2000",
            "buffer = 2000\nstate_bytes = 2147483648\nstate_bytes_per_record = 1024",
        )
        .replace("downtime = \"10s\"", "downtime = \"10s\"\nper_gib = \"5s\"");
    let mut s = sim(&text);
    s.rescale(&BTreeMap::from([("agg".to_string(), 16)]))
        .expect("rescale");
    s.advance_to(100_000);
    // 2 GiB at the start: 10 s + 2 * 5 s.
    assert_eq!(s.summary().restarting_s, 20.0);
    let obs = s.observation();
    assert_eq!(obs.running_since_ms, 20_000);
    s.rescale(&BTreeMap::from([("agg".to_string(), 8)]))
        .expect("rescale");
    s.advance_to(200_000);
    // Between the restarts the operator processed the 80 s of input that arrived while it ran
    // and at most the 20 s of backlog the first restart left: 80k to 100k records of 1 KiB each
    // on top of the 2 GiB. A restart of `d` seconds spans `ceil(d)` one-second ticks.
    let gib = f64::from(1u32 << 30);
    let restart_ticks = |records: f64| (10.0 + 5.0 * (2.0 * gib + records * 1024.0) / gib).ceil();
    let second = restart_ticks(80_000.0);
    assert_eq!(
        second,
        restart_ticks(100_000.0),
        "both bounds give one count"
    );
    assert!(second > 20.0, "the state grew, so did the restart");
    assert_eq!(s.summary().restarting_s, 20.0 + second);
}

#[test]
fn trace_workload_is_read_relative_to_the_job_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("load.csv"), "seconds,rate\n0,100\n10,300\n").expect("trace");
    let job = keyed_job(1.0, 128, 4, 1000.0).replace(
        "kind = \"constant\"\nrate = 1",
        "kind = \"trace\"\npath = \"load.csv\"\ninterpolate = true",
    );
    std::fs::write(dir.path().join("job.toml"), job).expect("job");
    let mut s = Simulation::from_file(dir.path().join("job.toml")).expect("valid");
    s.advance_to(20_000);
    let rows = s.timeline().rows;
    assert_eq!(rows[0].source_rate, 100.0);
    assert_eq!(rows[5].source_rate, 200.0);
    assert_eq!(rows[15].source_rate, 300.0);

    std::fs::write(dir.path().join("load.csv"), "0,100\n5,-1\n").expect("trace");
    match Simulation::from_file(dir.path().join("job.toml")) {
        Err(SimError::Invalid(p)) => {
            assert!(p.file.ends_with("load.csv"));
            assert_eq!(p.line, 2);
        }
        other => panic!("expected a trace problem, got {other:?}"),
    }
}

#[test]
fn rescaling_a_source_reassigns_partitions_and_keeps_pending() {
    let mut s =
        Simulation::from_file(examples_dir().join("kafka-prime-partitions.toml")).expect("example");
    s.advance_to(600_000);
    let pending = s.pending_records();
    s.rescale(&BTreeMap::from([("kafka".to_string(), 40)]))
        .expect("rescale");
    s.advance_to(621_000);
    assert!(
        s.pending_records() > pending,
        "sources fall behind while restarting"
    );
    let src = &s.vertices[0];
    assert_eq!(src.subtasks.len(), 40);
    for (i, t) in src.subtasks.iter().enumerate() {
        let expected: Vec<usize> = (0..37).filter(|k| k % 40 == i).collect();
        assert_eq!(t.partitions, expected);
    }
    s.advance_to(700_000);
    assert!(s.vertices[0].subtasks[39].records_in == 0);
    assert!(s.vertices[0].subtasks[36].records_in > 0);
}

#[test]
fn lifting_a_rate_limit_lets_the_backlog_drain() {
    let mut s = sim(&keyed_job(1000.0, 128, 8, 1000.0));
    s.set_rate_limit("src", Some(500.0)).expect("limit");
    s.advance_to(60_000);
    assert!(s.pending_records() > 25_000);
    s.record_event("controller: lift");
    s.set_rate_limit("src", None).expect("lift");
    s.advance_to(120_000);
    assert!(s.pending_records() < 1_000, "{}", s.pending_records());
    let events: Vec<String> = s
        .timeline()
        .rows
        .iter()
        .flat_map(|r| r.events.clone())
        .collect();
    assert_eq!(
        events,
        vec![
            "rate-limit src=500".to_string(),
            "controller: lift".to_string(),
            "rate-limit src=none".to_string()
        ]
    );
}

#[test]
fn different_seeds_place_hot_keys_differently() {
    let text = keyed_job(1_000_000.0, 128, 8, 100.0).replace(
        "[workload.src]",
        "[keys]\nkind = \"zipf\"\nexponent = 1.0\n\n[workload.src]",
    );
    let busiest = |seed: u32| {
        let mut s = sim(&text.replace("seed = 1", &format!("seed = {seed}")));
        s.advance_to(300_000);
        let loads: Vec<u64> = s.vertices[1].subtasks.iter().map(|t| t.cum_in).collect();
        loads
            .iter()
            .enumerate()
            .max_by_key(|(_, l)| **l)
            .map(|(i, _)| i)
    };
    let picks: Vec<Option<usize>> = (1..6).map(busiest).collect();
    assert!(picks.iter().any(|p| *p != picks[0]), "{picks:?}");
    assert_eq!(busiest(3), busiest(3));
}

#[test]
fn a_limited_timeline_keeps_the_latest_rows() {
    let mut s = sim(&keyed_job(1000.0, 128, 4, 1000.0));
    s.limit_timeline(Some(100));
    s.advance_to(1_000_000);
    let rows = s.timeline().rows;
    assert!((100..200).contains(&rows.len()), "{}", rows.len());
    assert_eq!(rows.last().map(|r| r.t_ms), Some(999_000));
}

/// A keyed job with Zipf keys over 16 key groups on 4 subtasks; `drift` is the edge's extra.
fn drifting_job(drift: &str) -> String {
    format!(
        r#"
[job]
seed = 3
[[vertices]]
id = "src"
kind = "source"
parallelism = 1
capacity = 100000
partitions = 1
[[vertices]]
id = "agg"
kind = "operator"
parallelism = 4
max_parallelism = 16
capacity = 100000
[[edges]]
from = "src"
to = "agg"
ship = "HASH"
keys = {{ kind = "zipf", exponent = 1.5 }}
{drift}
[workload.src]
[[workload.src.rate]]
kind = "constant"
rate = 16000
"#
    )
}

/// Records in per second of each `agg` subtask, as the collector reports them.
fn subtask_rates(s: &Simulation) -> Vec<f64> {
    s.observation().metrics["agg"]
        .subtasks
        .iter()
        .map(|t| t.num_records_in_per_second.unwrap_or(f64::NAN))
        .collect()
}

#[test]
fn subtasks_report_their_own_busy_time_and_input_rate() {
    let mut s = sim(&drifting_job(""));
    s.advance_to(30_000);
    let obs = s.observation();
    let agg = &obs.metrics["agg"];
    assert_eq!(agg.subtasks.len(), 4);
    let rates = subtask_rates(&s);
    let sum: f64 = rates.iter().sum();
    assert!((sum - 16000.0).abs() < 1.0, "{rates:?}");
    let max = rates.iter().copied().fold(0.0, f64::max);
    assert!(
        max > 4000.0 * 1.3,
        "Zipf keys load one subtask more: {rates:?}"
    );
    assert_eq!(
        agg.aggregated["numRecordsInPerSecond"].max,
        Some(max),
        "the aggregate is over the same values"
    );
    assert!(
        agg.subtasks
            .iter()
            .all(|t| t.busy_time_ms_per_second.is_some())
    );
}

#[test]
fn a_drifting_hot_set_moves_between_subtasks_and_a_fixed_one_stays() {
    let mut fixed = sim(&drifting_job(""));
    let mut drifting = sim(&drifting_job(r#"drift = "1 min""#));
    for s in [&mut fixed, &mut drifting] {
        s.advance_to(30_000);
    }
    let (fixed_before, drifting_before) = (subtask_rates(&fixed), subtask_rates(&drifting));
    assert_eq!(
        fixed_before, drifting_before,
        "period 0 draws the same shares"
    );
    for s in [&mut fixed, &mut drifting] {
        s.advance_to(90_000);
    }
    assert_eq!(subtask_rates(&fixed), fixed_before);
    assert_ne!(
        subtask_rates(&drifting),
        drifting_before,
        "the hot set moved"
    );
}

#[test]
fn a_drift_period_must_be_positive() {
    let text = drifting_job(r#"drift = "0s""#);
    match Simulation::from_toml_str(&text) {
        Ok(_) => panic!("a zero drift period is refused"),
        Err(err) => assert!(err.to_string().contains("edges[0].drift"), "{err}"),
    }
}

/// The `q` quantile as the timeline's summary defines it: the value of rank `ceil(q * n)` of the
/// values sorted ascending.
fn sorted_quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[test]
fn a_simulation_summarised_tick_by_tick_matches_its_timeline() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples/jobs/keyed-step-spike.toml"),
    )
    .expect("the example job is readable");
    let mut sim = Simulation::from_toml_str(&text).expect("the example job is valid");
    let ticks = 7200;
    sim.summarise_at_most(ticks);
    sim.advance_to(1_800_000);
    let mut wider = sim.parallelism();
    wider.values_mut().for_each(|p| *p += 1);
    crate::engine::Realizer::rescale(&mut sim, &wider).expect("a valid rescale");
    sim.advance_to(i64::try_from(ticks).expect("small") * 1000);
    let timeline = sim.timeline();
    let summary = sim.summary();

    // Computed here from the rows, straight from the definitions.
    let running: Vec<&crate::sim::timeline::TimelineRow> =
        timeline.rows.iter().filter(|r| !r.finished).collect();
    let lags: Vec<f64> = running.iter().map(|r| r.lag_s()).collect();
    let pending: Vec<f64> = running.iter().map(|r| r.pending as f64).collect();
    assert_eq!(timeline.rows.len(), 7200);
    assert_eq!(summary.duration_s, 7200.0);
    assert_eq!(summary.p99_lag_s, sorted_quantile(&lags, 0.99));
    assert_eq!(summary.p99_pending, sorted_quantile(&pending, 0.99) as u64);
    assert_eq!(summary.max_lag_s, lags.iter().copied().fold(0.0, f64::max));
    let records: u64 = timeline
        .rows
        .iter()
        .map(|r| (r.read_per_s * 1.0).round() as u64)
        .sum();
    assert_eq!(summary.records_processed, records);
    let restarting = timeline.rows.iter().filter(|r| r.restarting).count();
    assert_eq!(summary.restarting_s, restarting as f64);
    assert!(restarting > 0, "the rescale restarted the job");
    assert!(summary.rescales >= 1);
    let cost: f64 = running
        .iter()
        .map(|r| {
            r.vertices
                .iter()
                .map(|v| f64::from(v.parallelism))
                .sum::<f64>()
        })
        .sum();
    assert!((summary.subtask_seconds - cost).abs() < 1e-6 * cost);
    // And the whole summary is that of the timeline.
    assert_eq!(summary, Summary::from_timeline(&timeline));
}
