//! Connections, and client errors as state errors.

use std::time::Duration;

use postgres::{Client, NoTls};

use crate::state::StateError;

/// Connects to `url`. With leases of `ttl`, a session left inside a transaction for a quarter of
/// the TTL (its host frozen, or cut off, in the middle of a write) is ended by the server, and a
/// statement waits at most half the TTL for a lock: a frozen host never holds the locks the other
/// hosts need to take its jobs over, and one that waits for a lock a frozen host holds gets it
/// once the server has ended that session, rather than giving up at the same instant.
pub(super) fn connect(url: &str, ttl: Option<Duration>) -> Result<Client, StateError> {
    let mut client = Client::connect(url, NoTls).map_err(db_error("connect"))?;
    if let Some(ttl) = ttl {
        let idle_ms = (ttl.as_millis() / 4).max(50);
        let lock_ms = (ttl.as_millis() / 2).max(100);
        client
            .batch_execute(&format!(
                "SET idle_in_transaction_session_timeout = {idle_ms}; SET lock_timeout = {lock_ms}"
            ))
            .map_err(db_error("set the session timeouts"))?;
    }
    Ok(client)
}

/// Turns a client error into a [`StateError::Database`] saying what was being done.
pub(super) fn db_error(action: &str) -> impl FnOnce(postgres::Error) -> StateError + '_ {
    move |source| StateError::Database {
        action: action.to_string(),
        source,
    }
}
