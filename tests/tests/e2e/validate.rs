//! `flowscale validate`: every problem at once, with file, line and key.

use crate::harness::{Cli, repo_root};

fn fixture(name: &str) -> String {
    repo_root()
        .join("tests/fixtures/bad-config")
        .join(name)
        .display()
        .to_string()
}

/// The four problems of `many-problems.toml`, one per section, each as `file:line: key` and
/// a part of its message saying what is wrong or what would be valid. The lines are those of
/// the fixture: `interval` on line 3, each job's offending key on lines 9, 16 and 22.
const MANY_PROBLEMS: [(&str, &str); 4] = [
    (
        "many-problems.toml:3: host.interval",
        "`soon` is not a duration",
    ),
    (
        "many-problems.toml:9: jobs[0].config.\"scaling.alignment.mode\"",
        "scaling.alignment.mode.bucket.class",
    ),
    (
        "many-problems.toml:16: jobs[1].config.\"scaling.alignment.mode.ADVANCED.scale-up\"",
        "BELOW_TARGET does not exist for scale-up",
    ),
    (
        "many-problems.toml:22: jobs[2].config.\"job.autoscaler.scaling.key-group.partitions.adjust.mode\"",
        "valid: EVENLY_SPREAD, MAXIMIZE_UTILISATION",
    ),
];

/// Asserts that `text` holds each of the problems `expected`, each on one line with its
/// location and message.
fn assert_problems(text: &str, expected: &[(&str, &str)]) {
    for (location, message) in expected {
        assert!(
            text.lines()
                .any(|l| l.contains(location) && l.contains(message)),
            "no error `{location}` ... `{message}` in:\n{text}"
        );
    }
}

#[test]
fn every_section_s_problem_is_reported_at_once() {
    let out = Cli::new(["validate", &fixture("many-problems.toml")]).run();
    assert_eq!(out.code, 1);
    assert_problems(&out.stdout, &MANY_PROBLEMS);
    assert!(
        out.stdout
            .contains(&format!("{} error(s)", MANY_PROBLEMS.len())),
        "{}",
        out.stdout
    );

    let out = Cli::new(["validate", "--json", &fixture("many-problems.toml")]).run();
    let report = out.json();
    assert_eq!(report["valid"], false);
    assert_eq!(
        report["errors"].as_array().map(Vec::len),
        Some(MANY_PROBLEMS.len()),
        "{report}"
    );
}

#[test]
fn run_refuses_what_validate_refuses_and_says_all_of_it() {
    let out = Cli::new(["run", "--once", &fixture("many-problems.toml")]).run();
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_problems(&out.stderr, &MANY_PROBLEMS);
    assert!(out.stdout.is_empty(), "nothing ran: {}", out.stdout);
}

#[test]
fn every_resolution_problem_is_reported_with_file_line_and_key() {
    let out = Cli::new(["validate", &fixture("resolution.toml")]).run();
    assert_eq!(out.code, 1, "{}", out.stdout);
    let text = &out.stdout;
    assert!(
        text.contains(
            "resolution.toml:6: jobs[0].config.\"scaling.alignment.mode\": job `unknown-custom`"
        ),
        "{text}"
    );
    assert!(
        text.contains("scaling.alignment.mode.bucket.class"),
        "{text}"
    );
    assert!(
        text.contains(
            "resolution.toml:13: jobs[1].config.\"scaling.alignment.mode.ADVANCED.scale-up\""
        ),
        "{text}"
    );
    assert!(
        text.contains("BELOW_TARGET does not exist for scale-up"),
        "{text}"
    );
    assert!(text.contains("resolution.toml:19: jobs[2].config.\"job.autoscaler.scaling.key-group.partitions.adjust.mode\""), "{text}");
    assert!(
        text.contains("valid: EVENLY_SPREAD, MAXIMIZE_UTILISATION"),
        "{text}"
    );
    assert!(text.contains("3 error(s)"), "{text}");

    let out = Cli::new(["validate", "--json", &fixture("resolution.toml")]).run();
    let report = out.json();
    assert_eq!(report["valid"], false);
    assert_eq!(report["errors"].as_array().map(Vec::len), Some(3));
}

/// A directory with the example job as `keyed.toml` and `fleet.toml` made of `jobs`.
fn fleet_with(jobs: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(
        repo_root().join("examples/jobs/keyed-step-spike.toml"),
        dir.path().join("keyed.toml"),
    )
    .expect("copy the example job");
    let file = dir.path().join("fleet.toml");
    std::fs::write(&file, jobs).expect("write");
    (dir, file.display().to_string())
}

