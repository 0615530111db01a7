//! The control loop: jobs under control on their engines, one step at a time.

mod cooldown;
mod engines;
mod fleet;
mod job;
mod report;
mod settings;

pub use cooldown::{
    COOLDOWN_PERIOD_KEY, CooldownExecutor, CooldownOutcome, CooldownState, DEFAULT_COOLDOWN_PERIOD,
    QueuedScalingEvent, ScalingOperation,
};
pub use engines::{FlinkEngine, ReplayEngine, open_engines};
pub use fleet::{DEFAULT_SIMULATED_DURATION, JobRun, RunOptions, run_fleet, wall_ms};
pub use job::JobRunner;
pub use report::{CycleReport, Printer, format_time};
pub use settings::{ENABLED_KEY, JobSettings};

#[cfg(test)]
mod tests;
