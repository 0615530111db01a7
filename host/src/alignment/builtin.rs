//! BALANCED, EVENLY_SPREAD and OFF: the never-blocking built-in modes.
//!
//! Each scans one region per direction, upward from the target: scale-up `[t, UA]` (above the
//! target), scale-down `[t, min(c, UA)]` (within range). When nothing is accepted they keep the
//! target bounded by the cap, `min(t, UA)`: a source never gets more subtasks than partitions
//! (a deliberate correction of the Flink autoscaler, which keeps `t`).

use super::decision::Decision;
use super::inputs::Inputs;
#[cfg(test)]
use super::search::first_accepted_scan;
use super::search::{Rule, Scan, first_accepted};

/// A built-in, never-blocking mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuiltIn {
    /// First value that lowers the busiest subtask's load, or an exact divisor if that comes first.
    Balanced,
    /// Exact divisors only.
    EvenlySpread,
    /// No alignment.
    Off,
}

impl BuiltIn {
    /// The configuration name.
    pub fn name(&self) -> &'static str {
        match self {
            BuiltIn::Balanced => "BALANCED",
            BuiltIn::EvenlySpread => "EVENLY_SPREAD",
            BuiltIn::Off => "OFF",
        }
    }

    /// The built-in with this exact (case-sensitive) name.
    pub fn from_name(name: &str) -> Option<BuiltIn> {
        match name {
            "BALANCED" => Some(BuiltIn::Balanced),
            "EVENLY_SPREAD" => Some(BuiltIn::EvenlySpread),
            "OFF" => Some(BuiltIn::Off),
            _ => None,
        }
    }

    fn rule(&self) -> Option<Rule> {
        match self {
            BuiltIn::Balanced => Some(Rule::LoadReducing),
            BuiltIn::EvenlySpread => Some(Rule::Divisor),
            BuiltIn::Off => None,
        }
    }

    /// Aligns (the caller has checked `t != c` and applicability).
    pub fn decide(&self, inputs: &Inputs) -> Decision {
        let Some(rule) = self.rule() else {
            return Decision::quiet(
                inputs.t,
                vec!["OFF: no search; the computed target is kept as is".to_string()],
            );
        };
        let scan = single_region(inputs);
        let mut explanation = vec![describe_single_region(inputs, rule)];
        match first_accepted(inputs.n, inputs.t, scan, rule) {
            Some(p) => {
                explanation.push(accepted_because(inputs, rule, p));
                Decision::quiet(p, explanation)
            }
            None => {
                let kept = inputs.capped_target();
                explanation.push(format!(
                    "no value accepted; keeping the target bounded by the cap: min({}, {}) = {kept}",
                    inputs.t, inputs.cap
                ));
                Decision::quiet(kept, explanation)
            }
        }
    }
}

/// The Flink autoscaler's single region: `[t, UA]` for a scale-up, `[t, min(c, UA)]` for a
/// scale-down.
pub(super) fn single_region(inputs: &Inputs) -> Scan {
    let end = if inputs.up {
        inputs.cap
    } else {
        inputs.c.min(inputs.cap)
    };
    Scan::up(inputs.t, end)
}

/// The Flink autoscaler's `firstAlignedInRegion`, scanned value by value (the test reference).
#[cfg(test)]
pub(super) fn first_aligned_in_region_scan(inputs: &Inputs, rule: Rule) -> Option<u64> {
    first_accepted_scan(inputs.n, inputs.t, single_region(inputs), rule)
}

fn describe_single_region(inputs: &Inputs, rule: Rule) -> String {
    let scan = single_region(inputs);
    let region = if inputs.up {
        "ABOVE_TARGET"
    } else {
        "WITHIN_RANGE"
    };
    if scan.is_empty() {
        format!(
            "region {region} [{}, {}] is empty (N < t or the cap is below the target)",
            scan.from, scan.to
        )
    } else {
        format!(
            "scanned {region} [{}, {}] upward with {}",
            scan.from,
            scan.to,
            rule.name()
        )
    }
}

/// Why `p` was accepted, in numbers.
pub(super) fn accepted_because(inputs: &Inputs, rule: Rule, p: u64) -> String {
    if inputs.n % p == 0 {
        format!(
            "accepted {p}: it divides N = {} ({} per subtask, no skew)",
            inputs.n,
            inputs.n / p
        )
    } else {
        format!(
            "accepted {p} by {}: N/p = {} < N/t = {} (the busiest subtask gets lighter)",
            rule.name(),
            inputs.n / p,
            inputs.n / inputs.t.max(1)
        )
    }
}
