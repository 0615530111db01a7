//! `flowscale run` serving HTTPS (`[host] tls-cert-file`, `tls-key-file`, `api-token-file`):
//! what an address others can reach demands, the start-up line, rotation while the host runs,
//! and that the token and the private key never leave the host, in anything it prints or
//! serves.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use flowscale_tests::certs::{TestCa, write_private};

use crate::harness::{Cli, flowscale_bin};
use crate::serve::{Killed, free_port, trust, wait_for};

/// A test directory: a CA, a server certificate for 127.0.0.1, a token file, and a fleet of one
/// simulated job whose `[host]` section the test writes.
struct Setup {
    dir: tempfile::TempDir,
    key: PathBuf,
    /// The key as it was issued, in use by the server.
    key_text: String,
    token_file: PathBuf,
}

const JOB: &str = "[[jobs]]\nname = \"a\"\njob = \"job.toml\"\n";

impl Setup {
    fn new(token: &str) -> Setup {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = TestCa::new(dir.path(), "e2e");
        let (_, key) = ca.issue("server", &["127.0.0.1"]);
        trust(ca.ca_pem());
        let token_file = dir.path().join("token");
        write_private(&token_file, &format!("{token}\n"));
        let examples = crate::harness::repo_root().join("examples/jobs/diurnal.toml");
        std::fs::copy(examples, dir.path().join("job.toml")).expect("the job");
        let key_text = std::fs::read_to_string(&key).expect("the key");
        Setup {
            dir,
            key,
            key_text,
            token_file,
        }
    }

    /// Writes `fleet.toml` with `host` as its `[host]` section.
    fn fleet(&self, host: &str) -> PathBuf {
        let fleet = self.dir.path().join("fleet.toml");
        std::fs::write(&fleet, format!("[host]\n{host}\n{JOB}")).expect("write the fleet");
        fleet
    }

    /// The `[host]` keys of HTTPS with the token file.
    fn https_keys(&self) -> String {
        "api-token-file = \"token\"\ntls-cert-file = \"server.pem\"\ntls-key-file = \"server.key\"\n"
            .to_string()
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

#[test]
fn an_address_others_can_reach_needs_tls_or_a_proxy_and_the_start_up_line_says_which() {
    let setup = Setup::new("a-token-from-a-file-0123");
    let port = free_port();
    let fleet_path = setup.path("fleet.toml");

    // In the file: refused where `listen` is written, by `validate` and `run` alike.
    let fleet = setup.fleet(&format!(
        "listen = \"0.0.0.0:{port}\"\napi-token-file = \"token\""
    ));
    let expected = format!(
        "{fleet_path}:2: host.listen: 0.0.0.0:{port} is not a loopback address: set `[host] \
         tls-cert-file` and `tls-key-file` so that the token and the answers cross the network \
         encrypted, or `listen-plaintext = true` when a TLS-terminating proxy is in front"
    );
    let fleet_arg = fleet.display().to_string();
    let out = Cli::new(["validate", &fleet_arg]).run();
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stdout.contains(&expected), "{}", out.stdout);
    let out = Cli::new(["run", "--once", &fleet_arg]).run();
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains(&expected), "{}", out.stderr);

    // On the command line.
    let fleet = setup.fleet("api-token-file = \"token\"");
    let fleet_arg = fleet.display().to_string();
    let listen = format!("0.0.0.0:{port}");
    let out = Cli::new(["run", "--once", "--listen", &listen, &fleet_arg]).run();
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "error: --listen: 0.0.0.0:{port} is not a loopback address: set `[host] tls-cert-file`"
        )),
        "{}",
        out.stderr
    );

    // A proxy in front: served in plaintext, and the start-up line says so.
    let fleet = setup.fleet(&format!(
        "listen = \"0.0.0.0:{port}\"\napi-token-file = \"token\"\nlisten-plaintext = true"
    ));
    let out = Cli::new(["run", "--once", &fleet.display().to_string()]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "serving metrics, API and dashboard on http://0.0.0.0:{port}/ in plaintext \
             (`listen-plaintext = true`: the TLS-terminating proxy in front must be the only way in)"
        )),
        "{}",
        out.stderr
    );

    // With TLS: https in the line.
    let fleet = setup.fleet(&format!(
        "listen = \"0.0.0.0:{port}\"\n{}",
        setup.https_keys()
    ));
    let out = Cli::new(["run", "--once", &fleet.display().to_string()]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "serving metrics, API and dashboard on https://0.0.0.0:{port}/"
        )),
        "{}",
        out.stderr
    );
}

