//! The control loop: jobs under control on their engines, one step at a time.

mod cooldown;
mod engines;
mod fleet;
mod job;
mod report;

pub use cooldown::{
    CooldownExecutor, CooldownOutcome, CooldownState, QueuedScalingEvent, ScalingOperation,
};
pub use engines::{NamedEngine, OpenError, OpenedEngines, open_engines};
pub use fleet::{DEFAULT_SIMULATED_DURATION, Interrupted, JobRun, RunOptions, run_fleet, wall_ms};
pub use job::{JobRunner, PersistError};
pub use report::{CycleReport, Printer, format_time};

#[cfg(test)]
mod tests;
