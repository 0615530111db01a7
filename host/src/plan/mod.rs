//! From a parsed fleet configuration to what the host will run: each job's resolved mode and
//! settings, with every problem located in the file.
//!
//! The plan sits below the control loop (`runner`): it checks and resolves, the loop runs what it
//! produced.

mod fleet;
mod settings;

pub use fleet::{FleetPlan, JobPlan, locate, plan_fleet, replan_fleet, resolve_diagnostics};
pub use settings::{
    COOLDOWN_PERIOD_KEY, DEFAULT_COOLDOWN_PERIOD, ENABLED_KEY, JobSettings, cooldown_period,
};
