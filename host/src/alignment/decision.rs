//! What a built-in, legacy or ADVANCED mode answers, before the job-level bookkeeping.

use super::explanation::Explanation;
use crate::events::Event;

/// A mode's answer with its reasons.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decision {
    /// The parallelism to apply.
    pub(crate) parallelism: u64,
    /// Why, one step per line.
    pub(crate) explanation: Explanation,
    /// Events (only the blocking modes emit).
    pub(crate) events: Vec<Event>,
}

impl Decision {
    /// A decision without events.
    pub(crate) fn quiet(parallelism: u64, explanation: impl Into<Explanation>) -> Decision {
        Decision {
            parallelism,
            explanation: explanation.into(),
            events: Vec::new(),
        }
    }
}
