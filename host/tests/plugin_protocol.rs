//! The protocols between the host and a plugin worker give the plugin the same context as an
//! in-process call: real plugin files answer a run of calls identically in-process, in
//! `process` isolation with the current protocol (a job's vertices in one batch), with protocol 3
//! (compact calls, a job's graph and parameters sent only when they change) and with protocol 2
//! (JSON, everything in every request). A worker that dies or hangs during a batch faults each
//! vertex of the batch, and counts as one fault of the mode.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flowscale::alignment::{Aligner, AlignmentRequest, CustomMode, JobAlignment};
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
    let registry = isolated_with(dir, protocol, Duration::from_secs(10));
    assert_eq!(registry.ids().len(), 3);
    registry
}

/// The plugins of `dir` in `process` isolation, speaking at most `protocol`, with a call
/// deadline of `timeout`.
fn isolated_with(dir: &std::path::Path, protocol: u32, timeout: Duration) -> ModeRegistry {
    let mut options = IsolationOptions::new(timeout);
    options.worker_exe = env!("CARGO_BIN_EXE_flowscale").into();
    options.protocol = protocol;
    let (registry, reports) = ModeRegistry::discover_with(dir, &Isolation::Process(options));
    assert!(!registry.ids().is_empty(), "{reports:#?}");
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

/// A job `orders` aligned by the mode `class` with `params`.
fn job(registry: &ModeRegistry, class: &str, params: &[(&str, &str)]) -> JobAlignment {
    let mut config = BTreeMap::from([
        ("scaling.alignment.mode".to_string(), "m".to_string()),
        (
            "scaling.alignment.mode.m.class".to_string(),
            class.to_string(),
        ),
    ]);
    for (k, v) in params {
        config.insert(format!("scaling.alignment.mode.m.{k}"), v.to_string());
    }
    JobAlignment::resolve("orders", &config, registry)
        .unwrap_or_else(|e| panic!("{class} resolves: {e:?}"))
}

/// A vertex of job `orders` named `name`, scaling from `current` to `target` over 1024 key
/// groups with the given inputs, with metrics, the job's graph and subtask loads.
fn request(name: &str, current: u32, target: u32, ships: Vec<ShipStrategy>) -> AlignmentRequest {
    let mut r = AlignmentRequest::new(current, target, 1024);
    r.job = "orders".into();
    r.vertex_id = format!("orders-{name}").into();
    r.vertex_name = name.into();
    r.upper_limit = 200;
    r.input_ship_strategies = ships.into();
    r.metrics = vec![(
        "LOAD".to_string(),
        EvaluatedMetric {
            current: 0.5,
            average: 0.25,
        },
    )]
    .into();
    r.topology = Arc::new(graph("orders", current));
    r.subtask_loads = (0..current)
        .map(|i| SubtaskLoad {
            busy_ratio: Some(if i % 3 == 0 { 0.9 } else { 0.4 }),
            records_in_per_second: Some(1000.0),
        })
        .collect();
    r
}

fn json(outcomes: &[impl serde::Serialize]) -> Vec<serde_json::Value> {
    outcomes
        .iter()
        .map(|o| serde_json::to_value(o).expect("an outcome serializes"))
        .collect()
}

/// A mode's implementation id, its parameters and the vertices of one job's batch.
type Batch = (
    &'static str,
    &'static [(&'static str, &'static str)],
    Vec<AlignmentRequest>,
);

#[test]
fn a_batch_answers_as_the_calls_one_by_one_in_every_protocol() {
    let profile = build(&["bucket-align", "fixture-panicking"]);
    let dir = plugins_dir(&[
        (&plugin_file(&profile, "bucket-align"), "libbucket_align.so"),
        (
            &plugin_file(&profile, "fixture-panicking"),
            "libpanicking.so",
        ),
    ]);
    let (in_process, reports) = ModeRegistry::discover(dir.path());
    assert_eq!(in_process.ids().len(), 2, "{reports:#?}");
    let protocols = [PROTOCOL_VERSION, 3, 2]
        .map(|p| (p, isolated_with(dir.path(), p, Duration::from_secs(10))));
    let custom = || vec![ShipStrategy::Custom { buckets: 128 }];
    let batches: [Batch; 2] = [
        // Applicable and aligned, not applicable (no custom partitioner, no keyBy, no
        // partitions), nothing to align, aligned by key groups.
        (
            "bucket-align",
            &[("rule", "DIVISOR")],
            vec![
                request("a", 16, 24, custom()),
                request("b", 16, 24, vec![ShipStrategy::Rebalance]),
                request("c", 16, 16, custom()),
                request("d", 16, 20, vec![ShipStrategy::Hash]),
                request("e", 8, 5, custom()),
            ],
        ),
        // One vertex of the batch panics (in the gate); the others are answered.
        (
            "panicking",
            &[("validate", "ok")],
            vec![
                request("x", 16, 16, vec![ShipStrategy::Hash]),
                request("panic-in-gate", 16, 24, vec![ShipStrategy::Hash]),
                request("y", 8, 8, vec![ShipStrategy::Hash]),
            ],
        ),
    ];
    for (class, params, requests) in batches {
        let local = job(&in_process, class, params);
        let expected: Vec<_> = requests.iter().map(|r| local.align(r.clone())).collect();
        let expected = json(&expected);
        for (protocol, registry) in &protocols {
            let got = job(registry, class, params).align_all(requests.clone());
            assert_eq!(json(&got), expected, "{class} in protocol {protocol}");
        }
        let faults: Vec<usize> = (0..expected.len())
            .filter(|&i| {
                expected[i]["events"]
                    .as_array()
                    .is_some_and(|e| e.iter().any(|e| e["reason"] == "PluginFault"))
            })
            .collect();
        if class == "panicking" {
            assert_eq!(faults, vec![1], "{expected:#?}");
            assert!(
                expected[1]["events"][0]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("boom in the gate")),
                "{expected:#?}"
            );
        } else {
            assert!(faults.is_empty(), "{expected:#?}");
            let applicable: Vec<&serde_json::Value> =
                expected.iter().map(|o| &o["applicable"]).collect();
            assert_eq!(applicable, [true, false, true, true, true], "{expected:#?}");
            // 24 and 5 over 128 buckets: the divisors 32 and 8; 20 over 1024 key groups: 32.
            let answers: Vec<&serde_json::Value> =
                expected.iter().map(|o| &o["parallelism"]).collect();
            assert_eq!(answers, [32, 24, 16, 32, 8], "{expected:#?}");
        }
    }
}

