//! A local Flink session cluster for the tests that drive a real one: the scripts of `flink/`
//! behind a guard that stops the cluster by PID when dropped, also when a test fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::certs::TestCa;
use crate::workspace_root;

/// The folder of the Flink scripts.
pub fn flink_dir() -> PathBuf {
    workspace_root().join("flink")
}

/// Panics unless the tests against a real cluster are asked for with `FLOWSCALE_FLINK_E2E=1`.
///
/// Those tests are `#[ignore]`d, so they only run when asked for (`--ignored`, or by name); the
/// variable is the second key, because they fetch about 330 MB and start two JVMs. Without it
/// they fail, saying what is missing: a test that returns early would be counted as passed
/// without having tested anything.
pub fn require_enabled() {
    let value = std::env::var("FLOWSCALE_FLINK_E2E");
    if value.as_deref() != Ok("1") {
        panic!(
            "this test drives a real Flink cluster and needs FLOWSCALE_FLINK_E2E=1 (found {}); \
             it fetches about 330 MB once and needs Java 17, pip, unzip and curl (see \
             flink/README.md)",
            match &value {
                Ok(v) => format!("FLOWSCALE_FLINK_E2E={v:?}"),
                Err(_) => "it unset".to_string(),
            }
        );
    }
}

/// Runs a script of `flink/` and returns the last line of its output; panics with its output
/// when it fails.
pub fn run_script(script: &str, args: &[&str], envs: &[(&str, &str)]) -> String {
    let output = Command::new("bash")
        .arg(flink_dir().join(script))
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("running {script}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{script} {args:?} failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout.lines().last().unwrap_or_default().trim().to_string()
}

/// Held by a running [`Cluster`]: the clusters of one test process take turns, since they share
/// their loopback ports and two clusters at once would also skew each other's timings.
static ONE_CLUSTER_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A session cluster in a temporary folder, stopped by PID when dropped (also when the test
/// fails, after printing the tail of its logs). Only one runs at a time in a test process: a
/// second `start` waits until the first cluster is dropped.
pub struct Cluster {
    dir: tempfile::TempDir,
    /// The REST endpoint, e.g. `http://127.0.0.1:18081`.
    pub url: String,
    /// The folder of the REST API's TLS files (see [`rest_ssl`]) when it has TLS.
    ssl: Option<PathBuf>,
    /// Released after `drop` has stopped the cluster (fields drop after `Drop::drop`).
    _turn: MutexGuard<'static, ()>,
}

impl Cluster {
    /// Starts a cluster whose TaskManager has `slots` slots.
    pub fn start(slots: u32) -> Cluster {
        Cluster::start_with(slots, None)
    }

    /// Starts a cluster whose REST API is https with mutual TLS, from the files of `ssl` (made
    /// by [`rest_ssl`]).
    pub fn start_with_rest_ssl(slots: u32, ssl: &Path) -> Cluster {
        Cluster::start_with(slots, Some(ssl))
    }

    fn start_with(slots: u32, ssl: Option<&Path>) -> Cluster {
        // A test that failed while holding the turn poisons the lock; the cluster it held is
        // stopped all the same, so the turn is still good.
        let turn = ONE_CLUSTER_AT_A_TIME
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let dir = tempfile::Builder::new()
            .prefix("flowscale-flink-")
            .tempdir()
            .expect("temp dir");
        let path = dir.path().to_string_lossy().into_owned();
        // The guard exists before the start, so a failed start still stops what did start.
        let mut cluster = Cluster {
            dir,
            url: String::new(),
            ssl: ssl.map(Path::to_path_buf),
            _turn: turn,
        };
        let slots = slots.to_string();
        let mut envs = vec![("FLOWSCALE_FLINK_SLOTS", slots.clone())];
        envs.extend(cluster.ssl_env());
        let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        cluster.url = run_script("cluster.sh", &["start", &path], &envs);
        cluster
    }

    /// The environment of the `flink/` scripts for this cluster (its TLS folder, if any).
    pub fn ssl_env(&self) -> Option<(&'static str, String)> {
        self.ssl.as_ref().map(|ssl| {
            (
                "FLOWSCALE_FLINK_REST_SSL",
                ssl.to_string_lossy().into_owned(),
            )
        })
    }

    /// GET `path` from the cluster's REST API with curl (not with flowscale's own client).
    pub fn get(&self, path: &str) -> Option<serde_json::Value> {
        let mut curl = Command::new("curl");
        curl.args(["-sf", "--max-time", "5"]);
        if let Some(ssl) = &self.ssl {
            curl.arg("--cacert")
                .arg(ssl.join("ca.pem"))
                .arg("--cert")
                .arg(ssl.join("client.pem"))
                .arg("--key")
                .arg(ssl.join("client.key"));
        }
        let output = curl.arg(format!("{}{path}", self.url)).output().ok()?;
        if !output.status.success() {
            return None;
        }
        serde_json::from_slice(&output.stdout).ok()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for log in ["jobmanager.log", "taskmanager.log"] {
                let text = std::fs::read_to_string(self.dir.path().join("log").join(log))
                    .unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(40).collect();
                eprintln!("--- tail of {log} ---");
                for line in tail.iter().rev() {
                    eprintln!("{line}");
                }
            }
        }
        let path = self.dir.path().to_string_lossy().into_owned();
        let _ = Command::new("bash")
            .arg(flink_dir().join("cluster.sh"))
            .args(["stop", &path])
            .status();
    }
}

/// Makes the TLS files of a REST API with mutual TLS in `dir` from `ca`: the server's
/// certificate for 127.0.0.1 in `rest.keystore.p12` (openssl), `ca`'s certificate in
/// `rest.truststore.p12` (keytool: Flink trusts the clients it signed), both with password
/// `flowscale`, and for curl `ca.pem` and a client certificate `client.pem` / `client.key`.
/// Returns `dir`.
pub fn rest_ssl(dir: &Path, ca: &TestCa) -> PathBuf {
    let (server_cert, server_key) = ca.issue("rest-server", &["127.0.0.1", "localhost"]);
    let (client_cert, client_key) = ca.issue("client", &["flowscale"]);
    let run = |program: &str, args: &[&str]| {
        let output = Command::new(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("running {program}: {e}"));
        assert!(
            output.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let path = |p: &Path| p.to_string_lossy().into_owned();
    let keystore = dir.join("rest.keystore.p12");
    run(
        "openssl",
        &[
            "pkcs12",
            "-export",
            "-in",
            &path(&server_cert),
            "-inkey",
            &path(&server_key),
            "-name",
            "rest",
            "-out",
            &path(&keystore),
            "-passout",
            "pass:flowscale",
        ],
    );
    let truststore = dir.join("rest.truststore.p12");
    run(
        "keytool",
        &[
            "-importcert",
            "-noprompt",
            "-alias",
            "ca",
            "-file",
            &path(ca.ca_pem()),
            "-keystore",
            &path(&truststore),
            "-storetype",
            "PKCS12",
            "-storepass",
            "flowscale",
        ],
    );
    for (from, to) in [
        (ca.ca_pem(), "ca.pem"),
        (client_cert.as_path(), "client.pem"),
        (client_key.as_path(), "client.key"),
    ] {
        if from != dir.join(to) {
            std::fs::copy(from, dir.join(to)).expect("copy a TLS file");
        }
    }
    dir.to_path_buf()
}

/// Polls `check` every half second until it gives a value; panics after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
