//! The guard around custom modes: contain panics and refuse answers outside the safe range.

use std::panic::{AssertUnwindSafe, catch_unwind};

use flowscale_sdk::AlignmentContext;

/// A panic of a custom mode, caught before it unwinds into the host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("panicked: {message}")]
pub(crate) struct Panicked {
    /// The panic's message (or a note that its payload is not text).
    pub(crate) message: String,
}

/// Runs `f`, turning a panic into an error instead of unwinding into the host.
pub(crate) fn contain<T>(f: impl FnOnce() -> T) -> Result<T, Panicked> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic with a non-text payload".to_string());
        Panicked { message }
    })
}

/// Why a custom mode's answer is refused, if it is: below 1, above `min(K, upper)`, or above the
/// partition count of a source.
pub(super) fn refuse_answer(ctx: &AlignmentContext, answer: u32) -> Option<String> {
    let bound = ctx.max_parallelism().min(ctx.upper_limit());
    if answer < 1 {
        Some(format!("answered {answer}, below 1"))
    } else if answer > bound {
        Some(format!(
            "answered {answer}, above min(max parallelism {}, upper limit {}) = {bound}",
            ctx.max_parallelism(),
            ctx.upper_limit()
        ))
    } else if ctx.source_partitions() > 0 && answer > ctx.source_partitions() {
        Some(format!(
            "answered {answer} for a source with {} partitions (a subtask above the partition count reads nothing)",
            ctx.source_partitions()
        ))
    } else {
        None
    }
}