/// Whether the outcome kept `target` with one `PluginFault` event that says `says`.
fn faulted(outcome: &serde_json::Value, target: u32, says: &str) -> bool {
    let message = outcome["events"][0]["message"].as_str().unwrap_or_default();
    outcome["parallelism"] == target
        && outcome["events"].as_array().map(Vec::len) == Some(1)
        && outcome["events"][0]["reason"] == "PluginFault"
        && message.contains(says)
        && message.ends_with(&format!("using the computed target {target}"))
}

#[test]
fn a_worker_that_dies_or_hangs_mid_batch_faults_the_batch_once() {
    let profile = build(&["fixture-misbehaving"]);
    let dir = plugins_dir(&[(
        &plugin_file(&profile, "fixture-misbehaving"),
        "libmisbehaving.so",
    )]);
    let registry = isolated_with(dir.path(), PROTOCOL_VERSION, Duration::from_millis(500));
    // The misbehaving modes keep the default gate: the REBALANCE vertex is not applicable and
    // answered without `align`; the keyed ones crash the worker (or hang it).
    let batch = || {
        vec![
            request("r", 16, 24, vec![ShipStrategy::Rebalance]),
            request("h", 16, 24, vec![ShipStrategy::Hash]),
            request("g", 16, 20, vec![ShipStrategy::Hash]),
        ]
    };
    let segfault = job(&registry, "segfault", &[]);
    let mode = &registry.get("segfault").expect("segfault is served").mode;
    let out = json(&segfault.align_all(batch()));
    // The worker died before it replied: no vertex of the batch was answered.
    for (o, r) in out.iter().zip(batch()) {
        assert!(faulted(o, r.target, "killed by SIGSEGV"), "{o:#}");
    }
    assert_eq!(
        mode.unavailable(),
        None,
        "one fault for the batch, not three"
    );
    // A new worker answers the next batch.
    let fine = json(&segfault.align_all(vec![request("r", 16, 24, vec![ShipStrategy::Rebalance])]));
    assert_eq!(fine[0]["events"], serde_json::json!([]), "{fine:#?}");
    assert_eq!(fine[0]["applicable"], false);
    // Two more crashing batches: three faults within the window quarantine the mode.
    segfault.align_all(batch());
    assert_eq!(mode.unavailable(), None);
    let third = json(&segfault.align_all(batch()));
    assert!(
        third[0]["events"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("is quarantined")),
        "{third:#?}"
    );
    assert!(mode.unavailable().is_some());

    // A worker that misses the deadline: every vertex of the batch times out with it.
    let sleeper = job(&registry, "sleep-past-deadline", &[]);
    let out = json(&sleeper.align_all(batch()));
    for (o, r) in out.iter().zip(batch()) {
        assert!(faulted(o, r.target, "align timed out after 500ms"), "{o:#}");
    }
}
