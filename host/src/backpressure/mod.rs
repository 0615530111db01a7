//! Backpressure: rate control of a job's sources with a PID rate estimator.
//!
//! Scaling adds capacity; rate control limits intake to what the job can process now, so that a
//! surge is buffered by the source system instead of inside the job. Per job, a
//! [`RateController`] is fed one [`BatchInfo`] per completed `backpressure.batch-interval`,
//! asks its [`RateEstimator`](estimator::RateEstimator) (only
//! [`PidRateEstimator`](estimator::PidRateEstimator) exists) for a new rate and, when there
//! is one, returns a [`RateLimitUpdate`](controller::RateLimitUpdate) for the caller to realize
//! through `Realizer::set_rate_limit`.
//!
//! ```
//! use std::collections::BTreeMap;
//!
//! use flowscale::backpressure::{BackpressureSettings, BatchInfo, RateController};
//!
//! let config = BTreeMap::from([("backpressure.enabled".to_string(), "true".to_string())]);
//! let settings = BackpressureSettings::from_config(&config)?;
//! let mut controller = RateController::from_settings("orders", &settings).expect("enabled");
//! assert_eq!(settings.options.batch_interval_ms, 1000);
//!
//! // Every batch interval (here hand-made; see `BatchInfo::from_observation`):
//! let batch = |time_ms, elements| BatchInfo {
//!     time_ms,
//!     elements,
//!     processing_delay_ms: 1000,
//!     scheduling_delay_ms: 0,
//!     source_elements: BTreeMap::from([("source".to_string(), elements)]),
//! };
//! assert!(controller.on_batch_completed(&batch(1000, 3000)).is_none()); // first run
//! let update = controller.on_batch_completed(&batch(2000, 1000)).expect("a new limit");
//! assert_eq!(update.rate, 1000.0);
//! assert_eq!(update.per_source["source"], 1000.0); // realizer.set_rate_limit("source", Some(..))
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod controller;
mod estimator;
mod options;

pub use controller::{BatchInfo, RateController};
pub use options::BackpressureSettings;
