//! The trait a custom metric evaluator implements, and what it sees.
//!
//! An evaluator adds to or overrides the metrics the pipeline evaluated for a vertex: a target
//! rate from an external SLO, a backlog the engine cannot see. The host calls it for every
//! vertex, in topological order, after the vertex's own evaluation (rates, utilization band);
//! what it returns is merged into the vertex's metrics before the next vertex is evaluated, so
//! downstream vertices see the merged target and catch-up rates. The band's thresholds are not
//! recomputed after the merge.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::context::{EvaluatedMetric, MetricList};
use crate::lent::Lent;
use crate::mode::ModeError;
use crate::params::ModeParams;
use crate::shared::{KindShared, kind_accessors};

/// The evaluated metrics of one vertex, by metric name (`TARGET_DATA_RATE`, `LAG`, ...), sorted
/// by name.
pub type VertexMetrics = Vec<(String, EvaluatedMetric)>;

/// A vertex evaluated before the one an evaluator is called for, with its metrics as merged.
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluatedVertex {
    /// The vertex id.
    pub vertex_id: String,
    /// Its evaluated metrics, after the evaluator's own answer for it was merged.
    pub metrics: VertexMetrics,
}

/// The vertices evaluated before, and a number for the list: a list keeps its number while it
/// only grows at its end (a host evaluates a job's vertices one after the other and adds each
/// as merged), so equal numbers mean that the shorter list is the start of the longer one. The
/// plugin side then copies only the vertices added since its last call (SDK 0.1.4). Each list
/// made otherwise (a new context, [`EvaluatorContext::with_evaluated`], a clone) gets a number
/// of its own from one process-wide counter; 0 means "not known".
#[derive(Debug, Default)]
pub(crate) struct EvaluatedList {
    pub(crate) vertices: Vec<EvaluatedVertex>,
    pub(crate) serial: u64,
    /// The number of the metric names of each vertex of the list (see `names.rs`), in the
    /// same order; 0 (or missing, when the list was grown another way) when not known. Lets
    /// [`EvaluatorContext::push_evaluated_current`] tell, once the vertices are spare, that a
    /// vertex's buffers already hold the names it is about to copy. Not part of the list.
    pub(crate) names: Vec<u64>,
    /// The vertices of an earlier cycle, last first, with the number of their metric names:
    /// a host that keeps its context across cycles ([`EvaluatorContext::next_cycle`]) refills
    /// their buffers in place for the next vertices
    /// ([`EvaluatorContext::push_evaluated_from`]) instead of allocating new strings for each
    /// vertex's id and metric names. Not part of the list.
    spare: Vec<(EvaluatedVertex, u64)>,
}

impl EvaluatedList {
    /// Adds `vertex`, whose metric names have the number `names` (0: not known).
    fn push(&mut self, vertex: EvaluatedVertex, names: u64) {
        self.names.resize(self.vertices.len(), 0);
        self.names.push(names);
        self.vertices.push(vertex);
    }

    /// A spare vertex's buffers (empty ones when there is none), with the number of the names
    /// they hold.
    fn spare(&mut self) -> (EvaluatedVertex, u64) {
        self.spare.pop().unwrap_or_else(|| {
            let vertex = EvaluatedVertex {
                vertex_id: String::new(),
                metrics: Vec::new(),
            };
            (vertex, 0)
        })
    }
}

/// A new number for a list of evaluated vertices (never 0).
fn next_list_serial() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    LAST.fetch_add(1, Ordering::Relaxed) + 1
}

/// A clone may grow apart from the original: it gets a number of its own.
impl Clone for EvaluatedList {
    fn clone(&self) -> EvaluatedList {
        EvaluatedList {
            vertices: self.vertices.clone(),
            serial: next_list_serial(),
            names: Vec::new(),
            spare: Vec::new(),
        }
    }
}

/// Compared as the vertices: the number is the boundary's business.
impl PartialEq for EvaluatedList {
    fn eq(&self, other: &EvaluatedList) -> bool {
        self.vertices == other.vertices
    }
}

/// Which job and vertex a context is for. On the plugin side, read from the lent context only
/// when the evaluator first asks for one of them (SDK 0.1.5): most evaluators look at the
/// metrics alone, and the vertex's id and name change on every call.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Identity {
    pub(crate) job: String,
    pub(crate) vertex_id: String,
    pub(crate) vertex_name: String,
}

