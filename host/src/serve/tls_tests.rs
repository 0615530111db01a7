//! Tests of HTTPS and of the files the server rotates: a real TLS client (rustls, trusting a
//! test CA made now), plain HTTP on the HTTPS port, a client that never says hello, renewed
//! certificates and changed token files taken in from the next connection on, and files that
//! cannot be used.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowscale_tests::certs::{TestCa, write_private};
use rustls::pki_types::{CertificateDer, ServerName};

use super::tls::HANDSHAKE_TIMEOUT;
use super::{Backend, FleetView, ServeConfig, ServeError, Server};
use crate::config::TlsFiles;
use crate::credentials::crypto_provider;
use crate::credentials::read_certificates;
use crate::events::{Event, EventReason};
use crate::plugins::PluginListing;

struct NoBackend;

impl Backend for NoBackend {
    fn plugins(&self) -> PluginListing {
        PluginListing::empty("/p".into())
    }
    fn align(&self, _: &[u8]) -> Result<serde_json::Value, serde_json::Value> {
        Err(serde_json::json!({"line": 1, "error": "none here"}))
    }
}

const TOKEN: &str = "tls-test-token-0123456789";

/// A test directory with a CA and a server certificate for 127.0.0.1.
struct Pki {
    dir: tempfile::TempDir,
    ca: TestCa,
    tls: TlsFiles,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = TestCa::new(dir.path(), "serve");
        let (cert, key) = ca.issue("server", &["127.0.0.1", "localhost"]);
        Pki {
            dir,
            ca,
            tls: TlsFiles { cert, key },
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Renews the server certificate as a deployment does: a new key and certificate written
    /// beside the old ones, then renamed over them.
    fn renew(&self) {
        let (cert, key) = self.ca.issue("renewed", &["127.0.0.1"]);
        std::fs::rename(key, &self.tls.key).expect("rename the key");
        std::fs::rename(cert, &self.tls.cert).expect("rename the certificate");
    }
}

fn start(config: &ServeConfig) -> Result<Server, ServeError> {
    Server::start(config, Arc::new(FleetView::new()), Arc::new(NoBackend))
}

fn tls_config(pki: &Pki, token_file: Option<PathBuf>) -> ServeConfig {
    ServeConfig {
        listen: "127.0.0.1:0".parse().expect("an address"),
        api_token: token_file.is_none().then(|| TOKEN.to_string()),
        api_token_file: token_file,
        tls: Some(pki.tls.clone()),
    }
}

/// One HTTPS request (`Connection: close`) trusting only `ca`: the certificate the server
/// presented, the status and the whole answer; `Err` when the handshake fails.
fn https(
    addr: SocketAddr,
    ca: &Path,
    path: &str,
    token: Option<&str>,
) -> std::io::Result<(CertificateDer<'static>, u16, String)> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in read_certificates(ca).expect("the CA") {
        roots.add(cert).expect("a CA certificate");
    }
    let config = rustls::ClientConfig::builder_with_provider(crypto_provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("127.0.0.1").expect("a name");
    let connection =
        rustls::ClientConnection::new(Arc::new(config), name).map_err(std::io::Error::other)?;
    let tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Connection: close\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        Ok(_) => {}
        // A peer that closes without close_notify: what was read is the whole answer.
        Err(err) if err.kind() == ErrorKind::UnexpectedEof && !answer.is_empty() => {}
        Err(err) => return Err(err),
    }
    let presented = stream
        .conn
        .peer_certificates()
        .and_then(|c| c.first())
        .expect("a certificate")
        .clone()
        .into_owned();
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((presented, status, text))
}

fn first_certificate(path: &Path) -> CertificateDer<'static> {
    read_certificates(path)
        .expect("a certificate")
        .swap_remove(0)
}

fn reasons(events: &[Event]) -> Vec<EventReason> {
    events.iter().map(|e| e.reason).collect()
}

#[test]
fn https_serves_the_api_the_metrics_and_the_dashboard() {
    let pki = Pki::new();
    let server = start(&tls_config(&pki, None)).expect("starts");
    assert!(server.tls());
    let addr = server.local_addr();
    for (path, wanted) in [
        ("/healthz", "ok"),
        ("/api/v1/jobs", "[]"),
        ("/metrics", "# TYPE flowscale_"),
        ("/", "<html"),
    ] {
        let (cert, status, answer) = https(addr, pki.ca.ca_pem(), path, Some(TOKEN))
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(status, 200, "{path}: {answer}");
        assert!(answer.contains(wanted), "{path}: {answer}");
        assert_eq!(cert, first_certificate(&pki.tls.cert));
    }
    // The token is still required over HTTPS.
    let (_, status, _) = https(addr, pki.ca.ca_pem(), "/api/v1/jobs", None).expect("https");
    assert_eq!(status, 401);
}

