//! What a built-in, legacy or ADVANCED mode answers, before the job-level bookkeeping.

use crate::events::Event;

/// A mode's answer with its reasons.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The parallelism to apply.
    pub parallelism: u64,
    /// Why, one step per line.
    pub explanation: Vec<String>,
    /// Events (only the blocking modes emit).
    pub events: Vec<Event>,
}

impl Decision {
    /// A decision without events.
    pub fn quiet(parallelism: u64, explanation: Vec<String>) -> Decision {
        Decision {
            parallelism,
            explanation,
            events: Vec::new(),
        }
    }
}
