//! The two other plugin kinds, run as a user runs them: scaling executors (`step-limit`,
//! `change-freeze`, and an executor dropped in and replaced while `flowscale run` runs) and
//! metric evaluators (`slo-target`), on the embedded simulator; and what `flowscale plugins`
//! and `flowscale validate` say about them.

use std::path::Path;

use serde_json::Value;

use flowscale_tests::{build, listed_ids, plugin_file, plugins_dir};

use crate::harness::{Cli, repo_root};
use crate::reload::{Lines, event, install_plugin, signal, start_run, with_plugins_dir, write};
use crate::serve::{free_port, wait_for};

/// The example plugins of the three kinds' non-mode side, built, in a plugins directory.
pub(crate) fn kinds_plugins() -> tempfile::TempDir {
    let profile = build(&["step-limit", "change-freeze", "slo-target", "bucket-align"]);
    let files: Vec<_> = ["step-limit", "change-freeze", "slo-target", "bucket-align"]
        .iter()
        .map(|p| {
            let file = plugin_file(&profile, p);
            let name = file
                .file_name()
                .expect("a file name")
                .to_string_lossy()
                .into_owned();
            (file, name)
        })
        .collect();
    let refs: Vec<(&Path, &str)> = files
        .iter()
        .map(|(f, n)| (f.as_path(), n.as_str()))
        .collect();
    plugins_dir(&refs)
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// A fleet of one simulated job `d` from `examples/jobs/<job>.toml`, with `config` added to its
/// keys. Cooldown off, so that every decided operation is the one the cycle applies.
fn sim_fleet(job: &str, duration: &str, interval: &str, config: &str) -> String {
    let file = repo_root().join(format!("examples/jobs/{job}.toml"));
    format!(
        "[host]\ninterval = \"{interval}\"\n\n[defaults]\n\"metrics.window\" = \"3 min\"\n\
         \"stabilization.interval\" = \"1 min\"\n\"scale-down.interval\" = \"0\"\n\
         \"scaling-cooldown-period\" = \"0\"\n\n\
         [[jobs]]\nname = \"d\"\njob = {:?}\nduration = \"{duration}\"\n[jobs.config]\n{config}",
        file.display().to_string()
    )
}

/// The cycles of `job` in the JSON lines of a run.
fn cycles<'a>(lines: &'a [Value], job: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["type"] == "cycle" && l["data"]["job"] == job)
        .map(|l| &l["data"])
        .collect()
}

/// The veto of a cycle (`data` of a cycle line) whose stage is `Vetoed`.
fn veto(cycle: &Value) -> Option<&Value> {
    cycle["stage"].get("Vetoed")
}

/// A paced cycle line of job `d` that applied an operation.
fn applied(line: &Value) -> bool {
    line["type"] == "cycle" && line["data"]["job"] == "d" && line["data"]["operation"].is_object()
}

/// A paced cycle line of job `d` that an executor vetoed.
fn vetoed(line: &Value) -> bool {
    line["type"] == "cycle" && line["data"]["job"] == "d" && veto(&line["data"]).is_some()
}

/// `GET url` as JSON.
fn get_json(url: &str) -> Option<Value> {
    let mut response = ureq::get(url).call().ok()?;
    serde_json::from_str(&response.body_mut().read_to_string().ok()?).ok()
}

