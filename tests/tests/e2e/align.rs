//! `flowscale align`: every worked example of the alignment contract, answered through --batch.

use serde_json::{Value, json};

use crate::harness::Cli;

fn batch(requests: &[Value]) -> (i32, Vec<Value>) {
    let input: String = requests.iter().map(|r| format!("{r}\n")).collect();
    let out = Cli::new(["align", "--batch"])
        .cwd(std::env::temp_dir())
        .stdin(input)
        .run();
    (out.code, out.json_lines())
}

fn mode(name: &str) -> Value {
    json!({ "scaling.alignment.mode": name })
}

#[test]
fn batch_answers_every_worked_example() {
    let keyed = |m: &str| json!({"current": 16, "target": 24, "max_parallelism": 128, "ship_strategies": ["HASH"], "config": mode(m)});
    let partitions_35 = |m: &str| json!({"current": 22, "target": 25, "max_parallelism": 128, "source_partitions": 35, "lower": 20, "upper": 30, "config": mode(m)});
    let legacy = |m: &str, r: Value| {
        let mut r = r;
        r["config"] = json!({ "job.autoscaler.scaling.key-group.partitions.adjust.mode": m });
        r
    };
    let s12 = json!({"current": 5, "target": 7, "max_parallelism": 8, "source_partitions": 12});
    let mut requests = vec![
        keyed("BALANCED"),
        keyed("EVENLY_SPREAD"),
        keyed("OFF"),
        partitions_35("BALANCED"),
        partitions_35("EVENLY_SPREAD"),
        {
            let mut r = s12.clone();
            r["config"] = mode("EVENLY_SPREAD");
            r
        },
        legacy("EVENLY_SPREAD", s12.clone()),
        legacy("EVENLY_SPREAD", partitions_35("BALANCED")),
    ];
    for t in [180, 50, 10] {
        for m in ["BALANCED", "EVENLY_SPREAD"] {
            requests.push(json!({"current": 100, "target": t, "max_parallelism": 180, "source_partitions": 15, "config": mode(m)}));
        }
    }
    let (code, answers) = batch(&requests);
    assert_eq!(code, 0, "{answers:?}");
    assert_eq!(answers.len(), requests.len());
    let got: Vec<u64> = answers
        .iter()
        .map(|a| a["parallelism"].as_u64().expect("parallelism"))
        .collect();
    // The walk-throughs of docs/alignment.md, "Examples" (N: key groups or partitions):
    // - N = 128, t = 24: N/24 = N/25 = 5, N/26 = 4 < 5 -> BALANCED 26; the first divisor of 128
    //   from 24 up -> EVENLY_SPREAD 32; OFF keeps 24.
    // - N = 35 partitions, limits [20, 30]: no divisor of 35 in [25, 30] and 35/p = 1 = 35/25
    //   throughout -> both built-ins keep 25.
    // - N = 12 partitions, K = 8, t = 7: no divisor of 12 in [7, 8], 12/8 = 12/7 -> 7; legacy
    //   EVENLY_SPREAD takes 12/2 = 6, a divisor above c = 5 -> 6 with ScalingLimited.
    // - legacy on N = 35: 35/2 = 17, not a divisor -> 18 -> max(18, lower 20) = 20 <= c = 22
    //   would invert the scale-up -> blocked at c = 22.
    // - N = 15 partitions, K = 180: the cap is 15; t = 180 and t = 50 leave an empty region and
    //   give min(t, 15) = 15; t = 10 scans [10, 15] and accepts the divisor 15.
    assert_eq!(&got[..8], &[26, 32, 24, 25, 25, 7, 6, 22]);
    assert!(got[8..].iter().all(|&p| p == 15), "{got:?}");
    // No events for the never-blocking modes; SCALING_LIMITED with all fields for the legacy ones.
    for a in &answers[..6] {
        assert_eq!(a["events"], json!([]), "{a}");
    }
    let event = &answers[6]["events"][0];
    assert_eq!(event["reason"], "ScalingLimited");
    assert_eq!(
        (event["expected"].as_u64(), event["actual"].as_u64()),
        (Some(7), Some(6))
    );
    let event = &answers[7]["events"][0];
    assert_eq!(
        (event["expected"].as_u64(), event["actual"].as_u64()),
        (Some(25), Some(22))
    );
    assert!(
        event["message"]
            .as_str()
            .is_some_and(|m| m.contains("numKeyGroupsOrPartitions : 35"))
    );
    assert_eq!(answers[0]["mode"], "BALANCED");
    assert_eq!(answers[7]["mode"], "legacy:EVENLY_SPREAD");
    assert_eq!(answers[0]["applicable"], true);
}

