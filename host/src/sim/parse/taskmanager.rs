//! Reading the `[taskmanager]` table: the size of one TaskManager of the simulated cluster,
//! which the resource quota multiplies by the TaskManagers an operation needs
//! (docs/decision-pipeline.md#resource-quota).

use toml::Spanned;

use super::problem::Ctx;
use super::raw::RawTaskManager;
use crate::engine::TaskManagerResources;
use crate::sim::error::SimError;

/// The TaskManager size, or `None` without a `[taskmanager]` table (the engine then reports
/// none, as one that cannot tell). Within the table `cpu` and `memory` are optional (unknown
/// when left out) and `slots` defaults to Flink's 1.
pub(super) fn task_managers(
    ctx: &Ctx<'_>,
    raw: Option<&Spanned<RawTaskManager>>,
) -> Result<Option<TaskManagerResources>, SimError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let tm = raw.get_ref();
    let cpu_cores = match &tm.cpu {
        Some(c) if c.get_ref().is_finite() && *c.get_ref() > 0.0 => Some(*c.get_ref()),
        Some(c) => {
            return Err(ctx.problem(
                c.span(),
                "taskmanager.cpu",
                &format!("{} is not a CPU count", c.get_ref()),
                "the cores of one TaskManager, > 0 (fractions allowed, e.g. 0.5)",
            ));
        }
        None => None,
    };
    let slots = match &tm.slots {
        Some(s) => match u32::try_from(*s.get_ref()) {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err(ctx.problem(
                    s.span(),
                    "taskmanager.slots",
                    &format!("{} is out of range", s.get_ref()),
                    "the task slots of one TaskManager, an integer >= 1",
                ));
            }
        },
        None => 1,
    };
    Ok(Some(TaskManagerResources {
        cpu_cores,
        memory_bytes: tm.memory.as_ref().map(|m| m.get_ref().0),
        slots: Some(slots),
    }))
}
