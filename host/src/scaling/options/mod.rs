//! The pipeline's options, read and validated from a job's configuration.

mod autoscaler;
mod excluded_periods;
mod quartz_cron;

pub use autoscaler::AutoscalerOptions;
pub(crate) use autoscaler::BusyTimeAggregator;
pub(crate) use autoscaler::{EXCLUDED_PERIODS_KEY, SCALING_ENABLED_KEY, millis, whole_seconds};
#[cfg(test)]
pub(crate) use excluded_periods::ExcludedPeriods;
