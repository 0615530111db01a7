//! `[clusters.<name>]`: a Flink cluster defined once in the fleet file, with how to reach it
//! (its REST URL, the CA that signs its certificate, the client certificate it asks for, the
//! token or password of the proxy in front of it) and its own request limit. Jobs name it with
//! `cluster = "<name>"` instead of repeating `rest`.
//!
//! ```toml
//! [clusters.prod]
//! rest = "https://flink.prod.example:8081"
//! ca-file = "tls/prod-ca.pem"          # default: the system's trusted roots
//! cert-file = "tls/flowscale.pem"      # client certificate (mutual TLS): both or neither
//! key-file = "tls/flowscale.key"       # must be `chmod 600`
//! token-file = "secrets/prod.token"    # `Authorization: Bearer <contents>`, or:
//! # basic-auth-file = "secrets/prod.basic"  # one line `user:password`
//! max-requests = 8                     # overrides `[host] max-requests-per-cluster`
//! ```
//!
//! The files are read here too, so that `validate` (and `run`, before anything starts)
//! reports a missing or unreadable file, a key others can read, or a key that is not the
//! certificate's, with the line that names it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use base64::Engine as _;

use super::closest::closest;
use super::reference::{CLUSTER_MAX_REQUESTS, CLUSTER_SLOTS, names_in};
use super::rest_url::check_rest_url;
use super::spec::Section;
use crate::credentials::{
    CredentialError, Secret, certified_key, read_certificates, read_private_key, read_secret,
};

/// The keys of a `[clusters.<name>]` table, in the reference's order.
fn cluster_keys() -> Vec<&'static str> {
    names_in(Section::Clusters)
}

/// The largest `slots` of a simulated cluster.
const MAX_SLOTS: usize = CLUSTER_SLOTS.count_max();

/// How a cluster's requests authenticate beyond TLS (to an authenticating proxy in front of the
/// REST API, typically).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterAuth {
    /// `token-file`: `Authorization: Bearer <contents>`.
    Token(PathBuf),
    /// `basic-auth-file`: one line `user:password`, sent as HTTP basic authentication.
    Basic(PathBuf),
}

impl ClusterAuth {
    /// The file holding the secret.
    pub(crate) fn file(&self) -> &Path {
        match self {
            ClusterAuth::Token(file) | ClusterAuth::Basic(file) => file,
        }
    }
}

/// One `[clusters.<name>]` table, its paths resolved from the fleet file's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSpec {
    /// The table's name, what jobs refer to it by.
    pub(crate) name: String,
    /// Base URL of the REST API (`http://` or `https://`).
    pub(crate) rest: String,
    /// PEM bundle of the CAs trusted for this cluster; the system's roots when unset.
    pub(crate) ca_file: Option<PathBuf>,
    /// The client certificate (chain) and its key, for a cluster that asks for one.
    pub(crate) client_cert: Option<(PathBuf, PathBuf)>,
    /// A token or a user and password sent with every request.
    pub(crate) auth: Option<ClusterAuth>,
    /// Requests in flight to this cluster at once; `[host] max-requests-per-cluster` when unset.
    pub(crate) max_requests: Option<usize>,
}

impl ClusterSpec {
    /// Every credential file of the cluster, in the order of its keys.
    pub(crate) fn files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = self.ca_file.iter().cloned().collect();
        if let Some((cert, key)) = &self.client_cert {
            files.push(cert.clone());
            files.push(key.clone());
        }
        files.extend(self.auth.iter().map(|auth| auth.file().to_path_buf()));
        files
    }
}

/// A `[clusters.<name>]` table with `slots` and no `rest`: a simulated cluster, whose slots
/// the `engine = "sim"` jobs naming it share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimClusterSpec {
    /// The table's name.
    pub(crate) name: String,
    /// Its task slots.
    pub(crate) slots: u32,
}

