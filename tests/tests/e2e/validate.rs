//! `flowscale validate`: every problem at once, with file, line and key.

use crate::harness::{Cli, repo_root};

fn fixture(name: &str) -> String {
    repo_root()
        .join("tests/fixtures/bad-config")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn syntax_level_problems_are_reported_with_lines() {
    let out = Cli::new(["validate", &fixture("many-problems.toml")]).run();
    assert_eq!(out.code, 1);
    assert!(
        out.stdout
            .contains("many-problems.toml:3: host.interval: `soon` is not a duration"),
        "{}",
        out.stdout
    );
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

#[test]
fn a_valid_fleet_lists_each_job_with_its_mode_and_warns_about_typos() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("fleet.toml");
    std::fs::write(
        &file,
        "[[jobs]]\nname = \"a\"\njob = \"keyed.toml\"\n[jobs.config]\n\"job.autoscaler.scaling.parallelism-alignment.mode\" = \"EVENLY_SPREAD\"\n\"utilisation.target\" = 0.5\n\n[[jobs]]\nname = \"b\"\njob = \"keyed.toml\"\n",
    )
    .expect("write");
    let out = Cli::new(["validate", "--json", &file.display().to_string()]).run();
    assert_eq!(out.code, 0, "{}", out.stdout);
    let report = out.json();
    assert_eq!(report["jobs"][0]["mode"], "EVENLY_SPREAD");
    assert_eq!(report["jobs"][1]["mode"], "BALANCED");
    let warning = report["warnings"][0].as_str().expect("a warning");
    assert!(
        warning.contains("fleet.toml:6") && warning.contains("did you mean `utilization.target`"),
        "{warning}"
    );
}
