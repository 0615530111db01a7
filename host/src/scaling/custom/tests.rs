//! Custom evaluators and executors through the whole cycle, as the Flink autoscaler's tests
//! exercise them, with implementations linked into the test binary and offered through a
//! catalog as the plugins directory's are.
//!
//! The implementations are driven by their instance parameters, and record what they saw by
//! job name, so that tests running in parallel do not see each other's calls.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use flowscale_sdk::{
    EvaluatedMetric, EvaluatorContext, ExecutorContext, ExecutorVerdict, MetricEvaluator,
    ModeError, ModeParams, ScalingExecutor, VertexMetrics,
};

use super::merge::merge;
use super::resolve::KindCatalog;
use super::resolve::{JobCustom, Resolution, Strictness};
use super::{CustomEvaluator, CustomExecutor};
use crate::config::{ConfigLookupExt, JobConfig, config_map};
use crate::events::EventReason;
use crate::scaling::cycle::{Hooks, run_cycle_with};
use crate::scaling::metrics::{EvaluatedScalingMetric, ScalingMetric, VertexEvaluation};
use crate::scaling::testing::{BalancedAligner, Job, backlog_opts};
use crate::scaling::{CycleOutcome, CycleStage, JobScalingState};

/// What the test implementations saw, by job: `(instance or vertex, what)`.
static SEEN: Mutex<Vec<(String, String, String)>> = Mutex::new(Vec::new());

fn saw(job: &str, who: &str, what: String) {
    SEEN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push((job.to_string(), who.to_string(), what));
}

fn seen(job: &str) -> Vec<(String, String)> {
    SEEN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .filter(|(j, _, _)| j == job)
        .map(|(_, who, what)| (who.clone(), what.clone()))
        .collect()
}

/// An executor whose answer its `do` parameter says; its priority is fixed per registered id.
struct TestExecutor {
    priority: i32,
}

impl ScalingExecutor for TestExecutor {
    fn priority(&self) -> i32 {
        self.priority
    }

    fn apply(&self, ctx: &ExecutorContext) -> Result<ExecutorVerdict, ModeError> {
        let proposed: Vec<String> = ctx
            .summaries()
            .iter()
            .map(|s| format!("{}:{}", s.vertex_id, s.new_parallelism))
            .collect();
        saw(ctx.job_name(), ctx.params().mode_name(), proposed.join(","));
        let mut out = ctx.summaries().to_vec();
        let what = ctx.params().get("do").unwrap_or("keep");
        let (verb, arg) = what.split_once(':').unwrap_or((what, ""));
        match verb {
            "keep" => {}
            "add1" => out.iter_mut().for_each(|s| s.new_parallelism += 1),
            "double" => out.iter_mut().for_each(|s| s.new_parallelism *= 2),
            "drop" => out.retain(|s| s.vertex_id != arg),
            "set" => out.iter_mut().for_each(|s| {
                s.new_parallelism = arg.parse().unwrap_or(s.new_parallelism);
            }),
            "current" => out.iter_mut().for_each(|s| s.current_parallelism += 1),
            "rename" => out.iter_mut().for_each(|s| s.vertex_id = arg.to_string()),
            "twice" => {
                let first = out.first().cloned();
                out.extend(first);
            }
            "empty" => out.clear(),
            "veto" => return Ok(ExecutorVerdict::Veto(arg.to_string())),
            "error" => return Err(ModeError::new("the budget service is down")),
            "panic" => panic!("executor bug"),
            other => return Err(ModeError::new(format!("unknown do `{other}`"))),
        }
        Ok(ExecutorVerdict::Apply(out))
    }

    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        match params.get("refuse") {
            Some(v) => Err(ModeError::new(format!(
                "`{}` is not a budget: {v}",
                params.full_key("refuse")
            ))),
            None => Ok(()),
        }
    }
}

/// An evaluator that answers its `set` parameter (`METRIC=current/average;...`, `NaN` allowed)
/// for the vertex its `vertex` parameter names, and fails when `fail` is set.
struct TestEvaluator;

fn parse_answer(text: &str) -> VertexMetrics {
    text.split(';')
        .filter_map(|part| {
            let (name, values) = part.split_once('=')?;
            let (current, average) = values.split_once('/')?;
            Some((
                name.to_string(),
                EvaluatedMetric {
                    current: current.parse().ok()?,
                    average: average.parse().ok()?,
                },
            ))
        })
        .collect()
}

