//! The cycle's scaling operation: whether the vertices' changes are applied, blocked (memory
//! pressure, advisor mode, an excluded period, the resource quota) or not needed, and the
//! scaling report.

mod decide;
mod memory;
mod quota;
mod report;
mod restart;

pub(crate) use decide::decide_operation;
pub(crate) use report::REPORT_HEADER_ENABLED;
