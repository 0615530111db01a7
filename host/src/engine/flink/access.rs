//! How the REST client reaches one cluster: plain HTTP, or TLS with the cluster's CA (the
//! system's roots by default) and client certificate, and the `Authorization` header of its
//! token or password. Built from the cluster's files through [`crate::credentials`], and
//! rebuilt when one of them changes: the files are re-checked (a `stat` each) before every
//! request, so a rotated certificate or token is used from the next connection on without a
//! restart, and a file that changes into something unusable leaves the last good setup in
//! place.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use base64::Engine as _;
use rustls::pki_types::PrivateKeyDer;
use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsConfig};

use crate::config::{ClusterSpec, authorization};
use crate::credentials::crypto_provider;
use crate::credentials::{
    CredentialError, Reloading, Secret, certified_key, read_certificates, read_private_key,
};
use crate::events::Event;

/// Where a cluster is and how long its requests may take: what an agent is built from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Endpoint {
    /// The REST URL.
    pub(crate) rest_url: String,
    /// Upper bound of one request.
    pub(crate) request_timeout: Duration,
    /// Upper bound of establishing the connection.
    pub(crate) connect_timeout: Duration,
}

/// What one request is sent with: the agent (its connection pool and TLS setup) and the value
/// of the `Authorization` header, if any.
pub(crate) struct Connection {
    pub(crate) agent: ureq::Agent,
    /// The whole header value (`Bearer ...` or `Basic ...`); never printed.
    pub(crate) authorization: Option<Secret>,
}

/// Who a cluster is in messages: its name and address, or its address alone.
pub(crate) fn cluster_label(rest: &str, cluster: Option<&ClusterSpec>) -> String {
    match cluster {
        Some(cluster) => format!("cluster `{}` at {rest}", cluster.name),
        None => rest.to_string(),
    }
}

/// One cluster's connection setup, shared by every client of the cluster, reloaded when its
/// files change. Reload events wait here until a job's cycle takes them.
pub(crate) struct ClusterAccess {
    /// `cluster `<name>` at <url>`, or the URL: what messages call it.
    pub(crate) label: String,
    state: Mutex<State>,
}

struct State {
    connection: Source,
    events: Vec<Event>,
}

/// Where a connection setup comes from.
enum Source {
    /// A cluster without files (its own `rest`): made once.
    Fixed(Arc<Connection>),
    /// A named cluster's files, reloaded when they change.
    Files(Reloading<Connection>),
}

impl std::fmt::Debug for ClusterAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterAccess")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl ClusterAccess {
    /// Access to a cluster without a `[clusters.<name>]` table: plain HTTP, or TLS verified
    /// against the system's roots.
    pub(crate) fn unnamed(options: &Endpoint) -> ClusterAccess {
        ClusterAccess {
            label: cluster_label(&options.rest_url, None),
            state: Mutex::new(State {
                connection: Source::Fixed(Arc::new(unnamed(options))),
                events: Vec::new(),
            }),
        }
    }

    /// Access to the named cluster `cluster` at `options`' URL, from its files. Fails when
    /// one of them cannot be used; `validate` reports the same before anything runs.
    pub(crate) fn open(
        options: &Endpoint,
        cluster: &ClusterSpec,
    ) -> Result<ClusterAccess, CredentialError> {
        let setup = Setup {
            options: options.clone(),
            cluster: cluster.clone(),
        };
        let connection = Source::Files(Reloading::new(cluster.files(), move || setup.connect())?);
        Ok(ClusterAccess {
            label: cluster_label(&options.rest_url, Some(cluster)),
            state: Mutex::new(State {
                connection,
                events: Vec::new(),
            }),
        })
    }

    /// The connection setup to send the next request with, after re-checking the files: a
    /// reload (or a refused one) leaves an event for [`ClusterAccess::take_events`].
    pub(crate) fn connection(&self) -> Arc<Connection> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let reloading = match &mut state.connection {
            Source::Fixed(connection) => return Arc::clone(connection),
            Source::Files(reloading) => reloading,
        };
        let reload = reloading.refresh();
        let current = reloading.current();
        if let Some(reload) = reload {
            let event = reload.event();
            let message = format!("{}: {}", self.label, event.message);
            tracing::info!(cluster = %self.label, "{}", event.message);
            state.events.push(Event { message, ..event });
        }
        current
    }

    /// The reload events not yet reported.
    pub(crate) fn take_events(&self) -> Vec<Event> {
        std::mem::take(
            &mut self
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .events,
        )
    }
}

/// True for an `https://` URL.
pub(crate) fn is_https(url: &str) -> bool {
    url.get(..8)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
}

/// The connection of a cluster without files: nothing to read but the system's roots.
fn unnamed(options: &Endpoint) -> Connection {
    let tls = is_https(&options.rest_url).then(|| {
        TlsConfig::builder()
            .root_certs(RootCerts::Specific(Arc::new(system_roots())))
            .unversioned_rustls_crypto_provider(crypto_provider())
            .build()
    });
    Connection {
        agent: agent(options, tls),
        authorization: None,
    }
}