impl MetricEvaluator for TestEvaluator {
    fn evaluate(&self, ctx: &EvaluatorContext) -> Result<VertexMetrics, ModeError> {
        let before: Vec<String> = ctx
            .evaluated()
            .iter()
            .map(|v| {
                let target = v
                    .metrics
                    .iter()
                    .find(|(n, _)| n == "TARGET_DATA_RATE")
                    .map_or(f64::NAN, |(_, m)| m.average);
                format!("{}={target}", v.vertex_id)
            })
            .collect();
        saw(
            ctx.job_name(),
            ctx.vertex_id(),
            format!(
                "backlog={} before=[{}] instance={}",
                ctx.is_processing_backlog(),
                before.join(","),
                ctx.params().mode_name()
            ),
        );
        if ctx.params().get("fail").is_some() {
            return Err(ModeError::new("the SLO service is down"));
        }
        if ctx.params().get("vertex") != Some(ctx.vertex_id()) {
            return Ok(Vec::new());
        }
        Ok(parse_answer(ctx.params().get("set").unwrap_or_default()))
    }
}

/// The test implementations, linked into the test binary as a plugin's would be offered.
pub(crate) struct TestKinds;

impl KindCatalog for TestKinds {
    fn evaluator(&self, id: &str) -> Option<CustomEvaluator> {
        (id == "test-eval").then(|| CustomEvaluator::linked(id, "", Arc::new(TestEvaluator)))
    }
    fn executor(&self, id: &str) -> Option<CustomExecutor> {
        let priority = match id {
            "test-exec" => 0,
            "test-exec-late" => 5,
            "test-exec-early" => -5,
            _ => return None,
        };
        Some(CustomExecutor::linked(
            id,
            "",
            Arc::new(TestExecutor { priority }),
        ))
    }
    fn evaluator_ids(&self) -> Vec<String> {
        vec!["test-eval".to_string()]
    }
    fn executor_ids(&self) -> Vec<String> {
        ["test-exec", "test-exec-early", "test-exec-late"]
            .map(str::to_string)
            .to_vec()
    }
}

/// No modes: the fleet tests plan with this catalog too.
impl crate::alignment::ModeCatalog for TestKinds {
    fn find(&self, _id: &str) -> Option<crate::alignment::CustomMode> {
        None
    }
    fn ids(&self) -> Vec<String> {
        Vec::new()
    }
}

fn resolve(pairs: &[(&str, &str)], strictness: Strictness) -> Resolution {
    JobCustom::resolve(&config_map(pairs), &TestKinds, strictness)
}

fn custom(pairs: &[(&str, &str)]) -> JobCustom {
    let resolution = resolve(pairs, Strictness::Strict);
    assert!(resolution.errors.is_empty(), "{:?}", resolution.errors);
    resolution.custom
}

/// Two cycles of the backlog job for `job` with `custom`: the second decides.
fn run(job: &str, custom: &JobCustom) -> (CycleOutcome, JobScalingState) {
    run_under_quota(job, custom, None)
}

/// [`run`] with both vertices in one slot-sharing group on TaskManagers of 1 core and 1 slot,
/// under `quota.cpu` (the decided 1 -> 4 needs 4 TaskManagers, 4 cores).
fn run_under_quota(
    job: &str,
    custom: &JobCustom,
    quota_cpu: Option<f64>,
) -> (CycleOutcome, JobScalingState) {
    let opts = crate::scaling::AutoscalerOptions {
        quota_cpu,
        ..backlog_opts()
    };
    let mut state = JobScalingState::default();
    let mut graph = Job::new()
        .vertex("source", 1, 720)
        .vertex("sink", 1, 720)
        .edge("source", "sink", "HASH")
        .slot_sharing_group("source", "g")
        .slot_sharing_group("sink", "g");
    graph.obs.task_managers = Some(crate::engine::TaskManagerResources {
        cpu_cores: Some(1.0),
        memory_bytes: None,
        slots: Some(1),
    });
    let hooks = Hooks {
        aligner: &BalancedAligner,
        custom,
    };
    graph.source("source", 850.0, 0.0, 2000.0, 500.0);
    graph.operator("sink", 850.0, 0.0, 0.0, 500.0);
    run_cycle_with(job, &opts, &graph.obs, 0, hooks, &mut state);
    graph.source("source", 850.0, 500.0, 2000.0, 500.0);
    graph.operator("sink", 850.0, 500.0, 500.0, 500.0);
    let out = run_cycle_with(job, &opts, &graph.obs, 1000, hooks, &mut state);
    (out, state)
}

