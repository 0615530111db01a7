//! The control loop: jobs under control on their engines, one step at a time.

mod cooldown;
mod engines;
mod fleet;
mod job;
mod job_task;
mod lateness;
mod lease;
mod live;
mod pace;
mod report;
mod restore;
mod scheduler;
mod state_check;
mod supervisor;
mod time_ordered;

pub use cooldown::{
    CooldownExecutor, CooldownOutcome, CooldownState, QueuedScalingEvent, ScalingOperation,
};
pub use engines::{
    NamedEngine, OpenError, OpenedEngines, may_restore, open_engines, open_engines_limited,
};
pub use fleet::{DEFAULT_SIMULATED_DURATION, Interrupted, JobRun, RunOptions, wall_ms};
pub use job::{JobRunner, PersistError};
pub use lateness::{Lateness, LatenessSummary};
pub use pace::{Pace, PaceError};
pub use report::{CycleReport, Printer, format_time};
pub use restore::{BadSection, RestoreError, check_sections, ignored_state};
pub use state_check::{StateCheck, check_state_dir};
pub use supervisor::{FleetSource, MAX_NETWORK_THREADS, run_fleet, run_fleet_reloading};
pub use time_ordered::{DEFAULT_HOLD_BYTES, TimeOrderedLog};

#[cfg(test)]
mod tests;
