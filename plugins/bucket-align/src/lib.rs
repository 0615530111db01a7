//! `bucket-align`: parallelism alignment for vertices fed by a custom partitioner.
//!
//! A custom partitioner that spreads records over `B` buckets and sends bucket `b` to subtask
//! `b % p` loads subtasks exactly like key groups do: every subtask carries `floor(B/p)` or
//! `ceil(B/p)` buckets, and the busiest one bounds the vertex. No built-in mode knows `B`; this
//! one aligns to it the way BALANCED / EVENLY_SPREAD align to key groups.
//!
//! * Applicable to a vertex with a `CUSTOM` input (its bucket count from the job plan, or the
//!   `buckets` parameter when the plan does not carry it), and to every vertex the built-in
//!   gate accepts (a source reporting partitions, a `keyBy` input), where it aligns to `N`
//!   (partitions or key groups) exactly like the built-ins.
//! * Region scanned upward from the target `t`: scale-up `[t, cap]`, scale-down
//!   `[t, min(c, cap)]`, with `cap = min(B, K, upper)` (or `min(N, K, upper)` without buckets).
//!   Nothing accepted: `min(t, cap)`.
//! * Parameters (`scaling.alignment.mode.<name>.*`):
//!   * `buckets`: positive integer, used when the job plan does not carry the bucket count.
//!   * `rule`: `DIVISOR` (accept `B % p == 0`, like EVENLY_SPREAD) or `LOAD_REDUCING` (also
//!     accept the first `p` with `B / p < B / t`, like BALANCED). Default `LOAD_REDUCING`.
//!
//! With several custom inputs, the first one with a known bucket count decides.

#![warn(missing_docs, unreachable_pub)]

use std::cell::RefCell;

use flowscale_sdk::{AlignmentContext, AlignmentMode, ModeError, ModeParams, ShipStrategy};

/// The implementation id (`scaling.alignment.mode.<name>.class = "bucket-align"`).
pub const ID: &str = "bucket-align";

const PARAMS: &[&str] = &["class", "buckets", "rule"];
const RULES: &[&str] = &["DIVISOR", "LOAD_REDUCING"];

/// Which values the region search accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// `M % p == 0`: no skew at all.
    Divisor,
    /// A divisor, or the first `p` with `M / p < M / t`: the busiest subtask gets lighter.
    LoadReducing,
}

impl Rule {
    fn accepts(self, m: u32, p: u32, t: u32) -> bool {
        m % p == 0 || (self == Rule::LoadReducing && m / p < m / t)
    }
}

/// The parameters, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Bucket count to use when the job plan does not carry one.
    pub buckets: Option<u32>,
    /// The acceptance rule.
    pub rule: Rule,
}

impl Settings {
    /// Parses and checks the parameters; errors name the full key.
    pub fn parse(params: &ModeParams) -> Result<Settings, ModeError> {
        if let Some((unknown, _)) = params.iter().find(|(k, _)| !PARAMS.contains(k)) {
            return Err(params
                .error(
                    unknown,
                    &format!("is not a parameter of {ID} (known: buckets, rule)"),
                )
                .into());
        }
        let buckets = params.get_positive("buckets")?;
        let rule = match params.get_choice("rule", RULES)? {
            Some("DIVISOR") => Rule::Divisor,
            _ => Rule::LoadReducing,
        };
        Ok(Settings { buckets, rule })
    }
}

thread_local! {
    /// The parameters this thread parsed last, with what they parsed to. The host lends every
    /// vertex of a job the same parameters (and the plugin side keeps its copy of them while
    /// they do not change), so comparing them is two pointer comparisons, and `is_applicable`
    /// then `align` of every vertex parse them once instead of twice per vertex.
    static PARSED: RefCell<Option<(ModeParams, Result<Settings, ModeError>)>> =
        const { RefCell::new(None) };
}

/// [`Settings::parse`] of `params`, parsed again only when they differ from the last ones.
fn settings(params: &ModeParams) -> Result<Settings, ModeError> {
    PARSED.with(|parsed| {
        let mut parsed = parsed.borrow_mut();
        match &*parsed {
            Some((kept, settings)) if kept == params => settings.clone(),
            _ => {
                let settings = Settings::parse(params);
                *parsed = Some((params.clone(), settings.clone()));
                settings
            }
        }
    })
}