fn decision(out: &CycleOutcome) -> BTreeMap<String, u32> {
    out.decision.clone().unwrap_or_default()
}

fn both(p: u32, q: u32) -> BTreeMap<String, u32> {
    [("sink".to_string(), p), ("source".to_string(), q)]
        .into_iter()
        .collect()
}

fn events(out: &CycleOutcome, reason: EventReason) -> Vec<&crate::events::Event> {
    out.events.iter().filter(|e| e.reason == reason).collect()
}

#[test]
fn without_executors_the_backlog_job_scales_both_vertices_to_4() {
    let (out, _) = run("exec-none", &JobCustom::default());
    assert_eq!(decision(&out), both(4, 4));
}

/// The resource quota sits before the executors, as in the Flink autoscaler (steps 8 and 9):
/// an operation it blocks reaches no executor, and it checks the pipeline's decision, not what
/// an executor makes of it.
#[test]
fn the_resource_quota_is_checked_before_the_executors() {
    let custom = custom(&[
        ("scaling.custom-executors", "double"),
        ("scaling.custom-executor.double.class", "test-exec"),
        ("scaling.custom-executor.double.do", "double"),
    ]);
    // 4 TaskManagers of 1 core > 3: blocked, the executor is not asked.
    let (out, state) = run_under_quota("exec-quota-blocked", &custom, Some(3.0));
    assert_eq!(out.stage, CycleStage::ResourceQuotaReached);
    assert!(seen("exec-quota-blocked").is_empty());
    assert!(state.parallelism_overrides.is_empty());
    assert_eq!(events(&out, EventReason::ResourceQuotaReached).len(), 1);
    // 4 <= 4: passes; the executor then doubles to 8, which is not checked again.
    let (out, _) = run_under_quota("exec-quota-passed", &custom, Some(4.0));
    assert_eq!(out.stage, CycleStage::Scaled);
    assert_eq!(seen("exec-quota-passed").len(), 1);
    assert_eq!(decision(&out), both(8, 8));
}

#[test]
fn executors_run_by_ascending_priority_each_on_the_previous_answer() {
    // Configured late first: the early one (priority -5) still runs first. Early doubles, late
    // adds one: (4 * 2) + 1 = 9; the other order would give (4 + 1) * 2 = 10.
    let custom = custom(&[
        ("scaling.custom-executors", "late;early"),
        ("scaling.custom-executor.late.class", "test-exec-late"),
        ("scaling.custom-executor.late.do", "add1"),
        ("scaling.custom-executor.early.class", "test-exec-early"),
        ("scaling.custom-executor.early.do", "double"),
    ]);
    let order: Vec<(&str, i32)> = custom
        .executors_view()
        .map(|(name, _, priority)| (name, priority))
        .collect();
    assert_eq!(order, [("early", -5), ("late", 5)]);
    let (out, state) = run("exec-order", &custom);
    assert_eq!(out.stage, CycleStage::Scaled);
    assert_eq!(decision(&out), both(9, 9));
    assert_eq!(state.parallelism_overrides, both(9, 9));
    assert_eq!(
        seen("exec-order"),
        [
            ("early".to_string(), "sink:4,source:4".to_string()),
            ("late".to_string(), "sink:8,source:8".to_string()),
        ]
    );
    // The history records what was applied; the report says it too.
    let history = &state.scaling_history.vertices["sink"];
    let (_, summary) = history.iter().next().expect("one entry");
    assert_eq!(summary.new_parallelism, 9);
    let report = &events(&out, EventReason::ScalingReport)[0].message;
    assert!(report.contains("Parallelism 1 -> 9"), "{report}");
}

