//! Ineffective scale-ups: a scale-up whose processing rate did not rise as expected is reported,
//! and blocks the next scale-up when `scaling.effectiveness.detection.enabled` is set.

use crate::events::{Event, EventReason, Severity};
use crate::scaling::metrics::{ScalingMetric, evaluated_or_nan};
use crate::scaling::numeric::java_double_to_string;
use crate::scaling::options::AutoscalerOptions;
use crate::scaling::state::ScalingSummary;
use crate::scaling::topology::VertexInfo;

/// The ineffective-scale-up check (docs/decision-pipeline.md#ineffective-scale-up): None when the last scale-up was effective.
pub(crate) fn ineffective_scale_up(
    job: &str,
    opts: &AutoscalerOptions,
    vertex: &VertexInfo,
    last: &ScalingSummary,
    tpr: f64,
) -> Option<Event> {
    let last_tpr = evaluated_or_nan(&last.metrics, ScalingMetric::TrueProcessingRate).average;
    let expected = evaluated_or_nan(&last.metrics, ScalingMetric::ExpectedProcessingRate).current;
    let expected_increase = expected - last_tpr;
    let actual_increase = tpr - last_tpr;
    let ratio = actual_increase / expected_increase;
    if ratio >= opts.scaling_effectiveness_threshold {
        return None;
    }
    let message = format!(
        "Ineffective scaling detected for {} (expected increase: {}, actual increase {}). Blocking of ineffective scaling decisions is {}",
        vertex.id,
        java_double_to_string(expected_increase),
        java_double_to_string(actual_increase),
        if opts.scaling_effectiveness_detection_enabled {
            "enabled"
        } else {
            "disabled"
        }
    );
    Some(
        Event::new(EventReason::IneffectiveScaling, Severity::Normal, message)
            .job(job)
            .vertex(&*vertex.id)
            .key(format!(
                "ineffective{}{}",
                vertex.id,
                java_double_to_string(expected_increase)
            )),
    )
}
