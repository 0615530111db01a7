//! `flowscale plugins` over real plugin files: the example plugins load, and every kind of bad
//! file is refused with its own reason without disturbing the others.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use flowscale_tests::{build, plugin_file, plugins_dir};
use serde_json::Value;

const PACKAGES: &[&str] = &[
    "flowscale",
    "bucket-align",
    "slot-align",
    "plugin-template",
    "fixture-panicking",
    "fixture-out-of-range",
    "fixture-reserved-name",
    "fixture-foreign",
    "fixture-layout-mismatch",
    "fixture-panic-abort",
];

struct Built {
    profile: PathBuf,
}

impl Built {
    fn new() -> Built {
        Built {
            profile: build(PACKAGES),
        }
    }
    fn plugin(&self, package: &str) -> PathBuf {
        plugin_file(&self.profile, package)
    }
    fn flowscale(&self, args: &[&str]) -> Output {
        Command::new(self.profile.join("flowscale"))
            .args(args)
            .env_remove("FLOWSCALE_PLUGINS_DIR")
            .env("RUST_LOG", "error")
            .output()
            .expect("flowscale runs")
    }
    fn plugins_json(&self, dir: &Path) -> (Vec<Value>, Option<i32>) {
        let out = self.flowscale(&["plugins", "--plugins", path(dir), "--json"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let value: Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("--json prints JSON ({e}):\n{stdout}"));
        // Every file that reached the loader (loaded or refused by abi_stable) stays mapped.
        let reached = value["files"].as_array().map_or(0, |files| {
            files.iter().filter(|f| f["plugin"].is_string()).count()
        });
        assert!(
            value["versions_loaded"]
                .as_u64()
                .is_some_and(|n| n as usize <= reached),
            "{stdout}"
        );
        assert_eq!(value["version_limit"], 64, "{stdout}");
        let Value::Array(items) = value["files"].clone() else {
            panic!("--json prints the files as one array:\n{stdout}")
        };
        (items, out.status.code())
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

fn entry<'a>(items: &'a [Value], file_name: &str) -> &'a Value {
    items
        .iter()
        .find(|v| {
            v["file"]
                .as_str()
                .is_some_and(|f| f.ends_with(&format!("/{file_name}")))
        })
        .unwrap_or_else(|| panic!("{file_name} is listed: {items:#?}"))
}

fn reason(v: &Value) -> &str {
    v["reason"].as_str().unwrap_or_default()
}

/// The "refused:" lines of a `flowscale plugins` table.
fn refused_lines(table: &str) -> usize {
    table
        .lines()
        .filter(|l| l.trim_start().starts_with("refused:"))
        .count()
}

#[test]
fn the_example_plugins_are_listed_with_their_modes() {
    let built = Built::new();
    let dir = plugins_dir(&[
        (&built.plugin("bucket-align"), "libbucket_align.so"),
        (&built.plugin("slot-align"), "libslot_align.so"),
        (&built.plugin("plugin-template"), "libplugin_template.so"),
    ]);
    fs::write(dir.path().join("README.md"), "notes are ignored\n").unwrap();

    let (items, code) = built.plugins_json(dir.path());
    assert_eq!(code, Some(0), "{items:#?}");
    assert_eq!(items.len(), 3, "only plugin files are listed: {items:#?}");
    let bucket = entry(&items, "libbucket_align.so");
    assert_eq!(bucket["status"], "loaded");
    assert_eq!(bucket["reason"], Value::Null);
    assert_eq!(bucket["plugin"], "bucket-align");
    assert_eq!(bucket["version"], "0.1.0");
    assert_eq!(bucket["sdk_version"], "0.1.5");
    assert_eq!(bucket["modes"][0]["id"], "bucket-align");
    assert!(
        bucket["modes"][0]["description"]
            .as_str()
            .unwrap()
            .contains("custom partitioner")
    );
    assert_eq!(
        entry(&items, "libslot_align.so")["modes"][0]["id"],
        "slot-align"
    );
    assert_eq!(
        entry(&items, "libplugin_template.so")["modes"][0]["id"],
        "power-of-two"
    );

    // The table for people: one row per file, the modes with their descriptions under it.
    let out = built.flowscale(&["plugins", "--plugins", path(dir.path())]);
    assert_eq!(out.status.code(), Some(0));
    let table = String::from_utf8_lossy(&out.stdout);
    let header = table
        .lines()
        .find(|l| l.starts_with("FILE"))
        .expect("a header");
    for column in ["STATUS", "PLUGIN", "VERSION", "SDK", "MODES"] {
        assert!(header.contains(column), "{table}");
    }
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("libslot_align.so") && l.contains("loaded")),
        "{table}"
    );
    assert!(
        table.contains("    slot-align: aligns parallelism to whole workers"),
        "{table}"
    );
}