/// A running job compares its resolution with the one a new plan brings: a new build of a
/// plugin (new objects under the same ids) must replace the old one even though the job's
/// configuration did not change, and a resolution of the same objects must not.
#[test]
fn same_implementations_compares_the_objects_and_the_configuration() {
    let pairs = [
        ("metrics.custom-evaluators", "slo"),
        ("metrics.custom-evaluator.slo.class", "test-eval"),
        ("scaling.custom-executors", "gate"),
        ("scaling.custom-executor.gate.class", "test-exec"),
        ("scaling.custom-executor.gate.do", "add1"),
    ];
    let a = custom(&pairs);
    assert!(a.same_implementations(&a.clone()));
    // TestKinds hands out new objects at every lookup, as a replaced plugin file does.
    let rebuilt = custom(&pairs);
    assert!(!a.same_implementations(&rebuilt));
    let mut new_executor = a.clone();
    new_executor.executors = rebuilt.executors.clone();
    assert!(!a.same_implementations(&new_executor));
    let mut new_evaluator = a.clone();
    new_evaluator.evaluator = rebuilt.evaluator.clone();
    assert!(!a.same_implementations(&new_evaluator));
    let mut other_params = a.clone();
    other_params.executors[0].params = rebuilt.executors[0].params.clone();
    assert!(a.same_implementations(&other_params), "equal parameters");
    other_params.executors[0].priority += 1;
    assert!(!a.same_implementations(&other_params));
    assert!(!a.same_implementations(&JobCustom::default()));
}

#[test]
fn equal_priorities_keep_the_configured_order() {
    let custom = custom(&[
        ("scaling.custom-executors", "b;a"),
        ("scaling.custom-executor.a.class", "test-exec"),
        ("scaling.custom-executor.a.do", "double"),
        ("scaling.custom-executor.b.class", "test-exec"),
        ("scaling.custom-executor.b.do", "add1"),
    ]);
    let (out, _) = run("exec-ties", &custom);
    // b then a: (4 + 1) * 2.
    assert_eq!(decision(&out), both(10, 10));
}

#[test]
fn a_duplicate_instance_name_runs_once() {
    let custom = custom(&[
        ("scaling.custom-executors", "a;a"),
        ("scaling.custom-executor.a.class", "test-exec"),
        ("scaling.custom-executor.a.do", "add1"),
    ]);
    assert_eq!(custom.executors.len(), 1);
    let (out, _) = run("exec-dup", &custom);
    assert_eq!(decision(&out), both(5, 5));
}

/// The cycle ended vetoed by `instance`: nothing applied, nothing recorded.
fn assert_vetoed(out: &CycleOutcome, state: &JobScalingState, instance: &str) -> String {
    let CycleStage::Vetoed(veto) = &out.stage else {
        panic!("not vetoed: {:?}", out.stage);
    };
    assert_eq!(veto.instance, instance);
    assert_eq!(veto.at_ms, 1000);
    assert!(out.decision.is_none());
    assert!(out.summaries.is_empty());
    assert!(state.parallelism_overrides.is_empty());
    assert!(state.scaling_history.vertices.is_empty());
    assert!(state.scaling_tracking.records.is_empty());
    assert!(events(out, EventReason::ScalingReport).is_empty());
    veto.reason.clone()
}

#[test]
fn an_empty_answer_vetoes_and_later_executors_are_not_asked() {
    let custom = custom(&[
        ("scaling.custom-executors", "gate;after"),
        ("scaling.custom-executor.gate.class", "test-exec-early"),
        ("scaling.custom-executor.gate.do", "empty"),
        ("scaling.custom-executor.after.class", "test-exec-late"),
    ]);
    let (out, state) = run("exec-empty", &custom);
    assert_vetoed(&out, &state, "gate");
    let vetoed = events(&out, EventReason::ScalingVetoed);
    assert_eq!(vetoed.len(), 1);
    assert_eq!(vetoed[0].key.as_deref(), Some("ScalingVetoed:gate"));
    assert!(vetoed[0].message.contains("`gate` (test-exec-early)"));
    assert_eq!(seen("exec-empty").len(), 1, "{:?}", seen("exec-empty"));
}

#[test]
fn a_veto_says_who_and_why() {
    let custom = custom(&[
        ("scaling.custom-executors", "freeze"),
        ("scaling.custom-executor.freeze.class", "test-exec"),
        (
            "scaling.custom-executor.freeze.do",
            "veto:change freeze until Monday",
        ),
    ]);
    let (out, state) = run("exec-veto", &custom);
    let reason = assert_vetoed(&out, &state, "freeze");
    assert_eq!(reason, "change freeze until Monday");
    let vetoed = events(&out, EventReason::ScalingVetoed);
    assert_eq!(vetoed.len(), 1);
    assert_eq!(
        vetoed[0].message,
        "scaling vetoed by executor `freeze` (test-exec): change freeze until Monday; \
         nothing is applied"
    );
    assert_eq!(vetoed[0].key.as_deref(), Some("ScalingVetoed:freeze"));
}

