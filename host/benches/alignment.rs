//! ns per alignment for N = 128, 720 and 32768, typical and worst case, with the closed-form
//! search next to the Flink autoscaler's plain scan. Ratios are what to read: the machine is shared.

#![warn(missing_docs, unreachable_pub)]

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use flowscale::alignment::search::{Rule, Scan, first_accepted, first_accepted_scan};
use flowscale::alignment::{Aligner, AlignmentRequest, JobAlignment, NoCustomModes};
use flowscale_sdk::ShipStrategy;

/// (label, N, current, target): typical targets sit near a divisor; worst cases sit just above
/// N/2 so that EVENLY_SPREAD's scan walks to N.
const CASES: &[(&str, u32, u32, u32)] = &[
    ("typical", 128, 16, 24),
    ("worst", 128, 40, 65),
    ("typical", 720, 40, 50),
    ("worst", 720, 200, 361),
    ("typical", 32768, 100, 150),
    ("worst", 32768, 10000, 16385),
];

fn job(mode: &str) -> JobAlignment {
    let config: BTreeMap<String, String> =
        [("scaling.alignment.mode".to_string(), mode.to_string())].into();
    JobAlignment::resolve("bench", &config, &NoCustomModes).expect("built-in mode")
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("evenly_spread");
    let evenly = job("EVENLY_SPREAD");
    for &(label, n, current, target) in CASES {
        let id = format!("N={n}/{label}");
        let scan = Scan::up(u64::from(target), u64::from(n));
        group.bench_function(BenchmarkId::new("closed_form", &id), |b| {
            b.iter(|| {
                first_accepted(
                    black_box(u64::from(n)),
                    u64::from(target),
                    scan,
                    Rule::Divisor,
                )
            })
        });
        group.bench_function(BenchmarkId::new("plain_scan", &id), |b| {
            b.iter(|| {
                first_accepted_scan(
                    black_box(u64::from(n)),
                    u64::from(target),
                    scan,
                    Rule::Divisor,
                )
            })
        });
        // What the pipeline pays per vertex: the request, the context alignment builds from
        // it, and the mode.
        let request = AlignmentRequest {
            upper_limit: n,
            input_ship_strategies: [ShipStrategy::Hash].into(),
            ..AlignmentRequest::new(current, target, n)
        };
        group.bench_function(BenchmarkId::new("align_vertex", &id), |b| {
            b.iter(|| evenly.align(black_box(request.clone())).parallelism)
        });
    }
    group.finish();

    let mut group = c.benchmark_group("balanced");
    for &(label, n, _, target) in CASES {
        let id = format!("N={n}/{label}");
        let scan = Scan::up(u64::from(target), u64::from(n));
        group.bench_function(BenchmarkId::new("closed_form", &id), |b| {
            b.iter(|| {
                first_accepted(
                    black_box(u64::from(n)),
                    u64::from(target),
                    scan,
                    Rule::LoadReducing,
                )
            })
        });
        group.bench_function(BenchmarkId::new("plain_scan", &id), |b| {
            b.iter(|| {
                first_accepted_scan(
                    black_box(u64::from(n)),
                    u64::from(target),
                    scan,
                    Rule::LoadReducing,
                )
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
