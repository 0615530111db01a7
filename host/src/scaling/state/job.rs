//! Everything the pipeline keeps per job between cycles, in serde-serializable sections.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::delayed_scale_down::DelayedScaleDown;
use super::history::{ScalingHistory, ScalingTracking};
use super::vertex_history::ScalingSummary;
use crate::scaling::metrics::MetricHistory;
use crate::scaling::topology::GraphCache;

/// Section name of the metric history.
pub(crate) const SECTION_METRIC_HISTORY: &str = "metric-history";
/// Section name of the scaling history.
pub(crate) const SECTION_SCALING_HISTORY: &str = "scaling-history";
/// Section name of the scaling tracking.
pub(crate) const SECTION_SCALING_TRACKING: &str = "scaling-tracking";
/// Section name of the delayed scale-down state.
pub(crate) const SECTION_DELAYED_SCALE_DOWN: &str = "delayed-scale-down";
/// Section name of the parallelism overrides.
pub(crate) const SECTION_PARALLELISM_OVERRIDES: &str = "parallelism-overrides";
/// Section of the decisions waiting in the cooldown queue.
pub(crate) const SECTION_PENDING_SUMMARIES: &str = "pending-summaries";

/// The persisted state of one job (docs/decision-pipeline.md#persisted-state), minus memory-tuning
/// config changes, which are not implemented.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobScalingState {
    /// Collected samples of the metric window.
    #[serde(default)]
    pub(crate) metric_history: MetricHistory,
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
    /// the control loop every cycle, as the Flink autoscaler does.
    #[serde(default)]
    pub(crate) parallelism_overrides: BTreeMap<String, u32>,
    /// Summaries of decisions the cooldown queued (vertex -> the latest one): they enter the
    /// scaling history when the queued operation is executed, not when it was decided, so that
    /// restart times and history entries describe what actually ran.
    #[serde(default)]
    pub(crate) pending_summaries: BTreeMap<String, ScalingSummary>,
    /// The job's graph as of the last cycle, kept so that an unchanged graph is not rebuilt
    /// every cycle. Not persisted (rebuilt from the next observation), and never makes two
    /// states differ.
    #[serde(skip)]
    pub(crate) graph: GraphCache,
}

impl JobScalingState {
    /// Forgets everything (the Flink autoscaler does this when the autoscaler is disabled for a job).
    pub(crate) fn clear(&mut self) {
        *self = JobScalingState::default();
    }

    /// Every section as JSON, for a keyed-section store.
    pub(crate) fn to_sections(&self) -> Result<Vec<(&'static str, Value)>, serde_json::Error> {
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
            (
                SECTION_PENDING_SUMMARIES,
                serde_json::to_value(&self.pending_summaries)?,
            ),
        ])
    }

    /// Rebuilds the state from sections; an absent section reads as empty.
    pub(crate) fn from_sections(
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
            pending_summaries: section(get(SECTION_PENDING_SUMMARIES))?,
            graph: GraphCache::default(),
        })
    }
}

impl JobScalingState {
    /// Takes back what a decision wrote to the history and tracking (`before` is their state
    /// before the cycle) because the cooldown queued it, keeping its summaries until the queued
    /// operation is executed.
    pub(crate) fn defer_decision(
        &mut self,
        before: (ScalingHistory, ScalingTracking),
        summaries: BTreeMap<Arc<str>, ScalingSummary>,
    ) {
        (self.scaling_history, self.scaling_tracking) = before;
        self.pending_summaries.extend(
            summaries
                .into_iter()
                .map(|(vertex, summary)| (String::from(&*vertex), summary)),
        );
    }

    /// Records an executed operation at `now_ms`: the pending summaries of its vertices
    /// (with the executed parallelism) enter the history, unless this cycle's decision already
    /// recorded them (`recorded_now`), and a tracking record marks the restart.
    pub(crate) fn record_execution(
        &mut self,
        now_ms: i64,
        operation: &BTreeMap<String, u32>,
        recorded_now: &BTreeMap<Arc<str>, ScalingSummary>,
    ) {
        let pending = std::mem::take(&mut self.pending_summaries);
        let executed: BTreeMap<String, ScalingSummary> = operation
            .iter()
            .filter(|(vertex, _)| !recorded_now.contains_key(vertex.as_str()))
            .filter_map(|(vertex, &parallelism)| {
                pending.get(vertex).map(|summary| {
                    let mut summary = summary.clone();
                    summary.new_parallelism = parallelism;
                    (vertex.clone(), summary)
                })
            })
            .collect();
        if !executed.is_empty() {
            self.scaling_history.add(now_ms, &executed);
            self.scaling_tracking.add(now_ms);
        }
    }
}
