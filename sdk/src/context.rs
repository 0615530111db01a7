//! The immutable inputs of one alignment decision.

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::lent::{Lent, LentSource};
use crate::params::ModeParams;
use crate::ship::ShipStrategy;

/// One evaluated metric of a vertex: its current value and its average over the metric window.
/// A half that the evaluation does not produce is NaN.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EvaluatedMetric {
    /// The latest value.
    pub current: f64,
    /// The average over the metric window.
    pub average: f64,
}

/// A list of evaluated metrics, by name, as a host keeps it from one context to the next: the
/// list of a context it decided on ([`AlignmentContext::into_metric_list`]), with the number
/// of its names, refilled in place for the next context ([`MetricList::refill`]).
///
/// A host builds contexts vertex after vertex with the same metric names: refilling the list
/// compares each name with the one in its place anyway (to reuse its buffer), and when they
/// are all the same the list keeps its number, so that the builder takes it
/// ([`AlignmentContextBuilder::metric_list`]) without checking the names a second time.
/// Any other name, or another count, drops the number: the builder then sorts and numbers the
/// list as it does a plain one. The names are never reachable mutably from outside, so a
/// number always names exactly the names it came with (SDK 0.1.3).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricList {
    metrics: Vec<(String, EvaluatedMetric)>,
    /// The number of the names (see `names.rs`); 0 when not known.
    names: u64,
}

impl MetricList {
    /// An empty list.
    pub fn new() -> MetricList {
        MetricList::default()
    }

    /// Makes the list hold `metrics` (name and value, in that order), in place: a name equal
    /// to the one kept in its place reuses it, and the list keeps its number only when every
    /// name is the one kept in its place and there are as many.
    pub fn refill<'a>(&mut self, metrics: impl IntoIterator<Item = (&'a str, EvaluatedMetric)>) {
        if !refill_in_place(&mut self.metrics, metrics) {
            self.names = 0;
        }
    }

    /// The number of the list's names: equal numbers, equal names in the same order (see
    /// [`MetricList`]); 0 when not known.
    pub fn names_number(&self) -> u64 {
        self.names
    }

    /// Writes `values` into the places of the kept names, in order, keeping the names and
    /// their number: for a host that knows its next context has exactly these names (it made
    /// this number's names from the same metrics before), so that not even the names are
    /// compared. False when there are more or fewer values than names: the list then has to
    /// be refilled whole ([`MetricList::refill`]). The names never change here, so the number
    /// keeps naming them whatever the values.
    pub fn refill_values(&mut self, values: impl IntoIterator<Item = EvaluatedMetric>) -> bool {
        let mut places = self.metrics.iter_mut();
        for value in values {
            match places.next() {
                Some((_, kept)) => *kept = value,
                None => return false,
            }
        }
        places.next().is_none()
    }

    /// The list of a context whose names the builder numbered `names`.
    pub(crate) fn numbered(metrics: Vec<(String, EvaluatedMetric)>, names: u64) -> MetricList {
        MetricList { metrics, names }
    }

    /// The metrics, sorted and distinct, and the number of their names, for a new context: a
    /// list that kept its number is taken as it is (its names are those of a context built
    /// before); any other is sorted and numbered now (see `names.rs`).
    pub(crate) fn into_numbered(self) -> (Vec<(String, EvaluatedMetric)>, u64) {
        let MetricList { mut metrics, names } = self;
        let names = if names != 0 {
            names
        } else {
            crate::names::sort_and_number(&mut metrics)
        };
        (metrics, names)
    }

    /// Sorts the list by name and numbers its names unless they already have a number (see
    /// `names.rs`): what a context that keeps its list across vertices does after each refill.
    pub(crate) fn number(&mut self) {
        if self.names == 0 {
            self.names = crate::names::sort_and_number(&mut self.metrics);
        }
    }

    /// The metrics and their number, to bring up to date in place (the plugin side's kept
    /// contexts); whoever changes a name sets the number to 0 or to the one of the new names.
    pub(crate) fn parts_mut(&mut self) -> (&mut Vec<(String, EvaluatedMetric)>, &mut u64) {
        (&mut self.metrics, &mut self.names)
    }

    /// The metrics, as a plain list.
    pub fn into_vec(self) -> Vec<(String, EvaluatedMetric)> {
        self.metrics
    }
}