#[test]
fn a_dropped_vertex_keeps_its_parallelism_and_its_recommendation() {
    let custom = custom(&[
        ("scaling.custom-executors", "budget"),
        ("scaling.custom-executor.budget.class", "test-exec"),
        ("scaling.custom-executor.budget.do", "drop:sink"),
    ]);
    let (out, state) = run("exec-drop", &custom);
    assert_eq!(out.stage, CycleStage::Scaled);
    assert_eq!(decision(&out), both(1, 4));
    assert!(!state.scaling_history.vertices.contains_key("sink"));
    assert!(state.scaling_history.vertices.contains_key("source"));
    let sink = &out.evaluated["sink"];
    assert_eq!(sink[&ScalingMetric::RecommendedParallelism].current, 4.0);
}

/// The single executor `budget` doing `what` vetoes the cycle of `job` with a `PluginFault`
/// event saying `said`.
fn assert_fault(job: &str, what: &str, said: &str) {
    let custom = custom(&[
        ("scaling.custom-executors", "budget"),
        ("scaling.custom-executor.budget.class", "test-exec"),
        ("scaling.custom-executor.budget.do", what),
    ]);
    let (out, state) = run(job, &custom);
    let reason = assert_vetoed(&out, &state, "budget");
    assert!(reason.contains(said), "{job}: {reason}");
    let faults = events(&out, EventReason::PluginFault);
    assert_eq!(faults.len(), 1, "{job}");
    assert!(faults[0].message.contains(said), "{}", faults[0].message);
    assert!(events(&out, EventReason::ScalingVetoed).is_empty());
}

#[test]
fn an_executor_that_cannot_answer_vetoes_with_a_plugin_fault() {
    assert_fault("exec-error", "error", "failed: the budget service is down");
    assert_fault("exec-panic", "panic", "panicked: executor bug");
}

#[test]
fn an_answer_that_must_not_reach_an_engine_vetoes_with_a_plugin_fault() {
    // vertex.max-parallelism defaults to 200: the upper bound is min(720, max(1, 200)).
    assert_fault("exec-zero", "set:0", "new parallelism 0 for vertex `sink`");
    assert_fault(
        "exec-high",
        "set:201",
        "new parallelism 201 for vertex `sink`",
    );
    assert_fault(
        "exec-gone",
        "rename:ghost",
        "vertex `ghost`, which the job does not have",
    );
    assert_fault("exec-twice", "twice", "vertex `sink` twice");
    assert_fault(
        "exec-current",
        "current",
        "vertex `sink` with current parallelism 2 (it is 1)",
    );
    // At the bound itself the answer is applied.
    let custom = custom(&[
        ("scaling.custom-executors", "budget"),
        ("scaling.custom-executor.budget.class", "test-exec"),
        ("scaling.custom-executor.budget.do", "set:200"),
    ]);
    let (out, _) = run("exec-bound", &custom);
    assert_eq!(decision(&out), both(200, 200));
}

#[test]
fn unknown_or_blank_classes_are_skipped_with_a_warning_at_run_time() {
    let pairs = [
        ("scaling.custom-executors", "typo;blank;ok"),
        ("scaling.custom-executor.typo.class", "test-exek"),
        ("scaling.custom-executor.blank.class", " "),
        ("scaling.custom-executor.ok.class", "test-exec"),
        ("scaling.custom-executor.ok.do", "add1"),
    ];
    let lenient = resolve(&pairs, Strictness::Lenient);
    assert!(lenient.errors.is_empty());
    let names: Vec<&str> = lenient.custom.executors_view().map(|e| e.0).collect();
    assert_eq!(names, ["ok"]);
    assert_eq!(lenient.warnings.len(), 2, "{:?}", lenient.warnings);
    assert!(lenient.warnings[0].contains("`test-exek`"));
    assert!(lenient.warnings[1].contains("`blank`"));
    let (out, _) = run("exec-unknown", &lenient.custom);
    assert_eq!(decision(&out), both(5, 5));
    // Strict (start, `validate`): the unknown class is an error at its key, with the closest
    // class that exists.
    let strict = resolve(&pairs, Strictness::Strict);
    assert_eq!(strict.errors.len(), 1, "{:?}", strict.errors);
    assert_eq!(strict.errors[0].key, "scaling.custom-executor.typo.class");
    assert!(
        strict.errors[0]
            .message
            .contains("did you mean `test-exec`?"),
        "{}",
        strict.errors[0].message
    );
    assert!(strict.errors[0].message.contains("test-exec-early"));
}