#[test]
fn an_executor_dropped_in_while_running_vetoes_and_its_replacement_applies() {
    let profile = build(&["fixture-versioned-v1", "fixture-versioned-v2"]);
    let v1 = plugin_file(&profile, "fixture-versioned-v1");
    let v2 = plugin_file(&profile, "fixture-versioned-v2");
    let (_dir, plugins, fleet) = with_plugins_dir();
    let installed = plugins.join("libversioned.so");
    let base_fleet = sim_fleet("diurnal", "30d", "1min", "");
    write(&fleet, &base_fleet);
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut host = start_run(&[
        "--pace".as_ref(),
        "600".as_ref(),
        "--listen".as_ref(),
        listen.as_ref(),
        "--plugins".as_ref(),
        plugins.as_os_str(),
        fleet.as_os_str(),
    ]);
    let mut lines = Lines::of(&mut host);
    lines.wait_for("an applied operation without executors", applied);

    // Dropped in, then named by the job: the next decision is vetoed, with the plugin's reason.
    install_plugin(&v1, &installed);
    lines.wait_for("PluginLoaded", |l| event(l, "PluginLoaded").is_some());
    let gated = format!(
        "{base_fleet}\"scaling.custom-executors\" = \"gate\"\n\
         \"scaling.custom-executor.gate.class\" = \"versioned-gate\"\n"
    );
    write(&fleet, &gated);
    let reloaded = lines.wait_for("ConfigReloaded", |l| event(l, "ConfigReloaded").is_some());
    let at = lines.wait_for("a vetoed cycle", vetoed);
    // The cycle in flight when the fleet was read again may still apply; none after the veto.
    assert!(at > reloaded);
    let cycle = &lines.seen[at]["data"];
    assert!(cycle["operation"].is_null(), "nothing applied: {cycle}");
    let v = veto(cycle).expect("vetoed");
    assert_eq!(v["instance"], "gate");
    assert_eq!(v["class"], "versioned-gate");
    assert_eq!(v["reason"], "version 1 vetoes every operation");
    // The event says the same (it may be printed before or after the cycle line).
    let said = |l: &Value| {
        event(l, "ScalingVetoed").is_some_and(|m| m.contains("version 1 vetoes every operation"))
            || l["data"]["events"].as_array().is_some_and(|es| {
                es.iter().any(|e| {
                    e["reason"] == "ScalingVetoed"
                        && e["message"].as_str().is_some_and(|m| m.contains("`gate`"))
                })
            })
    };
    if !lines.seen[reloaded..].iter().any(said) {
        lines.wait_for("ScalingVetoed", said);
    }
    // The API shows the chain and the veto.
    let job = wait_for(
        "the job's last veto in the API",
        std::time::Duration::from_secs(30),
        || {
            get_json(&format!("http://{listen}/api/v1/jobs/d"))
                .filter(|j| !j["custom"]["last_veto"].is_null())
        },
    );
    assert_eq!(job["custom"]["executors"][0]["instance"], "gate", "{job}");
    assert_eq!(job["custom"]["executors"][0]["class"], "versioned-gate");
    assert_eq!(job["custom"]["last_veto"]["instance"], "gate");
    assert_eq!(
        job["custom"]["last_veto"]["reason"],
        "version 1 vetoes every operation"
    );

    // Replaced by the build whose executor of the same id applies: the next decision is applied.
    install_plugin(&v2, &installed);
    let replaced = lines.wait_for("PluginReplaced", |l| event(l, "PluginReplaced").is_some());
    let after = lines.wait_for("an applied operation after the replacement", applied);
    assert!(after > replaced);
    // Every cycle that started after the replacement, so after the one in flight, applies.
    let next = lines.wait_for("the next decision", |l| applied(l) || vetoed(l));
    assert!(applied(&lines.seen[next]), "{}", lines.seen[next]);

    signal(host.id(), "INT");
    let status = host.wait().expect("the host ends");
    assert_eq!(status.code(), Some(130), "{status:?}");
}

#[test]
fn change_freeze_vetoes_while_its_flag_file_exists_and_applies_once_it_is_removed() {
    let plugins = kinds_plugins();
    let flags = tempfile::tempdir().expect("tempdir");
    let flag = flags.path().join("freeze");
    std::fs::write(&flag, "").expect("touch the flag");
    let (_dir, _empty, fleet) = with_plugins_dir();
    // The step limit is listed first but runs last (priority 100 after the freeze's -100): a
    // frozen cycle is vetoed with the freeze's reason, not the limit's.
    let config = format!(
        "\"scaling.custom-executors\" = \"steps;freeze\"\n\
         \"scaling.custom-executor.steps.class\" = \"step-limit\"\n\
         \"scaling.custom-executor.steps.max-step\" = \"100\"\n\
         \"scaling.custom-executor.freeze.class\" = \"change-freeze\"\n\
         \"scaling.custom-executor.freeze.flag-file\" = {:?}\n",
        path(&flag)
    );
    write(&fleet, &sim_fleet("diurnal", "30d", "1min", &config));
    let mut host = start_run(&[
        "--pace".as_ref(),
        "600".as_ref(),
        "--plugins".as_ref(),
        plugins.path().as_os_str(),
        fleet.as_os_str(),
    ]);
    let mut lines = Lines::of(&mut host);
    let first = lines.wait_for("a vetoed or applied cycle", |l| applied(l) || vetoed(l));
    assert!(vetoed(&lines.seen[first]), "{}", lines.seen[first]);
    let v = veto(&lines.seen[first]["data"]).expect("vetoed");
    assert_eq!(v["instance"], "freeze");
    assert_eq!(v["class"], "change-freeze");
    assert_eq!(
        v["reason"].as_str().unwrap_or_default(),
        format!("change-freeze: flag file {} exists", flag.display())
    );
    // A second decision while frozen: still vetoed.
    let second = lines.wait_for("another decision", |l| applied(l) || vetoed(l));
    assert!(vetoed(&lines.seen[second]), "{}", lines.seen[second]);

    std::fs::remove_file(&flag).expect("lift the freeze");
    let lifted = lines.seen.len();
    let at = lines.wait_for("an applied operation", applied);
    // At most the cycle in flight when the file went away is vetoed after it.
    let vetoes_after = lines.seen[lifted..at].iter().filter(|l| vetoed(l)).count();
    assert!(
        vetoes_after <= 1,
        "{vetoes_after} vetoes after the flag was removed"
    );

    signal(host.id(), "INT");
    let status = host.wait().expect("the host ends");
    assert_eq!(status.code(), Some(130), "{status:?}");
}

