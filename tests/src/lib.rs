//! Helpers shared by the end-to-end tests in `tests/e2e` (and the host's plugin tests): they
//! build what a user would build and drive the `flowscale` binary the way a user does.
//!
//! Plugins are `cdylib`s that no test binary links, so `cargo test -p ...` alone would not
//! build them: [`build`] runs `cargo build` for the packages a test needs, into the same target
//! directory and profile as the running test, so the tests work from a clean clone whether the
//! whole workspace is being tested or a single package.

#![warn(missing_docs, unreachable_pub)]

pub mod certs;
pub mod flink;
pub mod scale_fleet;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The next candidate of [`refusing_address`], shared by the tests of one process.
static NEXT_REFUSING_PORT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);

/// A loopback address nothing listens on, where connections are refused until a test starts a
/// server there: a cluster that is down, then comes up at the address its clients were trying.
///
/// The port is below the system's ephemeral range (32768 and up on Linux), so that no server
/// of another test, which binds port 0, is given it meanwhile; and above the fixed ports the
/// CI's servers use (up to 19465).
pub fn refusing_address() -> std::net::SocketAddr {
    use std::sync::atomic::Ordering;
    const FIRST: u16 = 21_000;
    const COUNT: u16 = 11_000;
    // Spread over processes (test binaries run side by side), then one port after another.
    let start = u16::try_from(std::process::id() % u32::from(COUNT)).unwrap_or(0);
    let _ = NEXT_REFUSING_PORT.compare_exchange(0, start + 1, Ordering::SeqCst, Ordering::SeqCst);
    for _ in 0..COUNT {
        let offset = NEXT_REFUSING_PORT.fetch_add(1, Ordering::SeqCst) % COUNT;
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], FIRST + offset));
        if std::net::TcpListener::bind(addr).is_ok() {
            return addr;
        }
    }
    panic!("no free loopback port in {FIRST}..{}", FIRST + COUNT)
}

/// Serialises the builds of the tests of one process (cargo would only wait on its lock).
static BUILD: Mutex<()> = Mutex::new(());

/// `target/<profile>` of the running test binary (which lives in `target/<profile>/deps`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary has a path");
    let deps = exe.parent().expect("the test binary is in a directory");
    let dir = if deps.file_name().is_some_and(|n| n == "deps") {
        deps.parent().expect("deps has a parent")
    } else {
        deps
    };
    dir.to_path_buf()
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_path_buf()
}

/// Builds `packages` (all their targets of kind lib and bin) with the running test's target
/// directory and profile; panics with cargo's output if the build fails.
pub fn build(packages: &[&str]) -> PathBuf {
    let _guard = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    let profile_dir = profile_dir();
    let target_dir = profile_dir.parent().expect("target/<profile> has a parent");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root())
        .arg("build")
        .arg("--quiet")
        .env("CARGO_TARGET_DIR", target_dir);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    for package in packages {
        cmd.args(["-p", package]);
    }
    let output = cmd.output().expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo build {packages:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    profile_dir
}

/// The plugin file cargo produces for `package` in `profile_dir` (`lib<name>.so` on Linux).
pub fn plugin_file(profile_dir: &Path, package: &str) -> PathBuf {
    profile_dir.join(format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        package.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    ))
}

/// A fresh plugins directory (mode 0700) holding copies of the given plugin files, each under
/// its own file name.
///
/// The copies are made mode 0755 whatever the build's umask gave the originals: under a umask
/// of 002 cargo's output is group-writable, and the host refuses group-writable plugins.
pub fn plugins_dir(files: &[(&Path, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (source, name) in files {
        let copy = dir.path().join(name);
        std::fs::copy(source, &copy).expect("the plugin file is copied");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755))
                .expect("the copy's mode is set");
        }
    }
    dir
}

/// The implementation ids of one kind (`"modes"`, `"evaluators"` or `"executors"`) that a
/// plugin file's report lists, in order: `entry` is one file of `flowscale plugins --json`, or
/// a report serialized as the command does. A kind the entry does not list has none.
pub fn listed_ids(entry: &serde_json::Value, kind: &str) -> Vec<String> {
    entry[kind]
        .as_array()
        .into_iter()
        .flatten()
        .map(|object| object["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// `promtool check metrics` (Debian's `prometheus` package) on `text`, an exposition in the
/// Prometheus text format: `Err` with what promtool said when it refuses the text. Panics when
/// promtool cannot be run, naming the package to install.
pub fn promtool_check(text: &str) -> Result<(), String> {
    use std::io::Write;
    use std::process::Stdio;

    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run promtool ({e}): apt-get install prometheus"));
    // promtool reads all of its input before it writes anything: writing the whole text first
    // cannot wait on a full output pipe.
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(text.as_bytes())
        .expect("promtool reads its input");
    let output = child.wait_with_output().expect("promtool ends");
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "promtool check metrics failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}
