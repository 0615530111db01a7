//! The server's cost: a `/metrics` scrape of a large fleet (1,000 jobs x 20 vertices, each
//! vertex with its parallelism and evaluated metrics, each job with events, lateness and its
//! gauges), and the update the control loop pays per step (`FleetView::record`).
//!
//! A scrape after a change (every `_after_a_change` row sets a gauge first, as a step does)
//! encodes the whole text; a scrape with nothing changed since the previous one serves the
//! text encoded then (`_unchanged`). Each row takes the text as the server sends it
//! (`Metrics::encoded`, shared with the cache, not copied).
//!
//! `cargo bench -p flowscale --bench metrics_scrape`

#![warn(missing_docs, unreachable_pub)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use flowscale::runner::CycleReport;
use flowscale::scaling::{CycleStage, EvaluatedVertices, ScalingMetric, VertexDecision};
use flowscale::serve::FleetView;

const JOBS: usize = 1_000;
const VERTICES: usize = 20;

fn report(job: usize, step: i64) -> CycleReport {
    let mut r = CycleReport::new(&format!("job-{job:04}"), step * 10_000);
    r.stage = Some(CycleStage::WithinBounds);
    r.load = Some(1000.0);
    r.elapsed = Duration::from_micros(250);
    r.vertices = (0..VERTICES)
        .map(|v| VertexDecision {
            vertex: format!("{v:032x}").into(),
            name: format!("operator-{v}").into(),
            current: 8,
            target: Some(12),
            aligned: Some(16),
            proposed: Some(16),
            mode: Some("BALANCED".into()),
            outside_band: false,
            excluded: false,
            reason: "within bounds".into(),
            explanation: vec!["kept".to_string()].into(),
        })
        .collect();
    // What a cycle evaluates for each vertex: rates, load and thresholds, and a source's lag
    // (vertex 0); values with fractions, as real ones have.
    let nan = f64::NAN;
    r.evaluated = EvaluatedVertices::of(
        (0..VERTICES)
            .map(|v| {
                let rate = 1000.0 + v as f64 * 37.25 + step as f64;
                let mut metrics = vec![
                    (ScalingMetric::TrueProcessingRate, nan, rate * 1.7),
                    (ScalingMetric::TargetDataRate, nan, rate),
                    (ScalingMetric::CatchUpDataRate, 3.5, nan),
                    (ScalingMetric::Load, nan, 0.587),
                    (
                        ScalingMetric::ScaleUpRateThreshold,
                        (rate / 0.7).round(),
                        nan,
                    ),
                    (
                        ScalingMetric::ScaleDownRateThreshold,
                        (rate / 0.4).round(),
                        nan,
                    ),
                    (ScalingMetric::RecommendedParallelism, 16.0, nan),
                ];
                if v == 0 {
                    metrics.push((ScalingMetric::Lag, 1234.0 + step as f64, nan));
                }
                (format!("{v:032x}").into(), metrics)
            })
            .collect(),
    );
    r.decision_interval = Some(Duration::from_secs(10));
    r.catch_up_target = Some(Duration::from_secs(300));
    r.cooldown_queued = Some(step % 7 == 0);
    r.lateness = Some(Duration::from_micros(1500 + step as u64 * 10));
    if step % 10 == 0 {
        r.operation = Some(BTreeMap::from([(format!("{:032x}", 0), 16)]));
    }
    r
}

fn fleet() -> FleetView {
    let view = FleetView::new();
    for job in 0..JOBS {
        let name = format!("job-{job:04}");
        view.add_job(&name, "sim", "BALANCED");
        for step in 0..3 {
            view.record(&report(job, step));
        }
    }
    view
}

fn scrape(c: &mut Criterion) {
    let view = fleet();
    let text = view.metrics().encode_text();
    eprintln!(
        "scrape of {JOBS} jobs x {VERTICES} vertices: {} lines, {} bytes",
        text.lines().count(),
        text.len()
    );
    let mut group = c.benchmark_group("metrics_scrape");
    group.sample_size(20);
    let mut loaded = 0;
    let mut change = || {
        loaded = (loaded + 1) % 8;
        view.metrics().set_plugins_loaded(loaded);
    };
    group.bench_function("encode_text_1000x20_after_a_change", |b| {
        b.iter(|| {
            change();
            black_box(view.metrics().encoded(false))
        })
    });
    group.bench_function("encode_openmetrics_1000x20_after_a_change", |b| {
        b.iter(|| {
            change();
            black_box(view.metrics().encoded(true))
        })
    });
    group.bench_function("encode_text_1000x20_unchanged", |b| {
        b.iter(|| black_box(view.metrics().encoded(false)))
    });
    group.finish();
    let step = report(7, 4);
    c.bench_function("record_step_20_vertices", |b| {
        b.iter(|| view.record(black_box(&step)))
    });
}

criterion_group!(benches, scrape);
criterion_main!(benches);
