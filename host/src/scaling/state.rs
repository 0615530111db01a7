//! Everything the pipeline keeps per job between cycles, in serde-serializable sections.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::delayed_scale_down::DelayedScaleDown;
use super::history::{ScalingHistory, ScalingTracking};
use super::window::MetricHistory;

/// Section name of the metric history.
pub const SECTION_METRIC_HISTORY: &str = "metric-history";
/// Section name of the scaling history.
pub const SECTION_SCALING_HISTORY: &str = "scaling-history";
/// Section name of the scaling tracking.
pub const SECTION_SCALING_TRACKING: &str = "scaling-tracking";
/// Section name of the delayed scale-down state.
pub const SECTION_DELAYED_SCALE_DOWN: &str = "delayed-scale-down";
/// Section name of the parallelism overrides.
pub const SECTION_PARALLELISM_OVERRIDES: &str = "parallelism-overrides";

/// The persisted state of one job (anchor §1, "Persisted per-job state"), minus memory-tuning
/// config changes, which are not implemented.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobScalingState {
    /// Collected samples of the metric window.
    #[serde(default)]
    pub metric_history: MetricHistory,
    /// Executed changes per vertex.
    #[serde(default)]
    pub scaling_history: ScalingHistory,
    /// Executed operations and their restart durations.
    #[serde(default)]
    pub scaling_tracking: ScalingTracking,
    /// Pending scale-downs.
    #[serde(default)]
    pub delayed_scale_down: DelayedScaleDown,
    /// The last decided parallelism of every vertex (vertex id -> parallelism); re-applied by
    /// the control loop every cycle, as the anchor does.
    #[serde(default)]
    pub parallelism_overrides: BTreeMap<String, u32>,
}

impl JobScalingState {
    /// Forgets everything (the anchor does this when the autoscaler is disabled for a job).
    pub fn clear(&mut self) {
        *self = JobScalingState::default();
    }

    /// Every section as JSON, for a keyed-section store.
    pub fn to_sections(&self) -> Result<Vec<(&'static str, Value)>, serde_json::Error> {
        Ok(vec![
            (
                SECTION_METRIC_HISTORY,
                serde_json::to_value(&self.metric_history)?,
            ),
            (
                SECTION_SCALING_HISTORY,
                serde_json::to_value(&self.scaling_history)?,
            ),
            (
                SECTION_SCALING_TRACKING,
                serde_json::to_value(&self.scaling_tracking)?,
            ),
            (
                SECTION_DELAYED_SCALE_DOWN,
                serde_json::to_value(&self.delayed_scale_down)?,
            ),
            (
                SECTION_PARALLELISM_OVERRIDES,
                serde_json::to_value(&self.parallelism_overrides)?,
            ),
        ])
    }

    /// Rebuilds the state from sections; an absent section reads as empty.
    pub fn from_sections(
        mut get: impl FnMut(&str) -> Option<Value>,
    ) -> Result<JobScalingState, serde_json::Error> {
        fn section<T: for<'de> Deserialize<'de> + Default>(
            v: Option<Value>,
        ) -> Result<T, serde_json::Error> {
            v.map(serde_json::from_value)
                .transpose()
                .map(Option::unwrap_or_default)
        }
        Ok(JobScalingState {
            metric_history: section(get(SECTION_METRIC_HISTORY))?,
            scaling_history: section(get(SECTION_SCALING_HISTORY))?,
            scaling_tracking: section(get(SECTION_SCALING_TRACKING))?,
            delayed_scale_down: section(get(SECTION_DELAYED_SCALE_DOWN))?,
            parallelism_overrides: section(get(SECTION_PARALLELISM_OVERRIDES))?,
        })
    }
}
