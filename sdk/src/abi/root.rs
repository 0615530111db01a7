//! The abi_stable side of the boundary: the root module every plugin exports and the mode object
//! it hands out. These types ARE layout-checked when a plugin is loaded.

// abi_stable's derives generate impls and helper types that trip these lints on current rustc.
#![allow(non_local_definitions, non_camel_case_types)]

use abi_stable::library::RootModule;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{RBox, RResult, RSlice, RStr, RString, Tuple2};
use abi_stable::{StableAbi, declare_root_module_statics, package_version_strings, sabi_trait};

use super::context::ContextRef;

/// What kind of failure an [`FfiError`] reports. A struct over an integer rather than an enum,
/// so that kinds can be added without changing the layout.
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct FfiErrorKind(pub u8);

impl FfiErrorKind {
    /// The mode returned an error.
    pub const MODE: FfiErrorKind = FfiErrorKind(1);
    /// The mode (or its constructor) panicked; the panic was caught inside the plugin.
    pub const PANIC: FfiErrorKind = FfiErrorKind(2);
    /// The host asked for an implementation id the plugin does not export.
    pub const UNKNOWN_MODE: FfiErrorKind = FfiErrorKind(3);
}

/// An error crossing the boundary.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct FfiError {
    /// What kind of failure.
    pub kind: FfiErrorKind,
    /// The message for people.
    pub message: RString,
}

impl FfiError {
    /// An error of `kind`.
    pub fn new(kind: FfiErrorKind, message: impl Into<String>) -> FfiError {
        FfiError {
            kind,
            message: RString::from(message.into()),
        }
    }
}

/// A mode's parameters as they cross the boundary for `validate`.
#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct ParamsRef<'a> {
    /// The mode name the parameters were selected under.
    pub mode_name: RStr<'a>,
    /// `(param, value)` pairs.
    pub entries: RSlice<'a, Tuple2<RStr<'a>, RStr<'a>>>,
}

/// The mode object a plugin hands out. The SDK implements it over the author's
/// [`crate::AlignmentMode`]; every method catches panics inside the plugin.
#[sabi_trait]
pub trait FfiMode: Send + Sync {
    /// [`crate::AlignmentMode::is_applicable`].
    fn is_applicable(&self, ctx: ContextRef<'_>) -> RResult<bool, FfiError>;
    /// [`crate::AlignmentMode::align`].
    fn align(&self, ctx: ContextRef<'_>) -> RResult<u32, FfiError>;
    /// [`crate::AlignmentMode::validate`].
    #[sabi(last_prefix_field)]
    fn validate(&self, params: ParamsRef<'_>) -> RResult<(), FfiError>;
}

/// An owned mode object from a plugin.
pub type FfiModeBox = FfiMode_TO<'static, RBox<()>>;

/// The level of a log record forwarded from a plugin: 1 error, 2 warn, 3 info, 4 debug, 5 trace.
pub type LogLevel = u8;

/// The host's logging callback: level, target and message of one record.
pub type HostLogFn = extern "C" fn(level: LogLevel, target: RStr<'_>, message: RStr<'_>);

/// The host's logging callback as it crosses the boundary.
#[repr(transparent)]
#[derive(StableAbi, Clone, Copy)]
pub struct HostLogger {
    /// Level, target and message of one record.
    pub log: extern "C" fn(u8, RStr<'_>, RStr<'_>),
}

/// The root module of a plugin: how the host gets at its modes.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginRootRef)))]
#[sabi(missing_field(panic))]
pub struct PluginRoot {
    /// Hands the plugin the host's logger and the most verbose level the host wants; installs
    /// the forwarding subscriber and panic hook inside the plugin. Called once, before any mode
    /// is created.
    pub install_logger: extern "C" fn(log: HostLogger, max_level: LogLevel),
    /// Creates the mode with implementation id `id`.
    #[sabi(last_prefix_field)]
    pub new_mode: extern "C" fn(id: RStr<'_>) -> RResult<FfiModeBox, FfiError>,
}

impl RootModule for PluginRootRef {
    declare_root_module_statics! {PluginRootRef}
    const BASE_NAME: &'static str = "flowscale_plugin";
    const NAME: &'static str = "flowscale plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}
