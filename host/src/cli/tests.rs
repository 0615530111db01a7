//! The command-line surface as tables: argv that parse, and argv that clap refuses; and
//! `align --batch` fed bytes in memory: one answer line per input line, whatever the bytes.

use clap::Parser;
use clap::error::ErrorKind;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::App;
use super::align::{BatchSummary, MAX_KEY_GROUPS, MAX_PARALLELISM_VALUE, run_batch};
use crate::alignment::NoCustomModes;
use crate::config::JobConfig;

#[test]
fn valid_command_lines_parse() {
    for argv in [
        "flowscale align --current 16 --target 24 --max-parallelism 128",
        "flowscale align --current 16 --scale-factor 1.5 --max-parallelism 128 --ship HASH,REBALANCE",
        "flowscale align --batch",
        "flowscale align --current 1 --target 2 --max-parallelism 8 --set a=b --set c=d --json",
        // The ends of every range are accepted.
        "flowscale align --current 2147483647 --target 2147483647 --max-parallelism 32768 --upper 2147483647",
        "flowscale align --current 1 --scale-factor 1e308 --max-parallelism 1 --lower 1",
        "flowscale align --current 1 --scale-factor 4.9e-324 --max-parallelism 1 --source-partitions 0",
        // What applies to a whole batch goes with --batch.
        "flowscale align --batch --json --plugins dir",
        "flowscale align --batch --config fleet.toml --job j",
        "flowscale validate fleet.toml",
        "flowscale validate fleet.toml --json --plugins dir",
        "flowscale validate --strict fleet.toml",
        "flowscale run fleet.toml --strict --once",
        "flowscale status fleet.toml",
        "flowscale status fleet.toml --json",
    ] {
        let args: Vec<&str> = argv.split_whitespace().collect();
        if let Err(err) = App::try_parse_from(&args) {
            panic!("{argv}: {err}");
        }
    }
}

#[test]
fn invalid_command_lines_are_refused() {
    for (argv, kind) in [
        (
            "flowscale align --current 16",
            ErrorKind::MissingRequiredArgument,
        ),
        (
            "flowscale align --current 1 --target 2 --scale-factor 2 --max-parallelism 8",
            ErrorKind::ArgumentConflict,
        ),
        (
            "flowscale align --batch --current 3",
            ErrorKind::ArgumentConflict,
        ),
        (
            "flowscale align --current x --target 2 --max-parallelism 8",
            ErrorKind::ValueValidation,
        ),
        // Every flag describing one request is refused with --batch, instead of being ignored.
        (
            "flowscale align --batch --set a=b",
            ErrorKind::ArgumentConflict,
        ),
        (
            "flowscale align --batch --ship HASH",
            ErrorKind::ArgumentConflict,
        ),
        (
            "flowscale align --batch --lower 2",
            ErrorKind::ArgumentConflict,
        ),
        (
            "flowscale align --batch --upper 9",
            ErrorKind::ArgumentConflict,
        ),
        (
            "flowscale align --batch --source-partitions 3",
            ErrorKind::ArgumentConflict,
        ),
        (
            "flowscale align --batch --vertex v",
            ErrorKind::ArgumentConflict,
        ),
        (
            "flowscale align --batch --target 3",
            ErrorKind::ArgumentConflict,
        ),
        (
            "flowscale align --batch --scale-factor 2",
            ErrorKind::ArgumentConflict,
        ),
        // --scale-factor is finite and > 0.
        (
            "flowscale align --current 4 --scale-factor NaN --max-parallelism 8",
            ErrorKind::ValueValidation,
        ),
        (
            "flowscale align --current 4 --scale-factor inf --max-parallelism 8",
            ErrorKind::ValueValidation,
        ),
        (
            "flowscale align --current 4 --scale-factor 0 --max-parallelism 8",
            ErrorKind::ValueValidation,
        ),
        (
            "flowscale align --current 4 --scale-factor=-1.5 --max-parallelism 8",
            ErrorKind::ValueValidation,
        ),
        (
            "flowscale align --current 4 --scale-factor 1e400 --max-parallelism 8",
            ErrorKind::ValueValidation,
        ),
        // Parallelisms are Java ints; max parallelism is at most Flink's 2^15.
        (
            "flowscale align --current 2147483648 --target 2 --max-parallelism 8",
            ErrorKind::ValueValidation,
        ),
        (
            "flowscale align --current 4 --target 0 --max-parallelism 8",
            ErrorKind::ValueValidation,
        ),
        (
            "flowscale align --current 4 --target 2 --max-parallelism 32769",
            ErrorKind::ValueValidation,
        ),
        (
            "flowscale align --current 4 --target 2 --max-parallelism 8 --upper 2147483648",
            ErrorKind::ValueValidation,
        ),
        ("flowscale frobnicate", ErrorKind::InvalidSubcommand),
    ] {
        let args: Vec<&str> = argv.split_whitespace().collect();
        match App::try_parse_from(&args) {
            Ok(_) => panic!("{argv}: parsed"),
            Err(err) => assert_eq!(err.kind(), kind, "{argv}: {err}"),
        }
    }
}