/// What an evaluator sees for one vertex of one cycle. Immutable to the evaluator: the answer
/// is the only way to change the vertex's metrics.
///
/// A host calls the evaluator for a job's vertices one after the other: it may keep one context
/// for the cycle and move it on to each next vertex ([`EvaluatorContext::next_vertex`],
/// [`EvaluatorContext::push_evaluated`]), so that the metric names, the job graph and the
/// vertices evaluated before are neither copied nor allocated again per vertex.
#[derive(Debug, Clone)]
pub struct EvaluatorContext {
    // Crate-visible so that the plugin side of the boundary can bring a kept context up to
    // date in place (`abi::lend`); everyone else goes through the accessors.
    pub(crate) identity: Lent<Identity>,
    pub(crate) metrics: MetricList,
    pub(crate) evaluated: Lent<EvaluatedList>,
    pub(crate) backlog: bool,
    pub(crate) shared: KindShared,
    /// Where [`metric`](EvaluatorContext::metric) found (or would insert) names of each length
    /// class last: a hint, checked against the list before it is used.
    found: FoundHints,
}

/// How many length classes [`FoundHints`] keeps a place for.
const HINTS: usize = 4;

/// The places of the last names looked up by length class. An evaluator asks for the same one
/// or two names on every vertex, and consecutive vertices mostly have the same names: checking
/// the place found last (one or two comparisons) is cheaper than a binary search. A hint is
/// only ever a guess: [`EvaluatorContext::metric`] checks it against the names around it, so a
/// stale one (another vertex's names, another name of the same class) costs a search, never a
/// wrong answer. Atomic (relaxed) because the context is shared by reference; a race merely
/// loses a hint.
#[derive(Default)]
struct FoundHints([AtomicU32; HINTS]);

impl FoundHints {
    fn get(&self, name: &str) -> usize {
        self.0[name.len() % HINTS].load(Ordering::Relaxed) as usize
    }

    fn set(&self, name: &str, at: usize) {
        let at = u32::try_from(at).unwrap_or(u32::MAX);
        self.0[name.len() % HINTS].store(at, Ordering::Relaxed);
    }
}

impl Clone for FoundHints {
    fn clone(&self) -> Self {
        FoundHints::default()
    }
}

impl std::fmt::Debug for FoundHints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FoundHints")
    }
}

/// Compared as what an evaluator sees.
impl PartialEq for EvaluatorContext {
    fn eq(&self, other: &EvaluatorContext) -> bool {
        *self.identity.get() == *other.identity.get()
            && *self.metrics == *other.metrics
            && self.evaluated == other.evaluated
            && self.backlog == other.backlog
            && self.shared == other.shared
    }
}

impl EvaluatorContext {
    /// A context for vertex `vertex_id` of `job` with its evaluated `metrics` (sorted here by
    /// name); the rest starts empty (see the `with_*` methods).
    pub fn new(
        job: impl Into<String>,
        vertex_id: impl Into<String>,
        metrics: VertexMetrics,
    ) -> EvaluatorContext {
        let mut metrics = MetricList::from(metrics);
        metrics.number();
        EvaluatorContext {
            identity: Lent::ready_with(Identity {
                job: job.into(),
                vertex_id: vertex_id.into(),
                vertex_name: String::new(),
            }),
            metrics,
            evaluated: Lent::ready_with(EvaluatedList {
                vertices: Vec::new(),
                serial: next_list_serial(),
                names: Vec::new(),
                spare: Vec::new(),
            }),
            backlog: false,
            shared: KindShared::default(),
            found: FoundHints::default(),
        }
    }

    /// Sets the vertex's name.
    pub fn with_vertex_name(mut self, name: impl Into<String>) -> Self {
        self.identity.get_mut().vertex_name = name.into();
        self
    }

    /// Sets the vertices evaluated before this one, in topological order.
    pub fn with_evaluated(mut self, evaluated: Vec<EvaluatedVertex>) -> Self {
        self.evaluated = Lent::ready_with(EvaluatedList {
            vertices: evaluated,
            serial: next_list_serial(),
            names: Vec::new(),
            spare: Vec::new(),
        });
        self
    }

