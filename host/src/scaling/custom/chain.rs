//! A job's custom scaling executors run on a decided operation (the Flink autoscaler's FLIP-575
//! rules), before it is reported and applied.
//!
//! The executors run by ascending priority, each on the previous one's answer. An empty answer
//! or a veto vetoes the operation: nothing is applied and a `ScalingVetoed` event names the
//! instance (rate-limited by `scaling.event.interval` under the key `ScalingVetoed:<instance>`).
//! An executor that cannot answer (an error, a caught panic, a quarantine) vetoes too, with a
//! `PluginFault` event: a policy that cannot answer must not be bypassed. So does an answer the
//! host must not send to an engine (a vertex the job does not have, listed twice, with another
//! current parallelism, or a new one of 0 or above the vertex's bounds): it is never applied.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use flowscale_sdk::{
    EXECUTOR_KEY, ExecutorContext, ExecutorVerdict, JobTopology, ScalingSummary as SdkSummary,
};
use serde::Serialize;

use super::merge::sdk_metrics;
use super::resolve::ExecutorInstance;
use crate::alignment::contain;
use crate::events::{Event, EventReason, Severity};
use crate::scaling::state::ScalingSummary;
use crate::scaling::topology::Topology;

/// Why a cycle's operation was not applied: which executor vetoed, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Veto {
    /// The instance name (`scaling.custom-executor.<instance>.*`).
    pub instance: String,
    /// Its implementation id.
    pub class: String,
    /// Why, in the executor's words or the host's (a fault).
    pub reason: String,
    /// When, in ms on the engine's clock.
    pub at_ms: i64,
}

/// What the chain needs of the cycle.
pub(crate) struct ChainInput<'a> {
    /// The job.
    pub(crate) job: &'a str,
    /// The job graph.
    pub(crate) graph: &'a Topology,
    /// The SDK view of the graph.
    pub(crate) topology: Arc<JobTopology>,
    /// The decision's instant.
    pub(crate) now_ms: i64,
    /// The restart time the decision assumed, in ms.
    pub(crate) restart_time_ms: u64,
    /// `vertex.max-parallelism`: an answer stays within `max(current, it)` as the computed
    /// targets do.
    pub(crate) vertex_max_parallelism: i64,
}

/// A veto with its event (boxed: a cycle that goes on carries none).
pub(crate) type Vetoed = Box<(Veto, Event)>;

/// The chain's answer: the new parallelism of every vertex to change, by id; or the veto with
/// its event.
pub(crate) type ChainResult = Result<BTreeMap<Arc<str>, u32>, Vetoed>;

/// Runs `executors` (already in priority order) on the `proposed` operation.
pub(crate) fn run_chain(
    input: &ChainInput<'_>,
    executors: &[ExecutorInstance],
    proposed: &BTreeMap<Arc<str>, ScalingSummary>,
) -> ChainResult {
    let mut summaries: Vec<SdkSummary> = proposed
        .iter()
        .map(|(id, s)| SdkSummary {
            vertex_id: id.to_string(),
            current_parallelism: s.current_parallelism,
            new_parallelism: s.new_parallelism,
            metrics: sdk_metrics(&s.metrics),
        })
        .collect();
    for instance in executors {
        summaries = match call(input, instance, summaries) {
            Ok(ExecutorVerdict::Apply(answer)) if answer.is_empty() => {
                return Err(vetoed(input, instance, "answered no vertex to scale"));
            }
            Ok(ExecutorVerdict::Apply(answer)) => match refuse(input, &answer) {
                Some(why) => {
                    return Err(fault(input, instance, &format!("answered {why}")));
                }
                None => answer,
            },
            Ok(ExecutorVerdict::Veto(reason)) => {
                return Err(vetoed(input, instance, &reason));
            }
            Err(why) => return Err(fault(input, instance, &why)),
        };
    }
    Ok(summaries
        .iter()
        .filter(|s| s.new_parallelism != s.current_parallelism)
        .filter_map(|s| {
            let index = *input.graph.index.get(&s.vertex_id)?;
            let vertex = input.graph.vertices.get(index)?;
            Some((Arc::clone(&vertex.id), s.new_parallelism))
        })
        .collect())
}

