//! What crossing the plugin boundary costs: one `align` call of the bucket-align mode through
//! the registry (loaded from its `.so`) against the same code linked in-process, for a bare
//! context and for one carrying a small job graph, metrics and parameters; and the time to
//! discover and load a plugins directory holding the two example plugins. The `process` rows
//! make the same call on the same plugin in `process` isolation: one request and reply through
//! the plugin's worker process (the binary built from this package serves as the worker), in
//! the current protocol and in protocol 2 (JSON, the whole context in every request). Besides
//! criterion's estimates the bench prints percentiles of single timed calls (`p50` is what the
//! goal of 50 µs per isolated call is about).

#![warn(missing_docs, unreachable_pub)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use flowscale::alignment::HostMode;
use flowscale::plugins::isolation::IsolationOptions;
use flowscale::plugins::isolation::compact::ContextCall;
use flowscale::plugins::isolation::protocol::{Call, PROTOCOL_VERSION, WireContext, encode};
use flowscale::plugins::isolation::slots::{HeldJobs, SentJobs};
use flowscale::plugins::{Isolation, ModeRegistry};
use flowscale_sdk::{
    AlignmentContext, AlignmentMode, EvaluatedMetric, JobTopology, ModeParams, ShipStrategy,
    SubtaskLoad, TopologyEdge, TopologyVertex,
};
use flowscale_tests::{build, plugin_file, plugins_dir};

fn bare() -> AlignmentContext {
    AlignmentContext::builder(16, 24, 1024)
        .input_ship_strategies(vec![ShipStrategy::Custom { buckets: 128 }])
        .build()
}

fn rich() -> AlignmentContext {
    let vertex = |i: u32| TopologyVertex {
        id: format!("{i:032x}"),
        name: format!("operator {i}"),
        parallelism: 16,
        max_parallelism: 1024,
        source_partitions: if i == 0 { 32 } else { 0 },
    };
    let edge = |i: u32, ship| TopologyEdge {
        from: format!("{i:032x}"),
        to: format!("{:032x}", i + 1),
        ship_strategy: ship,
    };
    let metric = |name: &str| {
        (
            name.to_string(),
            EvaluatedMetric {
                current: 0.5,
                average: 0.4,
            },
        )
    };
    AlignmentContext::builder(16, 24, 1024)
        .identity("orders-enrichment", format!("{:032x}", 2), "operator 2")
        .limits(1, 200)
        .input_ship_strategies(vec![ShipStrategy::Custom { buckets: 128 }])
        .metrics(
            [
                "LOAD",
                "TRUE_PROCESSING_RATE",
                "LAG",
                "CATCH_UP_DATA_RATE",
                "TARGET_DATA_RATE",
            ]
            .into_iter()
            .map(metric)
            .collect(),
        )
        .topology(JobTopology {
            vertices: (0..4).map(vertex).collect(),
            edges: vec![
                edge(0, ShipStrategy::Forward),
                edge(1, ShipStrategy::Custom { buckets: 128 }),
                edge(2, ShipStrategy::Hash),
            ],
        })
        .params(ModeParams::new(
            "buckets",
            BTreeMap::from([
                ("class".to_string(), "bucket-align".to_string()),
                ("rule".to_string(), "LOAD_REDUCING".to_string()),
            ]),
        ))
        .build()
}

/// p50 / p90 / p99 of 20,000 single calls of `mode` on `ctx`, each timed on its own.
fn percentiles(mode: &dyn HostMode, ctx: &AlignmentContext) -> String {
    let mut took: Vec<Duration> = (0..20_000)
        .map(|_| {
            let start = Instant::now();
            let answer = mode.align(black_box(ctx));
            let elapsed = start.elapsed();
            assert!(answer.is_ok(), "{answer:?}");
            elapsed
        })
        .collect();
    took.sort();
    let at = |q: usize| took[took.len() * q / 100];
    format!(
        "p50 {:?}, p90 {:?}, p99 {:?} (20,000 calls)",
        at(50),
        at(90),
        at(99)
    )
}