    /// Sets whether some source of the job is processing a backlog.
    pub fn with_backlog(mut self, backlog: bool) -> Self {
        self.backlog = backlog;
        self
    }

    kind_accessors!("metrics.custom-evaluator");

    /// Makes this the context of the next vertex of the same job and cycle, in place (for
    /// hosts, see the type's docs): its id, name and evaluated `metrics` (name and value),
    /// whether a source processes a backlog; the job, the graph, the parameters and the
    /// vertices evaluated before stay. Names equal to those in their places are not copied
    /// again; given sorted by name (as a host that keeps its metrics in one order does), they
    /// keep the number of the names (SDK 0.1.3, see [`MetricList`]).
    pub fn next_vertex<'a>(
        &mut self,
        vertex_id: &str,
        vertex_name: &str,
        metrics: impl IntoIterator<Item = (&'a str, EvaluatedMetric)>,
        backlog: bool,
    ) {
        let identity = self.identity.get_mut();
        set_text(&mut identity.vertex_id, vertex_id);
        set_text(&mut identity.vertex_name, vertex_name);
        self.metrics.refill(metrics);
        self.metrics.number();
        self.backlog = backlog;
    }

    /// Makes this the context of the next vertex as [`next_vertex`] does, for a host that
    /// knows the vertex's metrics have the names the context holds, in the same order (it
    /// filled them from the same set of metrics): only `values` are written, in the places of
    /// the kept names, and the names keep their number without being compared. False when
    /// there are more or fewer values than names: the metrics then have to be set whole with
    /// [`next_vertex`] (which this call leaves to the caller).
    ///
    /// [`next_vertex`]: EvaluatorContext::next_vertex
    pub fn next_vertex_values(
        &mut self,
        vertex_id: &str,
        vertex_name: &str,
        values: impl IntoIterator<Item = EvaluatedMetric>,
        backlog: bool,
    ) -> bool {
        let identity = self.identity.get_mut();
        set_text(&mut identity.vertex_id, vertex_id);
        set_text(&mut identity.vertex_name, vertex_name);
        self.backlog = backlog;
        self.metrics.refill_values(values)
    }

    /// Exchanges the context's metric list with `list` (for hosts whose vertices take turns
    /// with a few sets of metric names: each set's list kept aside with its names, so that
    /// [`next_vertex_values`](EvaluatorContext::next_vertex_values) applies after a turn).
    pub fn swap_metric_list(&mut self, list: &mut MetricList) {
        std::mem::swap(&mut self.metrics, list);
    }

    /// Adds `vertex` at the end of the vertices evaluated before (for hosts: the vertex just
    /// evaluated, as merged, before the context moves on to the next one). The list only grows,
    /// so a plugin copies only what was added since its last call.
    pub fn push_evaluated(&mut self, vertex: EvaluatedVertex) {
        self.evaluated.get_mut().push(vertex, 0);
    }

    /// Adds the vertex the context is at, with its id and its metrics as the context holds
    /// them, at the end of the vertices evaluated before, as [`push_evaluated_from`] does: for
    /// a host whose context's metrics are the vertex's as merged (the answer merged nothing,
    /// or the host set them again since), so that the vertex's metrics are walked once. The
    /// names are copied from the context's list, whose number says when the buffers of a
    /// vertex of an earlier cycle already hold them: then only the values are.
    ///
    /// [`push_evaluated_from`]: EvaluatorContext::push_evaluated_from
    pub fn push_evaluated_current(&mut self) {
        let names = self.metrics.names_number();
        let list = self.evaluated.get_mut();
        let (mut vertex, kept) = list.spare();
        set_text(&mut vertex.vertex_id, &self.identity.get().vertex_id);
        let metrics = &*self.metrics;
        if names != 0 && names == kept && vertex.metrics.len() == metrics.len() {
            for ((_, to), (_, from)) in vertex.metrics.iter_mut().zip(metrics) {
                *to = *from;
            }
        } else {
            let _ = crate::context::refill_in_place(
                &mut vertex.metrics,
                metrics.iter().map(|(n, m)| (n.as_str(), *m)),
            );
        }
        list.push(vertex, names);
    }

