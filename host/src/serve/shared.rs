//! What the server's parts share: its limits, what it asks of the command that runs it, and
//! the state every handler reads.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::token::ApiToken;
use super::view::FleetView;
use crate::plugins::PluginListing;

/// The largest `POST /api/v1/align` body.
pub(crate) const MAX_BODY_BYTES: usize = 64 * 1024;
/// How long a client may take to send its request headers.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request may take, body included.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a connection stays open (keep-alive included).
pub(crate) const CONNECTION_LIFETIME: Duration = Duration::from_secs(120);
/// Connections served at once; more wait in the listen backlog.
pub(crate) const MAX_CONNECTIONS: usize = 128;
/// What-if requests (`POST /api/v1/align`) answered at once; more get 503. Each may keep a
/// plugin worker busy up to `[host] plugin-call-timeout` per plugin call, so this bounds what
/// what-ifs take from the fleet (the machine's cores and processes).
pub(crate) const MAX_WHAT_IF_CALLS: usize = 2;
/// How long a stopping server waits for what-if calls still running before it lets go of them
/// (their workers are ended when the host exits).
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// What the server asks of the command that runs it: the documents it cannot build from the
/// fleet view.
pub trait Backend: Send + Sync + 'static {
    /// The plugin listing, the same document as `flowscale plugins --json`.
    fn plugins(&self) -> PluginListing;
    /// The answer to one `align --batch` request line: `Ok` with the answer, `Err` with the
    /// error answer (`{"line": 1, "error": ...}`).
    fn align(&self, request: &[u8]) -> Result<serde_json::Value, serde_json::Value>;
}

/// What the handlers share.
pub(crate) struct AppState {
    pub(crate) view: Arc<FleetView>,
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) token: ApiToken,
    /// One permit per what-if request running ([`MAX_WHAT_IF_CALLS`]).
    pub(crate) what_ifs: Arc<Semaphore>,
}
