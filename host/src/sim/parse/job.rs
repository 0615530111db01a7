//! Reading a whole job file: the header, then each kind of table in the order their checks
//! depend on each other, then the job in topological order.

use std::path::Path;

use toml::Spanned;

use super::distribution::distribution;
use super::edges::{check_connected, edges};
use super::feedback::{check_iterations, feedback_edges};
use super::graph::{in_topological_order, topological_order};
use super::problem::Ctx;
use super::raw::{RawDuration, RawJob, RawRestart};
use super::taskmanager::task_managers;
use super::vertex::vertices;
use super::workload::attach_workloads;
use crate::sim::error::SimError;
use crate::sim::spec::{RestartSpec, SimulatedJobSpec};
use crate::sim::workload::Distribution;

/// Parses and validates a job file's text. `file` names it in errors; `base_dir` resolves trace
/// paths.
pub(crate) fn parse_job(
    src: &str,
    file: &str,
    base_dir: &Path,
) -> Result<SimulatedJobSpec, SimError> {
    let ctx = Ctx { file, src };
    let raw: RawJob = toml::from_str(src).map_err(|e| ctx.toml_problem(&e))?;
    if raw.vertices.is_empty() {
        return Err(ctx.problem(
            0..0,
            "vertices",
            "the job has no vertices",
            "at least one `[[vertices]]` table",
        ));
    }
    let default_keys = match &raw.keys {
        Some(d) => distribution(&ctx, d, "keys")?,
        None => Distribution::Uniform,
    };
    let tick_ms = tick_ms(&ctx, raw.job.tick.as_ref())?;
    let mut vertices = vertices(&ctx, &raw.vertices)?;
    let edges = edges(&ctx, &raw.edges, &vertices, &default_keys)?;
    check_connected(&ctx, &raw.vertices, &vertices, &edges)?;
    let feedback = feedback_edges(&ctx, &raw.feedback, &vertices)?;
    let order = topological_order(vertices.len(), &edges).ok_or_else(|| {
        ctx.problem(
            raw.edges.first().map_or(0..0, |e| e.span()),
            "edges",
            "the edges form a cycle",
            "an acyclic graph; close loops with `[[feedback]]` edges",
        )
    })?;
    check_iterations(&ctx, &raw.feedback, &vertices, &edges, &feedback)?;
    attach_workloads(&ctx, &raw.workload, &raw.vertices, &mut vertices, base_dir)?;
    let restart = restart(&ctx, raw.restart.as_ref())?;
    let task_managers = task_managers(&ctx, raw.taskmanager.as_ref())?;
    let (vertices, edges, feedback) = in_topological_order(&order, vertices, edges, feedback);
    Ok(SimulatedJobSpec {
        name: raw.job.name.clone().unwrap_or_else(|| "job".to_string()),
        seed: raw.job.seed.unwrap_or(0),
        tick_ms,
        vertices,
        edges,
        feedback,
        restart,
        task_managers,
    })
}

/// Simulated time per tick: at least 1 ms (default 1 s).
fn tick_ms(ctx: &Ctx<'_>, tick: Option<&Spanned<RawDuration>>) -> Result<i64, SimError> {
    match tick {
        Some(t) => match t.get_ref().millis() {
            Ok(ms) if ms > 0 => Ok(ms),
            _ => Err(ctx.problem(
                t.span(),
                "job.tick",
                "the tick must be at least 1 ms",
                "a duration such as \"1s\" or \"500ms\"",
            )),
        },
        None => Ok(1000),
    }
}

/// Restart behaviour: without a `[restart]` table 30 s of downtime; within one, each key
/// defaults to 0.
fn restart(ctx: &Ctx<'_>, raw: Option<&RawRestart>) -> Result<RestartSpec, SimError> {
    Ok(match raw {
        Some(r) => RestartSpec {
            downtime_ms: duration_ms(ctx, r.downtime.as_ref(), "restart.downtime", 0)?,
            per_gib_ms: duration_ms(ctx, r.per_gib.as_ref(), "restart.per_gib", 0)?,
        },
        None => RestartSpec {
            downtime_ms: 30_000,
            per_gib_ms: 0,
        },
    })
}

fn duration_ms(
    ctx: &Ctx<'_>,
    d: Option<&Spanned<RawDuration>>,
    key: &str,
    default: i64,
) -> Result<i64, SimError> {
    match d {
        None => Ok(default),
        Some(d) => d.get_ref().millis().map_err(|()| {
            ctx.problem(
                d.span(),
                key,
                "the duration is too large",
                "a duration below 292 million years",
            )
        }),
    }
}
