//! How an [`AlignmentContext`] crosses the plugin boundary: a hand-rolled, append-only table of
//! `extern "C"` accessors over the host's own context.
//!
//! The table is deliberately kept out of abi_stable's layout check (the field is opaque to it):
//! that check refuses a library whose copy of a prefix type has FEWER fields than the host's,
//! so a host that grew a checked context would orphan every plugin built before. Instead the
//! table starts with its own size; the host fills in every accessor it knows, and the plugin
//! side only calls an accessor whose offset lies inside that size. Growing the context is
//! therefore: append a field to [`ContextVTable`] (never reorder, never change a field, never
//! change one of the `Ffi*` records below), fill it in `HOST_VTABLE`, read it in
//! [`rebuild`] behind [`ContextVTable::has`] with a default for older hosts.
//!
//! Two accessors (SDK 0.1.2) name what is lent rather than describe it: the job graph's
//! generation and the context's serial. Equal numbers mean equal contents, which the host
//! guarantees (see `generation.rs` and `AlignmentContext`'s serial), so the plugin side can keep
//! its copies instead of reading and comparing the lent ones on every call. 0 means "not
//! known", and is what an older host's table (too short to have them) reads as. A graph keeps
//! its generation for as long as the host keeps it, across decision cycles: a host that keeps
//! each job's graph while it does not change has none of them read again. A third (SDK 0.1.3)
//! names the context's list of metric names (see `names.rs`): lent the number of the names it
//! keeps, the plugin side reads only the values.

use std::collections::HashMap;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::{offset_of, size_of};
use std::sync::Arc;

use abi_stable::StableAbi;

use super::generation::GraphGeneration;

use crate::context::{
    AlignmentContext, DetailSource, Details, EvaluatedMetric, JobTopology, SubtaskLoad,
    TopologyEdge, TopologyVertex,
};
use crate::params::{MODE_KEY, ModeParams};
use crate::ship::ShipStrategy;

/// A borrowed string: pointer and length. Valid for the duration of one call.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FfiStr {
    ptr: *const u8,
    len: usize,
}

impl FfiStr {
    pub(super) fn new(text: &str) -> FfiStr {
        FfiStr {
            ptr: text.as_ptr(),
            len: text.len(),
        }
    }
    /// Copies the text; lossy on invalid UTF-8 (the host only ever hands out `&str`s).
    ///
    /// # Safety
    /// Must point at `len` readable bytes.
    pub(super) unsafe fn to_owned_string(self) -> String {
        if self.ptr.is_null() || self.len == 0 {
            return String::new();
        }
        // SAFETY: the host built this from a live `&str` for the duration of the call.
        let bytes = unsafe { std::slice::from_raw_parts(self.ptr, self.len) };
        text_of(bytes).into_owned()
    }

    /// True when the text equals `text`, without copying it.
    ///
    /// # Safety
    /// Must point at `len` readable bytes.
    #[inline]
    pub(super) unsafe fn is(self, text: &str) -> bool {
        if self.ptr.is_null() || self.len == 0 {
            return text.is_empty();
        }
        // SAFETY: as in `to_owned_string`.
        let bytes = unsafe { std::slice::from_raw_parts(self.ptr, self.len) };
        crate::bytes::same(bytes, text.as_bytes())
    }
}

/// `bytes` as text: borrowed when valid UTF-8 (always, from a host that lends `&str`s; the
/// plain check is much cheaper than the lossy decoder's, and the ASCII check, which is what
/// ids, names and metric names are, cheaper still), else decoded lossily.
fn text_of(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    if bytes.is_ascii() {
        // SAFETY: ASCII text is valid UTF-8.
        return std::borrow::Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// The numbers of a context. Frozen: new numbers get new accessors.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct FfiNumbers {
    current: u32,
    target: u32,
    source_partitions: u32,
    max_parallelism: u32,
    lower_limit: u32,
    upper_limit: u32,
}

/// A ship strategy as a tag and a bucket count. Frozen; a tag the reader does not know reads
/// as [`ShipStrategy::Unknown`], so new strategies never break a built plugin.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct FfiShip {
    tag: u8,
    buckets: u32,
}

impl FfiShip {
    fn from_ship(s: ShipStrategy) -> FfiShip {
        let (tag, buckets) = match s {
            ShipStrategy::Hash => (1, 0),
            ShipStrategy::Rebalance => (2, 0),
            ShipStrategy::Rescale => (3, 0),
            ShipStrategy::Forward => (4, 0),
            ShipStrategy::Custom { buckets } => (5, buckets),
            ShipStrategy::Broadcast => (6, 0),
            ShipStrategy::Global => (7, 0),
            ShipStrategy::Shuffle => (8, 0),
            ShipStrategy::Unknown => (0, 0),
        };
        FfiShip { tag, buckets }
    }
    fn to_ship(self) -> ShipStrategy {
        match self.tag {
            1 => ShipStrategy::Hash,
            2 => ShipStrategy::Rebalance,
            3 => ShipStrategy::Rescale,
            4 => ShipStrategy::Forward,
            5 => ShipStrategy::Custom {
                buckets: self.buckets,
            },
            6 => ShipStrategy::Broadcast,
            7 => ShipStrategy::Global,
            8 => ShipStrategy::Shuffle,
            _ => ShipStrategy::Unknown,
        }
    }
}

/// One evaluated metric. Frozen.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FfiMetric {
    name: FfiStr,
    current: f64,
    average: f64,
}

/// One topology vertex. Frozen.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FfiVertex {
    id: FfiStr,
    name: FfiStr,
    parallelism: u32,
    max_parallelism: u32,
    source_partitions: u32,
}

/// One topology edge. Frozen.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FfiEdge {
    from: FfiStr,
    to: FfiStr,
    ship: FfiShip,
}

/// One mode parameter. Frozen.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FfiParam {
    key: FfiStr,
    value: FfiStr,
}

impl FfiMetric {
    /// Lends metric `name` (an empty name with NaNs for `None`: an index out of range).
    pub(super) fn lend(metric: Option<(&str, &EvaluatedMetric)>) -> FfiMetric {
        match metric {
            Some((name, m)) => FfiMetric {
                name: FfiStr::new(name),
                current: m.current,
                average: m.average,
            },
            None => FfiMetric {
                name: FfiStr::new(""),
                current: f64::NAN,
                average: f64::NAN,
            },
        }
    }

    /// Copies the lent metric.
    ///
    /// # Safety
    /// The name must still be lent.
    pub(super) unsafe fn copy_out(self) -> (String, EvaluatedMetric) {
        // SAFETY: per the caller.
        let name = unsafe { self.name.to_owned_string() };
        (
            name,
            EvaluatedMetric {
                current: self.current,
                average: self.average,
            },
        )
    }
}

impl FfiVertex {
    /// Lends a graph vertex (an empty one for `None`: an index out of range).
    pub(super) fn lend(v: Option<&TopologyVertex>) -> FfiVertex {
        match v {
            Some(v) => FfiVertex {
                id: FfiStr::new(&v.id),
                name: FfiStr::new(&v.name),
                parallelism: v.parallelism,
                max_parallelism: v.max_parallelism,
                source_partitions: v.source_partitions,
            },
            None => FfiVertex {
                id: FfiStr::new(""),
                name: FfiStr::new(""),
                parallelism: 0,
                max_parallelism: 0,
                source_partitions: 0,
            },
        }
    }

    /// Copies the lent vertex.
    ///
    /// # Safety
    /// Its texts must still be lent.
    pub(super) unsafe fn copy_out(self) -> TopologyVertex {
        // SAFETY: per the caller.
        unsafe {
            TopologyVertex {
                id: self.id.to_owned_string(),
                name: self.name.to_owned_string(),
                parallelism: self.parallelism,
                max_parallelism: self.max_parallelism,
                source_partitions: self.source_partitions,
            }
        }
    }
}

impl FfiEdge {
    /// Lends a graph edge (an empty one for `None`: an index out of range).
    pub(super) fn lend(e: Option<&TopologyEdge>) -> FfiEdge {
        match e {
            Some(e) => FfiEdge {
                from: FfiStr::new(&e.from),
                to: FfiStr::new(&e.to),
                ship: FfiShip::from_ship(e.ship_strategy),
            },
            None => FfiEdge {
                from: FfiStr::new(""),
                to: FfiStr::new(""),
                ship: FfiShip::default(),
            },
        }
    }

