//! The binary boundary between the host and a plugin `cdylib`.
//!
//! Plugin authors only need [`crate::export_plugin!`]; the rest is public because the macro
//! expands to it in the plugin crate, and because the host uses it to probe and load plugins.
//!
//! Three layers, checked in this order by the host:
//!
//! 1. [`PluginManifest`], a `#[no_mangle]` plain-C static read with `dlopen`/`dlsym` alone:
//!    magic, manifest format, SDK version, plugin name and version, whether panics unwind, and
//!    the implementation ids with descriptions. Most bad files are refused here, before
//!    abi_stable maps them (it never unmaps a library).
//! 2. The abi_stable root module ([`PluginRootRef`]): version and layout checked by abi_stable;
//!    hands out [`FfiModeBox`] mode objects whose every method catches panics inside the plugin.
//! 3. The context ([`ContextRef`]): an append-only accessor table outside the layout check, so
//!    that the context can grow without orphaning built plugins (see [`context`]).
//!
//! Beside them (SDK 0.1.3), [`KindsTable`]: a second `#[no_mangle]` plain-C static listing the
//! plugin's metric evaluators and scaling executors and the `extern "C"` entry points that
//! create and call them, size-prefixed and append-only like the context's table. It is not part
//! of the root module because abi_stable refuses a plugin whose root module has fewer fields
//! than the host's: growing [`PluginRoot`] would orphan every plugin built before. A plugin
//! without the symbol exports neither kind.

pub mod context;
mod generation;
pub mod guest;
#[doc(hidden)]
pub mod guest_kinds;
mod kinds;
mod lend;
mod manifest;
mod reply;
mod root;

pub use context::{ContextRef, ContextVTable};
pub use guest::ModeFactory;
pub use guest_kinds::{EvaluatorFactory, ExecutorFactory};
pub use kinds::{
    EvaluatorHandle, ExecutorHandle, GuestEntries, KINDS_FORMAT, KINDS_MAGIC, KINDS_SYMBOL,
    KindsCalls, KindsInfo, KindsTable,
};
pub use lend::{
    EvaluatorRef, EvaluatorVTable, ExecutorRef, ExecutorVTable, FfiSteps, FfiValues, SharedRef,
    SharedVTable,
};
pub use manifest::{
    MANIFEST_FORMAT, MANIFEST_MAGIC, MANIFEST_SYMBOL, ManifestError, ManifestInfo, ManifestMode,
    ManifestStr, PluginManifest, sdk_versions_compatible,
};
pub use reply::{Object, ReplyRef, ReplyVTable, Status};
pub use root::{
    FfiError, FfiErrorKind, FfiMode, FfiMode_TO, FfiModeBox, HostLogFn, HostLogger, LogLevel,
    ParamsRef, PluginRoot, PluginRootRef,
};

/// The symbol abi_stable looks up for a library's root module
/// (`abi_stable::library::ROOT_MODULE_LOADER_NAME`), spelled out because `export_name` needs a
/// literal; a unit test keeps the two equal.
#[doc(hidden)]
#[macro_export]
macro_rules! __root_module_loader_name {
    () => {
        "_1as_0lib_1header_0root_bmodule_bloader"
    };
}

