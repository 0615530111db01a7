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

pub mod context;
mod generation;
pub mod guest;
mod manifest;
mod root;

pub use context::{ContextRef, ContextVTable};
pub use guest::ModeFactory;
pub use manifest::{
    MANIFEST_FORMAT, MANIFEST_MAGIC, MANIFEST_SYMBOL, ManifestError, ManifestInfo, ManifestMode,
    ManifestStr, PluginManifest, sdk_versions_compatible,
};
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

/// Exports a plugin's modes: writes the manifest and the abi_stable root module.
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
/// }
/// ```
///
/// Each mode is `(implementation id, one-line description, constructor)`; the constructor is
/// any `fn() -> M` with `M: AlignmentMode + 'static` (a `Default::default`, a unit struct's
/// name wrapped in a closure, ...). Ids and descriptions must be string literals or constants.
#[macro_export]
macro_rules! export_plugin {
    (
        name: $name:expr,
        version: $version:expr,
        modes: [ $( ($id:expr, $description:expr, $make:expr) ),+ $(,)? ] $(,)?
    ) => {
        const _: () = {
            use $crate::abi_stable as __sabi;

            static __FLOWSCALE_MODES: &[$crate::abi::ModeFactory] = &[
                $( $crate::abi::ModeFactory {
                    id: $id,
                    description: $description,
                    make: || -> ::std::boxed::Box<dyn $crate::AlignmentMode> {
                        ::std::boxed::Box::new(($make)())
                    },
                } ),+
            ];

            static __FLOWSCALE_MANIFEST_MODES: &[$crate::abi::ManifestMode] = &[
                $( $crate::abi::ManifestMode::new($id, $description) ),+
            ];

            #[unsafe(no_mangle)]
            pub static FLOWSCALE_PLUGIN_MANIFEST: $crate::abi::PluginManifest =
                $crate::abi::PluginManifest::new(
                    $name,
                    $version,
                    cfg!(panic = "unwind"),
                    __FLOWSCALE_MANIFEST_MODES,
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
