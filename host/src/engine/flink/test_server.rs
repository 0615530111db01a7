//! A local HTTP/1.1 server for the tests and benchmarks of the Flink REST client over TLS:
//! plain or rustls, keeping connections alive, counting handshakes and recording the
//! `Authorization` headers it gets. Not part of the binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use crate::credentials::crypto_provider;

/// A local HTTP/1.1 server, TLS when given a config, that answers every request with
/// `status` and a JSON body, keeping connections alive; it counts handshakes (TLS) or
/// connections (plain) and records the `Authorization` headers it gets.
pub struct Server {
    /// Its loopback port.
    pub port: u16,
    /// Completed TLS handshakes (TLS) or accepted connections (plain).
    pub connections: Arc<AtomicUsize>,
    /// The `Authorization` header of every request, in order.
    pub authorizations: Arc<Mutex<Vec<String>>>,
}

/// A server configuration with `cert` and `key` (PEM files), asking for a client certificate
/// signed by `client_ca` when given.
pub fn server_config(cert: &Path, key: &Path, client_ca: Option<&Path>) -> Arc<ServerConfig> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .expect("cert")
        .collect::<Result<_, _>>()
        .expect("cert");
    let key = PrivateKeyDer::from_pem_file(key).expect("key");
    let builder = ServerConfig::builder_with_provider(crypto_provider())
        .with_safe_default_protocol_versions()
        .expect("versions");
    let builder = match client_ca {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for der in CertificateDer::pem_file_iter(ca).expect("ca") {
                roots.add(der.expect("ca")).expect("ca");
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), crypto_provider())
                    .build()
                    .expect("verifier");
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    Arc::new(builder.with_single_cert(chain, key).expect("server cert"))
}

impl Server {
    /// Starts serving on a loopback port, answering `status` (200: `{"taskmanagers":1}`).
    pub fn start(tls: Option<Arc<ServerConfig>>, status: u16) -> Server {
        Server::answering(tls, status, r#"{"taskmanagers":1}"#)
    }

    /// Starts serving on a loopback port, answering 200 with `body` (or `status` otherwise).
    pub fn answering(tls: Option<Arc<ServerConfig>>, status: u16, body: &str) -> Server {
        let body: Arc<str> = Arc::from(body);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let connections = Arc::new(AtomicUsize::new(0));
        let authorizations = Arc::new(Mutex::new(Vec::new()));
        let (count, seen) = (Arc::clone(&connections), Arc::clone(&authorizations));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (tls, count, seen) = (tls.clone(), Arc::clone(&count), Arc::clone(&seen));
                let body = Arc::clone(&body);
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                    match tls {
                        Some(config) => {
                            let Ok(mut conn) = rustls::ServerConnection::new(config) else {
                                return;
                            };
                            let mut stream = stream;
                            // The handshake first, so that a refused one is not counted.
                            while conn.is_handshaking() {
                                if conn.complete_io(&mut stream).is_err() {
                                    return;
                                }
                            }
                            count.fetch_add(1, Ordering::SeqCst);
                            serve(rustls::StreamOwned::new(conn, stream), status, &body, &seen);
                        }
                        None => {
                            count.fetch_add(1, Ordering::SeqCst);
                            serve(stream, status, &body, &seen);
                        }
                    }
                });
            }
        });
        Server {
            port,
            connections,
            authorizations,
        }
    }
}

/// Answers requests on one connection until the client closes it.
fn serve<S: Read + Write>(stream: S, status: u16, body: &str, seen: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        let mut first = true;
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(value) = lower.strip_prefix("content-length:") {
                length = value.trim().parse().unwrap_or(0);
            }
            if lower.starts_with("authorization:") {
                let value = line["authorization:".len()..].trim().to_string();
                seen.lock().expect("lock").push(value);
            }
            if first && !line.starts_with("GET") && !line.starts_with("PUT") {
                // What an HTTP server answers to bytes that are not a request (a TLS hello).
                let _ = reader
                    .get_mut()
                    .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
                return;
            }
            first = false;
        }
        let mut request = vec![0; length];
        if reader.read_exact(&mut request).is_err() {
            return;
        }
        let answer = if status == 200 {
            body
        } else {
            "<html><body>Unauthorized\n</body></html>"
        };
        // A 3xx is what Flink's TLS port answers a plain request: a redirect to https.
        let location = if (300..400).contains(&status) {
            "Location: https://127.0.0.1:8081/overview\r\n"
        } else {
            ""
        };
        let reply = format!(
            "HTTP/1.1 {status} X\r\n{location}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
            answer.len()
        );
        let stream = reader.get_mut();
        if stream.write_all(reply.as_bytes()).is_err() || stream.flush().is_err() {
            return;
        }
    }
}
