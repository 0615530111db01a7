//! The flowscale SDK: everything an alignment mode sees and implements.
//!
//! # Brief overview
//!
//! * [`AlignmentMode`] is the trait a mode implements: `is_applicable` (default: a source that
//!   reports partitions, or a `keyBy` input) and `align`.
//! * [`AlignmentContext`] is the immutable input of one decision: current and target
//!   parallelism, partitions, key groups, limits, input ship strategies, the vertex's evaluated
//!   metrics, the job graph and the mode's [`ModeParams`].
//! * [`ShipStrategy`] is the fixed set of input ship strategies.
//!
//! ```
//! use flowscale_sdk::{AlignmentContext, AlignmentMode, ModeError};
//!
//! /// Rounds the target up to an even number, within the alignment cap.
//! struct Even;
//!
//! impl AlignmentMode for Even {
//!     fn align(&self, ctx: &AlignmentContext) -> Result<u32, ModeError> {
//!         let t = ctx.target_parallelism();
//!         Ok((t + t % 2).min(ctx.alignment_cap()))
//!     }
//! }
//!
//! let ctx = AlignmentContext::builder(4, 7, 128).build();
//! assert_eq!(Even.align(&ctx)?, 8);
//! # Ok::<(), ModeError>(())
//! ```
#![deny(missing_docs)]

pub mod abi;
mod context;
mod mode;
mod params;
mod ship;

pub use crate::context::{
    AlignmentContext, AlignmentContextBuilder, EvaluatedMetric, JobTopology, TopologyEdge,
    TopologyVertex,
};
pub use crate::mode::{AlignmentMode, ModeError};
pub use crate::params::{MODE_KEY, ModeParams, ParamError};
pub use crate::ship::ShipStrategy;

/// The version of this SDK, as recorded in every plugin's manifest.
pub const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Re-exported so that [`export_plugin!`] works without a direct `abi_stable` dependency.
#[doc(hidden)]
pub use abi_stable;

/// Re-exported so that plugins can log with the same `tracing` the SDK forwards to the host.
pub use tracing;
