//! The shared database over TLS: a PostgreSQL of its own per test (`.ci/postgres.sh start-tls`)
//! that takes only TLS on TCP, with a password and a client certificate, its certificates made
//! by a [`TestCa`] at test time. Three hosts share a fleet with `sslmode=verify-full` and the
//! password from a password file, and `flowscale status` reads it; a wrong root, a wrong name
//! and a server without TLS fail with one clear line; renewed client certificates are taken by
//! the next connection, and unusable ones are refused while the link goes on.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use flowscale_tests::certs::{TestCa, write_private};
use postgres::{Client, NoTls};
use serde_json::Value;

use super::{Host, owners, wait_for, write_fleet_of};
use crate::fake_flink::FakeFlink;
use crate::harness::flowscale_bin;

/// The role's password: it must never appear in anything flowscale prints.
const PASSWORD: &str = "Pg-Pass-7f3e9c1d-never-printed";

/// A PostgreSQL cluster with TLS on, stopped when dropped.
struct TlsServer {
    /// The cluster's directory (its Unix socket is there).
    dir: PathBuf,
    port: u16,
    /// The CA of the server's and the clients' certificates.
    ca: TestCa,
    /// The client certificate and key the hosts present.
    client: (PathBuf, PathBuf),
    /// The password file the hosts read (`PGPASSFILE`).
    pgpass: PathBuf,
    /// The test's files.
    files: tempfile::TempDir,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/postgres.sh")
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

impl TlsServer {
    /// Starts a cluster whose server certificate names `localhost` only (not 127.0.0.1), so
    /// that `verify-full` to 127.0.0.1 is refused while `verify-ca` is not.
    fn start() -> TlsServer {
        let files = tempfile::tempdir().expect("tempdir");
        let ca = TestCa::new(files.path(), "pg");
        let tls = files.path().join("server-files");
        std::fs::create_dir(&tls).expect("dir");
        let server = TestCa::issue(&ca, "server", &["localhost"]);
        std::fs::copy(&server.0, tls.join("server.pem")).expect("copy");
        std::fs::copy(&server.1, tls.join("server.key")).expect("copy");
        std::fs::copy(ca.ca_pem(), tls.join("ca.pem")).expect("copy");
        write_private(&tls.join("password"), PASSWORD);
        let client = ca.issue("client", &["flowscale"]);
        let pgpass = files.path().join("pgpass");
        write_private(&pgpass, &format!("*:*:*:flowscale:{PASSWORD}\n"));
        let port = free_port();
        let out = Command::new("bash")
            .arg(script())
            .arg("start-tls")
            .arg(port.to_string())
            .arg(&tls)
            .output()
            .expect("run .ci/postgres.sh");
        assert!(
            out.status.success(),
            "start-tls: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let dir = PathBuf::from(stdout.lines().next().expect("the cluster's directory"));
        TlsServer {
            dir,
            port,
            ca,
            client,
            pgpass,
            files,
        }
    }

    /// A connection over the cluster's Unix socket (trusted, no TLS): the test's own view.
    fn admin(&self, db: &str) -> Client {
        postgres::Config::new()
            .host_path(&self.dir)
            .port(self.port)
            .user("flowscale")
            .dbname(db)
            .connect(NoTls)
            .expect("the Unix socket accepts the test")
    }

    /// A new database `name`.
    fn database(&self, name: &str) {
        self.admin("flowscale")
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("a database");
    }

    /// The URL of database `db` at `host` with `params` (`sslmode=...&...`).
    fn url(&self, host: &str, db: &str, params: &str) -> String {
        format!("postgres://flowscale@{host}:{}/{db}?{params}", self.port)
    }

    /// `verify-full` to `localhost` with this server's root and the client certificate.
    fn verify_full(&self, db: &str) -> String {
        let (cert, key) = &self.client;
        self.url(
            "localhost",
            db,
            &format!(
                "sslmode=verify-full&sslrootcert={}&sslcert={}&sslkey={}",
                self.ca.ca_pem().display(),
                cert.display(),
                key.display()
            ),
        )
    }

    /// The environment of a flowscale process: the password file, nothing else of PostgreSQL.
    fn env(&self) -> Vec<(&'static str, &OsStr)> {
        vec![("PGPASSFILE", self.pgpass.as_os_str())]
    }

    /// A connection to `db` once one of `hosts` created the schema there (over TLS).
    fn schema(&self, db: &str, hosts: &[Host]) -> Client {
        let started = Instant::now();
        loop {
            let mut client = self.admin(db);
            if client
                .query_one("SELECT count(*) FROM flowscale_leases", &[])
                .is_ok()
            {
                return client;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "no host created the schema over TLS: {}",
                hosts.iter().map(Host::output).collect::<String>()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Ends every session that came over TCP (the hosts'), so that they connect again: how many
    /// there were, once there is one (waiting up to 10 s for the hosts to reconnect).
    fn drop_host_sessions(&self) -> usize {
        let started = Instant::now();
        loop {
            let rows = self
                .admin("flowscale")
                .query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE client_addr IS NOT NULL AND pid <> pg_backend_pid()",
                    &[],
                )
                .expect("terminate");
            if !rows.is_empty() || started.elapsed() > Duration::from_secs(10) {
                return rows.len();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(&self.dir)
            .status();
        let _ = &self.files;
    }
}

/// Runs `flowscale status FLEET --json` with `envs`: its exit code, stdout and stderr.
fn status(fleet: &Path, envs: &[(&str, &OsStr)]) -> (Option<i32>, String, String) {
    let out = Command::new(flowscale_bin())
        .arg("status")
        .arg(fleet)
        .arg("--json")
        .env_remove("FLOWSCALE_LOG")
        .env_remove("PGPASSWORD")
        .env_remove("PGPASSFILE")
        .envs(envs.iter().copied())
        .output()
        .expect("run flowscale status");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fleet of one job (on an engine nothing answers) over `url`, for `status`.
fn status_fleet(dir: &Path, name: &str, url: &str) -> PathBuf {
    write_fleet_of(dir, name, url, (2000, 500), &[("j0", "http://127.0.0.1:1")])
}

#[test]
#[ignore = "needs PostgreSQL (Debian's postgresql package; .ci/run installs it)"]
fn three_hosts_share_a_fleet_over_verify_full_tls_with_the_password_from_a_password_file() {
    let server = TlsServer::start();
    server.database("fs_tls_hosts");
    let url = server.verify_full("fs_tls_hosts");
    let fakes: Vec<FakeFlink> = (0..3).map(|_| FakeFlink::start()).collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let jobs: Vec<(String, String)> = fakes
        .iter()
        .enumerate()
        .map(|(i, f)| (format!("j{i}"), f.url()))
        .collect();
    let jobs: Vec<(&str, &str)> = jobs.iter().map(|(n, r)| (n.as_str(), r.as_str())).collect();
    let env = server.env();
    let hosts: Vec<Host> = ["h0", "h1", "h2"]
        .iter()
        .map(|id| {
            let fleet = write_fleet_of(dir.path(), id, &url, (2000, 500), &jobs);
            Host::start_with(&fleet, id, &env)
        })
        .collect();
    let mut db = server.schema("fs_tls_hosts", &hosts);
    let (spread, took) = wait_for(&mut db, Duration::from_secs(30), |o| {
        let mut per_host: BTreeMap<&str, usize> = BTreeMap::new();
        for (owner, _) in o.values() {
            *per_host.entry(owner.as_str()).or_default() += 1;
        }
        o.len() == 3 && per_host.len() == 3
    })
    .unwrap_or_else(|| {
        panic!(
            "three jobs spread over three hosts: {:?}\n{}",
            owners(&mut db),
            hosts.iter().map(Host::output).collect::<String>()
        )
    });
    eprintln!("over TLS, jobs spread one per host after {took:?}: {spread:?}");
    // Every session of the hosts is encrypted, with the client certificate.
    let sessions: Vec<(bool, Option<String>)> = db
        .query(
            "SELECT s.ssl, s.client_dn FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.client_addr IS NOT NULL",
            &[],
        )
        .expect("pg_stat_ssl")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert!(sessions.len() >= 3, "the hosts' sessions: {sessions:?}");
    assert!(
        sessions
            .iter()
            .all(|(ssl, dn)| *ssl && dn.as_deref() == Some("/CN=client")),
        "every session is TLS with the client certificate: {sessions:?}"
    );

    // `flowscale status` reads the owners over the same link.
    let fleet = dir.path().join("h0.toml");
    let (code, stdout, stderr) = status(&fleet, &env);
    assert_eq!(code, Some(0), "{stderr}");
    let answer: Value = serde_json::from_str(&stdout).expect("a JSON answer");
    let shown: BTreeMap<String, String> = answer["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .filter_map(|j| Some((j["name"].as_str()?.into(), j["owner"].as_str()?.into())))
        .collect();
    let held: BTreeMap<String, String> = owners(&mut db)
        .into_iter()
        .map(|(job, (owner, _))| (job, owner))
        .collect();
    assert_eq!(shown, held, "{answer}");
    assert_eq!(
        answer["hosts"].as_array().map(Vec::len),
        Some(3),
        "{answer}"
    );

    // The password is in the password file only: nothing any process printed shows it.
    std::thread::sleep(Duration::from_secs(1));
    for host in &hosts {
        let output = host.output();
        assert!(
            !output.contains(PASSWORD),
            "{} printed it: {output}",
            host.id
        );
    }
    assert!(!stdout.contains(PASSWORD) && !stderr.contains(PASSWORD));
}

#[test]
#[ignore = "needs PostgreSQL (Debian's postgresql package; .ci/run installs it)"]
fn a_wrong_root_a_wrong_name_and_missing_credentials_fail_with_one_clear_line() {
    let server = TlsServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let env = server.env();
    let (cert, key) = &server.client;
    let client = format!("sslcert={}&sslkey={}", cert.display(), key.display());
    let port = server.port;
    let error = |addr: &str, cause: &str| {
        format!(
            "error: cannot read the state database (`[host] state`): PostgreSQL state \
             (connect to {addr}:{port}): {cause}\n"
        )
    };
    let check = |name: &str, url: &str, envs: &[(&str, &OsStr)], expected: &str| {
        let fleet = status_fleet(dir.path(), name, url);
        let (code, stdout, stderr) = status(&fleet, envs);
        eprintln!("{name}: {}", stderr.trim_end());
        assert_eq!(code, Some(1), "{name}: {stderr}");
        assert_eq!(stdout, "", "{name}");
        assert_eq!(stderr, expected, "{name}");
        assert!(!stderr.contains(PASSWORD), "{name}");
    };

    // Another CA's root: the server cannot be verified.
    let other = TestCa::new(dir.path(), "other");
    check(
        "wrong-root",
        &server.url(
            "localhost",
            "flowscale",
            &format!(
                "sslmode=verify-full&sslrootcert={}&{client}",
                other.ca_pem().display()
            ),
        ),
        &env,
        &error(
            "localhost",
            "error performing TLS handshake: invalid peer certificate: UnknownIssuer",
        ),
    );
    // The right root, but the certificate names `localhost`, not 127.0.0.1: verify-full refuses,
    // verify-ca (the chain only) accepts.
    let root = format!("sslrootcert={}", server.ca.ca_pem().display());
    check(
        "wrong-name",
        &server.url(
            "127.0.0.1",
            "flowscale",
            &format!("sslmode=verify-full&{root}&{client}"),
        ),
        &env,
        &error(
            "127.0.0.1",
            "error performing TLS handshake: invalid peer certificate: certificate not valid \
             for name \"127.0.0.1\"; certificate is only valid for DnsName(\"localhost\")",
        ),
    );
    let fleet = status_fleet(
        dir.path(),
        "verify-ca",
        &server.url(
            "127.0.0.1",
            "flowscale",
            &format!("sslmode=verify-ca&{root}&{client}"),
        ),
    );
    let (code, _, stderr) = status(&fleet, &env);
    assert_eq!(
        code,
        Some(0),
        "verify-ca checks the chain, not the name: {stderr}"
    );
    // `require`: encryption, any certificate; but given a root certificate, libpq's special
    // case: the chain is checked as in verify-ca.
    let fleet = status_fleet(
        dir.path(),
        "require",
        &server.url(
            "127.0.0.1",
            "flowscale",
            &format!("sslmode=require&{client}"),
        ),
    );
    let (code, _, stderr) = status(&fleet, &env);
    assert_eq!(code, Some(0), "require takes any certificate: {stderr}");
    check(
        "require-with-root",
        &server.url(
            "127.0.0.1",
            "flowscale",
            &format!(
                "sslmode=require&sslrootcert={}&{client}",
                other.ca_pem().display()
            ),
        ),
        &env,
        &error(
            "127.0.0.1",
            "error performing TLS handshake: invalid peer certificate: UnknownIssuer",
        ),
    );
    // `prefer` (the default): a failed TLS attempt is tried once without TLS, as libpq does,
    // which this server refuses (TLS only); with good files it stays on TLS.
    check(
        "prefer-wrong-root",
        &server.url(
            "localhost",
            "flowscale",
            &format!(
                "sslmode=prefer&sslrootcert={}&{client}",
                other.ca_pem().display()
            ),
        ),
        &env,
        &error(
            "localhost",
            "over TLS: error performing TLS handshake: invalid peer certificate: UnknownIssuer; \
             without TLS: FATAL: no pg_hba.conf entry for host \"127.0.0.1\", user \"flowscale\", \
             database \"flowscale\", no encryption (28000)",
        ),
    );
    let fleet = status_fleet(
        dir.path(),
        "prefer",
        &server.url("localhost", "flowscale", &format!("{root}&{client}")),
    );
    let (code, _, stderr) = status(&fleet, &env);
    assert_eq!(code, Some(0), "prefer over TLS: {stderr}");
    // No password anywhere: the server's refusal, no password in it.
    check(
        "no-password",
        &server.verify_full("flowscale"),
        &[("PGPASSFILE", dir.path().join("no-such-file").as_os_str())],
        &error(
            "localhost",
            &format!(
                "the server asks for a password and there is none: not in the URL, not in \
                 PGPASSWORD, and no line of {} matches",
                dir.path().join("no-such-file").display()
            ),
        ),
    );
    // A wrong password in the URL: the server's message and SQLSTATE, not the password.
    let wrong = server
        .verify_full("flowscale")
        .replace("flowscale@", "flowscale:not-it@");
    check(
        "wrong-password",
        &wrong,
        &[],
        &error(
            "localhost",
            "FATAL: password authentication failed for user \"flowscale\" (28P01)",
        ),
    );
    // A client key others may read is refused before any connection, as libpq does.
    let loose = dir.path().join("loose.key");
    std::fs::copy(key, &loose).expect("copy");
    let loose_url = server.url(
        "localhost",
        "flowscale",
        &format!(
            "sslmode=verify-full&{root}&sslcert={}&sslkey={}",
            cert.display(),
            loose.display()
        ),
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    check(
        "loose-key",
        &loose_url,
        &env,
        &error(
            "localhost",
            &format!(
                "{} is readable by group or others (mode 644); run `chmod 600 {}`",
                loose.display(),
                loose.display()
            ),
        ),
    );
    // A password file others may read is ignored with a warning, as libpq does: no password.
    let pgpass = dir.path().join("pgpass-loose");
    std::fs::copy(&server.pgpass, &pgpass).expect("copy");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    let fleet = status_fleet(dir.path(), "loose-pgpass", &server.verify_full("flowscale"));
    let (code, _, stderr) = status(&fleet, &[("PGPASSFILE", pgpass.as_os_str())]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "password file ignored: {} is readable by group or others",
            pgpass.display()
        )) && stderr.contains("the server asks for a password and there is none"),
        "{stderr}"
    );
    assert!(!stderr.contains(PASSWORD), "{stderr}");
}

#[test]
#[ignore = "needs PostgreSQL: .ci/run starts one (FLOWSCALE_POSTGRES_URL)"]
fn require_against_a_server_without_tls_fails_clearly() {
    let base = std::env::var("FLOWSCALE_POSTGRES_URL")
        .expect("FLOWSCALE_POSTGRES_URL names a PostgreSQL server without TLS");
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _) = base
        .trim_start_matches("postgres://")
        .split_once('/')
        .expect("a URL with a database");
    let addr = server.rsplit_once('@').map_or(server, |(_, a)| a);
    let fleet = status_fleet(dir.path(), "require", &format!("{base}?sslmode=require"));
    let (code, stdout, stderr) = status(&fleet, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        format!(
            "error: cannot read the state database (`[host] state`): PostgreSQL state (connect \
             to {addr}): error performing TLS handshake: server does not support TLS\n"
        )
    );
    // `prefer` (libpq's default) goes on without TLS there.
    let fleet = status_fleet(dir.path(), "prefer", &format!("{base}?sslmode=prefer"));
    let (code, _, stderr) = status(&fleet, &[]);
    assert_eq!(code, Some(0), "{stderr}");
}

/// The `event` lines of `reason` printed so far by `host`, after waiting up to 15 s for one.
fn wait_for_event(host: &Host, reason: &str, after: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let events = host.host_events(reason);
        if events.len() > after || started.elapsed() > Duration::from_secs(15) {
            return events;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[ignore = "needs PostgreSQL (Debian's postgresql package; .ci/run installs it)"]
fn renewed_client_certificates_are_taken_by_the_next_connection_and_bad_ones_refused() {
    let server = TlsServer::start();
    server.database("fs_tls_rotate");
    let fake = FakeFlink::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let fleet = write_fleet_of(
        dir.path(),
        "h0",
        &server.verify_full("fs_tls_rotate"),
        (2000, 500),
        &[("j0", &fake.url())],
    );
    let mut env = server.env();
    env.push(("FLOWSCALE_LOG", OsStr::new("info")));
    let host = Host::start_with(&fleet, "h0", &env);
    let mut db = server.schema("fs_tls_rotate", std::slice::from_ref(&host));
    let held = |db: &mut Client| {
        wait_for(db, Duration::from_secs(20), |o| {
            o.get("j0").is_some_and(|(owner, _)| owner == "h0")
        })
    };
    held(&mut db).unwrap_or_else(|| panic!("h0 holds j0: {}", host.output()));

    // A renewed client certificate (a new key too) in place of the old one: the host's next
    // connection reads it and says so.
    let (cert, key) = &server.client;
    let before = std::fs::read(cert).expect("read");
    let renewed = server.ca.issue("client", &["flowscale"]);
    assert_eq!(&renewed, &server.client);
    assert_ne!(std::fs::read(cert).expect("read"), before);
    assert!(
        server.drop_host_sessions() > 0,
        "no session: {}",
        host.output()
    );
    let reloaded = wait_for_event(&host, "CredentialsReloaded", 0);
    assert_eq!(reloaded.len(), 1, "{}", host.output());
    let message = reloaded[0]["message"].as_str().expect("a message");
    assert!(message.contains(&cert.display().to_string()), "{message}");
    held(&mut db).unwrap_or_else(|| panic!("h0 holds j0 again: {}", host.output()));

    // A key others may read is refused: the host keeps the last good one and goes on. (Written
    // again first: what is watched is the file's identity, size and modification time.)
    std::fs::write(key, std::fs::read(key).expect("read")).expect("rewrite");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    assert!(
        server.drop_host_sessions() > 0,
        "no session: {}",
        host.output()
    );
    let refused = wait_for_event(&host, "CredentialsRefused", 0);
    assert_eq!(refused.len(), 1, "{}", host.output());
    let message = refused[0]["message"].as_str().expect("a message");
    assert!(
        message.contains(&format!("run `chmod 600 {}`", key.display())),
        "{message}"
    );
    assert_eq!(refused[0]["severity"], "Warning", "{}", refused[0]);
    std::thread::sleep(Duration::from_secs(1));
    let sessions: i64 = db
        .query_one(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.client_addr IS NOT NULL AND s.ssl",
            &[],
        )
        .expect("count")
        .get(0);
    assert!(
        sessions > 0,
        "the host connected again with the last good key"
    );
    held(&mut db).unwrap_or_else(|| panic!("h0 still holds j0: {}", host.output()));
    assert!(!host.output().contains(PASSWORD));
}