#[test]
fn a_token_or_key_file_readable_by_others_is_refused_at_its_key_with_the_fix() {
    use std::os::unix::fs::PermissionsExt;
    let setup = Setup::new("a-token-from-a-file-0123");
    let fleet = setup.fleet(&setup.https_keys());
    for file in [&setup.token_file, &setup.key] {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    let out = Cli::new(["validate", &fleet.display().to_string()]).run();
    assert_eq!(out.code, 1, "{}", out.stdout);
    let (fleet, token, key) = (
        setup.path("fleet.toml"),
        setup.token_file.display(),
        setup.key.display(),
    );
    for line in [
        format!(
            "{fleet}:2: host.api-token-file: {token} is readable by group or others (mode 644); \
             run `chmod 600 {token}`"
        ),
        format!(
            "{fleet}:4: host.tls-key-file: {key} is readable by group or others (mode 644); run \
             `chmod 600 {key}`"
        ),
    ] {
        assert!(
            out.stdout.contains(&line),
            "{line}\nnot in:\n{}",
            out.stdout
        );
    }
}

/// A running `flowscale run`, its output going to files.
struct Running {
    _child: Killed,
    stdout: PathBuf,
    stderr: PathBuf,
}

fn run_to_files(fleet: &Path, dir: &Path, args: &[&str], name: &str) -> Running {
    let stdout = dir.join(format!("{name}.stdout"));
    let stderr = dir.join(format!("{name}.stderr"));
    let child = Command::new(flowscale_bin())
        .arg("run")
        .arg(fleet)
        .args(args)
        .stdout(Stdio::from(std::fs::File::create(&stdout).expect("stdout")))
        .stderr(Stdio::from(std::fs::File::create(&stderr).expect("stderr")))
        .spawn()
        .expect("flowscale runs");
    Running {
        _child: Killed(child),
        stdout,
        stderr,
    }
}

/// `method url` with `token` (if any) and a body: the status and the whole answer, headers
/// included.
fn request(method: &str, url: &str, token: Option<&str>, body: Option<&str>) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(30)))
        .http_status_as_error(false)
        .tls_config(crate::serve::tls_config())
        .build()
        .into();
    let auth = token.map(|t| format!("Bearer {t}"));
    let response = match (method, body) {
        ("POST", Some(body)) => {
            let mut request = agent.post(url).content_type("application/json");
            if let Some(auth) = &auth {
                request = request.header("Authorization", auth);
            }
            request.send(body.as_bytes())
        }
        _ => {
            let mut request = agent.get(url);
            if let Some(auth) = &auth {
                request = request.header("Authorization", auth);
            }
            request.call()
        }
    };
    match response {
        Ok(mut r) => {
            let headers = format!("{:?}", r.headers());
            let body = r.body_mut().read_to_string().unwrap_or_default();
            (r.status().as_u16(), format!("{headers}\n{body}"))
        }
        Err(err) => (0, err.to_string()),
    }
}

