//! How an [`EvaluatorContext`] and an [`ExecutorContext`] cross the boundary (SDK 0.1.3): as
//! the alignment context does (`context.rs`), an opaque pointer to the host's value and an
//! append-only table of `extern "C"` accessors that starts with its own size. A new piece of
//! context is a new accessor at the end of its table, read by the plugin side only when the
//! host's table is long enough (a default otherwise); the `Ffi*` records never change.
//!
//! What both kinds see alike, the job graph and the instance's parameters, has a table of its
//! own ([`SharedVTable`]); `validate` is lent that table alone, with an empty graph.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::mem::{offset_of, size_of};
use std::sync::{Arc, OnceLock};

use super::context::{FfiEdge, FfiMetric, FfiParam, FfiStr, FfiVertex};
use crate::context::JobTopology;
use crate::evaluator::{EvaluatedVertex, EvaluatorContext};
use crate::executor::{ExecutorContext, ScalingSummary};
use crate::params::{EVALUATOR_KEY, EXECUTOR_KEY, ModeParams};

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
    topology: &'a JobTopology,
    params: &'a ModeParams,
}

impl<'a> LentShared<'a> {
    /// Parameters alone (for `validate`), with an empty graph.
    pub(super) fn params(params: &'a ModeParams) -> LentShared<'a> {
        static EMPTY: OnceLock<JobTopology> = OnceLock::new();
        LentShared {
            topology: EMPTY.get_or_init(JobTopology::default),
            params,
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

static HOST_SHARED: SharedVTable = SharedVTable {
    size: size_of::<SharedVTable>(),
    vertex_count,
    vertex,
    edge_count,
    edge,
    instance_name,
    param_count,
    param,
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
            shared: LentShared {
                topology: ctx.topology(),
                params: ctx.params(),
            },
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
            shared: LentShared {
                topology: ctx.topology(),
                params: ctx.params(),
            },
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

/// Copies the lent graph and parameters; `family` is the kind's key prefix.
///
/// # Safety
/// `r` must be lent by the host for the call that is running.
pub(super) unsafe fn rebuild_shared(
    r: SharedRef,
    family: &'static str,
) -> (Arc<JobTopology>, ModeParams) {
    // SAFETY: per the contract; every accessor of the first table exists in every host that
    // lends one (the table was born with them), which `has` checks against corruption.
    unsafe {
        let vt = &*r.vtable;
        let d = r.data;
        if !has(vt.size, offset_of!(SharedVTable, param)) {
            return (
                Arc::default(),
                ModeParams::under(family, "", BTreeMap::new()),
            );
        }
        let topology = JobTopology {
            vertices: (0..(vt.vertex_count)(d))
                .map(|i| (vt.vertex)(d, i).copy_out())
                .collect(),
            edges: (0..(vt.edge_count)(d))
                .map(|i| (vt.edge)(d, i).copy_out())
                .collect(),
        };
        let params = (0..(vt.param_count)(d))
            .map(|i| (vt.param)(d, i).copy_out())
            .collect();
        let name = (vt.instance_name)(d).to_owned_string();
        (Arc::new(topology), ModeParams::under(family, name, params))
    }
}

/// Plugin side: the parameters lent to `validate`.
///
/// # Safety
/// As for [`rebuild_shared`].
pub(super) unsafe fn rebuild_params(r: SharedRef, family: &'static str) -> ModeParams {
    // SAFETY: per the contract.
    unsafe { rebuild_shared(r, family) }.1
}

/// Plugin side: copies a lent evaluator context.
///
/// # Safety
/// `r` must be lent by the host for the call that is running.
pub(super) unsafe fn rebuild_evaluator(r: EvaluatorRef) -> EvaluatorContext {
    // SAFETY: per the contract; see `rebuild_shared`.
    unsafe {
        let (topology, params) = rebuild_shared(r.shared, EVALUATOR_KEY);
        let vt = &*r.vtable;
        let d = r.data;
        if !has(vt.size, offset_of!(EvaluatorVTable, backlog)) {
            return EvaluatorContext::new("", "", Vec::new())
                .with_topology(topology)
                .with_params(params);
        }
        let metrics = (0..(vt.metric_count)(d))
            .map(|i| (vt.metric)(d, i).copy_out())
            .collect();
        let evaluated = (0..(vt.evaluated_count)(d))
            .map(|i| EvaluatedVertex {
                vertex_id: (vt.evaluated_id)(d, i).to_owned_string(),
                metrics: (0..(vt.evaluated_metric_count)(d, i))
                    .map(|j| (vt.evaluated_metric)(d, i, j).copy_out())
                    .collect(),
            })
            .collect();
        EvaluatorContext::new(
            (vt.job_name)(d).to_owned_string(),
            (vt.vertex_id)(d).to_owned_string(),
            metrics,
        )
        .with_vertex_name((vt.vertex_name)(d).to_owned_string())
        .with_evaluated(evaluated)
        .with_backlog((vt.backlog)(d) != 0)
        .with_topology(topology)
        .with_params(params)
    }
}

/// Plugin side: copies a lent executor context.
///
/// # Safety
/// `r` must be lent by the host for the call that is running.
pub(super) unsafe fn rebuild_executor(r: ExecutorRef) -> ExecutorContext {
    // SAFETY: per the contract; see `rebuild_shared`.
    unsafe {
        let (topology, params) = rebuild_shared(r.shared, EXECUTOR_KEY);
        let vt = &*r.vtable;
        let d = r.data;
        if !has(vt.size, offset_of!(ExecutorVTable, restart_time_ms)) {
            return ExecutorContext::new("", Vec::new(), 0)
                .with_topology(topology)
                .with_params(params);
        }
        let summaries = (0..(vt.summary_count)(d))
            .map(|i| {
                let steps = (vt.summary_parallelism)(d, i);
                ScalingSummary {
                    vertex_id: (vt.summary_vertex)(d, i).to_owned_string(),
                    current_parallelism: steps.current,
                    new_parallelism: steps.new,
                    metrics: (0..(vt.summary_metric_count)(d, i))
                        .map(|j| (vt.summary_metric)(d, i, j).copy_out())
                        .collect(),
                }
            })
            .collect();
        ExecutorContext::new(
            (vt.job_name)(d).to_owned_string(),
            summaries,
            (vt.now_ms)(d),
        )
        .with_restart_time_ms((vt.restart_time_ms)(d))
        .with_topology(topology)
        .with_params(params)
    }
}
