//! `process` plugin isolation: plugin modes that segfault, abort, overflow the stack, spin or
//! sleep past the deadline, each used by one job of a fleet, next to healthy jobs.

use std::path::Path;

use flowscale_tests::{build, plugin_file, plugins_dir};
use serde_json::Value;

use crate::harness::{Cli, Output, flowscale_bin, misbehaving_plugins, repo_root};

/// The misbehaving fixture's modes and what their `PluginFault` events must say.
const BAD: &[(&str, &str)] = &[
    ("segfault", "killed by SIGSEGV"),
    ("abort", "killed by SIGABRT"),
    (
        "stack-overflow",
        "stack overflow: the plugin overflowed its stack",
    ),
    ("loop-forever", "align timed out after 500ms"),
    ("sleep-past-deadline", "align timed out after 500ms"),
];

fn path(p: &Path) -> String {
    p.to_str().expect("temporary paths are UTF-8").to_string()
}

/// A fleet in `process` isolation with a healthy BALANCED job, a healthy plugin-mode job
/// (bucket-align) and, with `bad`, one job per misbehaving mode.
fn fleet(dir: &Path, bad: bool) -> std::path::PathBuf {
    let keyed = repo_root().join("examples/jobs/keyed-step-spike.toml");
    let buckets = repo_root().join("examples/jobs/custom-buckets.toml");
    let mut text = format!(
        r#"
[host]
plugin-isolation = "process"
plugin-call-timeout = "500ms"

[defaults]
"metrics.window" = "3 min"
"stabilization.interval" = "1 min"

[[jobs]]
name = "healthy-balanced"
job = "{keyed}"

[[jobs]]
name = "healthy-buckets"
job = "{buckets}"
[jobs.config]
"scaling.alignment.mode" = "buckets"
"scaling.alignment.mode.buckets.class" = "bucket-align"
"scaling.alignment.mode.buckets.rule" = "DIVISOR"
"#,
        keyed = keyed.display(),
        buckets = buckets.display()
    );
    if bad {
        for (mode, _) in BAD {
            text.push_str(&format!(
                r#"
[[jobs]]
name = "{mode}"
job = "{keyed}"
[jobs.config]
"scaling.alignment.mode" = "bad"
"scaling.alignment.mode.bad.class" = "{mode}"
"#,
                keyed = keyed.display()
            ));
        }
    }
    let file = dir.join(if bad { "with-bad.toml" } else { "healthy.toml" });
    std::fs::write(&file, text).expect("write the fleet");
    file
}

fn run(fleet: &Path, plugins: &Path) -> Output {
    Cli::new([
        "run",
        &path(fleet),
        "--plugins",
        &path(plugins),
        "--json",
        "--simulated",
        "40min",
    ])
    .run()
}

/// Every cycle of `job`, whole.
fn cycles<'a>(lines: &'a [Value], job: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["type"] == "cycle" && l["data"]["job"] == job)
        .map(|l| &l["data"])
        .collect()
}

fn events<'a>(lines: &'a [Value], job: &str, reason: &str) -> Vec<&'a str> {
    cycles(lines, job)
        .into_iter()
        .flat_map(|c| c["events"].as_array().into_iter().flatten())
        .filter(|e| e["reason"] == reason)
        .map(|e| e["message"].as_str().unwrap_or_default())
        .collect()
}

/// Sends Ctrl-C (SIGINT) to a running host whose stdout `lines` are still to be drained, and
/// waits for it to end: its output and how long it took after the signal. Kills it and panics
/// if it has not ended 30 s later.
fn interrupt<L: Iterator + Send + 'static>(
    host: std::process::Child,
    lines: L,
) -> (std::process::Output, std::time::Duration) {
    // Keep reading stdout so that the host never blocks on a full pipe while it stops.
    std::thread::spawn(move || for _ in lines {});
    let status = std::process::Command::new("kill")
        .args(["-INT", &host.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let stopped = std::time::Instant::now();
    let pid = host.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(host.wait_with_output());
    });
    let Ok(output) = rx.recv_timeout(std::time::Duration::from_secs(30)) else {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
        panic!("the host did not end within 30 s of Ctrl-C");
    };
    (output.expect("the host ends"), stopped.elapsed())
}