#[test]
fn every_kind_of_bad_file_is_refused_with_its_own_reason() {
    let built = Built::new();
    let dir = plugins_dir(&[
        (&built.plugin("slot-align"), "libslot_align.so"),
        (&built.plugin("fixture-panicking"), "libpanicking.so"),
        (&built.plugin("fixture-out-of-range"), "libout_of_range.so"),
        (&built.plugin("fixture-foreign"), "libforeign.so"),
        (&built.plugin("fixture-layout-mismatch"), "liblayout.so"),
        (&built.plugin("fixture-reserved-name"), "libreserved.so"),
        (&built.plugin("bucket-align"), "libbucket_a.so"),
        (&built.plugin("bucket-align"), "libbucket_b.so"),
        (&built.plugin("slot-align"), "libwritable.so"),
        (&built.plugin("fixture-panic-abort"), "libaborting.so"),
    ]);
    fs::write(dir.path().join("x.so"), "this is a text file\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let writable = dir.path().join("libwritable.so");
        fs::set_permissions(&writable, fs::Permissions::from_mode(0o666)).unwrap();
    }

    let (items, code) = built.plugins_json(dir.path());
    assert_eq!(code, Some(1), "a refusal shows in the exit code");
    assert_eq!(items.len(), 11, "{items:#?}");

    // Good plugins load next to the bad ones; a plugin that answers out of range or panics at
    // call time still loads (its answers are the alignment guard's business).
    for file in ["libslot_align.so", "libpanicking.so", "libout_of_range.so"] {
        let v = entry(&items, file);
        assert_eq!(v["status"], "loaded", "{v:#}");
    }

    let refused = |file: &str, needle: &str| {
        let v = entry(&items, file);
        assert_eq!(v["status"], "refused", "{v:#}");
        assert!(reason(v).contains(needle), "{file}: {}", reason(v));
        assert!(!reason(v).contains('\n'), "one line: {}", reason(v));
        v.clone()
    };
    let text = refused("x.so", "not a loadable shared library");
    assert_eq!(text["plugin"], Value::Null);
    refused("libforeign.so", "no flowscale manifest");
    let layout = refused("liblayout.so", "ABI check failed");
    assert!(reason(&layout).contains("new_mode"), "{}", reason(&layout));
    assert!(
        reason(&layout).len() < 400,
        "condensed: {}",
        reason(&layout)
    );
    assert_eq!(layout["plugin"], "fixture-layout-mismatch");
    refused(
        "libreserved.so",
        "`EVENLY_SPREAD` is a reserved built-in mode name",
    );
    let a = refused("libbucket_a.so", "also exported by");
    assert!(reason(&a).contains("libbucket_b.so"), "{}", reason(&a));
    let b = refused("libbucket_b.so", "also exported by");
    assert!(reason(&b).contains("libbucket_a.so"), "{}", reason(&b));
    refused("libaborting.so", "built with panic = \"abort\"");
    let writable = refused("libwritable.so", "anyone could inject code");
    assert!(
        reason(&writable).contains("chmod go-w"),
        "{}",
        reason(&writable)
    );

    // The table says the same, one "refused:" line per bad file.
    let out = built.flowscale(&["plugins", "--plugins", path(dir.path())]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(refused_lines(&table), 8, "{table}");

    // --verbose adds abi_stable's full report under the layout refusal.
    let out = built.flowscale(&["plugins", "--plugins", path(dir.path()), "--verbose"]);
    let verbose = String::from_utf8_lossy(&out.stdout);
    assert!(verbose.contains("Layout of expected type"), "{verbose}");
}

#[cfg(unix)]
#[test]
fn a_group_writable_plugins_directory_refuses_everything_in_it() {
    use std::os::unix::fs::PermissionsExt;
    let built = Built::new();
    let dir = plugins_dir(&[(&built.plugin("slot-align"), "libslot_align.so")]);
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o770)).unwrap();
    let (items, code) = built.plugins_json(dir.path());
    assert_eq!(code, Some(1));
    let v = entry(&items, "libslot_align.so");
    assert_eq!(v["status"], "refused");
    assert!(reason(v).starts_with("directory "), "{}", reason(v));
    assert!(
        reason(v).contains("anyone could inject code"),
        "{}",
        reason(v)
    );
}