/// Makes `list` hold `metrics` (name and value, in that order), in place: a name equal to the
/// one kept in its place reuses it, any other is copied into that place's buffer. True when
/// every name is the one kept in its place and there are as many.
#[inline]
pub(crate) fn refill_in_place<'a>(
    list: &mut Vec<(String, EvaluatedMetric)>,
    metrics: impl IntoIterator<Item = (&'a str, EvaluatedMetric)>,
) -> bool {
    let mut same_names = true;
    let mut filled = 0;
    for (name, value) in metrics {
        match list.get_mut(filled) {
            Some((kept, kept_value)) => {
                if !crate::bytes::same(kept.as_bytes(), name.as_bytes()) {
                    kept.clear();
                    kept.push_str(name);
                    same_names = false;
                }
                *kept_value = value;
            }
            None => {
                list.push((name.to_owned(), value));
                same_names = false;
            }
        }
        filled += 1;
    }
    if filled != list.len() {
        list.truncate(filled);
        same_names = false;
    }
    same_names
}

/// A plain list: its names are numbered when a context is built from it.
impl From<Vec<(String, EvaluatedMetric)>> for MetricList {
    fn from(metrics: Vec<(String, EvaluatedMetric)>) -> MetricList {
        MetricList { metrics, names: 0 }
    }
}

/// The metrics, read only (so that the number keeps naming the names).
impl Deref for MetricList {
    type Target = [(String, EvaluatedMetric)];
    fn deref(&self) -> &Self::Target {
        &self.metrics
    }
}

/// A vertex of the job graph as the alignment step sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyVertex {
    /// Engine-assigned id (Flink: the hex job-vertex id).
    pub id: String,
    /// Human-readable name.
    pub name: String,
    /// Parallelism it runs at now.
    pub parallelism: u32,
    /// Max parallelism = number of key groups.
    pub max_parallelism: u32,
    /// Partitions of a source that reports them; 0 otherwise.
    pub source_partitions: u32,
}

/// An edge of the job graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyEdge {
    /// Id of the upstream vertex.
    pub from: String,
    /// Id of the downstream vertex.
    pub to: String,
    /// How records are shipped along the edge.
    pub ship_strategy: ShipStrategy,
}

/// The job graph: vertices in topological order and the edges between them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobTopology {
    /// Vertices, inputs before outputs.
    pub vertices: Vec<TopologyVertex>,
    /// Edges.
    pub edges: Vec<TopologyEdge>,
}

/// The load of one subtask of the vertex, at the parallelism it runs at now, as the engine
/// reports it (Flink: `busyTimeMsPerSecond` / 1000 and `numRecordsInPerSecond`). A half the
/// engine did not report is `None`.
///
/// Added in SDK 0.1.1 (see [`AlignmentContext::subtask_loads`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SubtaskLoad {
    /// The share of the time the subtask was busy processing, in `[0, 1]`.
    pub busy_ratio: Option<f64>,
    /// The records the subtask received per second.
    pub records_in_per_second: Option<f64>,
}

/// Everything an alignment mode may look at for one vertex in one decision.
///
/// It is built by the host once per vertex per decision and never changes afterwards. Fields are
/// reached through accessors only, so that the context can grow in later SDK versions without
/// breaking modes written against this one.
#[derive(Clone)]
pub struct AlignmentContext {
    // Crate-visible so that the plugin side of the boundary can bring a kept context up to
    // date in place (`abi::context::with_lent`); everyone else goes through the accessors.
    pub(crate) current: u32,
    pub(crate) target: u32,
    pub(crate) source_partitions: u32,
    pub(crate) max_parallelism: u32,
    pub(crate) lower_limit: u32,
    pub(crate) upper_limit: u32,
    pub(crate) input_ship_strategies: Ships,
    pub(crate) params: ModeParams,
    /// Names this context among those built in this process (see [`next_serial`]); 0 for one
    /// brought up to date in place, which has no name. Not part of what a mode sees.
    pub(crate) serial: u64,
    /// The identity, metrics, graph and per-subtask load: see [`Details`].
    pub(crate) details: LazyDetails,
}

/// The parts of a context that many modes never read (the identity, the metrics, the graph,
/// the per-subtask load): a mode's gate and alignment are mostly about numbers, ship
/// strategies and parameters. The plugin side's kept context brings them up to date from the
/// lent context only when the mode first reads one of them (see [`LazyDetails`]).
#[derive(Clone)]
pub(crate) struct Details {
    pub(crate) job_name: Text,
    pub(crate) vertex_id: Text,
    pub(crate) vertex_name: Text,
    pub(crate) metrics: Vec<(String, EvaluatedMetric)>,
    /// Names the list of metric names (see `names.rs`): equal numbers, equal names. 0 when not
    /// known. Not part of what a mode sees.
    pub(crate) metric_names: u64,
    pub(crate) topology: Arc<JobTopology>,
    pub(crate) subtask_loads: Option<Vec<SubtaskLoad>>,
}

