//! What the pipeline keeps per job between cycles: the scaling history and tracking, pending
//! scale-downs, and the job's state as persisted sections.

pub(crate) mod by_id;
mod delayed_scale_down;
mod history;
mod job;
mod vertex_history;

pub(crate) use delayed_scale_down::DelayedScaleDown;
pub(crate) use history::ScalingHistory;
pub use job::JobScalingState;
#[cfg(test)]
pub(crate) use job::SECTION_SCALING_HISTORY;
pub(crate) use vertex_history::{ScalingSummary, VertexHistory};
