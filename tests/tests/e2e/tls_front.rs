//! A TLS front for the fake Flink REST API: the REST endpoint of a cluster with
//! `security.ssl.rest.enabled` and `.authentication-enabled` (mutual TLS), made of rustls in
//! front of [`crate::fake_flink::FakeFlink`]'s plain port.
//!
//! Each connection reads the server's certificate, key and client CA bundle from their files
//! anew, as a server that renews its certificate without a restart does, and records which
//! certificates the completed handshake used on both sides. One request per connection: the
//! fake answers `Connection: close`, and the front passes that on.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

/// The certificates of one completed handshake (DER).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Handshake {
    /// The server's certificate the client accepted.
    pub(crate) server: Vec<u8>,
    /// The client's certificate the server accepted.
    pub(crate) client: Vec<u8>,
}

/// The running front; stops when dropped.
pub(crate) struct TlsFront {
    addr: SocketAddr,
    handshakes: Arc<Mutex<Vec<Handshake>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Where the front's files are.
#[derive(Clone)]
pub(crate) struct FrontFiles {
    /// The server's certificate (PEM).
    pub(crate) cert: PathBuf,
    /// Its key (PEM).
    pub(crate) key: PathBuf,
    /// The CAs a client certificate must be signed by (PEM).
    pub(crate) client_ca: PathBuf,
}

impl TlsFront {
    /// Serves TLS on a loopback port, passing each request on to `backend`.
    pub(crate) fn start(backend: SocketAddr, files: FrontFiles) -> TlsFront {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().expect("its address");
        let handshakes = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (handshakes, stop) = (Arc::clone(&handshakes), Arc::clone(&stop));
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (files, handshakes) = (files.clone(), Arc::clone(&handshakes));
                    std::thread::spawn(move || serve(stream, backend, &files, &handshakes));
                }
            })
        };
        TlsFront {
            addr,
            handshakes,
            stop,
            thread: Some(thread),
        }
    }

    /// The REST URL, by the IP address the test certificates name.
    pub(crate) fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Every completed handshake so far, in order.
    pub(crate) fn handshakes(&self) -> Vec<Handshake> {
        self.handshakes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The first certificate of the PEM file `path` (DER).
pub(crate) fn first_certificate(path: &Path) -> Vec<u8> {
    flowscale::credentials::read_certificates(path)
        .expect("a certificate file")
        .remove(0)
        .to_vec()
}

/// The server's setup from its files as they are now; `None` while they do not fit together
/// (a renewal half done).
fn server_config(files: &FrontFiles) -> Option<(Arc<ServerConfig>, Vec<u8>)> {
    let chain: Vec<CertificateDer<'static>> =
        flowscale::credentials::read_certificates(&files.cert).ok()?;
    let server = chain.first()?.to_vec();
    let key = flowscale::credentials::read_private_key(&files.key).ok()?;
    let mut roots = RootCertStore::empty();
    for ca in flowscale::credentials::read_certificates(&files.client_ca).ok()? {
        roots.add(ca).ok()?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .ok()?;
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .ok()?;
    Some((Arc::new(config), server))
}

/// One connection: the handshake (recorded once complete), one request passed on to the
/// backend, its answer passed back.
fn serve(stream: TcpStream, backend: SocketAddr, files: &FrontFiles, seen: &Mutex<Vec<Handshake>>) {
    let Some((config, server)) = server_config(files) else {
        return;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(mut conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut stream = stream;
    while conn.is_handshaking() {
        if conn.complete_io(&mut stream).is_err() {
            return;
        }
    }
    let Some(client) = conn
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|c| c.to_vec())
    else {
        return;
    };
    seen.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Handshake { server, client });
    let mut tls = rustls::StreamOwned::new(conn, stream);
    let Some(request) = read_request(&mut tls) else {
        return;
    };
    let Ok(mut upstream) = TcpStream::connect(backend) else {
        return;
    };
    let mut answer = Vec::new();
    if upstream.write_all(&request).is_err() || upstream.read_to_end(&mut answer).is_err() {
        return;
    }
    let _ = tls.write_all(&answer);
    tls.conn.send_close_notify();
    let _ = tls.flush();
}

/// One HTTP/1.1 request, headers and body, as it came.
fn read_request(stream: &mut impl Read) -> Option<Vec<u8>> {
    let mut reader = BufReader::new(stream);
    let mut request = Vec::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        request.extend_from_slice(line.as_bytes());
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    request.extend_from_slice(&body);
    Some(request)
}
