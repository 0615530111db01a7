//! Backpressure: rate control of a job's sources with a PID rate estimator.
//!
//! Scaling adds capacity; rate control limits intake to what the job can process now, so that a
//! surge is buffered by the source system instead of inside the job. Per job, a
//! [`RateController`] is fed one [`BatchInfo`] per completed `backpressure.batch-interval`,
//! asks its [`RateEstimator`] (only [`PidRateEstimator`] exists) for a new rate and, when there
//! is one, returns a [`RateLimitUpdate`] for the caller to realize through
//! `Realizer::set_rate_limit`.

mod controller;
mod estimator;
mod options;

pub use controller::{BatchInfo, RateController, RateLimitUpdate};
pub use estimator::{PidConfigError, PidRateEstimator, RateEstimator, keys};
pub use options::{
    BackpressureOptions, DEFAULT_BATCH_INTERVAL, ENABLED_KEY, RATE_ESTIMATORS,
    estimator_from_config,
};