#[test]
fn refused_parameters_name_the_full_key() {
    let strict = resolve(
        &[
            ("scaling.custom-executors", "budget"),
            ("scaling.custom-executor.budget.class", "test-exec"),
            ("scaling.custom-executor.budget.refuse", "lots"),
        ],
        Strictness::Strict,
    );
    assert_eq!(strict.errors.len(), 1);
    assert!(
        strict.errors[0]
            .message
            .contains("`scaling.custom-executor.budget.refuse` is not a budget: lots"),
        "{}",
        strict.errors[0].message
    );
}

#[test]
fn instance_params_are_prefix_stripped_and_the_canonical_key_wins() {
    let config = JobConfig::from_pairs([
        (
            "kubernetes.operator.job.autoscaler.scaling.custom-executor.b.limit",
            "operator",
        ),
        (
            "job.autoscaler.scaling.custom-executor.b.limit",
            "canonical",
        ),
        (
            "kubernetes.operator.job.autoscaler.scaling.custom-executor.b.only",
            "fallback",
        ),
        ("scaling.custom-executor.b.class", "test-exec"),
        ("scaling.custom-executor.bb.class", "other"),
        ("metrics.custom-evaluator.b.class", "not-an-executor"),
    ]);
    let params = config.instance_params(flowscale_sdk::EXECUTOR_KEY, "b");
    let entries: Vec<(&str, &str)> = params.iter().collect();
    assert_eq!(
        entries,
        [
            ("class", "test-exec"),
            ("limit", "canonical"),
            ("only", "fallback"),
        ]
    );
    assert_eq!(params.full_key("limit"), "scaling.custom-executor.b.limit");
}

#[test]
fn merge_keeps_what_nan_leaves_adds_new_metrics_and_ignores_unknown_names() {
    let mut m = VertexEvaluation::new();
    m.insert(ScalingMetric::Lag, EvaluatedScalingMetric::new(3.0, 4.0));
    m.insert(ScalingMetric::Load, EvaluatedScalingMetric::new(0.5, 0.6));
    let answer =
        parse_answer("LAG=NaN/7;LOAD=0.9/NaN;TARGET_DATA_RATE=NaN/900;GC_PRESSURE=1/1;NOPE=1/1");
    let unknown = merge(&mut m, &answer);
    assert_eq!(unknown, ["GC_PRESSURE", "NOPE"]);
    assert_eq!(m[&ScalingMetric::Lag].current, 3.0);
    assert_eq!(m[&ScalingMetric::Lag].average, 7.0);
    assert_eq!(m[&ScalingMetric::Load].current, 0.9);
    assert_eq!(m[&ScalingMetric::Load].average, 0.6);
    assert!(m[&ScalingMetric::TargetDataRate].current.is_nan());
    assert_eq!(m[&ScalingMetric::TargetDataRate].average, 900.0);
}

fn evaluator(job_params: &[(&str, &str)]) -> JobCustom {
    let mut pairs = vec![
        ("metrics.custom-evaluators", "slo"),
        ("metrics.custom-evaluator.slo.class", "test-eval"),
    ];
    pairs.extend_from_slice(job_params);
    custom(&pairs)
}

