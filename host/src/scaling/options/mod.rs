//! The pipeline's options, read and validated from a job's configuration.

mod autoscaler;
mod excluded_periods;

pub use autoscaler::{AutoscalerOptions, BusyTimeAggregator};
pub(crate) use autoscaler::{EXCLUDED_PERIODS_KEY, SCALING_ENABLED_KEY, millis, whole_seconds};
pub use excluded_periods::{DailyRange, ExcludedPeriods, PeriodError};
