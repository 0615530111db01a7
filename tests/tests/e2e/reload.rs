//! Hot configuration: a running `flowscale run` takes an edited fleet file (a job changes mode,
//! one leaves, one joins), refuses an invalid edit and runs on with what it had, and reads the
//! file again on SIGHUP.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fake_flink::{FakeFlink, JOB_ID};
use crate::harness::flowscale_bin;

/// How long any one expected line may take on a busy machine.
const PATIENCE: Duration = Duration::from_secs(30);

/// A fleet of Flink entries `(name, mode)` on the fake cluster, in advisor mode (decisions are
/// reported, nothing is rescaled: several entries watch one job).
fn fleet(rest: &str, entries: &[(&str, &str)]) -> String {
    let mut text = String::from(
        "[host]\ninterval = \"300ms\"\n\n[defaults]\n\"metrics.window\" = \"1s\"\n\
         \"stabilization.interval\" = \"0\"\n\"scaling.enabled\" = \"false\"\n\
         \"utilization.max\" = \"0.8\"\n\"utilization.min\" = \"0.5\"\n",
    );
    for (name, mode) in entries {
        text.push_str(&format!(
            "\n[[jobs]]\nname = \"{name}\"\nengine = \"flink\"\nrest = \"{rest}\"\n\
             job-id = \"{JOB_ID}\"\n[jobs.config]\n\"scaling.alignment.mode\" = \"{mode}\"\n"
        ));
    }
    text
}

/// Replaces the file's content in one step, as an editor that saves atomically does.
fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("toml.new");
    std::fs::write(&tmp, text).expect("write the fleet");
    std::fs::rename(&tmp, path).expect("replace the fleet");
}

/// The host's JSON lines, as they come.
struct Lines {
    rx: Receiver<Value>,
    seen: Vec<Value>,
}

impl Lines {
    /// Waits for the first line after the ones already seen that `matches`; its index.
    fn wait_for(&mut self, what: &str, matches: impl Fn(&Value) -> bool) -> usize {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) => {
                    let hit = matches(&line);
                    self.seen.push(line);
                    if hit {
                        return self.seen.len() - 1;
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    panic!("no line with {what}; seen: {:#?}", self.seen)
                }
            }
        }
    }
}

fn event(line: &Value, reason: &str) -> Option<String> {
    (line["type"] == "event" && line["data"]["event"]["reason"] == reason).then(|| {
        line["data"]["event"]["message"]
            .as_str()
            .unwrap_or("")
            .to_string()
    })
}

/// A cycle of `job` that decided with `mode` for some vertex.
fn decided_with(line: &Value, job: &str, mode: &str) -> bool {
    line["type"] == "cycle"
        && line["data"]["job"] == job
        && line["data"]["vertices"]
            .as_array()
            .is_some_and(|vs| vs.iter().any(|v| v["mode"] == mode))
}

fn cycle_of(line: &Value, job: &str) -> bool {
    line["type"] == "cycle" && line["data"]["job"] == job
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{name} {pid}");
}

#[test]
fn an_edited_fleet_is_taken_while_running_and_an_invalid_edit_is_refused() {
    let fake = FakeFlink::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("fleet.toml");
    let rest = fake.url();
    write(
        &path,
        &fleet(&rest, &[("a", "BALANCED"), ("b", "BALANCED")]),
    );
    let mut host = Command::new(flowscale_bin())
        .args(["run", "--json", "--verbose"])
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env_remove("FLOWSCALE_LOG")
        .spawn()
        .expect("start flowscale");
    let stdout = host.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(value) = serde_json::from_str(&line)
                && tx.send(value).is_err()
            {
                break;
            }
        }
    });
    let mut lines = Lines {
        rx,
        seen: Vec::new(),
    };
    lines.wait_for("a deciding with BALANCED", |l| {
        decided_with(l, "a", "BALANCED")
    });

    // `a` changes mode, `b` leaves, `c` joins.
    write(
        &path,
        &fleet(&rest, &[("a", "EVENLY_SPREAD"), ("c", "BALANCED")]),
    );
    let reloaded = lines.wait_for("ConfigReloaded", |l| event(l, "ConfigReloaded").is_some());
    assert_eq!(
        event(&lines.seen[reloaded], "ConfigReloaded").as_deref(),
        Some("configuration reloaded: added c; removed b; changed a")
    );
    lines.wait_for("a deciding with EVENLY_SPREAD", |l| {
        decided_with(l, "a", "EVENLY_SPREAD")
    });
    lines.wait_for("a cycle of c", |l| cycle_of(l, "c"));

    // An invalid edit: refused with where and why, and the host runs on as it was.
    let invalid = fleet(&rest, &[("a", "EVENLY_SPREAD"), ("c", "NO_SUCH_MODE")]);
    write(&path, &invalid);
    let refused = lines.wait_for("ConfigRefused", |l| event(l, "ConfigRefused").is_some());
    let why = event(&lines.seen[refused], "ConfigRefused").unwrap_or_default();
    assert!(why.contains("NO_SUCH_MODE"), "{why}");
    assert!(
        why.contains("fleet.toml:"),
        "names the file and line: {why}"
    );
    lines.wait_for("a deciding with EVENLY_SPREAD after the refusal", |l| {
        decided_with(l, "a", "EVENLY_SPREAD")
    });
    lines.wait_for("a cycle of c after the refusal", |l| cycle_of(l, "c"));

    // Fixed again, then SIGHUP: read again at once even though nothing changed since.
    write(
        &path,
        &fleet(&rest, &[("a", "EVENLY_SPREAD"), ("c", "BALANCED")]),
    );
    let fixed = lines.wait_for("ConfigReloaded", |l| event(l, "ConfigReloaded").is_some());
    assert_eq!(
        event(&lines.seen[fixed], "ConfigReloaded").as_deref(),
        Some("configuration reloaded: no job changed")
    );
    signal(host.id(), "HUP");
    lines.wait_for("ConfigReloaded after SIGHUP", |l| {
        event(l, "ConfigReloaded").is_some()
    });

    signal(host.id(), "INT");
    let status = host.wait().expect("the host ends");
    assert!(status.success(), "{status:?}");
    // Drain what is left, then: `b` ran no cycle after it left the fleet.
    while let Ok(line) = lines.rx.recv_timeout(Duration::from_secs(5)) {
        lines.seen.push(line);
    }
    let late_b = lines.seen[reloaded..]
        .iter()
        .filter(|l| cycle_of(l, "b"))
        .count();
    // One cycle may have been under way when the reload was applied.
    assert!(late_b <= 1, "{late_b} cycles of b after it left");
}
