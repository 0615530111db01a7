//! While `flowscale run` runs: it takes an edited fleet file (a job changes mode, one leaves,
//! one joins), refuses an invalid edit and runs on with what it had, reads the file again on
//! SIGHUP, also while a plugin mode is quarantined or missing, takes a new `[host] api-token` and
//! says which `[host]` keys need a restart; and it takes plugin files copied into, replaced in
//! and removed from its plugins directory, and those refused for their permissions once fixed.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::Value;

use flowscale_tests::{build, plugin_file};

use crate::fake_flink::{FakeFlink, JOB_ID};
use crate::harness::{flowscale_bin, repo_root};

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
pub(crate) fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("toml.new");
    std::fs::write(&tmp, text).expect("write the fleet");
    std::fs::rename(&tmp, path).expect("replace the fleet");
}

/// Puts a plugin file in place the way docs/writing-modes.md asks: a new file, renamed over the old one.
pub(crate) fn install_plugin(from: &Path, to: &Path) {
    let tmp = to.with_extension("so.new");
    std::fs::copy(from, &tmp).expect("copy the plugin");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))
            .expect("the copy's mode is set");
    }
    std::fs::rename(&tmp, to).expect("rename the plugin into place");
}

/// The host's JSON lines, as they come.
pub(crate) struct Lines {
    pub(crate) rx: Receiver<Value>,
    pub(crate) seen: Vec<Value>,
}

