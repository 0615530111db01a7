use std::collections::BTreeMap;

use flowscale_sdk::ShipStrategy;
use proptest::prelude::*;

use super::*;

fn params(pairs: &[(&str, &str)]) -> ModeParams {
    ModeParams::new(
        "skew",
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn keyed(c: u32, t: u32, k: u32, busy: &[f64]) -> AlignmentContext {
    AlignmentContext::builder(c, t, k)
        .input_ship_strategies(vec![ShipStrategy::Hash])
        .subtask_loads(
            busy.iter()
                .map(|&b| SubtaskLoad {
                    busy_ratio: Some(b),
                    records_in_per_second: None,
                })
                .collect(),
        )
        .build()
}

/// Flink's other formula, `computeOperatorIndexForKeyGroup`: key group `g` goes to subtask
/// `g * p / K`. Used as the independent reference for the range arithmetic.
fn operator_index(g: u64, k: u64, p: u64) -> usize {
    (g * p / k) as usize
}

/// The busiest share at `p`, the slow way: per key group, with the reference formula.
fn reference_share(units: &[f64], p: u32, modulo: bool) -> f64 {
    let k = units.len() as u64;
    let mut sums = vec![0.0; p as usize];
    for (g, u) in units.iter().enumerate() {
        let i = if modulo {
            g % p as usize
        } else {
            operator_index(g as u64, k, u64::from(p))
        };
        sums[i] += u;
    }
    sums.iter().copied().fold(0.0, f64::max) / units.iter().sum::<f64>()
}

/// The whole decision, the slow way.
fn reference(ctx: &AlignmentContext, units: &[f64], modulo: bool, s: &Settings) -> u32 {
    let (c, t) = (ctx.current_parallelism(), ctx.target_parallelism());
    let cap = ctx.alignment_cap();
    let end = if t > c { cap } else { c.min(cap) };
    if t > end {
        return t.min(cap);
    }
    let reach = (f64::from(t) * (1.0 + s.reach)).ceil();
    let shares: Vec<(u32, f64)> = (t..=end)
        .filter(|&p| f64::from(p) <= reach)
        .map(|p| (p, reference_share(units, p, modulo)))
        .collect();
    if let Some(&(p, _)) = shares
        .iter()
        .find(|(_, sh)| *sh <= s.tolerance / f64::from(t) * (1.0 + 1e-9))
    {
        return p;
    }

    let lowest = shares.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
    shares
        .iter()
        .find(|(_, sh)| *sh <= lowest * (1.0 + s.slack) * (1.0 + 1e-9))
        .map_or(t, |x| x.0)
}

#[test]
fn without_subtask_load_it_is_balanced_on_the_worked_examples() {
    let ctx = AlignmentContext::builder(16, 24, 128)
        .input_ship_strategies(vec![ShipStrategy::Hash])
        .build();
    assert_eq!(LoadAlign.align(&ctx), Ok(26));
    let src = AlignmentContext::builder(22, 25, 128)
        .source_partitions(35)
        .limits(20, 30)
        .build();
    assert_eq!(LoadAlign.align(&src), Ok(25));
    let capped = AlignmentContext::builder(100, 180, 180)
        .source_partitions(15)
        .limits(1, 200)
        .build();
    assert_eq!(LoadAlign.align(&capped), Ok(15));
}

#[test]
fn a_load_list_of_the_wrong_length_or_without_values_is_ignored() {
    // 3 loads for 4 subtasks: not the current parallelism.
    // BALANCED: 128 / 6 = 21; 128 / 7 = 18 < 21: 7.
    assert_eq!(LoadAlign.align(&keyed(4, 6, 128, &[0.9, 0.1, 0.1])), Ok(7));
    let unknown = AlignmentContext::builder(4, 6, 128)
        .subtask_loads(vec![SubtaskLoad::default(); 4])
        .build();
    assert_eq!(decide(&unknown, &Settings::default()).share_at_choice, None);
    assert_eq!(LoadAlign.align(&unknown), Ok(7));
}

/// K = 128, c = 4: subtask 0 owns groups 0..32 and carries 70% of the load, the other three
/// 10% each, so a group of subtask 0 weighs 0.7/32 and any other 0.1/32 (of a total of 1).
/// t = 6 assumes 1/6 = 16.7% per subtask. BALANCED answers 7 (128 / 7 = 18 < 128 / 6 = 21),
/// where subtask 0 owns groups 0..19: 19 * 0.7/32 = 41.6%. Every p in [6, 128] puts ceil(128/p) (or one less)
/// hot groups on subtask 0; its share is <= 1/6 once it owns at most 7 hot groups
/// (7 * 0.021875 = 15.3%; 8 give 17.5%): the first p with ceil(128/p) <= 7 is 19
/// (128/19 = 6.7). Subtask 0 of 19 owns [0, 7): 15.3%, the others less.
#[test]
fn hot_key_groups_get_the_lowest_parallelism_that_spreads_them() {
    let ctx = keyed(4, 6, 128, &[0.7, 0.1, 0.1, 0.1]);
    let far = Settings {
        reach: 3.0,
        ..Settings::default()
    };
    let d = decide(&ctx, &far);
    assert_eq!(d.parallelism, 19, "{d:?}");
    assert!(d.accepted);
    let at_19 = d.share_at_choice.expect("a prediction");
    assert!((at_19 - 7.0 * 0.7 / 32.0).abs() < 1e-12, "{at_19}");
    // At t = 6: subtask 0 owns [0, 22): 22 hot groups = 48.1%.
    let at_t = d.share_at_target.expect("a prediction");
    assert!((at_t - 22.0 * 0.7 / 32.0).abs() < 1e-12, "{at_t}");
    // BALANCED would stop at 7.
    assert_eq!(balanced(4, 6, 128, 128), 7);
    // The default reach (50%) looks at [6, 9] only: subtask 0 holds ceil(128/p) hot groups,
    // 22, 19, 16, 15; none within 1/6, the lightest is 9 with 15 * 0.7/32 = 32.8%.
    let near = decide(&ctx, &Settings::default());
    assert_eq!(near.parallelism, 9, "{near:?}");
    assert!(!near.accepted);
    assert!((near.share_at_choice.unwrap() - 15.0 * 0.7 / 32.0).abs() < 1e-12);
}

/// A single hot group (50% of the load) can never be split: no p reaches 1/t, so the answer
/// is the lowest p whose busiest subtask is within `slack` of the lightest possible.
#[test]
fn an_unsplittable_hot_group_takes_the_cheapest_near_lightest_parallelism() {
    // c = 2, K = 8: subtask 0 owns groups 0..4 and carries 0.53, subtask 1 0.04. Spread
    // evenly, a group of subtask 0 is 0.1325 / 0.57 = 23.2% of the load: above 1/6 at any p.
    // p = 6 and 7 put two of them on subtask 0 (46.5%); p = 8 one.
    let x = 0.01;
    let ctx = keyed(2, 6, 8, &[0.5 + 3.0 * x, 4.0 * x]);
    let s = Settings {
        reach: 1.0,
        ..Settings::default()
    };
    let d = decide(&ctx, &s);
    let units = unit_loads(&[0.5 + 3.0 * x, 4.0 * x], 8, Assignment::KeyGroupRanges);
    assert_eq!(d.parallelism, reference(&ctx, &units, false, &s));
    assert!(!d.accepted);
    // Even spread within subtask 0: each of its groups carries (0.5 + 0.03) / 4; the lowest
    // share is a single such group alone at p = 8.
    let lightest = (0.5 + 3.0 * x) / 4.0 / (0.5 + 7.0 * x);
    assert!((d.share_at_choice.unwrap() - lightest).abs() < 1e-12);
    assert_eq!(d.parallelism, 8);
    // With the default reach (50%: up to ceil(6 * 1.5) = 9, within the cap 8) the same;
    // with none, t itself.
    assert_eq!(decide(&ctx, &Settings::default()).parallelism, 8);
    let no_reach = Settings {
        reach: 0.0,
        ..Settings::default()
    };
    assert_eq!(decide(&ctx, &no_reach).parallelism, 6);
}

#[test]
fn a_nearly_even_load_is_answered_as_balanced() {
    // K = 128, c = 4, t = 6: 5% noise on an even load. BALANCED: 7.
    let noisy = keyed(4, 6, 128, &[0.52, 0.5, 0.49, 0.5]);
    let d = decide(&noisy, &Settings::default());
    assert_eq!((d.parallelism, d.share_at_choice), (7, None));
    assert!((d.skew.unwrap() - (0.52 / 2.01 * 4.0 - 1.0)).abs() < 1e-12);
    // With min-skew 0 the noise counts and the decision follows the prediction.
    let strict = Settings {
        min_skew: 0.0,
        ..Settings::default()
    };
    assert!(decide(&noisy, &strict).share_at_choice.is_some());
}

#[test]
fn partitions_are_read_modulo_the_parallelism() {
    // S = 12, c = 3: subtask 0 reads partitions 0, 3, 6, 9 and carries 60%.
    let ctx = AlignmentContext::builder(3, 4, 128)
        .source_partitions(12)
        .subtask_loads(
            [600.0, 200.0, 200.0]
                .iter()
                .map(|&r| SubtaskLoad {
                    busy_ratio: None,
                    records_in_per_second: Some(r),
                })
                .collect(),
        )
        .build();
    let s = Settings::default();
    let units = unit_loads(&[600.0, 200.0, 200.0], 12, Assignment::Modulo);
    assert_eq!(units[0], 150.0);
    assert_eq!(units[1], 50.0);
    let d = decide(&ctx, &s);
    assert_eq!(d.parallelism, reference(&ctx, &units, true, &s));
    // p = 4: subtask 0 reads 0, 4, 8 (150 + 50 + 50 = 25%) — exactly 1/4: accepted.
    assert_eq!(d.parallelism, 4);
}

#[test]
fn records_in_win_over_busy_in_auto_and_each_signal_can_be_forced() {
    let both = [
        SubtaskLoad {
            busy_ratio: Some(0.1),
            records_in_per_second: Some(900.0),
        },
        SubtaskLoad {
            busy_ratio: Some(0.9),
            records_in_per_second: Some(100.0),
        },
    ];
    assert_eq!(load_vector(&both, Signal::Auto), Some(vec![900.0, 100.0]));
    assert_eq!(load_vector(&both, Signal::Busy), Some(vec![0.1, 0.9]));
    let partial = [
        both[0],
        SubtaskLoad {
            busy_ratio: Some(0.5),
            records_in_per_second: None,
        },
    ];
    assert_eq!(load_vector(&partial, Signal::Auto), Some(vec![0.1, 0.5]));
    assert_eq!(load_vector(&partial, Signal::RecordsIn), None);
    let idle = [SubtaskLoad {
        busy_ratio: Some(0.0),
        records_in_per_second: Some(0.0),
    }];
    assert_eq!(load_vector(&idle, Signal::Auto), None);
}

#[test]
fn parameters_are_validated_with_the_full_key() {
    assert!(LoadAlign.validate(&params(&[("class", ID)])).is_ok());
    let ok = Settings::parse(&params(&[
        ("signal", "BUSY"),
        ("tolerance", "1.1"),
        ("slack", "0"),
    ]))
    .unwrap();
    assert_eq!(ok.signal, Signal::Busy);
    assert_eq!((ok.tolerance, ok.slack), (1.1, 0.0));
    for (bad, key) in [
        (("tolerance", "0.9"), "tolerance"),
        (("tolerance", "x"), "tolerance"),
        (("slack", "1.5"), "slack"),
        (("signal", "LAG"), "signal"),
        (("headroom", "1"), "headroom"),
    ] {
        let err = LoadAlign.validate(&params(&[bad])).unwrap_err();
        assert!(
            err.message()
                .contains(&format!("scaling.alignment.mode.skew.{key}")),
            "{err}"
        );
    }
}

#[test]
fn the_range_arithmetic_matches_flinks_operator_index() {
    for k in [1u64, 7, 128, 720, 32768] {
        for p in [1u64, 3, 24, 26, 127, 128] {
            if p > k {
                continue;
            }
            for i in 0..p {
                let (a, b) = (range_start(i, k, p), range_start(i + 1, k, p));
                for g in a..b {
                    assert_eq!(
                        operator_index(g as u64, k, p),
                        i as usize,
                        "k={k} p={p} g={g}"
                    );
                }
            }
        }
    }
}

/// A context whose per-subtask load is exactly what an even load per unit produces: each
/// subtask's load proportional to the units it owns.
fn even_per_unit(c: u32, t: u32, k: u32, s: u32, lower: u32, upper: u32) -> AlignmentContext {
    let n = if s > 0 { s } else { k };
    let assignment = if s > 0 {
        Assignment::Modulo
    } else {
        Assignment::KeyGroupRanges
    };
    let loads: Vec<SubtaskLoad> = (0..c)
        .map(|i| {
            let owned = match assignment {
                Assignment::KeyGroupRanges => {
                    range_start(u64::from(i) + 1, u64::from(n), u64::from(c))
                        - range_start(u64::from(i), u64::from(n), u64::from(c))
                }
                Assignment::Modulo => (0..n).filter(|j| j % c == i).count(),
            };
            SubtaskLoad {
                busy_ratio: Some(0.01 * owned as f64),
                records_in_per_second: Some(250.0 * owned as f64),
            }
        })
        .collect();
    AlignmentContext::builder(c, t, k)
        .source_partitions(s)
        .limits(lower, upper)
        .input_ship_strategies(vec![ShipStrategy::Hash])
        .subtask_loads(loads)
        .build()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// An even load per unit is what BALANCED assumes: the answers agree.
    #[test]
    fn an_even_load_per_unit_answers_as_balanced(
        k in 1u32..400, c in 1u32..60, t in 1u32..120, s in prop_oneof![Just(0u32), 1u32..80],
        lower in 1u32..10, extra in 0u32..200,
    ) {
        let upper = lower + extra;
        let n = if s > 0 { s } else { k };
        prop_assume!(c <= n.max(1) * 4);
        let t = t.clamp(lower, k.min(upper).max(lower));
        let ctx = even_per_unit(c, t, k, s, lower.min(c), upper.max(c));
        let expected = balanced(c, t, n, ctx.alignment_cap());
        prop_assert_eq!(LoadAlign.align(&ctx), Ok(expected));
    }

    /// Any load: the fast prediction and decision equal the per-group reference.
    #[test]
    fn any_load_matches_the_reference(
        k in 1u32..300, c in 1u32..40, t in 1u32..80,
        loads in proptest::collection::vec(0.0f64..1.0, 40),
        tolerance in 1.0f64..1.5, slack in 0.0f64..0.2, reach in 0.0f64..3.0,
    ) {
        prop_assume!(c <= k);
        let t = t.min(k);
        let busy = &loads[..c as usize];
        prop_assume!(busy.iter().sum::<f64>() > 0.0);
        let ctx = keyed(c, t, k, busy);
        let s = Settings { signal: Signal::Auto, tolerance, slack, reach, min_skew: 0.0 };
        let units = unit_loads(busy, k, Assignment::KeyGroupRanges);
        let d = decide(&ctx, &s);
        let even = Predictor::new(units.clone(), Assignment::KeyGroupRanges).hottest_unit_share()
            * f64::from(k) <= 1.0;
        let expected = if even {
            balanced(c, t, k, ctx.alignment_cap())
        } else {
            reference(&ctx, &units, false, &s)
        };
        prop_assert_eq!(d.parallelism, expected);
        for p in [1, t, k] {
            let fast = Predictor::new(units.clone(), Assignment::KeyGroupRanges).busiest_share(p);
            prop_assert!((fast - reference_share(&units, p, false)).abs() < 1e-9);
        }
        let end = if t > c { ctx.alignment_cap() } else { c.min(ctx.alignment_cap()) };
        if t != c && t <= end {
            prop_assert!((t..=end).contains(&d.parallelism));
        }
    }
}
