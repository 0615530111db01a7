use std::collections::BTreeMap;

use flowscale_sdk::EVALUATOR_KEY;

use super::*;

fn params(pairs: &[(&str, &str)]) -> ModeParams {
    ModeParams::under(
        EVALUATOR_KEY,
        "drain",
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn of(current: f64) -> EvaluatedMetric {
    EvaluatedMetric {
        current,
        average: f64::NAN,
    }
}

fn evaluate(drain: &str, metrics: &[(&str, EvaluatedMetric)]) -> VertexMetrics {
    let metrics = metrics.iter().map(|(n, m)| (n.to_string(), *m)).collect();
    let ctx = EvaluatorContext::new("job", "source", metrics)
        .with_params(params(&[("class", ID), ("drain-within", drain)]));
    SloTarget.evaluate(&ctx).expect("valid parameters")
}

/// The single CATCH_UP_DATA_RATE of an answer, current half.
fn catch_up(answer: &VertexMetrics) -> f64 {
    assert_eq!(answer.len(), 1, "{answer:?}");
    assert_eq!(answer[0].0, "CATCH_UP_DATA_RATE");
    assert!(answer[0].1.average.is_nan(), "the average half is kept");
    answer[0].1.current
}

#[test]
fn raises_the_catch_up_rate_to_drain_the_lag_in_time() {
    // 60,000 records within 5 minutes: 200 records per second. The pipeline's default
    // catch-up duration (30 min) asked for 60,000 / 1800 = 33.333.
    let answer = evaluate(
        "5 min",
        &[("LAG", of(60_000.0)), ("CATCH_UP_DATA_RATE", of(33.333))],
    );
    assert_eq!(catch_up(&answer), 200.0);
    // A plain number is milliseconds: 1,500 records within 1.5 s.
    let answer = evaluate("1500", &[("LAG", of(1_500.0))]);
    assert_eq!(catch_up(&answer), 1_000.0);
}

#[test]
fn a_stricter_pipeline_rate_wins() {
    // 600 records within 1 min need 10/s; the pipeline already asks for 10 or more.
    assert!(
        evaluate(
            "1 min",
            &[("LAG", of(600.0)), ("CATCH_UP_DATA_RATE", of(12.0))]
        )
        .is_empty()
    );
    assert!(
        evaluate(
            "1 min",
            &[("LAG", of(600.0)), ("CATCH_UP_DATA_RATE", of(10.0))]
        )
        .is_empty()
    );
    // A NaN or missing rate does not: the SLO applies.
    let nan = evaluate(
        "1 min",
        &[("LAG", of(600.0)), ("CATCH_UP_DATA_RATE", of(f64::NAN))],
    );
    assert_eq!(catch_up(&nan), 10.0);
    assert_eq!(catch_up(&evaluate("1 min", &[("LAG", of(600.0))])), 10.0);
}

#[test]
fn no_positive_lag_changes_nothing() {
    assert!(evaluate("1 min", &[("TARGET_DATA_RATE", of(5.0))]).is_empty());
    for lag in [0.0, -3.0, f64::NAN, f64::INFINITY] {
        assert!(evaluate("1 min", &[("LAG", of(lag))]).is_empty(), "{lag}");
    }
}

#[test]
fn drain_within_is_checked_with_its_full_key() {
    let err = |pairs: &[(&str, &str)]| {
        SloTarget
            .validate(&params(pairs))
            .expect_err("invalid")
            .to_string()
    };
    let key = "`metrics.custom-evaluator.drain.drain-within`";
    let missing = err(&[("class", ID)]);
    assert!(
        missing.contains(key) && missing.contains("required"),
        "{missing}"
    );
    let unit = err(&[("drain-within", "5 weeks")]);
    assert!(
        unit.contains(key) && unit.contains("valid: ms, s, min, h, d"),
        "{unit}"
    );
    for short in ["999", "0 s"] {
        let msg = err(&[("drain-within", short)]);
        assert!(
            msg.contains(key) && msg.contains("1 s to 365 d"),
            "{short}: {msg}"
        );
    }
    let long = err(&[("drain-within", "366 d")]);
    assert!(long.contains("1 s to 365 d"), "{long}");
    let typo = err(&[("drain-witihn", "5 min")]);
    assert!(
        typo.contains("metrics.custom-evaluator.drain.drain-witihn"),
        "{typo}"
    );
    assert!(
        SloTarget
            .validate(&params(&[("drain-within", "1 s")]))
            .is_ok()
    );
    assert!(
        SloTarget
            .validate(&params(&[("drain-within", "365 d")]))
            .is_ok()
    );
}

#[test]
fn bad_parameters_at_evaluation_are_an_error() {
    let ctx = EvaluatorContext::new("job", "source", vec![("LAG".into(), of(1.0))])
        .with_params(params(&[("drain-within", "soon")]));
    assert!(SloTarget.evaluate(&ctx).is_err());
}

/// The parameters are read only when there is lag to drain: a vertex without lag answers
/// nothing whatever they are (they are checked when the configuration is loaded).
#[test]
fn a_vertex_without_lag_answers_nothing_without_reading_the_parameters() {
    for metrics in [vec![], vec![("LAG".to_string(), of(0.0))]] {
        let ctx = EvaluatorContext::new("job", "operator", metrics)
            .with_params(params(&[("drain-within", "soon")]));
        assert_eq!(SloTarget.evaluate(&ctx).unwrap(), Vec::new());
    }
}

#[test]
fn changed_parameters_are_parsed_again() {
    // One thread, parameters that alternate: each answer follows the parameters it was given,
    // not the ones parsed before. 3,600 records within 1 min: 60/s; within 2 min: 30/s.
    let lag = [("LAG", of(3_600.0))];
    assert_eq!(catch_up(&evaluate("1 min", &lag)), 60.0);
    assert_eq!(catch_up(&evaluate("2 min", &lag)), 30.0);
    assert_eq!(catch_up(&evaluate("1 min", &lag)), 60.0);
    // A refused value is refused again, and a valid one after it is used.
    let ctx = EvaluatorContext::new("job", "source", vec![("LAG".to_string(), of(1.0))])
        .with_params(params(&[("drain-within", "0 s")]));
    assert!(SloTarget.evaluate(&ctx).is_err());
    assert!(SloTarget.evaluate(&ctx).is_err());
    assert_eq!(catch_up(&evaluate("2 min", &lag)), 30.0);
}
