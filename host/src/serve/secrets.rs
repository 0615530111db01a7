//! What the server guards itself with and rotates while it runs: the bearer token (inline, or
//! from `[host] api-token-file`) and the certificate and key of HTTPS.
//!
//! The files are checked again before every new connection (a `stat` each, far cheaper than a
//! handshake) and whenever the host looks, so a renewed certificate or a changed token is used
//! from the next connection on without a restart; a file changed into something unusable keeps
//! the last good value. What happened is queued as `CredentialsReloaded` / `CredentialsRefused`
//! events for the host to print: the server's thread has no log of its own.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rustls::sign::CertifiedKey;

use super::token::ApiToken;
use crate::config::{TlsFiles, load_tls_files, load_token_file};
use crate::credentials::{CredentialError, Reload, Reloading, Secret};
use crate::events::Event;

/// Events kept for the host at most; older ones are dropped (a host that never looks, such as
/// a run of one step, must not grow without bound).
const MAX_QUEUED_EVENTS: usize = 64;

/// The token file and its reloading value.
struct TokenFile {
    path: PathBuf,
    token: Reloading<Secret>,
}

/// The server's token and TLS identity, current.
pub(crate) struct Secrets {
    /// What requests are checked against now.
    token: ApiToken,
    /// Where `token` comes from when it is read from a file.
    token_file: Mutex<Option<TokenFile>>,
    /// The certificate and key of HTTPS; `None`: plain HTTP.
    tls: Option<Reloading<CertifiedKey>>,
    /// What changed, for the host to print.
    events: Mutex<VecDeque<Event>>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn token_file(path: &Path) -> Result<TokenFile, CredentialError> {
    let file = path.to_path_buf();
    let token = Reloading::new(vec![file.clone()], move || load_token_file(&file))?;
    Ok(TokenFile {
        path: path.to_path_buf(),
        token,
    })
}

impl Secrets {
    /// Reads the token file and the TLS files, if any; an error names the file that cannot be
    /// used.
    pub(crate) fn new(
        token: Option<&str>,
        token_path: Option<&Path>,
        tls: Option<&TlsFiles>,
    ) -> Result<Secrets, CredentialError> {
        let tls = match tls {
            Some(files) => {
                let files = files.clone();
                let paths = vec![files.cert.clone(), files.key.clone()];
                Some(Reloading::new(paths, move || load_tls_files(&files))?)
            }
            None => None,
        };
        let secrets = Secrets {
            token: ApiToken::new(None),
            token_file: Mutex::new(None),
            tls,
            events: Mutex::new(VecDeque::new()),
        };
        secrets.set_token(token, token_path)?;
        Ok(secrets)
    }

    /// What requests are checked against.
    pub(crate) fn token(&self) -> &ApiToken {
        &self.token
    }

    /// Whether the server speaks HTTPS.
    pub(crate) fn tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The certificate and key of the next handshake.
    pub(crate) fn certified_key(&self) -> Option<Arc<CertifiedKey>> {
        self.tls.as_ref().map(Reloading::current)
    }

    /// Replaces where the token comes from (a reload of the fleet file): `token` itself, the
    /// file `path` (read now, and again when it changes), or nothing. A file that cannot be
    /// read leaves the token as it was.
    pub(crate) fn set_token(
        &self,
        token: Option<&str>,
        path: Option<&Path>,
    ) -> Result<(), CredentialError> {
        let mut file = lock(&self.token_file);
        match path {
            Some(path) => {
                if file.as_ref().is_none_or(|f| f.path != path) {
                    *file = Some(token_file(path)?);
                }
                if let Some(f) = file.as_ref() {
                    self.token.set(Some(f.token.current().expose()));
                }
            }
            None => {
                *file = None;
                self.token.set(token);
            }
        }
        Ok(())
    }

    /// Checks the files for a change and takes in what changed; the outcome is queued as an
    /// event.
    pub(crate) fn refresh(&self) {
        let mut reloads = Vec::new();
        if let Some(tls) = &self.tls
            && let Some(reload) = tls.refresh()
        {
            reloads.push(reload);
        }
        {
            let file = lock(&self.token_file);
            if let Some(f) = file.as_ref()
                && let Some(reload) = f.token.refresh()
            {
                if matches!(reload, Reload::Reloaded { .. }) {
                    self.token.set(Some(f.token.current().expose()));
                }
                reloads.push(reload);
            }
        }
        for reload in reloads {
            self.queue(reload.event());
        }
    }

    /// Queues `event` for the host.
    pub(crate) fn queue(&self, event: Event) {
        let mut events = lock(&self.events);
        if events.len() == MAX_QUEUED_EVENTS {
            events.pop_front();
        }
        events.push_back(event);
    }

    /// The events queued since the last call.
    pub(crate) fn take_events(&self) -> Vec<Event> {
        lock(&self.events).drain(..).collect()
    }
}