/// `flowscale run --simulated <duration> --json` of `fleet` (written to a temporary file).
fn run_simulated(plugins: &Path, fleet: &str, duration: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("fleet.toml");
    std::fs::write(&file, fleet).expect("write the fleet");
    let out = Cli::new([
        "run",
        &path(&file),
        "--plugins",
        &path(plugins),
        "--json",
        "--simulated",
        duration,
    ])
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json_lines()
}

#[test]
fn step_limit_caps_each_step_of_a_big_scale_up_at_max_step() {
    const MAX_STEP: u64 = 2;
    let plugins = kinds_plugins();
    let config = format!(
        "\"scaling.custom-executors\" = \"steps\"\n\
         \"scaling.custom-executor.steps.class\" = \"step-limit\"\n\
         \"scaling.custom-executor.steps.max-step\" = \"{MAX_STEP}\"\n"
    );
    let fleet = sim_fleet("keyed-step-spike", "2h", "1min", &config);
    let lines = run_simulated(plugins.path(), &fleet, "2h");
    let mut capped = 0;
    let mut operations = 0;
    for cycle in cycles(&lines, "d") {
        let Some(operation) = cycle["operation"].as_object() else {
            continue;
        };
        operations += 1;
        for v in cycle["vertices"].as_array().expect("vertices") {
            let (Some(current), Some(proposed)) = (v["current"].as_u64(), v["proposed"].as_u64())
            else {
                continue;
            };
            // The step-limit's rule with only max-step: |new - current| <= max-step, never
            // beyond the proposal.
            let expected = if proposed > current {
                proposed.min(current + MAX_STEP)
            } else {
                proposed.max(current.saturating_sub(MAX_STEP))
            };
            let id = v["vertex"].as_str().expect("vertex id");
            let got = operation.get(id).and_then(Value::as_u64).unwrap_or(current);
            assert_eq!(got, expected, "vertex {id} in {cycle}");
            if proposed > current + MAX_STEP {
                capped += 1;
            }
        }
    }
    assert!(operations > 0, "some operation was applied");
    assert!(
        capped > 0,
        "some proposed scale-up was larger than max-step"
    );
}

#[test]
fn slo_target_raises_a_lagging_sources_decision() {
    let plugins = kinds_plugins();
    // catch-up.duration (30 min by default) drains a lag L at L / 1800 s; an SLO of 1 min asks
    // L / 60 s, 30 times more, whenever the source has a lag. Nothing else differs between
    // the runs (same seed), so they decide the same until the first cycle where a source has
    // lag the default catch-up rate does not already cover: from there the SLO's run asks at
    // least as many subtasks for every vertex, and more for some.
    let without = sim_fleet("keyed-step-spike", "2h", "1min", "");
    let with = sim_fleet(
        "keyed-step-spike",
        "2h",
        "1min",
        "\"metrics.custom-evaluators\" = \"slo\"\n\
         \"metrics.custom-evaluator.slo.class\" = \"slo-target\"\n\
         \"metrics.custom-evaluator.slo.drain-within\" = \"1 min\"\n",
    );
    let a = run_simulated(plugins.path(), &without, "2h");
    let b = run_simulated(plugins.path(), &with, "2h");
    let (a, b) = (cycles(&a, "d"), cycles(&b, "d"));
    let targets = |c: &Value| -> Vec<(String, Option<u64>)> {
        c["vertices"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| (v["vertex"].to_string(), v["target"].as_u64()))
            .collect()
    };
    let first = a
        .iter()
        .zip(&b)
        .position(|(x, y)| targets(x) != targets(y))
        .expect("the SLO changes some decision");
    let (x, y) = (a[first], b[first]);
    assert_eq!(x["at_ms"], y["at_ms"], "the same cycle of both runs");
    let mut raised = false;
    for ((vertex, ta), (_, tb)) in targets(x).into_iter().zip(targets(y)) {
        if let (Some(ta), Some(tb)) = (ta, tb) {
            assert!(tb >= ta, "{vertex}: {tb} with the SLO, {ta} without");
            raised |= tb > ta;
        }
    }
    assert!(raised, "some target is higher with the SLO: {x}\n{y}");
}

