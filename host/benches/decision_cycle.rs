//! One decision cycle (`scaling::run_cycle`) for fleets of 100, 1,000 and 10,000 jobs of 20
//! vertices each, with a full metric window, so every cycle goes through evaluation, vertex
//! targets, alignment and the executor; once with the built-in BALANCED mode and once with a
//! plugin mode (`bucket-align`, loaded from its `.so` through the registry). The 1,000-job fleet
//! also runs with the same plugin in `process` isolation (`plugin-process`): the aligned vertices
//! of each job's cycle are one batch, one round trip to the plugin's worker process (protocol 4;
//! the binary built from this package serves as the worker); `plugin-process3` makes one round
//! trip per aligned vertex (protocol 3, compact calls) and `plugin-process2` the same calls in
//! protocol 2 (JSON, the whole context in every request), for comparison. At the end the bench prints the ratios of the mean round times measured in this
//! run: plugin over built-in, and `process` over `in-process` for the plugin mode.
//!
//! `plugin-kinds` adds to the plugin mode one metric evaluator (`slo-target`) and one scaling
//! executor (`step-limit`) on every job, both plugins loaded in-process; its ratio over the
//! `plugin` row is what the two other plugin kinds cost a cycle.
//!
//! Only `run_cycle` is timed; advancing each job's synthetic observation is not. Busy times move
//! every cycle, so most vertices get a new target and are aligned every cycle: a worst case. The
//! bench asserts that every timed cycle decides (see `Tally::assert_decides`). In plugin mode a
//! large share of the cost is the plugin call: each aligned vertex's context, job graph included,
//! crosses the plugin boundary (in `process` isolation, one round trip per job, or per aligned
//! vertex before protocol 4); the built-in modes read no graph, so none is built for them.
//!
//! `decision_cycle_serving` measures what the HTTP server costs the loop (see `serving.rs`):
//! the same 1,000-job builtin cycle without a server, with each step recorded into the server's
//! view, and with that while `/metrics` is scraped over HTTP, interleaved in one run.
//!
//! `DECISION_CYCLE_INTERLEAVED=<jobs>:<rounds>` runs the four plugin rows (in-process, `process`,
//! `process` with protocol 3, `process` with protocol 2) one round of each in turn and prints the
//! median ratios: on a shared machine the load moves between rows measured one after the other,
//! not within a turn.
//!
//! `DECISION_CYCLE_PROFILE=<builtin|plugin|plugin-kinds|plugin-process|plugin-process3|plugin-process2>:<jobs>:<window samples>:<rounds>` runs a fixed
//! workload instead, for instruction counts that do not depend on machine noise:
//! `valgrind --tool=callgrind --toggle-collect='*timed_cycle*' <bench binary>`.
//!
//! `SERVING_PROFILE=<rounds>` runs the serving fleet's fixed workload (rounds recorded into the
//! server's view, each followed by one encoding of `/metrics`) for the same kind of counts (see
//! `serving::profile`).

#![warn(missing_docs, unreachable_pub)]

/// The binary's allocator, so that the bench times what the binary runs (`flowscale::allocator`).
#[global_allocator]
static ALLOCATOR: flowscale::allocator::HostAllocator = flowscale::allocator::HOST_ALLOCATOR;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use flowscale::alignment::{Aligner, JobAlignment};
use flowscale::engine::{
    AggregatedMetric, IoMetrics, JobObservation, JobStatus, ObservedEdge, ObservedVertex,
    VertexMetrics,
};
use flowscale::plugins::isolation::IsolationOptions;
use flowscale::plugins::isolation::protocol::PROTOCOL_VERSION;
use flowscale::plugins::{Isolation, ModeRegistry};
use flowscale::scaling::testing::resolve_custom;
use flowscale::scaling::{
    AutoscalerOptions, CycleOutcome, CycleStage, JobCustom, JobScalingState, run_cycle_custom,
};
use flowscale_tests::{build, plugin_file, plugins_dir};

const VERTICES: usize = 20;
const INTERVAL_MS: i64 = 10_000;
const KEY_GROUPS: [u32; 6] = [128, 256, 720, 1024, 4096, 32768];

