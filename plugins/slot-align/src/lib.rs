//! `slot-align`: parallelism in whole task-manager workers.
//!
//! A worker (task manager) offers `slots-per-worker` task slots; a vertex whose parallelism is
//! not a multiple of it leaves slots of its last worker idle, or shares that worker with other
//! vertices unevenly. This mode aligns the target to a multiple of `slots-per-worker`, and among
//! those prefers one that also divides `N` (partitions or key groups), so that the subtasks
//! carry equal shares as well.
//!
//! * Applicable to every vertex (workers are filled whatever the input edges are).
//! * Region scanned upward from the target `t`, as for the built-in modes: scale-up `[t, UA]`,
//!   scale-down `[t, min(c, UA)]`, `UA = min(N, K, upper)`. The first multiple of
//!   `slots-per-worker` that divides `N` wins; else the first multiple; else `min(t, UA)`.
//!   Never above the cap.
//! * Parameter (`scaling.alignment.mode.<name>.slots-per-worker`): required positive integer.

#![warn(missing_docs, unreachable_pub)]

use flowscale_sdk::{AlignmentContext, AlignmentMode, ModeError, ModeParams};

/// The implementation id (`scaling.alignment.mode.<name>.class = "slot-align"`).
pub const ID: &str = "slot-align";

const PARAM: &str = "slots-per-worker";

/// The `slot-align` mode.
#[derive(Debug, Default)]
pub struct SlotAlign;

/// Reads `slots-per-worker`; errors name the full key.
pub fn slots_per_worker(params: &ModeParams) -> Result<u32, ModeError> {
    if let Some((unknown, _)) = params.iter().find(|(k, _)| *k != "class" && *k != PARAM) {
        return Err(params
            .error(
                unknown,
                &format!("is not a parameter of {ID} (known: {PARAM})"),
            )
            .into());
    }
    match params.get_positive(PARAM)? {
        Some(s) => Ok(s),
        None => Err(params
            .error(
                PARAM,
                "is required: the number of task slots per worker, e.g. 4",
            )
            .into()),
    }
}

impl AlignmentMode for SlotAlign {
    fn is_applicable(&self, _ctx: &AlignmentContext) -> bool {
        true
    }

    fn align(&self, ctx: &AlignmentContext) -> Result<u32, ModeError> {
        let s = slots_per_worker(ctx.params())?;
        let (c, t) = (ctx.current_parallelism(), ctx.target_parallelism());
        if t == c || t == 0 {
            return Ok(t);
        }
        let n = ctx.partitions_or_key_groups();
        let cap = ctx.alignment_cap();
        let end = if t > c { cap } else { c.min(cap) };
        let multiples = || (t..=end).filter(|p| p % s == 0);
        let chosen = multiples()
            .find(|p| n % p == 0)
            .or_else(|| multiples().next())
            .unwrap_or(t.min(cap));
        flowscale_sdk::tracing::debug!(vertex = ctx.vertex_name(), t, chosen, s, "slot-align");
        Ok(chosen)
    }

    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        slots_per_worker(params).map(|_| ())
    }
}

flowscale_sdk::export_plugin! {
    name: "slot-align",
    version: env!("CARGO_PKG_VERSION"),
    modes: [
        (ID, "aligns parallelism to whole workers: multiples of slots-per-worker, dividing N when possible", SlotAlign::default),
    ],
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn params(pairs: &[(&str, &str)]) -> ModeParams {
        ModeParams::new(
            "slots",
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        )
    }

    fn ctx(c: u32, t: u32, k: u32, s: &str) -> AlignmentContext {
        AlignmentContext::builder(c, t, k)
            .params(params(&[(PARAM, s)]))
            .build()
    }

    #[test]
    fn prefers_a_multiple_that_divides_n() {
        // K=128, s=4, t=9: multiples 12 (no), 16 (divides) -> 16.
        assert_eq!(SlotAlign.align(&ctx(4, 9, 128, "4")), Ok(16));
        // K=120, s=4, t=9: 12 divides 120 -> 12.
        assert_eq!(SlotAlign.align(&ctx(4, 9, 120, "4")), Ok(12));
    }

    #[test]
    fn falls_back_to_the_first_multiple_when_none_divides() {
        // K=100, s=3, region [10, 100]: multiples of 3 never divide 100 -> 12.
        assert_eq!(SlotAlign.align(&ctx(4, 10, 100, "3")), Ok(12));
    }

    #[test]
    fn never_above_the_cap() {
        // Source with 10 partitions: cap 10, s=4: multiples 4, 8 are below t=9 -> min(t, cap)=9.
        let source = AlignmentContext::builder(2, 9, 128)
            .source_partitions(10)
            .params(params(&[(PARAM, "4")]))
            .build();
        assert_eq!(SlotAlign.align(&source), Ok(9));
        // Target above the cap: the cap.
        let source = AlignmentContext::builder(2, 40, 128)
            .source_partitions(10)
            .params(params(&[(PARAM, "4")]))
            .build();
        assert_eq!(SlotAlign.align(&source), Ok(10));
        // Upper limit 14, s=8: no multiple in [9, 14] -> 9.
        let limited = AlignmentContext::builder(4, 9, 128)
            .limits(1, 14)
            .params(params(&[(PARAM, "8")]))
            .build();
        assert_eq!(SlotAlign.align(&limited), Ok(9));
    }

    #[test]
    fn scale_down_stays_within_range() {
        // c=20, t=9, s=4, K=128: region [9, 20]: 12 (no), 16 (divides) -> 16.
        assert_eq!(SlotAlign.align(&ctx(20, 9, 128, "4")), Ok(16));
        // c=11, t=9, s=4: region [9, 11] holds no multiple -> t.
        assert_eq!(SlotAlign.align(&ctx(11, 9, 128, "4")), Ok(9));
    }

    #[test]
    fn one_slot_per_worker_is_plain_divisor_alignment() {
        assert_eq!(SlotAlign.align(&ctx(16, 24, 128, "1")), Ok(32));
    }

    #[test]
    fn slots_per_worker_is_required_and_validated() {
        let err = SlotAlign.validate(&params(&[])).unwrap_err();
        assert!(
            err.message()
                .contains("scaling.alignment.mode.slots.slots-per-worker")
        );
        assert!(err.message().contains("required"));
        let err = SlotAlign.validate(&params(&[(PARAM, "0")])).unwrap_err();
        assert!(err.message().contains(">= 1"));
        let err = SlotAlign.validate(&params(&[(PARAM, "four")])).unwrap_err();
        assert!(err.message().contains("`four`"));
        let err = SlotAlign
            .validate(&params(&[(PARAM, "4"), ("slot", "4")]))
            .unwrap_err();
        assert!(err.message().contains("scaling.alignment.mode.slots.slot"));
        assert_eq!(
            SlotAlign.validate(&params(&[(PARAM, "4"), ("class", ID)])),
            Ok(())
        );
        // The same errors at align time.
        assert!(SlotAlign.align(&ctx(4, 9, 128, "0")).is_err());
    }

    #[test]
    fn unchanged_target_is_kept() {
        assert_eq!(SlotAlign.align(&ctx(6, 6, 128, "4")), Ok(6));
    }
}
