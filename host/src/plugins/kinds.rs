//! What one plugin file gives the host ([`Exports`]), and a plugin's metric evaluators and
//! scaling executors seen as [`HostEvaluator`]s and [`HostExecutor`]s, like any custom ones.
//!
//! They cross the boundary through the plugin's kinds table (SDK 0.1.3, see
//! `flowscale_sdk::abi::KindsTable`): every call is caught inside the plugin, so a panic comes
//! back as an error naming it, and every call is timed on the calling thread's [`CallClock`]
//! like a mode's.
//!
//! [`CallClock`]: super::CallClock

use std::path::Path;
use std::sync::Arc;

use flowscale_sdk::abi::{
    EvaluatorHandle, ExecutorHandle, FfiError, FfiErrorKind, KindsCalls, KindsTable, ManifestInfo,
};
use flowscale_sdk::{
    EvaluatorContext, ExecutorContext, ExecutorVerdict, ModeError, ModeParams, VertexMetrics,
};

use super::call_clock::plugin_call;
use super::probe::{error_chain, kinds_table};
use super::report::Refusal;
use crate::alignment::{CustomMode, ModeOrigin};
use crate::scaling::{CustomEvaluator, CustomExecutor, HostEvaluator, HostExecutor};

/// Everything one plugin file (one version of it) registers.
#[derive(Debug, Clone, Default)]
pub(crate) struct Exports {
    /// Its alignment modes.
    pub(crate) modes: Vec<CustomMode>,
    /// Its metric evaluators.
    pub(crate) evaluators: Vec<CustomEvaluator>,
    /// Its scaling executors.
    pub(crate) executors: Vec<CustomExecutor>,
}

impl Exports {
    /// Where each of its objects comes from.
    pub(crate) fn origins(&self) -> impl Iterator<Item = &ModeOrigin> {
        self.modes
            .iter()
            .map(|m| &m.origin)
            .chain(self.evaluators.iter().map(|e| &e.origin))
            .chain(self.executors.iter().map(|x| &x.origin))
    }
}

/// The error a plugin call returned: the object's own error as is, anything else (a caught
/// panic, an unknown id) prefixed with the plugin and the object so that the event points at
/// them.
fn plugin_error(plugin: &str, kind: &str, id: &str, err: FfiError) -> ModeError {
    if err.kind == FfiErrorKind::MODE {
        ModeError::new(err.message.into_string())
    } else {
        ModeError::new(format!(
            "plugin `{plugin}` ({kind} `{id}`): {}",
            err.message
        ))
    }
}

/// A metric evaluator exported by a plugin.
pub(super) struct PluginEvaluator {
    id: String,
    plugin: String,
    handle: EvaluatorHandle,
}

impl HostEvaluator for PluginEvaluator {
    fn evaluate(&self, ctx: &EvaluatorContext) -> Result<VertexMetrics, ModeError> {
        let _timed = plugin_call();
        self.handle
            .evaluate(ctx)
            .map_err(|e| plugin_error(&self.plugin, "evaluator", &self.id, e))
    }

    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        let _timed = plugin_call();
        self.handle
            .validate(params)
            .map_err(|e| plugin_error(&self.plugin, "evaluator", &self.id, e))
    }
}

/// A scaling executor exported by a plugin. Its priority is asked once, when it is created
/// (it places the executor in a chain; a plugin that cannot say it is refused).
pub(super) struct PluginExecutor {
    id: String,
    plugin: String,
    priority: i32,
    handle: ExecutorHandle,
}

impl HostExecutor for PluginExecutor {
    fn priority(&self) -> i32 {
        self.priority
    }

    fn apply(&self, ctx: &ExecutorContext) -> Result<ExecutorVerdict, ModeError> {
        let _timed = plugin_call();
        self.handle
            .apply(ctx)
            .map_err(|e| plugin_error(&self.plugin, "executor", &self.id, e))
    }

    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        let _timed = plugin_call();
        self.handle
            .validate(params)
            .map_err(|e| plugin_error(&self.plugin, "executor", &self.id, e))
    }
}

/// The entry points of the kinds table of the library at `real`, which abi_stable has mapped
/// for good: the handle opened here is never closed either (the library could not be unloaded
/// anyway, and the entry points must stay valid for the life of the process).
fn kinds_calls(real: &Path) -> Result<KindsCalls, Refusal> {
    // SAFETY: the library is already loaded (its initialisers ran when it was probed and
    // mapped); this only takes another reference to it.
    let library = unsafe { libloading::Library::new(real) }
        .map_err(|e| Refusal::NotLoadable(error_chain(&e)))?;
    // SAFETY: the table is read through `KindsTable::read`, which checks it first; the library
    // stays loaded (the handle is leaked below).
    let calls = unsafe {
        let table = kinds_table(&library).ok_or_else(|| {
            Refusal::BadManifest(flowscale_sdk::abi::ManifestError::Corrupt(
                "the kinds table is gone since the probe".into(),
            ))
        })?;
        KindsTable::read(table).map_err(Refusal::BadManifest)?.1
    };
    std::mem::forget(library);
    Ok(calls)
}

/// Creates the evaluators and executors `info` lists from the library at `real` (the checked
/// path of `file`), into `exports`. A constructor's failure (or a panic in it, or in an
/// executor's `priority`) refuses the file, as a mode's does.
pub(super) fn create(
    file: &Path,
    real: &Path,
    info: &ManifestInfo,
    exports: &mut Exports,
) -> Result<(), Refusal> {
    if info.evaluators.is_empty() && info.executors.is_empty() {
        return Ok(());
    }
    let calls = kinds_calls(real)?;
    let origin = ModeOrigin::Plugin {
        file: file.to_path_buf(),
        plugin: info.plugin_name.clone(),
        version: info.plugin_version.clone(),
    };
    let refused = |kind: &'static str, id: &str, err: FfiError| Refusal::KindConstructor {
        kind,
        id: id.to_string(),
        message: err.message.into_string(),
    };
    for (id, description) in &info.evaluators {
        let handle = {
            let _timed = plugin_call();
            calls.new_evaluator(id)
        }
        .map_err(|e| refused("evaluator", id, e))?;
        exports.evaluators.push(CustomEvaluator {
            id: id.clone(),
            description: description.clone(),
            origin: origin.clone(),
            evaluator: Arc::new(PluginEvaluator {
                id: id.clone(),
                plugin: info.plugin_name.clone(),
                handle,
            }),
        });
    }
    for (id, description) in &info.executors {
        let (handle, priority) = {
            let _timed = plugin_call();
            let handle = calls
                .new_executor(id)
                .map_err(|e| refused("executor", id, e))?;
            let priority = handle.priority().map_err(|e| refused("executor", id, e))?;
            (handle, priority)
        };
        exports.executors.push(CustomExecutor {
            id: id.clone(),
            description: description.clone(),
            origin: origin.clone(),
            executor: Arc::new(PluginExecutor {
                id: id.clone(),
                plugin: info.plugin_name.clone(),
                priority,
                handle,
            }),
        });
    }
    Ok(())
}