    /// Adds the vertex `vertex_id` with its evaluated `metrics` (name and value, sorted by
    /// name) at the end of the vertices evaluated before, as [`push_evaluated`] does, into the
    /// buffers of a vertex of an earlier cycle when there is one ([`next_cycle`]): a name equal
    /// to the one kept in its place is not copied, so a host that evaluates the same graphs
    /// cycle after cycle allocates nothing here.
    ///
    /// [`push_evaluated`]: EvaluatorContext::push_evaluated
    /// [`next_cycle`]: EvaluatorContext::next_cycle
    pub fn push_evaluated_from<'a>(
        &mut self,
        vertex_id: &str,
        metrics: impl IntoIterator<Item = (&'a str, EvaluatedMetric)>,
    ) {
        let list = self.evaluated.get_mut();
        let (mut vertex, _) = list.spare();
        set_text(&mut vertex.vertex_id, vertex_id);
        let _ = crate::context::refill_in_place(&mut vertex.metrics, metrics);
        list.push(vertex, 0);
    }

    /// Makes this the context of a new cycle, of the same job or another one, in place (for
    /// hosts that keep one context per thread rather than one per cycle): the job, its graph
    /// and the instance's parameters are set, and the list of vertices evaluated before starts
    /// empty, with a new number, keeping the old vertices' buffers for the next
    /// [`push_evaluated_from`](EvaluatorContext::push_evaluated_from). The vertex is set by the
    /// next [`next_vertex`](EvaluatorContext::next_vertex).
    pub fn next_cycle(
        &mut self,
        job: &str,
        topology: std::sync::Arc<crate::context::JobTopology>,
        params: ModeParams,
    ) {
        set_text(&mut self.identity.get_mut().job, job);
        self.shared.topology = Lent::ready_with(crate::shared::LentGraph {
            graph: topology,
            generation: 0,
        });
        self.shared.params = params;
        let list = self.evaluated.get_mut();
        let names = std::mem::take(&mut list.names);
        let numbered = list
            .vertices
            .drain(..)
            .enumerate()
            .map(|(i, v)| (v, names.get(i).copied().unwrap_or(0)));
        list.spare.extend(numbered.rev());
        list.names = names;
        list.names.clear();
        list.serial = next_list_serial();
    }

    /// The job's name.
    pub fn job_name(&self) -> &str {
        &self.identity.get().job
    }

    /// The vertex's id.
    pub fn vertex_id(&self) -> &str {
        &self.identity.get().vertex_id
    }

    /// The vertex's name (empty when the engine gives none).
    pub fn vertex_name(&self) -> &str {
        &self.identity.get().vertex_name
    }

    /// The vertex's evaluated metrics, sorted by name.
    pub fn metrics(&self) -> &[(String, EvaluatedMetric)] {
        &self.metrics
    }

    /// One evaluated metric of the vertex by name.
    pub fn metric(&self, name: &str) -> Option<EvaluatedMetric> {
        let metrics: &[(String, EvaluatedMetric)] = &self.metrics;
        let key = name.as_bytes();
        // The place found last for a name of this class, if the names around it prove it
        // (the list is sorted by name, each name once): the name there, or a place between a
        // smaller and a larger name (the name is absent).
        let at = self.found.get(name);
        if at <= metrics.len() {
            let here = metrics.get(at);
            if here.is_some_and(|(n, _)| crate::bytes::same(n.as_bytes(), key)) {
                return here.map(|(_, m)| *m);
            }
            let after_smaller = at == 0 || crate::bytes::before(metrics[at - 1].0.as_bytes(), key);
            if after_smaller && here.is_none_or(|(n, _)| crate::bytes::before(key, n.as_bytes())) {
                return None;
            }
        }
        match metrics.binary_search_by(|(n, _)| crate::bytes::order(n.as_bytes(), key)) {
            Ok(i) => {
                self.found.set(name, i);
                Some(metrics[i].1)
            }
            Err(i) => {
                self.found.set(name, i);
                None
            }
        }
    }

    /// The vertices evaluated before this one, in topological order, with their merged metrics.
    pub fn evaluated(&self) -> &[EvaluatedVertex] {
        &self.evaluated.get().vertices
    }