#[test]
fn malformed_lines_get_an_error_and_the_batch_goes_on() {
    let input = "{\"current\": 16, \"target\": 24, \"max_parallelism\": 128, \"ship_strategies\": [\"HASH\"]}\nnot json\n{\"current\": 16, \"max_parallelism\": 128}\n{\"current\": 16, \"target\": 24, \"max_parallelism\": 128, \"colour\": 1}\n{\"current\": 4, \"scale_factor\": 1.5, \"max_parallelism\": 128, \"ship_strategies\": [\"hash\"]}\n";
    let out = Cli::new(["align", "--batch"])
        .cwd(std::env::temp_dir())
        .stdin(input)
        .run();
    assert_eq!(
        out.code, 1,
        "any failed line makes the exit status non-zero"
    );
    let lines = out.json_lines();
    assert_eq!(lines.len(), 5);
    // BALANCED on 128 key groups from 24: 128/26 = 4 < 128/24 = 5.
    assert_eq!(lines[0]["parallelism"], 26);
    assert!(
        lines[1]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("line 2")),
        "{}",
        lines[1]
    );
    assert!(
        lines[2]["error"]
            .as_str()
            .is_some_and(|e| e.contains("`target` or `scale_factor` is required")),
        "{}",
        lines[2]
    );
    assert!(
        lines[3]["error"]
            .as_str()
            .is_some_and(|e| e.contains("colour")),
        "{}",
        lines[3]
    );
    // ceil(1.5 · 4) = 6; 128 / 6 = 21, 128 / 7 = 18 < 21.
    assert_eq!(lines[4]["target"], 6);
    assert_eq!(lines[4]["parallelism"], 7);
}

#[test]
fn rebalance_only_vertices_are_left_alone_and_unknown_modes_are_errors() {
    let (code, answers) = batch(&[
        json!({"current": 16, "target": 24, "max_parallelism": 128, "ship_strategies": ["REBALANCE"], "config": mode("EVENLY_SPREAD")}),
        json!({"current": 16, "target": 24, "max_parallelism": 128, "config": mode("balanced")}),
    ]);
    assert_eq!(code, 1);
    assert_eq!(answers[0]["parallelism"], 24);
    assert_eq!(answers[0]["applicable"], false);
    let error = answers[1]["error"].as_str().expect("error");
    assert!(
        error.contains("did you mean the built-in `BALANCED`"),
        "{error}"
    );
}

#[test]
fn flags_explain_the_answer() {
    let out = Cli::new([
        "align",
        "--current",
        "16",
        "--target",
        "24",
        "--max-parallelism",
        "128",
        "--ship",
        "HASH",
        "--set",
        "scaling.alignment.mode=EVENLY_SPREAD",
    ])
    .cwd(std::env::temp_dir())
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("parallelism: 32"), "{}", out.stdout);
    assert!(
        out.stdout.contains("mode:        EVENLY_SPREAD"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("accepted 32: it divides N = 128"),
        "{}",
        out.stdout
    );

    let out = Cli::new([
        "align",
        "--current",
        "16",
        "--target",
        "24",
        "--max-parallelism",
        "128",
        "--ship",
        "HASH",
        "--json",
    ])
    .cwd(std::env::temp_dir())
    .run();
    assert_eq!(out.json()["parallelism"], 26);

    let out = Cli::new(["align", "--current", "16"]).run();
    assert_eq!(out.code, 2, "usage errors exit 2");
}

/// The stdout lines, each parsed as JSON, blank ones included (a blank answer line would fail).
fn answer_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

#[test]
fn every_input_line_gets_one_answer_line_even_unreadable_and_blank_ones() {
    let request =
        r#"{"current": 16, "target": 24, "max_parallelism": 128, "ship_strategies": ["HASH"]}"#;
    // 1: a request; 2: blank; 3: the byte 0xff, never valid in UTF-8; 4: a request ending in
    // CRLF; 5: a request after the bad byte, without a final line end.
    let mut input = Vec::new();
    input.extend_from_slice(request.as_bytes());
    input.extend_from_slice(b"\n\n{\"current\": \xff}\n");
    input.extend_from_slice(request.as_bytes());
    input.extend_from_slice(b"\r\n");
    input.extend_from_slice(request.as_bytes());
    let out = Cli::new(["align", "--batch"])
        .cwd(std::env::temp_dir())
        .stdin(input)
        .run();
    assert_eq!(out.code, 1, "two lines failed: {}", out.stderr);
    assert!(
        out.stderr.contains("2 of 5 line(s) failed"),
        "{}",
        out.stderr
    );
    let answers = answer_lines(&out.stdout);
    assert_eq!(answers.len(), 5, "{}", out.stdout);
    // BALANCED on 128 key groups from 24: 128/26 = 4 < 128/24 = 5, so 26.
    for i in [0, 3, 4] {
        assert_eq!(answers[i]["parallelism"], 26, "{}", answers[i]);
    }
    assert_eq!(
        answers[1],
        json!({"line": 2, "error": "line 2: empty request"})
    );
    assert_eq!(answers[2]["line"], 3);
    assert!(
        answers[2]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("line 3: not UTF-8")),
        "{}",
        answers[2]
    );
}