#[test]
fn an_empty_or_missing_directory_lists_nothing() {
    let built = Built::new();
    let dir = tempfile::tempdir().unwrap();
    let (items, code) = built.plugins_json(dir.path());
    assert!(items.is_empty());
    assert_eq!(code, Some(0));
    let (items, code) = built.plugins_json(&dir.path().join("missing"));
    assert!(items.is_empty());
    assert_eq!(code, Some(0));
    let out = built.flowscale(&["plugins", "--plugins", path(dir.path())]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("no plugin files"));
}

/// A fleet of one simulated job (the diurnal example) on BALANCED, one decision a minute.
#[cfg(unix)]
fn balanced_fleet(dir: &Path) -> PathBuf {
    let job = flowscale_tests::workspace_root().join("examples/jobs/diurnal.toml");
    let fleet = dir.join("fleet.toml");
    fs::write(
        &fleet,
        format!(
            "[host]\ninterval = \"1min\"\n[[jobs]]\nname = \"diurnal\"\njob = {:?}\n",
            job.display().to_string()
        ),
    )
    .unwrap();
    fleet
}

#[cfg(unix)]
#[test]
fn a_plugin_in_a_group_writable_directory_is_refused_and_the_run_goes_on() {
    use std::os::unix::fs::PermissionsExt;
    let built = Built::new();
    let dir = plugins_dir(&[(&built.plugin("slot-align"), "libslot_align.so")]);
    let plugins = dir.path().join("plugins");
    fs::create_dir(&plugins).unwrap();
    fs::rename(
        dir.path().join("libslot_align.so"),
        plugins.join("libslot_align.so"),
    )
    .unwrap();
    fs::set_permissions(&plugins, fs::Permissions::from_mode(0o775)).unwrap();
    let fleet = balanced_fleet(dir.path());

    let out = built.flowscale(&[
        "run",
        path(&fleet),
        "--plugins",
        path(&plugins),
        "--simulated",
        "30min",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "the run goes on: {stderr}");
    let canonical = fs::canonicalize(&plugins).unwrap();
    let refusal = stderr
        .lines()
        .find(|l| l.contains("plugin refused"))
        .unwrap_or_else(|| panic!("the refusal is logged: {stderr}"));
    for needle in [
        format!(
            "directory `{}` is writable by group or others",
            canonical.display()
        ),
        "(mode 0775)".to_string(),
        format!("chmod go-w {}", canonical.display()),
        "libslot_align.so".to_string(),
    ] {
        assert!(refusal.contains(&needle), "{needle:?} in {refusal}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap_or_else(|| panic!("a summary: {stdout}"));
    // 0 to 30 min, one step a minute, both ends included.
    assert_eq!(summary["data"]["steps"], 31, "{summary}");
    assert_eq!(summary["data"]["mode"], "BALANCED", "{summary}");

    // After the fix the message gives, the same directory loads.
    fs::set_permissions(&plugins, fs::Permissions::from_mode(0o755)).unwrap();
    let (items, code) = built.plugins_json(&plugins);
    assert_eq!(code, Some(0), "{items:#?}");
    assert_eq!(entry(&items, "libslot_align.so")["status"], "loaded");
}

#[cfg(unix)]
#[test]
fn a_link_to_a_library_in_a_world_writable_directory_is_refused_naming_that_directory() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let built = Built::new();
    let dir = plugins_dir(&[
        (&built.plugin("slot-align"), "libslot_align.so"),
        (&built.plugin("bucket-align"), "libbucket_align.so"),
    ]);
    // The bucket-align library lives in a world-writable directory without the sticky bit:
    // anyone could replace it. The plugins directory only holds a link to it.
    let shared = tempfile::tempdir().unwrap();
    let target = shared.path().join("libbucket_align.so");
    fs::rename(dir.path().join("libbucket_align.so"), &target).unwrap();
    fs::set_permissions(shared.path(), fs::Permissions::from_mode(0o777)).unwrap();
    symlink(&target, dir.path().join("libbucket_align.so")).unwrap();

    let (items, code) = built.plugins_json(dir.path());
    assert_eq!(code, Some(1), "{items:#?}");
    assert_eq!(entry(&items, "libslot_align.so")["status"], "loaded");
    let link = entry(&items, "libbucket_align.so");
    assert_eq!(link["status"], "refused", "{link:#}");
    let shared_path = fs::canonicalize(shared.path()).unwrap();
    assert_eq!(
        reason(link),
        format!(
            "directory `{0}` is writable by group or others (mode 0777): anyone could inject \
             code into the host; run `chmod go-w {0}`",
            shared_path.display()
        )
    );
    // Refused before it was opened: nothing of its manifest is known.
    assert_eq!(link["plugin"], Value::Null);

    // The table gives the same reason under the link's row.
    let out = built.flowscale(&["plugins", "--plugins", path(dir.path())]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains(&format!("    refused: {}", reason(link))),
        "{table}"
    );

    // With the directory fixed, the link loads.
    fs::set_permissions(shared.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let (items, code) = built.plugins_json(dir.path());
    assert_eq!(code, Some(0), "{items:#?}");
    assert_eq!(entry(&items, "libbucket_align.so")["status"], "loaded");
}

#[cfg(unix)]
#[test]
fn a_dangling_link_and_a_link_loop_are_refused_one_line_each() {
    use std::os::unix::fs::symlink;
    let built = Built::new();
    let dir = plugins_dir(&[(&built.plugin("slot-align"), "libslot_align.so")]);
    symlink(
        dir.path().join("gone.so"),
        dir.path().join("libdangling.so"),
    )
    .unwrap();
    symlink("libloop_b.so", dir.path().join("libloop_a.so")).unwrap();
    symlink("libloop_a.so", dir.path().join("libloop_b.so")).unwrap();

    let (items, code) = built.plugins_json(dir.path());
    assert_eq!(
        code,
        Some(1),
        "a refusal shows in the exit code: {items:#?}"
    );
    assert_eq!(items.len(), 4, "{items:#?}");
    assert_eq!(entry(&items, "libslot_align.so")["status"], "loaded");
    let dangling = entry(&items, "libdangling.so");
    assert_eq!(dangling["status"], "refused", "{dangling:#}");
    assert!(
        reason(dangling).contains("dangling symbolic link") && reason(dangling).contains("gone.so"),
        "{}",
        reason(dangling)
    );
    for file in ["libloop_a.so", "libloop_b.so"] {
        let v = entry(&items, file);
        assert_eq!(v["status"], "refused", "{v:#}");
        assert!(reason(v).contains("symbolic link loop"), "{}", reason(v));
    }

    // The table: one "refused:" line each.
    let out = built.flowscale(&["plugins", "--plugins", path(dir.path())]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(refused_lines(&table), 3, "{table}");

    // A run logs one refusal each, and goes on.
    let fleet = balanced_fleet(dir.path());
    let out = built.flowscale(&[
        "run",
        path(&fleet),
        "--plugins",
        path(dir.path()),
        "--simulated",
        "5min",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for file in ["libdangling.so", "libloop_a.so", "libloop_b.so"] {
        let refusals = stderr
            .lines()
            .filter(|l| l.contains("plugin refused") && l.contains(&format!("/{file}")))
            .count();
        assert_eq!(refusals, 1, "{file}: {stderr}");
    }
}
