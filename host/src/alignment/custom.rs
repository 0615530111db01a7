//! Custom modes as the host holds and calls them: one entry type for a mode linked into the
//! binary and a mode exported by a plugin, and the call interface both implement.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use flowscale_sdk::{AlignmentContext, AlignmentMode, ModeError, ModeParams};

/// A custom mode as alignment calls it, whatever it is made of.
///
/// Unlike the SDK's [`AlignmentMode`], every call returns a `Result`: a plugin's gate crosses the
/// plugin boundary and can come back as an error (a panic the plugin caught, an unknown id),
/// which the guard must report instead of silently treating the vertex as not applicable.
pub trait HostMode: Send + Sync {
    /// Whether the mode acts on this vertex.
    fn is_applicable(&self, ctx: &AlignmentContext) -> Result<bool, ModeError>;
    /// The parallelism to apply.
    fn align(&self, ctx: &AlignmentContext) -> Result<u32, ModeError>;
    /// Checks the mode's parameters when a configuration is loaded.
    fn validate(&self, params: &ModeParams) -> Result<(), ModeError>;
    /// Why the mode must not be called at all right now, if so (a plugin mode quarantined
    /// after repeated crashes or timeouts). The job then aligns that vertex with BALANCED and
    /// says so with a `ModeFallback` event, instead of keeping a plugin that keeps failing in
    /// the path of every decision. The text is the event's message: keep it stable.
    fn unavailable(&self) -> Option<String> {
        None
    }
}

/// An SDK mode running in the host's own code (linked into the binary, or handed over by an
/// embedding host or a test): its gate cannot fail.
#[derive(Clone)]
pub struct SdkMode(Arc<dyn AlignmentMode>);

impl SdkMode {
    /// Wraps an SDK mode.
    pub fn new(mode: Arc<dyn AlignmentMode>) -> SdkMode {
        SdkMode(mode)
    }
}

impl HostMode for SdkMode {
    fn is_applicable(&self, ctx: &AlignmentContext) -> Result<bool, ModeError> {
        Ok(self.0.is_applicable(ctx))
    }
    fn align(&self, ctx: &AlignmentContext) -> Result<u32, ModeError> {
        self.0.align(ctx)
    }
    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        self.0.validate(params)
    }
}

/// Where a custom mode comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModeOrigin {
    /// Linked into the binary.
    Linked,
    /// Exported by a plugin file.
    Plugin {
        /// The plugin file.
        file: PathBuf,
        /// The plugin's name from its manifest.
        plugin: String,
        /// The plugin's version from its manifest.
        version: String,
    },
}

impl fmt::Display for ModeOrigin {
    /// For messages: "linked into the binary", or the plugin with its version and file.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModeOrigin::Linked => f.write_str("linked into the binary"),
            ModeOrigin::Plugin {
                file,
                plugin,
                version,
            } => write!(f, "plugin {plugin} {version} ({})", file.display()),
        }
    }
}

/// A custom mode a job can select by implementation id: what the plugin registry holds and what
/// a [`super::ModeCatalog`] hands to resolution.
#[derive(Clone)]
pub struct CustomMode {
    /// The implementation id (what `scaling.alignment.mode.<name>.class` names).
    pub id: String,
    /// A one-line description.
    pub description: String,
    /// Where it comes from.
    pub origin: ModeOrigin,
    /// The mode. For a plugin mode, calls never unwind into the host.
    pub mode: Arc<dyn HostMode>,
}

impl CustomMode {
    /// An SDK mode linked into the binary.
    pub fn linked(
        id: impl Into<String>,
        description: impl Into<String>,
        mode: Arc<dyn AlignmentMode>,
    ) -> CustomMode {
        CustomMode {
            id: id.into(),
            description: description.into(),
            origin: ModeOrigin::Linked,
            mode: Arc::new(SdkMode::new(mode)),
        }
    }
}

impl fmt::Debug for CustomMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CustomMode")
            .field("id", &self.id)
            .field("description", &self.description)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}