#[test]
fn targets_outside_the_cap_and_huge_limits_are_refused_with_the_range() {
    let (code, answers) = batch(&[
        // The limits above i32::MAX that once let 1e308 answer 2147483648.
        json!({"current": 16, "scale_factor": 1e308, "max_parallelism": 128, "lower": 2_147_483_648u32, "upper": 4_294_967_295u32}),
        // lower 4 > target 2.
        json!({"current": 16, "target": 2, "max_parallelism": 128, "lower": 4}),
        // ceil(1e308 · 16) saturates, then is clamped to min(K = 128, upper) = 128.
        json!({"current": 16, "scale_factor": 1e308, "max_parallelism": 128}),
    ]);
    assert_eq!(code, 1);
    assert_eq!(answers.len(), 3);
    let error = |i: usize| answers[i]["error"].as_str().unwrap_or_default().to_string();
    assert!(
        error(0).contains("`lower` must be in [1, 2147483647]"),
        "{}",
        answers[0]
    );
    // Valid targets: [lower 4, min(128, 2147483647) = 128].
    assert!(error(1).contains("is outside [4, 128]"), "{}", answers[1]);
    assert_eq!(answers[2]["target"], 128);
}

#[test]
fn single_request_flags_and_bad_scale_factors_are_usage_errors() {
    for flags in [
        &["--set", "scaling.alignment.mode=EVENLY_SPREAD"][..],
        &["--ship", "HASH"],
        &["--lower", "2"],
    ] {
        let out = Cli::new(["align", "--batch"].iter().chain(flags))
            .cwd(std::env::temp_dir())
            .stdin("{\"current\": 16, \"target\": 24, \"max_parallelism\": 128}\n")
            .run();
        assert_eq!(out.code, 2, "{flags:?}: {}", out.stderr);
        assert!(
            out.stdout.is_empty(),
            "{flags:?}: no answer: {}",
            out.stdout
        );
        assert!(
            out.stderr.contains("cannot be used with"),
            "{flags:?}: {}",
            out.stderr
        );
    }
    // Flags whose values are each in range but not together: a target below --lower, or above
    // min(--max-parallelism 8, --upper) = 8.
    for flags in [&["--target", "2", "--lower", "3"][..], &["--target", "9"]] {
        let out = Cli::new(
            ["align", "--current", "4", "--max-parallelism", "8"]
                .iter()
                .chain(flags),
        )
        .run();
        assert_eq!(out.code, 2, "{flags:?}: {}", out.stdout);
        assert!(
            out.stderr.contains("is outside ["),
            "{flags:?}: {}",
            out.stderr
        );
    }
    for factor in ["NaN", "inf", "0", "-2"] {
        let flag = format!("--scale-factor={factor}");
        let out = Cli::new(["align", "--current", "4", "--max-parallelism", "8", &flag]).run();
        assert_eq!(out.code, 2, "{factor}: {}", out.stdout);
        assert!(
            out.stderr.contains("must be a finite number > 0"),
            "{factor}: {}",
            out.stderr
        );
    }
}

/// The peak resident memory of process `pid` so far, in KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc status")
}

#[test]
fn a_huge_batch_line_is_answered_with_an_error_and_costs_no_memory() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};

    const HUGE: usize = 256 << 20;
    let request = br#"{"current": 16, "target": 24, "max_parallelism": 128}"#;
    let mut child = Command::new(crate::harness::flowscale_bin())
        .args(["align", "--batch"])
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start flowscale");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut answers = BufReader::new(child.stdout.take().expect("stdout"));
    let mut next = || {
        let mut line = String::new();
        answers.read_line(&mut line).expect("an answer line");
        serde_json::from_str::<Value>(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    };
    stdin.write_all(request).unwrap();
    stdin.write_all(b"\n").unwrap();
    assert_eq!(next()["target"], 24);
    let before = peak_rss_kib(child.id());
    // A 256 MiB line, written in pieces, then a request: the host must answer both while its
    // input is still open, so its peak memory is read while it runs.
    let piece = vec![b' '; 1 << 20];
    for _ in 0..HUGE / piece.len() {
        stdin.write_all(&piece).unwrap();
    }
    stdin.write_all(b"\n").unwrap();
    stdin.write_all(request).unwrap();
    stdin.write_all(b"\n").unwrap();
    let refused = next();
    assert_eq!(refused["line"], 2, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("line 2: longer than 65536 bytes")),
        "{refused}"
    );
    assert_eq!(next()["target"], 24);
    let after = peak_rss_kib(child.id());
    drop(stdin);
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(1), "one line failed");
    // Reading the line whole would take at least its 256 MiB; bounded, the peak grows by
    // little more than one pipe buffer and one request (a few hundred KiB).
    let grown_mib = after.saturating_sub(before) / 1024;
    assert!(
        grown_mib < 16,
        "peak memory grew by {grown_mib} MiB reading a {} MiB line ({before} -> {after} KiB)",
        HUGE >> 20
    );
}