/// [`Details`], either complete (every context a builder makes) or still to be brought up to
/// date from the context the host lends for the running call (the plugin side's kept context,
/// see `abi::context::with_lent`), which happens once, when a mode first reads them.
pub(crate) type LazyDetails = Lent<Details>;

/// Where a kept context's details come from (see [`LentSource`]).
pub(crate) type DetailSource = LentSource<Details>;

/// A context's input ship strategies: shared with whoever built the context (a host builds one
/// per aligned vertex and cycle from the strategies its job graph keeps, so sharing them spares
/// a list per context), or owned (the plugin side's kept copy, brought up to date in place).
#[derive(Clone)]
pub(crate) enum Ships {
    Shared(Arc<[ShipStrategy]>),
    Owned(Vec<ShipStrategy>),
}

/// As the list of strategies, whoever holds it.
impl fmt::Debug for Ships {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

impl Ships {
    pub(crate) fn as_slice(&self) -> &[ShipStrategy] {
        match self {
            Ships::Shared(ships) => ships,
            Ships::Owned(ships) => ships,
        }
    }

    /// The strategies as an owned list to change in place (a shared one becomes an empty
    /// owned list first).
    pub(crate) fn owned_mut(&mut self) -> &mut Vec<ShipStrategy> {
        if let Ships::Shared(_) = self {
            *self = Ships::Owned(Vec::new());
        }
        match self {
            Ships::Owned(ships) => ships,
            Ships::Shared(_) => unreachable!("made owned just above"),
        }
    }
}

/// A text of a context's identity: shared with whoever built the context (a host keeps the
/// job's name and each vertex's id and name for as long as the job runs, and lends every
/// context of the vertex the same texts instead of copies), or owned (the plugin side's kept
/// copy, brought up to date in place).
#[derive(Clone)]
pub(crate) enum Text {
    Shared(Arc<str>),
    Owned(String),
}

/// As the text, whoever holds it.
impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl Text {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Text::Shared(text) => text,
            Text::Owned(text) => text,
        }
    }

    /// The text as an owned string to change in place (a shared one becomes an empty owned
    /// string first).
    pub(crate) fn owned_mut(&mut self) -> &mut String {
        if let Text::Shared(_) = self {
            *self = Text::Owned(String::new());
        }
        match self {
            Text::Owned(text) => text,
            Text::Shared(_) => unreachable!("made owned just above"),
        }
    }
}

/// The job graph of a context built without one: one empty graph for the process, so that
/// such a context allocates none of its own.
fn empty_topology() -> Arc<JobTopology> {
    static EMPTY: OnceLock<Arc<JobTopology>> = OnceLock::new();
    Arc::clone(EMPTY.get_or_init(Arc::default))
}

/// A number for a newly built context: one process-wide counter that never repeats, so that
/// equal serials mean the same (immutable) context and its clones (SDK 0.1.2: the plugin side
/// then skips bringing its copy up to date for the second call on one vertex).
fn next_serial() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    LAST.fetch_add(1, Ordering::Relaxed) + 1
}

/// Every field a mode can read; the serial is the boundary's business.
impl fmt::Debug for AlignmentContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let details = self.details.get();
        f.debug_struct("AlignmentContext")
            .field("job_name", &details.job_name)
            .field("vertex_id", &details.vertex_id)
            .field("vertex_name", &details.vertex_name)
            .field("current", &self.current)
            .field("target", &self.target)
            .field("source_partitions", &self.source_partitions)
            .field("max_parallelism", &self.max_parallelism)
            .field("lower_limit", &self.lower_limit)
            .field("upper_limit", &self.upper_limit)
            .field("input_ship_strategies", &self.input_ship_strategies)
            .field("metrics", &details.metrics)
            .field("topology", &details.topology)
            .field("params", &self.params)
            .field("subtask_loads", &details.subtask_loads)
            .finish()
    }
}

impl AlignmentContext {
    /// Starts a context for a vertex scaling from `current` to the computed `target`.
    ///
    /// `max_parallelism` is the vertex's number of key groups. Limits default to
    /// `[1, u32::MAX]`; everything else to empty.
    #[inline]
    pub fn builder(current: u32, target: u32, max_parallelism: u32) -> AlignmentContextBuilder {
        AlignmentContextBuilder {
            job_name: Text::Owned(String::new()),
            vertex_id: Text::Owned(String::new()),
            vertex_name: Text::Owned(String::new()),
            current,
            target,
            source_partitions: 0,
            max_parallelism,
            lower_limit: 1,
            upper_limit: u32::MAX,
            input_ship_strategies: Ships::Owned(Vec::new()),
            metrics: Vec::new(),
            metric_names: 0,
            topology: None,
            params: None,
            subtask_loads: None,
        }
    }

