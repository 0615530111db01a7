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

    let child = Command::new(flowscale_bin())
        .args([
            "run",
            &fleet.display().to_string(),
            "--json",
            "--duration",
            "4s",
        ])
        .env("FLOWSCALE_LOG", "debug")
        .env_remove("FLOWSCALE_PLUGINS_DIR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run flowscale");
    // A rotated token, then a new token file others may read (a rotation that forgot the mode;
    // the watch sees a new file, not a chmod alone): a reload, then a refused one.
    std::thread::sleep(Duration::from_millis(1200));
    write(&token, &format!("{ROTATED}\n"), 0o600);
    std::thread::sleep(Duration::from_millis(1200));
    write(&token, &format!("{TOKEN}\n"), 0o644);
    let out = child.wait_with_output().expect("flowscale ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
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
