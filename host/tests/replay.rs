//! Replays a recorded scenario through the decision pipeline and checks the Flink autoscaler's numbers
//! cycle by cycle.

#![warn(missing_docs, unreachable_pub)]

use std::collections::BTreeMap;
use std::path::Path;

use flowscale::engine::replay::{RescalePolicy, open};
use flowscale::engine::{Collector, Realizer};
use flowscale::events::EventReason;
use flowscale::scaling::testing::BalancedAligner;
use flowscale::scaling::{
    AutoscalerOptions, CycleOutcome, CycleStage, JobScalingState, ScalingMetric, run_cycle,
};

const SRC: &str = "0a448493b4782967b150582570326227";
const SINK: &str = "ea632d67b7d595e5b851708ae9ad79d6";

fn options() -> AutoscalerOptions {
    // The Flink autoscaler's BacklogBasedScalingTest configuration, plus a 2 s scale-down interval.
    let config: BTreeMap<String, String> = [
        ("utilization.target", "0.8"),
        ("utilization.max", "0.9"),
        ("utilization.min", "0.7"),
        ("catch-up.duration", "2 s"),
        ("restart.time", "1 s"),
        ("backlog-processing.lag-threshold", "1 s"),
        ("metrics.window", "1 s"),
        ("stabilization.interval", "0"),
        ("scale-down.interval", "2 s"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    AutoscalerOptions::from_config(&config).expect("valid options")
}

fn value(out: &CycleOutcome, vertex: &str, metric: ScalingMetric) -> (f64, f64) {
    let m = out.evaluated[vertex][&metric];
    (m.current, m.average)
}

fn map(p: u32) -> BTreeMap<String, u32> {
    [(SRC.to_string(), p), (SINK.to_string(), p)]
        .into_iter()
        .collect()
}

#[test]
fn backlog_scale_up_then_delayed_scale_down() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/replay/backlog_then_scale_down.jsonl");
    let (mut collector, mut realizer) = open(&path, RescalePolicy::Apply).expect("replay file");
    let opts = options();
    let mut state = JobScalingState::default();
    let mut outcomes = BTreeMap::new();
    for at in collector.times() {
        let obs = collector.observe(at).expect("observation");
        let out = run_cycle("orders", &opts, &obs, at, &BalancedAligner, &mut state);
        if let Some(decision) = &out.decision {
            realizer.rescale(decision).expect("rescale");
        }
        outcomes.insert(at, out);
    }

    // t = 0: one sample.
    assert_eq!(
        outcomes[&0].stage,
        CycleStage::CollectingMetrics { samples: 1 }
    );

    // t = 1 s: the Flink autoscaler's worked example, both vertices 1 -> 4.
    let out = &outcomes[&1000];
    assert_eq!(out.stage, CycleStage::Scaled);
    assert_eq!(out.decision, Some(map(4)));
    for v in [SRC, SINK] {
        assert_eq!(value(out, v, ScalingMetric::TargetDataRate).1, 500.0);
        assert_eq!(value(out, v, ScalingMetric::CatchUpDataRate).0, 1000.0);
        assert_eq!(value(out, v, ScalingMetric::TrueProcessingRate).1, 588.235);
        assert_eq!(value(out, v, ScalingMetric::ScaleUpRateThreshold).0, 1500.0);
        assert_eq!(
            value(out, v, ScalingMetric::ScaleDownRateThreshold).0,
            f64::INFINITY
        );
    }

    // t = 2 s: the job runs again at 4/4 since 2 s: history restarts, restart took 1 s.
    assert_eq!(
        outcomes[&2000].stage,
        CycleStage::CollectingMetrics { samples: 1 }
    );
    assert_eq!(
        state.scaling_tracking.records[&1000].restart_duration_ms,
        Some(1000)
    );

    // t = 3 s: lag shrinks (1000 -> 400) faster than it grows: target rate 0, catch-up 200,
    // TPR 600 / 0.3 = 2000 -> factor clamped to 0.4 -> 2; the scale-down is delayed.
    let out = &outcomes[&3000];
    assert_eq!(out.stage, CycleStage::WithinBounds);
    assert_eq!(value(out, SRC, ScalingMetric::TargetDataRate).1, 0.0);
    assert_eq!(value(out, SRC, ScalingMetric::CatchUpDataRate).0, 200.0);
    assert_eq!(value(out, SRC, ScalingMetric::TrueProcessingRate).1, 2000.0);
    assert!(!out.backlog);
    for v in &out.vertices {
        assert_eq!(
            (v.current, v.target, v.aligned, v.proposed),
            (4, Some(2), Some(2), None)
        );
        assert!(v.outside_band);
    }

    // t = 4 s: still inside the 2 s delay (first asked at 3 s).
    assert_eq!(outcomes[&4000].stage, CycleStage::WithinBounds);

    // t = 5 s: rate 600, no lag: capacity 0 + 600 * 1 / 2 + 600 / 0.8 = 1050, factor 0.525,
    // ceil(2.1) = 3 (BALANCED keeps 3: 720 % 3 == 0); the delay has elapsed: 4 -> 3.
    let out = &outcomes[&5000];
    assert_eq!(out.stage, CycleStage::Scaled);
    assert_eq!(out.decision, Some(map(3)));
    assert_eq!(value(out, SINK, ScalingMetric::TargetDataRate).1, 600.0);
    // Thresholds, rounded half up, with no lag (catch-up rate 0): scale-up at utilization.max
    // without the restart term, 600 / 0.9 = 666.7 -> 667; scale-down at utilization.min with
    // it, 600 / 0.7 + 600 * restart 1 s / catch-up 2 s = 857.1 + 300 = 1157.1 -> 1157. The
    // expected processing rate at 3 of 4 subtasks is TPR 2000 * 3 / 4 = 1500.
    assert_eq!(
        value(out, SINK, ScalingMetric::ScaleUpRateThreshold).0,
        667.0
    );
    assert_eq!(
        value(out, SINK, ScalingMetric::ScaleDownRateThreshold).0,
        1157.0
    );
    assert_eq!(
        value(out, SINK, ScalingMetric::ExpectedProcessingRate).0,
        1500.0
    );
    let report = out
        .events
        .iter()
        .find(|e| e.reason == EventReason::ScalingReport)
        .expect("scaling report");
    assert!(report.message.contains(&format!(
        "{{ Vertex ID {SINK} | Parallelism 4 -> 3 | Processing capacity 2000.00 -> 1500.00 | Target data rate 600.00}}"
    )));

    // An executed scaling clears every pending scale-down.
    assert!(state.delayed_scale_down.is_empty());

    // t = 6 s: running at 3/3 again.
    assert_eq!(
        outcomes[&6000].stage,
        CycleStage::CollectingMetrics { samples: 1 }
    );
    let calls = realizer.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].parallelism, map(4));
    assert_eq!(calls[1].parallelism, map(3));
    assert_eq!(collector.observe(6000).unwrap().vertices[0].parallelism, 3);
    assert_eq!(state.scaling_history.vertices[SINK].len(), 2);
}