#[test]
fn a_valid_fleet_lists_each_job_with_its_mode_and_ignores_flink_keys() {
    let (_dir, file) = fleet_with(
        "[[jobs]]\nname = \"a\"\njob = \"keyed.toml\"\n[jobs.config]\n\"job.autoscaler.scaling.parallelism-alignment.mode\" = \"EVENLY_SPREAD\"\n\"taskmanager.numberOfTaskSlots\" = 4\n\"state.backend.type\" = \"rocksdb\"\n\"job.autoscaler.memory.tuning.enabled\" = true\n\n[[jobs]]\nname = \"b\"\njob = \"keyed.toml\"\n",
    );
    let out = Cli::new(["validate", "--json", &file]).run();
    assert_eq!(out.code, 0, "{}", out.stdout);
    let report = out.json();
    assert_eq!(report["jobs"][0]["mode"], "EVENLY_SPREAD");
    assert_eq!(report["jobs"][1]["mode"], "BALANCED");
    // Plain Flink keys pass silently; an autoscaler key flowscale does not read is a warning.
    let warnings = report["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let warning = warnings[0].as_str().expect("text");
    assert!(
        warning.contains("fleet.toml:8")
            && warning.contains("job.autoscaler.memory.tuning.enabled"),
        "{warning}"
    );

    // --strict refuses each of the three keys flowscale does not read, on lines 6 to 8.
    let out = Cli::new(["validate", "--strict", &file]).run();
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_problems(
        &out.stdout,
        &[
            ("fleet.toml:6:", "taskmanager.numberOfTaskSlots"),
            ("fleet.toml:7:", "state.backend.type"),
            ("fleet.toml:8:", "job.autoscaler.memory.tuning.enabled"),
        ],
    );
    assert!(out.stdout.contains("3 error(s)"), "{}", out.stdout);
    let out = Cli::new(["run", "--once", "--strict", &file]).run();
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("state.backend.type"), "{}", out.stderr);
}

#[test]
fn a_misspelt_key_is_an_error_naming_the_known_key_in_validate_and_run() {
    let (_dir, file) = fleet_with(
        "[[jobs]]\nname = \"a\"\njob = \"keyed.toml\"\n[jobs.config]\n\"scaling.alignment.mod\" = \"EVENLY_SPREAD\"\n\"job.autoscaler.utilization.targt\" = 0.5\n",
    );
    let expected = [
        (
            "fleet.toml:5: jobs[0].config.\"scaling.alignment.mod\"",
            "did you mean `scaling.alignment.mode`?",
        ),
        (
            "fleet.toml:6: jobs[0].config.\"job.autoscaler.utilization.targt\"",
            "did you mean `job.autoscaler.utilization.target`?",
        ),
    ];
    let out = Cli::new(["validate", &file]).run();
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_problems(&out.stdout, &expected);
    let out = Cli::new(["run", "--once", &file]).run();
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_problems(&out.stderr, &expected);
}

#[test]
fn a_bad_api_token_is_reported_at_its_own_line_and_key() {
    let (_dir, file) = fleet_with(
        "[host]\ninterval = \"10s\"\nlisten = \"127.0.0.1:9464\"\napi-token = \"short\"\n\n[[jobs]]\nname = \"a\"\njob = \"keyed.toml\"\n",
    );
    let out = Cli::new(["validate", &file]).run();
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_problems(
        &out.stdout,
        &[(
            "fleet.toml:4: host.api-token",
            "api-token must be 16 to 256 visible ASCII characters",
        )],
    );
    assert!(!out.stdout.contains("host.listen"), "{}", out.stdout);

    // Without a token, another address than loopback is reported at `listen`.
    let (_dir, file) = fleet_with(
        "[host]\ninterval = \"10s\"\nlisten = \"0.0.0.0:9464\"\n\n[[jobs]]\nname = \"a\"\njob = \"keyed.toml\"\n",
    );
    let out = Cli::new(["validate", &file]).run();
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_problems(
        &out.stdout,
        &[("fleet.toml:3: host.listen", "is not a loopback address")],
    );
}

