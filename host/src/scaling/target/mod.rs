//! The target parallelism of each vertex: scale factor, observed scalability, limits, the call to
//! the job's aligner (one for all the vertices of a job), and the ineffective-scale-up and delayed-scale-down rules.

mod ineffective;
mod reason;
mod scalability;
mod scaled;
mod skew;
mod vertex;

pub(crate) use reason::Reason;
pub(crate) use scaled::scaled_target;
pub(crate) use vertex::ParallelismChange;
pub(crate) use vertex::{
    DecisionSink, ScalerContext, align_targets, finish_scale_target, prepare_scale_target,
};
