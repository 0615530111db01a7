//! The call of a job's custom metric evaluator for one vertex, and the merge of its answer into
//! the vertex's evaluated metrics (the Flink autoscaler's FLIP-514 rules).
//!
//! For a metric the vertex has, each half of the answer replaces the evaluated one unless it is
//! NaN; a metric it does not have is added. A name that is not a per-vertex scaling metric
//! (a typo, or a job-wide metric such as `GC_PRESSURE`) cannot be stored with the vertex: it is
//! left out and the fault event says so, so the author sees it. The band's thresholds were
//! computed before the call and are not recomputed. A fault (an error, a caught panic, an
//! evaluator that cannot be called) merges nothing for that call: the vertex keeps its own
//! evaluation and a `PluginFault` event says why.

use std::cell::RefCell;
use std::sync::{Arc, LazyLock};

use flowscale_sdk::{EVALUATOR_KEY, EvaluatedMetric, EvaluatorContext, JobTopology, VertexMetrics};

use super::resolve::EvaluatorInstance;
use crate::alignment::contain;
use crate::events::{Event, EventReason, Severity};
use crate::scaling::metrics::{
    EVALUATED_COUNT, EvaluatedScalingMetric, ScalingMetric, VertexEvaluation,
};

/// One cycle's calls of a job's evaluator.
pub(crate) struct EvaluatorRun<'a> {
    /// The job.
    pub(crate) job: &'a str,
    /// Its evaluator.
    pub(crate) instance: &'a EvaluatorInstance,
    /// The context of the cycle, moved on from vertex to vertex: the job, its graph and the
    /// instance's parameters set once, the vertices merged so far grown by one per vertex, and
    /// the metric names kept in place (so a call copies neither the list nor the names). Taken
    /// from this thread's [`KEPT`] context and given back when the run ends, so that the
    /// buffers of the vertices merged so far (ids and metric names) are those of the thread's
    /// earlier cycles rather than new strings for every vertex of every cycle.
    ctx: Option<EvaluatorContext>,
}

thread_local! {
    /// The evaluator context of the last cycle this thread ran, moved on to the next one.
    static KEPT: RefCell<Option<EvaluatorContext>> = const { RefCell::new(None) };
}

impl Drop for EvaluatorRun<'_> {
    fn drop(&mut self) {
        if let Some(ctx) = self.ctx.take() {
            // A thread being torn down keeps nothing.
            let _ = KEPT.try_with(|kept| {
                if let Ok(mut kept) = kept.try_borrow_mut() {
                    *kept = Some(ctx);
                }
            });
        }
    }
}

/// The per-vertex metrics in the order of their names, the order in which the SDK lists a
/// vertex's metrics: filled in this order, a context's list needs no sorting and keeps the
/// number of its names from vertex to vertex.
fn by_name() -> &'static [ScalingMetric] {
    static ORDER: LazyLock<Vec<ScalingMetric>> = LazyLock::new(|| {
        let mut order: Vec<ScalingMetric> = ScalingMetric::ALL
            .iter()
            .copied()
            .filter(|m| (*m as usize) < EVALUATED_COUNT)
            .collect();
        order.sort_by_key(|m| m.as_str());
        order
    });
    &ORDER
}

/// A vertex's metrics as the SDK shows them: by name, sorted.
fn sdk_metric_iter(m: &VertexEvaluation) -> impl Iterator<Item = (&'static str, EvaluatedMetric)> {
    by_name()
        .iter()
        .filter_map(|metric| Some((metric.as_str(), m.get(metric)?.to_sdk())))
}

/// A vertex's metrics as the SDK shows them, by name, sorted.
pub(crate) fn sdk_metrics(m: &VertexEvaluation) -> VertexMetrics {
    sdk_metric_iter(m)
        .map(|(name, value)| (name.to_string(), value))
        .collect()
}

/// The per-vertex metric of this name, if there is one (one a vertex's evaluation has a place
/// for).
fn vertex_metric(name: &str) -> Option<ScalingMetric> {
    ScalingMetric::ALL
        .iter()
        .copied()
        .find(|m| m.as_str() == name)
        .filter(|m| (*m as usize) < EVALUATED_COUNT)
}