#[test]
fn a_client_trusting_another_ca_fails_its_handshake() {
    let pki = Pki::new();
    let other = TestCa::new(pki.dir.path(), "other");
    let server = start(&tls_config(&pki, None)).expect("starts");
    let err = https(server.local_addr(), other.ca_pem(), "/healthz", Some(TOKEN))
        .expect_err("an unknown issuer");
    assert!(err.to_string().contains("UnknownIssuer"), "{err}");
    // And the server carries on.
    assert!(
        https(
            server.local_addr(),
            pki.ca.ca_pem(),
            "/healthz",
            Some(TOKEN)
        )
        .is_ok()
    );
}

#[test]
fn plain_http_to_the_https_port_gets_a_400_that_says_to_use_https_and_is_closed() {
    let pki = Pki::new();
    let server = start(&tls_config(&pki, None)).expect("starts");
    let mut tcp = TcpStream::connect(server.local_addr()).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .expect("write");
    let mut answer = String::new();
    tcp.read_to_string(&mut answer)
        .expect("the server closes after its answer");
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(answer.contains("use https://"), "{answer}");
    // The answer is not the API's: no token was asked for, nothing of the fleet shown.
    assert!(!answer.contains("bearer"), "{answer}");
}

/// Waits until the server closes `tcp` (a read returns 0 or fails), at most `limit`.
fn closed_within(mut tcp: TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    tcp.set_read_timeout(Some(limit)).expect("timeout");
    let mut buffer = [0u8; 64];
    loop {
        match tcp.read(&mut buffer) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => continue,
            Err(err)
                if err.kind() == ErrorKind::WouldBlock || err.kind() == ErrorKind::TimedOut =>
            {
                return None;
            }
            Err(_) => return Some(started.elapsed()),
        }
    }
}

#[test]
fn a_client_that_never_finishes_its_handshake_loses_its_slot_at_the_deadline() {
    let pki = Pki::new();
    let server = start(&tls_config(&pki, None)).expect("starts");
    let addr = server.local_addr();
    // One that says nothing, one that starts a TLS record and stops.
    let silent = TcpStream::connect(addr).expect("connect");
    let mut partial = TcpStream::connect(addr).expect("connect");
    partial.write_all(&[0x16, 0x03, 0x01, 0x02]).expect("write");
    let limit = HANDSHAKE_TIMEOUT + Duration::from_secs(3);
    let (silent, partial) = std::thread::scope(|s| {
        let silent = s.spawn(|| closed_within(silent, limit));
        let partial = s.spawn(|| closed_within(partial, limit));
        (
            silent.join().expect("thread"),
            partial.join().expect("thread"),
        )
    });
    for (what, closed) in [("silent", silent), ("partial", partial)] {
        let after = closed.unwrap_or_else(|| panic!("the {what} client was never cut off"));
        assert!(
            after >= HANDSHAKE_TIMEOUT - Duration::from_millis(500),
            "the {what} client was cut off early, after {after:?}"
        );
    }
    // Meanwhile and after, others are served.
    assert!(https(addr, pki.ca.ca_pem(), "/healthz", Some(TOKEN)).is_ok());
}

#[test]
fn a_renewed_certificate_is_presented_from_the_next_connection_on_and_a_broken_one_is_passed_over()
{
    let pki = Pki::new();
    let server = start(&tls_config(&pki, None)).expect("starts");
    let addr = server.local_addr();
    let first = first_certificate(&pki.tls.cert);
    let (cert, ..) = https(addr, pki.ca.ca_pem(), "/healthz", Some(TOKEN)).expect("https");
    assert_eq!(cert, first);
    assert!(server.credential_events().is_empty(), "nothing changed yet");

    pki.renew();
    let renewed = first_certificate(&pki.tls.cert);
    assert_ne!(renewed, first);
    // No look by the host in between: the new connection itself sees the change.
    let (cert, status, _) = https(addr, pki.ca.ca_pem(), "/healthz", Some(TOKEN)).expect("https");
    assert_eq!((cert, status), (renewed.clone(), 200));
    let events = server.credential_events();
    assert_eq!(reasons(&events), [EventReason::CredentialsReloaded]);
    for file in [&pki.tls.cert, &pki.tls.key] {
        assert!(
            events[0].message.contains(&file.display().to_string()),
            "{}",
            events[0].message
        );
    }

    // A key that is not PEM: refused, the renewed pair stays in use.
    write_private(&pki.tls.key, "not a key\n");
    let events = server.credential_events();
    assert_eq!(reasons(&events), [EventReason::CredentialsRefused]);
    assert!(
        events[0].message.contains("no PEM private key"),
        "{}",
        events[0].message
    );
    let (cert, ..) = https(addr, pki.ca.ca_pem(), "/healthz", Some(TOKEN)).expect("https");
    assert_eq!(cert, renewed);

    // The key of another certificate: refused too, with the reason.
    let (_, other_key) = pki.ca.issue("other", &["127.0.0.1"]);
    std::fs::rename(other_key, &pki.tls.key).expect("rename");
    let events = server.credential_events();
    assert_eq!(reasons(&events), [EventReason::CredentialsRefused]);
    assert!(
        events[0]
            .message
            .contains("does not belong to the certificate"),
        "{}",
        events[0].message
    );
    let (cert, ..) = https(addr, pki.ca.ca_pem(), "/healthz", Some(TOKEN)).expect("https");
    assert_eq!(cert, renewed);
}