fn agg(v: f64) -> AggregatedMetric {
    AggregatedMetric {
        min: Some(v * 0.8),
        max: Some(v),
        avg: Some(v * 0.9),
        sum: Some(v * 4.0),
    }
}

/// A job: two sources, a join, then a chain of 17 operators alternating HASH and REBALANCE.
struct SimJob {
    name: String,
    index: usize,
    obs: JobObservation,
    records: Vec<f64>,
    state: JobScalingState,
}

impl SimJob {
    fn new(index: usize) -> SimJob {
        let key_groups = KEY_GROUPS[index % KEY_GROUPS.len()];
        let parallelism = 4 + (index % 12) as u32;
        let ids: Vec<String> = (0..VERTICES)
            .map(|v| format!("{index:08x}{v:024x}"))
            .collect();
        let vertices = ids
            .iter()
            .enumerate()
            .map(|(v, id)| ObservedVertex {
                id: id.clone(),
                name: format!("vertex {v}"),
                parallelism: parallelism.min(key_groups),
                max_parallelism: key_groups,
                source_partitions: if v == 0 { 48 } else { 0 },
                finished: false,
                slot_sharing_group: None,
            })
            .collect();
        let mut edges = vec![
            ObservedEdge {
                from: ids[0].clone(),
                to: ids[2].clone(),
                ship_strategy: "HASH".into(),
            },
            ObservedEdge {
                from: ids[1].clone(),
                to: ids[2].clone(),
                ship_strategy: "HASH".into(),
            },
        ];
        for v in 3..VERTICES {
            edges.push(ObservedEdge {
                from: ids[v - 1].clone(),
                to: ids[v].clone(),
                ship_strategy: if v % 2 == 0 { "HASH" } else { "REBALANCE" }.into(),
            });
        }
        SimJob {
            name: format!("job-{index}"),
            index,
            obs: JobObservation {
                status: JobStatus::Running,
                running_since_ms: 0,
                vertices,
                edges,
                metrics: BTreeMap::new(),
                global: BTreeMap::new(),
                task_managers: None,
            },
            records: vec![0.0; VERTICES],
            state: JobScalingState::default(),
        }
    }

    /// Advances the job by one interval: counters grow, busy times and lag move.
    fn advance(&mut self, cycle: usize) {
        let rate = 1000.0 * (1 + self.index % 7) as f64;
        for v in 0..VERTICES {
            let id = &self.obs.vertices[v].id;
            let per_sec = if v == 2 { 2.0 * rate } else { rate };
            self.records[v] += per_sec * (INTERVAL_MS / 1000) as f64;
            let busy = 200.0 + ((v * 37 + cycle * 13 + self.index) % 700) as f64;
            let mut aggregated = BTreeMap::new();
            aggregated.insert("busyTimeMsPerSecond".to_string(), agg(busy));
            if v < 2 {
                aggregated.insert("backPressuredTimeMsPerSecond".to_string(), agg(0.0));
                aggregated.insert(
                    "Source__src.numRecordsInPerSecond".to_string(),
                    agg(per_sec / 4.0),
                );
                aggregated.insert(
                    "Source__src.numRecordsIn".to_string(),
                    agg(self.records[v] / 4.0),
                );
                aggregated.insert(
                    "src.pendingRecords".to_string(),
                    agg(((cycle % 5) * 1000) as f64),
                );
            } else {
                aggregated.insert("numRecordsInPerSecond".to_string(), agg(per_sec / 4.0));
            }
            self.obs.metrics.insert(
                id.clone(),
                VertexMetrics {
                    aggregated,
                    io: IoMetrics {
                        num_records_in: self.records[v],
                        num_records_out: self.records[v],
                        accumulated_busy_time: 0.0,
                    },
                    subtasks: Vec::new(),
                },
            );
        }
    }
}

fn options(window_samples: u64) -> AutoscalerOptions {
    AutoscalerOptions {
        metrics_window: Duration::from_millis(INTERVAL_MS as u64 * (window_samples - 1)),
        stabilization_interval: Duration::ZERO,
        scale_down_interval: Duration::from_secs(60),
        ..AutoscalerOptions::default()
    }
}