#[test]
fn crashing_and_hanging_plugins_cost_only_their_own_jobs_in_process_isolation() {
    let profile = build(&["fixture-misbehaving", "bucket-align"]);
    let plugins = plugins_dir(&[
        (
            &plugin_file(&profile, "fixture-misbehaving"),
            "libmisbehaving.so",
        ),
        (&plugin_file(&profile, "bucket-align"), "libbucket_align.so"),
    ]);
    let dir = tempfile::tempdir().expect("tempdir");

    let alone = run(&fleet(dir.path(), false), plugins.path());
    assert_eq!(alone.code, 0, "{}", alone.stderr);
    let with_bad = run(&fleet(dir.path(), true), plugins.path());
    assert_eq!(
        with_bad.code, 0,
        "the host survives every misbehaving mode: {}",
        with_bad.stderr
    );
    let (alone, with_bad) = (alone.json_lines(), with_bad.json_lines());

    // The healthy jobs decide exactly as they do without the bad ones.
    for job in ["healthy-balanced", "healthy-buckets"] {
        let expected = cycles(&alone, job);
        assert!(
            expected.iter().any(|c| c["operation"].is_object()),
            "{job} scaled at least once"
        );
        assert_eq!(
            cycles(&with_bad, job),
            expected,
            "{job}'s decisions changed"
        );
        assert!(events(&with_bad, job, "PluginFault").is_empty());
    }
    assert!(
        cycles(&with_bad, "healthy-buckets")
            .iter()
            .flat_map(|c| c["vertices"].as_array().into_iter().flatten())
            .any(|v| v["mode"] == "bucket-align"),
        "the isolated bucket-align mode decided"
    );

    // Each bad job: a fault that says what happened, then quarantine and BALANCED.
    for (job, says) in BAD {
        let faults = events(&with_bad, job, "PluginFault");
        assert!(!faults.is_empty(), "{job}: no PluginFault event");
        assert!(
            faults[0].contains(says) && faults[0].contains("using the computed target"),
            "{job}: {}",
            faults[0]
        );
        // Only the stack overflow says so: the worker's stderr tells it from another SIGABRT.
        assert_eq!(
            faults[0].contains("stack overflow"),
            *job == "stack-overflow",
            "{job}: {}",
            faults[0]
        );
        let fallbacks = events(&with_bad, job, "ModeFallback");
        assert!(
            fallbacks
                .iter()
                .any(|m| m.contains(&format!("plugin mode `{job}` is quarantined"))),
            "{job}: {fallbacks:?}"
        );
        // Meanwhile the job still scales, with BALANCED.
        assert!(
            cycles(&with_bad, job)
                .iter()
                .flat_map(|c| c["vertices"].as_array().into_iter().flatten())
                .any(|v| v["mode"] == "BALANCED"),
            "{job} fell back to BALANCED"
        );
        let summary = with_bad
            .iter()
            .find(|l| l["type"] == "summary" && l["data"]["job"] == *job)
            .unwrap_or_else(|| panic!("{job} has a summary"));
        assert_eq!(summary["data"]["error"], Value::Null, "{summary}");
    }
}

