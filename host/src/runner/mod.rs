//! The control loop: jobs under control on their engines, one step at a time.

mod arbiter;
mod cooldown;
mod engines;
mod fence;
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
mod slot_reservations;
mod slot_share;
mod state_check;
mod supervisor;
mod time_ordered;

pub use cooldown::{CooldownExecutor, CooldownState};
pub use fleet::RunOptions;
pub(crate) use fleet::{DEFAULT_SIMULATED_DURATION, Interrupted, JobRun, SlotsUse, wall_ms};
pub use job::JobRunner;
pub(crate) use lateness::BOUNDS_MS as LATENESS_BOUNDS_MS;
pub use lateness::Lateness;
pub(crate) use lateness::LatenessSummary;
pub(crate) use live::next_entry_run;
#[cfg(test)]
pub(crate) use live::take_entry_run;
pub use pace::Pace;
pub use report::CycleReport;
#[cfg(test)]
pub(crate) use report::EntryRun;
pub(crate) use report::{Printer, format_elapsed};
pub(crate) use restore::ignored_state;
pub(crate) use state_check::check_state_dir;
pub use supervisor::run_fleet;
pub(crate) use supervisor::{FleetSource, run_fleet_reloading};
pub(crate) use time_ordered::{DEFAULT_HOLD_BYTES, TimeOrderedLog};

#[cfg(test)]
mod discovery_tests;
#[cfg(test)]
mod tests;
