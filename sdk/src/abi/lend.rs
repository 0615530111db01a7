//! How an [`EvaluatorContext`] and an [`ExecutorContext`] cross the boundary (SDK 0.1.3): as
//! the alignment context does (`context.rs`), an opaque pointer to the host's value and an
//! append-only table of `extern "C"` accessors that starts with its own size. A new piece of
//! context is a new accessor at the end of its table, read by the plugin side only when the
//! host's table is long enough (a default otherwise); the `Ffi*` records never change.
//!
//! What both kinds see alike, the job graph and the instance's parameters, has a table of its
//! own ([`SharedVTable`]); `validate` is lent that table alone, with an empty graph.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;
use std::mem::{offset_of, size_of};
use std::sync::{Arc, OnceLock};

use super::context::{
    FfiEdge, FfiMetric, FfiParam, FfiStr, FfiVertex, LentGraphRef, assign, copy_graph, graph_is,
    refill_metrics, refresh_params,
};
use super::generation::GraphGeneration;
use crate::context::JobTopology;
use crate::evaluator::{EvaluatedList, EvaluatedVertex, EvaluatorContext, Identity};
use crate::executor::{ExecutorContext, ScalingSummary};
use crate::lent::LentSource;
use crate::params::{EVALUATOR_KEY, EXECUTOR_KEY, ModeParams};
use crate::shared::{KindShared, LentGraph};

type Data = *const c_void;

/// Accessors of what every kind sees: the job graph and the instance's parameters.
/// Append-only.
#[repr(C)]
pub struct SharedVTable {
    /// `size_of::<SharedVTable>()` in the host that built it.
    pub size: usize,
    vertex_count: unsafe extern "C" fn(Data) -> usize,
    vertex: unsafe extern "C" fn(Data, usize) -> FfiVertex,
    edge_count: unsafe extern "C" fn(Data) -> usize,
    edge: unsafe extern "C" fn(Data, usize) -> FfiEdge,
    instance_name: unsafe extern "C" fn(Data) -> FfiStr,
    param_count: unsafe extern "C" fn(Data) -> usize,
    param: unsafe extern "C" fn(Data, usize) -> FfiParam,
    // ---- SDK 0.1.3 ends here.
    /// SDK 0.1.4: the generation of the job graph (see `generation.rs`): equal generations are
    /// equal graphs; 0 when unknown.
    topology_generation: unsafe extern "C" fn(Data) -> u64,
    // ---- SDK 0.1.4 ends here.
    /// SDK 0.1.5: the number of the parameters (see `ModeParams`): equal numbers are equal
    /// parameters; 0 when unknown.
    params_number: unsafe extern "C" fn(Data) -> u64,
    // Fields added in later SDK releases go here, each read behind `has`.
}

/// The graph and parameters as they cross the boundary. Frozen.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct SharedRef {
    data: Data,
    vtable: *const SharedVTable,
}

/// Accessors of an [`EvaluatorContext`]. Append-only.
#[repr(C)]
pub struct EvaluatorVTable {
    /// `size_of::<EvaluatorVTable>()` in the host that built it.
    pub size: usize,
    job_name: unsafe extern "C" fn(Data) -> FfiStr,
    vertex_id: unsafe extern "C" fn(Data) -> FfiStr,
    vertex_name: unsafe extern "C" fn(Data) -> FfiStr,
    metric_count: unsafe extern "C" fn(Data) -> usize,
    metric: unsafe extern "C" fn(Data, usize) -> FfiMetric,
    evaluated_count: unsafe extern "C" fn(Data) -> usize,
    evaluated_id: unsafe extern "C" fn(Data, usize) -> FfiStr,
    evaluated_metric_count: unsafe extern "C" fn(Data, usize) -> usize,
    evaluated_metric: unsafe extern "C" fn(Data, usize, usize) -> FfiMetric,
    backlog: unsafe extern "C" fn(Data) -> u8,
    // ---- SDK 0.1.3 ends here.
    /// SDK 0.1.4: the number of the vertex's list of metric names (see `names.rs`): equal
    /// numbers are equal names in the same order; 0 when unknown.
    metric_names: unsafe extern "C" fn(Data) -> u64,
    /// SDK 0.1.4: the number of the list of vertices evaluated before (see `EvaluatedList`):
    /// a list keeps its number only while it grows at its end; 0 when unknown.
    evaluated_serial: unsafe extern "C" fn(Data) -> u64,
    // ---- SDK 0.1.4 ends here.
    /// SDK 0.1.5: writes the values of the vertex's first `len` metrics (in the order of
    /// `metric`) to the `len` places at `out`, at most as many as there are, and returns how
    /// many metrics the vertex has: one call instead of one per metric when the plugin side
    /// already holds the names (their number is the kept one).
    metric_values: unsafe extern "C" fn(Data, *mut FfiValues, usize) -> usize,
    // Fields added in later SDK releases go here, each read behind `has`.
}

/// The values of one evaluated metric, without its name (SDK 0.1.5). Frozen.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FfiValues {
    current: f64,
    average: f64,
}

