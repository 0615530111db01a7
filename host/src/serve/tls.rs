//! HTTPS: the TLS handshake of each connection, bounded in time, with the certificate of the
//! moment.
//!
//! The certificate is picked per handshake ([`ResolvesServerCert`]) from [`Secrets`], which
//! reads it again when its files change, so a renewal needs no restart. A client that connects
//! and never completes its handshake loses its connection slot after [`HANDSHAKE_TIMEOUT`], as a
//! client that never finishes its request headers does. Plain HTTP sent to the HTTPS port gets a
//! short answer saying so, then the connection is closed.

use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::secrets::Secrets;
use crate::credentials::crypto_provider;

/// How long a client may take from connecting to the end of its TLS handshake.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The first byte of every TLS connection: a handshake record.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// The answer to plain HTTP on the HTTPS port.
const PLAIN_HTTP_ANSWER: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 59\r\nConnection: close\r\n\r\nthis server speaks HTTPS only: use https:// in the address\n";

/// Picks the certificate of the moment for every handshake.
#[derive(Debug)]
struct CurrentCertificate(Arc<Secrets>);

impl ResolvesServerCert for CurrentCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0.certified_key()
    }
}

/// The acceptor of the server's connections, presenting the certificate `secrets` hold.
pub(crate) fn acceptor(secrets: Arc<Secrets>) -> Result<TlsAcceptor, rustls::Error> {
    let mut config = ServerConfig::builder_with_provider(crypto_provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(CurrentCertificate(secrets)));
    // The server speaks HTTP/1.1 only; saying so lets a client skip asking for h2.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The TLS side of `stream`, or `None` when the client did not complete a handshake within
/// [`HANDSHAKE_TIMEOUT`], failed it, or spoke plain HTTP (answered with a 400 first).
pub(crate) async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
) -> Option<TlsStream<TcpStream>> {
    let handshake = async {
        let mut first = [0u8; 1];
        if stream.peek(&mut first).await.ok()? == 0 {
            return None;
        }
        if first[0] != TLS_HANDSHAKE_RECORD {
            refuse_plain_http(stream).await;
            return None;
        }
        acceptor.accept(stream).await.ok()
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
        .await
        .ok()
        .flatten()
}

/// Answers a plain HTTP request with a 400 that says to use HTTPS, then closes: the request is
/// read first (up to a bound), so that closing with unread bytes does not reset the connection
/// before the client has read the answer.
async fn refuse_plain_http(mut stream: TcpStream) {
    let mut buffer = [0u8; 4096];
    let mut read = 0usize;
    while read < 64 * 1024 {
        match tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buffer)).await {
            Ok(Ok(n)) if n > 0 => {
                read += n;
                if buffer[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            _ => break,
        }
    }
    if stream.write_all(PLAIN_HTTP_ANSWER).await.is_ok() {
        let _ = stream.shutdown().await;
        // Until the client closes its side (bounded by the caller's handshake deadline).
        while matches!(stream.read(&mut buffer).await, Ok(n) if n > 0) {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plain_http_answer_has_the_length_it_says() {
        let text = std::str::from_utf8(PLAIN_HTTP_ANSWER).expect("ASCII");
        let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .and_then(|n| n.parse().ok())
            .expect("a length");
        assert_eq!(body.len(), length);
    }
}
