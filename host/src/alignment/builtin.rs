//! BALANCED, EVENLY_SPREAD and OFF: the never-blocking built-in modes.
//!
//! Each scans one region per direction, upward from the target: scale-up `[t, UA]` (above the
//! target), scale-down `[t, min(c, UA)]` (within range). When nothing is accepted they keep the
//! target bounded by the cap, `min(t, UA)`: a source never gets more subtasks than partitions
//! (a deliberate correction of the Flink autoscaler, which keeps `t`).

use super::decision::Decision;
use super::explanation::Explanation;
use super::inputs::Inputs;
#[cfg(test)]
use super::search::first_accepted_scan;
use super::search::{Rule, Scan, first_accepted};

/// A built-in, never-blocking mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum BuiltIn {
    /// First value that lowers the busiest subtask's load, or an exact divisor if that comes first.
    Balanced,
    /// Exact divisors only.
    EvenlySpread,
    /// No alignment.
    Off,
}

impl BuiltIn {
    /// The configuration name.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            BuiltIn::Balanced => "BALANCED",
            BuiltIn::EvenlySpread => "EVENLY_SPREAD",
            BuiltIn::Off => "OFF",
        }
    }

    /// The built-in with this exact (case-sensitive) name.
    pub(crate) fn from_name(name: &str) -> Option<BuiltIn> {
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
    pub(crate) fn decide(&self, inputs: &Inputs) -> Decision {
        let Some(rule) = self.rule() else {
            return Decision::quiet(
                inputs.t,
                Explanation::text("OFF: no search; the computed target is kept as is"),
            );
        };
        let scan = single_region(inputs);
        // The lines are rendered when read; the first one is the job's (`Inputs::describe`).
        match first_accepted(inputs.n, inputs.t, scan, rule) {
            Some(p) => Decision::quiet(p, Explanation::search(*inputs, scan, rule, Some(p))),
            None => Decision::quiet(
                inputs.capped_target(),
                Explanation::search(*inputs, scan, rule, None),
            ),
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