/// A job's configuration from key-value pairs.
fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The bucket-align plugin mode of `registry`, resolved as a job would.
fn plugin_aligner(registry: &ModeRegistry) -> JobAlignment {
    JobAlignment::resolve(
        "bench",
        &config(&[
            ("scaling.alignment.mode", "buckets"),
            ("scaling.alignment.mode.buckets.class", "bucket-align"),
        ]),
        registry,
    )
    .expect("the bucket-align plugin resolves")
}

/// The built-in BALANCED mode and the bucket-align plugin mode, resolved as a job would.
fn aligners(registry: &ModeRegistry) -> Vec<(&'static str, JobAlignment)> {
    let builtin = JobAlignment::resolve(
        "bench",
        &config(&[("scaling.alignment.mode", "BALANCED")]),
        registry,
    )
    .expect("BALANCED resolves");
    vec![("builtin", builtin), ("plugin", plugin_aligner(registry))]
}

/// What the cycles of one or more rounds did: where they ended, how many vertices got a target
/// and how many of those went through the aligner.
#[derive(Debug, Default)]
struct Tally {
    stages: BTreeMap<String, usize>,
    cycles: usize,
    /// Cycles that reached the operation decision (every vertex's target computed).
    decided: usize,
    vertices: usize,
    /// Vertices with a computed target.
    targets: usize,
    /// Vertices whose target differed from the current parallelism and was aligned.
    aligned: usize,
}

impl Tally {
    fn add(&mut self, out: &CycleOutcome) {
        let stage = match &out.stage {
            CycleStage::Blocked(_) => "Blocked".to_string(),
            CycleStage::Failed(why) => format!("Failed({why})"),
            CycleStage::NotReady(why) => format!("NotReady({why})"),
            other => format!("{other:?}"),
        };
        *self.stages.entry(stage).or_default() += 1;
        self.cycles += 1;
        if matches!(
            out.stage,
            CycleStage::Scaled | CycleStage::WithinBounds | CycleStage::Blocked(_)
        ) {
            self.decided += 1;
        }
        self.vertices += out.vertices.len();
        self.targets += out.vertices.iter().filter(|v| v.target.is_some()).count();
        self.aligned += out.vertices.iter().filter(|v| v.mode.is_some()).count();
    }

    /// The bench measures decisions, not warm-up: every timed cycle must reach the operation
    /// decision with a target for every vertex, and alignment must run on a large share of the
    /// vertices (busy times move every cycle, so most targets differ from the current
    /// parallelism).
    fn assert_decides(&self, what: &str) {
        assert!(
            self.cycles > 0 && self.decided == self.cycles,
            "{what}: not every timed cycle decided: {self:?}"
        );
        assert_eq!(
            self.targets,
            self.cycles * VERTICES,
            "{what}: not every vertex got a target: {self:?}"
        );
        assert!(
            self.aligned * 2 >= self.targets,
            "{what}: fewer than half of the targets were aligned: {self:?}"
        );
    }
}

/// A fleet of jobs sharing one clock, and the custom evaluator and executors of every job.
struct Fleet {
    jobs: Vec<SimJob>,
    cycle: usize,
    now: i64,
    custom: JobCustom,
}

impl Fleet {
    fn new(jobs: usize) -> Fleet {
        Fleet::with_custom(jobs, JobCustom::default())
    }

    fn with_custom(jobs: usize, custom: JobCustom) -> Fleet {
        Fleet {
            jobs: (0..jobs).map(SimJob::new).collect(),
            cycle: 0,
            now: 0,
            custom,
        }
    }

    /// Runs the cycles that fill the window (`samples` collected cycles) and one more, so that
    /// the next cycle starts on a full window; returns what the last of them did.
    fn fill(&mut self, opts: &AutoscalerOptions, aligner: &dyn Aligner, samples: u64) -> Tally {
        let mut last = Tally::default();
        for round in 0..=samples {
            let mut tally = Tally::default();
            for job in &mut self.jobs {
                job.advance(self.cycle);
                let out = run_cycle_custom(
                    &job.name,
                    opts,
                    &job.obs,
                    self.now,
                    aligner,
                    &self.custom,
                    &mut job.state,
                );
                tally.add(&out);
            }
            self.cycle += 1;
            self.now += INTERVAL_MS;
            if round == samples {
                last = tally;
            }
        }
        last
    }

