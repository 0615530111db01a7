//! `slo-target`: a metric evaluator that makes each source drain its backlog within an SLO.
//!
//! The pipeline already plans to drain a source's lag: its `CATCH_UP_DATA_RATE` is
//! `LAG / catch-up.duration` (30 min by default), and a vertex's required capacity is
//! `CATCH_UP_DATA_RATE + restart term + TARGET_DATA_RATE / utilization` (see
//! docs/decision-pipeline.md, "Capacity"). `TARGET_DATA_RATE` is the rate the vertex must
//! *sustain* (the records arriving, `inRate + rate(LAG)`); the catch-up rate is the *extra*
//! rate on top of it that drains the lag already there. A drain-time SLO is about the lag
//! already there, so this evaluator raises the catch-up rate, not the target rate: raising the
//! target would also inflate the restart term and the scale-down threshold, and it would keep
//! the capacity high for as long as the averaged target stays high, after the lag is gone.
//!
//! For a vertex whose `LAG` (records, the current value) is positive and finite, the catch-up
//! rate needed to drain it within `drain-within` is `needed = LAG / drain-within` (records per
//! second; the duration in exact seconds). The evaluator answers
//! `CATCH_UP_DATA_RATE = needed` (the current half; the average half NaN, so it is kept) when
//! `needed` exceeds the evaluated catch-up rate, or when the vertex has none or a NaN one; it
//! answers nothing otherwise, so a `catch-up.duration` stricter than the SLO still wins.
//!
//! Only sources report `LAG`. The host merges an evaluator's answer into a vertex's metrics
//! before it evaluates the next vertex in topological order, and a downstream vertex's catch-up
//! rate is the sum of its inputs' catch-up rates times the share of their records that reaches
//! it, so the raised rate carries downstream like the data itself: the whole path of the
//! backlog is sized to drain it in time.
//!
//! Parameters (`metrics.custom-evaluator.<name>.*`): `drain-within` (required), in Flink's
//! duration syntax (`30 s`, `5 min`, `1 h`, `2 d`; a plain number is milliseconds), from 1 s to
//! 365 d; and `class`, the implementation id. Anything else is refused so that a misspelt key is
//! reported (when the configuration is loaded; at evaluation, `drain-within` is read only for a
//! vertex with lag to drain).

#![warn(missing_docs, unreachable_pub)]

use std::cell::RefCell;
use std::time::Duration;

use flowscale_sdk::{
    EvaluatedMetric, EvaluatorContext, MetricEvaluator, ModeError, ModeParams, VertexMetrics,
};

mod duration;

pub use crate::duration::parse_duration;

/// The implementation id (`metrics.custom-evaluator.<name>.class = "slo-target"`).
pub const ID: &str = "slo-target";

/// The one-line description `flowscale plugins` shows for the evaluator.
pub const DESCRIPTION: &str =
    "raises a source's catch-up rate so that its lag drains within an SLO";

const PARAMS: &[&str] = &["class", "drain-within"];

/// The pending records of a source (current half).
const LAG: &str = "LAG";
/// The extra rate that drains the lag (current half).
const CATCH_UP_DATA_RATE: &str = "CATCH_UP_DATA_RATE";

/// The shortest SLO: below a second, the needed rate is a spike no rescale can follow.
const MIN_DRAIN: Duration = Duration::from_secs(1);
/// The longest SLO, as for every duration of the host: a longer one is a unit mix-up.
const MAX_DRAIN: Duration = Duration::from_secs(365 * 24 * 3600);

/// Parses and checks `drain-within`; errors name the full key.
pub fn drain_within(params: &ModeParams) -> Result<Duration, ModeError> {
    if let Some((unknown, _)) = params.iter().find(|(k, _)| !PARAMS.contains(k)) {
        let message = format!("is not a parameter of {ID} (known: drain-within)");
        return Err(params.error(unknown, &message).into());
    }
    let text = params.require("drain-within")?;
    let d = parse_duration(text).map_err(|e| params.error("drain-within", &e.to_string()))?;
    if !(MIN_DRAIN..=MAX_DRAIN).contains(&d) {
        let message = format!("`{text}` is out of range (valid: 1 s to 365 d)");
        return Err(params.error("drain-within", &message).into());
    }
    Ok(d)
}

thread_local! {
    /// The parameters this thread parsed last, with what they parsed to. The host lends the
    /// same parameters for every vertex of a job, and the SDK keeps them as they are while
    /// they do not change (shared, so comparing them is two pointer comparisons): the vertices
    /// of a cycle parse `drain-within` once, not once each.
    static PARSED: RefCell<Option<(ModeParams, Result<Duration, ModeError>)>> =
        const { RefCell::new(None) };
}

/// [`drain_within`] of `params`, parsed again only when they differ from the last ones.
fn parsed_drain_within(params: &ModeParams) -> Result<Duration, ModeError> {
    PARSED.with(|parsed| {
        let mut parsed = parsed.borrow_mut();
        match &*parsed {
            Some((kept, within)) if kept == params => within.clone(),
            _ => {
                let within = drain_within(params);
                *parsed = Some((params.clone(), within.clone()));
                within
            }
        }
    })
}

/// The catch-up rate (records per second) that drains `lag` records within `within`.
pub fn needed_rate(lag: f64, within: Duration) -> f64 {
    lag / within.as_secs_f64()
}

/// The `slo-target` evaluator.
#[derive(Debug, Default)]
pub struct SloTarget;

impl MetricEvaluator for SloTarget {
    fn evaluate(&self, ctx: &EvaluatorContext) -> Result<VertexMetrics, ModeError> {
        // Only sources report a lag: the other vertices (most of a job) answer nothing
        // without reading the parameters, which the host checks when it loads them
        // (`validate`); a vertex with lag to drain still gets the error of a bad value.
        let lag = match ctx.metric(LAG) {
            Some(m) if m.current.is_finite() && m.current > 0.0 => m.current,
            _ => return Ok(Vec::new()),
        };
        let within = parsed_drain_within(ctx.params())?;
        let needed = needed_rate(lag, within);
        let evaluated = ctx.metric(CATCH_UP_DATA_RATE).map(|m| m.current);
        // A NaN (or missing) evaluated rate compares false: the SLO's rate applies.
        if evaluated.is_some_and(|e| e >= needed) {
            return Ok(Vec::new());
        }
        let metric = EvaluatedMetric {
            current: needed,
            average: f64::NAN,
        };
        Ok(vec![(CATCH_UP_DATA_RATE.to_string(), metric)])
    }

    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        drain_within(params).map(|_| ())
    }
}

flowscale_sdk::export_plugin! {
    name: ID,
    version: env!("CARGO_PKG_VERSION"),
    evaluators: [(ID, DESCRIPTION, SloTarget::default)],
}

#[cfg(test)]
mod tests;