#[test]
fn the_token_and_the_private_key_never_leave_the_host() {
    let first = "first-secret-token-7f3a9c2e";
    let second = "second-secret-token-41bd08aa";
    let refused = "refused-secret-token-9e1c77d3";
    let inline = "inline-secret-token-5a02c6fe";
    let setup = Setup::new(first);
    let port = free_port();
    let base = format!("https://127.0.0.1:{port}");
    let fleet = setup.fleet(&format!(
        "listen = \"127.0.0.1:{port}\"\n{}",
        setup.https_keys()
    ));
    let running = run_to_files(
        &fleet,
        setup.dir.path(),
        &["--json", "--pace", "60"],
        "json",
    );
    wait_for("the server", Duration::from_secs(60), || {
        (request("GET", &format!("{base}/healthz"), Some(first), None).0 == 200).then_some(())
    });

    // Everything the server serves, with the token, with a wrong one and without.
    let mut served = Vec::new();
    let paths = [
        "/healthz",
        "/readyz",
        "/metrics",
        "/api/v1/jobs",
        "/api/v1/jobs/a",
        "/api/v1/jobs/a/events",
        "/api/v1/plugins",
        "/api/v1/openapi.json",
        "/",
        "/jobs/a",
        "/plugins",
        "/no-such-page",
    ];
    for path in paths {
        for token in [Some(first), Some(second), None] {
            let (status, answer) = request("GET", &format!("{base}{path}"), token, None);
            assert_ne!(status, 0, "{path}: {answer}");
            served.push(answer);
        }
    }
    let (status, answer) = request(
        "POST",
        &format!("{base}/api/v1/align"),
        Some(first),
        Some("{\"not\": \"a request\"}"),
    );
    assert!(status >= 400, "{answer}");
    served.push(answer);

    // Rotation: a new token is taken, a file readable by others is refused.
    write_private(&setup.token_file, second);
    wait_for("the new token", Duration::from_secs(30), || {
        (request("GET", &format!("{base}/api/v1/jobs"), Some(second), None).0 == 200).then_some(())
    });
    served.push(request("GET", &format!("{base}/api/v1/jobs"), Some(first), None).1);
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(&setup.token_file, refused).expect("write");
        std::fs::set_permissions(&setup.token_file, std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
    }
    // A key file changed into garbage, then the fleet file with a token written into it
    // beside the token file (refused).
    write_private(&setup.key, "not a key at all\n");
    std::fs::write(
        &fleet,
        format!(
            "[host]\nlisten = \"127.0.0.1:{port}\"\napi-token = \"{inline}\"\n{}\n{JOB}",
            setup.https_keys()
        ),
    )
    .expect("rewrite the fleet");
    wait_for("the refusals", Duration::from_secs(30), || {
        let printed = std::fs::read_to_string(&running.stdout).unwrap_or_default();
        (printed.matches("CredentialsRefused").count() >= 2 && printed.contains("ConfigRefused"))
            .then_some(())
    });
    assert_eq!(
        request("GET", &format!("{base}/api/v1/jobs"), Some(second), None).0,
        200,
        "the last good token and key stay in use"
    );
    drop(running);

    // The readable log and `validate`, on the same files.
    let readable = run_to_files(&fleet, setup.dir.path(), &["--once"], "readable");
    wait_for("the readable run", Duration::from_secs(60), || {
        std::fs::read_to_string(&readable.stderr)
            .ok()
            .filter(|t| t.contains("api-token-file"))
            .map(|_| ())
    });
    let validate = Cli::new(["validate", &fleet.display().to_string()]).run();

    let mut everything = served.join("\n");
    for name in [
        "json.stdout",
        "json.stderr",
        "readable.stdout",
        "readable.stderr",
    ] {
        everything
            .push_str(&std::fs::read_to_string(setup.dir.path().join(name)).unwrap_or_default());
    }
    everything.push_str(&validate.stdout);
    everything.push_str(&validate.stderr);
    // The paths were exercised: events of both kinds were printed.
    for said in [
        "CredentialsReloaded",
        "CredentialsRefused",
        "ConfigRefused",
        "chmod 600",
    ] {
        assert!(
            everything.contains(said),
            "{said} not printed:\n{everything}"
        );
    }
    for secret in [first, second, refused, inline] {
        assert!(
            !everything.contains(secret),
            "the token {secret} left the host:\n{everything}"
        );
    }
    // Nothing of the key that was in use: its base64 lines, and no PEM key at all.
    assert!(setup.key_text.contains("PRIVATE KEY"));
    for line in setup.key_text.lines().filter(|l| !l.starts_with("-----")) {
        assert!(
            !everything.contains(line),
            "a line of the private key was printed or served"
        );
    }
    // (The refusal of a key file names the PEM lines it looked for, followed by a comma: no
    // PEM section itself.)
    assert!(!everything.contains("PRIVATE KEY-----\n"));
}