    /// One cycle of every job; only `run_cycle` is timed.
    fn round(
        &mut self,
        opts: &AutoscalerOptions,
        aligner: &dyn Aligner,
        tally: &mut Tally,
    ) -> Duration {
        let mut total = Duration::ZERO;
        for job in &mut self.jobs {
            job.advance(self.cycle);
            let start = Instant::now();
            let out = timed_cycle(job, opts, self.now, aligner, &self.custom);
            total += start.elapsed();
            tally.add(&out);
            black_box(out);
        }
        self.cycle += 1;
        self.now += INTERVAL_MS;
        total
    }
}

/// The measured call, kept out of line so that a profiler can collect only the timed cycles
/// (`valgrind --tool=callgrind --toggle-collect='*timed_cycle*'`).
#[inline(never)]
fn timed_cycle(
    job: &mut SimJob,
    opts: &AutoscalerOptions,
    now: i64,
    aligner: &dyn Aligner,
    custom: &JobCustom,
) -> CycleOutcome {
    run_cycle_custom(
        &job.name,
        opts,
        &job.obs,
        now,
        aligner,
        custom,
        &mut job.state,
    )
}

fn plugin_registry() -> (ModeRegistry, tempfile::TempDir) {
    let profile = build(&["bucket-align"]);
    let file = plugin_file(&profile, "bucket-align");
    let dir = plugins_dir(&[(&file, "libbucket_align.so")]);
    let (registry, _) = ModeRegistry::discover(dir.path());
    (registry, dir)
}

/// The bucket-align plugin with the slo-target evaluator and the step-limit executor, loaded
/// in-process, and every job's evaluator and executor as a job configures them. The limit is
/// loose enough to apply every decided step as it is, so that the row decides what the
/// alignment-plugin row decides and only the two calls' cost differs.
fn kinds_registry() -> (ModeRegistry, JobCustom, tempfile::TempDir) {
    let packages = ["bucket-align", "slo-target", "step-limit"];
    let profile = build(&packages);
    let files: Vec<_> = packages
        .iter()
        .map(|p| {
            (
                plugin_file(&profile, p),
                format!("lib{}.so", p.replace('-', "_")),
            )
        })
        .collect();
    let refs: Vec<_> = files
        .iter()
        .map(|(f, n)| (f.as_path(), n.as_str()))
        .collect();
    let dir = plugins_dir(&refs);
    let (registry, _) = ModeRegistry::discover(dir.path());
    let custom = resolve_custom(
        &config(&[
            ("metrics.custom-evaluators", "slo"),
            ("metrics.custom-evaluator.slo.class", "slo-target"),
            ("metrics.custom-evaluator.slo.drain-within", "30 min"),
            ("scaling.custom-executors", "steps"),
            ("scaling.custom-executor.steps.class", "step-limit"),
            ("scaling.custom-executor.steps.max-step", "100000"),
        ]),
        &registry,
    )
    .expect("slo-target and step-limit resolve");
    (registry, custom, dir)
}

/// The same plugins directory served in `process` isolation, by workers of the flowscale
/// binary built with this bench, speaking at most `protocol`.
fn process_registry(dir: &tempfile::TempDir, protocol: u32) -> ModeRegistry {
    let mut options = IsolationOptions::new(Duration::from_secs(1));
    options.worker_exe = env!("CARGO_BIN_EXE_flowscale").into();
    options.protocol = protocol;
    let (registry, reports) = ModeRegistry::discover_with(dir.path(), &Isolation::Process(options));
    assert!(
        registry.get("bucket-align").is_some(),
        "bucket-align is served by a worker: {reports:#?}"
    );
    registry
}