/// An evaluator's context as it crosses the boundary. Frozen.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct EvaluatorRef {
    data: Data,
    vtable: *const EvaluatorVTable,
    shared: SharedRef,
}

/// Accessors of an [`ExecutorContext`]. Append-only.
#[repr(C)]
pub struct ExecutorVTable {
    /// `size_of::<ExecutorVTable>()` in the host that built it.
    pub size: usize,
    job_name: unsafe extern "C" fn(Data) -> FfiStr,
    summary_count: unsafe extern "C" fn(Data) -> usize,
    summary_vertex: unsafe extern "C" fn(Data, usize) -> FfiStr,
    summary_parallelism: unsafe extern "C" fn(Data, usize) -> FfiSteps,
    summary_metric_count: unsafe extern "C" fn(Data, usize) -> usize,
    summary_metric: unsafe extern "C" fn(Data, usize, usize) -> FfiMetric,
    now_ms: unsafe extern "C" fn(Data) -> i64,
    restart_time_ms: unsafe extern "C" fn(Data) -> u64,
}

/// The parallelism of a summary's vertex now and after the operation. Frozen.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct FfiSteps {
    current: u32,
    new: u32,
}

/// An executor's context as it crosses the boundary. Frozen.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ExecutorRef {
    data: Data,
    vtable: *const ExecutorVTable,
    shared: SharedRef,
}

// ---- Host side.

/// The graph and parameters lent for one call.
pub(super) struct LentShared<'a> {
    topology: &'a Arc<JobTopology>,
    params: &'a ModeParams,
}

