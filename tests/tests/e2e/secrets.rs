//! Secrets stay secret: a fleet whose clusters carry a token and a user and password, rotated
//! and broken while `run` runs, and checked by `validate`; nothing the host prints (its log at
//! debug level, its `--json` events and reports, its errors) holds a secret.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::fake_flink::{FakeFlink, JOB_ID};
use crate::harness::{Cli, flowscale_bin};

const TOKEN: &str = "tok-first-7f3a9c1e5b";
const ROTATED: &str = "tok-second-2d8e4b6a0c";
const PASSWORD: &str = "pw-9b1d3f5a7c";
/// base64("flowscale:pw-9b1d3f5a7c"): what the basic header carries.
const BASIC: &str = "Zmxvd3NjYWxlOnB3LTliMWQzZjVhN2M=";

fn write(path: &Path, text: &str, mode: u32) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).expect("chmod");
    std::fs::rename(&tmp, path).expect("rename over");
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in [TOKEN, ROTATED, PASSWORD, BASIC] {
        assert!(
            !text.contains(secret),
            "{what} holds the secret {secret}:\n{text}"
        );
    }
}

#[test]
fn no_token_or_password_reaches_the_log_the_events_or_the_errors() {
    let fake = FakeFlink::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("prod.token");
    let basic = dir.path().join("lab.basic");
    write(&token, &format!("{TOKEN}\n"), 0o600);
    write(&basic, &format!("flowscale:{PASSWORD}\n"), 0o600);
    let fleet = dir.path().join("fleet.toml");
    std::fs::write(
        &fleet,
        format!(
            r#"[host]
interval = "300ms"

[clusters.prod]
rest = "{url}"
token-file = "prod.token"

[clusters.lab]
rest = "{url}"
basic-auth-file = "lab.basic"

[[jobs]]
name = "a"
engine = "flink"
cluster = "prod"
job-id = "{JOB_ID}"

[[jobs]]
name = "b"
engine = "flink"
cluster = "lab"
job-id = "{JOB_ID}"
"#,
            url = fake.url()
        ),
    )
    .expect("fleet");

    let mut child = Command::new(flowscale_bin())
        .args([
            "run",
            &fleet.display().to_string(),
            "--json",
            "--duration",
            "10s",
        ])
        .env("FLOWSCALE_LOG", "debug")
        .env_remove("FLOWSCALE_PLUGINS_DIR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run flowscale");
    // The output line by line, as it comes: each file change waits for what the host reports
    // (a loaded machine may take seconds to start the host; a change made before it read its
    // files would be no change to it).
    let (lines, seen) = std::sync::mpsc::channel::<String>();
    let stdout_pipe = child.stdout.take().expect("stdout");
    let stderr_pipe = child.stderr.take().expect("stderr");
    // The debug log is read all along, so that a full pipe never stalls the host.
    let log_reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut log = String::new();
        let _ = std::io::BufReader::new(stderr_pipe).read_to_string(&mut log);
        log
    });
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for line in std::io::BufReader::new(stdout_pipe).lines() {
            let Ok(line) = line else { break };
            all.push_str(&line);
            all.push('\n');
            let _ = lines.send(line);
        }
        all
    });
    let wait_for = |what: &str, matches: &dyn Fn(&str) -> bool| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match seen.recv_timeout(left) {
                Ok(line) if matches(&line) => return,
                Ok(_) => {}
                Err(_) => panic!("no {what} within 30 s"),
            }
        }
    };
    // A rotated token, then a new token file others may read (a rotation that forgot the mode;
    // the watch sees a new file, not a chmod alone): a reload, then a refused one.
    wait_for("first cycle of job a", &|l| {
        l.contains(r#""type":"cycle""#) && l.contains(r#""job":"a""#)
    });
    write(&token, &format!("{ROTATED}\n"), 0o600);
    wait_for("CredentialsReloaded", &|l| {
        l.contains("CredentialsReloaded")
    });
    write(&token, &format!("{TOKEN}\n"), 0o644);
    let status = child.wait().expect("flowscale ends");
    let stdout = reader.join().expect("the output reader");
    let stderr = log_reader.join().expect("the log reader");
    assert!(status.success(), "{stdout}\n{stderr}");
    let token_path = token.display().to_string();
    assert!(
        stdout.contains("CredentialsReloaded") && stdout.contains(&token_path),
        "the rotation is reported, naming the file:\n{stdout}"
    );
    assert!(
        stdout.contains("CredentialsRefused") && stdout.contains("chmod 600"),
        "the refused reload is reported with why:\n{stdout}"
    );
    assert!(
        stderr.contains("DEBUG"),
        "the log ran at debug level:\n{stderr}"
    );
    assert_no_secret("the --json output", &stdout);
    assert_no_secret("the log", &stderr);

    // `validate` and `run` refuse the readable file, naming it and not what it holds.
    for command in ["validate", "run"] {
        let out = Cli::new([command, &fleet.display().to_string()]).run();
        assert_ne!(out.code, 0, "{command}: {out:?}");
        assert!(
            out.stderr.contains(&format!("chmod 600 {token_path}"))
                || out.stdout.contains(&format!("chmod 600 {token_path}")),
            "{command}: {out:?}"
        );
        assert_no_secret(command, &format!("{}{}", out.stdout, out.stderr));
    }
}
