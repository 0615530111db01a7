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
    /// The gate and the alignment of one vertex in one call, for a mode whose every call is
    /// costly to make (a round trip to a plugin worker process). `None`, the default, means the
    /// mode has no such call: alignment then makes the two calls itself, so that it can tell a
    /// panic in the gate from one in `align`. A mode that answers must answer what
    /// [`gate_then_align`] gives for its two calls.
    fn align_if_applicable(
        &self,
        _ctx: &AlignmentContext,
    ) -> Option<Result<GatedAnswer, ModeError>> {
        None
    }
    /// Whether [`HostMode::align_many`] answers now. Alignment asks before it builds a job's
    /// contexts: a mode that answers gets them all together, any other one gets them one at a
    /// time, each built, aligned and given back before the next (no batch of contexts is
    /// held for a mode that would be called vertex by vertex anyway). False, the default,
    /// for a mode without [`HostMode::align_many`].
    fn aligns_many(&self) -> bool {
        false
    }
    /// [`HostMode::align_if_applicable`] for several vertices (of one job) at once: one answer
    /// per context, in order, for a mode that can answer them together in one call (a plugin
    /// worker speaking protocol 4: one round trip per job instead of one per vertex). `None`,
    /// the default, means it cannot: alignment then calls the mode vertex by vertex. Called
    /// only when [`HostMode::aligns_many`] says so.
    fn align_many(
        &self,
        _ctxs: &[&AlignmentContext],
    ) -> Option<Vec<Result<GatedAnswer, ModeError>>> {
        None
    }
    /// The loop of `job` ended (a reload removed the job, or it ended by itself): whatever the
    /// mode keeps of the job between calls can go. A plugin worker keeps each job's graph,
    /// parameters and metric names; the default keeps nothing.
    fn forget_job(&self, _job: &str) {}
}

/// What a custom mode answered for one vertex, its gate and its alignment taken together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatedAnswer {
    /// The gate said no: the target is kept.
    NotApplicable,
    /// The mode applies, but the target equals the current parallelism: `align` is not called.
    NothingToAlign,
    /// The parallelism `align` answered (not yet checked against the vertex's bounds).
    Aligned(u32),
}

/// The gate, then `align` when the mode applies and the target differs from the current
/// parallelism: the one order of calls, shared by alignment (whose `E` is a caught panic) and
/// the plugin worker answering the combined call (which cannot fail otherwise).
///
/// A gate that fails counts as applicable, its error standing in for `align`'s answer, so that
/// the fault is reported; when the target equals the current parallelism nothing is aligned
/// and the gate's error goes unreported, as its answer would not have been used either.
pub(crate) fn gate_then_align<E>(
    ctx: &AlignmentContext,
    gate: impl FnOnce() -> Result<Result<bool, ModeError>, E>,
    align: impl FnOnce() -> Result<Result<u32, ModeError>, E>,
) -> Result<Result<GatedAnswer, ModeError>, E> {
    let applicable = gate()?;
    if let Ok(false) = applicable {
        return Ok(Ok(GatedAnswer::NotApplicable));
    }
    if ctx.target_parallelism() == ctx.current_parallelism() {
        return Ok(Ok(GatedAnswer::NothingToAlign));
    }
    if let Err(err) = applicable {
        return Ok(Err(err));
    }
    Ok(align()?.map(GatedAnswer::Aligned))
}

/// An SDK mode running in the host's own code (linked into the binary, or handed over by an
/// embedding host or a test): its gate cannot fail.
#[derive(Clone)]
pub(crate) struct SdkMode(Arc<dyn AlignmentMode>);

impl SdkMode {
    /// Wraps an SDK mode.
    pub(crate) fn new(mode: Arc<dyn AlignmentMode>) -> SdkMode {
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
    pub(crate) id: String,
    /// A one-line description.
    pub(crate) description: String,
    /// Where it comes from.
    pub origin: ModeOrigin,
    /// The mode. For a plugin mode, calls never unwind into the host.
    pub mode: Arc<dyn HostMode>,
}

impl CustomMode {
    /// An SDK mode linked into the binary.
    pub(crate) fn linked(
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

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;

    /// A context with current parallelism 4 and the given target.
    fn ctx(target: u32) -> AlignmentContext {
        AlignmentContext::builder(4, target, 128).build()
    }

    fn answer(
        target: u32,
        gate: Result<bool, ModeError>,
    ) -> (Result<GatedAnswer, ModeError>, bool) {
        let mut aligned = false;
        let got = gate_then_align::<Infallible>(
            &ctx(target),
            || Ok(gate),
            || {
                aligned = true;
                Ok(Ok(7))
            },
        );
        let Ok(got) = got;
        (got, aligned)
    }

    #[test]
    fn align_is_called_only_when_the_mode_applies_and_the_target_moves() {
        assert_eq!(
            answer(6, Ok(false)),
            (Ok(GatedAnswer::NotApplicable), false)
        );
        assert_eq!(
            answer(4, Ok(false)),
            (Ok(GatedAnswer::NotApplicable), false)
        );
        assert_eq!(
            answer(4, Ok(true)),
            (Ok(GatedAnswer::NothingToAlign), false)
        );
        assert_eq!(answer(6, Ok(true)), (Ok(GatedAnswer::Aligned(7)), true));
    }

    #[test]
    fn a_failed_gate_stands_for_the_answer_unless_nothing_is_aligned() {
        let failed = || Err(ModeError::new("gate broke"));
        assert_eq!(
            answer(4, failed()),
            (Ok(GatedAnswer::NothingToAlign), false)
        );
        let (got, aligned) = answer(6, failed());
        assert_eq!(got.unwrap_err().message(), "gate broke");
        assert!(!aligned);
    }

    #[test]
    fn a_failure_of_the_call_itself_stops_before_align() {
        let got: Result<_, &str> = gate_then_align(
            &ctx(6),
            || Err("gate panicked"),
            || panic!("align must not be called"),
        );
        assert_eq!(got.unwrap_err(), "gate panicked");
        let got: Result<_, &str> =
            gate_then_align(&ctx(6), || Ok(Ok(true)), || Err("align panicked"));
        assert_eq!(got.unwrap_err(), "align panicked");
    }
}
