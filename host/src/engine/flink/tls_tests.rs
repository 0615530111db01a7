//! The REST client against a local TLS server: each way a TLS cluster can be misconfigured
//! gives one line naming the cluster, the address and the cause, with no secret in it; mutual
//! TLS, tokens and rotation work; a handshake is not paid per request.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::client::{FlinkClient, FlinkOptions};
use super::test_server::{Server, server_config};
use crate::config::test_certs::write;
use crate::config::{ClusterAuth, ClusterSpec};
use crate::engine::EngineError;
use flowscale_tests::certs::TestCa as Ca;

/// A named cluster `prod` at `rest`.
pub(crate) fn cluster(rest: &str) -> ClusterSpec {
    ClusterSpec {
        name: "prod".to_string(),
        rest: rest.to_string(),
        ca_file: None,
        client_cert: None,
        auth: None,
        max_requests: None,
    }
}

pub(crate) fn client(spec: &ClusterSpec) -> FlinkClient {
    let options = FlinkOptions {
        retries: 0,
        request_timeout: Duration::from_secs(5),
        ..FlinkOptions::new(spec.rest.as_str())
    };
    FlinkClient::for_cluster(options, spec).expect("files usable")
}

/// The one line of a failed `GET /overview`.
fn failure(spec: &ClusterSpec) -> String {
    match client(spec).get_json("/overview") {
        Ok(answer) => panic!("expected a failure, got {answer}"),
        Err(err) => {
            let line = err.to_string();
            assert!(!line.contains('\n'), "one line: {line}");
            assert!(
                line.contains(&format!("cluster `prod` at {}", spec.rest)),
                "names the cluster and its address: {line}"
            );
            assert!(
                matches!(err, EngineError::Unreachable(_) | EngineError::Refused(_)),
                "{err:?}"
            );
            line
        }
    }
}

/// A TLS server with `leaf` (certificate, key), asking for a client certificate signed by
/// `client_ca` when given, answering `status`.
fn tls_server(leaf: &(PathBuf, PathBuf), client_ca: Option<&Path>, status: u16) -> Server {
    Server::start(Some(server_config(&leaf.0, &leaf.1, client_ca)), status)
}

/// The cluster `prod` at `server` on localhost, trusting the CA `ca`.
fn trusting(ca: &Ca, server: &Server) -> ClusterSpec {
    ClusterSpec {
        ca_file: Some(ca.ca_pem().to_path_buf()),
        ..cluster(&format!("https://localhost:{}", server.port))
    }
}

/// A CA, a server certificate for localhost and 127.0.0.1, and a directory to keep them.
struct Pki {
    dir: tempfile::TempDir,
    ca: Ca,
    server: (PathBuf, PathBuf),
}

fn pki() -> Pki {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new(dir.path(), "cluster");
    let server = ca.issue("server", &["localhost", "127.0.0.1"]);
    Pki { dir, ca, server }
}

#[test]
fn a_tls_cluster_with_its_ca_and_mutual_tls_and_a_token_answers() {
    let pki = pki();
    let client_cert = pki.ca.issue("flowscale", &["flowscale"]);
    let server = tls_server(&pki.server, Some(pki.ca.ca_pem()), 200);
    let token = pki.dir.path().join("token");
    write(&token, "s3cr3t-t0ken-4711\n", 0o600);
    let spec = ClusterSpec {
        ca_file: Some(pki.ca.ca_pem().to_path_buf()),
        client_cert: Some(client_cert),
        auth: Some(ClusterAuth::Token(token)),
        ..cluster(&format!("https://localhost:{}", server.port))
    };
    let client = client(&spec);
    for _ in 0..5 {
        let answer = client
            .get_json("/overview")
            .expect("answers over mutual TLS");
        assert_eq!(answer["taskmanagers"], 1);
    }
    assert_eq!(
        server.connections.load(Ordering::SeqCst),
        1,
        "five requests, one handshake: the connection is kept alive"
    );
    let seen = server.authorizations.lock().expect("lock").clone();
    assert_eq!(seen.len(), 5);
    assert!(
        seen.iter().all(|h| h == "Bearer s3cr3t-t0ken-4711"),
        "{seen:?}"
    );
}

#[test]
fn a_server_certificate_of_an_unknown_ca_is_named_as_such() {
    let pki = pki();
    let server = tls_server(&pki.server, None, 200);
    let other = Ca::new(pki.dir.path(), "other");
    let spec = trusting(&other, &server);
    let line = failure(&spec);
    assert!(line.contains("not signed by a trusted CA"), "{line}");
    assert!(line.contains("`ca-file`"), "says what to set: {line}");
}

#[test]
fn a_certificate_for_another_name_is_a_hostname_mismatch() {
    let pki = pki();
    let elsewhere = pki.ca.issue("elsewhere", &["flink.elsewhere.example"]);
    let server = tls_server(&elsewhere, None, 200);
    let spec = trusting(&pki.ca, &server);
    let line = failure(&spec);
    assert!(
        line.contains("not valid for `localhost`; it lists flink.elsewhere.example"),
        "{line}"
    );
    assert!(
        line.contains("flink.elsewhere.example"),
        "names what it lists: {line}"
    );
}

