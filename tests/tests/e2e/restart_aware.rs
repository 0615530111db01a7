//! Restart-aware hysteresis (`scaling.restart-aware`) as a user meets it: `flowscale run` on
//! the diurnal example job for a simulated day, with the key on and off.

use serde_json::Value;

use crate::harness::{Cli, repo_root};

/// `examples/jobs/diurnal.toml` under the demo fleet's timing keys (window 5 min, cooldown
/// 5 min, scale-down interval 30 min), one cycle a minute for a simulated day, with
/// `scaling.restart-aware` set to `on`; the JSON lines of the run.
fn run_diurnal(on: bool) -> Vec<Value> {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = repo_root().join("examples/jobs/diurnal.toml");
    let fleet = format!(
        "[host]\ninterval = \"1min\"\n\n[defaults]\n\"metrics.window\" = \"5 min\"\n\
         \"stabilization.interval\" = \"1 min\"\n\"scaling-cooldown-period\" = \"5 min\"\n\
         \"scale-down.interval\" = \"30 min\"\n\n\
         [[jobs]]\nname = \"d\"\njob = {:?}\nduration = \"1d\"\n[jobs.config]\n\
         \"scaling.restart-aware\" = \"{on}\"\n",
        job.display().to_string()
    );
    let fleet_file = dir.path().join("fleet.toml");
    std::fs::write(&fleet_file, fleet).expect("write the fleet");
    let path = fleet_file.display().to_string();
    let out = Cli::new(["run", &path, "--json", "--simulated", "1d"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json_lines()
}

/// The cycles of job `d`.
fn cycles(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .filter(|l| l["type"] == "cycle" && l["data"]["job"] == "d")
        .map(|l| &l["data"])
        .collect()
}

/// The rescales the run's summary counts.
fn rescales(lines: &[Value]) -> u64 {
    lines
        .iter()
        .find(|l| l["type"] == "summary" && l["data"]["job"] == "d")
        .and_then(|l| l["data"]["summary"]["rescales"].as_u64())
        .expect("a summary with rescales")
}

/// The `ScalingSkipped` events of the run with their instants (ms).
fn skipped_events(lines: &[Value]) -> Vec<(i64, String)> {
    cycles(lines)
        .into_iter()
        .flat_map(|c| {
            let at = c["at_ms"].as_i64().unwrap_or(-1);
            let events = c["events"].as_array().cloned().unwrap_or_default();
            events
                .into_iter()
                .filter(|e| e["reason"] == "ScalingSkipped")
                .map(move |e| (at, e["message"].as_str().unwrap_or("").to_string()))
        })
        .collect()
}

#[test]
fn restart_aware_scaling_rescales_less_and_says_why() {
    let off = run_diurnal(false);
    let on = run_diurnal(true);
    assert!(skipped_events(&off).is_empty());
    assert!(
        cycles(&off).iter().all(|c| c["stage"] != "ScalingSkipped"),
        "the key off never skips"
    );
    let (rescales_off, rescales_on) = (rescales(&off), rescales(&on));
    assert!(
        rescales_on < rescales_off,
        "restart-aware: {rescales_on} rescales, off: {rescales_off}"
    );

    let skipped_cycles: Vec<&Value> = cycles(&on)
        .into_iter()
        .filter(|c| c["stage"] == "ScalingSkipped")
        .collect();
    assert!(!skipped_cycles.is_empty(), "no cycle was skipped");
    // A skipped cycle applies nothing.
    for cycle in &skipped_cycles {
        assert!(cycle["operation"].is_null(), "{cycle}");
    }
    let events = skipped_events(&on);
    assert!(!events.is_empty(), "no ScalingSkipped event");
    for (_, message) in &events {
        assert!(
            message.starts_with("Restart-aware scaling skipped a ")
                && message.contains("slots ")
                && message.contains("expected hold ")
                && message.contains("restart 300 s")
                && message.ends_with("(scaling.restart-aware)"),
            "{message}"
        );
    }
    // Skipped every cycle the operation stands, reported once per `scaling.event.interval`
    // (30 min by default).
    for pair in events.windows(2) {
        assert!(pair[1].0 - pair[0].0 >= 30 * 60_000, "{events:?}");
    }
}
