//! The trait an alignment mode implements.

use std::fmt;

use crate::context::AlignmentContext;
use crate::params::{ModeParams, ParamError};

/// An alignment mode: decides whether it acts on a vertex, and which parallelism to apply.
///
/// The host calls [`AlignmentMode::align`] only when [`AlignmentMode::is_applicable`] returned
/// true and the target differs from the current parallelism. Whatever `align` returns goes
/// through the host's guard: a value below 1, above `min(max parallelism, upper limit)` or, for
/// a source, above its partition count is refused and the computed target is used instead.
pub trait AlignmentMode: Send + Sync {
    /// Whether the mode acts on this vertex. The default is the built-in gate: a source that
    /// reports partitions, or a vertex with a HASH (`keyBy`) input.
    fn is_applicable(&self, ctx: &AlignmentContext) -> bool {
        ctx.default_applicable()
    }

    /// The parallelism to apply.
    fn align(&self, ctx: &AlignmentContext) -> Result<u32, ModeError>;

    /// Checks the mode's parameters when a configuration is loaded, so that bad values are
    /// reported by `flowscale validate` rather than at the first decision.
    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        let _ = params;
        Ok(())
    }
}

/// Why a mode could not produce a parallelism.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeError {
    message: String,
}

impl ModeError {
    /// An error with a message a person can act on.
    pub fn new(message: impl Into<String>) -> ModeError {
        ModeError {
            message: message.into(),
        }
    }
    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ModeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ModeError {}

impl From<ParamError> for ModeError {
    fn from(err: ParamError) -> ModeError {
        ModeError::new(err.to_string())
    }
}