#[test]
fn an_evaluated_target_rate_reaches_downstream_and_leaves_thresholds_alone() {
    let (plain, _) = run("eval-plain", &JobCustom::default());
    let custom = evaluator(&[
        ("metrics.custom-evaluator.slo.vertex", "source"),
        (
            "metrics.custom-evaluator.slo.set",
            "TARGET_DATA_RATE=NaN/900",
        ),
    ]);
    let (out, _) = run("eval-target", &custom);
    let metric = |o: &CycleOutcome, v: &str, m: ScalingMetric| o.evaluated[v][&m];
    assert_eq!(
        metric(&plain, "source", ScalingMetric::TargetDataRate).average,
        500.0
    );
    assert_eq!(
        metric(&out, "source", ScalingMetric::TargetDataRate).average,
        900.0
    );
    // The sink reads its target from its input's merged one (an output ratio of 1).
    assert_eq!(
        metric(&out, "sink", ScalingMetric::TargetDataRate).average,
        900.0
    );
    // The band was computed before the merge: the source's thresholds are those of the plain
    // run, though its target changed.
    for m in [
        ScalingMetric::ScaleUpRateThreshold,
        ScalingMetric::ScaleDownRateThreshold,
    ] {
        // Compared as printed: the unused average half is NaN.
        assert_eq!(
            format!("{:?}", metric(&out, "source", m)),
            format!("{:?}", metric(&plain, "source", m)),
            "{m}"
        );
    }
    // The second vertex saw the first with its merged target, and the backlog.
    let calls = seen("eval-target");
    assert!(
        calls.contains(&(
            "sink".to_string(),
            "backlog=true before=[source=900] instance=slo".to_string()
        )),
        "{calls:?}"
    );
    assert!(events(&out, EventReason::PluginFault).is_empty());
}

#[test]
fn a_failing_evaluator_contributes_nothing() {
    let (plain, _) = run("eval-plain-2", &JobCustom::default());
    let custom = evaluator(&[
        ("metrics.custom-evaluator.slo.vertex", "source"),
        (
            "metrics.custom-evaluator.slo.set",
            "TARGET_DATA_RATE=NaN/900",
        ),
        ("metrics.custom-evaluator.slo.fail", "true"),
    ]);
    let (out, _) = run("eval-fail", &custom);
    // NaN halves are not equal to themselves: compared as printed.
    assert_eq!(
        format!("{:?}", out.evaluated),
        format!("{:?}", plain.evaluated)
    );
    assert_eq!(out.decision, plain.decision);
    let faults = events(&out, EventReason::PluginFault);
    assert_eq!(faults.len(), 2, "one per vertex: {faults:?}");
    assert!(faults[0].message.contains("the SLO service is down"));
}

#[test]
fn only_the_first_evaluator_is_used_and_the_others_are_named() {
    let resolution = resolve(
        &[
            ("metrics.custom-evaluators", "first;second;third"),
            ("metrics.custom-evaluator.first.class", "test-eval"),
            ("metrics.custom-evaluator.second.class", "test-eval"),
        ],
        Strictness::Strict,
    );
    assert_eq!(
        resolution.custom.evaluator_view(),
        Some(("first", "test-eval"))
    );
    assert_eq!(resolution.warnings.len(), 1);
    assert!(
        resolution.warnings[0]
            .contains("only the first, `first`, is used (ignored: second, third)"),
        "{}",
        resolution.warnings[0]
    );
    // A blank class: no evaluator, and nothing to report.
    let blank = resolve(
        &[
            ("metrics.custom-evaluators", "first"),
            ("metrics.custom-evaluator.first.class", ""),
        ],
        Strictness::Strict,
    );
    assert!(blank.custom.evaluator.is_none());
    assert!(blank.errors.is_empty() && blank.warnings.is_empty());
}

/// An executor that is quarantined while `down` is set, as a plugin's in a worker would be,
/// counting the calls to its `validate`.
struct Quarantinable {
    down: std::sync::atomic::AtomicBool,
    validated: std::sync::atomic::AtomicUsize,
    inner: TestExecutor,
}

impl super::HostExecutor for Quarantinable {
    fn priority(&self) -> i32 {
        0
    }
    fn apply(&self, ctx: &ExecutorContext) -> Result<ExecutorVerdict, ModeError> {
        self.inner.apply(ctx)
    }
    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        self.validated
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ModeError::new("quarantined, not called"));
        }
        self.inner.validate(params)
    }
    fn unavailable(&self) -> Option<String> {
        self.down
            .load(std::sync::atomic::Ordering::SeqCst)
            .then(|| "quarantined".to_string())
    }
}

struct OneExecutor(Arc<Quarantinable>);

impl KindCatalog for OneExecutor {
    fn executor(&self, id: &str) -> Option<CustomExecutor> {
        (id == "gate").then(|| CustomExecutor {
            id: id.to_string(),
            description: String::new(),
            origin: crate::alignment::ModeOrigin::Linked,
            executor: Arc::clone(&self.0) as Arc<dyn super::HostExecutor>,
        })
    }
}