    /// The job's name.
    pub fn job_name(&self) -> &str {
        self.details.get().job_name.as_str()
    }
    /// The vertex id.
    pub fn vertex_id(&self) -> &str {
        self.details.get().vertex_id.as_str()
    }
    /// The vertex name.
    pub fn vertex_name(&self) -> &str {
        self.details.get().vertex_name.as_str()
    }
    /// `c`: the parallelism the vertex runs at now.
    pub fn current_parallelism(&self) -> u32 {
        self.current
    }
    /// `t`: the computed target, after scale factor, rounding and clamping to the limits.
    pub fn target_parallelism(&self) -> u32 {
        self.target
    }
    /// `S`: the partition count of a source that reports one, else 0.
    pub fn source_partitions(&self) -> u32 {
        self.source_partitions
    }
    /// `K`: the vertex's max parallelism, i.e. its number of key groups.
    pub fn max_parallelism(&self) -> u32 {
        self.max_parallelism
    }
    /// The lower parallelism limit (`min(c, vertex.min-parallelism)`).
    pub fn lower_limit(&self) -> u32 {
        self.lower_limit
    }
    /// The upper parallelism limit (`max(c, vertex.max-parallelism)`).
    pub fn upper_limit(&self) -> u32 {
        self.upper_limit
    }
    /// The ship strategies of the vertex's input edges.
    pub fn input_ship_strategies(&self) -> &[ShipStrategy] {
        self.input_ship_strategies.as_slice()
    }
    /// The evaluated metrics of the vertex, sorted by name.
    pub fn metrics(&self) -> &[(String, EvaluatedMetric)] {
        &self.details.get().metrics
    }
    /// Takes the context apart for its metric list, so that whoever built it can reuse the
    /// list and its strings for the next context instead of allocating them again.
    pub fn into_metrics(self) -> Vec<(String, EvaluatedMetric)> {
        self.details.into_inner().metrics
    }
    /// Takes the context apart for its metric list with the number of its names (see
    /// [`MetricList`]), so that whoever built it can refill the list for the next context
    /// instead of allocating it again, and keep the number (SDK 0.1.3).
    pub fn into_metric_list(mut self) -> MetricList {
        // Taken out of the details in place: the rest is dropped where it is, not moved.
        let details = self.details.get_mut();
        MetricList::numbered(std::mem::take(&mut details.metrics), details.metric_names)
    }
    /// One evaluated metric by name (e.g. `TRUE_PROCESSING_RATE`).
    pub fn metric(&self, name: &str) -> Option<EvaluatedMetric> {
        let metrics = &self.details.get().metrics;
        metrics
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| metrics[i].1)
    }
    /// The whole job graph.
    pub fn topology(&self) -> &JobTopology {
        &self.details.get().topology
    }
    /// The selected mode's parameters: every `scaling.alignment.mode.<name>.<rest>` key as `<rest>`.
    pub fn params(&self) -> &ModeParams {
        &self.params
    }

    /// The load of each subtask of the vertex at the current parallelism, subtask `i` at index
    /// `i`, when the host knows it: `None` when the engine reported none, and always `None` in a
    /// host older than SDK 0.1.1 (which cannot tell). When present there is one entry per
    /// subtask of the current parallelism; an entry's halves may still be `None` each.
    pub fn subtask_loads(&self) -> Option<&[SubtaskLoad]> {
        self.details.get().subtask_loads.as_deref()
    }

    /// `N`: what parallelism is aligned to — the source partitions when known, else the key groups.
    pub fn partitions_or_key_groups(&self) -> u32 {
        if self.source_partitions > 0 {
            self.source_partitions
        } else {
            self.max_parallelism
        }
    }
    /// `UA = min(N, K, upper)`: no aligned value may exceed it.
    pub fn alignment_cap(&self) -> u32 {
        self.partitions_or_key_groups()
            .min(self.max_parallelism)
            .min(self.upper_limit)
    }
    /// True when the target is above the current parallelism.
    pub fn is_scale_up(&self) -> bool {
        self.target > self.current
    }
    /// True when an input of the vertex is a `keyBy` (HASH) edge.
    pub fn has_hash_input(&self) -> bool {
        self.input_ship_strategies().contains(&ShipStrategy::Hash)
    }
    /// The gate the built-in modes use: a source that reports partitions, or a vertex with a HASH
    /// input.
    pub fn default_applicable(&self) -> bool {
        self.source_partitions > 0 || self.has_hash_input()
    }
}

