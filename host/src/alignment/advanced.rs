//! ADVANCED: per-direction ordered `REGION:RULE` steps and a fallback.
//!
//! Every region starts at the target and moves away from it; every candidate also stays within
//! `[1, UA]`. The first value a step accepts wins; if none does, the fallback decides. With the
//! defaults ADVANCED equals BALANCED; with DIVISOR in both directions it equals EVENLY_SPREAD.

use std::fmt;

use flowscale_sdk::{AlignmentContext, ModeParams};

use super::decision::Decision;
use super::explanation::accepted_because;
use super::inputs::{Inputs, scaling_limited};
use super::search::{Rule, Scan, first_accepted, relaxed_downward};
use crate::config::KeyError;
use crate::config::reference::{ADVANCED_SCALE_DOWN, ADVANCED_SCALE_UP};

/// Parameter with the scale-up steps.
pub(super) const SCALE_UP: &str = "scale-up";
/// Parameter with the scale-down steps.
pub(super) const SCALE_DOWN: &str = "scale-down";
/// Parameter with the fallback.
pub(super) const FALLBACK: &str = "fallback";
/// Every parameter ADVANCED reads (`class` is ignored: ADVANCED is built in).
const KNOWN_PARAMS: &[&str] = &[SCALE_UP, SCALE_DOWN, FALLBACK, "class"];

const DEFAULT_SCALE_UP: &str = match ADVANCED_SCALE_UP.default {
    Some(steps) => steps,
    None => "",
};
const DEFAULT_SCALE_DOWN: &str = match ADVANCED_SCALE_DOWN.default {
    Some(steps) => steps,
    None => "",
};

/// Where a step looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Region {
    /// Scale-up only: `t, t+1, ..., UA`.
    AboveTarget,
    /// Scale-up: `t, t-1, ..., c+1` (a cheaper scale-up); scale-down: `t, t+1, ..., min(c, UA)`.
    WithinRange,
    /// Scale-down only: `t, t-1, ..., max(lower, 1)` (a deeper scale-down).
    BelowTarget,
}

impl Region {
    fn name(&self) -> &'static str {
        match self {
            Region::AboveTarget => "ABOVE_TARGET",
            Region::WithinRange => "WITHIN_RANGE",
            Region::BelowTarget => "BELOW_TARGET",
        }
    }

    fn parse(text: &str) -> Option<Region> {
        [
            Region::AboveTarget,
            Region::WithinRange,
            Region::BelowTarget,
        ]
        .into_iter()
        .find(|r| r.name().eq_ignore_ascii_case(text))
    }

    /// True when the region is scanned downward in that direction.
    fn downward(&self, up: bool) -> bool {
        matches!(
            (self, up),
            (Region::WithinRange, true) | (Region::BelowTarget, false)
        )
    }

    fn exists(&self, up: bool) -> bool {
        !matches!(
            (self, up),
            (Region::BelowTarget, true) | (Region::AboveTarget, false)
        )
    }

    /// The candidates of this region for `inputs`, clipped to `[1, UA]`.
    fn scan(&self, inputs: &Inputs) -> Scan {
        let top = inputs.t.min(inputs.cap);
        match (self, inputs.up) {
            (Region::AboveTarget, _) => Scan::up(inputs.t, inputs.cap),
            (Region::WithinRange, true) => Scan::down(top, inputs.c + 1),
            (Region::WithinRange, false) => Scan::up(inputs.t, inputs.c.min(inputs.cap)),
            (Region::BelowTarget, _) => Scan::down(top, inputs.lower.max(1)),
        }
    }
}

fn rule_from(text: &str) -> Option<Rule> {
    [Rule::Divisor, Rule::LoadReducing]
        .into_iter()
        .find(|r| r.name().eq_ignore_ascii_case(text))
}

/// One `REGION:RULE` step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Step {
    /// Where to look.
    pub(crate) region: Region,
    /// What to accept.
    pub(crate) rule: Rule,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.region.name(), self.rule.name())
    }
}

/// What to do when no step accepts a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Fallback {
    /// Keep the target, bounded by the cap.
    Target,
    /// Block: keep the current parallelism and emit SCALING_LIMITED.
    Current,
    /// The legacy relaxed downward fallback, never inverting the scale.
    Relaxed,
}