#[test]
fn a_quarantined_executor_is_resolved_unchecked_and_checked_before_its_first_call() {
    use std::sync::atomic::Ordering::SeqCst;
    for (refuse, job) in [
        (true, "exec-unchecked-refused"),
        (false, "exec-unchecked-ok"),
    ] {
        let gate = Arc::new(Quarantinable {
            down: true.into(),
            validated: 0.into(),
            inner: TestExecutor { priority: 0 },
        });
        let mut pairs = vec![
            ("scaling.custom-executors", "gate"),
            ("scaling.custom-executor.gate.class", "gate"),
            ("scaling.custom-executor.gate.do", "set:3"),
        ];
        if refuse {
            pairs.push(("scaling.custom-executor.gate.refuse", "x"));
        }
        // Loading (strict) under quarantine: no error, the instance is kept, nothing is asked.
        let resolution = JobCustom::resolve(
            &config_map(&pairs),
            &OneExecutor(Arc::clone(&gate)),
            Strictness::Strict,
        );
        assert!(resolution.errors.is_empty(), "{:?}", resolution.errors);
        assert_eq!(
            resolution.custom.executors.len(),
            1,
            "kept: no policy bypassed"
        );
        assert_eq!(gate.validated.load(SeqCst), 0);
        // Still quarantined: the cycle is vetoed.
        let (out, state) = run(job, &resolution.custom);
        let reason = assert_vetoed(&out, &state, "gate");
        assert!(
            reason.contains("cannot be called (quarantined)"),
            "{reason}"
        );
        // Out of quarantine: the parameters are checked before the first call.
        gate.down.store(false, SeqCst);
        let (out, state) = run(job, &resolution.custom);
        assert_eq!(gate.validated.load(SeqCst), 1);
        if refuse {
            let reason = assert_vetoed(&out, &state, "gate");
            assert!(reason.contains("refused its parameters"), "{reason}");
            assert!(reason.contains("is not a budget"), "{reason}");
        } else {
            assert_eq!(out.stage, CycleStage::Scaled);
            assert_eq!(decision(&out), both(3, 3));
            // Accepted once: not asked again.
            run(job, &resolution.custom);
            assert_eq!(gate.validated.load(SeqCst), 1);
        }
    }
}

#[test]
fn each_cycle_sees_only_its_own_jobs_vertices_evaluated_before() {
    // The cycles of one thread share one context, moved on from cycle to cycle: a job's
    // evaluator sees its own instance, and before each vertex only the vertices of its own
    // cycle, whatever ran on the thread before.
    let one = custom(&[
        ("metrics.custom-evaluators", "one"),
        ("metrics.custom-evaluator.one.class", "test-eval"),
        ("metrics.custom-evaluator.one.vertex", "source"),
        (
            "metrics.custom-evaluator.one.set",
            "TARGET_DATA_RATE=NaN/900",
        ),
    ]);
    let two = custom(&[
        ("metrics.custom-evaluators", "two"),
        ("metrics.custom-evaluator.two.class", "test-eval"),
    ]);
    let (out_one, _) = run("reuse-one", &one);
    let (out_two, _) = run("reuse-two", &two);
    let (again, _) = run("reuse-one-again", &one);
    // Each run evaluates once (its first cycle only collects): the first vertex saw nothing
    // before it, the second the first with its own job's merged target (900 where the
    // evaluator set it, the built-in 500 where it did not).
    let cycle = |source: &str, instance: &str| {
        vec![
            (
                "source".to_string(),
                format!("backlog=true before=[] instance={instance}"),
            ),
            (
                "sink".to_string(),
                format!("backlog=true before=[source={source}] instance={instance}"),
            ),
        ]
    };
    assert_eq!(seen("reuse-one"), cycle("900", "one"));
    assert_eq!(seen("reuse-two"), cycle("500", "two"));
    assert_eq!(seen("reuse-one-again"), cycle("900", "one"));
    assert_eq!(
        format!("{:?}", again.evaluated),
        format!("{:?}", out_one.evaluated)
    );
    assert_eq!(
        out_two.evaluated["source"][&ScalingMetric::TargetDataRate].average,
        500.0
    );
}