fn plugin_call(c: &mut Criterion) {
    let profile = build(&["bucket-align", "slot-align"]);
    let bucket = plugin_file(&profile, "bucket-align");
    let slot = plugin_file(&profile, "slot-align");
    let dir = plugins_dir(&[(&bucket, "libbucket_align.so"), (&slot, "libslot_align.so")]);

    // The first discovery maps the libraries and runs abi_stable's layout checks (cold);
    // later ones find them mapped (warm) and are measured by criterion below.
    let started = Instant::now();
    let (registry, reports) = ModeRegistry::discover(dir.path());
    let cold = started.elapsed();
    assert_eq!(
        registry.ids(),
        vec!["bucket-align", "slot-align"],
        "{reports:#?}"
    );
    eprintln!("cold discover+load of 2 plugins: {cold:?}");

    let plugin = registry
        .get("bucket-align")
        .expect("bucket-align is loaded")
        .mode
        .clone();
    let linked: Box<dyn AlignmentMode> = Box::new(bucket_align::BucketAlign);
    for (label, ctx) in [("bare", bare()), ("rich", rich())] {
        assert_eq!(plugin.align(&ctx), linked.align(&ctx));
        let mut group = c.benchmark_group(format!("align/{label}"));
        group.bench_function("plugin via registry", |b| {
            b.iter(|| plugin.align(black_box(&ctx)))
        });
        group.bench_function("linked in-process", |b| {
            b.iter(|| linked.align(black_box(&ctx)))
        });
        group.finish();
    }

    // Process isolation: the same file served by a worker of the flowscale binary, in the
    // current protocol and in protocol 2.
    let isolated = |protocol: u32| {
        let mut options = IsolationOptions::new(Duration::from_secs(1));
        options.worker_exe = env!("CARGO_BIN_EXE_flowscale").into();
        options.protocol = protocol;
        let (isolated, reports) =
            ModeRegistry::discover_with(dir.path(), &Isolation::Process(options));
        let mode = isolated
            .get("bucket-align")
            .unwrap_or_else(|| panic!("bucket-align is served by a worker: {reports:#?}"))
            .mode
            .clone();
        (isolated, mode)
    };
    let (_current, process) = isolated(PROTOCOL_VERSION);
    let (_old, process2) = isolated(2);
    for (label, ctx) in [("bare", bare()), ("rich", rich())] {
        assert_eq!(process.align(&ctx), linked.align(&ctx));
        assert_eq!(process2.align(&ctx), linked.align(&ctx));
        let mut group = c.benchmark_group(format!("align/{label}"));
        group.bench_function("process isolation", |b| {
            b.iter(|| process.align(black_box(&ctx)))
        });
        group.bench_function("process isolation, protocol 2", |b| {
            b.iter(|| process2.align(black_box(&ctx)))
        });
        group.finish();
    }
    let rich_ctx = rich();
    for (label, mode) in [
        ("plugin in-process", plugin.as_ref()),
        ("process isolation", process.as_ref()),
        ("process isolation, protocol 2", process2.as_ref()),
    ] {
        eprintln!("align/rich, {label}: {}", percentiles(mode, &rich_ctx));
    }
    // What the round trip costs beyond the pipes: encoding the request (the reply is tiny).
    c.bench_function(
        "process: encode the rich request, compact (graph held)",
        |b| {
            let mut sent = SentJobs::default();
            b.iter(|| sent.encode(1, "bucket-align", ContextCall::Align, black_box(&rich_ctx)))
        },
    );
    c.bench_function(
        "process: decode the rich request, compact (graph held)",
        |b| {
            let (mut sent, mut held) = (SentJobs::default(), HeldJobs::default());
            let first = sent
                .encode(1, "bucket-align", ContextCall::Align, &rich_ctx)
                .unwrap();
            held.decode(&first[4..]).unwrap();
            let frame = sent
                .encode(2, "bucket-align", ContextCall::Align, &rich_ctx)
                .unwrap();
            b.iter(|| {
                held.decode(black_box(&frame[4..]))
                    .map(|request| request.ctx.target_parallelism())
            })
        },
    );
    c.bench_function("process: encode the rich request, JSON", |b| {
        b.iter(|| encode(&Call::Align(WireContext::from(black_box(&rich_ctx)))))
    });
    c.bench_function("process: decode the rich request, JSON", |b| {
        let frame = encode(&Call::Align(WireContext::from(&rich_ctx))).unwrap();
        b.iter(|| {
            serde_json::from_slice::<Call>(black_box(&frame[4..])).map(|call| match call {
                Call::Align(wire) => wire.into_context().target_parallelism(),
                _ => 0,
            })
        })
    });

    // load-align on a vertex of 32768 key groups (Flink's largest max parallelism), 64 subtasks
    // today with a skewed load, asked to scale up to 100: one decision predicts the busiest
    // subtask for every candidate parallelism it may pick.
    let skewed = AlignmentContext::builder(64, 100, 32_768)
        .identity("orders", "agg", "aggregate")
        .limits(1, 32_768)
        .subtask_loads(
            (0..64)
                .map(|i| SubtaskLoad {
                    busy_ratio: Some(if i % 16 == 3 { 0.95 } else { 0.55 }),
                    records_in_per_second: Some(if i % 16 == 3 { 9_000.0 } else { 4_000.0 }),
                })
                .collect(),
        )
        .build();
    let profile = build(&["load-align"]);
    let load_dir = plugins_dir(&[(&plugin_file(&profile, "load-align"), "libload_align.so")]);
    let (loaded, reports) = ModeRegistry::discover(load_dir.path());
    let load_align = loaded
        .get("load-align")
        .unwrap_or_else(|| panic!("load-align is loaded: {reports:#?}"))
        .mode
        .clone();
    let answer = load_align.align(&skewed);
    assert!(answer.is_ok(), "{answer:?}");
    eprintln!("load-align on 32768 key groups answers {answer:?}");
    c.bench_function(
        "load-align: one decision, 32768 key groups, 64 -> 100",
        |b| b.iter(|| load_align.align(black_box(&skewed))),
    );

    c.bench_function("discover+load 2 plugins (warm)", |b| {
        b.iter(|| ModeRegistry::discover(black_box(dir.path())))
    });
}

criterion_group!(benches, plugin_call);
criterion_main!(benches);
