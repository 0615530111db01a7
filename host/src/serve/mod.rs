//! The host's HTTP server (`[host] listen`, `run --listen`): Prometheus metrics, a JSON API with
//! its OpenAPI document, and a dashboard, all read from a [`FleetView`] the control loop feeds.
//!
//! The server runs on a thread of its own with a current-thread tokio runtime; the control loop
//! never waits for it. Every connection has a deadline for its request headers and a lifetime,
//! every request a deadline, the number of connections is bounded, and a request body is
//! bounded, so slow or malformed clients cost a connection slot for a few seconds at most.
//! Without a token, only requests for a loopback name are answered, and a request that computes
//! something must be JSON (see `checks`): a web page cannot use the server. What-if requests
//! are bounded in number; the command behind them runs their plugin calls outside the host.
//!
//! With a certificate and key (`[host] tls-cert-file`, `tls-key-file`) every connection is
//! HTTPS (see `tls`): its handshake has a deadline of its own, and the certificate, key and
//! token file are read again when they change on disk (see `secrets`).

mod answer;
mod api;
mod auth;
mod checks;
mod dashboard;
mod exposition;
mod job_gauges;
mod label;
pub(crate) mod metrics;
mod secrets;
mod series;
mod shared;
mod tls;
mod token;
mod vertex_gauges;
pub(crate) mod view;

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Semaphore, oneshot};
use tokio_rustls::TlsAcceptor;

#[cfg(test)]
use api::openapi_json;
pub use shared::Backend;
pub(crate) use shared::MAX_BODY_BYTES;
use shared::{
    CONNECTION_LIFETIME, HEADER_TIMEOUT, MAX_CONNECTIONS, MAX_WHAT_IF_CALLS, SHUTDOWN_GRACE,
};

use crate::config::TlsFiles;
use crate::credentials::{CredentialError, Reload};
use crate::events::Event;
use secrets::Secrets;
use shared::AppState;
pub(crate) use view::CustomView;
pub use view::FleetView;

/// Where and how the server listens.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The address to bind.
    pub listen: SocketAddr,
    /// The bearer token every request must carry, if any.
    pub api_token: Option<String>,
    /// The file the bearer token is read from (and read again when it changes), instead of
    /// `api_token`.
    pub api_token_file: Option<std::path::PathBuf>,
    /// The certificate and key of HTTPS; plain HTTP without.
    pub tls: Option<TlsFiles>,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The runtime or its thread could not be started.
    #[error("cannot start the HTTP server: {0}")]
    Start(std::io::Error),
    /// The token file, certificate or key cannot be used (the message names the file).
    #[error("cannot start the HTTP server: {0}")]
    Credentials(CredentialError),
    /// The TLS configuration cannot be made.
    #[error("cannot start the HTTPS server: {0}")]
    Tls(rustls::Error),
}

/// A running server; dropping it stops it.
pub struct Server {
    addr: SocketAddr,
    /// The token requests must carry now, and the certificate of HTTPS.
    secrets: Arc<Secrets>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds `config.listen` (now, so that an error is reported before the fleet runs) and
    /// serves on a thread of its own.
    pub fn start(
        config: &ServeConfig,
        view: Arc<FleetView>,
        backend: Arc<dyn Backend>,
    ) -> Result<Server, ServeError> {
        let secrets = Arc::new(
            Secrets::new(
                config.api_token.as_deref(),
                config.api_token_file.as_deref(),
                config.tls.as_ref(),
            )
            .map_err(ServeError::Credentials)?,
        );
        let acceptor = match secrets.tls() {
            true => Some(tls::acceptor(Arc::clone(&secrets)).map_err(ServeError::Tls)?),
            false => None,
        };
        let listener = TcpListener::bind(config.listen).map_err(|source| ServeError::Bind {
            addr: config.listen,
            source,
        })?;
        let addr = listener.local_addr().map_err(ServeError::Start)?;
        listener.set_nonblocking(true).map_err(ServeError::Start)?;
        let state = Arc::new(AppState {
            view,
            backend,
            token: secrets.token().clone(),
            what_ifs: Arc::new(Semaphore::new(MAX_WHAT_IF_CALLS)),
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ServeError::Start)?;
        let (stop, stopped) = oneshot::channel();
        let thread_secrets = Arc::clone(&secrets);
        let thread = std::thread::Builder::new()
            .name("flowscale-http".into())
            .spawn(move || {
                runtime.block_on(async move {
                    match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => {
                            serve(listener, state, (thread_secrets, acceptor), stopped).await
                        }
                        Err(err) => tracing::error!("the HTTP server cannot listen: {err}"),
                    }
                });
                // Dropping the runtime would wait for every blocking task, a what-if call
                // included, however long it takes: a stopping host does not.
                runtime.shutdown_timeout(SHUTDOWN_GRACE);
            })
            .map_err(ServeError::Start)?;
        Ok(Server {
            addr,
            secrets,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether it speaks HTTPS.
    pub fn tls(&self) -> bool {
        self.secrets.tls()
    }

    /// Replaces the token every request must carry (`[host] api-token` or `api-token-file`
    /// changed while the host runs): the next request is checked against `token`, or the token
    /// of the file `file`, and the old one is refused. A file that cannot be read keeps the old
    /// token, with a `CredentialsRefused` event.
    pub fn set_api_token(&self, token: Option<&str>, file: Option<&Path>) {
        if let (Err(err), Some(file)) = (self.secrets.set_token(token, file), file) {
            let refused = Reload::Refused {
                files: vec![file.to_path_buf()],
                reason: err.to_string(),
            };
            self.secrets.queue(refused.event());
        }
    }

    /// Looks at the certificate, key and token files now and returns the events of what
    /// changed since the last call: a renewal used from the next connection on
    /// (`CredentialsReloaded`), or a file that cannot be used and was passed over
    /// (`CredentialsRefused`). New connections look too; this is for the host to report a
    /// change without waiting for one.
    pub fn credential_events(&self) -> Vec<Event> {
        self.secrets.refresh();
        self.secrets.take_events()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accepts connections until `stopped`, each on a task of its own.
async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    (secrets, acceptor): (Arc<Secrets>, Option<TlsAcceptor>),
    mut stopped: oneshot::Receiver<()>,
) {
    let app = api::router(state);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let permit = tokio::select! {
            _ = &mut stopped => return,
            permit = Arc::clone(&slots).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
        };
        let (stream, _peer) = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: wait a little rather than spin.
                    tracing::warn!("the HTTP server cannot accept a connection: {err}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // A renewed certificate or a changed token file counts from this connection on.
        secrets.refresh();
        let app = app.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let connection = async move {
                match acceptor {
                    None => serve_connection(stream, app).await,
                    Some(acceptor) => {
                        if let Some(stream) = tls::handshake(&acceptor, stream).await {
                            serve_connection(stream, app).await;
                        }
                    }
                }
            };
            // A client that keeps its connection open longer is cut off; it reconnects.
            let _ = tokio::time::timeout(CONNECTION_LIFETIME, connection).await;
        });
    }
}

/// Serves the requests of one connection, plain or TLS, with the header-read deadline.
async fn serve_connection<I>(io: I, app: axum::Router)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = TowerToHyperService::new(app);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(64 * 1024);
    let _ = builder.serve_connection(TokioIo::new(io), service).await;
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod tls_tests;

#[cfg(test)]
mod official_parsers;