/// Runs `flowscale args...` without the right to write where the permission bits forbid it: as
/// root, without `CAP_DAC_OVERRIDE` (through `setpriv`, from util-linux), so that a read-only
/// directory is read-only for it too.
#[cfg(unix)]
fn run_unprivileged(args: &[&str]) -> crate::harness::Output {
    let mut command = if unsafe { libc::geteuid() } == 0 {
        let mut command = std::process::Command::new("setpriv");
        command
            .args(["--bounding-set", "-dac_override,-dac_read_search", "--"])
            .arg(crate::harness::flowscale_bin());
        command
    } else {
        std::process::Command::new(crate::harness::flowscale_bin())
    };
    let out = command
        .args(args)
        .env_remove("FLOWSCALE_PLUGINS_DIR")
        .env_remove("FLOWSCALE_LOG")
        .output()
        .expect("run flowscale (as root: through setpriv)");
    crate::harness::Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A fleet file whose `state-dir` is `state`, and `dir` made read-only in the same directory.
#[cfg(unix)]
fn fleet_with_read_only(state: &str, dir: &str) -> (tempfile::TempDir, String, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let (tmp, file) = fleet_with(&format!(
        "[host]\nstate-dir = \"{state}\"\n\n[[jobs]]\nname = \"a\"\njob = \"keyed.toml\"\n"
    ));
    let read_only = tmp.path().join(dir);
    std::fs::create_dir(&read_only).expect("mkdir");
    std::fs::set_permissions(&read_only, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    (tmp, file, read_only)
}

#[cfg(unix)]
#[test]
fn a_state_directory_run_cannot_write_is_an_error_of_validate() {
    let (_dir, file, state) = fleet_with_read_only("state", "state");

    // `run` cannot use it...
    let out = run_unprivileged(&["run", "--once", &file]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains(&state.display().to_string()),
        "{}",
        out.stderr
    );
    // ... and `validate` says so, naming the directory.
    let out = run_unprivileged(&["validate", &file]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_problems(
        &out.stdout,
        &[(&state.display().to_string(), "cannot write")],
    );

    // Not there yet, in a directory it cannot be created in: the same.
    let (_dir, file, locked) = fleet_with_read_only("locked/state", "locked");
    let out = run_unprivileged(&["run", "--once", &file]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let out = run_unprivileged(&["validate", &file]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_problems(
        &out.stdout,
        &[(
            &locked.join("state").display().to_string(),
            "cannot be created",
        )],
    );
}

#[test]
fn a_state_url_the_link_cannot_use_is_an_error_of_validate() {
    let (dir, file) = fleet_with(
        "[host]\nstate = \"postgres://flowscale@127.0.0.1:1/flowscale?sslmode=verify-full\"\n\n[[jobs]]\nname = \"a\"\njob = \"keyed.toml\"\n",
    );
    let out = Cli::new(["validate", &file]).run();
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_problems(
        &out.stdout,
        &[(
            "host.state",
            "`sslmode=verify-full` needs the root certificate of the server's CA",
        )],
    );
    // A client key others may read: refused by validate as by the link, before any connection.
    let ca = flowscale_tests::certs::TestCa::new(dir.path(), "pg");
    let (cert, key) = ca.issue("client", &["flowscale"]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    std::fs::write(
        &file,
        format!(
            "[host]\nstate = \"postgres://flowscale@127.0.0.1:1/flowscale?sslmode=verify-full&sslrootcert={}&sslcert={}&sslkey={}\"\n\n[[jobs]]\nname = \"a\"\njob = \"keyed.toml\"\n",
            ca.ca_pem().display(),
            cert.display(),
            key.display()
        ),
    )
    .expect("write");
    let out = Cli::new(["validate", &file]).run();
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_problems(
        &out.stdout,
        &[("host.state", &format!("run `chmod 600 {}`", key.display()))],
    );
}

#[test]
fn a_bad_excluded_period_or_zone_is_reported_at_its_line_and_key() {
    // Line 5: a cron with hour 25 after a valid range; line 6: a zone that does not exist.
    // Job b (lines 8-13) is valid: a cron && a range in Berlin, under two other spellings.
    let jobs = "[[jobs]]\nname = \"a\"\njob = \"keyed.toml\"\n[jobs.config]\n\"job.autoscaler.excluded.periods\" = \"09:00-10:00; 0 0 25 ? * MON-FRI\"\n\"job.autoscaler.excluded.periods.time-zone\" = \"Mars/Olympus\"\n\n[[jobs]]\nname = \"b\"\njob = \"keyed.toml\"\n[jobs.config]\n\"kubernetes.operator.job.autoscaler.excluded.periods\" = \"* * 9-16 ? * MON-FRI && 09:30-16:00\"\n\"excluded.periods.time-zone\" = \"Europe/Berlin\"\n";
    let (_dir, file) = fleet_with(jobs);
    let expected = [
        (
            "fleet.toml:5: jobs[0].config.\"job.autoscaler.excluded.periods\"",
            "`0 0 25 ? * MON-FRI`",
        ),
        (
            "fleet.toml:5: jobs[0].config.\"job.autoscaler.excluded.periods\"",
            "hours values must be between 0 and 23",
        ),
        (
            "fleet.toml:6: jobs[0].config.\"job.autoscaler.excluded.periods.time-zone\"",
            "`Europe/Berlin`",
        ),
    ];
    let out = Cli::new(["validate", &file]).run();
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_problems(&out.stdout, &expected);
    assert!(out.stdout.contains("2 error(s)"), "{}", out.stdout);
    let out = Cli::new(["run", "--once", &file]).run();
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_problems(&out.stderr, &expected);

    // Job b alone is valid.
    let valid = jobs
        .split("\n\n")
        .nth(1)
        .expect("the second job")
        .to_string();
    std::fs::write(&file, valid).expect("write");
    let out = Cli::new(["validate", &file]).run();
    assert_eq!(out.code, 0, "{}", out.stdout);
}
