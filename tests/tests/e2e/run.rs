//! `flowscale run` and `flowscale simulate` on the example jobs, with a plugin mode next to the
//! built-in ones.

use flowscale_tests::{build, plugin_file, plugins_dir};
use serde_json::Value;

use crate::harness::{Cli, repo_root};

/// A plugins directory holding the two example plugins.
fn example_plugins() -> tempfile::TempDir {
    let profile = build(&["bucket-align", "slot-align"]);
    let bucket = plugin_file(&profile, "bucket-align");
    let slot = plugin_file(&profile, "slot-align");
    plugins_dir(&[(&bucket, "libbucket_align.so"), (&slot, "libslot_align.so")])
}

fn path(p: &std::path::Path) -> String {
    p.display().to_string()
}

#[test]
fn the_demo_fleet_validates_with_the_example_plugins() {
    let plugins = example_plugins();
    let fleet = repo_root().join("examples/fleet.toml");
    let out = Cli::new([
        "validate",
        "--json",
        &path(&fleet),
        "--plugins",
        &path(plugins.path()),
    ])
    .run();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let report = out.json();
    let modes: Vec<(&str, &str)> = report["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| {
            (
                j["name"].as_str().unwrap_or(""),
                j["mode"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(modes.contains(&("sensors", "bucket-align")), "{modes:?}");
    assert!(modes.contains(&("payments", "EVENLY_SPREAD")), "{modes:?}");

    // Without the plugins the custom mode cannot be resolved: a located configuration error.
    let empty = tempfile::tempdir().expect("tempdir");
    let out = Cli::new(["validate", &path(&fleet), "--plugins", &path(empty.path())]).run();
    assert_eq!(out.code, 1);
    assert!(
        out.stdout
            .contains("fleet.toml:46: jobs[2].config.\"scaling.alignment.mode.buckets.class\""),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("no loaded mode has implementation id `bucket-align`"),
        "{}",
        out.stdout
    );
}

#[test]
fn run_applies_each_jobs_mode_and_the_plugin_mode_aligns_to_buckets() {
    let plugins = example_plugins();
    let fleet = repo_root().join("examples/fleet.toml");
    let out = Cli::new([
        "run",
        &path(&fleet),
        "--plugins",
        &path(plugins.path()),
        "--json",
        "--simulated",
        "40min",
    ])
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines = out.json_lines();
    let cycles: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "cycle")
        .map(|l| &l["data"])
        .collect();
    let summaries: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "summary")
        .map(|l| &l["data"])
        .collect();
    assert_eq!(summaries.len(), 6, "one summary per job");
    // The plugin mode decided for the custom-partitioned router and its answer divides 48.
    let router: Vec<&Value> = cycles
        .iter()
        .filter(|c| c["job"] == "sensors" && c["operation"].is_object())
        .flat_map(|c| c["vertices"].as_array().into_iter().flatten())
        .filter(|v| v["vertex"] == "route" && v["mode"] == "bucket-align")
        .collect();
    assert!(!router.is_empty(), "the router was scaled by bucket-align");
    for v in &router {
        let aligned = v["aligned"].as_u64().expect("aligned");
        assert_eq!(
            48 % aligned,
            0,
            "bucket-align answers a divisor of 48 with rule DIVISOR: {v}"
        );
    }
    // Every job ran under its configured mode.
    for (job, mode) in [
        ("clicks", "BALANCED"),
        ("payments", "EVENLY_SPREAD"),
        ("sensors", "bucket-align"),
        ("orders", "ADVANCED"),
    ] {
        let summary = summaries.iter().find(|s| s["job"] == job).expect("summary");
        assert_eq!(summary["mode"], mode);
        assert!(
            summary["steps"].as_u64().is_some_and(|n| n > 100),
            "{summary}"
        );
    }
    // The bounded iterative job finished by itself.
    let iterations = summaries
        .iter()
        .find(|s| s["job"] == "graph-iterations")
        .expect("summary");
    assert!(
        iterations["summary"]["finished_at_s"].as_f64().is_some(),
        "{iterations}"
    );
}

#[test]
fn run_once_steps_every_job_once() {
    let plugins = example_plugins();
    let fleet = repo_root().join("examples/fleet.toml");
    let out = Cli::new([
        "run",
        &path(&fleet),
        "--plugins",
        &path(plugins.path()),
        "--once",
        "--json",
    ])
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines = out.json_lines();
    let cycles = lines.iter().filter(|l| l["type"] == "cycle").count();
    assert_eq!(cycles, 6, "{}", out.stdout);
}

#[test]
fn simulate_compares_modes_on_one_workload_and_plots() {
    let plugins = example_plugins();
    let job = repo_root().join("examples/jobs/custom-buckets.toml");
    let dir = tempfile::tempdir().expect("tempdir");
    let svg = dir.path().join("buckets.svg");
    let out = Cli::new([
        "simulate",
        &path(&job),
        "--compare",
        "BALANCED,EVENLY_SPREAD,bucket-align",
        "--set",
        "scaling.alignment.mode.bucket-align.rule=DIVISOR",
        "--plugins",
        &path(plugins.path()),
        "--duration",
        "2h",
        "--plot",
        &path(&svg),
        "--json",
    ])
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result = out.json();
    let runs = result["runs"].as_array().expect("runs");
    let modes: Vec<&str> = runs
        .iter()
        .map(|r| r["mode"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(modes, ["BALANCED", "EVENLY_SPREAD", "bucket-align"]);
    let skew = |mode: &str| {
        runs.iter()
            .find(|r| r["mode"] == mode)
            .and_then(|r| r["summary"]["skew"].as_f64())
            .expect("skew")
    };
    // Aligning the router to the 48 buckets removes the skew the built-ins leave.
    assert!(skew("bucket-align") < skew("BALANCED"), "{result}");
    let chart = std::fs::read_to_string(&svg).expect("the chart was written");
    assert!(
        chart.starts_with("<svg") || chart.starts_with("<?xml"),
        "{}",
        &chart[..80.min(chart.len())]
    );
    for mode in modes {
        assert!(chart.contains(mode), "the chart names {mode}");
    }
}

#[test]
fn a_faulty_plugin_mode_is_contained_and_the_other_jobs_go_on() {
    let profile = build(&["fixture-panicking", "fixture-out-of-range"]);
    let panicking = plugin_file(&profile, "fixture-panicking");
    let out_of_range = plugin_file(&profile, "fixture-out-of-range");
    let plugins = plugins_dir(&[
        (&panicking, "libpanicking.so"),
        (&out_of_range, "libout_of_range.so"),
    ]);
    let dir = tempfile::tempdir().expect("tempdir");
    let fleet = dir.path().join("fleet.toml");
    let job = repo_root().join("examples/jobs/keyed-step-spike.toml");
    std::fs::write(
        &fleet,
        format!(
            r#"
[defaults]
"metrics.window" = "3 min"
"stabilization.interval" = "1 min"

[[jobs]]
name = "panics"
job = "{job}"
[jobs.config]
"scaling.alignment.mode" = "p"
"scaling.alignment.mode.p.class" = "panicking"
"scaling.alignment.mode.p.validate" = "ok"

[[jobs]]
name = "wild"
job = "{job}"
[jobs.config]
"scaling.alignment.mode" = "w"
"scaling.alignment.mode.w.class" = "out-of-range"

[[jobs]]
name = "healthy"
job = "{job}"
"#,
            job = job.display()
        ),
    )
    .expect("write the fleet");
    let out = Cli::new([
        "run",
        &path(&fleet),
        "--plugins",
        &path(plugins.path()),
        "--json",
        "--simulated",
        "1h",
    ])
    .run();
    assert_eq!(
        out.code, 0,
        "the host survives faulty plugins: {}",
        out.stderr
    );
    let lines = out.json_lines();
    let faults = |job: &str| -> Vec<String> {
        lines
            .iter()
            .filter(|l| l["type"] == "cycle" && l["data"]["job"] == job)
            .flat_map(|l| l["data"]["events"].as_array().cloned().unwrap_or_default())
            .filter(|e| e["reason"] == "PluginFault")
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let panics = faults("panics");
    assert!(
        !panics.is_empty(),
        "a PluginFault event for the panicking mode"
    );
    assert!(panics.iter().any(|m| m.contains("panicked")), "{panics:?}");
    let wild = faults("wild");
    assert!(wild.iter().any(|m| m.contains("refused")), "{wild:?}");
    assert!(faults("healthy").is_empty());
    // Faulty modes fall back to the computed target: every job still scaled.
    for job in ["panics", "wild", "healthy"] {
        let scaled = lines.iter().any(|l| {
            l["type"] == "cycle" && l["data"]["job"] == job && l["data"]["operation"].is_object()
        });
        assert!(scaled, "{job} was scaled");
    }
}

#[test]
fn align_uses_a_jobs_keys_and_plugins_from_the_fleet() {
    let plugins = example_plugins();
    let fleet = repo_root().join("examples/fleet.toml");
    let out = Cli::new([
        "align",
        "--config",
        &path(&fleet),
        "--job",
        "sensors",
        "--plugins",
        &path(plugins.path()),
        "--current",
        "10",
        "--target",
        "17",
        "--max-parallelism",
        "128",
        "--ship",
        "CUSTOM:48",
        "--json",
    ])
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let answer = out.json();
    assert_eq!(answer["mode"], "bucket-align");
    // rule = DIVISOR in the fleet: the first divisor of 48 at or above 17.
    assert_eq!(answer["parallelism"], 24);

    let out = Cli::new([
        "align",
        "--config",
        &path(&fleet),
        "--job",
        "nope",
        "--current",
        "1",
        "--target",
        "2",
        "--max-parallelism",
        "8",
    ])
    .run();
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("no job `nope`") && out.stderr.contains("sensors"),
        "{}",
        out.stderr
    );
}

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

/// What an interrupted invocation printed and how it ended.
struct Interrupted {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `flowscale args`, sends it SIGINT (what Ctrl-C sends) once `ready` accepts a line of
/// its output, and collects everything it printed until it exits.
fn interrupt_when(args: &[&str], ready: impl Fn(Stream, &str) -> bool) -> Interrupted {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    let mut child = Command::new(crate::harness::flowscale_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("FLOWSCALE_PLUGINS_DIR")
        .env_remove("FLOWSCALE_LOG")
        .spawn()
        .expect("run flowscale");
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().expect("piped stdout");
    let stderr = child.stderr.take().expect("piped stderr");
    let readers = [
        (
            Stream::Stdout,
            Box::new(stdout) as Box<dyn std::io::Read + Send>,
        ),
        (Stream::Stderr, Box::new(stderr)),
    ]
    .map(|(stream, pipe)| {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if tx.send((stream, line)).is_err() {
                    break;
                }
            }
        })
    });
    drop(tx);
    let (mut out, mut err) = (String::new(), String::new());
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut sent = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok((stream, line)) = rx.recv_timeout(left) else {
            break;
        };
        if !sent && ready(stream, &line) {
            let status = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status()
                .expect("kill runs");
            assert!(status.success(), "SIGINT was not delivered");
            sent = true;
        }
        let text = if stream == Stream::Stdout {
            &mut out
        } else {
            &mut err
        };
        text.push_str(&line);
        text.push('\n');
    }
    if Instant::now() >= deadline {
        let _ = child.kill();
    }
    let status = child.wait().expect("wait for flowscale");
    for reader in readers {
        let _ = reader.join();
    }
    assert!(
        sent,
        "never ready to interrupt; stdout:\n{out}\nstderr:\n{err}"
    );
    Interrupted {
        code: status.code(),
        stdout: out,
        stderr: err,
    }
}

/// `HH:MM:SS` of a simulated instant, as flowscale prints it.
fn clock(ms: u64) -> String {
    let s = ms / 1000;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

#[test]
fn ctrl_c_during_a_simulated_run_says_so_and_exits_130() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fleet = dir.path().join("fleet.toml");
    let job = repo_root().join("examples/jobs/diurnal.toml");
    std::fs::write(
        &fleet,
        format!("[[jobs]]\nname = \"diurnal\"\njob = {:?}\n", path(&job)),
    )
    .expect("write the fleet");
    // 30 days of simulated time take minutes: the run is still going when SIGINT arrives, right
    // after its first cycle was printed.
    let run = interrupt_when(
        &["run", &path(&fleet), "--json", "--simulated", "30d"],
        |stream, line| stream == Stream::Stdout && line.contains("\"type\":\"cycle\""),
    );
    assert_eq!(run.code, Some(130), "stderr:\n{}", run.stderr);
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let last_cycle = lines
        .iter()
        .filter(|l| l["type"] == "cycle")
        .filter_map(|l| l["data"]["at_ms"].as_u64())
        .next_back()
        .expect("cycles before the interrupt");
    // The partial summary is kept, and says where the run stopped: at its last cycle.
    let summary = lines
        .iter()
        .find(|l| l["type"] == "summary")
        .map(|l| &l["data"])
        .expect("a summary");
    assert_eq!(summary["job"], "diurnal");
    assert!(summary["summary"].is_object(), "{summary}");
    assert_eq!(summary["interrupted_at_ms"].as_u64(), Some(last_cycle));
    let steps = summary["steps"].as_u64().expect("steps");
    // A full run would step every 10 s for 30 days.
    assert!(steps < 30 * 86_400 / 10, "{summary}");
    assert_says_where_it_stopped(&run.stderr, "diurnal", last_cycle);
    assert!(
        run.stderr
            .contains("flowscale run was interrupted (Ctrl-C)"),
        "{}",
        run.stderr
    );
}

/// Asserts that stderr names where `job` stopped, in simulated time of the 30-day run.
fn assert_says_where_it_stopped(stderr: &str, job: &str, at_ms: u64) {
    let said = format!(
        "interrupted: {job} stopped at simulated time {} of 720:00:00",
        clock(at_ms)
    );
    assert!(stderr.contains(&said), "{said:?} not in:\n{stderr}");
}

#[test]
fn ctrl_c_during_simulate_says_so_and_exits_130() {
    let job = repo_root().join("examples/jobs/diurnal.toml");
    let run = interrupt_when(
        &[
            "simulate",
            &path(&job),
            "--compare",
            "BALANCED,EVENLY_SPREAD",
            "--duration",
            "30d",
            "--json",
        ],
        |stream, line| stream == Stream::Stderr && line.starts_with("simulating "),
    );
    assert_eq!(run.code, Some(130), "stderr:\n{}", run.stderr);
    let result: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", run.stdout));
    let runs = result["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "{result}");
    for r in runs {
        let mode = r["mode"].as_str().expect("mode");
        assert!(r["summary"].is_object(), "the partial summary is kept: {r}");
        let at = r["interrupted_at_ms"]
            .as_u64()
            .unwrap_or_else(|| panic!("{mode} does not say where it stopped: {r}"));
        assert!(at < 30 * 86_400_000, "{r}");
        assert_says_where_it_stopped(&run.stderr, mode, at);
    }
    assert!(
        run.stderr
            .contains("flowscale simulate was interrupted (Ctrl-C)"),
        "{}",
        run.stderr
    );
}

#[test]
fn simulate_with_a_pace_takes_the_simulated_time_over_the_pace() {
    use std::time::{Duration, Instant};
    let job = repo_root().join("examples/jobs/diurnal.toml");
    // 2 simulated minutes at 120 simulated seconds per wall second: one wall second.
    let started = Instant::now();
    let out = Cli::new([
        "simulate",
        &path(&job),
        "--duration",
        "2min",
        "--pace",
        "120",
        "--json",
    ])
    .run();
    let took = started.elapsed();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(took >= Duration::from_secs(1), "{took:?}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert!(
        out.stderr
            .contains("at 120 simulated s per wall s (00:00:01 wall time)"),
        "{}",
        out.stderr
    );
    let result = out.json();
    assert!(result["runs"][0]["summary"].is_object(), "{result}");
    assert_eq!(result["runs"][0].get("interrupted_at_ms"), None, "{result}");
}

#[test]
fn a_pace_must_be_a_positive_finite_number() {
    let job = repo_root().join("examples/jobs/diurnal.toml");
    let fleet = repo_root().join("examples/fleet.toml");
    for (command, input) in [("simulate", &job), ("run", &fleet)] {
        for pace in ["0", "-1", "NaN", "inf"] {
            let out = Cli::new([command, &path(input), "--pace", pace]).run();
            assert_eq!(out.code, 2, "{command} --pace {pace}: {}", out.stderr);
            assert!(
                out.stderr.contains(&format!(
                    "invalid value '{pace}' for '--pace <X>': `{pace}` is not a positive finite \
                     number"
                )),
                "{command} --pace {pace}: {}",
                out.stderr
            );
        }
    }
}

#[test]
fn a_paced_run_prints_its_log_as_it_goes_and_stops_on_ctrl_c() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fleet = dir.path().join("fleet.toml");
    let job = repo_root().join("examples/jobs/diurnal.toml");
    std::fs::write(
        &fleet,
        format!("[[jobs]]\nname = \"diurnal\"\njob = {:?}\n", path(&job)),
    )
    .expect("write the fleet");
    // 30 simulated days at 3000 simulated seconds per wall second take over 14 wall minutes:
    // the readable log only shows up before the end because a paced run prints as it goes.
    let run = interrupt_when(
        &[
            "run",
            &path(&fleet),
            "--verbose",
            "--simulated",
            "30d",
            "--pace",
            "3000",
        ],
        |stream, line| stream == Stream::Stdout && line.contains(" diurnal "),
    );
    assert_eq!(run.code, Some(130), "stderr:\n{}", run.stderr);
    assert!(
        run.stderr
            .contains("interrupted: diurnal stopped at simulated time"),
        "{}",
        run.stderr
    );
}