#[test]
fn an_expired_server_certificate_is_named_as_such() {
    let pki = pki();
    let old = pki.ca.issue_expired("old", &["localhost"]);
    let server = tls_server(&old, None, 200);
    let spec = trusting(&pki.ca, &server);
    let line = failure(&spec);
    assert!(line.contains("has expired"), "{line}");
}

#[test]
fn a_server_that_asks_for_a_client_certificate_says_none_is_configured() {
    let pki = pki();
    let server = tls_server(&pki.server, Some(pki.ca.ca_pem()), 200);
    let spec = trusting(&pki.ca, &server);
    let line = failure(&spec);
    assert!(line.contains("asks for a client certificate"), "{line}");
    assert!(line.contains("`cert-file`"), "{line}");
    // A client certificate of another CA is refused too, and said so.
    let other = Ca::new(pki.dir.path(), "other");
    let spec = ClusterSpec {
        client_cert: Some(other.issue("stranger", &["stranger"])),
        ..spec
    };
    let line = failure(&spec);
    assert!(line.contains("refused the handshake"), "{line}");
}

#[test]
fn https_to_a_plain_port_and_http_to_a_tls_port_say_which_is_which() {
    let pki = pki();
    let plain = Server::start(None, 200);
    let line = failure(&cluster(&format!("https://localhost:{}", plain.port)));
    assert!(line.contains("plain http:// port"), "{line}");

    let tls = tls_server(&pki.server, None, 200);
    let line = failure(&cluster(&format!("http://localhost:{}", tls.port)));
    assert!(line.contains("set `rest` to an https:// URL"), "{line}");
    // Flink's TLS port answers a plain request with a redirect to https: not followed, named.
    let redirecting = Server::start(None, 307);
    let line = failure(&cluster(&format!("http://localhost:{}", redirecting.port)));
    assert!(
        line.contains("redirects to https://127.0.0.1:8081/overview: its REST API has TLS"),
        "{line}"
    );
    assert!(line.contains("set `rest` to an https:// URL"), "{line}");
}

#[test]
fn a_401_from_a_proxy_names_the_credentials_and_not_the_secret() {
    let pki = pki();
    let server = tls_server(&pki.server, None, 401);
    let basic = pki.dir.path().join("basic");
    write(&basic, "flowscale:pa55-w0rd-1234\n", 0o600);
    let spec = ClusterSpec {
        ca_file: Some(pki.ca.ca_pem().to_path_buf()),
        auth: Some(ClusterAuth::Basic(basic)),
        ..cluster(&format!("https://localhost:{}", server.port))
    };
    let line = failure(&spec);
    assert!(line.contains("HTTP 401: authentication refused"), "{line}");
    assert!(line.contains("`basic-auth-file`"), "{line}");
    assert!(!line.contains("pa55-w0rd-1234"), "{line}");
    // base64("flowscale:pa55-w0rd-1234"): what went over the wire, and never into the line.
    let sent = server.authorizations.lock().expect("lock").clone();
    assert_eq!(sent, ["Basic Zmxvd3NjYWxlOnBhNTUtdzByZC0xMjM0"]);
    assert!(!line.contains("Zmxvd3NjYWxlOnBhNTUtdzByZC0xMjM0"), "{line}");
}

#[test]
fn rotated_files_are_used_from_the_next_request_and_a_broken_one_keeps_the_last_good() {
    let pki = pki();
    let server = tls_server(&pki.server, Some(pki.ca.ca_pem()), 200);
    let token = pki.dir.path().join("token");
    write(&token, "first-token-000\n", 0o600);
    let (cert, key) = pki.ca.issue("flowscale", &["flowscale"]);
    let spec = ClusterSpec {
        ca_file: Some(pki.ca.ca_pem().to_path_buf()),
        client_cert: Some((cert.clone(), key.clone())),
        auth: Some(ClusterAuth::Token(token.clone())),
        ..cluster(&format!("https://localhost:{}", server.port))
    };
    let client = client(&spec);
    client.get_json("/overview").expect("first");
    assert!(client.take_events().is_empty(), "nothing changed yet");

    // A new token: the next request carries it, and an event names the file.
    write(&token, "second-token-111\n", 0o600);
    client.get_json("/overview").expect("second");
    let events = client.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].severity, crate::events::Severity::Normal);
    assert!(
        events[0].message.contains(&token.display().to_string()),
        "{events:?}"
    );
    let seen = server.authorizations.lock().expect("lock").clone();
    assert_eq!(seen, ["Bearer first-token-000", "Bearer second-token-111"]);

    // A new client certificate and key: a new agent, so a new handshake with them.
    let before = server.connections.load(Ordering::SeqCst);
    pki.ca.issue("flowscale", &["flowscale"]);
    client
        .get_json("/overview")
        .expect("with the rotated certificate");
    assert_eq!(server.connections.load(Ordering::SeqCst), before + 1);
    let events = client.take_events();
    assert!(
        events
            .iter()
            .any(|e| e.message.contains(&key.display().to_string())),
        "{events:?}"
    );

    // A key that others may read is refused: the last good setup stays and still works.
    let key_text = std::fs::read_to_string(&key).expect("key");
    write(&key, &key_text, 0o644);
    client.get_json("/overview").expect("the last good setup");
    let events = client.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].severity, crate::events::Severity::Warning);
    assert!(events[0].message.contains("chmod 600"), "{events:?}");
    let all: String = events.iter().map(|e| e.message.clone()).collect();
    assert!(!all.contains("second-token-111"), "{all}");
}
