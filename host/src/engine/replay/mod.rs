//! A recorded job replayed from a file: the cheap third engine, for tests and for checking the
//! pipeline's numbers against a trace.
//!
//! # File format
//!
//! JSON Lines: one record per line, `{"at_ms": <ms>, "observation": <JobObservation>}`, with
//! `at_ms` non-decreasing. Blank lines and lines starting with `#` are skipped.
//!
//! `ReplayCollector`'s `observe` answers with the newest record at or before `now_ms`.
//! [`ReplayRealizer`] records every rescale and rate limit. With [`RescalePolicy::Apply`] a
//! rescale that changes some vertex's parallelism is treated as a restart that completes at the
//! next observation: from then on the observations report the new parallelism and
//! `running_since_ms` is at least that observation's time. With [`RescalePolicy::Record`]
//! (a trace taken from a real job already shows the effect of its rescales) observations are
//! returned as recorded.
//!
//! [`ReplayEngine`] is a replay as the control loop runs it, on the recording's own clock.

mod engine;
mod recording;

pub use engine::ReplayEngine;
pub(crate) use recording::ReplayError;
pub use recording::{ReplayCollector, ReplayRecord, RescalePolicy, open};