    /// Copies the lent edge.
    ///
    /// # Safety
    /// Its texts must still be lent.
    pub(super) unsafe fn copy_out(self) -> TopologyEdge {
        // SAFETY: per the caller.
        unsafe {
            TopologyEdge {
                from: self.from.to_owned_string(),
                to: self.to.to_owned_string(),
                ship_strategy: self.ship.to_ship(),
            }
        }
    }
}

impl FfiParam {
    /// Lends a parameter (empty texts for `None`: an index out of range).
    pub(super) fn lend(p: Option<(&str, &str)>) -> FfiParam {
        let (k, v) = p.unwrap_or(("", ""));
        FfiParam {
            key: FfiStr::new(k),
            value: FfiStr::new(v),
        }
    }

    /// True when the lent parameter is `key = value`, without copying it.
    ///
    /// # Safety
    /// Its texts must still be lent.
    pub(super) unsafe fn is(self, key: &str, value: &str) -> bool {
        // SAFETY: per the caller.
        unsafe { self.key.is(key) && self.value.is(value) }
    }

    /// Copies the lent parameter.
    ///
    /// # Safety
    /// Its texts must still be lent.
    pub(super) unsafe fn copy_out(self) -> (String, String) {
        // SAFETY: per the caller.
        unsafe { (self.key.to_owned_string(), self.value.to_owned_string()) }
    }
}

/// The load of one subtask (SDK 0.1.1). Frozen. NaN stands for "not reported".
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FfiSubtaskLoad {
    busy_ratio: f64,
    records_in_per_second: f64,
}

impl FfiSubtaskLoad {
    fn from_load(l: &SubtaskLoad) -> FfiSubtaskLoad {
        FfiSubtaskLoad {
            busy_ratio: l.busy_ratio.unwrap_or(f64::NAN),
            records_in_per_second: l.records_in_per_second.unwrap_or(f64::NAN),
        }
    }
    fn to_load(self) -> SubtaskLoad {
        let known = |x: f64| (!x.is_nan()).then_some(x);
        SubtaskLoad {
            busy_ratio: known(self.busy_ratio),
            records_in_per_second: known(self.records_in_per_second),
        }
    }
}

type Data = *const c_void;

/// The accessor table of the context, version 1. Append-only (see the module docs).
///
/// Every accessor takes the opaque data pointer of the [`ContextRef`] it came with; an
/// out-of-range index yields an empty record, never a panic.
#[repr(C)]
pub struct ContextVTable {
    /// `size_of::<ContextVTable>()` in the host that built it: accessors at or past this offset
    /// do not exist in that host.
    pub size: usize,
    job_name: unsafe extern "C" fn(Data) -> FfiStr,
    vertex_id: unsafe extern "C" fn(Data) -> FfiStr,
    vertex_name: unsafe extern "C" fn(Data) -> FfiStr,
    numbers: unsafe extern "C" fn(Data) -> FfiNumbers,
    ship_count: unsafe extern "C" fn(Data) -> usize,
    ship: unsafe extern "C" fn(Data, usize) -> FfiShip,
    metric_count: unsafe extern "C" fn(Data) -> usize,
    metric: unsafe extern "C" fn(Data, usize) -> FfiMetric,
    vertex_count: unsafe extern "C" fn(Data) -> usize,
    vertex: unsafe extern "C" fn(Data, usize) -> FfiVertex,
    edge_count: unsafe extern "C" fn(Data) -> usize,
    edge: unsafe extern "C" fn(Data, usize) -> FfiEdge,
    mode_name: unsafe extern "C" fn(Data) -> FfiStr,
    param_count: unsafe extern "C" fn(Data) -> usize,
    param: unsafe extern "C" fn(Data, usize) -> FfiParam,
    // ---- SDK 0.1.0 ends here (the table of the released 0.1.0 is exactly the fields above).
    /// SDK 0.1.1: the number of per-subtask loads (0: not known).
    subtask_load_count: unsafe extern "C" fn(Data) -> usize,
    /// SDK 0.1.1: the load of subtask `i`.
    subtask_load: unsafe extern "C" fn(Data, usize) -> FfiSubtaskLoad,
    /// SDK 0.1.2: the generation of the job graph (see [`GraphGeneration`]); 0 when unknown.
    topology_generation: unsafe extern "C" fn(Data) -> u64,
    /// SDK 0.1.2: the serial of the context itself: equal serials are the same context (the
    /// host asks `is_applicable`, then `align`, of one context); 0 when unknown.
    context_serial: unsafe extern "C" fn(Data) -> u64,
    /// SDK 0.1.3: the number of the context's list of metric names: equal numbers are equal
    /// names in the same order (see `names.rs`); 0 when unknown.
    metric_names: unsafe extern "C" fn(Data) -> u64,
    // Fields added in later SDK releases go here, each read behind `has`.
}

impl ContextVTable {
    /// Whether the host that built this table filled in the field at `offset` of `len` bytes.
    pub fn has(&self, offset: usize, len: usize) -> bool {
        offset + len <= self.size
    }
}

/// The context as it crosses the boundary: the host's context, opaque, and its accessor table.
#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct ContextRef<'a> {
    #[sabi(unsafe_opaque_field)]
    data: *const c_void,
    #[sabi(unsafe_opaque_field)]
    vtable: *const ContextVTable,
    _borrow: PhantomData<&'a ()>,
}