    /// Whether some source of the job is processing a backlog (its lag exceeds
    /// `backlog-processing.lag-threshold`).
    pub fn is_processing_backlog(&self) -> bool {
        self.backlog
    }
}

/// Sets `text` to `to`, reusing its buffer (copying is as cheap as comparing first: the ids
/// and names it is given change on every vertex).
pub(crate) fn set_text(text: &mut String, to: &str) {
    text.clear();
    text.push_str(to);
}

/// A custom metric evaluator.
pub trait MetricEvaluator: Send + Sync {
    /// The metrics to merge into the vertex's: for a metric the vertex has, the current and
    /// the average value each replace the evaluated one unless NaN; a metric it does not have
    /// is added. Return an empty list to change nothing.
    fn evaluate(&self, ctx: &EvaluatorContext) -> Result<VertexMetrics, ModeError>;

    /// Checks the instance's parameters when a configuration is loaded, so that bad values are
    /// reported by `flowscale validate` rather than at the first cycle.
    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        let _ = params;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_sorted_and_found_by_name() {
        let m = |v| EvaluatedMetric {
            current: v,
            average: v,
        };
        let ctx = EvaluatorContext::new(
            "job",
            "v1",
            vec![
                ("LAG".into(), m(3.0)),
                ("CATCH_UP_DATA_RATE".into(), m(1.0)),
            ],
        );
        assert_eq!(ctx.metrics()[0].0, "CATCH_UP_DATA_RATE");
        assert_eq!(ctx.metric("LAG"), Some(m(3.0)));
        assert_eq!(ctx.metric("TARGET_DATA_RATE"), None);
    }

    /// The place a name was found at last is only a hint: lists that change from vertex to
    /// vertex (a name added before it, the name gone, names of the same length) still answer
    /// what a search answers.
    #[test]
    fn metric_answers_as_a_search_when_the_names_change_between_vertices() {
        let m = |v| EvaluatedMetric {
            current: v,
            average: v,
        };
        let lists: [&[(&str, f64)]; 6] = [
            &[("CATCH_UP_DATA_RATE", 1.0), ("LAG", 2.0)],
            &[("AAA", 9.0), ("CATCH_UP_DATA_RATE", 3.0), ("LAG", 4.0)],
            &[("CATCH_UP_DATA_RATE", 5.0)],
            &[("LAG", 6.0), ("ZZZ", 7.0)],
            &[("LAF", 8.0), ("LAH", 10.0)],
            &[],
        ];
        let mut ctx = EvaluatorContext::new("job", "v0", Vec::new());
        for round in 0..2 {
            for (i, list) in lists.iter().enumerate() {
                ctx.next_vertex("v", "", list.iter().map(|&(n, v)| (n, m(v))), false);
                for name in [
                    "LAG",
                    "CATCH_UP_DATA_RATE",
                    "AAA",
                    "LAF",
                    "LAH",
                    "ZZZ",
                    "LAB",
                ] {
                    let expected = list.iter().find(|(n, _)| *n == name).map(|&(_, v)| m(v));
                    assert_eq!(
                        ctx.metric(name),
                        expected,
                        "round {round}, list {i}, {name}"
                    );
                    // Asked again, from the hint just left.
                    assert_eq!(
                        ctx.metric(name),
                        expected,
                        "round {round}, list {i}, {name} again"
                    );
                }
            }
        }
    }