/// Merges an evaluator's answer into `m`; returns the names that could not be merged.
pub(crate) fn merge(m: &mut VertexEvaluation, answer: &[(String, EvaluatedMetric)]) -> Vec<String> {
    let mut unknown = Vec::new();
    for (name, incoming) in answer {
        let Some(metric) = vertex_metric(name) else {
            unknown.push(name.clone());
            continue;
        };
        let merged = match m.get(&metric) {
            Some(old) => EvaluatedScalingMetric {
                current: if incoming.current.is_nan() {
                    old.current
                } else {
                    incoming.current
                },
                average: if incoming.average.is_nan() {
                    old.average
                } else {
                    incoming.average
                },
            },
            None => EvaluatedScalingMetric {
                current: incoming.current,
                average: incoming.average,
            },
        };
        m.insert(metric, merged);
    }
    unknown
}

impl<'a> EvaluatorRun<'a> {
    /// A run for one cycle of `job`.
    pub(crate) fn new(
        job: &'a str,
        instance: &'a EvaluatorInstance,
        topology: Arc<JobTopology>,
    ) -> EvaluatorRun<'a> {
        let kept = KEPT
            .try_with(|kept| kept.try_borrow_mut().ok().and_then(|mut k| k.take()))
            .ok()
            .flatten();
        let ctx = match kept {
            Some(mut ctx) => {
                ctx.next_cycle(job, topology, instance.params.clone());
                ctx
            }
            None => EvaluatorContext::new(job, "", Vec::new())
                .with_topology(topology)
                .with_params(instance.params.clone()),
        };
        EvaluatorRun {
            job,
            instance,
            ctx: Some(ctx),
        }
    }

    /// The context of the cycle (there is one until the run is dropped).
    fn ctx(&mut self) -> &mut EvaluatorContext {
        self.ctx
            .get_or_insert_with(|| EvaluatorContext::new("", "", Vec::new()))
    }

    /// Calls the evaluator for vertex `id` (named `name`) with its evaluated metrics `m`,
    /// merges the answer into `m`, and remembers the merged vertex for the next calls. A fault
    /// merges nothing and returns the event that says so.
    pub(crate) fn evaluate_vertex(
        &mut self,
        id: &str,
        name: &str,
        m: &mut VertexEvaluation,
        backlog: bool,
    ) -> Option<Event> {
        let event = match self.instance.cannot_call() {
            Some(why) => Some(self.fault(id, &why)),
            None => {
                self.ctx()
                    .next_vertex(id, name, sdk_metric_iter(m), backlog);
                self.answer(id, m)
            }
        };
        self.ctx().push_evaluated_from(id, sdk_metric_iter(m));
        event
    }

    /// The evaluator's answer for the vertex the context is at (`id`), merged into `m`; the
    /// fault event if there is one.
    fn answer(&self, id: &str, m: &mut VertexEvaluation) -> Option<Event> {
        let evaluator = &self.instance.evaluator;
        let Some(ctx) = &self.ctx else {
            return None;
        };
        let answer = match contain(|| evaluator.evaluator.evaluate(ctx)) {
            Ok(Ok(answer)) => answer,
            Ok(Err(err)) => return Some(self.fault(id, &format!("failed: {err}"))),
            Err(panic) => return Some(self.fault(id, &panic.to_string())),
        };
        let unknown = merge(m, &answer);
        (!unknown.is_empty()).then(|| {
            self.fault(
                id,
                &format!(
                    "answered metrics that are not per-vertex scaling metrics, left out: {}",
                    unknown.join(", ")
                ),
            )
        })
    }

    fn fault(&self, vertex: &str, what: &str) -> Event {
        let instance = &self.instance.name;
        let evaluator = &self.instance.evaluator;
        Event::new(
            EventReason::PluginFault,
            Severity::Warning,
            format!(
                "evaluator `{instance}` ({} from {}) {what}; vertex {vertex} keeps its own \
                 evaluation (`{EVALUATOR_KEY}.{instance}.class`)",
                evaluator.id(),
                evaluator.origin,
            ),
        )
        .job(self.job)
        .vertex(vertex)
        .key(format!("PluginFault:evaluator:{instance}:{vertex}"))
    }
}