/// The mean time of one round per row (mode, jobs), for the ratios printed at the end.
#[derive(Default)]
struct Means(BTreeMap<(&'static str, usize), Duration>);

impl Means {
    fn ratio(&self, over: (&'static str, usize), under: (&'static str, usize)) {
        if let (Some(a), Some(b)) = (self.0.get(&over), self.0.get(&under)) {
            eprintln!(
                "ratio {}/{} at {} jobs: {:.2}x ({a:?} / {b:?} per round)",
                over.0,
                under.0,
                over.1,
                a.as_secs_f64() / b.as_secs_f64()
            );
        }
    }
}

/// Jobs in a fleet, and samples in their window.
type Fleetsize = (usize, u64);

fn bench(c: &mut Criterion) {
    let (registry, dir) = plugin_registry();
    let isolated = process_registry(&dir, PROTOCOL_VERSION);
    let isolated3 = process_registry(&dir, 3);
    let isolated2 = process_registry(&dir, 2);
    let (kinds, custom, _kinds_dir) = kinds_registry();
    let mut rows: Vec<(&'static str, JobAlignment, &[Fleetsize], JobCustom)> = aligners(&registry)
        .into_iter()
        .map(|(label, aligner)| {
            let fleets: &[Fleetsize] = &[(100, 8), (1_000, 8), (10_000, 3)];
            (label, aligner, fleets, JobCustom::default())
        })
        .collect();
    // The alignment plugin with an evaluator and an executor plugin on every job, in-process.
    rows.push((
        "plugin-kinds",
        plugin_aligner(&kinds),
        &[(100, 8), (1_000, 8)],
        custom,
    ));
    // Process isolation costs a round trip per job: the 1,000-job fleet only.
    let none = JobCustom::default;
    rows.push((
        "plugin-process",
        plugin_aligner(&isolated),
        &[(1_000, 8)],
        none(),
    ));
    // A round trip per aligned vertex (protocol 3), and those in JSON with the whole context
    // in every request (protocol 2), for comparison.
    rows.push((
        "plugin-process3",
        plugin_aligner(&isolated3),
        &[(1_000, 8)],
        none(),
    ));
    rows.push((
        "plugin-process2",
        plugin_aligner(&isolated2),
        &[(1_000, 8)],
        none(),
    ));
    let mut means = Means::default();
    let mut group = c.benchmark_group("decision_cycle");
    group.sample_size(10);
    // The window holds `samples` collected cycles; the 10,000-job fleet keeps it short so the
    // fleet's state stays small.
    for (label, aligner, fleets, custom) in &rows {
        for &(jobs, samples) in *fleets {
            let aligner: &dyn Aligner = aligner;
            let opts = options(samples);
            let mut fleet = Fleet::with_custom(jobs, custom.clone());
            let filled = fleet.fill(&opts, aligner, samples);
            eprintln!(
                "{label}: {jobs} jobs, window of {samples} samples: stages of one cycle {:?}",
                filled.stages
            );
            let mut timed = Tally::default();
            let mut spent = Duration::ZERO;
            group.throughput(Throughput::Elements(jobs as u64));
            group.bench_function(
                BenchmarkId::new(format!("{label}/jobs_x20_vertices_window{samples}"), jobs),
                |b| {
                    b.iter_custom(|iters| {
                        let took: Duration = (0..iters)
                            .map(|_| fleet.round(&opts, aligner, &mut timed))
                            .sum();
                        spent += took;
                        took
                    })
                },
            );
            if timed.cycles == 0 {
                // Filtered out on the command line: nothing was timed.
                continue;
            }
            let rounds = timed.cycles / jobs;
            means.0.insert((label, jobs), spent / rounds.max(1) as u32);
            eprintln!(
                "{label}: {jobs} jobs, timed cycles: {} cycles, {} decided {:?}, {} vertex targets, {} aligned",
                timed.cycles, timed.decided, timed.stages, timed.targets, timed.aligned
            );
            timed.assert_decides(&format!("{label}/{jobs}"));
        }
    }
    group.finish();
    for jobs in [100, 1_000, 10_000] {
        means.ratio(("plugin", jobs), ("builtin", jobs));
    }
    for jobs in [100, 1_000] {
        means.ratio(("plugin-kinds", jobs), ("plugin", jobs));
    }
    means.ratio(("plugin-process", 1_000), ("plugin", 1_000));
    means.ratio(("plugin-process3", 1_000), ("plugin", 1_000));
    means.ratio(("plugin-process2", 1_000), ("plugin", 1_000));
    means.ratio(("plugin-process", 1_000), ("plugin-process3", 1_000));
}

/// The built-in BALANCED mode alone (no plugin build needed).
fn aligners_builtin(registry: &ModeRegistry) -> (&'static str, JobAlignment) {
    let config = BTreeMap::from([("scaling.alignment.mode".to_string(), "BALANCED".to_string())]);
    let builtin = JobAlignment::resolve("bench", &config, registry).expect("BALANCED resolves");
    ("builtin", builtin)
}

/// A fixed workload for instruction counting (no timing loop, no statistics):
/// `DECISION_CYCLE_PROFILE=<builtin|plugin|plugin-kinds|plugin-process|plugin-process3|plugin-process2>:<jobs>:<window samples>:<rounds>`.
fn profile(spec: &str) {
    let parts: Vec<&str> = spec.split(':').collect();
    let [label, jobs, samples, rounds] = parts[..] else {
        panic!(
            "DECISION_CYCLE_PROFILE is <builtin|plugin|plugin-kinds|plugin-process|plugin-process3|plugin-process2>:<jobs>:<window samples>:<rounds>"
        );
    };
    let (jobs, samples, rounds): (usize, u64, usize) = (
        jobs.parse().expect("jobs"),
        samples.parse().expect("window samples"),
        rounds.parse().expect("rounds"),
    );
    let (registry, dir) = plugin_registry();
    let mut custom = JobCustom::default();
    let aligner = if label == "plugin-kinds" {
        let (kinds, kinds_custom, _) = kinds_registry();
        custom = kinds_custom;
        plugin_aligner(&kinds)
    } else if label == "plugin-process" {
        plugin_aligner(&process_registry(&dir, PROTOCOL_VERSION))
    } else if label == "plugin-process3" {
        plugin_aligner(&process_registry(&dir, 3))
    } else if label == "plugin-process2" {
        plugin_aligner(&process_registry(&dir, 2))
    } else {
        aligners(&registry)
            .into_iter()
            .find(|(l, _)| *l == label)
            .map(|(_, aligner)| aligner)
            .expect("builtin, plugin or plugin-process")
    };
    let opts = options(samples);
    let mut fleet = Fleet::with_custom(jobs, custom);
    fleet.fill(&opts, &aligner, samples);
    let mut tally = Tally::default();
    let mut total = Duration::ZERO;
    for _ in 0..rounds {
        total += fleet.round(&opts, &aligner, &mut tally);
    }
    eprintln!(
        "{label}: {jobs} jobs, window of {samples} samples, {rounds} rounds: {:?} per round; {tally:?}",
        total / rounds.max(1) as u32
    );
    tally.assert_decides(label);
}

/// `DECISION_CYCLE_INTERLEAVED=<jobs>:<rounds>`: the plugin mode in-process, in `process`
/// isolation and in `process` isolation with protocols 3 and 2, one round of each in turn, so
/// that the four see the same load on a shared machine (rows measured one after the other do not: the
/// load moves between them). Prints the median round time of each and the median over rounds of
/// each `process` round's time over the in-process round's next to it.
fn interleaved(spec: &str) {
    let parts: Vec<&str> = spec.split(':').collect();
    let [jobs, rounds] = parts[..] else {
        panic!("DECISION_CYCLE_INTERLEAVED is <jobs>:<rounds>");
    };
    let (jobs, rounds): (usize, usize) =
        (jobs.parse().expect("jobs"), rounds.parse().expect("rounds"));
    const SAMPLES: u64 = 8;
    let (registry, dir) = plugin_registry();
    let (current, compact, json) = (
        process_registry(&dir, PROTOCOL_VERSION),
        process_registry(&dir, 3),
        process_registry(&dir, 2),
    );
    let rows = [
        ("plugin", plugin_aligner(&registry)),
        ("plugin-process", plugin_aligner(&current)),
        ("plugin-process3", plugin_aligner(&compact)),
        ("plugin-process2", plugin_aligner(&json)),
    ];
    let opts = options(SAMPLES);
    let mut fleets: Vec<Fleet> = rows
        .iter()
        .map(|(_, aligner)| {
            let mut fleet = Fleet::new(jobs);
            fleet.fill(&opts, aligner, SAMPLES);
            fleet
        })
        .collect();
    let mut tallies: Vec<Tally> = rows.iter().map(|_| Tally::default()).collect();
    let mut times: Vec<Vec<Duration>> = rows.iter().map(|_| Vec::new()).collect();
    let mut ticks = vec![0u64; rows.len()];
    let workers = children();
    let cpu = || cpu_ticks(std::process::id()) + workers.iter().map(|&w| cpu_ticks(w)).sum::<u64>();
    for _ in 0..rounds {
        for (i, (_, aligner)) in rows.iter().enumerate() {
            let before = cpu();
            times[i].push(fleets[i].round(&opts, aligner, &mut tallies[i]));
            ticks[i] += cpu() - before;
        }
    }
    eprintln!("interleaved: {} plugin workers", workers.len());
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (i, (label, _)) in rows.iter().enumerate() {
        tallies[i].assert_decides(label);
        let secs: Vec<f64> = times[i].iter().map(Duration::as_secs_f64).collect();
        eprintln!(
            "interleaved {label}: {jobs} jobs, {rounds} rounds, median {:.1} ms per round",
            median(secs) * 1000.0
        );
    }
    for (i, (label, _)) in rows.iter().enumerate() {
        eprintln!(
            "interleaved {label}: CPU time of the host and its workers {} ms per round; over \
             plugin {:.2}x",
            ticks[i] * 10 / rounds as u64,
            ticks[i] as f64 / ticks[0].max(1) as f64
        );
    }
    for (i, (label, _)) in rows.iter().enumerate().skip(1) {
        let ratios: Vec<f64> = times[i]
            .iter()
            .zip(&times[0])
            .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
            .collect();
        eprintln!(
            "interleaved ratio {label}/plugin at {jobs} jobs: median {:.2}x over {rounds} rounds",
            median(ratios)
        );
    }
}

/// CPU time (user and system) of process `pid` so far, in clock ticks (10 ms), from
/// `/proc/<pid>/stat`; 0 when it cannot be read.
fn cpu_ticks(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // The fields after the command name (which may hold spaces), from field 3 (state) on:
    // utime and stime are fields 14 and 15.
    let rest = stat.rfind(')').map_or("", |at| &stat[at + 1..]);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    field(14).unwrap_or(0) + field(15).unwrap_or(0)
}

/// The processes this one started (its plugin workers).
fn children() -> Vec<u32> {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                let rest = stat.rfind(')').map_or("", |at| &stat[at + 1..]);
                rest.split_whitespace().nth(1) == Some(me.as_str())
            })
        })
        .collect()
}

#[path = "decision_cycle/serving.rs"]
mod serving;

criterion_group!(benches, bench);

/// The name filter given on the command line, if any (`cargo bench -- <filter>`).
fn filter() -> Option<String> {
    std::env::args().skip(1).find(|arg| !arg.starts_with('-'))
}

fn main() {
    if let Ok(spec) = std::env::var("DECISION_CYCLE_PROFILE") {
        profile(&spec);
        return;
    }
    if let Ok(spec) = std::env::var("DECISION_CYCLE_INTERLEAVED") {
        interleaved(&spec);
        return;
    }
    if let Ok(spec) = std::env::var("SERVING_PROFILE") {
        serving::profile(&spec);
        return;
    }
    let filter = filter();
    let serving = "decision_cycle_serving";
    // The serving measurement is not a criterion benchmark (it interleaves its settings); it
    // runs when no filter is given or the filter names it.
    let only_serving = filter.as_deref().is_some_and(|f| f.starts_with(serving));
    if !only_serving {
        benches();
        Criterion::default().configure_from_args().final_summary();
    }
    if filter
        .as_deref()
        .is_none_or(|f| serving.contains(f) || only_serving)
    {
        serving::run(std::env::args().any(|arg| arg == "--test"));
    }
}
