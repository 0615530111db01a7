//! How the answers of the kinds table's entry points come back (`kinds.rs`): the host hands
//! each call a table of its own callbacks over its own data, append-only like the context's
//! accessor tables, so that nothing the plugin allocates crosses the boundary.

use std::ffi::c_void;
use std::mem::{offset_of, size_of};

use super::context::{FfiMetric, FfiStr};
use super::root::{FfiError, FfiErrorKind};
use crate::context::EvaluatedMetric;
use crate::evaluator::VertexMetrics;
use crate::executor::ScalingSummary;

/// An opaque object of the plugin (an evaluator or an executor).
pub type Object = *mut c_void;

/// Where an entry point sends its answer and its error: host callbacks over the host's data.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ReplyRef {
    data: *mut c_void,
    vtable: *const ReplyVTable,
}

/// The host's reply callbacks. Append-only, like the context's accessor table.
#[repr(C)]
pub struct ReplyVTable {
    /// `size_of::<ReplyVTable>()` in the host that built it.
    pub size: usize,
    error: unsafe extern "C" fn(*mut c_void, u8, FfiStr),
    metric: unsafe extern "C" fn(*mut c_void, FfiMetric),
    priority: unsafe extern "C" fn(*mut c_void, i32),
    veto: unsafe extern "C" fn(*mut c_void, FfiStr),
    summary: unsafe extern "C" fn(*mut c_void, FfiStr, u32, u32),
    summary_metric: unsafe extern "C" fn(*mut c_void, FfiMetric),
}

/// The status an entry point returns: 0 when it answered, else the [`FfiErrorKind`] of the
/// error it reported through [`ReplyRef`].
pub type Status = u8;

/// What the host collects of one call's answer.
#[derive(Default)]
pub(super) struct Collected {
    pub(super) error: Option<FfiError>,
    pub(super) metrics: VertexMetrics,
    pub(super) priority: i32,
    pub(super) veto: Option<String>,
    pub(super) summaries: Vec<ScalingSummary>,
}

fn collected<'a>(data: *mut c_void) -> &'a mut Collected {
    // SAFETY: `data` always comes from `Collected::reply`, which borrows the collector
    // mutably for the one call the reply is handed to.
    unsafe { &mut *data.cast::<Collected>() }
}

unsafe extern "C" fn reply_error(d: *mut c_void, kind: u8, message: FfiStr) {
    // SAFETY: the plugin lends the message for the duration of this callback.
    let message = unsafe { message.to_owned_string() };
    collected(d).error = Some(FfiError::new(FfiErrorKind(kind), message));
}
unsafe extern "C" fn reply_metric(d: *mut c_void, metric: FfiMetric) {
    // SAFETY: as above.
    let metric = unsafe { metric.copy_out() };
    collected(d).metrics.push(metric);
}
unsafe extern "C" fn reply_priority(d: *mut c_void, priority: i32) {
    collected(d).priority = priority;
}
unsafe extern "C" fn reply_veto(d: *mut c_void, why: FfiStr) {
    // SAFETY: as above.
    collected(d).veto = Some(unsafe { why.to_owned_string() });
}
unsafe extern "C" fn reply_summary(d: *mut c_void, vertex: FfiStr, current: u32, new: u32) {
    // SAFETY: as above.
    let vertex_id = unsafe { vertex.to_owned_string() };
    collected(d).summaries.push(ScalingSummary {
        vertex_id,
        current_parallelism: current,
        new_parallelism: new,
        metrics: Vec::new(),
    });
}
unsafe extern "C" fn reply_summary_metric(d: *mut c_void, metric: FfiMetric) {
    // SAFETY: as above.
    let metric = unsafe { metric.copy_out() };
    if let Some(last) = collected(d).summaries.last_mut() {
        last.metrics.push(metric);
    }
}

/// The reply table of this SDK's host side.
static HOST_REPLY: ReplyVTable = ReplyVTable {
    size: size_of::<ReplyVTable>(),
    error: reply_error,
    metric: reply_metric,
    priority: reply_priority,
    veto: reply_veto,
    summary: reply_summary,
    summary_metric: reply_summary_metric,
};

impl Collected {
    pub(super) fn reply(&mut self) -> ReplyRef {
        ReplyRef {
            data: (self as *mut Collected).cast(),
            vtable: &HOST_REPLY,
        }
    }

    /// The call's error when its status says it failed (one without a message still fails).
    pub(super) fn check(&mut self, status: Status) -> Result<(), FfiError> {
        if status == 0 {
            return Ok(());
        }
        Err(self.error.take().unwrap_or_else(|| {
            FfiError::new(
                FfiErrorKind(status),
                "the plugin reported a failure without a message",
            )
        }))
    }
}

/// Plugin side: the answer an entry point sends back.
pub(super) struct Reply(ReplyRef);

impl Reply {
    /// # Safety
    /// `r` must be the reply the host handed to the running call.
    pub(super) unsafe fn new(r: ReplyRef) -> Reply {
        Reply(r)
    }

    fn has(&self, offset: usize) -> bool {
        // SAFETY: the host's table is live for the call; its size comes first.
        let size = unsafe { (*self.0.vtable).size };
        offset + size_of::<usize>() <= size
    }

    pub(super) fn error(&self, err: &FfiError) -> Status {
        if self.has(offset_of!(ReplyVTable, error)) {
            // SAFETY: present per `has`; the message outlives the callback.
            unsafe { ((*self.0.vtable).error)(self.0.data, err.kind.0, FfiStr::new(&err.message)) }
        }
        err.kind.0.max(1)
    }

    pub(super) fn metric(&self, name: &str, m: &EvaluatedMetric) {
        // SAFETY: as in `error`.
        unsafe { ((*self.0.vtable).metric)(self.0.data, FfiMetric::lend(Some((name, m)))) }
    }

    pub(super) fn priority(&self, priority: i32) {
        // SAFETY: as in `error`.
        unsafe { ((*self.0.vtable).priority)(self.0.data, priority) }
    }

    pub(super) fn veto(&self, why: &str) {
        // SAFETY: as in `error`.
        unsafe { ((*self.0.vtable).veto)(self.0.data, FfiStr::new(why)) }
    }

    pub(super) fn summary(&self, s: &ScalingSummary) {
        // SAFETY: as in `error`.
        unsafe {
            let vt = &*self.0.vtable;
            (vt.summary)(
                self.0.data,
                FfiStr::new(&s.vertex_id),
                s.current_parallelism,
                s.new_parallelism,
            );
            for (name, m) in &s.metrics {
                (vt.summary_metric)(self.0.data, FfiMetric::lend(Some((name, m))));
            }
        }
    }
}