#[test]
fn a_changed_token_file_is_required_from_the_next_request_on_and_a_bad_one_is_passed_over() {
    let pki = Pki::new();
    let token_file = pki.path("token");
    write_private(&token_file, &format!("{TOKEN}\n"));
    let server = start(&tls_config(&pki, Some(token_file.clone()))).expect("starts");
    let addr = server.local_addr();
    let status = |token: &str| {
        https(addr, pki.ca.ca_pem(), "/api/v1/jobs", Some(token))
            .expect("https")
            .1
    };
    assert_eq!(
        status(TOKEN),
        200,
        "the file's token, without its line feed"
    );

    let next = "the-next-token-0123456789";
    write_private(&token_file, next);
    assert_eq!(status(TOKEN), 401, "the old token is refused at once");
    assert_eq!(status(next), 200);
    let events = server.credential_events();
    assert_eq!(reasons(&events), [EventReason::CredentialsReloaded]);

    // Readable by others: passed over with the fix, the last good token stays.
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(&token_file, "a-third-token-0123456789").expect("write");
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let events = server.credential_events();
    assert_eq!(reasons(&events), [EventReason::CredentialsRefused]);
    assert!(
        events[0].message.contains("chmod 600"),
        "{}",
        events[0].message
    );
    assert!(
        !events[0].message.contains("a-third-token"),
        "{}",
        events[0].message
    );
    assert_eq!(status(next), 200);
    assert_eq!(status("a-third-token-0123456789"), 401);

    // Too short to be a token: passed over as well.
    write_private(&token_file, "short");
    let events = server.credential_events();
    assert_eq!(reasons(&events), [EventReason::CredentialsRefused]);
    assert!(
        events[0].message.contains("16 to 256"),
        "{}",
        events[0].message
    );
    assert_eq!(status(next), 200);
}

#[test]
fn a_token_file_set_by_a_reload_replaces_the_inline_token_and_an_unreadable_one_keeps_it() {
    let pki = Pki::new();
    let server = start(&tls_config(&pki, None)).expect("starts");
    let addr = server.local_addr();
    let status = |token: &str| {
        https(addr, pki.ca.ca_pem(), "/api/v1/jobs", Some(token))
            .expect("https")
            .1
    };
    let missing = pki.path("missing-token");
    server.set_api_token(None, Some(&missing));
    assert_eq!(status(TOKEN), 200, "the inline token stays");
    let events = server.credential_events();
    assert_eq!(reasons(&events), [EventReason::CredentialsRefused]);
    assert!(
        events[0].message.contains("missing-token"),
        "{}",
        events[0].message
    );

    let token_file = pki.path("token");
    write_private(&token_file, "a-token-from-a-file-0123");
    server.set_api_token(None, Some(&token_file));
    assert_eq!(status(TOKEN), 401);
    assert_eq!(status("a-token-from-a-file-0123"), 200);
}

#[test]
fn the_server_does_not_start_with_files_it_cannot_use() {
    let pki = Pki::new();
    let message = |config: &ServeConfig| match start(config) {
        Ok(_) => panic!("started"),
        Err(err) => err.to_string(),
    };
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&pki.tls.key, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let key = pki.tls.key.display();
    assert_eq!(
        message(&tls_config(&pki, None)),
        format!(
            "cannot start the HTTP server: {key} is readable by group or others (mode 640); \
             run `chmod 600 {key}`"
        )
    );
    std::fs::set_permissions(&pki.tls.key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let missing = pki.path("nowhere");
    let text = message(&tls_config(&pki, Some(missing.clone())));
    assert!(
        text.starts_with(&format!(
            "cannot start the HTTP server: {}: cannot read it",
            missing.display()
        )),
        "{text}"
    );
}

#[test]
fn clients_that_never_say_hello_on_every_slot_hold_off_others_only_until_the_deadline() {
    let pki = Pki::new();
    let server = start(&tls_config(&pki, None)).expect("starts");
    let addr = server.local_addr();
    let silent: Vec<TcpStream> = (0..super::MAX_CONNECTIONS)
        .map(|_| TcpStream::connect(addr).expect("connect"))
        .collect();
    // Every slot is taken: this one waits in the backlog until the silent ones are cut off.
    let started = Instant::now();
    let (_, status, _) = https(addr, pki.ca.ca_pem(), "/healthz", Some(TOKEN))
        .expect("served once the silent clients lost their slots");
    let waited = started.elapsed();
    assert_eq!(status, 200);
    assert!(
        waited < HANDSHAKE_TIMEOUT + Duration::from_secs(3),
        "waited {waited:?}"
    );
    drop(silent);
}
