//! Loads a plugin exporting a mode, metric evaluators and scaling executors (the `fixture-kinds`
//! plugin, SDK 0.1.3's kinds table) and calls each as the pipeline does: answers come back,
//! panics come back as errors naming them; under `process` isolation they run in the plugin's
//! worker and answer the same, and a crash of the worker fails only the call it interrupted.

#![warn(missing_docs, unreachable_pub)]

use std::collections::BTreeMap;
use std::time::Duration;

use flowscale::plugins::isolation::IsolationOptions;
use flowscale::plugins::{Isolation, ModeOrigin, ModeRegistry, PluginStatus};
use flowscale_sdk::{
    AlignmentContext, EVALUATOR_KEY, EXECUTOR_KEY, EvaluatedMetric, EvaluatedVertex,
    EvaluatorContext, ExecutorContext, ExecutorVerdict, ModeParams, ScalingSummary,
};
use flowscale_tests::{build, listed_ids, plugin_file, plugins_dir};

fn params(family: &'static str, pairs: &[(&str, &str)]) -> ModeParams {
    let entries: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    ModeParams::under(family, "inst", entries)
}

fn m(current: f64, average: f64) -> EvaluatedMetric {
    EvaluatedMetric { current, average }
}

fn summary(vertex: &str, current: u32, new: u32) -> ScalingSummary {
    ScalingSummary {
        vertex_id: vertex.to_string(),
        current_parallelism: current,
        new_parallelism: new,
        metrics: vec![("LAG".to_string(), m(5.0, 4.0))],
    }
}

#[test]
fn a_plugin_exports_every_kind_and_their_panics_are_contained() {
    let profile = build(&["fixture-kinds"]);
    let dir = plugins_dir(&[(
        &plugin_file(&profile, "fixture-kinds"),
        "libfixture_kinds.so",
    )]);
    let (registry, reports) = ModeRegistry::discover(dir.path());
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].status, PluginStatus::Loaded, "{reports:#?}");

    // The mode, as before.
    let ctx = AlignmentContext::builder(2, 3, 128).build();
    assert_eq!(
        registry.get("kinds-double").expect("mode").mode.align(&ctx),
        Ok(6)
    );

    // The evaluator sees the vertex's metrics, the vertices before it and its parameters.
    let rate = registry.evaluator("kinds-rate").expect("evaluator");
    assert_eq!(rate.description(), "target rate from the lag");
    assert!(matches!(
        &rate.origin,
        ModeOrigin::Plugin { plugin, .. } if plugin == "fixture-kinds"
    ));
    let ctx = EvaluatorContext::new("job", "v2", vec![("LAG".to_string(), m(10.0, 8.0))])
        .with_evaluated(vec![EvaluatedVertex {
            vertex_id: "v1".to_string(),
            metrics: Vec::new(),
        }])
        .with_params(params(EVALUATOR_KEY, &[("factor", "3")]));
    assert_eq!(
        rate.evaluator.evaluate(&ctx),
        Ok(vec![
            ("TARGET_DATA_RATE".to_string(), m(30.0, 24.0)),
            ("UPSTREAM".to_string(), m(1.0, 1.0)),
        ])
    );
    let err = rate
        .evaluator
        .validate(&params(EVALUATOR_KEY, &[("factor", "lots")]))
        .expect_err("not a number");
    assert!(
        err.message()
            .contains("metrics.custom-evaluator.inst.factor"),
        "{err}"
    );

    // The executor: its priority, its steps and its veto.
    let cap = registry.executor("kinds-cap").expect("executor");
    assert_eq!(cap.executor.priority(), 7);
    let proposed = ExecutorContext::new("job", vec![summary("b", 2, 9), summary("a", 2, 3)], 5)
        .with_params(params(EXECUTOR_KEY, &[("cap", "6")]));
    assert_eq!(
        cap.executor.apply(&proposed),
        Ok(ExecutorVerdict::Apply(vec![
            summary("a", 2, 3),
            summary("b", 2, 6)
        ]))
    );
    let frozen = ExecutorContext::new("frozen", vec![summary("a", 2, 3)], 1_234)
        .with_restart_time_ms(60_000);
    assert_eq!(
        cap.executor.apply(&frozen),
        Ok(ExecutorVerdict::Veto(
            "job frozen at 1234 ms (restart 60000 ms, 0 vertices in the graph)".to_string()
        ))
    );

    // Panics come back as errors naming the plugin, the kind and the panic, again and again,
    // and the other objects still answer.
    let boom = registry.evaluator("kinds-boom").expect("evaluator");
    let boom_x = registry.executor("kinds-boom").expect("executor");
    for _ in 0..3 {
        let err = boom.evaluator.evaluate(&ctx).expect_err("a panic");
        for part in [
            "fixture-kinds",
            "evaluator `kinds-boom`",
            "boom in evaluate",
        ] {
            assert!(err.message().contains(part), "{err} lacks {part}");
        }
        let err = boom_x.executor.apply(&proposed).expect_err("a panic");
        for part in ["fixture-kinds", "executor `kinds-boom`", "boom in apply"] {
            assert!(err.message().contains(part), "{err} lacks {part}");
        }
    }
    assert_eq!(boom_x.executor.priority(), 0, "the default priority");
    assert!(rate.evaluator.evaluate(&ctx).is_ok());

    // The listing names each kind.
    let json = serde_json::to_value(&reports[0]).expect("json");
    let ids = |kind: &str| listed_ids(&json, kind);
    assert_eq!(ids("modes"), ["kinds-double"]);
    assert_eq!(ids("evaluators"), ["kinds-rate", "kinds-boom"]);
    assert_eq!(ids("executors"), ["kinds-cap", "kinds-boom", "kinds-segv"]);
}

