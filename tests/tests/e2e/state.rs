//! `flowscale run` with a state directory, on a wall-clock job (a Flink job, served by
//! `fake_flink`): killed at random points it never loses or tears its state, a section that
//! cannot be read is kept aside while the others resume, and a second host on the directory is
//! refused.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::fake_flink::{FakeFlink, JOB_ID};
use crate::harness::{Cli, flowscale_bin, repo_root};

/// A fleet of one Flink job at `rest` whose state lives in `state/` beside the file. The short
/// window and cooldown make it decide, rescale and queue within a few seconds.
fn write_fleet(dir: &Path, rest: &str) -> PathBuf {
    let fleet = dir.join("fleet.toml");
    std::fs::write(
        &fleet,
        format!(
            r#"
[host]
interval = "500ms"
state-dir = "state"

[defaults]
"metrics.window" = "2s"
"stabilization.interval" = "1s"
"scaling-cooldown-period" = "3s"
"scale-down.interval" = "0"
"utilization.max" = "0.8"
"utilization.min" = "0.5"

[[jobs]]
name = "orders"
engine = "flink"
rest = "{rest}"
job-id = "{JOB_ID}"
"#
        ),
    )
    .expect("write the fleet");
    fleet
}

fn start(fleet: &Path, args: &[&str]) -> Child {
    Command::new(flowscale_bin())
        .arg("run")
        .arg(fleet)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env_remove("FLOWSCALE_LOG")
        .spawn()
        .expect("start flowscale")
}

/// A small deterministic generator (64-bit LCG, high bits), seeded per run and printed, so a
/// failing sequence of kill points can be replayed with `FLOWSCALE_E2E_SEED`.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

fn read_state(path: &Path) -> Option<Value> {
    let bytes = std::fs::read(path).ok()?;
    let value: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "{} is torn or not JSON after a kill: {e}\n{}",
            path.display(),
            String::from_utf8_lossy(&bytes)
        )
    });
    assert_eq!(value["job"], "orders", "{value}");
    assert!(value["sections"].is_object(), "{value}");
    Some(value)
}

/// How many events a job's log keeps.
const EVENT_RING: usize = 200;