    #[test]
    fn a_context_moved_on_to_the_next_cycle_lists_only_that_cycles_vertices() {
        let m = |v| EvaluatedMetric {
            current: v,
            average: v,
        };
        let vertex = |id: &str, metrics: &[(&str, f64)]| EvaluatedVertex {
            vertex_id: id.into(),
            metrics: metrics
                .iter()
                .map(|(n, v)| (n.to_string(), m(*v)))
                .collect(),
        };
        let params = |name: &str| {
            ModeParams::under(
                crate::EVALUATOR_KEY,
                name,
                std::collections::BTreeMap::new(),
            )
        };
        let graph = std::sync::Arc::new(crate::context::JobTopology::default());
        let mut ctx = EvaluatorContext::new("a", "", Vec::new());
        ctx.next_cycle("a", graph.clone(), params("one"));
        ctx.push_evaluated_from("a1", [("A", m(1.0)), ("B", m(2.0)), ("C", m(3.0))]);
        ctx.push_evaluated_from("a2", [("A", m(4.0))]);
        assert_eq!(
            ctx.evaluated(),
            [
                vertex("a1", &[("A", 1.0), ("B", 2.0), ("C", 3.0)]),
                vertex("a2", &[("A", 4.0)])
            ]
        );
        let first = ctx.evaluated.get().serial;

        // Another job's cycle: its own vertices only, in the old buffers (other names, fewer
        // and more of them), under a new number so that no plugin takes it for the old list
        // grown.
        ctx.next_cycle("b", graph, params("two"));
        assert!(ctx.evaluated().is_empty());
        assert_ne!(ctx.evaluated.get().serial, first);
        assert_eq!(ctx.job_name(), "b");
        assert_eq!(ctx.params().mode_name(), "two");
        ctx.push_evaluated_from("b1", [("A", m(5.0)), ("D", m(6.0))]);
        ctx.push_evaluated_from("b2", [("B", m(7.0)), ("C", m(8.0))]);
        ctx.push_evaluated_from("b3", [("E", m(9.0))]);
        assert_eq!(
            ctx.evaluated(),
            [
                vertex("b1", &[("A", 5.0), ("D", 6.0)]),
                vertex("b2", &[("B", 7.0), ("C", 8.0)]),
                vertex("b3", &[("E", 9.0)])
            ]
        );
        // A clone is the list, without the spare buffers.
        assert_eq!(ctx.clone().evaluated(), ctx.evaluated());
    }

    #[test]
    fn values_alone_move_the_context_on_and_the_current_vertex_is_listed_as_held() {
        let m = |v| EvaluatedMetric {
            current: v,
            average: v,
        };
        let params = ModeParams::under(
            crate::EVALUATOR_KEY,
            "one",
            std::collections::BTreeMap::new(),
        );
        let graph = std::sync::Arc::new(crate::context::JobTopology::default());
        let mut ctx = EvaluatorContext::new("a", "", Vec::new());
        for cycle in 0..2 {
            // Other values each cycle, so that a vertex copied into an earlier one's buffers
            // shows its own.
            let c = f64::from(cycle) * 10.0;
            ctx.next_cycle("a", graph.clone(), params.clone());
            ctx.next_vertex("a1", "one", [("A", m(1.0 + c)), ("B", m(2.0 + c))], false);
            let names = ctx.metrics.names_number();
            ctx.push_evaluated_current();
            // The same names: only the values are written, the number stays.
            assert!(ctx.next_vertex_values("a2", "two", [m(3.0 + c), m(4.0 + c)], true));
            assert_eq!(ctx.metrics.names_number(), names);
            assert_eq!(
                ctx.metrics(),
                [("A".into(), m(3.0 + c)), ("B".into(), m(4.0 + c))]
            );
            assert_eq!((ctx.vertex_id(), ctx.vertex_name()), ("a2", "two"));
            assert!(ctx.is_processing_backlog());
            ctx.push_evaluated_current();
            // Another count of values is refused: the caller sets the metrics whole.
            assert!(!ctx.next_vertex_values("a3", "three", [m(5.0)], false));
            ctx.next_vertex("a3", "three", [("C", m(5.0 + c))], false);
            ctx.push_evaluated_current();
            let vertex = |id: &str, metrics: &[(&str, f64)]| EvaluatedVertex {
                vertex_id: id.into(),
                metrics: metrics
                    .iter()
                    .map(|(n, v)| (n.to_string(), m(*v)))
                    .collect(),
            };
            assert_eq!(
                ctx.evaluated(),
                [
                    vertex("a1", &[("A", 1.0 + c), ("B", 2.0 + c)]),
                    vertex("a2", &[("A", 3.0 + c), ("B", 4.0 + c)]),
                    vertex("a3", &[("C", 5.0 + c)]),
                ],
                "cycle {cycle}"
            );
        }

        // A list swapped in is the context's metrics; the one it held comes out.
        let mut other = MetricList::new();
        other.refill([("Z", m(9.0))]);
        ctx.swap_metric_list(&mut other);
        assert_eq!(ctx.metrics(), [("Z".into(), m(9.0))]);
        assert_eq!(&*other, [("C".to_string(), m(15.0))]);
    }
}