/// Builds an [`AlignmentContext`]; used by the host and by tests of modes.
///
/// The host builds one per aligned vertex per decision: the steps are inlined into the caller
/// (no copy of the whole builder per step), and a graph or parameters the caller never sets
/// are only made, empty, when the context is built (a host that sets both allocates neither).
#[derive(Debug, Clone)]
pub struct AlignmentContextBuilder {
    job_name: Text,
    vertex_id: Text,
    vertex_name: Text,
    current: u32,
    target: u32,
    source_partitions: u32,
    max_parallelism: u32,
    lower_limit: u32,
    upper_limit: u32,
    input_ship_strategies: Ships,
    metrics: Vec<(String, EvaluatedMetric)>,
    metric_names: u64,
    topology: Option<Arc<JobTopology>>,
    params: Option<ModeParams>,
    subtask_loads: Option<Vec<SubtaskLoad>>,
}

/// Every part of a context at once, for a host that builds many of them from parts it keeps
/// and shares (SDK 0.1.3): [`AlignmentContext::from_parts`] makes the context in one step,
/// where the builder's chain of calls moves the whole builder from one call to the next.
/// Unlike the builder, it takes the parts as they are: the shared texts, strategies and graph
/// of [`AlignmentContextBuilder::shared_identity`],
/// [`AlignmentContextBuilder::shared_input_ship_strategies`] and
/// [`AlignmentContextBuilder::shared_topology`], and a [`MetricList`] as
/// [`AlignmentContextBuilder::metric_list`] takes it.
#[derive(Debug, Clone)]
pub struct ContextParts {
    /// The job's name.
    pub job: Arc<str>,
    /// The engine-assigned vertex id.
    pub vertex_id: Arc<str>,
    /// The vertex's human-readable name.
    pub vertex_name: Arc<str>,
    /// The parallelism the vertex runs at now.
    pub current: u32,
    /// The computed target.
    pub target: u32,
    /// The vertex's number of key groups.
    pub max_parallelism: u32,
    /// Partition count of a source (0: not a source, or unknown).
    pub source_partitions: u32,
    /// The lower parallelism limit.
    pub lower_limit: u32,
    /// The upper parallelism limit.
    pub upper_limit: u32,
    /// The ship strategies of the vertex's input edges.
    pub input_ship_strategies: Arc<[ShipStrategy]>,
    /// The vertex's evaluated metrics (sorted and numbered unless the list keeps a number).
    pub metrics: MetricList,
    /// The job graph.
    pub topology: Arc<JobTopology>,
    /// The selected mode's prefix-stripped parameters.
    pub params: ModeParams,
    /// The per-subtask load at the current parallelism; empty: not known.
    pub subtask_loads: Vec<SubtaskLoad>,
}

impl AlignmentContext {
    /// The context of `parts`: what the builder makes of the same parts, in one step (see
    /// [`ContextParts`]).
    #[inline]
    pub fn from_parts(parts: ContextParts) -> AlignmentContext {
        let (metrics, metric_names) = parts.metrics.into_numbered();
        AlignmentContext {
            current: parts.current,
            target: parts.target,
            source_partitions: parts.source_partitions,
            max_parallelism: parts.max_parallelism,
            lower_limit: parts.lower_limit,
            upper_limit: parts.upper_limit,
            input_ship_strategies: Ships::Shared(parts.input_ship_strategies),
            params: parts.params,
            serial: next_serial(),
            details: LazyDetails::ready_with(Details {
                job_name: Text::Shared(parts.job),
                vertex_id: Text::Shared(parts.vertex_id),
                vertex_name: Text::Shared(parts.vertex_name),
                metrics,
                metric_names,
                topology: parts.topology,
                subtask_loads: known_loads(parts.subtask_loads),
            }),
        }
    }
}

/// A per-subtask load as a context keeps it: an empty list means "not known" (`None`).
fn known_loads(loads: Vec<SubtaskLoad>) -> Option<Vec<SubtaskLoad>> {
    (!loads.is_empty()).then_some(loads)
}

