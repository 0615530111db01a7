//! flowscale: an autoscaler for stream-processing jobs whose parallelism-alignment step is
//! pluggable.
//!
//! # Brief overview
//!
//! One cycle per job: an [`engine`] reports the job's topology and metrics; the `scaling`
//! pipeline turns them into a target parallelism per vertex; [`alignment`] snaps each target to a
//! value that spreads key groups, partitions or buckets evenly (built-in modes, ADVANCED step
//! lists, or a mode exported by a plugin); the executor applies cooldown and realizes the
//! operation on the engine. Data flows one way; nothing downstream reaches back upstream.
//!
//! # Public surface
//!
//! This library is the host binary's implementation; only `flowscale-sdk` is a stable API.
//! Items are `pub(crate)` unless something outside the crate uses them: the binary
//! (`cli::main_impl`), the integration tests (`host/tests`, the `flowscale-tests` crate), the
//! benchmarks (`host/benches`), the fuzz targets (`fuzz/`), the doc examples, and authors of
//! modes linked into the binary (`plugins::LinkedMode`). That surface follows the code: it
//! changes whenever they need it to, without notice or version bump. Plugins are written
//! against `flowscale-sdk` only.

#![warn(missing_docs, unreachable_pub)]

pub mod alignment;
pub mod allocator;
pub mod backpressure;
pub mod cli;
pub mod config;
pub mod credentials;
pub mod engine;
pub mod events;
pub mod plan;
pub mod plugins;
pub mod runner;
pub mod scaling;
pub mod serve;
pub mod sim;
pub mod state;
mod utc;