impl<'a> ContextRef<'a> {
    /// Host side: lends `ctx` to a plugin for one call.
    pub fn new(ctx: &'a AlignmentContext) -> ContextRef<'a> {
        ContextRef {
            data: (ctx as *const AlignmentContext).cast(),
            vtable: &HOST_VTABLE,
            _borrow: PhantomData,
        }
    }
}

/// The lent context `r` as the source of the kept context's details (see `LazyDetails`): read
/// by [`fill_details`] when the mode first reads them, during the call it was lent for.
fn detail_source(r: ContextRef<'_>) -> DetailSource {
    DetailSource {
        lent: r.data,
        table: r.vtable.cast(),
        fill: fill_details,
    }
}

fn ctx<'a>(data: Data) -> &'a AlignmentContext {
    // SAFETY: `data` always comes from `ContextRef::new`, which borrows a live context for the
    // lifetime of the `ContextRef`; the accessors are only called during that borrow.
    unsafe { &*data.cast::<AlignmentContext>() }
}

unsafe extern "C" fn job_name(d: Data) -> FfiStr {
    FfiStr::new(ctx(d).job_name())
}
unsafe extern "C" fn vertex_id(d: Data) -> FfiStr {
    FfiStr::new(ctx(d).vertex_id())
}
unsafe extern "C" fn vertex_name(d: Data) -> FfiStr {
    FfiStr::new(ctx(d).vertex_name())
}
unsafe extern "C" fn numbers(d: Data) -> FfiNumbers {
    let c = ctx(d);
    FfiNumbers {
        current: c.current_parallelism(),
        target: c.target_parallelism(),
        source_partitions: c.source_partitions(),
        max_parallelism: c.max_parallelism(),
        lower_limit: c.lower_limit(),
        upper_limit: c.upper_limit(),
    }
}
unsafe extern "C" fn ship_count(d: Data) -> usize {
    ctx(d).input_ship_strategies().len()
}
unsafe extern "C" fn ship(d: Data, i: usize) -> FfiShip {
    ctx(d)
        .input_ship_strategies()
        .get(i)
        .map(|s| FfiShip::from_ship(*s))
        .unwrap_or_default()
}
unsafe extern "C" fn metric_count(d: Data) -> usize {
    ctx(d).metrics().len()
}
unsafe extern "C" fn metric(d: Data, i: usize) -> FfiMetric {
    FfiMetric::lend(ctx(d).metrics().get(i).map(|(n, m)| (n.as_str(), m)))
}
unsafe extern "C" fn vertex_count(d: Data) -> usize {
    ctx(d).topology().vertices.len()
}
unsafe extern "C" fn vertex(d: Data, i: usize) -> FfiVertex {
    FfiVertex::lend(ctx(d).topology().vertices.get(i))
}
unsafe extern "C" fn edge_count(d: Data) -> usize {
    ctx(d).topology().edges.len()
}
unsafe extern "C" fn edge(d: Data, i: usize) -> FfiEdge {
    FfiEdge::lend(ctx(d).topology().edges.get(i))
}
unsafe extern "C" fn mode_name(d: Data) -> FfiStr {
    FfiStr::new(ctx(d).params().mode_name())
}
unsafe extern "C" fn param_count(d: Data) -> usize {
    ctx(d).params().len()
}
unsafe extern "C" fn param(d: Data, i: usize) -> FfiParam {
    FfiParam::lend(ctx(d).params().iter().nth(i))
}

unsafe extern "C" fn topology_generation(d: Data) -> u64 {
    GraphGeneration::of(&ctx(d).details.get().topology)
}

unsafe extern "C" fn context_serial(d: Data) -> u64 {
    ctx(d).serial
}

unsafe extern "C" fn metric_names(d: Data) -> u64 {
    ctx(d).details.get().metric_names
}

unsafe extern "C" fn subtask_load_count(d: Data) -> usize {
    ctx(d).subtask_loads().map_or(0, <[SubtaskLoad]>::len)
}
unsafe extern "C" fn subtask_load(d: Data, i: usize) -> FfiSubtaskLoad {
    match ctx(d).subtask_loads().and_then(|l| l.get(i)) {
        Some(l) => FfiSubtaskLoad::from_load(l),
        None => FfiSubtaskLoad::from_load(&SubtaskLoad::default()),
    }
}

/// The table this SDK version's host side hands out.
static HOST_VTABLE: ContextVTable = ContextVTable {
    size: size_of::<ContextVTable>(),
    job_name,
    vertex_id,
    vertex_name,
    numbers,
    ship_count,
    ship,
    metric_count,
    metric,
    vertex_count,
    vertex,
    edge_count,
    edge,
    mode_name,
    param_count,
    param,
    subtask_load_count,
    subtask_load,
    topology_generation,
    context_serial,
    metric_names,
};

/// Plugin side: copies a lent context into an owned [`AlignmentContext`] for the mode.
///
/// # Safety
/// `r` must come from [`ContextRef::new`] in the host and the call it was lent for must still
/// be running.
pub unsafe fn rebuild(r: ContextRef<'_>) -> AlignmentContext {
    // SAFETY: per the contract, the table and the data are live; every accessor of version 1
    // exists in every host of this SDK series (the probe refuses other series).
    unsafe {
        let vt = &*r.vtable;
        let d = r.data;
        debug_assert!(vt.has(offset_of!(ContextVTable, param), size_of::<usize>()));
        let n = (vt.numbers)(d);
        let ships = (0..(vt.ship_count)(d))
            .map(|i| (vt.ship)(d, i).to_ship())
            .collect();
        let metrics = (0..(vt.metric_count)(d))
            .map(|i| (vt.metric)(d, i).copy_out())
            .collect();
        let job = (vt.job_name)(d).to_owned_string();
        let topology = shared_topology(vt, d, &job);
        let params = (0..(vt.param_count)(d))
            .map(|i| (vt.param)(d, i).copy_out())
            .collect();
        // SDK 0.1.1; a 0.1.0 host's table ends before it, and its plugins read `None`.
        let subtask_loads = if vt.has(
            offset_of!(ContextVTable, subtask_load),
            size_of::<unsafe extern "C" fn(Data, usize) -> FfiSubtaskLoad>(),
        ) {
            (0..(vt.subtask_load_count)(d))
                .map(|i| (vt.subtask_load)(d, i).to_load())
                .collect()
        } else {
            Vec::new()
        };
        let mut ctx = AlignmentContext::builder(n.current, n.target, n.max_parallelism)
            .identity(
                job,
                (vt.vertex_id)(d).to_owned_string(),
                (vt.vertex_name)(d).to_owned_string(),
            )
            .source_partitions(n.source_partitions)
            .limits(n.lower_limit, n.upper_limit)
            .input_ship_strategies(ships)
            .metrics(metrics)
            .shared_topology(topology)
            .params(ModeParams::new((vt.mode_name)(d).to_owned_string(), params))
            .subtask_loads(subtask_loads)
            .build();
        // The builder numbered the copy's names in this plugin's own count; only the host's
        // number says anything about the next context it lends (a numbered list is sorted and
        // distinct, so the copy has exactly the lent names).
        ctx.details.get_mut().metric_names = lent_metric_names(vt, d);
        ctx
    }
}

thread_local! {
    /// The context of the last call this thread served (see [`with_lent`]), and the host's
    /// serial of the context it was lent as (0: not known).
    static LAST_CONTEXT: std::cell::RefCell<Option<(u64, AlignmentContext)>> =
        const { std::cell::RefCell::new(None) };
}

/// The host's serial of the lent context: equal serials are the same context. 0 from a host
/// older than SDK 0.1.2, which cannot tell.
///
/// # Safety
/// As for [`rebuild`].
unsafe fn lent_serial(r: ContextRef<'_>) -> u64 {
    // SAFETY: the caller guarantees the table and the data are live.
    unsafe {
        lent_number(
            &*r.vtable,
            r.data,
            offset_of!(ContextVTable, context_serial),
            |vt| vt.context_serial,
        )
    }
}

/// One of the numbers an accessor of the lent table gives (SDK 0.1.2 and later): read through
/// `field` only when the host's table reaches `offset`, its place; 0 ("not known") from an
/// older host's shorter table, which does not have it.
///
/// # Safety
/// As for [`rebuild`]; `offset` is the place of the accessor `field` returns.
unsafe fn lent_number(
    vt: &ContextVTable,
    d: Data,
    offset: usize,
    field: fn(&ContextVTable) -> unsafe extern "C" fn(Data) -> u64,
) -> u64 {
    if vt.has(offset, size_of::<unsafe extern "C" fn(Data) -> u64>()) {
        // SAFETY: the accessor lies within the host's table; the caller guarantees the table
        // and the data are live.
        unsafe { field(vt)(d) }
    } else {
        0
    }
}

/// Plugin side: runs `f` on the lent context as an owned [`AlignmentContext`], equal to what
/// [`rebuild`] returns.
///
/// The host asks `is_applicable` and then `align` of the same context, and the vertices of a job
/// one after the other: instead of copying every string twice per vertex, the context of this
/// thread's previous call is kept. When the host says the lent context is the one the kept
/// copy was made from (equal serials, SDK 0.1.2), it is used as is; otherwise it is brought up
/// to date in place: the numbers, ship strategies and parameters at once, the identity,
/// metrics, graph and per-subtask load when the mode first reads one of them (many never do).
/// What did not change is compared, not copied (the job, the mode parameters, the graph); a
/// string that changed reuses its buffer. So the second call of a vertex reads nothing but the
/// serial, and the first one copies next to nothing.
///
/// # Safety
/// As for [`rebuild`].
pub unsafe fn with_lent<R>(r: ContextRef<'_>, f: impl FnOnce(&AlignmentContext) -> R) -> R {
    // SAFETY: per the contract.
    let serial = unsafe { lent_serial(r) };
    LAST_CONTEXT.with(|last| {
        // Used in place, not moved out and back: the context is a few hundred bytes. `f` only
        // reads it, so a panic in `f` leaves it whole; one while bringing it up to date leaves
        // it named by no serial (0), so the next call brings it up to date again.
        let Ok(mut last) = last.try_borrow_mut() else {
            // A call from inside a call (no host makes one): served without the kept context.
            // SAFETY: per the contract.
            return f(&unsafe { rebuild(r) });
        };
        let ctx = match &mut *last {
            Some((kept_serial, ctx)) if serial != 0 && *kept_serial == serial => {
                ctx.details.lend_again(detail_source(r));
                ctx
            }
            Some((kept_serial, ctx)) => {
                *kept_serial = 0;
                // SAFETY: per the contract.
                unsafe { refresh(ctx, r) };
                *kept_serial = serial;
                ctx
            }
            // SAFETY: per the contract.
            None => &mut last.insert((serial, unsafe { rebuild(r) })).1,
        };
        f(ctx)
    })
}

/// Sets `text` to the lent `from` unless it already holds it, reusing its buffer.
///
/// # Safety
/// `from` must point at `len` readable bytes.
/// Returns whether it changed.
pub(super) unsafe fn assign(text: &mut String, from: FfiStr) -> bool {
    // SAFETY: per the contract.
    unsafe {
        if from.is(text) {
            return false;
        }
        text.clear();
        if !from.ptr.is_null() && from.len > 0 {
            let bytes = std::slice::from_raw_parts(from.ptr, from.len);
            text.push_str(&text_of(bytes));
        }
        true
    }
}

/// Makes `ctx` equal to what [`rebuild`] would return for `r`, in place: the numbers, ship
/// strategies and parameters now, the details (see [`fill_details`]) when first read.
///
/// # Safety
/// As for [`rebuild`]; the details are read from `r` later, during the same call.
unsafe fn refresh(ctx: &mut AlignmentContext, r: ContextRef<'_>) {
    // SAFETY: per the contract, the table and the data are live.
    unsafe {
        let vt = &*r.vtable;
        let d = r.data;
        // Changed in place, it is no longer the context its serial named.
        ctx.serial = 0;
        let n = (vt.numbers)(d);
        ctx.current = n.current;
        ctx.target = n.target;
        ctx.source_partitions = n.source_partitions;
        ctx.max_parallelism = n.max_parallelism;
        ctx.lower_limit = n.lower_limit;
        ctx.upper_limit = n.upper_limit;
        let ships = ctx.input_ship_strategies.owned_mut();
        ships.clear();
        ships.extend((0..(vt.ship_count)(d)).map(|i| (vt.ship)(d, i).to_ship()));

        refresh_params(
            &mut ctx.params,
            MODE_KEY,
            (vt.mode_name)(d),
            (vt.param_count)(d),
            |i| (vt.param)(d, i),
        );
        ctx.details.lend(detail_source(r));
    }
}

/// Makes `kept` the lent parameters of instance `name` (`count` of them, each from `param`)
/// under the key family `family`, unless it already holds them: they are compared, not copied,
/// and a host lends the same parameters for every call of a job.
///
/// # Safety
/// The texts `name` and `param` give must be lent for the running call.
pub(super) unsafe fn refresh_params(
    kept: &mut ModeParams,
    family: &'static str,
    name: FfiStr,
    count: usize,
    param: impl Fn(usize) -> FfiParam,
) {
    // SAFETY: per the contract.
    unsafe {
        let same = kept.family() == family
            && name.is(kept.mode_name())
            && kept.len() == count
            && kept.iter().enumerate().all(|(i, (k, v))| param(i).is(k, v));
        if !same {
            let entries = (0..count).map(|i| param(i).copy_out()).collect();
            *kept = ModeParams::under(family, name.to_owned_string(), entries);
        }
    }
}

/// Makes `details` those of the lent context `d` with its table `table`, in place (see
/// [`refresh`]).
///
/// # Safety
/// As for [`rebuild`]: `d` and `table` are those of a [`ContextRef`] lent for a call that is
/// still running.
unsafe fn fill_details(details: &mut Details, d: Data, table: *const c_void) {
    // SAFETY: per the contract, the table and the data are live.
    unsafe {
        let vt = &*table.cast::<ContextVTable>();
        let _ = assign(details.job_name.owned_mut(), (vt.job_name)(d));
        let _ = assign(details.vertex_id.owned_mut(), (vt.vertex_id)(d));
        let _ = assign(details.vertex_name.owned_mut(), (vt.vertex_name)(d));

        refill_metrics(
            &mut details.metrics,
            &mut details.metric_names,
            (vt.metric_count)(d),
            lent_metric_names(vt, d),
            |i| (vt.metric)(d, i),
        );

        details.topology = shared_topology(vt, d, details.job_name.as_str());

        // SDK 0.1.1; a 0.1.0 host's table ends before it, and its plugins read `None`.
        let load_count = if vt.has(
            offset_of!(ContextVTable, subtask_load),
            size_of::<unsafe extern "C" fn(Data, usize) -> FfiSubtaskLoad>(),
        ) {
            (vt.subtask_load_count)(d)
        } else {
            0
        };
        if load_count == 0 {
            details.subtask_loads = None;
        } else {
            let loads = details.subtask_loads.get_or_insert_with(Vec::new);
            loads.clear();
            loads.extend((0..load_count).map(|i| (vt.subtask_load)(d, i).to_load()));
        }
    }
}

/// Makes `metrics` the `count` lent metrics that `metric` gives, in place, and `number` the
/// number of their names: when the host's number for them (`lent_names`, 0: not known) is the
/// one kept, only the values are read; otherwise each name is compared with the one kept in its
/// place and copied only when it differs (into its buffer). Lent names that are not sorted and
/// distinct are sorted as a builder does, and then have no number.
///
/// # Safety
/// `metric` must lend live names for the running call.
pub(super) unsafe fn refill_metrics(
    metrics: &mut Vec<(String, EvaluatedMetric)>,
    number: &mut u64,
    count: usize,
    lent_names: u64,
    metric: impl Fn(usize) -> FfiMetric,
) {
    // SAFETY: per the contract.
    unsafe {
        if lent_names != 0 && lent_names == *number && count == metrics.len() {
            // The host says the names are those kept: only the values are new.
            for (i, (_, kept)) in metrics.iter_mut().enumerate() {
                let m = metric(i);
                *kept = EvaluatedMetric {
                    current: m.current,
                    average: m.average,
                };
            }
            return;
        }
        // Named by no number until they are all in place.
        *number = 0;
        // The kept names are sorted and distinct: lent the same names at the same places (or
        // fewer of them), they still are.
        let mut same_names = count <= metrics.len();
        metrics.truncate(count);
        for i in 0..count {
            let m = metric(i);
            let value = EvaluatedMetric {
                current: m.current,
                average: m.average,
            };
            match metrics.get_mut(i) {
                // The common case, checked inline: the name kept in this place is the lent one.
                Some((name, kept)) if m.name.is(name) => *kept = value,
                Some((name, kept)) => {
                    same_names &= !assign(name, m.name);
                    *kept = value;
                }
                None => metrics.push((m.name.to_owned_string(), value)),
            }
        }
        // The host lends sorted, distinct names; anything else is sorted as the builder does,
        // and then no longer is the list the host numbered.
        if same_names {
            *number = lent_names;
        } else {
            crate::names::sort_metrics(metrics);
        }
    }
}

/// How many jobs' graphs one thread keeps (see [`shared_topology`]): a host aligns the jobs of
/// a fleet in turn, so a single kept graph would be another job's at nearly every first call,
/// and so would any bound below the fleet's size. Past this many jobs the thread starts over
/// (the graphs are copies, a few kilobytes each); a `process` worker keeps as many jobs.
const KEPT_GRAPHS: usize = 16_384;

thread_local! {
    /// The job graph of the last context this thread rebuilt for each job, and the host's
    /// generation of it (0: not known). The host aligns the vertices of a job one after the
    /// other with the same graph, and the next cycle with an equal one, so most calls find it
    /// here and copy nothing.
    static KEPT: std::cell::RefCell<HashMap<String, (u64, Arc<JobTopology>)>> =
        std::cell::RefCell::new(HashMap::new());
    /// The graph this thread handed out last and its generation (never 0): the next vertex of
    /// the same job finds it here without looking the job up.
    static LAST_GRAPH: std::cell::RefCell<Option<(u64, Arc<JobTopology>)>> =
        const { std::cell::RefCell::new(None) };
}

/// The host's number of the lent context's metric names: equal numbers are equal names (see
/// `names.rs`). 0 from a host older than SDK 0.1.3, which cannot tell.
///
/// # Safety
/// As for [`rebuild`].
unsafe fn lent_metric_names(vt: &ContextVTable, d: *const c_void) -> u64 {
    // SAFETY: as for `rebuild`, which the caller upholds.
    unsafe {
        lent_number(vt, d, offset_of!(ContextVTable, metric_names), |vt| {
            vt.metric_names
        })
    }
}

/// The host's generation of the lent job graph: equal generations are equal graphs (see
/// `generation.rs`). 0 from a host older than SDK 0.1.2, which cannot tell.
///
/// # Safety
/// As for [`rebuild`].
unsafe fn lent_generation(vt: &ContextVTable, d: *const c_void) -> u64 {
    // SAFETY: as for `rebuild`, which the caller upholds.
    unsafe {
        lent_number(
            vt,
            d,
            offset_of!(ContextVTable, topology_generation),
            |vt| vt.topology_generation,
        )
    }
}

/// True when the lent job graph equals `cached`, compared field by field.
///
/// # Safety
/// As for [`rebuild`].
unsafe fn lent_graph_is(vt: &ContextVTable, d: *const c_void, cached: &JobTopology) -> bool {
    // SAFETY: the caller guarantees the table and the data are live.
    unsafe {
        graph_is(
            cached,
            LentGraphRef {
                vertex_count: (vt.vertex_count)(d),
                vertex: &|i| (vt.vertex)(d, i),
                edge_count: (vt.edge_count)(d),
                edge: &|i| (vt.edge)(d, i),
            },
        )
    }
}

/// A lent job graph, through the accessors of whichever table lends it.
pub(super) struct LentGraphRef<'f> {
    pub(super) vertex_count: usize,
    pub(super) vertex: &'f dyn Fn(usize) -> FfiVertex,
    pub(super) edge_count: usize,
    pub(super) edge: &'f dyn Fn(usize) -> FfiEdge,
}