/// The fixture's registry under process isolation, with `options` changed by `tune`.
fn isolated(tune: impl FnOnce(&mut IsolationOptions)) -> (ModeRegistry, tempfile::TempDir) {
    let profile = build(&["fixture-kinds"]);
    let dir = plugins_dir(&[(
        &plugin_file(&profile, "fixture-kinds"),
        "libfixture_kinds.so",
    )]);
    let mut options = IsolationOptions::new(Duration::from_secs(10));
    options.worker_exe = env!("CARGO_BIN_EXE_flowscale").into();
    tune(&mut options);
    let (registry, reports) = ModeRegistry::discover_with(dir.path(), &Isolation::Process(options));
    assert_eq!(reports[0].status, PluginStatus::Loaded, "{reports:#?}");
    (registry, dir)
}

#[test]
fn process_isolation_runs_the_new_kinds_in_the_worker_as_in_process() {
    let (registry, _dir) = isolated(|_| {});
    // The mode runs in the worker, as before.
    let ctx = AlignmentContext::builder(2, 3, 128).build();
    assert_eq!(
        registry.get("kinds-double").expect("mode").mode.align(&ctx),
        Ok(6)
    );

    // The evaluator answers what it answers in-process: 10 x 3 and 8 x 3, one vertex before.
    let rate = registry.evaluator("kinds-rate").expect("listed");
    assert_eq!(rate.evaluator.unavailable(), None);
    let ctx = EvaluatorContext::new(
        "job",
        "v2",
        vec![
            ("LAG".to_string(), m(10.0, 8.0)),
            ("BUSY".to_string(), m(0.5, f64::NAN)),
        ],
    )
    .with_evaluated(vec![EvaluatedVertex {
        vertex_id: "v1".to_string(),
        metrics: vec![("LAG".to_string(), m(1.0, 1.0))],
    }])
    .with_params(params(EVALUATOR_KEY, &[("factor", "3")]));
    assert_eq!(
        rate.evaluator.evaluate(&ctx),
        Ok(vec![
            ("TARGET_DATA_RATE".to_string(), m(30.0, 24.0)),
            ("UPSTREAM".to_string(), m(1.0, 1.0)),
        ])
    );
    let err = rate
        .evaluator
        .validate(&params(EVALUATOR_KEY, &[("factor", "lots")]))
        .expect_err("not a number");
    assert!(
        err.message()
            .contains("metrics.custom-evaluator.inst.factor"),
        "{err}"
    );
    assert_eq!(
        rate.evaluator
            .validate(&params(EVALUATOR_KEY, &[("factor", "2")])),
        Ok(())
    );

    // The executor: the priority the worker asked for, its steps, its veto, its validation.
    let cap = registry.executor("kinds-cap").expect("listed");
    assert_eq!(cap.executor.unavailable(), None);
    assert_eq!(cap.executor.priority(), 7);
    let proposed = ExecutorContext::new("job", vec![summary("b", 2, 9), summary("a", 2, 3)], 5)
        .with_params(params(EXECUTOR_KEY, &[("cap", "6")]));
    assert_eq!(
        cap.executor.apply(&proposed),
        Ok(ExecutorVerdict::Apply(vec![
            summary("a", 2, 3),
            summary("b", 2, 6)
        ]))
    );
    let frozen = ExecutorContext::new("frozen", vec![summary("a", 2, 3)], 1_234)
        .with_restart_time_ms(60_000)
        .with_topology(std::sync::Arc::new(flowscale_sdk::JobTopology {
            vertices: vec![flowscale_sdk::TopologyVertex {
                id: "a".to_string(),
                name: "source".to_string(),
                parallelism: 2,
                max_parallelism: 128,
                source_partitions: 0,
            }],
            edges: Vec::new(),
        }));
    assert_eq!(
        cap.executor.apply(&frozen),
        Ok(ExecutorVerdict::Veto(
            "job frozen at 1234 ms (restart 60000 ms, 1 vertices in the graph)".to_string()
        ))
    );
    assert!(
        cap.executor
            .validate(&params(EXECUTOR_KEY, &[("cap", "x")]))
            .is_err()
    );

    // A panic comes back as an error naming it, and is no fault of the worker.
    let boom = registry.evaluator("kinds-boom").expect("listed");
    let boom_x = registry.executor("kinds-boom").expect("listed");
    assert_eq!(boom_x.executor.priority(), 0, "the default priority");
    for _ in 0..4 {
        let err = boom.evaluator.evaluate(&ctx).expect_err("a panic");
        assert!(err.message().contains("boom in evaluate"), "{err}");
        let err = boom_x.executor.apply(&proposed).expect_err("a panic");
        assert!(err.message().contains("boom in apply"), "{err}");
    }
    assert_eq!(
        boom.evaluator.unavailable(),
        None,
        "a caught panic is no fault"
    );
    assert!(rate.evaluator.evaluate(&ctx).is_ok());
}