impl AlignmentContextBuilder {
    /// Job, vertex id and vertex name.
    #[inline]
    pub fn identity(
        mut self,
        job: impl Into<String>,
        vertex_id: impl Into<String>,
        vertex_name: impl Into<String>,
    ) -> Self {
        self.job_name = Text::Owned(job.into());
        self.vertex_id = Text::Owned(vertex_id.into());
        self.vertex_name = Text::Owned(vertex_name.into());
        self
    }
    /// Job, vertex id and vertex name, shared with the vertex's other contexts: the host keeps
    /// them with the job and its graph and lends every context the same texts instead of a
    /// copy each (SDK 0.1.3).
    #[inline]
    pub fn shared_identity(
        mut self,
        job: Arc<str>,
        vertex_id: Arc<str>,
        vertex_name: Arc<str>,
    ) -> Self {
        self.job_name = Text::Shared(job);
        self.vertex_id = Text::Shared(vertex_id);
        self.vertex_name = Text::Shared(vertex_name);
        self
    }
    /// Partition count of a source (0: not a source, or unknown).
    #[inline]
    pub fn source_partitions(mut self, partitions: u32) -> Self {
        self.source_partitions = partitions;
        self
    }
    /// Lower and upper parallelism limits.
    #[inline]
    pub fn limits(mut self, lower: u32, upper: u32) -> Self {
        self.lower_limit = lower;
        self.upper_limit = upper;
        self
    }
    /// Input ship strategies.
    #[inline]
    pub fn input_ship_strategies(mut self, strategies: Vec<ShipStrategy>) -> Self {
        self.input_ship_strategies = Ships::Owned(strategies);
        self
    }
    /// Input ship strategies, shared with the vertex's other contexts: the host keeps them
    /// with the job graph and lends every context of the vertex the same list instead of a
    /// copy each (SDK 0.1.3).
    #[inline]
    pub fn shared_input_ship_strategies(mut self, strategies: Arc<[ShipStrategy]>) -> Self {
        self.input_ship_strategies = Ships::Shared(strategies);
        self
    }
    /// Evaluated metrics of the vertex (sorted by name here).
    #[inline]
    pub fn metrics(mut self, mut metrics: Vec<(String, EvaluatedMetric)>) -> Self {
        self.metric_names = crate::names::sort_and_number(&mut metrics);
        self.metrics = metrics;
        self
    }
    /// Evaluated metrics of the vertex, as a [`MetricList`]: one that kept the number of its
    /// names is taken as it is (its names are those of a context built before, sorted and
    /// distinct); any other is sorted and numbered as in [`AlignmentContextBuilder::metrics`]
    /// (SDK 0.1.3).
    #[inline]
    pub fn metric_list(mut self, list: MetricList) -> Self {
        (self.metrics, self.metric_names) = list.into_numbered();
        self
    }
    /// The job graph.
    #[inline]
    pub fn topology(mut self, topology: JobTopology) -> Self {
        self.topology = Some(Arc::new(topology));
        self
    }
    /// The job graph, shared with the other vertices' contexts of the same job: the host keeps
    /// one graph per job for as long as the job's graph does not change, instead of a copy per
    /// vertex (and the plugin side recognises it from one decision to the next, see
    /// [`crate::abi::context`]).
    #[inline]
    pub fn shared_topology(mut self, topology: Arc<JobTopology>) -> Self {
        self.topology = Some(topology);
        self
    }
    /// The selected mode's prefix-stripped parameters.
    #[inline]
    pub fn params(mut self, params: ModeParams) -> Self {
        self.params = Some(params);
        self
    }
    /// The per-subtask load of the vertex at the current parallelism, subtask `i` at index `i`.
    /// An empty list means "not known" and reads back as `None`.
    #[inline]
    pub fn subtask_loads(mut self, loads: Vec<SubtaskLoad>) -> Self {
        self.subtask_loads = known_loads(loads);
        self
    }
    /// Freezes the context.
    #[inline]
    pub fn build(self) -> AlignmentContext {
        AlignmentContext {
            current: self.current,
            target: self.target,
            source_partitions: self.source_partitions,
            max_parallelism: self.max_parallelism,
            lower_limit: self.lower_limit,
            upper_limit: self.upper_limit,
            input_ship_strategies: self.input_ship_strategies,
            params: self.params.unwrap_or_default(),
            serial: next_serial(),
            details: LazyDetails::ready_with(Details {
                job_name: self.job_name,
                vertex_id: self.vertex_id,
                vertex_name: self.vertex_name,
                metrics: self.metrics,
                metric_names: self.metric_names,
                topology: self.topology.unwrap_or_else(empty_topology),
                subtask_loads: self.subtask_loads,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_quantities_follow_the_contract() {
        let ctx = AlignmentContext::builder(16, 24, 128)
            .limits(1, 200)
            .build();
        assert_eq!(ctx.partitions_or_key_groups(), 128);
        assert_eq!(ctx.alignment_cap(), 128);
        assert!(ctx.is_scale_up());
        assert!(!ctx.default_applicable());

        let src = AlignmentContext::builder(100, 180, 180)
            .source_partitions(15)
            .limits(1, 200)
            .build();
        assert_eq!(src.partitions_or_key_groups(), 15);
        assert_eq!(src.alignment_cap(), 15);
        assert!(src.default_applicable());
    }

    #[test]
    fn a_context_can_be_shared_across_threads_and_seen_after_a_panic() {
        fn send_and_sync<T: Send + Sync + std::panic::RefUnwindSafe + std::panic::UnwindSafe>() {}
        send_and_sync::<AlignmentContext>();
    }

    fn value(x: f64) -> EvaluatedMetric {
        EvaluatedMetric {
            current: x,
            average: x,
        }
    }

    #[test]
    fn a_refilled_list_keeps_its_number_only_with_the_same_names() {
        let mut metrics = vec![
            ("LAG".to_string(), value(1.0)),
            ("LOAD".to_string(), value(2.0)),
        ];
        let number = crate::names::sort_and_number(&mut metrics);
        let mut list = MetricList::numbered(metrics, number);
        list.refill([("LAG", value(3.0)), ("LOAD", value(4.0))]);
        assert_eq!(list.names, number);
        assert_eq!(list[1].1, value(4.0));
        for other in [
            vec![("LAG", value(1.0))],
            vec![
                ("LAG", value(1.0)),
                ("LOAD", value(1.0)),
                ("RATE", value(1.0)),
            ],
            vec![("LAG", value(1.0)), ("LOADS", value(1.0))],
        ] {
            let mut list = MetricList::numbered(list.to_vec(), number);
            list.refill(other.iter().copied());
            assert_eq!(list.names, 0, "{other:?}");
            let names: Vec<&str> = list.iter().map(|(n, _)| n.as_str()).collect();
            let wanted: Vec<&str> = other.iter().map(|(n, _)| *n).collect();
            assert_eq!(names, wanted);
        }
        assert_eq!(MetricList::from(list.to_vec()).names, 0);
    }

    #[test]
    fn values_refilled_alone_keep_the_names_and_their_number() {
        let v = |x: f64| EvaluatedMetric {
            current: x,
            average: x,
        };
        let ctx = AlignmentContext::builder(1, 2, 8)
            .metrics(vec![("A".to_string(), v(1.0)), ("B".to_string(), v(2.0))])
            .build();
        let mut list = ctx.into_metric_list();
        let number = list.names_number();
        assert_ne!(number, 0);
        assert!(list.refill_values([v(3.0), v(4.0)]));
        assert_eq!(list.names_number(), number);
        assert_eq!(
            list.to_vec(),
            vec![("A".to_string(), v(3.0)), ("B".to_string(), v(4.0))]
        );
        assert!(!list.refill_values([v(5.0)]));
        assert!(!list.refill_values([v(5.0), v(6.0), v(7.0)]));
        assert_eq!(list.names_number(), number);
        assert_eq!(list[0].0, "A");
    }

    #[test]
    fn a_shared_identity_reads_as_an_owned_one() {
        let owned = AlignmentContext::builder(2, 4, 128)
            .identity("job", "v1", "map")
            .build();
        let shared = AlignmentContext::builder(2, 4, 128)
            .shared_identity("job".into(), "v1".into(), "map".into())
            .build();
        assert_eq!(
            (shared.job_name(), shared.vertex_id(), shared.vertex_name()),
            ("job", "v1", "map")
        );
        assert_eq!(format!("{shared:?}"), format!("{owned:?}"));
        let mut kept = shared.details.get().vertex_id.clone();
        kept.owned_mut().push('x');
        assert_eq!(kept.as_str(), "x");
    }

    #[test]
    fn a_context_from_parts_is_the_one_the_builder_makes_of_them() {
        let ships: Arc<[ShipStrategy]> = Arc::from([ShipStrategy::Hash]);
        let topology = Arc::new(JobTopology {
            vertices: vec![TopologyVertex {
                id: "v1".into(),
                name: "map".into(),
                parallelism: 2,
                max_parallelism: 128,
                source_partitions: 0,
            }],
            edges: Vec::new(),
        });
        let params = ModeParams::new("m", [("k".to_string(), "v".to_string())].into());
        let loads = vec![SubtaskLoad {
            busy_ratio: Some(0.5),
            records_in_per_second: None,
        }];
        // Unsorted, with a repeated name: both sort them and keep the first.
        let metrics = vec![
            ("B".to_string(), value(2.0)),
            ("A".to_string(), value(1.0)),
            ("B".to_string(), value(3.0)),
        ];
        let built = AlignmentContext::builder(2, 5, 128)
            .shared_identity("job".into(), "v1".into(), "map".into())
            .source_partitions(7)
            .limits(1, 40)
            .shared_input_ship_strategies(Arc::clone(&ships))
            .metrics(metrics.clone())
            .shared_topology(Arc::clone(&topology))
            .params(params.clone())
            .subtask_loads(loads.clone())
            .build();
        let parts = ContextParts {
            job: "job".into(),
            vertex_id: "v1".into(),
            vertex_name: "map".into(),
            current: 2,
            target: 5,
            max_parallelism: 128,
            source_partitions: 7,
            lower_limit: 1,
            upper_limit: 40,
            input_ship_strategies: ships,
            metrics: MetricList::from(metrics),
            topology,
            params,
            subtask_loads: loads,
        };
        let from_parts = AlignmentContext::from_parts(parts.clone());
        assert_eq!(format!("{from_parts:?}"), format!("{built:?}"));
        assert_eq!(
            from_parts.details.get().metric_names,
            built.details.get().metric_names
        );
        assert_ne!(
            from_parts.serial, built.serial,
            "each context has its own serial"
        );
        // No per-subtask load reads as none, as with the builder.
        let without = AlignmentContext::from_parts(ContextParts {
            subtask_loads: Vec::new(),
            ..parts
        });
        assert_eq!(without.subtask_loads(), None);
        // Its metric list comes back with the number of its names.
        let number = without.details.get().metric_names;
        let list = without.into_metric_list();
        assert_eq!(list.names_number(), number);
        assert_eq!(list.len(), 2);
    }

    #[test]
    fn shared_strategies_read_as_owned_ones() {
        let ships = [ShipStrategy::Hash, ShipStrategy::Custom { buckets: 48 }];
        let owned = AlignmentContext::builder(2, 4, 128)
            .input_ship_strategies(ships.to_vec())
            .build();
        let shared = AlignmentContext::builder(2, 4, 128)
            .shared_input_ship_strategies(Arc::from(ships))
            .build();
        assert_eq!(shared.input_ship_strategies(), &ships);
        assert!(shared.has_hash_input() && shared.default_applicable());
        assert_eq!(format!("{shared:?}"), format!("{owned:?}"));
        let mut kept = shared.input_ship_strategies.clone();
        kept.owned_mut().push(ShipStrategy::Forward);
        assert_eq!(kept.as_slice(), &[ShipStrategy::Forward]);
    }

    #[test]
    fn metric_lookup_by_name() {
        let ctx = AlignmentContext::builder(1, 2, 8)
            .metrics(vec![
                (
                    "LOAD".into(),
                    EvaluatedMetric {
                        current: 0.5,
                        average: 0.4,
                    },
                ),
                (
                    "LAG".into(),
                    EvaluatedMetric {
                        current: 3.0,
                        average: f64::NAN,
                    },
                ),
            ])
            .build();
        assert_eq!(ctx.metric("LOAD").map(|m| m.average), Some(0.4));
        assert_eq!(ctx.metric("LAG").map(|m| m.current), Some(3.0));
        assert!(ctx.metric("NOPE").is_none());
    }

    #[test]
    fn metrics_are_sorted_and_deduplicated_whatever_their_order() {
        let m = |name: &str, x: f64| {
            (
                name.to_string(),
                EvaluatedMetric {
                    current: x,
                    average: x,
                },
            )
        };
        // Sorted and distinct: kept as is.
        let ctx = AlignmentContext::builder(1, 2, 8)
            .metrics(vec![m("A", 1.0), m("B", 2.0)])
            .build();
        assert_eq!(ctx.metrics(), &[m("A", 1.0), m("B", 2.0)]);
        // Sorted with a duplicate: the first of equal names stays.
        let ctx = AlignmentContext::builder(1, 2, 8)
            .metrics(vec![m("A", 1.0), m("A", 5.0), m("B", 2.0)])
            .build();
        assert_eq!(ctx.metrics(), &[m("A", 1.0), m("B", 2.0)]);
        // Unsorted.
        let ctx = AlignmentContext::builder(1, 2, 8)
            .metrics(vec![m("C", 3.0), m("A", 1.0), m("B", 2.0)])
            .build();
        assert_eq!(ctx.metrics(), &[m("A", 1.0), m("B", 2.0), m("C", 3.0)]);
    }
}
