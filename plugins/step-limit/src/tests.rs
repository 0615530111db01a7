use std::collections::BTreeMap;

use flowscale_sdk::EXECUTOR_KEY;
use proptest::prelude::*;

use super::*;

fn params(pairs: &[(&str, &str)]) -> ModeParams {
    ModeParams::under(
        EXECUTOR_KEY,
        "steps",
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn summary(id: &str, current: u32, new: u32) -> ScalingSummary {
    ScalingSummary {
        vertex_id: id.into(),
        current_parallelism: current,
        new_parallelism: new,
        metrics: Vec::new(),
    }
}

fn apply(pairs: &[(&str, &str)], summaries: Vec<ScalingSummary>) -> ExecutorVerdict {
    let ctx = ExecutorContext::new("job", summaries, 0).with_params(params(pairs));
    StepLimit.apply(&ctx).expect("valid parameters")
}

fn applied(verdict: ExecutorVerdict) -> Vec<(String, u32, u32)> {
    match verdict {
        ExecutorVerdict::Apply(s) => s
            .into_iter()
            .map(|s| (s.vertex_id, s.current_parallelism, s.new_parallelism))
            .collect(),
        ExecutorVerdict::Veto(reason) => panic!("vetoed: {reason}"),
    }
}

fn limits(max_factor: Option<f64>, max_step: Option<u32>) -> Limits {
    Limits {
        max_factor,
        max_step,
    }
}

#[test]
fn factor_two_at_most_doubles_or_halves() {
    let l = limits(Some(2.0), None);
    assert_eq!(l.limit(4, 40), 8);
    assert_eq!(l.limit(4, 7), 7, "within the factor: unchanged");
    assert_eq!(l.limit(40, 4), 20);
    // floor(5 / 2) = 2: scale-down rounds the bound down, allowing the larger step.
    assert_eq!(l.limit(5, 1), 2);
    // ceil(5 * 2) = 10.
    assert_eq!(l.limit(5, 11), 10);
}

#[test]
fn any_factor_above_one_allows_one_subtask() {
    let l = limits(Some(1.01), None);
    // ceil(3 * 1.01) = ceil(3.03) = 4; floor(3 / 1.01) = floor(2.97) = 2.
    assert_eq!(l.limit(3, 10), 4);
    assert_eq!(l.limit(3, 1), 2);
    assert_eq!(l.limit(1, 5), 2);
}

#[test]
fn bounds_on_an_integer_are_not_moved_by_rounding_errors() {
    let l = limits(Some(1.1), None);
    // 10 * 1.1 is 11.000000000000002 in binary floating point; the bound is 11.
    assert_eq!(l.limit(10, 20), 11);
    // 33 / 1.1 is 29.999999999999996; the bound is 30.
    assert_eq!(l.limit(33, 1), 30);
}

#[test]
fn max_step_caps_the_number_of_subtasks() {
    let l = limits(None, Some(3));
    assert_eq!(l.limit(4, 40), 7);
    assert_eq!(l.limit(40, 4), 37);
    assert_eq!(l.limit(4, 1), 1, "a step of 3: within the limit");
    assert_eq!(l.limit(u32::MAX - 1, u32::MAX), u32::MAX);
}

#[test]
fn both_limits_apply_the_tighter_one_each_way() {
    let l = limits(Some(2.0), Some(5));
    // Up from 4: factor allows 8, step allows 9.
    assert_eq!(l.limit(4, 40), 8);
    // Up from 20: factor allows 40, step allows 25.
    assert_eq!(l.limit(20, 40), 25);
    // Down from 8: factor allows 4, step allows 3.
    assert_eq!(l.limit(8, 1), 4);
    // Down from 40: factor allows 20, step allows 35.
    assert_eq!(l.limit(40, 1), 35);
}

#[test]
fn apply_limits_each_vertex_and_keeps_the_others_fields() {
    let mut a = summary("a", 4, 40);
    a.metrics = vec![
        (
            "EXPECTED_PROCESSING_RATE".into(),
            EvaluatedMetric {
                current: 4000.0,
                average: f64::NAN,
            },
        ),
        (
            "TRUE_PROCESSING_RATE".into(),
            EvaluatedMetric {
                current: f64::NAN,
                average: 400.0,
            },
        ),
    ];
    let verdict = apply(&[("max-factor", "2")], vec![a, summary("b", 10, 12)]);
    let ExecutorVerdict::Apply(out) = verdict else {
        panic!("vetoed")
    };
    assert_eq!(out.len(), 2);
    assert_eq!(
        (out[0].vertex_id.as_str(), out[0].new_parallelism),
        ("a", 8)
    );
    // The expected rate was computed for 40 subtasks; at 8 it is a fifth of it.
    assert_eq!(out[0].metrics[0].1.current, 800.0);
    assert!(out[0].metrics[0].1.average.is_nan());
    assert_eq!(
        out[0].metrics[1].1.average, 400.0,
        "other metrics as they were"
    );
    assert_eq!(
        (out[1].vertex_id.as_str(), out[1].new_parallelism),
        ("b", 12)
    );
}

#[test]
fn a_vertex_without_change_is_dropped_and_nothing_left_vetoes() {
    let out = applied(apply(
        &[("max-step", "2")],
        vec![summary("a", 4, 4), summary("b", 4, 9)],
    ));
    assert_eq!(out, vec![("b".to_string(), 4, 6)]);

    let verdict = apply(&[("max-step", "2")], vec![summary("a", 4, 4)]);
    let ExecutorVerdict::Veto(reason) = verdict else {
        panic!("applied")
    };
    assert!(reason.contains("step-limit"), "{reason}");
}

#[test]
fn parameters_are_checked_with_their_full_key() {
    let err = |pairs: &[(&str, &str)]| {
        Limits::parse(&params(pairs))
            .expect_err("invalid")
            .to_string()
    };
    let none = err(&[("class", "step-limit")]);
    assert!(
        none.contains("scaling.custom-executor.steps.max-factor"),
        "{none}"
    );
    assert!(none.contains("max-step"), "{none}");
    for bad in ["1", "0.5", "inf", "NaN", "two"] {
        let msg = err(&[("max-factor", bad)]);
        assert!(
            msg.contains("`scaling.custom-executor.steps.max-factor`"),
            "{bad}: {msg}"
        );
    }
    let msg = err(&[("max-step", "0")]);
    assert!(
        msg.contains("scaling.custom-executor.steps.max-step"),
        "{msg}"
    );
    let msg = err(&[("max-step", "2"), ("max-stp", "3")]);
    assert!(
        msg.contains("scaling.custom-executor.steps.max-stp"),
        "{msg}"
    );
    assert_eq!(
        Limits::parse(&params(&[("max-factor", "1.5"), ("max-step", "4")])),
        Ok(limits(Some(1.5), Some(4)))
    );
    assert!(StepLimit.validate(&params(&[("max-step", "1")])).is_ok());
    assert!(StepLimit.validate(&params(&[])).is_err());
}

#[test]
fn bad_parameters_at_apply_time_are_an_error() {
    let ctx = ExecutorContext::new("job", vec![summary("a", 1, 2)], 0)
        .with_params(params(&[("max-step", "x")]));
    assert!(StepLimit.apply(&ctx).is_err());
}

/// `ceil(c * num / den)` and `floor(c * den / num)` in exact integer arithmetic: the reference
/// for a factor `num / den` that binary floating point may not represent.
fn exact_bounds(c: u32, num: u64, den: u64) -> (u64, u64) {
    let c = u64::from(c);
    ((c * num).div_ceil(den), c * den / num)
}

proptest! {
    #[test]
    fn limited_steps_stay_within_every_bound(
        c in 1u32..5000,
        n in 1u32..20000,
        num in 101u64..400,
        step in proptest::option::of(1u32..50),
    ) {
        // A factor with two decimals, from 1.01 to 3.99.
        let den = 100;
        let f = num as f64 / den as f64;
        let l = limits(Some(f), step);
        let got = l.limit(c, n);
        let (up, down) = exact_bounds(c, num, den);
        // Between the current and the proposed parallelism.
        prop_assert!(got.min(c) >= n.min(c) && got.max(c) <= n.max(c));
        if n > c {
            let mut bound = up.min(u64::from(n));
            if let Some(s) = step {
                bound = bound.min(u64::from(c + s));
            }
            prop_assert_eq!(u64::from(got), bound);
        } else {
            let mut bound = down.max(u64::from(n));
            if let Some(s) = step {
                bound = bound.max(u64::from(c.saturating_sub(s)));
            }
            prop_assert_eq!(u64::from(got), bound);
        }
    }
}