#[test]
fn the_scale_factor_message_names_the_valid_range() {
    let argv = [
        "flowscale",
        "align",
        "--current",
        "4",
        "--scale-factor",
        "NaN",
        "--max-parallelism",
        "8",
    ];
    let err = App::try_parse_from(argv)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("must be a finite number > 0, got NaN"),
        "{err}"
    );
    let argv = [
        "flowscale",
        "align",
        "--current",
        "4",
        "--target",
        "2",
        "--max-parallelism",
        "32769",
    ];
    let err = App::try_parse_from(argv)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("1..=32768"), "{err}");
}

/// `input` through `align --batch` with the built-in modes only: the summary and the answer lines.
fn batch_bytes(input: &[u8]) -> (BatchSummary, Vec<Value>) {
    let mut out = Vec::new();
    let summary = run_batch(&mut &input[..], &mut out, &JobConfig::new(), &NoCustomModes)
        .expect("in-memory I/O does not fail");
    let text = String::from_utf8(out).expect("answers are UTF-8");
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "every answer ends its line: {text:?}"
    );
    let answers = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    (summary, answers)
}

/// One request per line, as batch input.
fn lines(requests: &[Value]) -> Vec<u8> {
    requests
        .iter()
        .map(|r| format!("{r}\n"))
        .collect::<String>()
        .into_bytes()
}