/// What a named cluster's connection setup is made from; loading it reads the files again.
struct Setup {
    options: Endpoint,
    cluster: ClusterSpec,
}

impl Setup {
    fn connect(&self) -> Result<Connection, CredentialError> {
        let cluster = &self.cluster;
        let tls = if is_https(&self.options.rest_url) {
            Some(tls_config(cluster)?)
        } else {
            None
        };
        let authorization = cluster.auth.as_ref().map(authorization).transpose()?;
        Ok(Connection {
            agent: agent(&self.options, tls),
            authorization,
        })
    }
}

/// The agent of a cluster: the request timeouts, and TLS when given.
pub(crate) fn agent(options: &Endpoint, tls: Option<TlsConfig>) -> ureq::Agent {
    let builder = ureq::Agent::config_builder()
        .timeout_global(Some(options.request_timeout))
        .timeout_connect(Some(options.connect_timeout))
        // Error statuses are read like any answer so their body (Flink's `errors`) survives.
        .http_status_as_error(false)
        // No redirect is followed: a PUT of resource requirements must reach the address it
        // was meant for, and a TLS port's redirect of a plain request (Flink answers http://
        // on its https port with one) is reported as what it means.
        .max_redirects(0)
        // Without a TLS setup of its own, an https redirect trusts nothing rather than a
        // bundled list of roots.
        .tls_config(tls.unwrap_or_else(|| {
            TlsConfig::builder()
                .root_certs(RootCerts::Specific(Arc::new(Vec::new())))
                .unversioned_rustls_crypto_provider(crypto_provider())
                .build()
        }));
    builder.build().into()
}

/// The TLS setup of a cluster: its `ca-file` or the system's roots, and its client
/// certificate, checked to be the key's (ureq would panic on a pair that does not match).
fn tls_config(cluster: &ClusterSpec) -> Result<TlsConfig, CredentialError> {
    let roots = match cluster.ca_file.as_deref() {
        Some(ca) => read_certificates(ca)?
            .into_iter()
            .map(|der| Certificate::from_der(der.as_ref()).to_owned())
            .collect(),
        None => system_roots(),
    };
    let mut builder = TlsConfig::builder()
        .root_certs(RootCerts::Specific(Arc::new(roots)))
        .unversioned_rustls_crypto_provider(crypto_provider());
    if let Some((cert_file, key_file)) = &cluster.client_cert {
        let chain = read_certificates(cert_file)?;
        let key = read_private_key(key_file)?;
        certified_key(chain.clone(), key.clone_key(), cert_file, key_file)
            .map_err(|(_, err)| err)?;
        let chain: Vec<Certificate<'static>> = chain
            .iter()
            .map(|der| Certificate::from_der(der.as_ref()).to_owned())
            .collect();
        builder = builder.client_cert(Some(ClientCert::new_with_certs(
            &chain,
            ureq_key(&key, key_file)?,
        )));
    }
    Ok(builder.build())
}

/// The key as ureq takes it. ureq builds a key from DER only with a kind it does not export,
/// so the DER read by [`read_private_key`] goes back into PEM (the label says the kind) for
/// ureq's own reader.
fn ureq_key(
    key: &PrivateKeyDer<'static>,
    key_file: &std::path::Path,
) -> Result<PrivateKey<'static>, CredentialError> {
    let label = match key {
        PrivateKeyDer::Pkcs1(_) => "RSA PRIVATE KEY",
        PrivateKeyDer::Sec1(_) => "EC PRIVATE KEY",
        _ => "PRIVATE KEY",
    };
    let body = base64::engine::general_purpose::STANDARD.encode(key.secret_der());
    let pem = Secret::new(format!(
        "-----BEGIN {label}-----\n{body}\n-----END {label}-----\n"
    ));
    PrivateKey::from_pem(pem.expose().as_bytes()).map_err(|err| CredentialError::BadPem {
        path: key_file.to_path_buf(),
        what: format!("unusable key ({err})"),
    })
}

/// The system's trusted roots: on Debian, /etc/ssl/certs/ca-certificates.crt (the
/// `ca-certificates` package), or SSL_CERT_FILE / SSL_CERT_DIR when set. None found is not an
/// error here: the handshake then fails with "not signed by a trusted CA", and this warning
/// says why.
fn system_roots() -> Vec<Certificate<'static>> {
    let found = rustls_native_certs::load_native_certs();
    if found.certs.is_empty() {
        let why = found
            .errors
            .first()
            .map_or_else(|| "none found".to_string(), ToString::to_string);
        tracing::warn!(
            "the system's trusted roots cannot be read ({why}): https clusters need a \
             `ca-file`, or SSL_CERT_FILE"
        );
    }
    found
        .certs
        .into_iter()
        .map(|der| Certificate::from_der(der.as_ref()).to_owned())
        .collect()
}
