//! One decision cycle (`scaling::run_cycle`) for fleets of 100, 1,000 and 10,000 jobs of 20
//! vertices each, with a full metric window, so every cycle goes through evaluation, vertex
//! targets, alignment and the executor; once with the built-in BALANCED mode and once with a
//! plugin mode (`bucket-align`, loaded from its `.so` through the registry).
//!
//! Only `run_cycle` is timed; advancing each job's synthetic observation is not. Busy times move
//! every cycle, so most vertices get a new target and are aligned every cycle: a worst case. A
//! large share of that cost is copying the job graph into each vertex's `AlignmentContext`
//! (the SDK context owns its topology).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use flowscale::alignment::{Aligner, JobAlignment};
use flowscale::engine::{
    AggregatedMetric, IoMetrics, JobObservation, JobStatus, ObservedEdge, ObservedVertex,
    VertexMetrics,
};
use flowscale::plugins::ModeRegistry;
use flowscale::scaling::{AutoscalerOptions, JobScalingState, run_cycle};
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

/// The built-in BALANCED mode and the bucket-align plugin mode, resolved as a job would.
fn aligners(registry: &ModeRegistry) -> Vec<(&'static str, JobAlignment)> {
    let config = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let builtin = JobAlignment::resolve(
        "bench",
        &config(&[("scaling.alignment.mode", "BALANCED")]),
        registry,
    )
    .expect("BALANCED resolves");
    let plugin = JobAlignment::resolve(
        "bench",
        &config(&[
            ("scaling.alignment.mode", "buckets"),
            ("scaling.alignment.mode.buckets.class", "bucket-align"),
        ]),
        registry,
    )
    .expect("the bucket-align plugin resolves");
    vec![("builtin", builtin), ("plugin", plugin)]
}

fn bench(c: &mut Criterion) {
    let profile = build(&["bucket-align"]);
    let file = plugin_file(&profile, "bucket-align");
    let dir = plugins_dir(&[(&file, "libbucket_align.so")]);
    let (registry, _) = ModeRegistry::discover(dir.path());
    let mut group = c.benchmark_group("decision_cycle");
    group.sample_size(10);
    // The window holds `samples` collected cycles; the 10,000-job fleet keeps it short so the
    // fleet's state stays small.
    for (label, aligner) in aligners(&registry) {
        for (jobs, samples) in [(100usize, 8u64), (1_000, 8), (10_000, 3)] {
            let aligner: &dyn Aligner = &aligner;
            let opts = options(samples);
            let mut fleet: Vec<SimJob> = (0..jobs).map(SimJob::new).collect();
            let mut cycle = 0usize;
            let mut now = 0i64;
            // Fill the window so that every measured cycle evaluates and decides.
            let mut stages: BTreeMap<String, usize> = BTreeMap::new();
            for round in 0..=samples {
                for job in &mut fleet {
                    job.advance(cycle);
                    let out = run_cycle(&job.name, &opts, &job.obs, now, aligner, &mut job.state);
                    if round == samples {
                        let stage = format!("{:?}", out.stage);
                        *stages.entry(stage).or_default() += 1;
                    }
                }
                cycle += 1;
                now += INTERVAL_MS;
            }
            eprintln!(
                "{label}: {jobs} jobs, window of {samples} samples: stages of one cycle {stages:?}"
            );
            group.throughput(Throughput::Elements(jobs as u64));
            group.bench_function(
                BenchmarkId::new(format!("{label}/jobs_x20_vertices_window{samples}"), jobs),
                |b| {
                    b.iter_custom(|iters| {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            for job in &mut fleet {
                                job.advance(cycle);
                                let start = Instant::now();
                                let out = run_cycle(
                                    &job.name,
                                    &opts,
                                    &job.obs,
                                    now,
                                    aligner,
                                    &mut job.state,
                                );
                                total += start.elapsed();
                                black_box(out);
                            }
                            cycle += 1;
                            now += INTERVAL_MS;
                        }
                        total
                    })
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
