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
use std::sync::Arc;

use flowscale_sdk::{
    EVALUATOR_KEY, EvaluatedMetric, EvaluatorContext, JobTopology, MetricList, VertexMetrics,
};

use super::resolve::EvaluatorInstance;
use crate::alignment::contain;
use crate::events::{Event, EventReason, Severity};
use crate::scaling::metrics::{
    EVALUATED_COUNT, EvaluatedScalingMetric, ScalingMetric, VertexEvaluation, metrics_by_name,
    names_mask,
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
    /// The names the context's metrics have, as the mask of the present metrics they were
    /// filled from ([`names_mask`]); `None` when not known. A vertex with the same mask gets
    /// its values written into the places of the kept names, without a name compared.
    names: Option<u32>,
    /// The context's earlier metric lists, each with the mask it was filled from: a job's
    /// vertices take turns with a few sets of names (a source has metrics the operators after
    /// it have not), and a list of the vertex's mask gets its values alone.
    spare: Vec<(u32, MetricList)>,
}

/// How many metric lists a run keeps aside (see [`EvaluatorRun::spare`]).
const SPARE_LISTS: usize = 4;

/// What a run leaves to the next: its context, the mask its metrics were filled from and the
/// metric lists kept aside.
type Kept = (EvaluatorContext, Option<u32>, Vec<(u32, MetricList)>);

thread_local! {
    /// The evaluator context of the last cycle this thread ran, moved on to the next one, with
    /// the mask its metrics were filled from.
    static KEPT: RefCell<Option<Kept>> = const { RefCell::new(None) };
}

impl Drop for EvaluatorRun<'_> {
    fn drop(&mut self) {
        if let Some(ctx) = self.ctx.take() {
            let names = self.names;
            let spare = std::mem::take(&mut self.spare);
            // A thread being torn down keeps nothing.
            let _ = KEPT.try_with(|kept| {
                if let Ok(mut kept) = kept.try_borrow_mut() {
                    *kept = Some((ctx, names, spare));
                }
            });
        }
    }
}

/// A vertex's metrics as the SDK shows them: by name, sorted.
fn sdk_metric_iter(m: &VertexEvaluation) -> impl Iterator<Item = (&'static str, EvaluatedMetric)> {
    metrics_by_name(m, names_mask(m))
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
        let (ctx, names, spare) = match kept {
            Some((mut ctx, names, spare)) => {
                ctx.next_cycle(job, topology, instance.params.clone());
                (ctx, names, spare)
            }
            None => {
                let ctx = EvaluatorContext::new(job, "", Vec::new())
                    .with_topology(topology)
                    .with_params(instance.params.clone());
                (ctx, None, Vec::new())
            }
        };
        EvaluatorRun {
            job,
            instance,
            ctx: Some(ctx),
            names,
            spare,
        }
    }

    /// The context of the cycle (there is one until the run is dropped).
    fn ctx(&mut self) -> &mut EvaluatorContext {
        self.ctx.get_or_insert_with(|| {
            self.names = None;
            EvaluatorContext::new("", "", Vec::new())
        })
    }

    /// Moves the context on to vertex `id` (named `name`) with the metrics `m`: when they have
    /// the names the context holds (the same mask), only their values are written.
    fn set_vertex(&mut self, id: &str, name: &str, m: &VertexEvaluation, backlog: bool) {
        let mask = names_mask(m);
        if self.names != Some(mask) {
            self.take_list(mask);
        }
        let same = self.names == Some(mask);
        let ctx = self.ctx();
        let values = metrics_by_name(m, mask).map(|(_, value)| value);
        if !(same && ctx.next_vertex_values(id, name, values, backlog)) {
            ctx.next_vertex(id, name, metrics_by_name(m, mask), backlog);
        }
        self.names = Some(mask);
    }

    /// Puts the context's metric list aside and takes the one kept for `mask`, if there is
    /// one (else the oldest kept, or a new one, to refill).
    fn take_list(&mut self, mask: u32) {
        let at = self.spare.iter().rposition(|(kept, _)| *kept == mask);
        let mut list = match at {
            Some(at) => self.spare.remove(at),
            None if self.spare.len() < SPARE_LISTS => (mask, MetricList::new()),
            None => self.spare.remove(0),
        };
        self.ctx().swap_metric_list(&mut list.1);
        // The list put aside holds the names of `self.names`; the one taken those of `mask`
        // when it was kept for it (else they are not known).
        if let Some(names) = self.names {
            self.spare.push((names, list.1));
        }
        self.names = at.map(|_| mask);
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
        // The vertex's metrics are walked once when the answer merges nothing: the context's
        // list, set for the call, is also the entry of the vertices evaluated before.
        self.set_vertex(id, name, m, backlog);
        let (event, merged) = match self.instance.cannot_call() {
            Some(why) => (Some(self.fault(id, &why)), false),
            None => self.answer(id, m),
        };
        if merged {
            self.set_vertex(id, name, m, backlog);
        }
        self.ctx().push_evaluated_current();
        event
    }

    /// The evaluator's answer for the vertex the context is at (`id`), merged into `m`; the
    /// fault event if there is one, and whether anything was merged.
    fn answer(&self, id: &str, m: &mut VertexEvaluation) -> (Option<Event>, bool) {
        let evaluator = &self.instance.evaluator;
        let Some(ctx) = &self.ctx else {
            return (None, false);
        };
        let answer = match contain(|| evaluator.evaluator.evaluate(ctx)) {
            Ok(Ok(answer)) => answer,
            Ok(Err(err)) => return (Some(self.fault(id, &format!("failed: {err}"))), false),
            Err(panic) => return (Some(self.fault(id, &panic.to_string())), false),
        };
        let unknown = merge(m, &answer);
        let merged = answer.len() > unknown.len();
        let event = (!unknown.is_empty()).then(|| {
            self.fault(
                id,
                &format!(
                    "answered metrics that are not per-vertex scaling metrics, left out: {}",
                    unknown.join(", ")
                ),
            )
        });
        (event, merged)
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
