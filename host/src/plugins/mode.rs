//! A plugin's mode object seen as an ordinary [`AlignmentMode`].

use std::cell::RefCell;

use abi_stable::std_types::{RResult, RStr, Tuple2};
use flowscale_sdk::abi::{ContextRef, FfiError, FfiErrorKind, FfiModeBox, ParamsRef};
use flowscale_sdk::{AlignmentContext, AlignmentMode, ModeError, ModeParams};

thread_local! {
    /// A fault of `is_applicable`, kept for the `align` call on the same context that follows
    /// it, so that the fault is reported instead of silently skipping the vertex.
    static PENDING_FAULT: RefCell<Option<(usize, ModeError)>> = const { RefCell::new(None) };
}

/// A mode exported by a plugin. Every call goes through the SDK's panic guard inside the plugin.
pub(super) struct PluginMode {
    id: String,
    plugin: String,
    inner: FfiModeBox,
}

impl PluginMode {
    pub(super) fn new(id: String, plugin: String, inner: FfiModeBox) -> PluginMode {
        PluginMode { id, plugin, inner }
    }

    /// A mode's own error passes through as is; anything else (a caught panic, an unknown id)
    /// is prefixed with the plugin so that the event points at it.
    fn error(&self, err: FfiError) -> ModeError {
        if err.kind == FfiErrorKind::MODE {
            ModeError::new(err.message.into_string())
        } else {
            ModeError::new(format!(
                "plugin `{}` (mode `{}`): {}",
                self.plugin, self.id, err.message
            ))
        }
    }
}

fn key(ctx: &AlignmentContext) -> usize {
    ctx as *const AlignmentContext as usize
}

impl AlignmentMode for PluginMode {
    /// A fault here makes the vertex applicable and is returned by the following `align`, so
    /// that the host's guard reports it.
    fn is_applicable(&self, ctx: &AlignmentContext) -> bool {
        let (applicable, fault) = match self.inner.is_applicable(ContextRef::new(ctx)) {
            RResult::ROk(applicable) => (applicable, None),
            RResult::RErr(err) => (true, Some((key(ctx), self.error(err)))),
        };
        // Always overwritten, so that a fault never outlives the decision it belongs to (a
        // later context may live at the same address).
        PENDING_FAULT.with(|p| *p.borrow_mut() = fault);
        applicable
    }

    fn align(&self, ctx: &AlignmentContext) -> Result<u32, ModeError> {
        let pending = PENDING_FAULT.with(|p| p.borrow_mut().take());
        if let Some((at, err)) = pending {
            if at == key(ctx) {
                return Err(err);
            }
        }
        match self.inner.align(ContextRef::new(ctx)) {
            RResult::ROk(p) => Ok(p),
            RResult::RErr(err) => Err(self.error(err)),
        }
    }

    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        let entries: Vec<Tuple2<RStr<'_>, RStr<'_>>> = params
            .iter()
            .map(|(k, v)| Tuple2(RStr::from_str(k), RStr::from_str(v)))
            .collect();
        let view = ParamsRef {
            mode_name: RStr::from_str(params.mode_name()),
            entries: entries.as_slice().into(),
        };
        match self.inner.validate(view) {
            RResult::ROk(()) => Ok(()),
            RResult::RErr(err) => Err(self.error(err)),
        }
    }
}
