//! Small aligners for tests and replays of the pipeline on its own.
//!
//! The production aligner (mode resolution, plugins, the result guard) lives in
//! [`crate::alignment`]; these two only reproduce the Flink autoscaler's behaviour closely enough to check
//! the pipeline's numbers.

use flowscale_sdk::ModeParams;

use crate::alignment::{AlignOutcome, Aligner, AlignmentRequest, Explanation};

/// Keeps every target as is (the Flink autoscaler's `OFF` mode).
#[derive(Debug, Clone, Copy, Default)]
pub struct TargetAligner;

impl Aligner for TargetAligner {
    fn align(&self, request: AlignmentRequest) -> AlignOutcome {
        AlignOutcome {
            parallelism: request.target,
            mode: "OFF".into(),
            applicable: false,
            events: Vec::new(),
            explanation: Explanation::text("target kept"),
        }
    }
}

/// The Flink autoscaler's `BALANCED` rule: for a source with known partitions or a vertex with a HASH
/// input, the first parallelism from the target towards the cap (scale-up) or towards the
/// current parallelism (scale-down) that divides `N` or lowers `N / p`; otherwise the target.
#[derive(Debug, Clone, Copy, Default)]
pub struct BalancedAligner;

impl Aligner for BalancedAligner {
    fn align(&self, request: AlignmentRequest) -> AlignOutcome {
        let ctx = request.into_context(ModeParams::default());
        let target = ctx.target_parallelism();
        let outcome = |parallelism: u32, applicable: bool, why: String| AlignOutcome {
            parallelism,
            mode: "BALANCED".into(),
            applicable,
            events: Vec::new(),
            explanation: Explanation::text(why),
        };
        if !ctx.default_applicable() {
            return outcome(target, false, "not applicable: target kept".into());
        }
        let n = u64::from(ctx.partitions_or_key_groups());
        let cap = ctx.alignment_cap();
        let end = if ctx.is_scale_up() {
            cap
        } else {
            ctx.current_parallelism().min(cap)
        };
        if target == 0 {
            return outcome(target, true, "target 0 kept".into());
        }
        let per_target = n / u64::from(target);
        let found = (target..=end).find(|&p| {
            let p = u64::from(p);
            n % p == 0 || n / p < per_target
        });
        match found {
            Some(p) => outcome(
                p,
                true,
                format!("first aligned value in [{target}, {end}] for N={n}: {p}"),
            ),
            None => outcome(
                target,
                true,
                format!("no aligned value in [{target}, {end}] for N={n}: target kept"),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowscale_sdk::ShipStrategy;

    /// A vertex scaling from `current` to `target` with the limits `[1, 200]`.
    fn request(current: u32, target: u32, key_groups: u32) -> AlignmentRequest {
        AlignmentRequest {
            upper_limit: 200,
            ..AlignmentRequest::new(current, target, key_groups)
        }
    }

    #[test]
    fn balanced_rule() {
        let hash: std::sync::Arc<[ShipStrategy]> = [ShipStrategy::Hash].into();
        // 7 -> 8 with 128 key groups (the Flink autoscaler's testAdjustByMaxParallelism sink).
        let keyed = AlignmentRequest {
            input_ship_strategies: hash.clone(),
            ..request(1, 7, 128)
        };
        assert_eq!(BalancedAligner.align(keyed).parallelism, 8);
        // Not applicable: no HASH input, no partitions.
        assert_eq!(BalancedAligner.align(request(1, 7, 128)).parallelism, 7);
        // Scale-down searches between the target and the current parallelism.
        let down = AlignmentRequest {
            input_ship_strategies: hash,
            ..request(10, 5, 12)
        };
        assert_eq!(BalancedAligner.align(down).parallelism, 6);
        // A source above its partitions keeps its target (region empty).
        let source = AlignmentRequest {
            source_partitions: 15,
            ..request(2, 20, 128)
        };
        assert_eq!(BalancedAligner.align(source).parallelism, 20);
    }
}
