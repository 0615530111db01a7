//! Parallelism alignment: built-in, legacy and ADVANCED modes, per-job resolution, the guard.
//!
//! A job resolves its mode once from its configuration ([`JobAlignment::resolve`]); the scaling
//! pipeline then calls [`Aligner::align_all`] once per job and cycle with a request for each
//! vertex whose target differs from its current parallelism, describing the vertex's decision
//! in an [`AlignmentRequest`] (a custom mode may answer them in one call: one round trip to a
//! plugin worker per job). Alignment builds the
//! mode's context from it with the parameters it resolved, so they never leave this module.
//! Built-in modes are bounded by construction; custom modes go through the guard.

mod advanced;
mod builtin;
mod catalog;
mod custom;
mod decision;
mod explanation;
mod guard;
mod inputs;
mod job;
pub(crate) mod key_groups;
mod legacy;
mod outcome;
mod request;
mod resolve;
pub mod search;

pub(crate) use builtin::BuiltIn;
pub(crate) use catalog::ModeCatalog;
pub use catalog::NoCustomModes;
pub use custom::ModeOrigin;
pub use custom::{CustomMode, HostMode};
pub(crate) use custom::{GatedAnswer, gate_then_align};
pub(crate) use explanation::Explanation;
pub(crate) use guard::contain;
pub use job::JobAlignment;
pub(crate) use outcome::AlignOutcome;
pub use outcome::Aligner;
pub use request::AlignmentRequest;
pub(crate) use request::{metric_list, no_text, shared_job};
pub(crate) use resolve::{RESERVED_NAMES, UncheckedParams, custom_class};

#[cfg(test)]
mod batch_tests;
#[cfg(test)]
mod tests;