impl Fallback {
    const ALL: [Fallback; 3] = [Fallback::Target, Fallback::Current, Fallback::Relaxed];

    fn name(&self) -> &'static str {
        match self {
            Fallback::Target => "TARGET",
            Fallback::Current => "CURRENT",
            Fallback::Relaxed => "RELAXED",
        }
    }
}

/// A validated ADVANCED configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AdvancedSpec {
    /// Steps for a scale-up, in order.
    pub(crate) up: Vec<Step>,
    /// Steps for a scale-down, in order.
    pub(crate) down: Vec<Step>,
    /// What to do when no step accepts a value.
    pub(crate) fallback: Fallback,
}

impl Default for AdvancedSpec {
    fn default() -> AdvancedSpec {
        AdvancedSpec {
            up: vec![Step {
                region: Region::AboveTarget,
                rule: Rule::LoadReducing,
            }],
            down: vec![Step {
                region: Region::WithinRange,
                rule: Rule::LoadReducing,
            }],
            fallback: Fallback::Target,
        }
    }
}

impl AdvancedSpec {
    /// Reads and validates the parameters of `scaling.alignment.mode.ADVANCED.*`, reporting
    /// every problem at once.
    pub(crate) fn from_params(params: &ModeParams) -> Result<AdvancedSpec, Vec<KeyError>> {
        let mut errors = Vec::new();
        for (name, _) in params.iter() {
            if !KNOWN_PARAMS.contains(&name) {
                errors.push(KeyError::new(
                    params.full_key(name),
                    format!(
                        "unknown ADVANCED parameter (valid: {SCALE_UP}, {SCALE_DOWN}, {FALLBACK})"
                    ),
                ));
            }
        }
        let up = parse_steps(
            params,
            SCALE_UP,
            params.get(SCALE_UP).unwrap_or(DEFAULT_SCALE_UP),
            true,
            &mut errors,
        );
        let down = parse_steps(
            params,
            SCALE_DOWN,
            params.get(SCALE_DOWN).unwrap_or(DEFAULT_SCALE_DOWN),
            false,
            &mut errors,
        );
        let fallback = match params.get(FALLBACK) {
            None => Fallback::Target,
            Some(text) => Fallback::ALL
                .into_iter()
                .find(|f| f.name().eq_ignore_ascii_case(text.trim()))
                .unwrap_or_else(|| {
                    errors.push(KeyError::new(
                        params.full_key(FALLBACK),
                        format!(
                            "unknown fallback `{}` (valid: TARGET, CURRENT, RELAXED)",
                            text.trim()
                        ),
                    ));
                    Fallback::Target
                }),
        };
        if errors.is_empty() {
            Ok(AdvancedSpec { up, down, fallback })
        } else {
            Err(errors)
        }
    }

    /// Aligns (the caller has checked `t != c` and applicability).
    pub(crate) fn decide(&self, ctx: &AlignmentContext, inputs: &Inputs) -> Decision {
        let steps = if inputs.up { &self.up } else { &self.down };
        let mut explanation = Vec::new();
        for step in steps {
            let scan = step.region.scan(inputs);
            match first_accepted(inputs.n, inputs.t, scan, step.rule) {
                Some(p) => {
                    explanation.push(format!(
                        "step {step}: scanned [{} .. {}]",
                        scan.from, scan.to
                    ));
                    explanation.push(accepted_because(inputs, step.rule, p));
                    return Decision::quiet(p, explanation);
                }
                None => explanation.push(format!(
                    "step {step}: scanned [{} .. {}], nothing accepted",
                    scan.from, scan.to
                )),
            }
        }
        match self.fallback {
            Fallback::Target => {
                let kept = inputs.capped_target();
                explanation.push(format!(
                    "fallback TARGET: min({}, {}) = {kept}",
                    inputs.t, inputs.cap
                ));
                Decision::quiet(kept, explanation)
            }
            Fallback::Current => {
                explanation.push(format!(
                    "fallback CURRENT: blocked, keeping {} (SCALING_LIMITED)",
                    inputs.c
                ));
                Decision {
                    parallelism: inputs.c,
                    explanation: explanation.into(),
                    events: vec![scaling_limited(ctx, inputs, inputs.c)],
                }
            }
            Fallback::Relaxed => {
                let relaxed = relaxed_downward(inputs.n, inputs.t)
                    .max(inputs.lower)
                    .min(inputs.cap);
                // Never invert: a scale-up stays above c (unless the cap itself is at or below c).
                let bounded = if inputs.up {
                    relaxed.max((inputs.c + 1).min(inputs.cap))
                } else {
                    relaxed.min(inputs.c.saturating_sub(1).max(1))
                };
                explanation.push(format!(
                    "fallback RELAXED: relaxed downward value {relaxed}, bounded by the direction: {bounded}"
                ));
                Decision::quiet(bounded, explanation)
            }
        }
    }
}

