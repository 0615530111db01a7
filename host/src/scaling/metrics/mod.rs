//! Scaling metrics: their names, the sample collected per cycle, the window of samples kept
//! between cycles and the statistics over it.

mod by_name;
mod collection;
mod metric_map;
mod names;
mod samples;
mod statistics;
mod window;

pub(crate) use by_name::{metrics_by_name, names_mask};
pub(crate) use collection::{Collection, collect};
pub(crate) use metric_map::evaluated_or_nan;
pub(crate) use metric_map::{EVALUATED_COUNT, VertexEvaluation};
pub(crate) use names::EvaluatedScalingMetric;
pub use names::ScalingMetric;
#[cfg(test)]
pub(crate) use samples::compute_sample;
pub(crate) use statistics::{
    Series, WindowSeries, average_of, series_latest, series_means, series_rate,
};
pub(crate) use window::MetricHistory;
