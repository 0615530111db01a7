//! A plugin's mode object seen as a [`HostMode`], like any custom mode.

use abi_stable::std_types::{RResult, RStr, Tuple2};
use flowscale_sdk::abi::{ContextRef, FfiError, FfiErrorKind, FfiModeBox, ParamsRef};
use flowscale_sdk::{AlignmentContext, ModeError, ModeParams};

use super::call_clock::plugin_call;
use crate::alignment::HostMode;

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

impl HostMode for PluginMode {
    /// A fault of the plugin's gate is returned as is: the alignment guard reports it.
    fn is_applicable(&self, ctx: &AlignmentContext) -> Result<bool, ModeError> {
        let _timed = plugin_call();
        match self.inner.is_applicable(ContextRef::new(ctx)) {
            RResult::ROk(applicable) => Ok(applicable),
            RResult::RErr(err) => Err(self.error(err)),
        }
    }

    fn align(&self, ctx: &AlignmentContext) -> Result<u32, ModeError> {
        let _timed = plugin_call();
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
        let _timed = plugin_call();
        match self.inner.validate(view) {
            RResult::ROk(()) => Ok(()),
            RResult::RErr(err) => Err(self.error(err)),
        }
    }
}
