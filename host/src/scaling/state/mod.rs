//! What the pipeline keeps per job between cycles: the scaling history and tracking, pending
//! scale-downs, and the job's state as persisted sections.

mod delayed_scale_down;
mod history;
mod job;

pub use delayed_scale_down::{DelayedScaleDown, RecommendedParallelism, VertexDelayedScaleDown};
pub use history::{ScalingHistory, ScalingRecord, ScalingSummary, ScalingTracking};
pub use job::{
    JobScalingState, SECTION_DELAYED_SCALE_DOWN, SECTION_METRIC_HISTORY,
    SECTION_PARALLELISM_OVERRIDES, SECTION_PENDING_SUMMARIES, SECTION_SCALING_HISTORY,
    SECTION_SCALING_TRACKING,
};