#[test]
fn align_and_simulate_take_the_isolation_flag() {
    let profile = build(&["bucket-align", "fixture-misbehaving"]);
    let plugins = plugins_dir(&[
        (&plugin_file(&profile, "bucket-align"), "libbucket_align.so"),
        (
            &plugin_file(&profile, "fixture-misbehaving"),
            "libmisbehaving.so",
        ),
    ]);
    // bucket-align acts on a custom partitioner; the misbehaving modes keep the default gate
    // (a keyBy input).
    let align = |mode: &str, isolation: &str| {
        let ship = if mode == "bucket-align" {
            "CUSTOM:48"
        } else {
            "HASH"
        };
        Cli::new([
            "align",
            "--current",
            "16",
            "--target",
            "20",
            "--max-parallelism",
            "1024",
            "--ship",
            ship,
            "--set",
            "scaling.alignment.mode=m",
            "--set",
            &format!("scaling.alignment.mode.m.class={mode}"),
            "--plugins",
            &path(plugins.path()),
            "--plugin-isolation",
            isolation,
            "--json",
        ])
        .run()
    };
    let in_process = align("bucket-align", "in-process");
    let isolated = align("bucket-align", "process");
    assert_eq!(in_process.code, 0, "{}", in_process.stderr);
    assert_eq!(isolated.code, 0, "{}", isolated.stderr);
    assert_eq!(isolated.json(), in_process.json(), "the same answer");
    assert_eq!(isolated.json()["parallelism"], 24);

    // A segfault is an answer with a fault event, not a crash of the command.
    let crashed = align("segfault", "process");
    assert_eq!(crashed.code, 0, "{}", crashed.stderr);
    let answer = crashed.json();
    assert_eq!(answer["parallelism"], 20, "the target is kept: {answer}");
    assert!(
        answer["events"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("killed by SIGSEGV")),
        "{answer}"
    );

    let bad = align("bucket-align", "jail");
    assert_eq!(bad.code, 2, "a usage error: {}", bad.stderr);
    assert!(
        bad.stderr.contains("valid: in-process, process"),
        "{}",
        bad.stderr
    );

    let job = repo_root().join("examples/jobs/custom-buckets.toml");
    let simulated = Cli::new([
        "simulate",
        &path(&job),
        "--mode",
        "bucket-align",
        "--duration",
        "20min",
        "--plugins",
        &path(plugins.path()),
        "--plugin-isolation",
        "process",
        "--json",
    ])
    .run();
    assert_eq!(simulated.code, 0, "{}", simulated.stderr);
    let in_process = Cli::new([
        "simulate",
        &path(&job),
        "--mode",
        "bucket-align",
        "--duration",
        "20min",
        "--plugins",
        &path(plugins.path()),
        "--json",
    ])
    .run();
    assert_eq!(simulated.json(), in_process.json());
}

/// In-process, nothing can interrupt a plugin call that never returns: its job is stuck. Ctrl-C
/// still ends the host, a few seconds later, saying why.
#[test]
fn ctrl_c_ends_a_host_whose_in_process_plugin_never_returns() {
    let plugins = misbehaving_plugins();
    let dir = tempfile::tempdir().expect("tempdir");
    let keyed = repo_root().join("examples/jobs/keyed-step-spike.toml");
    let file = dir.path().join("stuck.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[defaults]
"metrics.window" = "3 min"
"stabilization.interval" = "1 min"

[[jobs]]
name = "healthy"
job = "{keyed}"

[[jobs]]
name = "stuck"
job = "{keyed}"
[jobs.config]
"scaling.alignment.mode" = "bad"
"scaling.alignment.mode.bad.class" = "loop-forever"
"#,
            keyed = keyed.display()
        ),
    )
    .expect("write the fleet");
    let mut host = std::process::Command::new(flowscale_bin())
        .args(["run", "--json", "--verbose", "--pace", "600", "--plugins"])
        .arg(plugins.path())
        .arg(&file)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start flowscale");
    // The healthy job decides on while the stuck one stays at the first decision it aligns:
    // its simulated time falls behind by more than ten minutes.
    let stdout = host.stdout.take().expect("stdout");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let (mut healthy_at, mut stuck_at) = (0, 0);
    for line in lines.by_ref().map_while(Result::ok) {
        let Ok(value) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        // Every report, a `JobStuck` one too, is stamped with the job's simulated time.
        let at = value["data"]["at_ms"].as_i64().unwrap_or(0);
        match value["data"]["job"].as_str() {
            Some("healthy") => healthy_at = at,
            Some("stuck") => stuck_at = at,
            _ => {}
        }
        if healthy_at - stuck_at > 600_000 {
            break;
        }
    }
    assert!(
        healthy_at - stuck_at > 600_000,
        "the stuck job never got stuck (healthy at {healthy_at} ms, stuck at {stuck_at} ms)"
    );
    let (output, took) = interrupt(host, lines);
    // The grace period is 5 s; a busy machine may take a little longer to get there.
    assert!(took < std::time::Duration::from_secs(15), "took {took:?}");
    assert_eq!(output.status.code(), Some(130), "{:?}", output.status);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("still busy") && stderr.contains("plugin-isolation"),
        "{stderr}"
    );
}