/// True when the lent graph equals `cached`, compared field by field.
///
/// # Safety
/// The accessors must lend live texts for the running call.
pub(super) unsafe fn graph_is(cached: &JobTopology, lent: LentGraphRef<'_>) -> bool {
    // SAFETY: per the contract.
    unsafe {
        cached.vertices.len() == lent.vertex_count
            && cached.edges.len() == lent.edge_count
            && cached.vertices.iter().enumerate().all(|(i, c)| {
                let v = (lent.vertex)(i);
                v.parallelism == c.parallelism
                    && v.max_parallelism == c.max_parallelism
                    && v.source_partitions == c.source_partitions
                    && v.id.is(&c.id)
                    && v.name.is(&c.name)
            })
            && cached.edges.iter().enumerate().all(|(i, c)| {
                let e = (lent.edge)(i);
                e.ship.to_ship() == c.ship_strategy && e.from.is(&c.from) && e.to.is(&c.to)
            })
    }
}

/// A copy of the lent graph.
///
/// # Safety
/// As for [`graph_is`].
pub(super) unsafe fn copy_graph(lent: LentGraphRef<'_>) -> JobTopology {
    // SAFETY: per the contract.
    unsafe {
        JobTopology {
            vertices: (0..lent.vertex_count)
                .map(|i| (lent.vertex)(i).copy_out())
                .collect(),
            edges: (0..lent.edge_count)
                .map(|i| (lent.edge)(i).copy_out())
                .collect(),
        }
    }
}

