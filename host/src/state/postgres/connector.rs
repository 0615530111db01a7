//! New connections of the state link: the URL read once ([`ConnInfo`]), the password looked up
//! at every connection (a rotated password file is read again), and the TLS files read again
//! when they changed since the last connection (`credentials::Reloading`).
//!
//! The connections of a store are long-lived: a new one is made at start and whenever the last
//! one broke (the server restarted, the network dropped, the server ended the session). That is
//! when renewed certificates take effect; nothing drops a working connection to take them.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use postgres::config::SslMode as ClientSslMode;
use postgres::{Client, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::conninfo::{ConnInfo, Env, SslMode};
use super::error::db_error;
use super::tls::{Material, client_config};
use crate::credentials::{Reload, Reloading, Secret};
use crate::events::Event;
use crate::state::StateError;
use crate::state::error::describe;

/// The most credential events kept for the host to collect (a host that never collects them
/// keeps only the last ones).
const KEPT_EVENTS: usize = 16;

/// Makes the connections of one `[host] state` URL.
pub(crate) struct Connector {
    info: ConnInfo,
    env: Env,
    /// The TLS files, read again when they change; none with `sslmode=disable`.
    tls: Option<Mutex<Reloading<Material>>>,
    /// `CredentialsReloaded` and `CredentialsRefused` events not yet collected.
    events: Mutex<Vec<Event>>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("server", &self.info.server)
            .field("mode", &self.info.mode)
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// Reads `url` and its TLS files (with this process's environment): a URL that cannot be
    /// used, a missing file or a key others may read fails here, at start.
    pub(crate) fn new(url: &str) -> Result<Connector, StateError> {
        Connector::with_env(url, Env::process())
    }

    pub(crate) fn with_env(url: &str, env: Env) -> Result<Connector, StateError> {
        let info = ConnInfo::parse(url, &env).map_err(|e| StateError::Url {
            reason: e.to_string(),
        })?;
        let tls =
            if info.mode == SslMode::Disable {
                None
            } else {
                let files = info.tls.clone();
                let reloading = Reloading::new(files.paths(), move || Material::read(&files))
                    .map_err(|e| StateError::Link {
                        server: info.server.clone(),
                        reason: e.to_string(),
                    })?;
                Some(Mutex::new(reloading))
            };
        Ok(Connector {
            info,
            env,
            tls,
            events: Mutex::new(Vec::new()),
        })
    }

    /// A new connection. With leases of `ttl`, a session left inside a transaction for a quarter
    /// of the TTL (its host frozen, or cut off, in the middle of a write) is ended by the
    /// server, and a statement waits at most half the TTL for a lock: a frozen host never holds
    /// the locks the other hosts need to take its jobs over, and one that waits for a lock a
    /// frozen host holds gets it once the server has ended that session, rather than giving up
    /// at the same instant.
    pub(crate) fn connect(&self, ttl: Option<Duration>) -> Result<Client, StateError> {
        let server = &self.info.server;
        let mut config = self.info.config.clone();
        let (password, warning) = self.info.password(&self.env);
        if let Some(warning) = warning {
            tracing::warn!(server = %server, "{warning}");
        }
        if let Some(password) = &password {
            config.password(password.expose());
        }
        let mut client = match &self.tls {
            None => config
                .connect(NoTls)
                .map_err(|err| self.connect_error(err, &password))?,
            Some(tls) => {
                let tls_config =
                    client_config(self.info.mode, &self.material(tls)).map_err(|reason| {
                        StateError::Link {
                            server: server.clone(),
                            reason,
                        }
                    })?;
                match config.connect(MakeRustlsConnect::new(tls_config)) {
                    // libpq's `prefer`: whatever failed over TLS is tried once without; when
                    // that fails too, both causes are said (as libpq does).
                    Err(tls_error) if self.info.mode == SslMode::Prefer => {
                        config.ssl_mode(ClientSslMode::Disable);
                        match config.connect(NoTls) {
                            Ok(client) => client,
                            // The same refusal both ways (a password, a role): said once.
                            Err(plain) if describe(&plain) == describe(&tls_error) => {
                                return Err(self.connect_error(plain, &password));
                            }
                            Err(plain) => {
                                return Err(StateError::Link {
                                    server: server.clone(),
                                    reason: format!(
                                        "over TLS: {}; without TLS: {}",
                                        describe(&tls_error),
                                        describe(&plain)
                                    ),
                                });
                            }
                        }
                    }
                    connected => connected.map_err(|err| self.connect_error(err, &password))?,
                }
            }
        };
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

    /// A failed connection as a state error. The client's own "password missing" does not say
    /// where a password was looked for: this does.
    fn connect_error(&self, err: postgres::Error, password: &Option<Secret>) -> StateError {
        let server = &self.info.server;
        let missing = password.is_none()
            && std::error::Error::source(&err)
                .is_some_and(|cause| cause.to_string() == "password missing");
        if !missing {
            return db_error(&format!("connect to {server}"))(err);
        }
        StateError::Link {
            server: server.clone(),
            reason: format!(
                "the server asks for a password and there is none: not in the URL, not in \
                 PGPASSWORD, and {}",
                self.info.password_file(&self.env).map_or_else(
                    || "no password file (PGPASSFILE or ~/.pgpass)".to_string(),
                    |path| format!("no line of {} matches", path.display())
                )
            ),
        }
    }

    /// The TLS material for a new connection: read again when a file changed since the last
    /// one, the last good one kept (and a `CredentialsRefused` event) when the new files cannot
    /// be used.
    fn material(&self, tls: &Mutex<Reloading<Material>>) -> std::sync::Arc<Material> {
        let reloading = lock(tls);
        if let Some(reload) = reloading.refresh() {
            let event = reload.event();
            match &reload {
                Reload::Reloaded { .. } => {
                    tracing::info!(server = %self.info.server, "{}", event.message);
                }
                Reload::Refused { .. } => {
                    tracing::warn!(server = %self.info.server, "{}", event.message);
                }
            }
            let mut events = lock(&self.events);
            if events.len() == KEPT_EVENTS {
                events.remove(0);
            }
            events.push(event);
        }
        reloading.current()
    }

    /// The `CredentialsReloaded` and `CredentialsRefused` events since the last call, for the
    /// host's event log.
    pub(crate) fn take_events(&self) -> Vec<Event> {
        std::mem::take(&mut *lock(&self.events))
    }
}

/// Whether the state link of `url` can be made as far as this host alone can tell, without
/// connecting: the URL, its `sslmode` and its TLS files (`flowscale validate`).
pub(crate) fn check_link(url: &str) -> Result<(), StateError> {
    Connector::new(url).map(|_| ())
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