/// A cluster a job names.
#[derive(Debug, Clone, Copy)]
pub(super) enum FoundCluster<'c> {
    /// A Flink cluster (`rest`).
    Flink(&'c Arc<ClusterSpec>),
    /// A simulated cluster (`slots`).
    Sim(&'c Arc<SimClusterSpec>),
}

/// What the fleet parser offers the cluster tables: located errors, and its readers of values.
/// A trait so that this file does not import the parser (which imports this file).
pub(super) trait TableReader {
    /// The 1-based line of a value.
    fn line_of_span(&self, offset: usize) -> usize;
    /// Records an error at `line` about `path`.
    fn error_at(&mut self, line: usize, path: &str, message: String);
    /// A string value, or an error.
    fn read_string(&mut self, value: &Spanned<DeValue<'_>>, path: &str) -> Option<String>;
    /// A whole number from 1 to `max`, or an error.
    fn read_count(&mut self, value: &Spanned<DeValue<'_>>, path: &str, max: usize)
    -> Option<usize>;
    /// A key that is not one of `known` (an error for a typo, else a warning).
    fn unknown_key(
        &mut self,
        key: &Spanned<std::borrow::Cow<'_, str>>,
        parent: &str,
        known: &[&str],
    );
}

/// The `[clusters]` of a fleet file.
#[derive(Debug, Default)]
pub(super) struct Clusters {
    /// Those that could be read, by name.
    valid: BTreeMap<String, Arc<ClusterSpec>>,
    /// The simulated ones, by name.
    simulated: BTreeMap<String, Arc<SimClusterSpec>>,
    /// The names of those that could not (their errors are recorded): a job naming one is not
    /// told the name is unknown.
    refused: BTreeSet<String>,
}

/// The largest `max-requests` of a cluster (as `[host] max-requests-per-cluster`).
const MAX_REQUESTS: usize = CLUSTER_MAX_REQUESTS.count_max();

/// Reads the `clusters` table: every cluster that could be read, each problem recorded.
pub(super) fn read_clusters(
    p: &mut dyn TableReader,
    value: &Spanned<DeValue<'_>>,
    base: &Path,
) -> Clusters {
    let mut clusters = Clusters::default();
    let DeValue::Table(table) = value.get_ref() else {
        let line = p.line_of_span(value.span().start);
        p.error_at(
            line,
            "clusters",
            "must be a table of clusters (`[clusters.<name>]`)".to_string(),
        );
        return clusters;
    };
    for (key, value) in table.iter() {
        let name = key.get_ref().to_string();
        let at = format!("clusters.{name}");
        match value.get_ref() {
            DeValue::Table(fields) => match read_cluster(p, &name, &at, fields, value, base) {
                Some(Read::Flink(cluster)) => {
                    clusters.valid.insert(name, Arc::new(cluster));
                }
                Some(Read::Sim(cluster)) => {
                    clusters.simulated.insert(name, Arc::new(cluster));
                }
                None => {
                    clusters.refused.insert(name);
                }
            },
            _ => {
                let line = p.line_of_span(value.span().start);
                p.error_at(
                    line,
                    &at,
                    format!("must be a table (`[clusters.{name}]`) with at least `rest`"),
                );
                clusters.refused.insert(name);
            }
        }
    }
    clusters
}

/// A path key's value and its line.
type Located = Option<(PathBuf, usize)>;

/// A cluster table that could be read.
enum Read {
    Flink(ClusterSpec),
    Sim(SimClusterSpec),
}

/// A table with `slots` and no `rest`: a simulated cluster, which takes no Flink key (each one
/// is an error at its line).
fn read_sim_cluster(
    p: &mut dyn TableReader,
    name: &str,
    at: &str,
    table: &DeTable<'_>,
    slots: usize,
) -> Option<SimClusterSpec> {
    let mut ok = true;
    for (field, value) in table.iter() {
        let field_name: &str = field.get_ref().as_ref();
        if field_name != "slots" && cluster_keys().contains(&field_name) {
            let line = p.line_of_span(value.span().start);
            p.error_at(
                line,
                &format!("{at}.{field_name}"),
                format!(
                    "`{field_name}` is a Flink cluster's key, and `{name}` is a simulated \
                     cluster (`slots`, no `rest`)"
                ),
            );
            ok = false;
        }
    }
    ok.then(|| SimClusterSpec {
        name: name.to_string(),
        slots: u32::try_from(slots).unwrap_or(u32::MAX),
    })
}

fn read_cluster(
    p: &mut dyn TableReader,
    name: &str,
    at: &str,
    table: &DeTable<'_>,
    whole: &Spanned<DeValue<'_>>,
    base: &Path,
) -> Option<Read> {
    let mut rest: Option<(String, usize)> = None;
    let mut slots: Option<(Option<usize>, usize)> = None;
    let (mut ca, mut cert, mut key, mut token, mut basic): (
        Located,
        Located,
        Located,
        Located,
        Located,
    ) = (None, None, None, None, None);
    let mut max_requests = None;
    for (field, value) in table.iter() {
        let field_name: &str = field.get_ref().as_ref();
        let path = format!("{at}.{field_name}");
        let line = p.line_of_span(value.span().start);
        let file = |p: &mut dyn TableReader| {
            p.read_string(value, &path)
                .map(|text| (base.join(text), line))
        };
        match field_name {
            "rest" => rest = p.read_string(value, &path).map(|url| (url, line)),
            "ca-file" => ca = file(p),
            "cert-file" => cert = file(p),
            "key-file" => key = file(p),
            "token-file" => token = file(p),
            "basic-auth-file" => basic = file(p),
            "max-requests" => max_requests = p.read_count(value, &path, MAX_REQUESTS),
            "slots" => slots = Some((p.read_count(value, &path, MAX_SLOTS), line)),
            _ => p.unknown_key(field, at, &cluster_keys()),
        }
    }
    let start = p.line_of_span(whole.span().start);
    let mut ok = true;
    let (rest, rest_line) = match (rest, slots) {
        (None, Some((slots, _))) => {
            return read_sim_cluster(p, name, at, table, slots?).map(Read::Sim);
        }
        (Some(_), Some((_, line))) => {
            p.error_at(
                line,
                &format!("{at}.slots"),
                format!(
                    "`slots` is for a simulated cluster (without `rest`); `{name}` is a Flink \
                     cluster, whose slots are its TaskManagers'"
                ),
            );
            return None;
        }
        (Some(rest), None) => rest,
        (None, None) => {
            p.error_at(
                start,
                at,
                format!(
                    "cluster `{name}` needs `rest` (a Flink cluster, e.g. rest = \
                     \"https://flink:8081\") or `slots` (a simulated cluster, e.g. slots = 64)"
                ),
            );
            return None;
        }
    };
    if let Err(err) = check_rest_url(&rest) {
        p.error_at(rest_line, &format!("{at}.rest"), err.to_string());
        ok = false;
    }
    let line = |located: &Located| located.as_ref().map_or(start, |(_, line)| *line);
    let (cert_line, key_line) = (line(&cert), line(&key));
    let auth_line = line(if token.is_some() { &token } else { &basic });
    let client_cert = match (cert, key) {
        (Some((cert, _)), Some((key, _))) => Some((cert, key)),
        (None, None) => None,
        (Some((_, line)), None) => {
            p.error_at(
                line,
                &format!("{at}.cert-file"),
                "`cert-file` needs `key-file` too (the client certificate's private key)"
                    .to_string(),
            );
            ok = false;
            None
        }
        (None, Some((_, line))) => {
            p.error_at(
                line,
                &format!("{at}.key-file"),
                "`key-file` needs `cert-file` too (the certificate of that key)".to_string(),
            );
            ok = false;
            None
        }
    };
    let auth = match (token, basic) {
        (Some(_), Some((_, line))) => {
            p.error_at(
                line,
                &format!("{at}.basic-auth-file"),
                "`token-file` and `basic-auth-file` cannot both be set: a request carries one \
                 `Authorization` header"
                    .to_string(),
            );
            ok = false;
            None
        }
        (Some((file, _)), None) => Some(ClusterAuth::Token(file)),
        (None, Some((file, _))) => Some(ClusterAuth::Basic(file)),
        (None, None) => None,
    };
    // The files, read as the client will read them: each problem at the line naming the file.
    if let Some((ca, line)) = &ca
        && let Err(err) = read_certificates(ca)
    {
        p.error_at(*line, &format!("{at}.ca-file"), err.to_string());
        ok = false;
    }
    if let Some((cert, key)) = &client_cert {
        let chain = read_certificates(cert).map_err(|err| {
            p.error_at(cert_line, &format!("{at}.cert-file"), err.to_string());
        });
        let private = read_private_key(key).map_err(|err| {
            p.error_at(key_line, &format!("{at}.key-file"), err.to_string());
        });
        match (chain, private) {
            (Ok(chain), Ok(private)) => {
                if let Err((_, err)) = certified_key(chain, private, cert, key) {
                    p.error_at(key_line, &format!("{at}.key-file"), err.to_string());
                    ok = false;
                }
            }
            _ => ok = false,
        }
    }
    if let Some(auth) = &auth
        && let Err(err) = authorization(auth)
    {
        let key = match auth {
            ClusterAuth::Token(_) => "token-file",
            ClusterAuth::Basic(_) => "basic-auth-file",
        };
        p.error_at(auth_line, &format!("{at}.{key}"), err.to_string());
        ok = false;
    }
    let tls_files = ca.is_some() || client_cert.is_some();
    if tls_files && !rest.to_ascii_lowercase().starts_with("https://") {
        p.error_at(
            rest_line,
            &format!("{at}.rest"),
            format!(
                "`{rest}` is plain http, yet the cluster has `ca-file` or `cert-file`: use an \
                 https:// URL"
            ),
        );
        ok = false;
    }
    ok.then(|| {
        Read::Flink(ClusterSpec {
            name: name.to_string(),
            rest,
            ca_file: ca.map(|(file, _)| file),
            client_cert,
            auth,
            max_requests,
        })
    })
}

/// The `Authorization` header value of `auth`, read from its file: `Bearer <token>`, or
/// `Basic <base64 of user:password>` from a one-line `user:password`.
pub(crate) fn authorization(auth: &ClusterAuth) -> Result<Secret, CredentialError> {
    match auth {
        ClusterAuth::Token(file) => {
            let token = read_secret(file)?;
            Ok(Secret::new(format!("Bearer {}", token.expose())))
        }
        ClusterAuth::Basic(file) => {
            let pair = read_secret(file)?;
            let valid = pair
                .expose()
                .split_once(':')
                .is_some_and(|(user, _)| !user.is_empty())
                && !pair.expose().contains('\n');
            if !valid {
                return Err(CredentialError::BadSecret {
                    path: file.clone(),
                    what: "expected one line `user:password`",
                });
            }
            let encoded = base64::engine::general_purpose::STANDARD.encode(pair.expose());
            Ok(Secret::new(format!("Basic {encoded}")))
        }
    }
}

/// The cluster a job names: `Ok(None)` when it is defined but could not be read (its own
/// errors say why), or the message of its error: the names there are and the closest.
pub(super) fn find_cluster<'c>(
    clusters: &'c Clusters,
    name: &str,
) -> Result<Option<FoundCluster<'c>>, String> {
    if let Some(cluster) = clusters.valid.get(name) {
        return Ok(Some(FoundCluster::Flink(cluster)));
    }
    if let Some(cluster) = clusters.simulated.get(name) {
        return Ok(Some(FoundCluster::Sim(cluster)));
    }
    if clusters.refused.contains(name) {
        return Ok(None);
    }
    let mut known: Vec<&str> = clusters
        .valid
        .keys()
        .chain(clusters.simulated.keys())
        .chain(&clusters.refused)
        .map(String::as_str)
        .collect();
    known.sort_unstable();
    if known.is_empty() {
        return Err(format!(
            "unknown cluster `{name}`: the file defines no `[clusters.<name>]` table"
        ));
    }
    let hint = closest(name, known.iter().copied())
        .map(|c| format!("did you mean `{c}`? "))
        .unwrap_or_default();
    Err(format!(
        "unknown cluster `{name}` ({hint}defined: {})",
        known.join(", ")
    ))
}