/// The lent job graph of job `job` as an owned, shared [`JobTopology`]: the one kept for the
/// job when the host says it is the same graph (equal generations) or when it compares equal,
/// else a fresh copy (which is kept for the job from then on).
///
/// # Safety
/// As for [`rebuild`].
unsafe fn shared_topology(vt: &ContextVTable, d: *const c_void, job: &str) -> Arc<JobTopology> {
    // SAFETY: the caller guarantees the table and the data are live.
    unsafe {
        let generation = lent_generation(vt, d);
        if generation != 0 {
            let last = LAST_GRAPH.with(|last| match &*last.borrow() {
                Some((kept, graph)) if *kept == generation => Some(Arc::clone(graph)),
                _ => None,
            });
            if let Some(graph) = last {
                return graph;
            }
        }
        let graph = job_graph(vt, d, job, generation);
        if generation != 0 {
            LAST_GRAPH.with(|last| *last.borrow_mut() = Some((generation, Arc::clone(&graph))));
        }
        graph
    }
}

/// [`shared_topology`] past the last graph: the one kept for `job`, or a copy.
///
/// # Safety
/// As for [`rebuild`].
unsafe fn job_graph(
    vt: &ContextVTable,
    d: *const c_void,
    job: &str,
    generation: u64,
) -> Arc<JobTopology> {
    // SAFETY: the caller guarantees the table and the data are live.
    unsafe {
        let kept = KEPT.with(|kept| kept.borrow().get(job).cloned());
        if let Some((kept_generation, graph)) = kept {
            if generation != 0 && kept_generation == generation {
                return graph;
            }
            if lent_graph_is(vt, d, &graph) {
                KEPT.with(|kept| {
                    if let Some(entry) = kept.borrow_mut().get_mut(job) {
                        entry.0 = generation;
                    }
                });
                return graph;
            }
        }
        let fresh = Arc::new(copy_graph(LentGraphRef {
            vertex_count: (vt.vertex_count)(d),
            vertex: &|i| (vt.vertex)(d, i),
            edge_count: (vt.edge_count)(d),
            edge: &|i| (vt.edge)(d, i),
        }));
        KEPT.with(|kept| {
            let mut kept = kept.borrow_mut();
            let entry = (generation, Arc::clone(&fresh));
            if let Some(slot) = kept.get_mut(job) {
                *slot = entry;
            } else {
                if kept.len() >= KEPT_GRAPHS {
                    kept.clear();
                }
                kept.insert(job.to_owned(), entry);
            }
        });
        fresh
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn a_context_survives_the_round_trip_through_the_table() {
        let original = AlignmentContext::builder(4, 9, 96)
            .identity("job", "v1", "map")
            .source_partitions(0)
            .limits(2, 40)
            .input_ship_strategies(vec![
                ShipStrategy::Hash,
                ShipStrategy::Custom { buckets: 48 },
                ShipStrategy::Unknown,
            ])
            .metrics(vec![(
                "LOAD".into(),
                EvaluatedMetric {
                    current: 0.7,
                    average: 0.6,
                },
            )])
            .topology(JobTopology {
                vertices: vec![TopologyVertex {
                    id: "v1".into(),
                    name: "map".into(),
                    parallelism: 4,
                    max_parallelism: 96,
                    source_partitions: 0,
                }],
                edges: vec![TopologyEdge {
                    from: "v0".into(),
                    to: "v1".into(),
                    ship_strategy: ShipStrategy::Custom { buckets: 48 },
                }],
            })
            .params(ModeParams::new(
                "bucket",
                BTreeMap::from([("buckets".to_string(), "48".to_string())]),
            ))
            .build();
        let copy = unsafe { rebuild(ContextRef::new(&original)) };
        assert_eq!(copy.job_name(), "job");
        assert_eq!(copy.vertex_name(), "map");
        assert_eq!(copy.current_parallelism(), 4);
        assert_eq!(copy.target_parallelism(), 9);
        assert_eq!(copy.max_parallelism(), 96);
        assert_eq!((copy.lower_limit(), copy.upper_limit()), (2, 40));
        assert_eq!(
            copy.input_ship_strategies(),
            original.input_ship_strategies()
        );
        assert_eq!(copy.metric("LOAD").map(|m| m.current), Some(0.7));
        assert_eq!(copy.topology(), original.topology());
        assert_eq!(copy.params(), original.params());
    }

    fn loaded_context() -> AlignmentContext {
        AlignmentContext::builder(3, 5, 128)
            .subtask_loads(vec![
                SubtaskLoad {
                    busy_ratio: Some(0.9),
                    records_in_per_second: Some(1200.0),
                },
                SubtaskLoad {
                    busy_ratio: None,
                    records_in_per_second: Some(300.0),
                },
                SubtaskLoad {
                    busy_ratio: Some(0.25),
                    records_in_per_second: None,
                },
            ])
            .build()
    }

    /// A context with every field set; `variant` changes each of them.
    fn full_context(variant: u32) -> AlignmentContext {
        let metric = |name: &str, x: f64| {
            (
                name.to_string(),
                EvaluatedMetric {
                    current: x,
                    average: f64::NAN,
                },
            )
        };
        let mut metrics = vec![metric("LOAD", 0.5), metric("LAG", f64::from(variant))];
        if variant % 2 == 0 {
            metrics.push(metric("TRUE_PROCESSING_RATE", 12.5));
        }
        let ships = vec![ShipStrategy::Hash; variant as usize % 3];
        let builder = AlignmentContext::builder(4 + variant, 9, 96);
        // The host shares the strategies its graph keeps; either way they cross the same.
        let builder = if variant % 2 == 0 {
            builder.shared_input_ship_strategies(Arc::from(ships))
        } else {
            builder.input_ship_strategies(ships)
        };
        builder
            .identity(
                format!("job-{}", variant / 2),
                format!("{variant:032x}"),
                "map",
            )
            .source_partitions(variant)
            .limits(1 + variant, 40)
            .metrics(metrics)
            .topology(JobTopology {
                vertices: vec![TopologyVertex {
                    id: format!("{variant:032x}"),
                    name: "map".into(),
                    parallelism: 4 + variant,
                    max_parallelism: 96,
                    source_partitions: 0,
                }],
                edges: Vec::new(),
            })
            .params(ModeParams::new(
                "bucket",
                BTreeMap::from([("buckets".to_string(), format!("{}", 48 + variant / 3))]),
            ))
            .subtask_loads(if variant % 3 == 1 {
                Vec::new()
            } else {
                vec![SubtaskLoad::default(); variant as usize + 1]
            })
            .build()
    }

    #[test]
    fn a_kept_context_brought_up_to_date_equals_a_rebuilt_one() {
        // Each step changes some fields and keeps others; the same context twice in a row is
        // what the host does for `is_applicable` then `align`.
        for variant in [0, 0, 1, 2, 2, 3, 5, 4, 0] {
            let original = full_context(variant);
            let rebuilt = unsafe { rebuild(ContextRef::new(&original)) };
            let kept = unsafe { with_lent(ContextRef::new(&original), |c| format!("{c:?}")) };
            assert_eq!(kept, format!("{rebuilt:?}"), "variant {variant}");
            assert_eq!(kept, format!("{original:?}"), "variant {variant}");
        }
        // A panic in the mode loses the kept context, not the next call.
        let original = full_context(3);
        let panicked = std::panic::catch_unwind(|| unsafe {
            with_lent(ContextRef::new(&original), |_| panic!("mode"))
        });
        assert!(panicked.is_err());
        let next = full_context(4);
        let kept = unsafe { with_lent(ContextRef::new(&next), |c| format!("{c:?}")) };
        assert_eq!(kept, format!("{next:?}"));
    }

    #[test]
    fn subtask_loads_cross_the_table_with_their_unknown_halves() {
        let original = loaded_context();
        let copy = unsafe { rebuild(ContextRef::new(&original)) };
        assert_eq!(copy.subtask_loads(), original.subtask_loads());
        assert_eq!(copy.subtask_loads().map(<[_]>::len), Some(3));

        let none = AlignmentContext::builder(3, 5, 128).build();
        let copy = unsafe { rebuild(ContextRef::new(&none)) };
        assert_eq!(copy.subtask_loads(), None);
    }

    /// A host of SDK 0.1.0 hands out a table that ends right before the 0.1.1 accessors: the
    /// plugin must read `None` there and never call past the end.
    #[test]
    fn a_table_of_a_0_1_0_host_reads_as_no_subtask_loads() {
        let original = loaded_context();
        // Past the end of an old table lies whatever memory follows it: here, accessors that
        // would make a load appear if they were called.
        unsafe extern "C" fn past_the_end_count(_: Data) -> usize {
            1
        }
        unsafe extern "C" fn past_the_end_load(_: Data, _: usize) -> FfiSubtaskLoad {
            FfiSubtaskLoad {
                busy_ratio: 0.5,
                records_in_per_second: 1.0,
            }
        }
        let old = ContextVTable {
            size: offset_of!(ContextVTable, subtask_load_count),
            subtask_load_count: past_the_end_count,
            subtask_load: past_the_end_load,
            ..HOST_VTABLE
        };
        let lent = ContextRef {
            data: (&original as *const AlignmentContext).cast(),
            vtable: &old,
            _borrow: PhantomData,
        };
        let copy = unsafe { rebuild(lent) };
        assert_eq!(copy.subtask_loads(), None);
        assert_eq!(copy.current_parallelism(), 3);
        assert_eq!(copy.target_parallelism(), 5);
    }

    /// The released 0.1.0 table: 15 pointer-sized accessors after the size. Appending must
    /// never move them.
    #[test]
    fn the_0_1_0_accessors_keep_their_offsets() {
        let word = size_of::<usize>();
        assert_eq!(offset_of!(ContextVTable, param), 15 * word);
        assert_eq!(offset_of!(ContextVTable, subtask_load_count), 16 * word);
        assert_eq!(offset_of!(ContextVTable, subtask_load), 17 * word);
        assert_eq!(offset_of!(ContextVTable, topology_generation), 18 * word);
        assert_eq!(offset_of!(ContextVTable, context_serial), 19 * word);
        assert_eq!(offset_of!(ContextVTable, metric_names), 20 * word);
        assert_eq!(size_of::<ContextVTable>(), 21 * word);
    }

    #[test]
    fn unknown_ship_tags_read_as_unknown() {
        assert_eq!(
            FfiShip {
                tag: 200,
                buckets: 3
            }
            .to_ship(),
            ShipStrategy::Unknown
        );
    }

    #[test]
    fn an_equal_job_graph_is_shared_between_calls_and_a_changed_one_is_copied() {
        let graph = |parallelism: u32| JobTopology {
            vertices: vec![
                TopologyVertex {
                    id: "a".into(),
                    name: "source".into(),
                    parallelism,
                    max_parallelism: 128,
                    source_partitions: 8,
                },
                TopologyVertex {
                    id: "b".into(),
                    name: "keyed".into(),
                    parallelism: 4,
                    max_parallelism: 128,
                    source_partitions: 0,
                },
            ],
            edges: vec![TopologyEdge {
                from: "a".into(),
                to: "b".into(),
                ship_strategy: ShipStrategy::Hash,
            }],
        };
        let ctx = |g: JobTopology| AlignmentContext::builder(4, 6, 128).topology(g).build();
        let (first, second, changed) = (ctx(graph(2)), ctx(graph(2)), ctx(graph(3)));
        // SAFETY: each context outlives its rebuild, as in the host's calls.
        let (a, b, c) = unsafe {
            (
                rebuild(ContextRef::new(&first)),
                rebuild(ContextRef::new(&second)),
                rebuild(ContextRef::new(&changed)),
            )
        };
        assert_eq!(a.topology(), first.topology());
        assert!(
            std::ptr::eq(a.topology(), b.topology()),
            "the second call reuses the copy"
        );
        assert_eq!(c.topology(), changed.topology());
        assert_eq!(c.topology().vertices[0].parallelism, 3);
    }

    /// The graph the cache tests start from: two vertices, each field distinct from what the
    /// variants below set, and a custom edge (whose bucket count is part of the strategy).
    fn base_graph() -> JobTopology {
        JobTopology {
            vertices: vec![
                TopologyVertex {
                    id: "a".into(),
                    name: "source".into(),
                    parallelism: 2,
                    max_parallelism: 128,
                    source_partitions: 8,
                },
                TopologyVertex {
                    id: "b".into(),
                    name: "router".into(),
                    parallelism: 4,
                    max_parallelism: 128,
                    source_partitions: 0,
                },
            ],
            edges: vec![TopologyEdge {
                from: "a".into(),
                to: "b".into(),
                ship_strategy: ShipStrategy::Custom { buckets: 48 },
            }],
        }
    }

    /// Each field the cache compares, changed alone. A cache that skipped any one comparison
    /// would hand the plugin the previous graph for that variant.
    #[test]
    fn a_job_graph_that_differs_in_any_compared_field_is_copied_not_reused() {
        type Change = fn(&mut JobTopology);
        let variants: [(&str, Change); 11] = [
            ("vertex id", |g| g.vertices[1].id = "c".into()),
            ("vertex name", |g| g.vertices[1].name = "keyed".into()),
            ("parallelism", |g| g.vertices[1].parallelism = 5),
            ("max parallelism", |g| g.vertices[1].max_parallelism = 256),
            ("source partitions", |g| g.vertices[0].source_partitions = 9),
            ("one more vertex", |g| {
                let mut extra = g.vertices[1].clone();
                extra.id = "c".into();
                g.vertices.push(extra);
            }),
            ("edge source", |g| g.edges[0].from = "c".into()),
            ("edge target", |g| g.edges[0].to = "c".into()),
            ("ship strategy", |g| {
                g.edges[0].ship_strategy = ShipStrategy::Hash
            }),
            ("custom buckets", |g| {
                g.edges[0].ship_strategy = ShipStrategy::Custom { buckets: 24 }
            }),
            ("one more edge", |g| {
                let mut extra = g.edges[0].clone();
                extra.ship_strategy = ShipStrategy::Forward;
                g.edges.push(extra);
            }),
        ];
        let ctx = |g: JobTopology| AlignmentContext::builder(4, 6, 128).topology(g).build();
        for (what, change) in variants {
            let mut graph = base_graph();
            change(&mut graph);
            assert_ne!(graph, base_graph(), "{what}: the variant changes nothing");
            let (base, again, changed) = (ctx(base_graph()), ctx(base_graph()), ctx(graph));
            // SAFETY: each context outlives its rebuild, as in the host's calls.
            let (first, second, copy) = unsafe {
                (
                    rebuild(ContextRef::new(&base)),
                    rebuild(ContextRef::new(&again)),
                    rebuild(ContextRef::new(&changed)),
                )
            };
            // The base graph is what the cache holds when the variant comes.
            assert!(
                std::ptr::eq(first.topology(), second.topology()),
                "{what}: the base graph was not cached"
            );
            assert_eq!(
                copy.topology(),
                changed.topology(),
                "{what}: the cached graph was reused for a different one"
            );
        }
    }

    thread_local! {
        /// How often the counting table below was asked for a vertex or an edge.
        static GRAPH_READS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }
    unsafe extern "C" fn counted_vertex(d: Data, i: usize) -> FfiVertex {
        GRAPH_READS.with(|n| n.set(n.get() + 1));
        unsafe { vertex(d, i) }
    }
    unsafe extern "C" fn counted_edge(d: Data, i: usize) -> FfiEdge {
        GRAPH_READS.with(|n| n.set(n.get() + 1));
        unsafe { edge(d, i) }
    }
    /// The host's table, counting the graph's reads.
    static COUNTING: std::sync::LazyLock<ContextVTable> =
        std::sync::LazyLock::new(|| ContextVTable {
            vertex: counted_vertex,
            edge: counted_edge,
            ..HOST_VTABLE
        });

    /// `ctx` lent through `table`, then brought up to date as the plugin side does; returns the
    /// plugin's graph and how many vertices and edges it read through the table.
    fn lend(ctx: &AlignmentContext, table: &'static ContextVTable) -> (Arc<JobTopology>, usize) {
        let lent = ContextRef {
            data: (ctx as *const AlignmentContext).cast(),
            vtable: table,
            _borrow: PhantomData,
        };
        let before = GRAPH_READS.with(std::cell::Cell::get);
        // SAFETY: `ctx` outlives the call.
        let graph = unsafe { with_lent(lent, |c| Arc::clone(&c.details.get().topology)) };
        (graph, GRAPH_READS.with(std::cell::Cell::get) - before)
    }

    fn on(graph: &Arc<JobTopology>) -> AlignmentContext {
        AlignmentContext::builder(4, 6, 128)
            .shared_topology(Arc::clone(graph))
            .build()
    }

    #[test]
    fn the_same_shared_graph_is_reused_without_reading_it() {
        let graph = Arc::new(base_graph());
        let (first, _) = lend(&on(&graph), &COUNTING);
        assert_eq!(*first, base_graph());
        // Another vertex of the same job: same shared graph, same generation.
        let (second, reads) = lend(&on(&graph), &COUNTING);
        assert!(Arc::ptr_eq(&first, &second), "the kept copy is reused");
        assert_eq!(
            reads, 0,
            "the graph was read although its generation was the same"
        );
    }

    #[test]
    fn a_new_graph_gets_a_new_generation_and_is_compared_or_copied() {
        let graph = Arc::new(base_graph());
        let (first, _) = lend(&on(&graph), &COUNTING);
        // The next cycle's graph: equal, but another allocation. Compared once, then kept.
        let next_cycle = Arc::new(base_graph());
        let (second, reads) = lend(&on(&next_cycle), &COUNTING);
        assert!(
            reads > 0,
            "a new graph was taken for the kept one without comparing"
        );
        assert!(
            Arc::ptr_eq(&first, &second),
            "an equal graph reuses the kept copy"
        );
        let (_, reads) = lend(&on(&next_cycle), &COUNTING);
        assert_eq!(
            reads, 0,
            "the compared graph's generation was not remembered"
        );
        // A rescaled graph: a new generation, and a copy of what was lent.
        let mut rescaled = base_graph();
        rescaled.vertices[1].parallelism = 6;
        let (third, _) = lend(&on(&Arc::new(rescaled.clone())), &COUNTING);
        assert_eq!(*third, rescaled);
        assert!(!Arc::ptr_eq(&first, &third));
    }

    /// A host older than 0.1.2 has no generation: the plugin compares every time, and never
    /// calls past the end of the table.
    #[test]
    fn a_table_without_generations_falls_back_to_comparing() {
        // Past the end of an old table: a generation that would claim every graph is the same.
        unsafe extern "C" fn past_the_end_generation(_: Data) -> u64 {
            7
        }
        // And a serial that would claim every context is the same.
        unsafe extern "C" fn past_the_end_serial(_: Data) -> u64 {
            9
        }
        static OLD: std::sync::LazyLock<ContextVTable> =
            std::sync::LazyLock::new(|| ContextVTable {
                size: offset_of!(ContextVTable, topology_generation),
                topology_generation: past_the_end_generation,
                context_serial: past_the_end_serial,
                vertex: counted_vertex,
                edge: counted_edge,
                ..HOST_VTABLE
            });
        let graph = Arc::new(base_graph());
        let (first, _) = lend(&on(&graph), &OLD);
        let (second, reads) = lend(&on(&graph), &OLD);
        assert!(
            Arc::ptr_eq(&first, &second),
            "an equal graph reuses the kept copy"
        );
        assert!(reads > 0, "without generations the graph must be compared");
        let mut other = base_graph();
        other.edges[0].ship_strategy = ShipStrategy::Hash;
        let (third, _) = lend(&on(&Arc::new(other.clone())), &OLD);
        assert_eq!(
            *third, other,
            "the old table's graph was taken for the kept one"
        );
    }

    fn of_job(job: &str, graph: &Arc<JobTopology>) -> AlignmentContext {
        AlignmentContext::builder(4, 6, 128)
            .identity(job, "b", "router")
            .shared_topology(Arc::clone(graph))
            .build()
    }

    /// The host keeps each job's graph from one decision cycle to the next while it does not
    /// change: lent again after the other jobs', each is reused without being read.
    #[test]
    fn graphs_the_host_keeps_are_not_read_again_in_later_cycles() {
        let mut other = base_graph();
        other.vertices[0].id = "z".into();
        let (a, b) = (Arc::new(base_graph()), Arc::new(other));
        let (first_a, _) = lend(&of_job("job-a", &a), &COUNTING);
        let (first_b, _) = lend(&of_job("job-b", &b), &COUNTING);
        for cycle in 0..3 {
            let (again_a, reads_a) = lend(&of_job("job-a", &a), &COUNTING);
            let (again_b, reads_b) = lend(&of_job("job-b", &b), &COUNTING);
            assert_eq!(
                (reads_a, reads_b),
                (0, 0),
                "cycle {cycle}: a kept graph was read"
            );
            assert!(Arc::ptr_eq(&first_a, &again_a) && Arc::ptr_eq(&first_b, &again_b));
        }
        // A job whose graph changed gets its new graph.
        let mut rescaled = base_graph();
        rescaled.vertices[1].parallelism = 6;
        let (new_a, _) = lend(&of_job("job-a", &Arc::new(rescaled.clone())), &COUNTING);
        assert_eq!(*new_a, rescaled);
    }

    /// A host aligns the jobs of a fleet in turn: each job's graph is kept for the job, so the
    /// next job's graph does not push it out.
    #[test]
    fn each_job_keeps_its_graph_while_other_jobs_are_aligned() {
        let mut other = base_graph();
        other.vertices[0].id = "z".into();
        let (a, b) = (Arc::new(base_graph()), Arc::new(other.clone()));
        let (first_a, _) = lend(&of_job("job-a", &a), &COUNTING);
        let (first_b, _) = lend(&of_job("job-b", &b), &COUNTING);
        assert_eq!(*first_b, other);
        // The next cycle: both graphs new but equal, compared once each and reused.
        let (a2, b2) = (Arc::new(base_graph()), Arc::new(other.clone()));
        let (again_a, _) = lend(&of_job("job-a", &a2), &COUNTING);
        let (again_b, _) = lend(&of_job("job-b", &b2), &COUNTING);
        assert!(
            Arc::ptr_eq(&first_a, &again_a),
            "job-a's graph was not kept"
        );
        assert!(
            Arc::ptr_eq(&first_b, &again_b),
            "job-b's graph was not kept"
        );
        // Another job lent job-a's graph gets it compared, not taken on the job's word.
        let (c, _) = lend(&of_job("job-c", &b2), &COUNTING);
        assert_eq!(*c, other);
    }

    /// Past [`KEPT_GRAPHS`] jobs the thread starts over; every graph still reads as lent.
    #[test]
    fn more_jobs_than_are_kept_still_read_their_own_graphs() {
        let graph_of = |i: usize| {
            let mut g = base_graph();
            g.vertices[0].parallelism = 1 + (i % 7) as u32;
            g
        };
        for round in 0..2 {
            for i in (0..=KEPT_GRAPHS).step_by(1 + round) {
                let g = graph_of(i);
                let (read, _) = lend(
                    &of_job(&format!("job-{i}"), &Arc::new(g.clone())),
                    &COUNTING,
                );
                assert_eq!(*read, g, "job {i}, round {round}");
            }
        }
    }

    thread_local! {
        /// How often the counting table below was asked for a context's numbers.
        static NUMBER_READS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }
    unsafe extern "C" fn counted_numbers(d: Data) -> FfiNumbers {
        NUMBER_READS.with(|n| n.set(n.get() + 1));
        unsafe { numbers(d) }
    }

    /// How many times lending `ctx` through a table that counts read its numbers, and what the
    /// plugin saw.
    fn lend_counting_numbers(ctx: &AlignmentContext) -> (usize, String) {
        static TABLE: std::sync::LazyLock<ContextVTable> =
            std::sync::LazyLock::new(|| ContextVTable {
                numbers: counted_numbers,
                ..HOST_VTABLE
            });
        let lent = ContextRef {
            data: (ctx as *const AlignmentContext).cast(),
            vtable: &*TABLE,
            _borrow: PhantomData,
        };
        let before = NUMBER_READS.with(std::cell::Cell::get);
        // SAFETY: `ctx` outlives the call.
        let seen = unsafe { with_lent(lent, |c| format!("{c:?}")) };
        (NUMBER_READS.with(std::cell::Cell::get) - before, seen)
    }

    #[test]
    fn the_same_context_lent_again_is_used_as_kept() {
        let ctx = full_context(2);
        let (reads, seen) = lend_counting_numbers(&ctx);
        assert_eq!(reads, 1);
        assert_eq!(seen, format!("{ctx:?}"));
        // `align` after `is_applicable`: the same context, nothing read again.
        let (reads, seen) = lend_counting_numbers(&ctx);
        assert_eq!(reads, 0, "the same context was read again");
        assert_eq!(seen, format!("{ctx:?}"));
        // A clone is the same context.
        let (reads, _) = lend_counting_numbers(&ctx.clone());
        assert_eq!(reads, 0);
    }

    #[test]
    fn another_context_is_read_even_when_it_looks_the_same() {
        let (a, b) = (full_context(2), full_context(2));
        lend_counting_numbers(&a);
        let (reads, _) = lend_counting_numbers(&b);
        assert_eq!(reads, 1, "a new context was taken for the kept one");
        // Different contents, one after the other: each seen as lent.
        for variant in [3, 0, 5] {
            let ctx = full_context(variant);
            let (reads, seen) = lend_counting_numbers(&ctx);
            assert_eq!(reads, 1);
            assert_eq!(seen, format!("{ctx:?}"), "variant {variant}");
        }
    }

    #[test]
    fn serials_are_distinct_per_build_and_shared_by_clones() {
        let builder = AlignmentContext::builder(1, 2, 8);
        let (a, b) = (builder.clone().build(), builder.build());
        assert_ne!(a.serial, 0);
        assert_ne!(a.serial, b.serial);
        assert_eq!(a.clone().serial, a.serial);
        // A copy brought up to date in place no longer claims the serial it was built with.
        let mut kept = a.clone();
        // SAFETY: `b` outlives the call.
        unsafe { refresh(&mut kept, ContextRef::new(&b)) };
        assert_eq!(kept.serial, 0);
    }

    thread_local! {
        /// How often the counting table below was asked for a metric.
        static METRIC_READS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }
    unsafe extern "C" fn counted_metric(d: Data, i: usize) -> FfiMetric {
        METRIC_READS.with(|n| n.set(n.get() + 1));
        unsafe { metric(d, i) }
    }

    /// Lends `ctx` through `table` as the plugin side does; returns what the mode saw.
    fn seen_through(ctx: &AlignmentContext, table: &'static ContextVTable) -> String {
        let lent = ContextRef {
            data: (ctx as *const AlignmentContext).cast(),
            vtable: table,
            _borrow: PhantomData,
        };
        // SAFETY: `ctx` outlives the call.
        unsafe { with_lent(lent, |c| format!("{c:?}")) }
    }

    fn with_metrics(names: &[&str], x: f64) -> AlignmentContext {
        let metrics = names
            .iter()
            .map(|n| {
                (
                    n.to_string(),
                    EvaluatedMetric {
                        current: x,
                        average: -x,
                    },
                )
            })
            .collect();
        AlignmentContext::builder(4, 6, 128)
            .metrics(metrics)
            .build()
    }

    /// Contexts with the same metric names, one after the other: the kept names stay, the
    /// values are the lent ones; other names are seen as lent.
    #[test]
    fn metric_names_numbered_alike_keep_the_kept_names_and_take_the_values() {
        static TABLE: std::sync::LazyLock<ContextVTable> =
            std::sync::LazyLock::new(|| ContextVTable {
                metric: counted_metric,
                ..HOST_VTABLE
            });
        let names = ["LAG", "LOAD", "TRUE_PROCESSING_RATE"];
        for (step, (names, x)) in [
            (&names[..], 1.0),
            (&names[..], 2.0),
            (&names[..2], 3.0),
            (&["LAG", "LOAF"][..], 4.0),
            (&names[..], 5.0),
            (&names[..], 6.0),
            (&[][..], 7.0),
            (&names[..], 8.0),
        ]
        .into_iter()
        .enumerate()
        {
            let ctx = with_metrics(names, x);
            let reads = METRIC_READS.with(std::cell::Cell::get);
            assert_eq!(
                seen_through(&ctx, &TABLE),
                format!("{ctx:?}"),
                "step {step}"
            );
            assert_eq!(
                METRIC_READS.with(std::cell::Cell::get) - reads,
                names.len(),
                "step {step}: each metric is read once"
            );
        }
    }

    /// A mode that reads only the numbers, ship strategies and parameters has nothing else
    /// read through the table; one that reads a metric has the details read once, for the
    /// context it is lent, however many times it reads them.
    #[test]
    fn the_details_are_read_only_when_the_mode_reads_them() {
        static TABLE: std::sync::LazyLock<ContextVTable> =
            std::sync::LazyLock::new(|| ContextVTable {
                metric: counted_metric,
                ..HOST_VTABLE
            });
        let reads = || METRIC_READS.with(std::cell::Cell::get);
        // The thread's first call copies the whole context, to keep it.
        let first = with_metrics(&["LAG"], 0.0);
        // SAFETY: `first` outlives the call.
        unsafe { with_lent(ContextRef::new(&first), |_| ()) };
        for (step, x) in [1.0, 2.0, 3.0].into_iter().enumerate() {
            let ctx = with_metrics(&["LAG", "LOAD"], x);
            let lent = || ContextRef {
                data: (&ctx as *const AlignmentContext).cast(),
                vtable: &*TABLE,
                _borrow: PhantomData,
            };
            let before = reads();
            // SAFETY: `ctx` outlives the calls.
            let target = unsafe { with_lent(lent(), |c| c.target_parallelism()) };
            assert_eq!((target, reads() - before), (6, 0), "step {step}");
            // SAFETY: as above.
            let (load, again) = unsafe {
                with_lent(lent(), |c| {
                    (c.metric("LOAD").map(|m| m.current), c.metrics().len())
                })
            };
            assert_eq!((load, again), (Some(x), 2), "step {step}");
            assert_eq!(reads() - before, 2, "step {step}: each metric read once");
            // A clone outlives the call: complete.
            // SAFETY: as above.
            let clone = unsafe { with_lent(lent(), AlignmentContext::clone) };
            assert_eq!(format!("{clone:?}"), format!("{ctx:?}"), "step {step}");
        }
    }

    /// A host older than 0.1.3 has no number for the names: the plugin compares them, and
    /// never calls past the end of the table.
    #[test]
    fn a_table_without_metric_name_numbers_compares_the_names() {
        // Past the end of an old table: a number that would claim every list is the same.
        unsafe extern "C" fn past_the_end_names(_: Data) -> u64 {
            5
        }
        static OLD: std::sync::LazyLock<ContextVTable> =
            std::sync::LazyLock::new(|| ContextVTable {
                size: offset_of!(ContextVTable, metric_names),
                metric_names: past_the_end_names,
                ..HOST_VTABLE
            });
        for (names, x) in [
            (&["LAG", "LOAD"][..], 1.0),
            (&["LAG", "LOAF"][..], 2.0),
            (&["LAG", "LOAD"][..], 3.0),
        ] {
            let ctx = with_metrics(names, x);
            assert_eq!(seen_through(&ctx, &OLD), format!("{ctx:?}"));
        }
    }

    /// A kept copy whose names were numbered by the plugin's own builder never claims the
    /// host's number: only the number lent with the names is kept.
    #[test]
    fn only_the_lent_number_names_the_kept_metric_names() {
        let ctx = with_metrics(&["A", "B"], 1.0);
        // SAFETY: `ctx` outlives the call.
        let copy = unsafe { rebuild(ContextRef::new(&ctx)) };
        assert_eq!(
            copy.details.get().metric_names,
            ctx.details.get().metric_names
        );
        let mut kept = with_metrics(&["A", "C"], 1.0);
        let other = with_metrics(&["A", "B"], 2.0);
        // SAFETY: `other` outlives the call.
        unsafe { refresh(&mut kept, ContextRef::new(&other)) };
        assert_eq!(
            kept.details.get().metric_names,
            0,
            "names assigned in place are not numbered"
        );
        assert_eq!(format!("{kept:?}"), format!("{other:?}"));
        // SAFETY: as above.
        unsafe { refresh(&mut kept, ContextRef::new(&other)) };
        assert_eq!(
            kept.details.get().metric_names,
            other.details.get().metric_names
        );
    }
}