/// The step list of one direction, with every problem reported against `param`'s full key.
fn parse_steps(
    params: &ModeParams,
    param: &str,
    text: &str,
    up: bool,
    errors: &mut Vec<KeyError>,
) -> Vec<Step> {
    let key = params.full_key(param);
    let mut error = |message: String| errors.push(KeyError::new(key.clone(), message));
    let mut steps: Vec<Step> = Vec::new();
    let items: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if items.is_empty() {
        error(format!(
            "the step list is empty (e.g. \"{}\")",
            if up {
                DEFAULT_SCALE_UP
            } else {
                DEFAULT_SCALE_DOWN
            }
        ));
        return steps;
    }
    for (index, item) in items.iter().enumerate() {
        let number = index + 1;
        let Some(step) = parse_step(number, item, up, &mut error) else {
            continue;
        };
        match refuse_step(number, step, up, &steps) {
            Some(message) => error(message),
            None => steps.push(step),
        }
    }
    steps
}

/// The direction's name and the regions that exist for it, for messages.
fn direction(up: bool) -> (&'static str, &'static str) {
    if up {
        ("scale-up", "ABOVE_TARGET, WITHIN_RANGE")
    } else {
        ("scale-down", "WITHIN_RANGE, BELOW_TARGET")
    }
}

/// Step `number` read as `REGION:RULE`; an unknown region and an unknown rule are both reported.
fn parse_step(number: usize, item: &str, up: bool, error: &mut impl FnMut(String)) -> Option<Step> {
    let (direction, valid_regions) = direction(up);
    let Some((region_text, rule_text)) = item.split_once(':') else {
        error(format!(
            "step {number} `{item}` is not REGION:RULE (regions for {direction}: {valid_regions}; rules: DIVISOR, LOAD_REDUCING)"
        ));
        return None;
    };
    let region = Region::parse(region_text.trim());
    let rule = rule_from(rule_text.trim());
    if region.is_none() {
        error(format!(
            "step {number} `{item}`: unknown region `{}` (valid for {direction}: {valid_regions})",
            region_text.trim()
        ));
    }
    if rule.is_none() {
        error(format!(
            "step {number} `{item}`: unknown rule `{}` (valid: DIVISOR, LOAD_REDUCING)",
            rule_text.trim()
        ));
    }
    Some(Step {
        region: region?,
        rule: rule?,
    })
}

/// Why a well-formed step cannot be used after the `earlier` ones: its region does not exist
/// in this direction, its rule can accept nothing there, or it can never change the result.
fn refuse_step(number: usize, step: Step, up: bool, earlier: &[Step]) -> Option<String> {
    let (direction, valid_regions) = direction(up);
    let Step { region, rule } = step;
    if !region.exists(up) {
        return Some(format!(
            "step {number} `{step}`: {} does not exist for {direction} (valid: {valid_regions})",
            region.name()
        ));
    }
    if rule == Rule::LoadReducing && region.downward(up) {
        return Some(format!(
            "step {number} `{step}`: LOAD_REDUCING on a downward-scanned region can accept nothing but the target; use {}:DIVISOR",
            region.name()
        ));
    }
    if earlier.contains(&step) {
        return Some(format!(
            "step {number} `{step}` repeats an earlier step and can never change the result"
        ));
    }
    if rule == Rule::Divisor
        && earlier
            .iter()
            .any(|s| s.region == region && s.rule == Rule::LoadReducing)
    {
        return Some(format!(
            "step {number} `{step}` comes after {}:LOAD_REDUCING: a stricter rule after a looser one on the same region can never change the result",
            region.name()
        ));
    }
    None
}
