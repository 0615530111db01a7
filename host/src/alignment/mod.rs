//! Parallelism alignment: built-in, legacy and ADVANCED modes, per-job resolution, the guard.

mod outcome;

pub use outcome::{AlignOutcome, Aligner};