#[test]
fn an_executor_that_crashes_its_worker_vetoes_only_its_call_and_is_quarantined_if_it_goes_on() {
    // The restart backoff (100 ms, doubling) delays the calls after a crash, no more.
    let (registry, _dir) = isolated(|_| {});
    let segv = registry.executor("kinds-segv").expect("listed");
    let rate = registry.evaluator("kinds-rate").expect("listed");
    let ok = ExecutorContext::new("orders", vec![summary("a", 2, 3)], 5);
    let crash = ExecutorContext::new("crash", vec![summary("a", 2, 3)], 5);
    let eval = EvaluatorContext::new("orders", "v1", vec![("LAG".to_string(), m(1.0, 1.0))]);
    assert_eq!(
        segv.executor.apply(&ok),
        Ok(ExecutorVerdict::Apply(vec![summary("a", 2, 3)]))
    );
    // The crash is the error of that call only (the pipeline vetoes that job's cycle)...
    let err = segv.executor.apply(&crash).expect_err("the worker died");
    assert!(err.message().contains("SIGSEGV"), "{err}");
    // ... the next calls, of another job or another object, are served by a new worker.
    assert_eq!(
        segv.executor.apply(&ok),
        Ok(ExecutorVerdict::Apply(vec![summary("a", 2, 3)]))
    );
    assert!(rate.evaluator.evaluate(&eval).is_ok());
    assert_eq!(segv.executor.unavailable(), None, "one fault is not enough");
    // Three faults within the window quarantine the executor, not the file's other objects
    // (nor the evaluator of the same file).
    for _ in 0..2 {
        assert!(segv.executor.apply(&crash).is_err());
    }
    let why = segv.executor.unavailable().expect("quarantined");
    assert!(why.contains("executor `kinds-segv`"), "{why}");
    assert!(segv.executor.apply(&ok).is_err(), "not called meanwhile");
    assert_eq!(rate.evaluator.unavailable(), None);
    assert!(rate.evaluator.evaluate(&eval).is_ok());
    let cap = registry.executor("kinds-cap").expect("listed");
    assert_eq!(cap.executor.unavailable(), None);
    assert!(cap.executor.apply(&ok).is_ok());
}