/// One executor's answer on `summaries`, or why there is none.
fn call(
    input: &ChainInput<'_>,
    instance: &ExecutorInstance,
    summaries: Vec<SdkSummary>,
) -> Result<ExecutorVerdict, String> {
    let executor = &instance.executor.executor;
    if let Some(why) = instance.cannot_call() {
        return Err(why);
    }
    let ctx = ExecutorContext::new(input.job, summaries, input.now_ms)
        .with_topology(Arc::clone(&input.topology))
        .with_params(instance.params.clone())
        .with_restart_time_ms(input.restart_time_ms);
    match contain(|| executor.apply(&ctx)) {
        Ok(Ok(verdict)) => Ok(verdict),
        Ok(Err(err)) => Err(format!("failed: {err}")),
        Err(panic) => Err(panic.to_string()),
    }
}

/// What is wrong with an answer that must not reach an engine, if anything.
fn refuse(input: &ChainInput<'_>, answer: &[SdkSummary]) -> Option<String> {
    let mut seen = BTreeSet::new();
    for s in answer {
        let id = s.vertex_id.as_str();
        let Some(vertex) = input
            .graph
            .index
            .get(id)
            .and_then(|&i| input.graph.vertices.get(i))
        else {
            return Some(format!("vertex `{id}`, which the job does not have"));
        };
        if !seen.insert(id) {
            return Some(format!("vertex `{id}` twice"));
        }
        if s.current_parallelism != vertex.parallelism {
            return Some(format!(
                "vertex `{id}` with current parallelism {} (it is {})",
                s.current_parallelism, vertex.parallelism
            ));
        }
        let upper = i64::from(vertex.parallelism)
            .max(input.vertex_max_parallelism)
            .min(i64::from(vertex.max_parallelism));
        let new = s.new_parallelism;
        if new == 0 {
            return Some(format!("new parallelism 0 for vertex `{id}`"));
        }
        if i64::from(new) > upper {
            return Some(format!(
                "new parallelism {new} for vertex `{id}`, above min(its max parallelism {}, \
                 max(current, vertex.max-parallelism)) = {upper}",
                vertex.max_parallelism
            ));
        }
    }
    None
}

fn veto(input: &ChainInput<'_>, instance: &ExecutorInstance, reason: &str) -> Veto {
    Veto {
        instance: instance.name.clone(),
        class: instance.executor.id().to_string(),
        reason: reason.to_string(),
        at_ms: input.now_ms,
    }
}

/// The executor vetoed the operation.
fn vetoed(input: &ChainInput<'_>, instance: &ExecutorInstance, reason: &str) -> Vetoed {
    let name = &instance.name;
    let event = Event::new(
        EventReason::ScalingVetoed,
        Severity::Warning,
        format!(
            "scaling vetoed by executor `{name}` ({}): {reason}; nothing is applied",
            instance.executor.id()
        ),
    )
    .job(input.job)
    .key(format!("ScalingVetoed:{name}"));
    Box::new((veto(input, instance, reason), event))
}

/// The executor could not answer, or answered what must not be applied: the operation is
/// vetoed.
fn fault(input: &ChainInput<'_>, instance: &ExecutorInstance, what: &str) -> Vetoed {
    let name = &instance.name;
    let event = Event::new(
        EventReason::PluginFault,
        Severity::Warning,
        format!(
            "executor `{name}` ({} from {}) {what}; the scaling is vetoed \
             (`{EXECUTOR_KEY}.{name}.class`)",
            instance.executor.id(),
            instance.executor.origin,
        ),
    )
    .job(input.job)
    .key(format!("PluginFault:executor:{name}"));
    Box::new((veto(input, instance, what), event))
}