/// The error of an answer, checked to be an error answer about `line`.
fn error_of(answer: &Value, line: usize) -> &str {
    assert_eq!(answer["line"], json!(line), "{answer}");
    let error = answer["error"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error: {answer}"));
    assert!(error.starts_with(&format!("line {line}: ")), "{error}");
    error
}

#[test]
fn unreadable_and_blank_lines_get_their_own_answer_in_order() {
    // 1: a request; 2: blank; 3: a stray byte 0xff (never valid in UTF-8); 4: spaces only;
    // 5: a request ending in CRLF; 6: a truncated UTF-8 sequence (0xc3 wants a second byte);
    // 7: a request without a final line end.
    let request =
        br#"{"current": 16, "target": 24, "max_parallelism": 128, "ship_strategies": ["HASH"]}"#;
    let mut input = Vec::new();
    input.extend_from_slice(request);
    input.extend_from_slice(b"\n\n\xff\n   \t\n");
    input.extend_from_slice(request);
    input.extend_from_slice(b"\r\n{\"current\": \xc3\n");
    input.extend_from_slice(request);
    let (summary, answers) = batch_bytes(&input);
    assert_eq!(
        summary,
        BatchSummary {
            lines: 7,
            failed: 4
        }
    );
    assert_eq!(answers.len(), 7);
    // BALANCED on 128 key groups from 24: 128/26 = 4 < 128/24 = 5, so 26.
    for i in [0, 4, 6] {
        assert_eq!(answers[i]["parallelism"], 26, "{}", answers[i]);
    }
    assert_eq!(error_of(&answers[1], 2), "line 2: empty request");
    assert!(
        error_of(&answers[2], 3).contains("not UTF-8"),
        "{}",
        answers[2]
    );
    assert_eq!(error_of(&answers[3], 4), "line 4: empty request");
    assert!(
        error_of(&answers[5], 6).contains("not UTF-8"),
        "{}",
        answers[5]
    );
}

#[test]
fn an_empty_input_has_no_answer_and_a_final_line_end_adds_no_line() {
    assert_eq!(
        batch_bytes(b"").0,
        BatchSummary {
            lines: 0,
            failed: 0
        }
    );
    // "\n" is one blank line; "\r\n" too.
    for input in [&b"\n"[..], b"\r\n"] {
        let (summary, answers) = batch_bytes(input);
        assert_eq!(
            summary,
            BatchSummary {
                lines: 1,
                failed: 1
            }
        );
        assert_eq!(error_of(&answers[0], 1), "line 1: empty request");
    }
}

#[test]
fn huge_scale_factors_stay_within_the_cap_and_a_java_int() {
    let (summary, answers) = batch_bytes(&lines(&[
        // ceil(1e308 · 16) saturates to i32::MAX, then is clamped to min(K = 128, upper) = 128.
        json!({"current": 16, "scale_factor": 1e308, "max_parallelism": 128}),
        // The largest request: K = 2^15, upper = i32::MAX: the cap is 2^15.
        json!({"current": MAX_PARALLELISM_VALUE, "scale_factor": 1e308, "max_parallelism": MAX_KEY_GROUPS}),
        // Limits that once let the answer above i32::MAX are refused with their range.
        json!({"current": 16, "scale_factor": 1e308, "max_parallelism": 4_294_967_295u32, "upper": 4_294_967_295u32}),
        json!({"current": 16, "scale_factor": 1e308, "max_parallelism": 128, "lower": 2_147_483_648u32, "upper": 4_294_967_295u32}),
        json!({"current": 2_147_483_648u32, "scale_factor": 2.0, "max_parallelism": 128}),
    ]));
    assert_eq!(
        summary,
        BatchSummary {
            lines: 5,
            failed: 3
        }
    );
    assert_eq!(
        (
            answers[0]["target"].as_u64(),
            answers[0]["parallelism"].as_u64()
        ),
        (Some(128), Some(128))
    );
    assert_eq!(
        answers[1]["target"].as_u64(),
        Some(u64::from(MAX_KEY_GROUPS))
    );
    assert!(
        error_of(&answers[2], 3).contains("`max_parallelism` must be in [1, 32768]"),
        "{}",
        answers[2]
    );
    assert!(
        error_of(&answers[3], 4).contains("`lower` must be in [1, 2147483647]"),
        "{}",
        answers[3]
    );
    assert!(
        error_of(&answers[4], 5).contains("`current` must be in [1, 2147483647]"),
        "{}",
        answers[4]
    );
}

#[test]
fn scale_factors_that_are_not_finite_and_positive_are_refused() {
    // JSON has no NaN or infinity: 1e400 is out of f64's range and refused by the parser.
    let (summary, answers) = batch_bytes(&lines(&[
        json!({"current": 16, "scale_factor": 0.0, "max_parallelism": 128}),
        json!({"current": 16, "scale_factor": -1.5, "max_parallelism": 128}),
    ]));
    assert_eq!(
        summary,
        BatchSummary {
            lines: 2,
            failed: 2
        }
    );
    for (i, answer) in answers.iter().enumerate() {
        let error = error_of(answer, i + 1);
        assert!(
            error.contains("`scale_factor` must be a finite number > 0"),
            "{error}"
        );
    }
    let (_, answers) =
        batch_bytes(b"{\"current\": 16, \"scale_factor\": 1e400, \"max_parallelism\": 128}\n");
    error_of(&answers[0], 1);
}

#[test]
fn targets_are_refused_outside_lower_and_the_cap() {
    // lower 4, K = 128, upper 100: the cap is min(128, 100) = 100, so targets in [4, 100].
    let limits = |t: u32| json!({"current": 16, "target": t, "max_parallelism": 128, "lower": 4, "upper": 100});
    // lower 50 above K = 32: the upper bound wins, as in the pipeline's clamp: only 32.
    let crossed = |t: u32| json!({"current": 16, "target": t, "max_parallelism": 32, "lower": 50, "upper": 60});
    let (summary, answers) = batch_bytes(&lines(&[
        limits(3),
        limits(4),
        limits(100),
        limits(101),
        crossed(31),
        crossed(32),
        crossed(50),
    ]));
    assert_eq!(
        summary,
        BatchSummary {
            lines: 7,
            failed: 4
        }
    );
    for (i, t) in [(1, 4), (2, 100), (5, 32)] {
        assert_eq!(answers[i]["target"], t, "{}", answers[i]);
    }
    for i in [0, 3] {
        let error = error_of(&answers[i], i + 1);
        assert!(error.contains("is outside [4, 100]"), "{error}");
    }
    for i in [4, 6] {
        let error = error_of(&answers[i], i + 1);
        assert!(error.contains("is outside [32, 32]"), "{error}");
    }
}

/// One input line's content (without its line end) and what it must be answered with.
#[derive(Debug, Clone)]
enum Line {
    /// A request that has an answer.
    Request,
    /// Only JSON whitespace.
    Blank(String),
    /// Any bytes but a line end; answered one way or the other.
    Bytes(Vec<u8>),
}

fn any_line() -> impl Strategy<Value = Line> {
    prop_oneof![
        Just(Line::Request),
        "[ \t\r]{0,4}".prop_map(Line::Blank),
        prop::collection::vec(
            any::<u8>().prop_filter("not a line end", |b| *b != b'\n'),
            0..40
        )
        .prop_map(Line::Bytes),
    ]
}

/// Integers for request fields: mostly small valid ones, and the edges of every range.
fn int() -> impl Strategy<Value = i64> {
    prop_oneof![
        6 => 1i64..200,
        1 => Just(0),
        1 => Just(-1),
        1 => 32_760i64..32_780,
        1 => Just(i64::from(MAX_PARALLELISM_VALUE)),
        1 => Just(i64::from(MAX_PARALLELISM_VALUE) + 1),
        1 => Just(i64::from(u32::MAX) + 1),
    ]
}

proptest! {
    #[test]
    fn every_input_line_gets_exactly_one_answer_line(
        input in prop::collection::vec(any_line(), 0..12),
        crlf in any::<bool>(),
        final_line_end in any::<bool>(),
    ) {
        let request = br#"{"current": 4, "scale_factor": 1.5, "max_parallelism": 128}"#;
        let mut bytes = Vec::new();
        for (i, line) in input.iter().enumerate() {
            match line {
                Line::Request => bytes.extend_from_slice(request),
                Line::Blank(text) => bytes.extend_from_slice(text.as_bytes()),
                Line::Bytes(b) => bytes.extend_from_slice(b),
            }
            // The last line may go without its line end unless it is empty (then it is no line).
            let last_empty = matches!(line, Line::Blank(t) if t.is_empty())
                || matches!(line, Line::Bytes(b) if b.is_empty());
            if i + 1 < input.len() || final_line_end || last_empty {
                bytes.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
            }
        }
        let (summary, answers) = batch_bytes(&bytes);
        prop_assert_eq!(summary.lines, input.len());
        prop_assert_eq!(answers.len(), input.len());
        for (i, (line, answer)) in input.iter().zip(&answers).enumerate() {
            match line {
                // ceil(1.5 · 4) = 6; BALANCED keeps it (no keyBy input): answered, not an error.
                Line::Request => prop_assert_eq!(answer["target"].as_u64(), Some(6)),
                Line::Blank(_) => {
                    let expected = format!("line {}: empty request", i + 1);
                    prop_assert_eq!(answer["error"].as_str(), Some(expected.as_str()));
                }
                Line::Bytes(_) => {
                    // Whatever the bytes, an error answer is about its own line.
                    if answer.get("error").is_some() {
                        prop_assert_eq!(answer["line"].as_u64(), Some(i as u64 + 1));
                    }
                }
            }
        }
    }

    #[test]
    fn no_answer_is_above_the_cap_or_a_java_int(
        current in int(),
        max_parallelism in int(),
        lower in int(),
        upper in prop_oneof![int(), Just(i64::from(MAX_PARALLELISM_VALUE))],
        source_partitions in int(),
        by in prop_oneof![
            int().prop_map(|t| json!({"target": t})),
            prop_oneof![Just(1e308), Just(-1.0), Just(0.0), Just(f64::MIN_POSITIVE), -10.0f64..1e12, 0.0f64..4.0]
                .prop_map(|f| json!({"scale_factor": f})),
        ],
        ship in prop_oneof![Just(vec![]), Just(vec!["HASH"])],
        mode in prop_oneof![Just("BALANCED"), Just("EVENLY_SPREAD"), Just("OFF")],
    ) {
        let mut request = json!({
            "current": current,
            "max_parallelism": max_parallelism,
            "lower": lower,
            "upper": upper,
            "source_partitions": source_partitions,
            "ship_strategies": ship,
            "config": { "scaling.alignment.mode": mode },
        });
        for (key, value) in by.as_object().into_iter().flatten() {
            request[key] = value.clone();
        }
        let (_, answers) = batch_bytes(&lines(&[request]));
        prop_assert_eq!(answers.len(), 1);
        let answer = &answers[0];
        if let Some(parallelism) = answer["parallelism"].as_u64() {
            let target = answer["target"].as_u64().unwrap_or(u64::MAX);
            // The cap of the pipeline's clamp, the upper bound winning over lower.
            let bound = u64::try_from(max_parallelism.min(upper)).unwrap_or(0);
            let low = u64::try_from(lower).unwrap_or(0).min(bound);
            prop_assert!((low..=bound).contains(&target), "{}", answer);
            prop_assert!(parallelism <= u64::from(MAX_PARALLELISM_VALUE), "{}", answer);
            prop_assert!(parallelism <= bound.max(current.unsigned_abs()), "{}", answer);
        } else {
            error_of(answer, 1);
        }
    }
}
