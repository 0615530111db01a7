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

mod answer;
mod api;
mod auth;
mod checks;
mod dashboard;
mod label;
pub(crate) mod metrics;
mod series;
mod shared;
mod token;
pub(crate) mod view;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::{Semaphore, oneshot};

#[cfg(test)]
use api::openapi_json;
pub use shared::Backend;
pub(crate) use shared::MAX_BODY_BYTES;
use shared::{
    CONNECTION_LIFETIME, HEADER_TIMEOUT, MAX_CONNECTIONS, MAX_WHAT_IF_CALLS, SHUTDOWN_GRACE,
};

use shared::AppState;
use token::ApiToken;
pub use view::FleetView;

/// Where and how the server listens.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The address to bind.
    pub listen: SocketAddr,
    /// The bearer token every request must carry, if any.
    pub api_token: Option<String>,
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
}

/// A running server; dropping it stops it.
pub struct Server {
    addr: SocketAddr,
    /// The token requests must carry now.
    token: ApiToken,
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
        let listener = TcpListener::bind(config.listen).map_err(|source| ServeError::Bind {
            addr: config.listen,
            source,
        })?;
        let addr = listener.local_addr().map_err(ServeError::Start)?;
        listener.set_nonblocking(true).map_err(ServeError::Start)?;
        let token = ApiToken::new(config.api_token.as_deref());
        let state = Arc::new(AppState {
            view,
            backend,
            token: token.clone(),
            what_ifs: Arc::new(Semaphore::new(MAX_WHAT_IF_CALLS)),
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ServeError::Start)?;
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("flowscale-http".into())
            .spawn(move || {
                runtime.block_on(async move {
                    match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => serve(listener, state, stopped).await,
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
            token,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replaces the token every request must carry (`[host] api-token` changed while the host
    /// runs): the next request is checked against `token`, the old one is refused.
    pub fn set_api_token(&self, token: Option<&str>) {
        self.token.set(token);
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
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(64 * 1024);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            // A client that keeps its connection open longer is cut off; it reconnects.
            let _ = tokio::time::timeout(CONNECTION_LIFETIME, connection).await;
        });
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod official_parsers;