#[test]
fn plugins_lists_every_kind_and_validate_names_the_executors_that_exist() {
    let plugins = kinds_plugins();
    let out = Cli::new(["plugins", "--plugins", &path(plugins.path()), "--json"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let listing = out.json();
    let files = &listing["files"];
    let entry = |plugin: &str| -> Value {
        files
            .as_array()
            .expect("a list")
            .iter()
            .find(|f| f["plugin"] == plugin)
            .cloned()
            .unwrap_or_else(|| panic!("{plugin} is listed: {files}"))
    };
    for (plugin, modes, evaluators, executors) in [
        ("step-limit", &[][..], &[][..], &["step-limit"][..]),
        ("change-freeze", &[], &[], &["change-freeze"]),
        ("slo-target", &[], &["slo-target"], &[]),
        ("bucket-align", &["bucket-align"], &[], &[]),
    ] {
        let e = entry(plugin);
        assert_eq!(e["status"], "loaded", "{e}");
        assert_eq!(listed_ids(&e, "modes"), modes, "{e}");
        assert_eq!(listed_ids(&e, "evaluators"), evaluators, "{e}");
        assert_eq!(listed_ids(&e, "executors"), executors, "{e}");
    }
    // The readable listing names each kind's ids too, an evaluator or executor on a line of
    // its own under its file.
    let text = Cli::new(["plugins", "--plugins", &path(plugins.path())]).run();
    assert_eq!(text.code, 0, "{}", text.stderr);
    for line in [
        "executor step-limit: ",
        "executor change-freeze: ",
        "evaluator slo-target: ",
    ] {
        assert!(
            text.stdout
                .lines()
                .any(|l| l.trim_start().starts_with(line)),
            "{line}: {}",
            text.stdout
        );
    }
    assert!(text.stdout.contains("bucket-align"), "{}", text.stdout);

    let dir = tempfile::tempdir().expect("tempdir");
    let fleet = dir.path().join("fleet.toml");
    let config = "\"scaling.custom-executors\" = \"steps\"\n\
                  \"scaling.custom-executor.steps.class\" = \"step-limits\"\n\
                  \"scaling.custom-executor.steps.max-step\" = \"2\"\n";
    std::fs::write(&fleet, sim_fleet("diurnal", "1h", "1min", config)).expect("write");
    let out = Cli::new([
        "validate",
        &path(&fleet),
        "--plugins",
        &path(plugins.path()),
    ])
    .run();
    assert_ne!(out.code, 0, "an unknown class is refused: {}", out.stdout);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(
        said.contains("scaling.custom-executor.steps.class"),
        "names the key: {said}"
    );
    assert!(
        said.contains("no loaded executor has implementation id `step-limits`"),
        "{said}"
    );
    assert!(
        said.contains("available executors: change-freeze, step-limit"),
        "names the executors that exist: {said}"
    );
}

/// The kinds fixture (a mode, two evaluators and three executors, `kinds-segv` among them),
/// built, in a plugins directory.
fn fixture_kinds_plugins() -> tempfile::TempDir {
    let profile = build(&["fixture-kinds"]);
    plugins_dir(&[(
        &plugin_file(&profile, "fixture-kinds"),
        "libfixture_kinds.so",
    )])
}

/// A fleet in `process` isolation on one example job: `steady`, whose executor `kinds-cap`
/// (from the fixture's file, with a cap far above any parallelism) applies every decided
/// operation as it is, and with `crash` a second job named `crash`, whose executor
/// `kinds-segv` (from the same file, so the same worker) writes through a null pointer on each
/// of its calls.
fn segv_fleet(crash: bool) -> String {
    let keyed = repo_root().join("examples/jobs/keyed-step-spike.toml");
    let mut text = format!(
        "[host]\nplugin-isolation = \"process\"\n\n[defaults]\n\"metrics.window\" = \"3 min\"\n\
         \"stabilization.interval\" = \"1 min\"\n\n\
         [[jobs]]\nname = \"steady\"\njob = {keyed:?}\n[jobs.config]\n\
         \"scaling.custom-executors\" = \"cap\"\n\
         \"scaling.custom-executor.cap.class\" = \"kinds-cap\"\n\
         \"scaling.custom-executor.cap.cap\" = \"100000\"\n",
        keyed = keyed.display().to_string()
    );
    if crash {
        text.push_str(&format!(
            "\n[[jobs]]\nname = \"crash\"\njob = {keyed:?}\n[jobs.config]\n\
             \"scaling.custom-executors\" = \"policy\"\n\
             \"scaling.custom-executor.policy.class\" = \"kinds-segv\"\n",
            keyed = keyed.display().to_string()
        ));
    }
    text
}

/// The messages of the events of `reason` in `cycle` (`data` of a cycle line).
fn cycle_events<'a>(cycle: &'a Value, reason: &str) -> Vec<&'a str> {
    cycle["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == reason)
        .map(|e| e["message"].as_str().unwrap_or_default())
        .collect()
}

#[test]
fn a_segfaulting_executor_in_process_isolation_vetoes_only_its_own_jobs_cycles() {
    let plugins = fixture_kinds_plugins();
    let alone = run_simulated(plugins.path(), &segv_fleet(false), "40min");
    // The host keeps running through every crash of the worker and ends the run normally
    // (`run_simulated` checks its exit code).
    let with_crash = run_simulated(plugins.path(), &segv_fleet(true), "40min");
    for job in ["steady", "crash"] {
        let summary = with_crash
            .iter()
            .find(|l| l["type"] == "summary" && l["data"]["job"] == job)
            .unwrap_or_else(|| panic!("{job} has a summary"));
        assert_eq!(summary["data"]["error"], Value::Null, "{summary}");
    }

    // The other job rescales exactly as it does without the crashing one, through the same
    // plugin file's worker, with no fault of its own.
    let expected = cycles(&alone, "steady");
    assert!(
        expected.iter().any(|c| c["operation"].is_object()),
        "steady scaled at least once"
    );
    assert_eq!(cycles(&with_crash, "steady"), expected);
    for cycle in &expected {
        assert!(cycle_events(cycle, "PluginFault").is_empty(), "{cycle}");
    }

    // The crashing job: every cycle that reached its executor is vetoed with a `PluginFault`
    // (the first one names the signal; repeated crashes then quarantine the executor, which
    // vetoes too), and nothing is ever applied for it.
    let crash = cycles(&with_crash, "crash");
    let vetoed: Vec<&&Value> = crash.iter().filter(|c| veto(c).is_some()).collect();
    assert!(
        !vetoed.is_empty(),
        "some cycle of crash reached its executor"
    );
    for cycle in &crash {
        assert!(
            !cycle["operation"].is_object(),
            "applied for crash: {cycle}"
        );
        assert!(
            cycle_events(cycle, "ScalingReport").is_empty(),
            "reported for crash: {cycle}"
        );
    }
    for cycle in &vetoed {
        let v = veto(cycle).expect("a veto");
        assert_eq!(v["instance"], "policy", "{cycle}");
        assert_eq!(v["class"], "kinds-segv", "{cycle}");
        // A fault, not the executor's own veto.
        assert!(cycle_events(cycle, "ScalingVetoed").is_empty(), "{cycle}");
    }
    // The first veto is the crash, said by its `PluginFault` event (later ones of the same
    // instance are rate-limited by `scaling.event.interval`).
    let first = vetoed[0];
    assert!(
        veto(first).expect("a veto")["reason"]
            .as_str()
            .is_some_and(|r| r.contains("killed by SIGSEGV")),
        "{first}"
    );
    let faults = cycle_events(first, "PluginFault");
    assert!(
        faults.iter().any(|m| m.contains("executor `policy`")
            && m.contains("killed by SIGSEGV")
            && m.contains("the scaling is vetoed")),
        "{first}"
    );
}

/// A fleet in `process` isolation with a call deadline of 300 ms, of two jobs on one example
/// job: `eval` and `exec`. With `slow`, `eval` has the fixture's evaluator `kinds-rate` and
/// `exec` its executor `kinds-cap` (a cap far above any parallelism), both sleeping 2 s per
/// call, far past the deadline; without, neither has one.
fn slow_fleet(slow: bool) -> String {
    let keyed = repo_root().join("examples/jobs/keyed-step-spike.toml");
    let keyed = keyed.display().to_string();
    let (eval, exec) = if slow {
        (
            "\"metrics.custom-evaluators\" = \"rate\"\n\
             \"metrics.custom-evaluator.rate.class\" = \"kinds-rate\"\n\
             \"metrics.custom-evaluator.rate.sleep-ms\" = \"2000\"\n",
            "\"scaling.custom-executors\" = \"cap\"\n\
             \"scaling.custom-executor.cap.class\" = \"kinds-cap\"\n\
             \"scaling.custom-executor.cap.cap\" = \"100000\"\n\
             \"scaling.custom-executor.cap.sleep-ms\" = \"2000\"\n",
        )
    } else {
        ("", "")
    };
    format!(
        "[host]\nplugin-isolation = \"process\"\nplugin-call-timeout = \"300ms\"\n\n\
         [defaults]\n\"metrics.window\" = \"3 min\"\n\"stabilization.interval\" = \"1 min\"\n\n\
         [[jobs]]\nname = \"eval\"\njob = {keyed:?}\n[jobs.config]\n{eval}\n\
         [[jobs]]\nname = \"exec\"\njob = {keyed:?}\n[jobs.config]\n{exec}"
    )
}

/// The vertices' targets and the operation of each cycle: what the evaluation decided.
fn decisions(cycles: &[&Value]) -> Vec<(Value, Value)> {
    cycles
        .iter()
        .map(|c| {
            let targets: Vec<Value> = c["vertices"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| serde_json::json!([v["vertex"], v["target"]]))
                .collect();
            (Value::from(targets), c["at_ms"].clone())
        })
        .collect()
}

#[test]
fn an_evaluator_and_an_executor_past_the_call_deadline_are_faults_in_process_isolation() {
    let plugins = fixture_kinds_plugins();
    let plain = run_simulated(plugins.path(), &slow_fleet(false), "40min");
    let slow = run_simulated(plugins.path(), &slow_fleet(true), "40min");

    // The evaluator's calls time out: each is a fault that contributes nothing, so the job
    // decides exactly what the built-in evaluation alone decides.
    let (with, without) = (cycles(&slow, "eval"), cycles(&plain, "eval"));
    assert!(
        without.iter().any(|c| c["operation"].is_object()),
        "eval scaled at least once"
    );
    assert_eq!(decisions(&with), decisions(&without));
    assert_eq!(
        with.iter().map(|c| &c["operation"]).collect::<Vec<_>>(),
        without.iter().map(|c| &c["operation"]).collect::<Vec<_>>()
    );
    let faults: Vec<&str> = with
        .iter()
        .flat_map(|c| cycle_events(c, "PluginFault"))
        .collect();
    assert!(
        faults.iter().any(|m| m.contains("evaluator `rate`")
            && m.contains("timed out after 300ms")
            && m.contains("keeps its own evaluation")),
        "{faults:?}"
    );

    // The executor's calls time out: every cycle that reached it is vetoed, nothing applied,
    // where the same job without the executor applied operations.
    let (with, without) = (cycles(&slow, "exec"), cycles(&plain, "exec"));
    assert!(
        without.iter().any(|c| c["operation"].is_object()),
        "exec scaled at least once without the executor"
    );
    assert!(with.iter().all(|c| !c["operation"].is_object()));
    let vetoed: Vec<&&Value> = with.iter().filter(|c| veto(c).is_some()).collect();
    assert!(!vetoed.is_empty(), "some cycle reached the executor");
    let first = veto(vetoed[0]).expect("a veto");
    assert_eq!(first["instance"], "cap", "{first}");
    assert!(
        first["reason"]
            .as_str()
            .is_some_and(|r| r.contains("timed out after 300ms")),
        "{first}"
    );
    assert!(
        cycle_events(vetoed[0], "PluginFault")
            .iter()
            .any(|m| m.contains("executor `cap`") && m.contains("the scaling is vetoed")),
        "{}",
        vetoed[0]
    );
}
