//! The protocols between the host and a plugin worker give the plugin the same context as an
//! in-process call: real plugin files answer a run of calls identically in-process, in
//! `process` isolation with the current protocol (compact calls, a job's graph and parameters
//! sent only when they change) and with protocol 2 (JSON, everything in every request).

use std::collections::BTreeMap;
use std::time::Duration;

use flowscale::alignment::CustomMode;
use flowscale::plugins::isolation::IsolationOptions;
use flowscale::plugins::isolation::protocol::PROTOCOL_VERSION;
use flowscale::plugins::{Isolation, ModeRegistry};
use flowscale_sdk::{
    AlignmentContext, EvaluatedMetric, JobTopology, ModeParams, ShipStrategy, SubtaskLoad,
    TopologyEdge, TopologyVertex,
};
use flowscale_tests::{build, plugin_file, plugins_dir};

fn graph(job: &str, parallelism: u32) -> JobTopology {
    JobTopology {
        vertices: (0..3)
            .map(|i| TopologyVertex {
                id: format!("{job}-v{i}"),
                name: format!("operator {i}"),
                parallelism,
                max_parallelism: 1024,
                source_partitions: 0,
            })
            .collect(),
        edges: vec![TopologyEdge {
            from: format!("{job}-v0"),
            to: format!("{job}-v1"),
            ship_strategy: ShipStrategy::Custom { buckets: 128 },
        }],
    }
}

/// The calls of a few cycles of two jobs: vertices one after the other, a job rescaled (a new
/// graph), parameters changed, a vertex the graph does not list, skewed subtask loads.
fn calls() -> Vec<(&'static str, AlignmentContext)> {
    let mut calls = Vec::new();
    for cycle in 0..4u32 {
        for job in ["orders", "clicks"] {
            let current = if cycle >= 2 { 24 } else { 16 };
            let rule = if cycle == 3 && job == "orders" {
                "LOAD_REDUCING"
            } else {
                "DIVISOR"
            };
            for (v, target) in [(0u32, 24 + cycle), (1, 20 + 3 * cycle), (7, 40)] {
                let loads: Vec<SubtaskLoad> = (0..current)
                    .map(|i| SubtaskLoad {
                        busy_ratio: Some(if i % 5 == v { 0.95 } else { 0.5 }),
                        records_in_per_second: Some(1000.0 + f64::from(i * cycle)),
                    })
                    .collect();
                for mode in ["bucket-align", "slot-align", "load-align"] {
                    let params: &[(&str, &str)] = match mode {
                        "bucket-align" => &[("rule", rule)],
                        "slot-align" => &[("slots-per-worker", "4")],
                        _ => &[("signal", "BUSY")],
                    };
                    let ctx = AlignmentContext::builder(current, target, 1024)
                        .identity(job, format!("{job}-v{v}"), format!("operator {v}"))
                        .limits(1, 200)
                        .input_ship_strategies(vec![ShipStrategy::Custom { buckets: 128 }])
                        .metrics(vec![(
                            "LOAD".to_string(),
                            EvaluatedMetric {
                                current: 0.5,
                                average: f64::from(cycle) / 4.0,
                            },
                        )])
                        .topology(graph(job, current))
                        .params(ModeParams::new(
                            "m",
                            params
                                .iter()
                                .map(|(k, v)| (k.to_string(), v.to_string()))
                                .collect::<BTreeMap<_, _>>(),
                        ))
                        .subtask_loads(loads.clone())
                        .build();
                    calls.push((mode, ctx));
                }
            }
        }
    }
    calls
}

fn isolated(dir: &std::path::Path, protocol: u32) -> ModeRegistry {
    let mut options = IsolationOptions::new(Duration::from_secs(10));
    options.worker_exe = env!("CARGO_BIN_EXE_flowscale").into();
    options.protocol = protocol;
    let (registry, reports) = ModeRegistry::discover_with(dir, &Isolation::Process(options));
    assert_eq!(registry.ids().len(), 3, "{reports:#?}");
    registry
}

fn mode<'a>(registry: &'a ModeRegistry, id: &str) -> &'a CustomMode {
    registry.get(id).unwrap_or_else(|| panic!("{id} is loaded"))
}

#[test]
fn every_protocol_gives_the_plugin_the_context_of_an_in_process_call() {
    let profile = build(&["bucket-align", "slot-align", "load-align"]);
    let dir = plugins_dir(&[
        (&plugin_file(&profile, "bucket-align"), "libbucket_align.so"),
        (&plugin_file(&profile, "slot-align"), "libslot_align.so"),
        (&plugin_file(&profile, "load-align"), "libload_align.so"),
    ]);
    let (in_process, reports) = ModeRegistry::discover(dir.path());
    assert_eq!(in_process.ids().len(), 3, "{reports:#?}");
    let current = isolated(dir.path(), PROTOCOL_VERSION);
    let json = isolated(dir.path(), 2);

    let mut answers = Vec::new();
    for (id, ctx) in calls() {
        let expected = (
            mode(&in_process, id).mode.is_applicable(&ctx),
            mode(&in_process, id).mode.align(&ctx),
        );
        for (label, registry) in [("current protocol", &current), ("protocol 2", &json)] {
            let m = mode(registry, id);
            let got = (m.mode.is_applicable(&ctx), m.mode.align(&ctx));
            assert_eq!(
                got,
                expected,
                "{id} in {label}, job {} vertex {} {} -> {}",
                ctx.job_name(),
                ctx.vertex_id(),
                ctx.current_parallelism(),
                ctx.target_parallelism()
            );
        }
        answers.push(expected.1);
    }
    // The run is worth comparing: the modes answer differently from call to call.
    answers.sort_by_key(|a| format!("{a:?}"));
    answers.dedup();
    assert!(answers.len() >= 5, "{answers:?}");
}