fn events_of(state: &Value) -> &[Value] {
    state["sections"]["events"]["events"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

/// True when the event log `new` holds every event of `old` that its ring can still hold, in
/// order, followed by newer ones.
fn continues(old: &[Value], new: &[Value]) -> bool {
    (0..=old.len()).any(|dropped| {
        (dropped == 0 || new.len() == EVENT_RING) && new.starts_with(&old[dropped..])
    })
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| {
                    e.expect("an entry")
                        .file_name()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn killed_at_random_points_nothing_is_lost_and_a_corrupt_section_is_kept_aside() {
    let seed = std::env::var("FLOWSCALE_E2E_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("kill points seeded with FLOWSCALE_E2E_SEED={seed}");
    let mut random = Lcg(seed);
    let fake = FakeFlink::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let fleet = write_fleet(dir.path(), &fake.url());
    let state_dir = dir.path().join("state");
    let state_file = state_dir.join("orders.json");

    // SIGKILL the host at random points, many times, within a bounded time.
    let started = Instant::now();
    let mut kills = 0;
    let mut persisted: Option<Value> = None;
    let mut went_on = 0;
    // At most 14 kills in 16 s; longer only while fewer than two hosts got to write (a
    // machine so busy that the hosts rarely get that far).
    let more = |kills: usize, went_on: usize, elapsed: Duration| {
        (kills < 14 && elapsed < Duration::from_secs(16))
            || (went_on < 2 && elapsed < Duration::from_secs(24))
    };
    while more(kills, went_on, started.elapsed()) {
        let mut host = start(&fleet, &[]);
        std::thread::sleep(Duration::from_millis(250 + random.below(2000)));
        host.kill().expect("SIGKILL the host");
        host.wait().expect("the host is gone");
        kills += 1;
        // Whatever the host was doing, the file is the last complete state it wrote, and the
        // host resumed from what the killed one before it had written.
        if let Some(now) = read_state(&state_file) {
            if let Some(before) = &persisted {
                assert!(
                    continues(events_of(before), events_of(&now)),
                    "kill {kills} lost events: {before:#} then {now:#}"
                );
            }
            if persisted.as_ref() != Some(&now) {
                went_on += 1;
            }
            persisted = Some(now);
        }
    }
    let persisted = persisted.expect("some run persisted its state");
    assert!(kills >= 8, "only {kills} kills in {:?}", started.elapsed());
    assert!(
        went_on >= 2,
        "the restarted hosts went on: {went_on} of {kills} wrote new state"
    );
    eprintln!("{kills} kills, {went_on} of them after new state was written");
    let sections = persisted["sections"].as_object().expect("sections").clone();
    for name in ["cooldown", "events", "scaling-history", "metric-history"] {
        assert!(sections.contains_key(name), "no `{name}` in {persisted:#}");
    }
    assert!(
        sections["scaling-history"].as_object().is_some_and(|h| h
            .values()
            .any(|v| v.as_object().is_some_and(|m| !m.is_empty()))),
        "the job was rescaled at least once: {:#}",
        sections["scaling-history"]
    );

    // Corrupt one section: valid JSON of the wrong type.
    let names: Vec<&String> = sections.keys().collect();
    let corrupt = names[usize::try_from(random.below(names.len() as u64)).unwrap_or(0)].clone();
    let mut damaged = persisted.clone();
    damaged["sections"][&corrupt] = Value::String("overwritten by a test".into());
    let damaged_bytes = serde_json::to_vec_pretty(&damaged).expect("json");
    std::fs::write(&state_file, &damaged_bytes).expect("corrupt the file");

    // `validate` reports it, with the file and the section.
    let checked = Cli::new(["validate", &fleet.display().to_string()]).run();
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
    assert!(
        checked
            .stdout
            .contains(&format!("orders.json: sections.\"{corrupt}\"")),
        "{}",
        checked.stdout
    );

    // Restart against a cluster that no longer answers: nothing but the report of the restart
    // may change what was persisted.
    drop(fake);
    let out = Cli::new([
        "run",
        &fleet.display().to_string(),
        "--json",
        "--duration",
        "1s",
    ])
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let reported: Vec<Value> = out
        .json_lines()
        .into_iter()
        .filter(|l| l["type"] == "cycle")
        .flat_map(|l| l["data"]["events"].as_array().cloned().unwrap_or_default())
        .collect();
    let quarantined: Vec<&Value> = reported
        .iter()
        .filter(|e| e["reason"] == "StateQuarantined")
        .collect();
    assert_eq!(quarantined.len(), 1, "{reported:#?}");
    let message = quarantined[0]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("`{corrupt}`")), "{message}");
    // The first step after the restart says again that the cluster is unreachable.
    assert!(
        reported.iter().any(|e| e["reason"] == "EngineError"),
        "{reported:#?}"
    );

    // The corrupt section was kept aside: the file as it was, byte for byte.
    let quarantine = state_dir.join("quarantine");
    let kept = files_in(&quarantine);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(message.contains(&kept[0]), "{message} names {kept:?}");
    assert_eq!(
        std::fs::read(quarantine.join(&kept[0])).expect("the kept file"),
        damaged_bytes
    );

    // Nothing else was lost: every other section is what was last persisted before the kill.
    let after = read_state(&state_file).expect("the state was written again");
    for (name, before) in &sections {
        let now = &after["sections"][name];
        if name == &corrupt {
            assert_ne!(now, &damaged["sections"][name], "`{name}` started afresh");
        } else if name == "events" {
            // The log goes on: what it held, then what the restarted host reported.
            let (old, new) = (events_of(&persisted), events_of(&after));
            assert!(continues(old, new), "{old:#?}\nthen\n{new:#?}");
            assert_eq!(
                new.len(),
                (old.len() + reported.len()).min(EVENT_RING),
                "only the restart's reports were added"
            );
        } else {
            assert_eq!(now, before, "section `{name}` is what was persisted");
        }
    }
    let leftovers: Vec<String> = files_in(&state_dir)
        .into_iter()
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_second_host_on_the_same_state_directory_exits_at_once_naming_the_holder() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Nothing listens on the discard port: the job is a wall-clock job that never answers.
    let fleet = write_fleet(dir.path(), "http://127.0.0.1:9");
    let state_dir = dir.path().join("state");
    let mut first = start(&fleet, &["--duration", "30s"]);
    let lock = state_dir.join(".lock");
    let waited = Instant::now();
    while std::fs::read_to_string(&lock).map_or(true, |t| t.trim() != first.id().to_string()) {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "the first host never took the lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let asked = Instant::now();
    let second = Cli::new(["run", &fleet.display().to_string()]).run();
    let took = asked.elapsed();
    let _ = first.kill();
    let _ = first.wait();

    assert_eq!(second.code, 1, "{}", second.stderr);
    assert!(
        took < Duration::from_secs(5),
        "refused at once, not after {took:?}"
    );
    assert!(
        second.stderr.contains(&state_dir.display().to_string()),
        "names the directory: {}",
        second.stderr
    );
    assert!(
        second.stderr.contains(&format!("process {}", first.id())),
        "names the holder: {}",
        second.stderr
    );
    assert!(second.stdout.is_empty(), "nothing ran: {}", second.stdout);
}

#[test]
fn a_broken_file_of_a_job_not_in_the_fleet_is_reported_and_left_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = repo_root().join("examples/jobs/keyed-step-spike.toml");
    let fleet = dir.path().join("fleet.toml");
    std::fs::write(
        &fleet,
        format!(
            "[host]\nstate-dir = \"state\"\n\n[[jobs]]\nname = \"simulated\"\njob = \"{}\"\n",
            job.display()
        ),
    )
    .expect("write the fleet");
    let state_dir = dir.path().join("state");
    std::fs::create_dir(&state_dir).expect("state dir");
    let gone = state_dir.join("gone.json");
    std::fs::write(&gone, "{not json").expect("a broken file");

    // Before: "cannot use the state directory", exit 1, even for a simulated-only fleet.
    let out = Cli::new([
        "run",
        &fleet.display().to_string(),
        "--json",
        "--simulated",
        "10min",
    ])
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines = out.json_lines();
    let reported: Vec<&Value> = lines.iter().filter(|l| l["type"] == "event").collect();
    assert_eq!(reported.len(), 1, "{}", out.stdout);
    let event = &reported[0]["data"]["event"];
    assert_eq!(event["reason"], "StateFileIgnored");
    assert_eq!(event["job"], "gone");
    let message = event["message"].as_str().unwrap_or_default();
    assert!(message.contains("gone.json"), "{message}");
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "summary" && l["data"]["job"] == "simulated"),
        "the fleet ran: {}",
        out.stdout
    );
    assert_eq!(
        std::fs::read_to_string(&gone).expect("left alone"),
        "{not json"
    );

    // The readable log says it too, at a UTC calendar time (the host's wall clock), and
    // `validate` warns about it without failing.
    let before = utc_minute();
    let out = Cli::new(["run", &fleet.display().to_string(), "--simulated", "10min"]).run();
    let after = utc_minute();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let line = out
        .stdout
        .lines()
        .find(|l| l.contains(" gone StateFileIgnored: state file") && l.contains("gone.json"))
        .unwrap_or_else(|| panic!("no StateFileIgnored line in:\n{}", out.stdout));
    let at = line.split(' ').next().unwrap_or_default();
    assert!(is_rfc3339_utc(at), "{line}");
    assert!(
        at.starts_with(&before) || at.starts_with(&after),
        "{at} is neither in {before} nor in {after}"
    );
    assert!(
        !out.stdout.split_whitespace().any(|word| {
            word.strip_prefix('T')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        }),
        "a time as raw epoch seconds in:\n{}",
        out.stdout
    );
    let checked = Cli::new(["validate", &fleet.display().to_string()]).run();
    assert_eq!(checked.code, 0, "{}", checked.stdout);
    assert!(
        checked.stdout.contains("warning: ")
            && checked.stdout.contains("gone.json: not flowscale state"),
        "{}",
        checked.stdout
    );
}

/// The current UTC minute, `YYYY-MM-DDTHH:MM`, from `date` (not from the code under test).
fn utc_minute() -> String {
    let out = Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M"])
        .output()
        .expect("date runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `YYYY-MM-DDTHH:MM:SSZ`, or with `.mmm` before the `Z`.
fn is_rfc3339_utc(text: &str) -> bool {
    let shape = |pattern: &str| {
        text.len() == pattern.len()
            && text.bytes().zip(pattern.bytes()).all(|(c, p)| match p {
                b'9' => c.is_ascii_digit(),
                p => c == p,
            })
    };
    shape("9999-99-99T99:99:99Z") || shape("9999-99-99T99:99:99.999Z")
}
