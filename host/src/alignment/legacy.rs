//! The deprecated blocking modes of `scaling.key-group.partitions.adjust.mode`.
//!
//! Jobs that pinned them keep their exact previous behaviour: the same region search, then the
//! relaxed downward fallback, and a SCALING_LIMITED event whenever the expected parallelism is not
//! reached — holding the current parallelism when the candidate would invert the scale.

use flowscale_sdk::AlignmentContext;

use super::builtin::single_region;
use super::decision::Decision;
use super::explanation::accepted_because;
use super::inputs::{Inputs, scaling_limited};
use super::search::{Rule, first_accepted, relaxed_downward};

/// A legacy mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Legacy {
    /// Divisors only, then the relaxed fallback.
    EvenlySpread,
    /// Load-reducing values too, then the relaxed fallback.
    MaximizeUtilisation,
}

/// The values the deprecated key accepts (case-insensitive).
pub(crate) const LEGACY_VALUES: &[&str] = crate::config::reference::LEGACY_ALIGNMENT_MODE.choices;

impl Legacy {
    /// The configuration value.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Legacy::EvenlySpread => "EVENLY_SPREAD",
            Legacy::MaximizeUtilisation => "MAXIMIZE_UTILISATION",
        }
    }

    /// Parses a value of the deprecated key, case-insensitively as Flink parses enums.
    pub(crate) fn parse(value: &str) -> Option<Legacy> {
        let value = value.trim();
        if value.eq_ignore_ascii_case("EVENLY_SPREAD") {
            Some(Legacy::EvenlySpread)
        } else if value.eq_ignore_ascii_case("MAXIMIZE_UTILISATION") {
            Some(Legacy::MaximizeUtilisation)
        } else {
            None
        }
    }

    /// Aligns (the caller has checked `t != c` and applicability).
    pub(crate) fn decide(&self, ctx: &AlignmentContext, inputs: &Inputs) -> Decision {
        let rule = match self {
            Legacy::EvenlySpread => Rule::Divisor,
            Legacy::MaximizeUtilisation => Rule::LoadReducing,
        };
        let scan = single_region(inputs);
        let mut explanation = vec![format!(
            "legacy {}: scanned [{}, {}] upward with {}",
            self.name(),
            scan.from,
            scan.to,
            rule.name()
        )];
        if let Some(p) = first_accepted(inputs.n, inputs.t, scan, rule) {
            explanation.push(accepted_because(inputs, rule, p));
            return Decision::quiet(p, explanation);
        }
        let relaxed = relaxed_downward(inputs.n, inputs.t);
        let candidate = relaxed.max(inputs.lower);
        explanation.push(format!(
            "nothing accepted; relaxed downward fallback gives {relaxed}, max with lower limit {} = {candidate}",
            inputs.lower
        ));
        blocking_fallback(ctx, inputs, candidate, explanation)
    }
}

/// The Flink autoscaler's blocking fallback with one correction: when the cap (not alignment) is why the
/// candidate inverts the scale — the target is above the cap and the candidate within it — the
/// candidate is applied rather than holding a source above its partition count.
pub(super) fn blocking_fallback(
    ctx: &AlignmentContext,
    inputs: &Inputs,
    candidate: u64,
    mut explanation: Vec<String>,
) -> Decision {
    let inverts = (inputs.up && candidate <= inputs.c) || (!inputs.up && candidate >= inputs.c);
    let cap_caused = inputs.t > inputs.cap && candidate <= inputs.cap;
    if inverts && !cap_caused {
        explanation.push(format!(
            "{candidate} would invert the scaling direction from {}: blocked, keeping {} (SCALING_LIMITED)",
            inputs.c, inputs.c
        ));
        return Decision {
            parallelism: inputs.c,
            explanation: explanation.into(),
            events: vec![scaling_limited(ctx, inputs, inputs.c)],
        };
    }
    if inverts {
        explanation.push(format!(
            "{candidate} inverts the direction only because the target {} is above the cap {}: applied",
            inputs.t, inputs.cap
        ));
    }
    let events = if candidate != inputs.t {
        explanation.push(format!(
            "applied {candidate} instead of {} (SCALING_LIMITED)",
            inputs.t
        ));
        vec![scaling_limited(ctx, inputs, candidate)]
    } else {
        Vec::new()
    };
    Decision {
        parallelism: candidate,
        explanation: explanation.into(),
        events,
    }
}