/// `flowscale run --json --verbose` with `args`, its stdout piped.
pub(crate) fn start_run(args: &[&std::ffi::OsStr]) -> Child {
    Command::new(flowscale_bin())
        .args(["run", "--json", "--verbose"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env_remove("FLOWSCALE_LOG")
        .spawn()
        .expect("start flowscale")
}

impl Lines {
    /// Follows the JSON lines `host` prints, read on a thread of their own.
    pub(crate) fn of(host: &mut Child) -> Lines {
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
        Lines {
            rx,
            seen: Vec::new(),
        }
    }

    /// Waits for the first line after the ones already seen that `matches`; its index.
    pub(crate) fn wait_for(&mut self, what: &str, matches: impl Fn(&Value) -> bool) -> usize {
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

pub(crate) fn event(line: &Value, reason: &str) -> Option<String> {
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

/// The vertices of a cycle of `job` that `mode` aligned, as (target, aligned).
fn aligned_by(line: &Value, job: &str, mode: &str) -> Vec<(u64, u64)> {
    if line["type"] != "cycle" || line["data"]["job"] != job {
        return Vec::new();
    }
    line["data"]["vertices"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter(|v| v["mode"] == mode)
                .filter_map(|v| Some((v["target"].as_u64()?, v["aligned"].as_u64()?)))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn cycle_of(line: &Value, job: &str) -> bool {
    line["type"] == "cycle" && line["data"]["job"] == job
}

pub(crate) fn signal(pid: u32, name: &str) {
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
    let mut host = start_run(&[path.as_os_str()]);
    let mut lines = Lines::of(&mut host);
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
    // `b`'s summary came when it had stopped, marked as a job a reload stopped, and only
    // then: the summary at the end has the jobs the fleet ran at its end.
    let summaries: Vec<(String, bool)> = lines
        .seen
        .iter()
        .filter(|l| l["type"] == "summary")
        .map(|l| {
            let job = l["data"]["job"].as_str().unwrap_or("").to_string();
            (job, l["data"]["left"] == true)
        })
        .collect();
    let b_at = lines
        .seen
        .iter()
        .position(|l| l["type"] == "summary" && l["data"]["job"] == "b")
        .expect("a summary of b");
    assert!(
        b_at > reloaded,
        "b is summarised after the reload that removed it"
    );
    assert_eq!(
        summaries,
        [
            ("b".to_string(), true),
            ("a".to_string(), false),
            ("c".to_string(), false)
        ]
    );
}

/// A simulated job, paced so that it decides a few times a wall second, with `mode` (and the
/// `versioned` plugin mode's parameters when it is used).
fn paced_fleet(mode: &str) -> String {
    let job = repo_root().join("examples/jobs/diurnal.toml");
    let mut text = format!(
        "[host]\ninterval = \"1min\"\n\n[defaults]\n\"metrics.window\" = \"3 min\"\n\
         \"stabilization.interval\" = \"1 min\"\n\"scale-down.interval\" = \"0\"\n\n\
         [[jobs]]\nname = \"d\"\njob = {:?}\nduration = \"30d\"\n[jobs.config]\n\
         \"scaling.alignment.mode\" = \"{mode}\"\n",
        job.display().to_string()
    );
    if mode == "v" {
        text.push_str("\"scaling.alignment.mode.v.class\" = \"versioned\"\n");
    }
    text
}

/// A temporary directory with an empty `plugins/` directory in it: the directory, the plugins
/// directory and where the fleet file goes.
pub(crate) fn with_plugins_dir() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).expect("the plugins directory");
    let path = dir.path().join("fleet.toml");
    (dir, plugins, path)
}

/// `flowscale run` of the fleet file `path` with `--pace 600` (and `--plugins`), and its lines.
fn start_paced(plugins: Option<&Path>, path: &Path) -> (Child, Lines) {
    let mut args: Vec<&std::ffi::OsStr> = vec!["--pace".as_ref(), "600".as_ref()];
    if let Some(plugins) = plugins {
        args.extend(["--plugins".as_ref(), plugins.as_os_str()]);
    }
    args.push(path.as_os_str());
    let mut host = start_run(&args);
    let lines = Lines::of(&mut host);
    (host, lines)
}

#[test]
fn plugins_copied_in_replaced_and_removed_are_taken_while_running() {
    let profile = build(&["fixture-versioned-v1", "fixture-versioned-v2"]);
    let v1 = plugin_file(&profile, "fixture-versioned-v1");
    let v2 = plugin_file(&profile, "fixture-versioned-v2");
    let (_dir, plugins, path) = with_plugins_dir();
    let installed = plugins.join("libversioned.so");
    write(&path, &paced_fleet("BALANCED"));
    let (mut host, mut lines) = start_paced(Some(&plugins), &path);
    lines.wait_for("a decision with BALANCED", |l| {
        decided_with(l, "d", "BALANCED")
    });

    // Copied in: loaded; the job is then switched to it by an edit of the fleet file.
    install_plugin(&v1, &installed);
    let loaded = lines.wait_for("PluginLoaded", |l| event(l, "PluginLoaded").is_some());
    let message = event(&lines.seen[loaded], "PluginLoaded").unwrap_or_default();
    assert!(message.contains("fixture-versioned 1.0.0"), "{message}");
    write(&path, &paced_fleet("v"));
    lines.wait_for("ConfigReloaded", |l| event(l, "ConfigReloaded").is_some());
    // Version 1 answers the computed target.
    let first = lines.wait_for("a decision of version 1", |l| {
        !aligned_by(l, "d", "versioned").is_empty()
    });
    for (target, aligned) in aligned_by(&lines.seen[first], "d", "versioned") {
        assert_eq!(aligned, target, "version 1 keeps the target");
    }

    // Replaced by another build: used from the next decision on.
    install_plugin(&v2, &installed);
    let replaced = lines.wait_for("PluginReplaced", |l| event(l, "PluginReplaced").is_some());
    let message = event(&lines.seen[replaced], "PluginReplaced").unwrap_or_default();
    assert!(
        message.contains("1.0.0 -> fixture-versioned 2.0.0"),
        "{message}"
    );
    // The job's cycle that was running when the file was replaced may finish, and be
    // written, after the event, with version 1's answer; every cycle that starts later, so
    // at the latest the one after it, answers with version 2.
    let mut second = lines.wait_for("a decision after the replacement", |l| {
        !aligned_by(l, "d", "versioned").is_empty()
    });
    if aligned_by(&lines.seen[second], "d", "versioned")
        .iter()
        .all(|&(target, aligned)| aligned == target && aligned != 1)
    {
        second = lines.wait_for("a decision of version 2", |l| {
            !aligned_by(l, "d", "versioned").is_empty()
        });
    }
    for (_, aligned) in aligned_by(&lines.seen[second], "d", "versioned") {
        assert_eq!(aligned, 1, "version 2 answers one subtask");
    }

    // Removed: the job aligns with BALANCED, and says so, until the mode is back.
    std::fs::remove_file(&installed).expect("remove the plugin");
    lines.wait_for("PluginRemoved", |l| event(l, "PluginRemoved").is_some());
    let fallback = lines.wait_for("ModeFallback", |l| {
        l["type"] == "cycle"
            && l["data"]["events"]
                .as_array()
                .is_some_and(|es| es.iter().any(|e| e["reason"] == "ModeFallback"))
    });
    assert!(
        lines.seen[fallback]["data"]["events"]
            .to_string()
            .contains("versioned"),
        "the fallback names the missing mode: {}",
        lines.seen[fallback]
    );
    lines.wait_for("a decision with BALANCED after the removal", |l| {
        decided_with(l, "d", "BALANCED")
    });
    let after_removal = lines.seen.len();
    install_plugin(&v1, &installed);
    lines.wait_for("PluginLoaded again", |l| event(l, "PluginLoaded").is_some());
    let back = lines.wait_for("a decision of version 1 again", |l| {
        !aligned_by(l, "d", "versioned").is_empty()
    });
    assert!(back > after_removal);
    for (target, aligned) in aligned_by(&lines.seen[back], "d", "versioned") {
        assert_eq!(aligned, target, "version 1 is back");
    }

    signal(host.id(), "INT");
    let status = host.wait().expect("the host ends");
    // A simulated run cut short by Ctrl-C says so with its own status.
    assert_eq!(status.code(), Some(130), "{status:?}");
}

/// What the host made of the next reload: `Ok` with the `ConfigReloaded` message, `Err` with the
/// `ConfigRefused` one.
fn next_reload(lines: &mut Lines) -> Result<String, String> {
    let at = lines.wait_for("ConfigReloaded or ConfigRefused", |l| {
        event(l, "ConfigReloaded").is_some() || event(l, "ConfigRefused").is_some()
    });
    let line = &lines.seen[at];
    event(line, "ConfigReloaded").ok_or_else(|| event(line, "ConfigRefused").unwrap_or_default())
}

/// `paced_fleet(mode)` with `host` added to its `[host]` section, `config` to job `d`'s keys and,
/// with `second`, a second job `e` on BALANCED.
fn paced_fleet_with(mode: &str, host: &str, config: &str, second: bool) -> String {
    let mut text = paced_fleet(mode).replacen("[host]\n", &format!("[host]\n{host}"), 1);
    text.push_str(config);
    if second {
        let job = repo_root().join("examples/jobs/diurnal.toml");
        text.push_str(&format!(
            "\n[[jobs]]\nname = \"e\"\njob = {:?}\nduration = \"30d\"\n",
            job.display().to_string()
        ));
    }
    text
}

/// A cycle of `job` with an event of `reason` whose message holds `needle`.
fn cycle_event(line: &Value, job: &str, reason: &str, needle: &str) -> bool {
    cycle_of(line, job)
        && line["data"]["events"].as_array().is_some_and(|es| {
            es.iter().any(|e| {
                e["reason"] == reason && e["message"].as_str().is_some_and(|m| m.contains(needle))
            })
        })
}

/// Reloads while job `d`'s plugin mode is unavailable: SIGHUP on the unchanged file, then an
/// edit that adds job `e`. Both are applied, `e` starts, and `d` goes on aligning with BALANCED,
/// never with the plugin mode.
fn reload_while_unavailable(host: &Child, lines: &mut Lines, path: &Path, edited: &str) {
    signal(host.id(), "HUP");
    assert_eq!(
        next_reload(lines).as_deref(),
        Ok("configuration reloaded: no job changed"),
        "SIGHUP on the unchanged file"
    );
    write(path, edited);
    let applied = next_reload(lines);
    assert_eq!(applied.as_deref(), Ok("configuration reloaded: added e"));
    let reloaded = lines.seen.len();
    lines.wait_for("a cycle of the new job e", |l| cycle_of(l, "e"));
    for _ in 0..3 {
        lines.wait_for("d deciding with BALANCED after the reloads", |l| {
            decided_with(l, "d", "BALANCED")
        });
    }
    assert!(
        lines.seen[reloaded..]
            .iter()
            .all(|l| aligned_by(l, "d", "versioned").is_empty()),
        "d decided with the unavailable mode"
    );
}

#[test]
fn a_missing_plugin_mode_does_not_block_reloads() {
    let profile = build(&["fixture-versioned-v1"]);
    let v1 = plugin_file(&profile, "fixture-versioned-v1");
    let (_dir, plugins, path) = with_plugins_dir();
    let installed = plugins.join("libversioned.so");
    install_plugin(&v1, &installed);
    write(&path, &paced_fleet("v"));
    let (mut host, mut lines) = start_paced(Some(&plugins), &path);
    lines.wait_for("a decision of the plugin mode", |l| {
        !aligned_by(l, "d", "versioned").is_empty()
    });

    // The plugin file goes: d falls back to BALANCED.
    std::fs::remove_file(&installed).expect("remove the plugin");
    lines.wait_for("PluginRemoved", |l| event(l, "PluginRemoved").is_some());
    lines.wait_for("d falling back", |l| {
        cycle_event(l, "d", "ModeFallback", "versioned")
    });

    let edited = paced_fleet_with("v", "", "", true);
    reload_while_unavailable(&host, &mut lines, &path, &edited);

    // The file is back: d uses the mode again.
    install_plugin(&v1, &installed);
    lines.wait_for("PluginLoaded", |l| event(l, "PluginLoaded").is_some());
    lines.wait_for("a decision of the plugin mode again", |l| {
        !aligned_by(l, "d", "versioned").is_empty()
    });

    signal(host.id(), "INT");
    let status = host.wait().expect("the host ends");
    assert_eq!(status.code(), Some(130), "{status:?}");
}

#[test]
fn a_quarantined_plugin_mode_does_not_block_reloads() {
    let profile = build(&["fixture-versioned-v1", "fixture-versioned-v2"]);
    let v1 = plugin_file(&profile, "fixture-versioned-v1");
    let v2 = plugin_file(&profile, "fixture-versioned-v2");
    let (dir, plugins, path) = with_plugins_dir();
    let installed = plugins.join("libversioned.so");
    install_plugin(&v1, &installed);
    // While this file exists version 1 aborts in every `align`: its worker dies until the mode
    // is quarantined.
    let abort = dir.path().join("abort");
    std::fs::write(&abort, "").expect("the abort marker");
    let host_keys = "plugin-isolation = \"process\"\nplugin-call-timeout = \"5s\"\n";
    let config = format!(
        "\"scaling.alignment.mode.v.abort-while\" = {:?}\n",
        abort.display().to_string()
    );
    write(&path, &paced_fleet_with("v", host_keys, &config, false));
    let (mut host, mut lines) = start_paced(Some(&plugins), &path);
    lines.wait_for("the mode quarantined", |l| {
        cycle_event(l, "d", "ModeFallback", "is quarantined")
    });

    let edited = paced_fleet_with("v", host_keys, &config, true);
    reload_while_unavailable(&host, &mut lines, &path, &edited);
    lines.wait_for("d still saying its mode is quarantined", |l| {
        cycle_event(l, "d", "ModeFallback", "is quarantined")
    });

    // A fixed version of the plugin: d uses the mode again (version 2 answers one subtask).
    install_plugin(&v2, &installed);
    lines.wait_for("PluginReplaced", |l| event(l, "PluginReplaced").is_some());
    lines.wait_for("a decision of version 2", |l| {
        let aligned = aligned_by(l, "d", "versioned");
        !aligned.is_empty() && aligned.iter().all(|&(_, a)| a == 1)
    });

    signal(host.id(), "INT");
    let status = host.wait().expect("the host ends");
    assert_eq!(status.code(), Some(130), "{status:?}");
}

/// `GET url` with `Authorization: Bearer <token>`: the status (0 when nothing answered).
fn get_with_token(url: &str, token: &str) -> u16 {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(30)))
        .http_status_as_error(false)
        .build()
        .into();
    agent
        .get(url)
        .header("Authorization", &format!("Bearer {token}"))
        .call()
        .map_or(0, |r| r.status().as_u16())
}

#[test]
fn a_changed_api_token_takes_effect_and_a_restart_only_key_says_it_needs_a_restart() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let (old, new) = ("old-token-0123456789", "new-token-0123456789");
    let host = |token: &str, workers: u32| {
        format!("listen = \"127.0.0.1:{port}\"\napi-token = \"{token}\"\nworkers = {workers}\n")
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("fleet.toml");
    write(
        &path,
        &paced_fleet_with("BALANCED", &host(old, 2), "", false),
    );
    let (mut host_process, mut lines) = start_paced(None, &path);
    lines.wait_for("a decision", |l| decided_with(l, "d", "BALANCED"));
    let url = format!("http://127.0.0.1:{port}/api/v1/jobs");
    assert_eq!(get_with_token(&url, old), 200);
    assert_eq!(get_with_token(&url, new), 401);

    // A new token, and another number of workers (fixed when the host starts).
    write(
        &path,
        &paced_fleet_with("BALANCED", &host(new, 3), "", false),
    );
    signal(host_process.id(), "HUP");
    let message = next_reload(&mut lines).expect("the reload is applied");
    assert!(message.contains("`[host] api-token` replaced"), "{message}");
    assert!(
        message.contains("`[host] workers` needs a restart to take effect"),
        "{message}"
    );
    assert!(
        !message.contains(new),
        "the token is never printed: {message}"
    );
    assert_eq!(get_with_token(&url, old), 401, "the old token is refused");
    assert_eq!(get_with_token(&url, new), 200, "the new token is accepted");

    signal(host_process.id(), "INT");
    let status = host_process.wait().expect("the host ends");
    assert_eq!(status.code(), Some(130), "{status:?}");
}

/// Sets the permission bits of `path`.
#[cfg(unix)]
fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[cfg(unix)]
#[test]
fn plugins_refused_for_their_permissions_load_once_the_permissions_are_fixed() {
    let profile = build(&["fixture-versioned-v1", "bucket-align"]);
    let (dir, plugins, path) = with_plugins_dir();
    install_plugin(
        &plugin_file(&profile, "fixture-versioned-v1"),
        &plugins.join("libversioned.so"),
    );
    // bucket-align lives in a world-writable directory; the plugins directory links to it.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).expect("the shared directory");
    let target = shared.join("libbucket_align.so");
    install_plugin(&plugin_file(&profile, "bucket-align"), &target);
    std::os::unix::fs::symlink(&target, plugins.join("libbucket_align.so")).expect("link");
    chmod(&shared, 0o777);
    chmod(&plugins, 0o775);
    write(&path, &paced_fleet("BALANCED"));
    let (mut host, mut lines) = start_paced(Some(&plugins), &path);
    lines.wait_for("a decision", |l| decided_with(l, "d", "BALANCED"));

    // The plugins directory is fixed: noticed without a signal, as a change of the directory.
    chmod(&plugins, 0o755);
    let loaded = lines.wait_for("PluginLoaded", |l| event(l, "PluginLoaded").is_some());
    let message = event(&lines.seen[loaded], "PluginLoaded").unwrap_or_default();
    assert!(message.contains("fixture-versioned"), "{message}");

    // The linked library's directory is fixed (nothing in the plugins directory changes), then
    // SIGHUP: the refused link is checked again.
    chmod(&shared, 0o755);
    signal(host.id(), "HUP");
    let loaded = lines.wait_for("PluginLoaded of the link", |l| {
        event(l, "PluginLoaded").is_some_and(|m| m.contains("bucket-align"))
    });
    assert!(loaded > 0);

    signal(host.id(), "INT");
    let status = host.wait().expect("the host ends");
    assert_eq!(status.code(), Some(130), "{status:?}");
}