/// The `bucket-align` mode.
#[derive(Debug, Default)]
pub struct BucketAlign;

/// What a vertex is aligned to, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Basis {
    /// `B` buckets of a custom partitioner.
    Buckets(u32),
    /// `N` partitions or key groups (the built-in gate).
    PartitionsOrKeyGroups(u32),
}

fn basis(ctx: &AlignmentContext, settings: &Settings) -> Option<Basis> {
    let custom = ctx
        .input_ship_strategies()
        .iter()
        .filter(|s| matches!(s, ShipStrategy::Custom { .. }));
    let mut has_custom = false;
    for s in custom {
        has_custom = true;
        if let Some(b) = s.custom_buckets() {
            return Some(Basis::Buckets(b));
        }
    }
    if has_custom {
        if let Some(b) = settings.buckets {
            return Some(Basis::Buckets(b));
        }
    }
    ctx.default_applicable()
        .then(|| Basis::PartitionsOrKeyGroups(ctx.partitions_or_key_groups()))
}

/// The region search of alignment.md over `m` units with cap `cap`.
fn search(ctx: &AlignmentContext, m: u32, cap: u32, rule: Rule) -> u32 {
    let (c, t) = (ctx.current_parallelism(), ctx.target_parallelism());
    if t == c || t == 0 {
        return t;
    }
    let end = if t > c { cap } else { c.min(cap) };
    (t..=end)
        .find(|&p| rule.accepts(m, p, t))
        .unwrap_or(t.min(cap))
}

impl AlignmentMode for BucketAlign {
    fn is_applicable(&self, ctx: &AlignmentContext) -> bool {
        // Bad parameters make the mode applicable so that `align` reports them.
        settings(ctx.params()).map_or(true, |s| basis(ctx, &s).is_some())
    }

    fn align(&self, ctx: &AlignmentContext) -> Result<u32, ModeError> {
        let settings = settings(ctx.params())?;
        let k_upper = ctx.max_parallelism().min(ctx.upper_limit());
        match basis(ctx, &settings) {
            Some(Basis::Buckets(b)) => Ok(search(ctx, b, b.min(k_upper), settings.rule)),
            Some(Basis::PartitionsOrKeyGroups(n)) => {
                Ok(search(ctx, n, ctx.alignment_cap(), settings.rule))
            }
            None => Err(ModeError::new(format!(
                "{ID}: vertex `{}` has no custom-partitioned input, no partitions and no keyBy \
                 input; nothing to align to",
                ctx.vertex_name()
            ))),
        }
    }

    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        Settings::parse(params).map(|_| ())
    }
}

