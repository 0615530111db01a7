//! A minimal flowscale plugin: the `power-of-two` alignment mode.
//!
//! With the default max parallelism (128 key groups, a power of two), every power of two up to
//! 128 divides the key groups evenly. This mode rounds the target up to the next power of two,
//! never above the alignment cap, and never more than `max-overshoot` subtasks above the target.

#![warn(missing_docs, unreachable_pub)]

use flowscale_sdk::{AlignmentContext, AlignmentMode, ModeError, ModeParams};

/// The mode. Plugin objects must be `Send + Sync`; a plain struct is.
#[derive(Default)]
pub struct PowerOfTwo;

/// `scaling.alignment.mode.<name>.max-overshoot`: optional, a positive integer.
fn max_overshoot(params: &ModeParams) -> Result<Option<u32>, ModeError> {
    Ok(params.get_positive("max-overshoot")?)
}

impl AlignmentMode for PowerOfTwo {
    // `is_applicable` keeps its default: sources with partitions and keyBy inputs.

    fn align(&self, ctx: &AlignmentContext) -> Result<u32, ModeError> {
        let t = ctx.target_parallelism();
        let cap = ctx.alignment_cap();
        let limit = match max_overshoot(ctx.params())? {
            Some(extra) => cap.min(t.saturating_add(extra)),
            None => cap,
        };
        let next = t.checked_next_power_of_two().unwrap_or(t);
        flowscale_sdk::tracing::debug!(t, next, limit, "power-of-two");
        Ok(if next <= limit { next } else { t.min(cap) })
    }

    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        max_overshoot(params).map(|_| ())
    }
}

flowscale_sdk::export_plugin! {
    name: "plugin-template",
    version: env!("CARGO_PKG_VERSION"),
    modes: [
        ("power-of-two", "rounds the target up to a power of two within the cap", PowerOfTwo::default),
    ],
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn rounds_up_within_the_cap_and_the_overshoot() {
        let ctx = AlignmentContext::builder(8, 20, 128).build();
        assert_eq!(PowerOfTwo.align(&ctx), Ok(32));

        let params = ModeParams::new(
            "pow2",
            BTreeMap::from([("max-overshoot".to_string(), "4".to_string())]),
        );
        let ctx = AlignmentContext::builder(8, 20, 128).params(params).build();
        assert_eq!(PowerOfTwo.align(&ctx), Ok(20));

        let source = AlignmentContext::builder(8, 20, 128)
            .source_partitions(24)
            .build();
        assert_eq!(PowerOfTwo.align(&source), Ok(20));
    }

    #[test]
    fn bad_parameters_name_the_key() {
        let params = ModeParams::new(
            "pow2",
            BTreeMap::from([("max-overshoot".to_string(), "lots".to_string())]),
        );
        let err = PowerOfTwo.validate(&params).unwrap_err();
        assert!(
            err.message()
                .contains("scaling.alignment.mode.pow2.max-overshoot")
        );
    }
}