/// In-process, a plugin call past `plugin-call-timeout` marks its job stuck with a `JobStuck`
/// event, and the other job goes on even with a single worker: the stuck worker is replaced.
/// Ctrl-C still ends the host.
#[test]
fn a_job_stuck_in_an_in_process_plugin_is_reported_and_the_others_go_on_with_one_worker() {
    let plugins = misbehaving_plugins();
    let dir = tempfile::tempdir().expect("tempdir");
    let keyed = repo_root().join("examples/jobs/keyed-step-spike.toml");
    let file = dir.path().join("stuck.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[host]
plugin-call-timeout = "300ms"

[defaults]
"metrics.window" = "3 min"
"stabilization.interval" = "1 min"

[[jobs]]
name = "stuck"
job = "{keyed}"
[jobs.config]
"scaling.alignment.mode" = "bad"
"scaling.alignment.mode.bad.class" = "sleep-past-deadline"

[[jobs]]
name = "healthy"
job = "{keyed}"
"#,
            keyed = keyed.display()
        ),
    )
    .expect("write the fleet");
    let mut host = std::process::Command::new(flowscale_bin())
        .args([
            "run",
            "--json",
            "--pace",
            "600",
            "--workers",
            "1",
            "--plugins",
        ])
        .arg(plugins.path())
        .arg(&file)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start flowscale");
    let stdout = host.stdout.take().expect("stdout");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let (mut healthy_at, mut stuck_at) = (0, 0);
    let mut stuck_events = Vec::new();
    // The stuck job's reports, the `JobStuck` one included, come in simulated-time order.
    let mut in_order = true;
    for line in lines.by_ref().map_while(Result::ok) {
        let Ok(value) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let data = &value["data"];
        let at = data["at_ms"].as_i64().unwrap_or(0);
        let stuck = data["events"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["reason"] == "JobStuck");
        for event in stuck {
            stuck_events.push((data["job"].clone(), event["message"].clone(), at));
        }
        match data["job"].as_str() {
            Some("healthy") => healthy_at = healthy_at.max(at),
            Some("stuck") => {
                in_order &= at >= stuck_at;
                stuck_at = stuck_at.max(at);
            }
            _ => {}
        }
        // Ten simulated minutes are one wall second at this pace: the healthy job is well
        // past the stuck one's first decision.
        if !stuck_events.is_empty() && healthy_at - stuck_at > 600_000 {
            break;
        }
    }
    assert_eq!(stuck_events.len(), 1, "{stuck_events:?}");
    assert_eq!(stuck_events[0].0, "stuck");
    let message = stuck_events[0].1.as_str().unwrap_or_default();
    assert!(message.contains("plugin-call-timeout"), "{message}");
    // Stamped with the simulated instant of the stuck cycle: the job's last report (its call
    // sleeps for a wall minute), after its other steps, and behind the healthy job.
    assert!(in_order, "the stuck job's reports are out of order");
    assert_eq!(stuck_events[0].2, stuck_at, "{stuck_events:?}");
    assert!(
        healthy_at - stuck_at > 600_000,
        "the healthy job did not go on (healthy at {healthy_at} ms, stuck at {stuck_at} ms)"
    );
    let (output, took) = interrupt(host, lines);
    // The grace period is 5 s; a busy machine may take a little longer to get there.
    assert!(took < std::time::Duration::from_secs(15), "took {took:?}");
    assert_eq!(output.status.code(), Some(130), "{:?}", output.status);
}