/// Exports a plugin's modes, metric evaluators and scaling executors: writes the manifest, the
/// abi_stable root module and the kinds table.
///
/// Call it once, at the root of a `cdylib` crate that depends on `flowscale-sdk` (no direct
/// `abi_stable` dependency is needed):
///
/// ```ignore
/// flowscale_sdk::export_plugin! {
///     name: "bucket-align",
///     version: env!("CARGO_PKG_VERSION"),
///     modes: [
///         ("bucket-align", "aligns to custom-partitioner buckets", BucketAlign::default),
///     ],
///     evaluators: [("slo-rate", "target rate from the SLO service", SloRate::default)],
///     executors: [("change-freeze", "vetoes scaling during freezes", Freeze::default)],
/// }
/// ```
///
/// Each entry is `(implementation id, one-line description, constructor)`; the constructor is
/// any `fn() -> T` with `T` an [`crate::AlignmentMode`], [`crate::MetricEvaluator`] or
/// [`crate::ScalingExecutor`] (and `'static`). Each of `modes`, `evaluators` and `executors` is
/// optional (in this order); a plugin exports at least one thing. Ids and descriptions must be
/// string literals or constants.
#[macro_export]
macro_rules! export_plugin {
    (
        name: $name:expr,
        version: $version:expr
        $(, modes: [ $( ($id:expr, $description:expr, $make:expr) ),* $(,)? ] )?
        $(, evaluators: [ $( ($eid:expr, $edescription:expr, $emake:expr) ),* $(,)? ] )?
        $(, executors: [ $( ($xid:expr, $xdescription:expr, $xmake:expr) ),* $(,)? ] )?
        $(,)?
    ) => {
        const _: () = {
            use $crate::abi_stable as __sabi;

            static __FLOWSCALE_MODES: &[$crate::abi::ModeFactory] = &[
                $( $( $crate::abi::ModeFactory {
                    id: $id,
                    description: $description,
                    make: || -> ::std::boxed::Box<dyn $crate::AlignmentMode> {
                        ::std::boxed::Box::new(($make)())
                    },
                } ),* )?
            ];

            static __FLOWSCALE_MANIFEST_MODES: &[$crate::abi::ManifestMode] = &[
                $( $( $crate::abi::ManifestMode::new($id, $description) ),* )?
            ];

            static __FLOWSCALE_EVALUATORS: &[$crate::abi::EvaluatorFactory] = &[
                $( $( $crate::abi::EvaluatorFactory {
                    id: $eid,
                    description: $edescription,
                    make: || -> ::std::boxed::Box<dyn $crate::MetricEvaluator> {
                        ::std::boxed::Box::new(($emake)())
                    },
                } ),* )?
            ];

            static __FLOWSCALE_EXECUTORS: &[$crate::abi::ExecutorFactory] = &[
                $( $( $crate::abi::ExecutorFactory {
                    id: $xid,
                    description: $xdescription,
                    make: || -> ::std::boxed::Box<dyn $crate::ScalingExecutor> {
                        ::std::boxed::Box::new(($xmake)())
                    },
                } ),* )?
            ];

            static __FLOWSCALE_MANIFEST_EVALUATORS: &[$crate::abi::ManifestMode] = &[
                $( $( $crate::abi::ManifestMode::new($eid, $edescription) ),* )?
            ];

            static __FLOWSCALE_MANIFEST_EXECUTORS: &[$crate::abi::ManifestMode] = &[
                $( $( $crate::abi::ManifestMode::new($xid, $xdescription) ),* )?
            ];

            #[unsafe(no_mangle)]
            pub static FLOWSCALE_PLUGIN_MANIFEST: $crate::abi::PluginManifest =
                $crate::abi::PluginManifest::new(
                    $name,
                    $version,
                    cfg!(panic = "unwind"),
                    __FLOWSCALE_MANIFEST_MODES,
                );

            unsafe extern "C" fn __flowscale_new_evaluator(
                id: $crate::abi::context::FfiStr,
                reply: $crate::abi::ReplyRef,
            ) -> $crate::abi::Object {
                $crate::abi::guest_kinds::new_evaluator(__FLOWSCALE_EVALUATORS, id, reply)
            }

            unsafe extern "C" fn __flowscale_new_executor(
                id: $crate::abi::context::FfiStr,
                reply: $crate::abi::ReplyRef,
            ) -> $crate::abi::Object {
                $crate::abi::guest_kinds::new_executor(__FLOWSCALE_EXECUTORS, id, reply)
            }

            #[unsafe(no_mangle)]
            pub static FLOWSCALE_PLUGIN_KINDS: $crate::abi::KindsTable =
                $crate::abi::KindsTable::new(
                    __FLOWSCALE_MANIFEST_EVALUATORS,
                    __FLOWSCALE_MANIFEST_EXECUTORS,
                    $crate::abi::GuestEntries {
                        new_evaluator: __flowscale_new_evaluator,
                        new_executor: __flowscale_new_executor,
                    },
                );

            extern "C" fn __flowscale_install_logger(
                log: $crate::abi::HostLogger,
                max_level: $crate::abi::LogLevel,
            ) {
                $crate::abi::guest::install_logger(log, max_level, $name)
            }

            extern "C" fn __flowscale_new_mode(
                id: __sabi::std_types::RStr<'_>,
            ) -> __sabi::std_types::RResult<$crate::abi::FfiModeBox, $crate::abi::FfiError> {
                $crate::abi::guest::new_mode(__FLOWSCALE_MODES, id)
            }

            fn __flowscale_root_module() -> $crate::abi::PluginRootRef {
                $crate::abi::guest::root_module(__flowscale_install_logger, __flowscale_new_mode)
            }

            extern "C" fn __flowscale_erased_root_module() -> __sabi::library::RootModuleResult {
                __sabi::library::__call_root_module_loader(__flowscale_root_module)
            }

            #[unsafe(export_name = $crate::__root_module_loader_name!())]
            pub static __FLOWSCALE_LIB_HEADER: __sabi::library::LibHeader = unsafe {
                __sabi::library::LibHeader::from_constructor::<$crate::abi::PluginRootRef>(
                    __flowscale_erased_root_module,
                    __sabi::library::CheckTypeLayout::Yes,
                )
            };
        };
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_spelled_out_loader_name_is_abi_stables() {
        assert_eq!(
            crate::__root_module_loader_name!(),
            abi_stable::library::ROOT_MODULE_LOADER_NAME
        );
    }
}