impl<'a> LentShared<'a> {
    /// Parameters alone (for `validate`), with an empty graph.
    pub(super) fn params(params: &'a ModeParams) -> LentShared<'a> {
        static EMPTY: OnceLock<Arc<JobTopology>> = OnceLock::new();
        LentShared {
            topology: EMPTY.get_or_init(Arc::default),
            params,
        }
    }

    fn of(shared: &'a KindShared) -> LentShared<'a> {
        LentShared {
            topology: shared.graph(),
            params: &shared.params,
        }
    }

    /// Valid while `self` is.
    pub(super) fn lend(&self) -> SharedRef {
        SharedRef {
            data: (self as *const LentShared<'_>).cast(),
            vtable: &HOST_SHARED,
        }
    }
}

fn shared<'a>(d: Data) -> &'a LentShared<'a> {
    // SAFETY: `d` comes from `LentShared::lend`, live for the call it is lent to.
    unsafe { &*d.cast::<LentShared<'_>>() }
}

unsafe extern "C" fn vertex_count(d: Data) -> usize {
    shared(d).topology.vertices.len()
}
unsafe extern "C" fn vertex(d: Data, i: usize) -> FfiVertex {
    FfiVertex::lend(shared(d).topology.vertices.get(i))
}
unsafe extern "C" fn edge_count(d: Data) -> usize {
    shared(d).topology.edges.len()
}
unsafe extern "C" fn edge(d: Data, i: usize) -> FfiEdge {
    FfiEdge::lend(shared(d).topology.edges.get(i))
}
unsafe extern "C" fn instance_name(d: Data) -> FfiStr {
    FfiStr::new(shared(d).params.mode_name())
}
unsafe extern "C" fn param_count(d: Data) -> usize {
    shared(d).params.len()
}
unsafe extern "C" fn param(d: Data, i: usize) -> FfiParam {
    FfiParam::lend(shared(d).params.iter().nth(i))
}
unsafe extern "C" fn topology_generation(d: Data) -> u64 {
    GraphGeneration::of(shared(d).topology)
}
unsafe extern "C" fn params_number(d: Data) -> u64 {
    shared(d).params.number()
}

static HOST_SHARED: SharedVTable = SharedVTable {
    size: size_of::<SharedVTable>(),
    vertex_count,
    vertex,
    edge_count,
    edge,
    instance_name,
    param_count,
    param,
    topology_generation,
    params_number,
};

/// An evaluator's context lent for one call.
pub(super) struct LentEvaluator<'a> {
    ctx: &'a EvaluatorContext,
    shared: LentShared<'a>,
}

impl<'a> LentEvaluator<'a> {
    pub(super) fn new(ctx: &'a EvaluatorContext) -> LentEvaluator<'a> {
        LentEvaluator {
            ctx,
            shared: LentShared::of(&ctx.shared),
        }
    }

    /// Valid while `self` is.
    pub(super) fn lend(&self) -> EvaluatorRef {
        EvaluatorRef {
            data: (self.ctx as *const EvaluatorContext).cast(),
            vtable: &HOST_EVALUATOR,
            shared: self.shared.lend(),
        }
    }
}

fn eval<'a>(d: Data) -> &'a EvaluatorContext {
    // SAFETY: `d` comes from `LentEvaluator::lend`, live for the call it is lent to.
    unsafe { &*d.cast::<EvaluatorContext>() }
}

fn metric_of(metrics: &[(String, crate::EvaluatedMetric)], i: usize) -> FfiMetric {
    FfiMetric::lend(metrics.get(i).map(|(n, m)| (n.as_str(), m)))
}

unsafe extern "C" fn e_job_name(d: Data) -> FfiStr {
    FfiStr::new(eval(d).job_name())
}
unsafe extern "C" fn e_vertex_id(d: Data) -> FfiStr {
    FfiStr::new(eval(d).vertex_id())
}
unsafe extern "C" fn e_vertex_name(d: Data) -> FfiStr {
    FfiStr::new(eval(d).vertex_name())
}
unsafe extern "C" fn e_metric_count(d: Data) -> usize {
    eval(d).metrics().len()
}
unsafe extern "C" fn e_metric(d: Data, i: usize) -> FfiMetric {
    metric_of(eval(d).metrics(), i)
}
unsafe extern "C" fn e_evaluated_count(d: Data) -> usize {
    eval(d).evaluated().len()
}
unsafe extern "C" fn e_evaluated_id(d: Data, i: usize) -> FfiStr {
    FfiStr::new(eval(d).evaluated().get(i).map_or("", |v| &v.vertex_id))
}
unsafe extern "C" fn e_evaluated_metric_count(d: Data, i: usize) -> usize {
    eval(d).evaluated().get(i).map_or(0, |v| v.metrics.len())
}
unsafe extern "C" fn e_evaluated_metric(d: Data, i: usize, j: usize) -> FfiMetric {
    metric_of(eval(d).evaluated().get(i).map_or(&[], |v| &v.metrics), j)
}
unsafe extern "C" fn e_backlog(d: Data) -> u8 {
    u8::from(eval(d).is_processing_backlog())
}
unsafe extern "C" fn e_metric_names(d: Data) -> u64 {
    eval(d).metrics.names_number()
}
unsafe extern "C" fn e_evaluated_serial(d: Data) -> u64 {
    eval(d).evaluated.get().serial
}
unsafe extern "C" fn e_metric_values(d: Data, out: *mut FfiValues, len: usize) -> usize {
    let metrics = eval(d).metrics();
    if !out.is_null() {
        for (i, (_, m)) in metrics.iter().take(len).enumerate() {
            let values = FfiValues {
                current: m.current,
                average: m.average,
            };
            // SAFETY: the caller gives `len` places at `out`, and `i < len`.
            unsafe { out.add(i).write(values) };
        }
    }
    metrics.len()
}

static HOST_EVALUATOR: EvaluatorVTable = EvaluatorVTable {
    size: size_of::<EvaluatorVTable>(),
    job_name: e_job_name,
    vertex_id: e_vertex_id,
    vertex_name: e_vertex_name,
    metric_count: e_metric_count,
    metric: e_metric,
    evaluated_count: e_evaluated_count,
    evaluated_id: e_evaluated_id,
    evaluated_metric_count: e_evaluated_metric_count,
    evaluated_metric: e_evaluated_metric,
    backlog: e_backlog,
    metric_names: e_metric_names,
    evaluated_serial: e_evaluated_serial,
    metric_values: e_metric_values,
};

/// An executor's context lent for one call.
pub(super) struct LentExecutor<'a> {
    ctx: &'a ExecutorContext,
    shared: LentShared<'a>,
}

impl<'a> LentExecutor<'a> {
    pub(super) fn new(ctx: &'a ExecutorContext) -> LentExecutor<'a> {
        LentExecutor {
            ctx,
            shared: LentShared::of(&ctx.shared),
        }
    }

    /// Valid while `self` is.
    pub(super) fn lend(&self) -> ExecutorRef {
        ExecutorRef {
            data: (self.ctx as *const ExecutorContext).cast(),
            vtable: &HOST_EXECUTOR,
            shared: self.shared.lend(),
        }
    }
}

fn exec<'a>(d: Data) -> &'a ExecutorContext {
    // SAFETY: `d` comes from `LentExecutor::lend`, live for the call it is lent to.
    unsafe { &*d.cast::<ExecutorContext>() }
}

unsafe extern "C" fn x_job_name(d: Data) -> FfiStr {
    FfiStr::new(exec(d).job_name())
}
unsafe extern "C" fn x_summary_count(d: Data) -> usize {
    exec(d).summaries().len()
}
unsafe extern "C" fn x_summary_vertex(d: Data, i: usize) -> FfiStr {
    FfiStr::new(exec(d).summaries().get(i).map_or("", |s| &s.vertex_id))
}
unsafe extern "C" fn x_summary_parallelism(d: Data, i: usize) -> FfiSteps {
    exec(d)
        .summaries()
        .get(i)
        .map_or(FfiSteps::default(), |s| FfiSteps {
            current: s.current_parallelism,
            new: s.new_parallelism,
        })
}
unsafe extern "C" fn x_summary_metric_count(d: Data, i: usize) -> usize {
    exec(d).summaries().get(i).map_or(0, |s| s.metrics.len())
}
unsafe extern "C" fn x_summary_metric(d: Data, i: usize, j: usize) -> FfiMetric {
    metric_of(exec(d).summaries().get(i).map_or(&[], |s| &s.metrics), j)
}
unsafe extern "C" fn x_now_ms(d: Data) -> i64 {
    exec(d).now_ms()
}
unsafe extern "C" fn x_restart_time_ms(d: Data) -> u64 {
    exec(d).restart_time_ms()
}

static HOST_EXECUTOR: ExecutorVTable = ExecutorVTable {
    size: size_of::<ExecutorVTable>(),
    job_name: x_job_name,
    summary_count: x_summary_count,
    summary_vertex: x_summary_vertex,
    summary_parallelism: x_summary_parallelism,
    summary_metric_count: x_summary_metric_count,
    summary_metric: x_summary_metric,
    now_ms: x_now_ms,
    restart_time_ms: x_restart_time_ms,
};

// ---- Plugin side.

/// True when a table of `size` bytes holds the accessor at `offset`.
fn has(size: usize, offset: usize) -> bool {
    offset + size_of::<usize>() <= size
}

/// Plugin side: the parameters lent to `validate`.
///
/// # Safety
/// `r` must be lent by the host for the call that is running.
pub(super) unsafe fn rebuild_params(r: SharedRef, family: &'static str) -> ModeParams {
    // SAFETY: per the contract; every accessor of the first table exists in every host that
    // lends one (the table was born with them), which `has` checks against corruption.
    unsafe {
        let vt = &*r.vtable;
        let d = r.data;
        let mut params = ModeParams::under(family, "", BTreeMap::new());
        if has(vt.size, offset_of!(SharedVTable, param)) {
            refresh_params(
                &mut params,
                family,
                (vt.instance_name)(d),
                (vt.param_count)(d),
                |i| (vt.param)(d, i),
            );
        }
        params
    }
}

/// Brings `kept` up to date with the lent graph and parameters `r`: the parameters now
/// (compared, not copied, when they are those kept), the graph when the plugin first reads it
/// (see [`fill_graph`]).
///
/// # Safety
/// `r` must be lent by the host for the call that is running.
unsafe fn refresh_shared(kept: &mut KindShared, r: SharedRef, family: &'static str) {
    // SAFETY: per the contract.
    unsafe {
        let vt = &*r.vtable;
        let d = r.data;
        if !has(vt.size, offset_of!(SharedVTable, param)) {
            kept.params = ModeParams::under(family, "", BTreeMap::new());
            kept.params_lent = 0;
            kept.topology = Default::default();
            return;
        }
        // SDK 0.1.5: a host that numbers its parameters says when they are those kept.
        let number = if has(vt.size, offset_of!(SharedVTable, params_number)) {
            (vt.params_number)(d)
        } else {
            0
        };
        if number == 0 || number != kept.params_lent {
            refresh_params(
                &mut kept.params,
                family,
                (vt.instance_name)(d),
                (vt.param_count)(d),
                |i| (vt.param)(d, i),
            );
            kept.params_lent = number;
        }
        kept.topology.lend(LentSource {
            lent: d,
            table: r.vtable.cast(),
            fill: fill_graph,
        });
    }
}

/// How many graphs one thread keeps by generation (see [`fill_graph`]): as many as the jobs
/// of a large fleet, whose cycles come one after the other; past it the thread starts over.
const KEPT_GRAPHS: usize = 16_384;

thread_local! {
    /// The graphs this thread copied, by the host's generation of them.
    static GRAPHS: RefCell<HashMap<u64, Arc<JobTopology>>> = RefCell::new(HashMap::new());
}

/// Makes `graph` the lent job graph (`d` with its [`SharedVTable`] `table`): kept as it is when
/// the host's generation says it is the same graph, taken from the graphs this thread copied
/// before by generation, or compared and copied only when it differs.
///
/// # Safety
/// `d` and `table` are those of a [`SharedRef`] lent for a call that is still running.
unsafe fn fill_graph(graph: &mut LentGraph, d: Data, table: Data) {
    // SAFETY: per the contract.
    unsafe {
        let vt = &*table.cast::<SharedVTable>();
        let generation = if has(vt.size, offset_of!(SharedVTable, topology_generation)) {
            (vt.topology_generation)(d)
        } else {
            0
        };
        if generation != 0 && generation == graph.generation {
            return;
        }
        graph.generation = 0;
        if generation != 0 {
            let kept = GRAPHS.with(|g| g.borrow().get(&generation).cloned());
            if let Some(kept) = kept {
                *graph = LentGraph {
                    graph: kept,
                    generation,
                };
                return;
            }
        }
        let vertex = |i| (vt.vertex)(d, i);
        let edge = |i| (vt.edge)(d, i);
        let lent = || LentGraphRef {
            vertex_count: (vt.vertex_count)(d),
            vertex: &vertex,
            edge_count: (vt.edge_count)(d),
            edge: &edge,
        };
        if !graph_is(&graph.graph, lent()) {
            graph.graph = Arc::new(copy_graph(lent()));
        }
        if generation != 0 {
            GRAPHS.with(|g| {
                let mut g = g.borrow_mut();
                if g.len() >= KEPT_GRAPHS {
                    g.clear();
                }
                g.insert(generation, Arc::clone(&graph.graph));
            });
            graph.generation = generation;
        }
    }
}

thread_local! {
    /// The evaluator context of the last call this thread served, brought up to date in place
    /// for the next one (see [`with_lent_evaluator`]).
    static KEPT_EVALUATOR: RefCell<Option<EvaluatorContext>> = const { RefCell::new(None) };
    /// The same for executors.
    static KEPT_EXECUTOR: RefCell<Option<ExecutorContext>> = const { RefCell::new(None) };
}

/// Runs `f` on the context kept in `slot`, brought up to date by `refresh` (or, for a call
/// from inside a call, on a fresh one that `fresh` makes).
fn with_kept<C, R>(
    slot: &'static std::thread::LocalKey<RefCell<Option<C>>>,
    fresh: fn() -> C,
    refresh: impl FnOnce(&mut C),
    f: impl FnOnce(&C) -> R,
) -> R {
    slot.with(|kept| {
        let Ok(mut kept) = kept.try_borrow_mut() else {
            let mut ctx = fresh();
            refresh(&mut ctx);
            return f(&ctx);
        };
        let ctx = kept.get_or_insert_with(fresh);
        refresh(ctx);
        f(ctx)
    })
}

/// Plugin side: runs `f` on the lent evaluator context as an owned [`EvaluatorContext`].
///
/// The host calls an evaluator for a job's vertices one after the other with the same job,
/// graph and parameters, the same metric names and a list of vertices evaluated before that
/// grows by one each time: instead of copying all of it per call, the context of this thread's
/// previous call is brought up to date in place. The identity, metrics, backlog and parameters
/// at once, compared rather than copied (only the values when the host's number says the names
/// are those kept); the job graph and the vertices evaluated before when the evaluator first
/// reads them (many never do), the graph taken from this thread's copies by its generation and
/// only the vertices added since the last call copied.
///
/// # Safety
/// `r` must be lent by the host for the call that is running.
pub(super) unsafe fn with_lent_evaluator<R>(
    r: EvaluatorRef,
    f: impl FnOnce(&EvaluatorContext) -> R,
) -> R {
    let fresh = || {
        let mut ctx = EvaluatorContext::new(String::new(), String::new(), Vec::new());
        // Numbered by no list of the host's yet.
        ctx.evaluated = Default::default();
        ctx
    };
    // SAFETY: per the contract.
    with_kept(
        &KEPT_EVALUATOR,
        fresh,
        |ctx| unsafe { refresh_evaluator(ctx, r) },
        f,
    )
}

/// Makes `ctx` the lent evaluator context `r`, in place (see [`with_lent_evaluator`]).
///
/// # Safety
/// As for [`with_lent_evaluator`]; the lazy parts are read from `r` later, during the same call.
unsafe fn refresh_evaluator(ctx: &mut EvaluatorContext, r: EvaluatorRef) {
    // SAFETY: per the contract.
    unsafe {
        refresh_shared(&mut ctx.shared, r.shared, EVALUATOR_KEY);
        let vt = &*r.vtable;
        let d = r.data;
        if !has(vt.size, offset_of!(EvaluatorVTable, backlog)) {
            ctx.identity = Default::default();
            ctx.metrics.refill([]);
            ctx.evaluated = Default::default();
            ctx.backlog = false;
            return;
        }
        ctx.identity.lend(LentSource {
            lent: d,
            table: r.vtable.cast(),
            fill: fill_identity,
        });
        let names = if has(vt.size, offset_of!(EvaluatorVTable, metric_names)) {
            (vt.metric_names)(d)
        } else {
            0
        };
        let count = (vt.metric_count)(d);
        let (metrics, number) = ctx.metrics.parts_mut();
        if names != 0 && names != *number {
            take_kept_names(metrics, number, names);
        }
        // The names kept: their values in one call when the host's table has it (SDK 0.1.5).
        let values_only = names != 0
            && names == *number
            && count == metrics.len()
            && has(vt.size, offset_of!(EvaluatorVTable, metric_values))
            && copy_values(metrics, |out, len| (vt.metric_values)(d, out, len));
        if !values_only {
            refill_metrics(metrics, number, count, names, |i| (vt.metric)(d, i));
        }
        ctx.backlog = (vt.backlog)(d) != 0;
        ctx.evaluated.lend(LentSource {
            lent: d,
            table: r.vtable.cast(),
            fill: fill_evaluated,
        });
    }
}

/// How many lists of metric names the plugin side keeps besides its context's: the vertices of
/// a job take turns with a few lists (a source has metrics the operators after it have not).
const KEPT_NAMES: usize = 4;

/// A metric list as the plugin side keeps it.
type Metrics = Vec<(String, crate::EvaluatedMetric)>;

thread_local! {
    /// The metric lists this thread's evaluator context held before, with the host's number
    /// of their names (never 0), the most recent last.
    static SPARE_NAMES: RefCell<Vec<(Metrics, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Makes `metrics` (whose names have the number `number`) a list whose names have the lent
/// number `names` when this thread kept one, so that only the values are read; otherwise the
/// buffers of the oldest kept list, to refill. The list it held is kept in turn.
fn take_kept_names(metrics: &mut Metrics, number: &mut u64, names: u64) {
    let _ = SPARE_NAMES.try_with(|spare| {
        let Ok(mut spare) = spare.try_borrow_mut() else {
            return;
        };
        let at = match spare.iter().rposition(|(_, n)| *n == names) {
            Some(at) => at,
            None if spare.len() < KEPT_NAMES => {
                if *number != 0 {
                    spare.push((std::mem::take(metrics), *number));
                    *number = 0;
                }
                return;
            }
            None => 0,
        };
        let (kept, kept_number) = &mut spare[at];
        std::mem::swap(metrics, kept);
        std::mem::swap(number, kept_number);
        let taken = spare.remove(at);
        if taken.1 != 0 {
            spare.push(taken);
        }
    });
}

/// How many values [`copy_values`] takes in one call; a vertex with more metrics has them
/// read one by one.
const VALUES_AT_ONCE: usize = 32;

/// Writes the values `read` gives (into the places it is given, returning how many metrics
/// there are) into the places of the kept `metrics`, in order; false, with nothing written,
/// when the count is not theirs or there are more than [`VALUES_AT_ONCE`].
fn copy_values(
    metrics: &mut [(String, crate::EvaluatedMetric)],
    read: impl FnOnce(*mut FfiValues, usize) -> usize,
) -> bool {
    let len = metrics.len();
    if len > VALUES_AT_ONCE {
        return false;
    }
    let mut values = [std::mem::MaybeUninit::<FfiValues>::uninit(); VALUES_AT_ONCE];
    if read(values.as_mut_ptr().cast(), len) != len {
        return false;
    }
    for ((_, kept), value) in metrics.iter_mut().zip(&values) {
        // SAFETY: `read` wrote the first `len` places (as many as it says there are metrics).
        let value = unsafe { value.assume_init() };
        *kept = crate::EvaluatedMetric {
            current: value.current,
            average: value.average,
        };
    }
    true
}

/// Makes `identity` the lent job and vertex (`d` with its [`EvaluatorVTable`] `table`), each
/// compared rather than copied when it is the one kept.
///
/// # Safety
/// `d` and `table` are those of an [`EvaluatorRef`] lent for a call that is still running.
unsafe fn fill_identity(identity: &mut Identity, d: Data, table: Data) {
    // SAFETY: per the contract.
    unsafe {
        let vt = &*table.cast::<EvaluatorVTable>();
        let _ = assign(&mut identity.job, (vt.job_name)(d));
        let _ = assign(&mut identity.vertex_id, (vt.vertex_id)(d));
        let _ = assign(&mut identity.vertex_name, (vt.vertex_name)(d));
    }
}

/// Makes `list` the lent vertices evaluated before (`d` with its [`EvaluatorVTable`] `table`):
/// when the host's number says the lent list is the kept one grown at its end, only the
/// vertices added since are copied; otherwise all of them.
///
/// # Safety
/// `d` and `table` are those of an [`EvaluatorRef`] lent for a call that is still running.
unsafe fn fill_evaluated(list: &mut EvaluatedList, d: Data, table: Data) {
    // SAFETY: per the contract.
    unsafe {
        let vt = &*table.cast::<EvaluatorVTable>();
        let serial = if has(vt.size, offset_of!(EvaluatorVTable, evaluated_serial)) {
            (vt.evaluated_serial)(d)
        } else {
            0
        };
        let count = (vt.evaluated_count)(d);
        if serial == 0 || serial != list.serial || list.vertices.len() > count {
            list.vertices.clear();
            list.names.clear();
        }
        // Named by no number until the copy is complete.
        list.serial = 0;
        for i in list.vertices.len()..count {
            list.vertices.push(EvaluatedVertex {
                vertex_id: (vt.evaluated_id)(d, i).to_owned_string(),
                metrics: (0..(vt.evaluated_metric_count)(d, i))
                    .map(|j| (vt.evaluated_metric)(d, i, j).copy_out())
                    .collect(),
            });
        }
        list.serial = serial;
    }
}

/// Plugin side: runs `f` on the lent executor context as an owned [`ExecutorContext`], the
/// context of this thread's previous call brought up to date in place: the job, summaries
/// and parameters compared rather than copied, the job graph when the executor first reads it
/// (as for evaluators, see [`with_lent_evaluator`]).
///
/// # Safety
/// `r` must be lent by the host for the call that is running.
pub(super) unsafe fn with_lent_executor<R>(
    r: ExecutorRef,
    f: impl FnOnce(&ExecutorContext) -> R,
) -> R {
    let fresh = || ExecutorContext::new(String::new(), Vec::new(), 0);
    // SAFETY: per the contract.
    with_kept(
        &KEPT_EXECUTOR,
        fresh,
        |ctx| unsafe { refresh_executor(ctx, r) },
        f,
    )
}

/// Makes `ctx` the lent executor context `r`, in place (see [`with_lent_executor`]).
///
/// # Safety
/// As for [`with_lent_executor`].
unsafe fn refresh_executor(ctx: &mut ExecutorContext, r: ExecutorRef) {
    // SAFETY: per the contract.
    unsafe {
        refresh_shared(&mut ctx.shared, r.shared, EXECUTOR_KEY);
        let vt = &*r.vtable;
        let d = r.data;
        if !has(vt.size, offset_of!(ExecutorVTable, restart_time_ms)) {
            ctx.job.clear();
            ctx.summaries.clear();
            ctx.now_ms = 0;
            ctx.restart_time_ms = 0;
            return;
        }
        let _ = assign(&mut ctx.job, (vt.job_name)(d));
        let count = (vt.summary_count)(d);
        ctx.summaries.truncate(count);
        for i in 0..count {
            if ctx.summaries.len() == i {
                ctx.summaries.push(ScalingSummary {
                    vertex_id: String::new(),
                    current_parallelism: 0,
                    new_parallelism: 0,
                    metrics: Vec::new(),
                });
            }
            let s = &mut ctx.summaries[i];
            let _ = assign(&mut s.vertex_id, (vt.summary_vertex)(d, i));
            let steps = (vt.summary_parallelism)(d, i);
            s.current_parallelism = steps.current;
            s.new_parallelism = steps.new;
            let mut number = 0;
            refill_metrics(
                &mut s.metrics,
                &mut number,
                (vt.summary_metric_count)(d, i),
                0,
                |j| (vt.summary_metric)(d, i, j),
            );
        }
        // The host lends them sorted by vertex id, as `ExecutorContext::new` sorts them.
        if !ctx
            .summaries
            .is_sorted_by(|a, b| a.vertex_id <= b.vertex_id)
        {
            ctx.summaries.sort_by(|a, b| a.vertex_id.cmp(&b.vertex_id));
        }
        ctx.now_ms = (vt.now_ms)(d);
        ctx.restart_time_ms = (vt.restart_time_ms)(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{EvaluatedMetric, TopologyVertex};

    /// The host's tables as a host of SDK 0.1.3 lent them: without the accessors 0.1.4 added.
    static SHARED_0_1_3: SharedVTable = SharedVTable {
        size: offset_of!(SharedVTable, topology_generation),
        ..HOST_SHARED
    };
    static EVALUATOR_0_1_3: EvaluatorVTable = EvaluatorVTable {
        size: offset_of!(EvaluatorVTable, metric_names),
        ..HOST_EVALUATOR
    };

    /// What the plugin side makes of `ctx` lent through the given tables: its kept context,
    /// brought up to date and cloned whole (a clone reads every lazy part), or, with `peek`,
    /// only the number of metrics (the lazy parts are not read).
    fn seen(ctx: &EvaluatorContext, old: bool, peek: bool) -> Option<EvaluatorContext> {
        let lent = LentEvaluator::new(ctx);
        let mut r = lent.lend();
        if old {
            r.vtable = &EVALUATOR_0_1_3;
            r.shared.vtable = &SHARED_0_1_3;
        }
        // SAFETY: lent for the call.
        unsafe {
            with_lent_evaluator(r, |c| {
                if peek {
                    let _ = c.metrics().len();
                    None
                } else {
                    Some(c.clone())
                }
            })
        }
    }

    fn metric(x: f64) -> EvaluatedMetric {
        EvaluatedMetric {
            current: x,
            average: x / 2.0,
        }
    }

    /// A host's context for a cycle of `job` (a graph of `vertices`), as `EvaluatorRun` keeps
    /// one.
    fn cycle(job: &str, vertices: usize) -> EvaluatorContext {
        let graph = JobTopology {
            vertices: (0..vertices)
                .map(|v| TopologyVertex {
                    id: format!("{job}-{v}"),
                    name: format!("op {v}"),
                    parallelism: 2,
                    max_parallelism: 128,
                    source_partitions: 0,
                })
                .collect(),
            edges: Vec::new(),
        };
        let params = ModeParams::under(
            EVALUATOR_KEY,
            "slo",
            BTreeMap::from([("drain-within".to_string(), job.to_string())]),
        );
        EvaluatorContext::new(job, "", Vec::new())
            .with_topology(Arc::new(graph))
            .with_params(params)
    }

    /// Moves `ctx` on to vertex `v`: sources (even vertices) have one metric more.
    fn next(ctx: &mut EvaluatorContext, job: &str, v: usize) {
        let x = v as f64;
        let mut metrics = vec![("LOAD", metric(x)), ("TARGET_DATA_RATE", metric(10.0 * x))];
        if v % 2 == 0 {
            metrics.insert(0, ("LAG", metric(100.0 + x)));
        }
        ctx.next_vertex(
            &format!("{job}-{v}"),
            &format!("op {v}"),
            metrics,
            v % 3 == 0,
        );
    }

    #[test]
    fn the_kept_context_sees_each_vertex_of_interleaved_jobs_as_lent_from_any_host() {
        for old in [false, true] {
            let mut a = cycle("a", 6);
            let mut b = cycle("b", 3);
            for v in 0..6 {
                next(&mut a, "a", v);
                // Read whole on some calls only, so that the list of vertices evaluated before
                // grows by more than one between two reads.
                if v % 2 == 1 {
                    assert_eq!(seen(&a, old, false).as_ref(), Some(&a), "old host: {old}");
                } else {
                    assert_eq!(seen(&a, old, true), None);
                }
                // Another job in between, read whole.
                if v < 3 {
                    next(&mut b, "b", v);
                    assert_eq!(seen(&b, old, false).as_ref(), Some(&b), "old host: {old}");
                    b.push_evaluated(EvaluatedVertex {
                        vertex_id: format!("b-{v}"),
                        metrics: vec![("LOAD".into(), metric(1.0))],
                    });
                }
                a.push_evaluated(EvaluatedVertex {
                    vertex_id: format!("a-{v}"),
                    metrics: vec![("LOAD".into(), metric(v as f64))],
                });
            }
            assert_eq!(a.evaluated().len(), 6);
            // A list replaced whole (a new number) is read whole.
            let replaced = a.clone().with_evaluated(vec![EvaluatedVertex {
                vertex_id: "x".into(),
                metrics: Vec::new(),
            }]);
            assert_eq!(seen(&replaced, old, false).as_ref(), Some(&replaced));
        }
    }

    thread_local! {
        /// How many times this thread's plugin side asked for the number of parameters, i.e.
        /// compared or copied the lent parameters.
        static PARAM_READS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    unsafe extern "C" fn counted_param_count(d: Data) -> usize {
        PARAM_READS.with(|n| n.set(n.get() + 1));
        // SAFETY: as the accessor it stands for.
        unsafe { param_count(d) }
    }

    /// The shared table of this host, counting the reads of the parameters.
    static SHARED_COUNTED: SharedVTable = SharedVTable {
        param_count: counted_param_count,
        ..HOST_SHARED
    };
    /// The same as a host of SDK 0.1.4 lent it: without the parameters' number.
    static SHARED_COUNTED_0_1_4: SharedVTable = SharedVTable {
        size: offset_of!(SharedVTable, params_number),
        param_count: counted_param_count,
        ..HOST_SHARED
    };

    #[test]
    fn numbered_parameters_are_read_once_and_an_older_host_has_them_compared_each_call() {
        for (table, numbered) in [(&SHARED_COUNTED, true), (&SHARED_COUNTED_0_1_4, false)] {
            // The parameters the plugin side sees through `table`, and how many times it
            // read the lent ones to get them.
            let seen = |ctx: &EvaluatorContext| {
                let lent = LentEvaluator::new(ctx);
                let mut r = lent.lend();
                r.shared.vtable = table;
                PARAM_READS.with(|n| n.set(0));
                // SAFETY: lent for the call.
                let params = unsafe { with_lent_evaluator(r, |c| c.params().clone()) };
                (PARAM_READS.with(std::cell::Cell::get), params)
            };
            let mut ctx = cycle("a", 3);
            next(&mut ctx, "a", 0);
            assert_eq!(seen(&ctx), (1, ctx.params().clone()), "first call");
            // The next vertex, the same parameters: numbered, they are not read again.
            next(&mut ctx, "a", 1);
            let again = usize::from(!numbered);
            assert_eq!(
                seen(&ctx),
                (again, ctx.params().clone()),
                "numbered: {numbered}"
            );
            // Other parameters (another number) are read.
            let other = ModeParams::under(
                EVALUATOR_KEY,
                "slo",
                BTreeMap::from([("drain-within".to_string(), "1 h".to_string())]),
            );
            let ctx = ctx.with_params(other.clone());
            assert_eq!(seen(&ctx), (1, other), "numbered: {numbered}");
        }
    }

    #[test]
    fn the_kept_executor_context_follows_each_lent_one() {
        let summary = |id: &str, new: u32, names: &[&str]| ScalingSummary {
            vertex_id: id.into(),
            current_parallelism: 2,
            new_parallelism: new,
            metrics: names.iter().map(|n| (n.to_string(), metric(1.0))).collect(),
        };
        let contexts = [
            ExecutorContext::new(
                "a",
                vec![
                    summary("v2", 4, &["LAG", "LOAD"]),
                    summary("v1", 3, &["LOAD"]),
                ],
                10,
            ),
            ExecutorContext::new("b", vec![summary("v1", 5, &["LOAD", "TARGET"])], 20)
                .with_restart_time_ms(7)
                .with_topology(cycle("b", 2).shared.graph().clone()),
            ExecutorContext::new("a", Vec::new(), 30),
        ];
        for ctx in contexts {
            // The plugin side reads the parameters under the executors' family.
            let ctx = ctx.with_params(ModeParams::under(EXECUTOR_KEY, "cap", BTreeMap::new()));
            let lent = LentExecutor::new(&ctx);
            // SAFETY: lent for the call.
            let copy = unsafe { with_lent_executor(lent.lend(), ExecutorContext::clone) };
            assert_eq!(copy, ctx);
        }
    }
}
