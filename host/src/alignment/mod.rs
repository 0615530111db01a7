//! Parallelism alignment: built-in, legacy and ADVANCED modes, per-job resolution, the guard.
//!
//! A job resolves its mode once from its configuration ([`JobAlignment::resolve`]); the scaling
//! pipeline then calls [`Aligner::align`] for each vertex whose target differs from its current
//! parallelism, describing the vertex's decision in an [`AlignmentRequest`]. Alignment builds the
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
mod legacy;
mod outcome;
mod request;
mod resolve;
pub mod search;

pub use advanced::{AdvancedSpec, Fallback, Region, Step};
pub use builtin::BuiltIn;
pub use catalog::{ModeCatalog, NoCustomModes, StaticCatalog};
pub use custom::{CustomMode, GatedAnswer, HostMode, ModeOrigin, SdkMode, gate_then_align};
pub use explanation::Explanation;
pub use job::JobAlignment;
pub use legacy::{LEGACY_VALUES, Legacy};
pub use outcome::{AlignOutcome, Aligner};
pub use request::AlignmentRequest;
pub use resolve::{LEGACY_KEY, RESERVED_NAMES, Selection, mode_params};
pub use search::Rule;

#[cfg(test)]
mod tests;
