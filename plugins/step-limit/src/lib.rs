//! `step-limit`: a scaling executor that caps how far one scaling operation moves each vertex.
//!
//! The decision pipeline may jump a vertex from 4 to 40 subtasks in one step when its metrics
//! say so. A platform team that prefers to approach the target over several operations (each
//! observed before the next) limits every step, relative to the vertex's current parallelism
//! `c`, for a proposed new parallelism `n`:
//!
//! * `max-factor = f` (a number greater than 1): on scale-up `n' = min(n, ceil(c · f))`, on
//!   scale-down `n' = max(n, floor(c / f))`. So `f = 2` at most doubles or halves a vertex.
//!   Because of the rounding, any `f > 1` still allows a step of one subtask (`ceil(c · f) > c`
//!   and, for `c ≥ 2`, `floor(c / f) < c`), so a vertex is never stuck. The products are
//!   computed in floating point and snapped to the nearest integer when within a relative
//!   `1e-9` of it, so that `10 × 1.1` caps at 11, not 12.
//! * `max-step = s` (a positive integer): `|n' − c| ≤ s`.
//!
//! At least one is required; with both, the tighter bound wins in each direction. A limited step
//! never overshoots the proposal (`n'` lies between `c` and `n`).
//!
//! A vertex whose limited step is no change (only possible when it was proposed unchanged) is
//! dropped from the answer, so it keeps its current parallelism. When no vertex is left the
//! executor vetoes the operation with a reason (an empty answer would veto it too, without
//! saying why). A limited vertex's `EXPECTED_PROCESSING_RATE`, which the pipeline computed for
//! `n` and which grows linearly with the parallelism, is scaled to `n'`, so that reports show
//! what the applied step is expected to reach.
//!
//! Priority: [`PRIORITY`] (100). Executors run in ascending priority, each on the previous
//! one's output. A limit belongs at the end of the chain: an executor after it could raise a
//! step again and undo the limit. Gates such as `change-freeze` (priority −100) run before it,
//! so a frozen cycle is vetoed with the freeze's reason before any step is computed.
//!
//! Parameters (`scaling.custom-executor.<name>.*`): `max-factor`, `max-step` (and `class`, the
//! implementation id); anything else is refused so that a misspelt key is reported.

#![warn(missing_docs, unreachable_pub)]

use flowscale_sdk::{
    EvaluatedMetric, ExecutorContext, ExecutorVerdict, ModeError, ModeParams, ScalingExecutor,
    ScalingSummary,
};

/// The implementation id (`scaling.custom-executor.<name>.class = "step-limit"`).
pub const ID: &str = "step-limit";

/// The one-line description `flowscale plugins` shows for the executor.
pub const DESCRIPTION: &str =
    "caps how far one scaling step moves each vertex, by a factor and a number of subtasks";

/// Where the executor runs in a job's chain: late, so that its limit is the last word (see the
/// crate documentation).
pub const PRIORITY: i32 = 100;

const PARAMS: &[&str] = &["class", "max-factor", "max-step"];

/// The metric the pipeline writes for a scaled vertex, proportional to its new parallelism.
const EXPECTED_PROCESSING_RATE: &str = "EXPECTED_PROCESSING_RATE";

/// The parameters, parsed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// The largest factor one step may scale a vertex by, up or down (> 1).
    pub max_factor: Option<f64>,
    /// The largest number of subtasks one step may add or remove (>= 1).
    pub max_step: Option<u32>,
}

impl Limits {
    /// Parses and checks the parameters; errors name the full key.
    pub fn parse(params: &ModeParams) -> Result<Limits, ModeError> {
        if let Some((unknown, _)) = params.iter().find(|(k, _)| !PARAMS.contains(k)) {
            let message = format!("is not a parameter of {ID} (known: max-factor, max-step)");
            return Err(params.error(unknown, &message).into());
        }
        let max_factor = params.get_f64("max-factor")?;
        if let Some(f) = max_factor {
            if !(f.is_finite() && f > 1.0) {
                let message = format!("must be a finite number greater than 1 (e.g. 2), got {f}");
                return Err(params.error("max-factor", &message).into());
            }
        }
        let max_step = params.get_positive("max-step")?;
        if max_factor.is_none() && max_step.is_none() {
            let message = "is required unless max-step is set (set either or both)";
            return Err(params.error("max-factor", message).into());
        }
        Ok(Limits {
            max_factor,
            max_step,
        })
    }

    /// The parallelism one step from `current` towards `proposed` may reach.
    pub fn limit(&self, current: u32, proposed: u32) -> u32 {
        if proposed > current {
            let by_factor = self
                .max_factor
                .map_or(u32::MAX, |f| saturate(snap(f64::from(current) * f).ceil()));
            let by_step = self
                .max_step
                .map_or(u32::MAX, |s| current.saturating_add(s));
            proposed.min(by_factor).min(by_step)
        } else {
            let by_factor = self
                .max_factor
                .map_or(0, |f| saturate(snap(f64::from(current) / f).floor()));
            let by_step = self.max_step.map_or(0, |s| current.saturating_sub(s));
            proposed.max(by_factor).max(by_step)
        }
    }
}

/// `x` rounded to the nearest integer when it lies within a relative 1e-9 of it: the error of
/// one multiplication or division must not move a bound across an integer.
fn snap(x: f64) -> f64 {
    let nearest = x.round();
    if (x - nearest).abs() <= 1e-9 * nearest.abs().max(1.0) {
        nearest
    } else {
        x
    }
}

/// A non-negative whole number as a parallelism, saturating at `u32::MAX`.
fn saturate(x: f64) -> u32 {
    // `as` saturates (and maps NaN to 0); the inputs here are finite and non-negative.
    x as u32
}

/// `summary` with its step limited, or `None` when the limited step is no change.
fn limited(limits: &Limits, summary: &ScalingSummary) -> Option<ScalingSummary> {
    let (current, proposed) = (summary.current_parallelism, summary.new_parallelism);
    let new = limits.limit(current, proposed);
    if new == current {
        return None;
    }
    let mut out = summary.clone();
    out.new_parallelism = new;
    if new != proposed {
        let ratio = f64::from(new) / f64::from(proposed);
        for (name, metric) in &mut out.metrics {
            if name == EXPECTED_PROCESSING_RATE {
                *metric = EvaluatedMetric {
                    current: metric.current * ratio,
                    average: metric.average * ratio,
                };
            }
        }
    }
    Some(out)
}

/// The `step-limit` executor.
#[derive(Debug, Default)]
pub struct StepLimit;

impl ScalingExecutor for StepLimit {
    fn priority(&self) -> i32 {
        PRIORITY
    }

    fn apply(&self, ctx: &ExecutorContext) -> Result<ExecutorVerdict, ModeError> {
        let limits = Limits::parse(ctx.params())?;
        let summaries: Vec<ScalingSummary> = ctx
            .summaries()
            .iter()
            .filter_map(|s| limited(&limits, s))
            .collect();
        if summaries.is_empty() {
            return Ok(ExecutorVerdict::Veto(format!(
                "{ID}: no vertex changes its parallelism within the step limits"
            )));
        }
        Ok(ExecutorVerdict::Apply(summaries))
    }

    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        Limits::parse(params).map(|_| ())
    }
}

flowscale_sdk::export_plugin! {
    name: ID,
    version: env!("CARGO_PKG_VERSION"),
    executors: [(ID, DESCRIPTION, StepLimit::default)],
}

#[cfg(test)]
mod tests;
