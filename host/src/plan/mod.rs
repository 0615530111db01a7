//! From a parsed fleet configuration to what the host will run: each job's resolved mode and
//! settings, with every problem located in the file.
//!
//! The plan sits below the control loop (`runner`): it checks and resolves, the loop runs what it
//! produced.

mod fleet;
mod settings;

pub(crate) use fleet::{FleetPlan, JobPlan, reload_fleet, replan_fleet};
pub use fleet::{PluginCatalog, plan_fleet};
pub(crate) use settings::COOLDOWN_PERIOD_KEY;
pub use settings::JobSettings;