flowscale_sdk::export_plugin! {
    name: "bucket-align",
    version: env!("CARGO_PKG_VERSION"),
    modes: [
        (ID, "aligns vertices fed by a custom partitioner to its bucket count (rule: LOAD_REDUCING | DIVISOR)", BucketAlign::default),
    ],
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn params(pairs: &[(&str, &str)]) -> ModeParams {
        ModeParams::new(
            "buckets",
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        )
    }

    fn custom(c: u32, t: u32, k: u32, buckets: u32, p: &[(&str, &str)]) -> AlignmentContext {
        AlignmentContext::builder(c, t, k)
            .input_ship_strategies(vec![ShipStrategy::Custom { buckets }])
            .params(params(p))
            .build()
    }

    #[test]
    fn load_reducing_is_balanced_over_buckets() {
        // B=48, c=8, t=10: 48/10 = 4 per subtask; 48/12 = 4 too; first load-reducing p is 10?
        // 48/10 = 4 (== 48/t), 48/11 = 4, 48/12 = 4 and divides: 12.
        assert_eq!(BucketAlign.align(&custom(8, 10, 128, 48, &[])), Ok(12));
        // B=100, c=16, t=24: 100/24 = 4; 100/25 = 4 and divides: 25.
        assert_eq!(BucketAlign.align(&custom(16, 24, 128, 100, &[])), Ok(25));
        // B=128 behaves like key groups: the worked example of alignment.md gives 26.
        assert_eq!(BucketAlign.align(&custom(16, 24, 1024, 128, &[])), Ok(26));
    }

    #[test]
    fn divisor_rule_is_evenly_spread_over_buckets() {
        let p = [("rule", "divisor")];
        assert_eq!(BucketAlign.align(&custom(16, 24, 1024, 128, &p)), Ok(32));
        assert_eq!(BucketAlign.align(&custom(8, 13, 128, 48, &p)), Ok(16));
    }

    #[test]
    fn never_more_subtasks_than_buckets_key_groups_or_upper_limit() {
        // t above B: the cap B wins.
        assert_eq!(BucketAlign.align(&custom(10, 60, 128, 48, &[])), Ok(48));
        // K below B.
        assert_eq!(BucketAlign.align(&custom(10, 60, 32, 48, &[])), Ok(32));
        // Upper limit below B.
        let ctx = AlignmentContext::builder(10, 30, 128)
            .limits(1, 20)
            .input_ship_strategies(vec![ShipStrategy::Custom { buckets: 48 }])
            .build();
        assert_eq!(BucketAlign.align(&ctx), Ok(20));
    }

    #[test]
    fn scale_down_searches_within_range_only() {
        // B=48, c=20, t=13: region [13, 20]: 48/13=3, 48/16=3 and divides -> 16.
        assert_eq!(BucketAlign.align(&custom(20, 13, 128, 48, &[])), Ok(16));
        // B=48, c=14, t=13, DIVISOR: region [13, 14] has no divisor -> t.
        let p = [("rule", "DIVISOR")];
        assert_eq!(BucketAlign.align(&custom(14, 13, 128, 48, &p)), Ok(13));
    }

    #[test]
    fn bucket_count_comes_from_the_plan_else_from_the_parameter() {
        let p = [("buckets", "48")];
        // Plan does not know the bucket count: the parameter is used.
        assert_eq!(BucketAlign.align(&custom(8, 10, 128, 0, &p)), Ok(12));
        // The plan's count wins over the parameter.
        assert_eq!(BucketAlign.align(&custom(16, 24, 128, 100, &p)), Ok(25));
        // Unknown count and no parameter: not a bucket vertex, and not in the default gate.
        let ctx = custom(8, 10, 128, 0, &[]);
        assert!(!BucketAlign.is_applicable(&ctx));
        assert!(BucketAlign.align(&ctx).is_err());
    }

    #[test]
    fn default_gate_vertices_align_to_partitions_or_key_groups() {
        let keyed = AlignmentContext::builder(16, 24, 128)
            .input_ship_strategies(vec![ShipStrategy::Hash])
            .build();
        assert!(BucketAlign.is_applicable(&keyed));
        assert_eq!(BucketAlign.align(&keyed), Ok(26));
        let source = AlignmentContext::builder(100, 180, 180)
            .source_partitions(15)
            .limits(1, 200)
            .build();
        assert_eq!(BucketAlign.align(&source), Ok(15));
        let plain = AlignmentContext::builder(2, 4, 128)
            .input_ship_strategies(vec![ShipStrategy::Rebalance])
            .build();
        assert!(!BucketAlign.is_applicable(&plain));
    }

    #[test]
    fn parameters_are_validated_with_the_full_key() {
        assert_eq!(
            BucketAlign.validate(&params(&[("class", ID), ("rule", "DIVISOR")])),
            Ok(())
        );
        let err = BucketAlign
            .validate(&params(&[("rule", "ROUND")]))
            .unwrap_err();
        assert!(
            err.message()
                .contains("scaling.alignment.mode.buckets.rule")
        );
        assert!(err.message().contains("DIVISOR, LOAD_REDUCING"));
        let err = BucketAlign
            .validate(&params(&[("buckets", "0")]))
            .unwrap_err();
        assert!(
            err.message()
                .contains("scaling.alignment.mode.buckets.buckets")
        );
        let err = BucketAlign
            .validate(&params(&[("bukets", "4")]))
            .unwrap_err();
        assert!(
            err.message()
                .contains("scaling.alignment.mode.buckets.bukets")
        );
        // Bad parameters surface at align time too, not as a silent default.
        assert!(
            BucketAlign
                .align(&custom(8, 10, 128, 48, &[("rule", "x")]))
                .is_err()
        );
    }

    #[test]
    fn unchanged_target_is_not_aligned() {
        assert_eq!(BucketAlign.align(&custom(10, 10, 128, 48, &[])), Ok(10));
    }
}
