//! The target parallelism of each vertex: scale factor, observed scalability, limits, the call to
//! the job's aligner, and the ineffective-scale-up and delayed-scale-down rules.

mod ineffective;
mod reason;
mod scalability;
mod scaled;
mod vertex;

pub use reason::Reason;
pub use scalability::observed_scalability_coefficient;
pub use scaled::{ScaledTarget, scaled_target};
pub use vertex::ParallelismChange;
pub(crate) use vertex::{ScalerContext, compute_scale_target};
