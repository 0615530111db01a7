//! The fleet configuration file: host settings, defaults for every job, and the jobs.
//!
//! ```toml
//! [host]
//! plugins = "plugins"          # default: plugins/ beside this file
//! interval = "10s"             # control-loop interval
//! plugin-isolation = "process" # in-process (default) | process: a worker process per plugin
//! plugin-call-timeout = "1s"   # deadline of one call into a plugin
//! workers = 4                  # threads that run the jobs' cycles (default: the cores)
//! max-requests-per-cluster = 4 # requests in flight to one Flink cluster at once
//!
//! [defaults]                   # flat Flink-style keys for every job; a job's own keys win
//! "scaling.alignment.mode" = "BALANCED"
//!
//! [[jobs]]
//! name = "orders"
//! engine = "sim"               # sim (default) | flink | replay
//! job = "jobs/keyed.toml"      # sim: the simulated job
//! [jobs.config]
//! "scaling.alignment.mode" = "buckets"
//! "scaling.alignment.mode.buckets.class" = "bucket-align"
//! ```
//!
//! Keys are flat and quoted: TOML cannot make `scaling.alignment.mode` both a string and a
//! table. Unquoted dotted keys are flattened back into the same flat keys where TOML allows them.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use toml::Spanned;
use toml::de::{DeInteger, DeTable, DeValue};

use super::closest::{closest, typo_of};
use super::clusters::{
    ClusterSpec, Clusters, FoundCluster, SimClusterSpec, TableReader, find_cluster, read_clusters,
};
use super::duration::{DurationRange, format_duration, parse_duration};
use super::errors::{ConfigErrors, Diagnostic};
use super::isolation::{DEFAULT_PLUGIN_CALL_TIMEOUT, PluginIsolation};
use super::job::{JobConfig, Origin};
use super::keys::canonical_key;
use super::known::{KeyPolicy, UnknownKey, check_key};
use super::reference::{
    HOST_INTERVAL, HOST_LEASE_TTL, HOST_MAX_REQUESTS_PER_CLUSTER, HOST_PLUGIN_CALL_TIMEOUT,
    HOST_WORKERS, names_in,
};
use super::rest_url::check_rest_url;
use super::server_files::{
    TlsFile, TlsFiles, load_token_file, read_tls_files, token_is_well_formed,
};
use super::spec::Section;

/// Default control-loop interval.
pub(crate) const DEFAULT_INTERVAL: Duration = HOST_INTERVAL.default_or_zero();

/// The valid range of the host interval (the reference's).
pub(crate) const INTERVAL_RANGE: DurationRange = HOST_INTERVAL.range;

/// Default of `[host] max-requests-per-cluster` (see the reference's entry for why).
pub(crate) const DEFAULT_MAX_REQUESTS_PER_CLUSTER: usize =
    HOST_MAX_REQUESTS_PER_CLUSTER.count_default();

/// The largest `[host] max-requests-per-cluster`.
pub(crate) const MAX_REQUESTS_PER_CLUSTER: usize = HOST_MAX_REQUESTS_PER_CLUSTER.count_max();

/// The largest `[host] workers`.
pub(crate) const MAX_WORKERS: usize = HOST_WORKERS.count_max();

/// Where plugins are discovered when nothing says otherwise: beside the fleet file for `run` and
/// `validate`, in the working directory for commands without a fleet file.
pub(crate) const DEFAULT_PLUGINS_DIR: &str = "plugins";

/// The keys of the `[host]` section, in the reference's order.
pub(super) fn host_keys() -> Vec<&'static str> {
    names_in(Section::Host)
}

/// The fields of a `[[jobs]]` entry, in the reference's order.
fn job_fields() -> Vec<&'static str> {
    names_in(Section::Jobs)
}

/// The lease TTL when `[host] lease-ttl` is unset.
pub(crate) const DEFAULT_LEASE_TTL: Duration = HOST_LEASE_TTL.default_or_zero();

/// The `[host]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct HostSettings {
    /// Where plugins are discovered.
    pub(crate) plugins_dir: PathBuf,
    /// Time between two cycles of a job.
    pub interval: Duration,
    /// Where per-job state is persisted (in memory when unset).
    pub(crate) state_dir: Option<PathBuf>,
    /// Where plugin code runs.
    pub(crate) plugin_isolation: PluginIsolation,
    /// The deadline of one call into a plugin.
    pub(crate) plugin_call_timeout: Duration,
    /// Threads that run the jobs' cycles; `None`: one per core.
    pub(crate) workers: Option<usize>,
    /// Requests in flight to one Flink cluster at once, across all its jobs.
    pub(crate) max_requests_per_cluster: usize,
    /// Where the HTTP server (metrics, API, dashboard) listens; no server when unset.
    pub(crate) listen: Option<SocketAddr>,
    /// The bearer token every request to the server must carry; required when `listen` is not
    /// a loopback address.
    pub(crate) api_token: Option<String>,
    /// `[host] api-token-file`: the file the bearer token is read from (and read again when it
    /// changes), so that the token stays out of the fleet file; not with `api_token`.
    pub(crate) api_token_file: Option<PathBuf>,
    /// `[host] tls-cert-file` and `tls-key-file`: the server speaks HTTPS with them.
    pub(crate) tls: Option<TlsFiles>,
    /// `[host] listen-plaintext`: another address than loopback may be served without TLS,
    /// for a TLS-terminating proxy in front.
    pub(crate) listen_plaintext: bool,
    /// `[host] state`: the PostgreSQL database (`postgres://USER@HOST:PORT/DB`) several hosts
    /// share the fleet through, instead of `state-dir`.
    pub(crate) state_url: Option<String>,
    /// `[host] id`: this host's name among the hosts sharing the database (default: hostname
    /// and process id).
    pub(crate) id: Option<String>,
    /// `[host] lease-ttl`: how long a job's lease holds without renewal.
    pub(crate) lease_ttl: Duration,
}

impl HostSettings {
    /// The settings of a `[host]` section that sets nothing but where plugins are: what a
    /// fleet file starts from, and what `simulate` runs with. Kept in one place so that a new
    /// setting gets one default.
    pub(crate) fn with_plugins_dir(plugins_dir: PathBuf) -> HostSettings {
        HostSettings {
            plugins_dir,
            interval: DEFAULT_INTERVAL,
            state_dir: None,
            plugin_isolation: PluginIsolation::default(),
            plugin_call_timeout: DEFAULT_PLUGIN_CALL_TIMEOUT,
            workers: None,
            max_requests_per_cluster: DEFAULT_MAX_REQUESTS_PER_CLUSTER,
            listen: None,
            api_token: None,
            api_token_file: None,
            tls: None,
            listen_plaintext: false,
            state_url: None,
            id: None,
            lease_ttl: DEFAULT_LEASE_TTL,
        }
    }
}

/// Why a listen address cannot be used as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ListenError {
    /// Not `IP:PORT`.
    #[error("expected IP:PORT such as \"127.0.0.1:9464\", got `{0}`")]
    Syntax(String),
    /// Another address than loopback without a token: anyone on the network could read it.
    #[error(
        "{0} is not a loopback address: set `[host] api-token-file` (or `api-token`) so that every request needs a bearer token"
    )]
    NeedsToken(SocketAddr),
    /// Another address than loopback in plaintext: the token and the fleet would cross the
    /// network readable by anyone on the path.
    #[error(
        "{0} is not a loopback address: set `[host] tls-cert-file` and `tls-key-file` so that the token and the answers cross the network encrypted, or `listen-plaintext = true` when a TLS-terminating proxy is in front"
    )]
    NeedsTls(SocketAddr),
    /// A token that cannot be sent in an HTTP header.
    #[error("api-token must be 16 to 256 visible ASCII characters (no spaces)")]
    BadToken,
}

/// The listen address of `text`.
pub(crate) fn parse_listen(text: &str) -> Result<SocketAddr, ListenError> {
    text.trim()
        .parse()
        .map_err(|_| ListenError::Syntax(text.to_string()))
}

/// Checks a listen address against how `host` protects the server: an inline token is well
/// formed, and only a loopback address may go without a token (inline or from a file) or, unless
/// `listen-plaintext` says a proxy encrypts in front, without TLS.
pub(crate) fn check_listen(addr: SocketAddr, host: &HostSettings) -> Result<(), ListenError> {
    check_listen_token(addr, host)?;
    check_listen_tls(addr, host)
}

/// The TLS half of [`check_listen`].
fn check_listen_tls(addr: SocketAddr, host: &HostSettings) -> Result<(), ListenError> {
    if addr.ip().is_loopback() || host.tls.is_some() || host.listen_plaintext {
        Ok(())
    } else {
        Err(ListenError::NeedsTls(addr))
    }
}

/// The token half of [`check_listen`]: what a reload can change while the server keeps the
/// socket and TLS setting it started with.
pub(crate) fn check_listen_token(addr: SocketAddr, host: &HostSettings) -> Result<(), ListenError> {
    match (&host.api_token, &host.api_token_file) {
        (Some(t), _) => check_token(t),
        (None, Some(_)) => Ok(()),
        (None, None) if !addr.ip().is_loopback() => Err(ListenError::NeedsToken(addr)),
        (None, None) => Ok(()),
    }
}

/// Checks that a token can be sent in an HTTP header and is long enough not to be guessed.
fn check_token(token: &str) -> Result<(), ListenError> {
    if token_is_well_formed(token) {
        Ok(())
    } else {
        Err(ListenError::BadToken)
    }
}

/// Which engine runs a job.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineSpec {
    /// The embedded simulator, with the simulated job's description.
    Sim {
        /// The job description file.
        job: PathBuf,
        /// Simulated time to run for (until the job finishes when unset and it is bounded).
        duration: Option<Duration>,
        /// The simulated cluster whose slots the job shares (`cluster`), if it names one.
        cluster: Option<Arc<SimClusterSpec>>,
    },
    /// A real Flink cluster.
    Flink {
        /// REST endpoint, e.g. `http://127.0.0.1:8081` (the named cluster's, with `cluster`).
        rest: String,
        /// The `[clusters.<name>]` the job names (TLS, credentials, its own request limit);
        /// `None` for a job with its own `rest`.
        cluster: Option<Arc<ClusterSpec>>,
        /// A job id; every RUNNING job of the cluster when unset.
        job_id: Option<String>,
    },
    /// Recorded observations replayed from a file.
    Replay {
        /// The JSON Lines trace.
        trace: PathBuf,
    },
}

/// One `[[jobs]]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    /// Unique name.
    pub name: String,
    /// Index in the file (for messages: `jobs[i]`).
    pub(crate) index: usize,
    /// Where the entry starts.
    pub(crate) location: String,
    /// Its engine.
    pub engine: EngineSpec,
    /// `[defaults]` overlaid with the job's own keys.
    pub(crate) config: JobConfig,
}

/// A parsed fleet configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetConfig {
    /// The file it was read from.
    pub(crate) file: PathBuf,
    /// Host settings.
    pub host: HostSettings,
    /// The jobs, in file order.
    pub jobs: Vec<JobSpec>,
    /// Non-fatal findings (unknown keys, ...).
    pub(crate) warnings: Vec<Diagnostic>,
}

impl FleetConfig {
    /// The job with this name.
    pub(crate) fn job(&self, name: &str) -> Option<&JobSpec> {
        self.jobs.iter().find(|j| j.name == name)
    }
}

/// A fleet configuration as far as it could be read, with every problem found in it. The
/// configuration holds every job whose name and engine could be read, even when other parts of
/// the file are wrong, so that the checks that come after reading (modes, options, engines)
/// can still report on each job: one run of `validate` lists every problem of the file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FleetReading {
    /// What could be read (defaults stand in for what could not).
    pub(crate) fleet: FleetConfig,
    /// Every problem found while reading; the configuration must not be run when not empty.
    pub(crate) errors: Vec<Diagnostic>,
}

/// Reads and parses a fleet configuration file, reporting every problem at once.
pub(crate) fn load_fleet(path: &Path) -> Result<FleetConfig, ConfigErrors> {
    read_fleet(path, KeyPolicy::default())?.into_result()
}

/// Reads a fleet configuration file as far as it can be read. `Err` only when there is nothing
/// to check further: the file cannot be read or is not TOML.
pub(crate) fn read_fleet(path: &Path, policy: KeyPolicy) -> Result<FleetReading, ConfigErrors> {
    let text = std::fs::read_to_string(path).map_err(|err| {
        ConfigErrors(vec![Diagnostic::new(
            path.display().to_string(),
            format!("cannot read the file: {err}"),
        )])
    })?;
    parse_fleet_with(path, &text, policy)
}

impl FleetReading {
    /// The configuration when nothing was wrong, else every problem.
    pub(crate) fn into_result(self) -> Result<FleetConfig, ConfigErrors> {
        if self.errors.is_empty() {
            Ok(self.fleet)
        } else {
            Err(ConfigErrors(self.errors))
        }
    }
}

/// Parses a fleet configuration from text; `path` names it in messages and anchors relative paths.
pub fn parse_fleet(path: &Path, text: &str) -> Result<FleetConfig, ConfigErrors> {
    parse_fleet_with(path, text, KeyPolicy::default())?.into_result()
}

/// Parses a fleet configuration from text as far as it can be read (see [`read_fleet`]).
pub(crate) fn parse_fleet_with(
    path: &Path,
    text: &str,
    policy: KeyPolicy,
) -> Result<FleetReading, ConfigErrors> {
    let mut p = Parser {
        file: path.to_path_buf(),
        line_ends: text.match_indices('\n').map(|(at, _)| at).collect(),
        policy,
        verdicts: HashMap::new(),
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let (root, syntax_errors) = DeTable::parse_recoverable(text);
    for err in syntax_errors {
        let line = err.span().map(|s| p.line_of(s.start));
        p.errors.push(Diagnostic::new(
            p.at(line, ""),
            format!("invalid TOML: {}", err.message()),
        ));
    }
    if !p.errors.is_empty() {
        return Err(ConfigErrors(p.errors));
    }
    let root = root.into_inner();
    let mut host = HostSettings::with_plugins_dir(base.join(DEFAULT_PLUGINS_DIR));
    let mut defaults = JobConfig::new();
    let mut jobs = Vec::new();
    // Clusters first: jobs refer to them wherever the table is in the file.
    let clusters = root
        .iter()
        .find(|(key, _)| key.get_ref().as_ref() == "clusters")
        .map(|(_, value)| read_clusters(&mut p, value, &base))
        .unwrap_or_default();
    for (key, value) in root.iter() {
        match key.get_ref().as_ref() {
            "clusters" => {}
            "host" => p.host(value, &base, &mut host),
            "defaults" => match value.get_ref() {
                DeValue::Table(table) => p.flatten(table, "", "defaults", &mut defaults),
                _ => p.error(value, "defaults", "must be a table of flat keys"),
            },
            "jobs" => match value.get_ref() {
                DeValue::Array(items) => {
                    for (index, item) in items.iter().enumerate() {
                        if let Some(job) = p.job(item, index, &base, &clusters) {
                            jobs.push(job);
                        }
                    }
                }
                _ => p.error(value, "jobs", "must be an array of tables (`[[jobs]]`)"),
            },
            other => p.unknown(key, other, "", &["host", "defaults", "clusters", "jobs"]),
        }
    }
    let mut names = BTreeSet::new();
    for job in &mut jobs {
        if !names.insert(job.name.clone()) {
            p.errors.push(Diagnostic::new(
                job.location.clone(),
                format!(
                    "duplicate job name `{}` (job names must be unique)",
                    job.name
                ),
            ));
        }
        let mut merged = defaults.clone();
        merged.overlay(&job.config);
        job.config = merged;
    }
    Ok(FleetReading {
        fleet: FleetConfig {
            file: path.to_path_buf(),
            host,
            jobs,
            warnings: p.warnings,
        },
        errors: p.errors,
    })
}

/// The fields of one `[[jobs]]` entry as written, before they are checked together.
struct JobFields {
    name: Option<String>,
    engine: EngineFields,
    config: JobConfig,
}

/// The fields that say which engine runs a job and where it finds the job.
struct EngineFields {
    /// `engine` (default `sim`).
    kind: String,
    /// The line of `engine`, when written.
    line: Option<usize>,
    job: Option<PathBuf>,
    trace: Option<PathBuf>,
    rest: Option<String>,
    /// The line of `rest`, when written.
    rest_line: Option<usize>,
    /// `cluster` and its line.
    cluster: Option<(String, usize)>,
    job_id: Option<String>,
    duration: Option<Duration>,
}

struct Parser {
    file: PathBuf,
    /// The byte offset of each line end of `text`, in order: a line number is a binary search
    /// away, so reporting every key of a large file stays linear in its size.
    line_ends: Vec<usize>,
    policy: KeyPolicy,
    /// The verdict on each key name met so far: a fleet of many jobs repeats the same keys, and
    /// the typo check is the costliest step of reading one.
    verdicts: HashMap<String, Option<UnknownKey>>,
    errors: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
}

impl Parser {
    /// The 1-based line of byte `offset` of the text.
    fn line_of(&self, offset: usize) -> usize {
        // The line ends before `offset`, each of which starts a new line.
        self.line_ends.partition_point(|&end| end < offset) + 1
    }

    fn at(&self, line: Option<usize>, path: &str) -> String {
        let file = self.file.display();
        match (line, path.is_empty()) {
            (Some(line), true) => format!("{file}:{line}"),
            (Some(line), false) => format!("{file}:{line}: {path}"),
            (None, true) => file.to_string(),
            (None, false) => format!("{file}: {path}"),
        }
    }

    fn error<T>(&mut self, spanned: &Spanned<T>, path: &str, message: &str) {
        let line = Some(self.line_of(spanned.span().start));
        self.errors
            .push(Diagnostic::new(self.at(line, path), message.to_string()));
    }

    /// A key of the file's own structure (`[host]`, `[[jobs]]` fields) that is not one of
    /// `known`: an error when it is a typo of one of them (the setting it was meant to be would
    /// silently keep its default) or under `--strict`, else a warning.
    fn unknown<T>(&mut self, key: &Spanned<T>, name: &str, parent: &str, known: &[&str]) {
        let path = join(parent, name);
        let line = Some(self.line_of(key.span().start));
        let at = self.at(line, &path);
        let known_list = known.join(", ");
        if let Some(meant) = typo_of(name, known.iter().copied()) {
            self.errors.push(Diagnostic::new(
                at,
                format!("unknown key (did you mean `{meant}`? known: {known_list})"),
            ));
        } else if self.policy.strict {
            self.errors.push(Diagnostic::new(
                at,
                format!("unknown key (--strict refuses it; known: {known_list})"),
            ));
        } else {
            let hint = closest(name, known.iter().copied())
                .map(|c| format!("did you mean `{c}`? "))
                .unwrap_or_default();
            self.warnings.push(Diagnostic::new(
                at,
                format!("unknown key, ignored ({hint}known: {known_list})"),
            ));
        }
    }

    fn string(&mut self, value: &Spanned<DeValue<'_>>, path: &str) -> Option<String> {
        match value.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            other => {
                self.error(
                    value,
                    path,
                    &format!("expected a string, got {}", other.type_str()),
                );
                None
            }
        }
    }

    /// A whole number from 1 to `max`.
    fn count(&mut self, value: &Spanned<DeValue<'_>>, path: &str, max: usize) -> Option<usize> {
        let n = match value.get_ref() {
            DeValue::Integer(i) => toml_integer(i).and_then(|n| usize::try_from(n).ok()),
            _ => None,
        };
        match n {
            Some(n) if (1..=max).contains(&n) => Some(n),
            _ => {
                self.error(
                    value,
                    path,
                    &format!("expected a whole number from 1 to {max}"),
                );
                None
            }
        }
    }

    fn duration(&mut self, value: &Spanned<DeValue<'_>>, path: &str) -> Option<Duration> {
        match value.get_ref() {
            DeValue::String(s) => match parse_duration(s) {
                Ok(d) => Some(d),
                Err(err) => {
                    self.error(value, path, &err.to_string());
                    None
                }
            },
            DeValue::Integer(i) => match toml_integer(i).map(u64::try_from) {
                Some(Ok(ms)) => Some(Duration::from_millis(ms)),
                _ => {
                    self.error(
                        value,
                        path,
                        "expected a non-negative number of milliseconds",
                    );
                    None
                }
            },
            other => {
                self.error(
                    value,
                    path,
                    &format!(
                        "expected a duration such as \"300s\" or a number of milliseconds, got {}",
                        other.type_str()
                    ),
                );
                None
            }
        }
    }

    fn host(&mut self, value: &Spanned<DeValue<'_>>, base: &Path, host: &mut HostSettings) {
        let DeValue::Table(table) = value.get_ref() else {
            self.error(value, "host", "must be a table (`[host]`)");
            return;
        };
        self.host_keys(table, base, host);
        if host.state_url.is_some() && host.state_dir.is_some() {
            self.error(
                value,
                "host.state",
                "`state` and `state-dir` cannot both be set: choose the database or the directory",
            );
        }
        self.server_files(table, value, host);
        // A token of the wrong form is reported where it is written (`host_keys`); here, only
        // the address that needs one, or TLS, where the address is written.
        if let Some(addr) = host.listen {
            let at = written(table, "listen").unwrap_or(value);
            if let Err(why @ ListenError::NeedsToken(_)) = check_listen_token(addr, host) {
                self.error(at, "host.listen", &why.to_string());
            }
            if let Err(why) = check_listen_tls(addr, host) {
                self.error(at, "host.listen", &why.to_string());
            }
        }
    }

    /// Checks the server's files together and reads them, each problem at the key that names
    /// the file: half a TLS pair, a token both inline and from a file, and a file the server
    /// could not use (missing, readable by others, not PEM, a key of another certificate).
    fn server_files(
        &mut self,
        table: &DeTable<'_>,
        value: &Spanned<DeValue<'_>>,
        host: &mut HostSettings,
    ) {
        if let Some(file) = &host.api_token_file {
            let at = written(table, "api-token-file").unwrap_or(value);
            if host.api_token.is_some() {
                self.error(
                    at,
                    "host.api-token-file",
                    "`api-token` and `api-token-file` cannot both be set: keep `api-token-file` (the token stays out of the fleet file)",
                );
            } else if let Err(why) = load_token_file(file) {
                self.error(at, "host.api-token-file", &why.to_string());
            }
        }
        let Some(tls) = host.tls.clone() else {
            return;
        };
        let cert_at = written(table, "tls-cert-file");
        let key_at = written(table, "tls-key-file");
        match (cert_at, key_at) {
            (Some(cert_at), Some(key_at)) => {
                if let Err((file, why)) = read_tls_files(&tls) {
                    let (at, key) = match file {
                        TlsFile::Cert => (cert_at, "host.tls-cert-file"),
                        TlsFile::Key => (key_at, "host.tls-key-file"),
                    };
                    self.error(at, key, &why.to_string());
                }
                if host.listen_plaintext
                    && let Some(at) = written(table, "listen-plaintext")
                {
                    let line = Some(self.line_of(at.span().start));
                    self.warnings.push(Diagnostic::new(
                        self.at(line, "host.listen-plaintext"),
                        "ignored: with `tls-cert-file` and `tls-key-file` the server speaks HTTPS",
                    ));
                }
            }
            (Some(at), None) => {
                self.error(
                    at,
                    "host.tls-cert-file",
                    "`tls-cert-file` needs `tls-key-file` too (both or neither)",
                );
                host.tls = None;
            }
            (None, Some(at)) => {
                self.error(
                    at,
                    "host.tls-key-file",
                    "`tls-key-file` needs `tls-cert-file` too (both or neither)",
                );
                host.tls = None;
            }
            (None, None) => host.tls = None,
        }
    }

    fn host_keys(&mut self, table: &DeTable<'_>, base: &Path, host: &mut HostSettings) {
        for (key, value) in table.iter() {
            let name: &str = key.get_ref().as_ref();
            let path = join("host", name);
            match name {
                "plugins" => {
                    if let Some(dir) = self.string(value, &path) {
                        host.plugins_dir = base.join(dir);
                    }
                }
                "interval" => {
                    if let Some(d) = self.duration(value, &path) {
                        match INTERVAL_RANGE.check(d) {
                            Ok(()) => host.interval = d,
                            Err(why) => self.error(
                                value,
                                &path,
                                &format!("`{}` is {why}", format_duration(d)),
                            ),
                        }
                    }
                }
                "state-dir" => {
                    let dir = self.string(value, &path).map(|d| base.join(d));
                    // A file in the way would only be found by `run` when it first persists.
                    if let Some(dir) = &dir
                        && dir.exists()
                        && !dir.is_dir()
                    {
                        self.error(
                            value,
                            &path,
                            &format!(
                                "{} is not a directory (expected a directory, or a path where one can be created)",
                                dir.display()
                            ),
                        );
                    }
                    host.state_dir = dir;
                }
                "plugin-isolation" => {
                    if let Some(text) = self.string(value, &path) {
                        match text.parse() {
                            Ok(isolation) => host.plugin_isolation = isolation,
                            Err(err) => self.error(value, &path, &format!("{err}")),
                        }
                    }
                }
                "plugin-call-timeout" => {
                    if let Some(d) = self.duration(value, &path) {
                        let range = HOST_PLUGIN_CALL_TIMEOUT.range;
                        if range.check(d).is_err() {
                            self.error(value, &path, &format!("must be {range}"));
                        } else {
                            host.plugin_call_timeout = d;
                        }
                    }
                }
                "workers" => {
                    host.workers = self.count(value, &path, MAX_WORKERS);
                }
                "max-requests-per-cluster" => {
                    if let Some(n) = self.count(value, &path, MAX_REQUESTS_PER_CLUSTER) {
                        host.max_requests_per_cluster = n;
                    }
                }
                "listen" => {
                    if let Some(text) = self.string(value, &path) {
                        match parse_listen(&text) {
                            Ok(addr) => host.listen = Some(addr),
                            Err(why) => self.error(value, &path, &why.to_string()),
                        }
                    }
                }
                "api-token" => {
                    if let Some(token) = self.string(value, &path) {
                        // Checked with or without `listen`: `run --listen` would use it.
                        if let Err(why) = check_token(&token) {
                            self.error(value, &path, &why.to_string());
                        }
                        host.api_token = Some(token);
                    }
                }
                "api-token-file" => {
                    host.api_token_file = self.string(value, &path).map(|f| base.join(f));
                }
                "tls-cert-file" | "tls-key-file" => {
                    if let Some(file) = self.string(value, &path).map(|f| base.join(f)) {
                        let tls = host.tls.get_or_insert_with(|| TlsFiles {
                            cert: PathBuf::new(),
                            key: PathBuf::new(),
                        });
                        if name == "tls-cert-file" {
                            tls.cert = file;
                        } else {
                            tls.key = file;
                        }
                    }
                }
                "listen-plaintext" => match value.get_ref() {
                    DeValue::Boolean(b) => host.listen_plaintext = *b,
                    other => self.error(
                        value,
                        &path,
                        &format!("expected true or false, got {}", other.type_str()),
                    ),
                },
                "state" => {
                    if let Some(url) = self.string(value, &path) {
                        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
                            host.state_url = Some(url);
                        } else {
                            self.error(
                                value,
                                &path,
                                "expected a PostgreSQL URL such as \"postgres://flowscale@127.0.0.1:5432/flowscale\" (for files, use `state-dir`)",
                            );
                        }
                    }
                }
                "id" => {
                    if let Some(id) = self.string(value, &path) {
                        if id.trim().is_empty() || id.len() > 200 {
                            self.error(value, &path, "must be 1 to 200 characters");
                        } else {
                            host.id = Some(id);
                        }
                    }
                }
                "lease-ttl" => {
                    if let Some(d) = self.duration(value, &path) {
                        match HOST_LEASE_TTL.range.check(d) {
                            Ok(()) => host.lease_ttl = d,
                            Err(why) => self.error(
                                value,
                                &path,
                                &format!("`{}` is {why}", format_duration(d)),
                            ),
                        }
                    }
                }
                other => self.unknown(key, other, "host", &host_keys()),
            }
        }
    }

    fn job(
        &mut self,
        item: &Spanned<DeValue<'_>>,
        index: usize,
        base: &Path,
        clusters: &Clusters,
    ) -> Option<JobSpec> {
        let at = format!("jobs[{index}]");
        let DeValue::Table(table) = item.get_ref() else {
            self.error(item, &at, "must be a table (`[[jobs]]`)");
            return None;
        };
        let location = self.at(Some(self.line_of(item.span().start)), &at);
        let fields = self.job_fields(table, &at, base);
        let Some(name) = fields.name.filter(|n| !n.trim().is_empty()) else {
            self.errors.push(Diagnostic::new(
                location,
                "every job needs a non-empty `name`",
            ));
            return None;
        };
        // A job whose name and engine could be read is kept even when another of its fields
        // is wrong (the error is recorded), so that its mode and options are checked too.
        let engine = self.engine(fields.engine, &at, &name, &location, clusters)?;
        Some(JobSpec {
            name,
            index,
            location,
            engine,
            config: fields.config,
        })
    }

    /// Reads the fields of the `[[jobs]]` entry `at`; relative paths are resolved from `base`.
    fn job_fields(&mut self, table: &DeTable<'_>, at: &str, base: &Path) -> JobFields {
        let mut fields = JobFields {
            name: None,
            engine: EngineFields {
                kind: "sim".to_string(),
                line: None,
                job: None,
                trace: None,
                rest: None,
                rest_line: None,
                cluster: None,
                job_id: None,
                duration: None,
            },
            config: JobConfig::new(),
        };
        let engine = &mut fields.engine;
        for (key, value) in table.iter() {
            let field: &str = key.get_ref().as_ref();
            let path = join(at, field);
            match field {
                "name" => fields.name = self.string(value, &path),
                "engine" => {
                    engine.line = Some(self.line_of(value.span().start));
                    if let Some(kind) = self.string(value, &path) {
                        engine.kind = kind;
                    }
                }
                "job" => engine.job = self.string(value, &path).map(|p| base.join(p)),
                "trace" => engine.trace = self.string(value, &path).map(|p| base.join(p)),
                "rest" => {
                    engine.rest_line = Some(self.line_of(value.span().start));
                    engine.rest = self.string(value, &path);
                }
                "cluster" => {
                    let line = self.line_of(value.span().start);
                    engine.cluster = self.string(value, &path).map(|name| (name, line));
                }
                "job-id" => engine.job_id = self.string(value, &path),
                "duration" => engine.duration = self.duration(value, &path),
                "config" => match value.get_ref() {
                    DeValue::Table(table) => {
                        let prefix = format!("{at}.config");
                        self.flatten(table, "", &prefix, &mut fields.config);
                    }
                    _ => self.error(value, &path, "must be a table of flat keys"),
                },
                other => self.unknown(key, other, at, &job_fields()),
            }
        }
        fields
    }

    /// The engine of the job `name` (entry `at`, starting at `location`), or `None` with an
    /// error when its kind is unknown or a field it needs is missing.
    fn engine(
        &mut self,
        fields: EngineFields,
        at: &str,
        name: &str,
        location: &str,
        clusters: &Clusters,
    ) -> Option<EngineSpec> {
        let mut missing = |what: &str, engine: &str| {
            self.errors.push(Diagnostic::new(
                location.to_string(),
                format!("the {engine} engine needs `{what}` in {at} (`{name}`)"),
            ));
            None
        };
        if let Some((_, line)) = &fields.cluster
            && fields.kind != "flink"
            && fields.kind != "sim"
        {
            let cluster_at = self.at(Some(*line), &join(at, "cluster"));
            self.errors.push(Diagnostic::new(
                cluster_at,
                format!(
                    "only flink and sim jobs run on a cluster (this job's engine is `{}`)",
                    fields.kind
                ),
            ));
            return None;
        }
        match fields.kind.as_str() {
            "sim" => {
                let cluster = match &fields.cluster {
                    None => None,
                    Some((cluster, line)) => {
                        let found = match find_cluster(clusters, cluster) {
                            Ok(None) => return None,
                            Ok(Some(FoundCluster::Sim(spec))) => Ok(Arc::clone(spec)),
                            Ok(Some(FoundCluster::Flink(_))) => Err(format!(
                                "cluster `{cluster}` is a Flink cluster (it has `rest`): a sim \
                                 job runs on a simulated cluster, one with `slots` and no `rest`"
                            )),
                            Err(message) => Err(message),
                        };
                        match found {
                            Ok(spec) => Some(spec),
                            Err(message) => {
                                let cluster_at = self.at(Some(*line), &join(at, "cluster"));
                                self.errors.push(Diagnostic::new(cluster_at, message));
                                return None;
                            }
                        }
                    }
                };
                match fields.job {
                    Some(job) => Some(EngineSpec::Sim {
                        job,
                        duration: fields.duration,
                        cluster,
                    }),
                    None => missing("job", "sim"),
                }
            }
            "flink" => match (fields.rest, fields.cluster) {
                (Some(_), Some((_, line))) => {
                    let cluster_at = self.at(Some(line), &join(at, "cluster"));
                    self.errors.push(Diagnostic::new(
                        cluster_at,
                        "`cluster` and `rest` cannot both be set: the cluster names its REST \
                         URL (remove `rest`, or `cluster` to reach the address without TLS \
                         settings)",
                    ));
                    None
                }
                (None, Some((cluster, line))) => match find_cluster(clusters, &cluster) {
                    Ok(None) => None,
                    Ok(Some(FoundCluster::Flink(spec))) => Some(EngineSpec::Flink {
                        rest: spec.rest.clone(),
                        cluster: Some(Arc::clone(spec)),
                        job_id: fields.job_id,
                    }),
                    Ok(Some(FoundCluster::Sim(_))) => {
                        let cluster_at = self.at(Some(line), &join(at, "cluster"));
                        self.errors.push(Diagnostic::new(
                            cluster_at,
                            format!(
                                "cluster `{cluster}` is a simulated cluster (`slots`, no \
                                 `rest`): a flink job needs a cluster with `rest`"
                            ),
                        ));
                        None
                    }
                    Err(message) => {
                        let cluster_at = self.at(Some(line), &join(at, "cluster"));
                        self.errors.push(Diagnostic::new(cluster_at, message));
                        None
                    }
                },
                (Some(rest), None) => match check_rest_url(&rest) {
                    Ok(()) => Some(EngineSpec::Flink {
                        rest,
                        cluster: None,
                        job_id: fields.job_id,
                    }),
                    Err(err) => {
                        let rest_at = self.at(fields.rest_line, &join(at, "rest"));
                        self.errors.push(Diagnostic::new(rest_at, err.to_string()));
                        None
                    }
                },
                (None, None) => missing("rest` or `cluster", "flink"),
            },
            "replay" => match fields.trace {
                Some(trace) => Some(EngineSpec::Replay { trace }),
                None => missing("trace", "replay"),
            },
            other => {
                let engine_at = self.at(fields.line, &join(at, "engine"));
                self.errors.push(Diagnostic::new(
                    engine_at,
                    format!("unknown engine `{other}` (valid: sim, flink, replay)"),
                ));
                None
            }
        }
    }

    /// Flattens a table of config values into flat keys; nested tables (unquoted dotted keys)
    /// join their names with `.`.
    /// Keys are taken in file order, so that problems are reported top to bottom and, of two
    /// equally canonical spellings of one key, the one written last wins.
    fn flatten(&mut self, table: &DeTable<'_>, prefix: &str, at: &str, out: &mut JobConfig) {
        let mut entries: Vec<_> = table.iter().collect();
        entries.sort_by_key(|(key, _)| key.span().start);
        for (key, value) in entries {
            let name = join(prefix, key.get_ref().as_ref());
            let path = format!("{at}.\"{name}\"");
            let line = self.line_of(key.span().start);
            let text = match value.get_ref() {
                DeValue::Table(inner) => {
                    self.flatten(inner, &name, at, out);
                    continue;
                }
                DeValue::String(s) => s.to_string(),
                DeValue::Integer(i) => match toml_integer(i) {
                    Some(n) => n.to_string(),
                    None => {
                        self.error(value, &path, INTEGER_RANGE);
                        continue;
                    }
                },
                DeValue::Float(f) => f.as_str().to_string(),
                DeValue::Boolean(b) => b.to_string(),
                DeValue::Datetime(d) => d.to_string(),
                DeValue::Array(items) => {
                    let mut parts = Vec::new();
                    for item in items.iter() {
                        match item.get_ref() {
                            DeValue::String(s) => parts.push(s.to_string()),
                            DeValue::Integer(i) => match toml_integer(i) {
                                Some(n) => parts.push(n.to_string()),
                                None => self.error(item, &path, INTEGER_RANGE),
                            },
                            _ => self.error(item, &path, "list items must be strings or integers"),
                        }
                    }
                    parts.join(";")
                }
            };
            let policy = self.policy;
            let verdict = self
                .verdicts
                .entry(name.clone())
                .or_insert_with(|| check_key(&canonical_key(&name).key, &name, policy))
                .clone();
            match verdict {
                Some(UnknownKey::Error(message)) => {
                    self.errors
                        .push(Diagnostic::new(self.at(Some(line), &path), message));
                }
                Some(UnknownKey::Warning(message)) => {
                    self.warnings
                        .push(Diagnostic::new(self.at(Some(line), &path), message));
                }
                None => {}
            }
            let origin = Origin {
                file: Some(self.file.clone()),
                line: Some(line),
                raw_key: name.clone(),
                path,
            };
            out.set(&name, text, origin);
        }
    }
}

impl TableReader for Parser {
    fn line_of_span(&self, offset: usize) -> usize {
        self.line_of(offset)
    }

    fn error_at(&mut self, line: usize, path: &str, message: String) {
        self.errors
            .push(Diagnostic::new(self.at(Some(line), path), message));
    }

    fn read_string(&mut self, value: &Spanned<DeValue<'_>>, path: &str) -> Option<String> {
        self.string(value, path)
    }

    fn read_count(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        path: &str,
        max: usize,
    ) -> Option<usize> {
        self.count(value, path, max)
    }

    fn unknown_key(
        &mut self,
        key: &Spanned<std::borrow::Cow<'_, str>>,
        parent: &str,
        known: &[&str],
    ) {
        let name = key.get_ref().to_string();
        self.unknown(key, &name, parent, known);
    }
}

/// Why an integer literal was refused: TOML integers are 64-bit signed.
const INTEGER_RANGE: &str =
    "integer out of range (TOML integers are 64-bit: -9223372036854775808 to 9223372036854775807)";

/// The value of a TOML integer literal as TOML defines it. The parser keeps the digits and the
/// base apart (`0b100` is the digits `100` in base 2, `1_000` the digits `1000`), so the digits
/// alone must never be read as a decimal number; `None` when the value does not fit in 64 bits.
fn toml_integer(integer: &DeInteger<'_>) -> Option<i64> {
    i64::from_str_radix(integer.as_str(), integer.radix()).ok()
}

/// The value of `key` in `table`, where it is written.
fn written<'t, 'a>(table: &'t DeTable<'a>, key: &str) -> Option<&'t Spanned<DeValue<'a>>> {
    table
        .iter()
        .find(|(k, _)| k.get_ref().as_ref() == key)
        .map(|(_, value)| value)
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigLookup;

    fn parse(text: &str) -> Result<FleetConfig, ConfigErrors> {
        parse_fleet(Path::new("/etc/flowscale/fleet.toml"), text)
    }

    #[test]
    fn a_bad_token_is_reported_at_its_own_key_and_a_missing_one_at_listen() {
        let errors = |text: &str| -> Vec<String> {
            parse(text)
                .expect_err("refused")
                .0
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        let token_error = "/etc/flowscale/fleet.toml:4: host.api-token: api-token must be 16 to \
                           256 visible ASCII characters (no spaces)";
        assert_eq!(
            errors(
                "[host]\ninterval = \"10s\"\nlisten = \"0.0.0.0:9464\"\napi-token = \"short\"\n\
                 listen-plaintext = true\n"
            ),
            [token_error]
        );
        // Without `listen` too: `run --listen` would serve with it.
        assert_eq!(
            errors("[host]\ninterval = \"10s\"\n\napi-token = \"has a space in it, sadly\"\n"),
            [token_error]
        );
        assert_eq!(
            errors(
                "[host]\ninterval = \"10s\"\nlisten = \"0.0.0.0:9464\"\nlisten-plaintext = true\n"
            ),
            [
                "/etc/flowscale/fleet.toml:3: host.listen: 0.0.0.0:9464 is not a loopback address: \
              set `[host] api-token-file` (or `api-token`) so that every request needs a bearer \
              token"
            ]
        );
        assert!(
            parse(
                "[host]\nlisten = \"0.0.0.0:9464\"\napi-token = \"a-token-0123456789\"\n\
                 listen-plaintext = true\n"
            )
            .is_ok()
        );
    }

    /// The server's [host] keys, with the files they name in a temporary directory: a CA-made
    /// certificate and key and a token file, all readable by their owner only.
    mod server_keys {
        use std::os::unix::fs::PermissionsExt;

        use flowscale_tests::certs::{TestCa, write_private};

        use super::*;

        fn errors(dir: &Path, text: &str) -> Vec<String> {
            match parse_fleet(&dir.join("fleet.toml"), text) {
                Ok(_) => Vec::new(),
                Err(errors) => errors.0.iter().map(ToString::to_string).collect(),
            }
        }

        struct Files {
            dir: tempfile::TempDir,
        }

        impl Files {
            fn new() -> Files {
                let dir = tempfile::tempdir().expect("tempdir");
                let ca = TestCa::new(dir.path(), "fleet");
                ca.issue("server", &["127.0.0.1"]);
                ca.issue("other", &["127.0.0.1"]);
                write_private(&dir.path().join("token"), "a-token-from-a-file-0123\n");
                Files { dir }
            }
            fn path(&self, name: &str) -> String {
                self.dir.path().join(name).display().to_string()
            }
            fn errors(&self, text: &str) -> Vec<String> {
                errors(self.dir.path(), text)
            }
        }

        const TLS: &str = "tls-cert-file = \"server.pem\"\ntls-key-file = \"server.key\"\n";

        #[test]
        fn https_with_a_token_file_on_any_address_is_valid_and_the_paths_are_the_files() {
            let files = Files::new();
            let text =
                format!("[host]\nlisten = \"0.0.0.0:9464\"\napi-token-file = \"token\"\n{TLS}");
            let fleet = parse_fleet(&files.dir.path().join("fleet.toml"), &text).expect("valid");
            let host = fleet.host;
            assert_eq!(host.api_token, None);
            assert_eq!(host.api_token_file, Some(files.dir.path().join("token")));
            let tls = host.tls.expect("TLS");
            assert_eq!(tls.cert, files.dir.path().join("server.pem"));
            assert_eq!(tls.key, files.dir.path().join("server.key"));
            assert!(!host.listen_plaintext);
        }

        #[test]
        fn another_address_than_loopback_needs_tls_unless_a_proxy_is_in_front() {
            let files = Files::new();
            let fleet = files.path("fleet.toml");
            assert_eq!(
                files.errors("[host]\nlisten = \"0.0.0.0:9464\"\napi-token-file = \"token\"\n"),
                [format!(
                    "{fleet}:2: host.listen: 0.0.0.0:9464 is not a loopback address: set \
                     `[host] tls-cert-file` and `tls-key-file` so that the token and the answers \
                     cross the network encrypted, or `listen-plaintext = true` when a \
                     TLS-terminating proxy is in front"
                )]
            );
            // Neither a token nor TLS: both said, at the address.
            assert_eq!(
                files
                    .errors("[host]\nlisten = \"0.0.0.0:9464\"\n")
                    .iter()
                    .map(|e| e.split(": ").nth(1).unwrap_or_default().to_string())
                    .collect::<Vec<_>>(),
                ["host.listen", "host.listen"]
            );
            assert_eq!(
                files.errors(
                    "[host]\nlisten = \"0.0.0.0:9464\"\napi-token-file = \"token\"\n\
                     listen-plaintext = true\n"
                ),
                Vec::<String>::new()
            );
            assert_eq!(
                files.errors("[host]\nlisten-plaintext = \"yes\"\n"),
                [format!(
                    "{fleet}:2: host.listen-plaintext: expected true or false, got string"
                )]
            );
            // Loopback needs neither.
            assert_eq!(
                files.errors("[host]\nlisten = \"127.0.0.1:9464\"\n"),
                Vec::<String>::new()
            );
        }

        #[test]
        fn half_a_tls_pair_and_two_tokens_are_refused_at_their_keys() {
            let files = Files::new();
            let fleet = files.path("fleet.toml");
            assert_eq!(
                files.errors("[host]\ntls-cert-file = \"server.pem\"\n"),
                [format!(
                    "{fleet}:2: host.tls-cert-file: `tls-cert-file` needs `tls-key-file` too \
                     (both or neither)"
                )]
            );
            assert_eq!(
                files.errors("[host]\n\ntls-key-file = \"server.key\"\n"),
                [format!(
                    "{fleet}:3: host.tls-key-file: `tls-key-file` needs `tls-cert-file` too \
                     (both or neither)"
                )]
            );
            assert_eq!(
                files.errors(
                    "[host]\napi-token = \"an-inline-token-0123\"\napi-token-file = \"token\"\n"
                ),
                [format!(
                    "{fleet}:3: host.api-token-file: `api-token` and `api-token-file` cannot \
                     both be set: keep `api-token-file` (the token stays out of the fleet file)"
                )]
            );
        }

        #[test]
        fn files_the_server_could_not_use_are_refused_at_the_key_that_names_them() {
            let files = Files::new();
            let fleet = files.path("fleet.toml");
            let token = files.path("token");
            std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644))
                .expect("chmod");
            assert_eq!(
                files.errors("[host]\napi-token-file = \"token\"\n"),
                [format!(
                    "{fleet}:2: host.api-token-file: {token} is readable by group or others \
                     (mode 644); run `chmod 600 {token}`"
                )]
            );
            write_private(Path::new(&token), "short\n");
            assert_eq!(
                files.errors("[host]\napi-token-file = \"token\"\n"),
                [format!(
                    "{fleet}:2: host.api-token-file: {token}: the token must be 16 to 256 \
                     visible ASCII characters (no spaces)"
                )]
            );
            let key = files.path("server.key");
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).expect("chmod");
            assert_eq!(
                files.errors(&format!("[host]\n{TLS}")),
                [format!(
                    "{fleet}:3: host.tls-key-file: {key} is readable by group or others \
                     (mode 640); run `chmod 600 {key}`"
                )]
            );
            let other_key = files.path("other.key");
            let cert = files.path("server.pem");
            assert_eq!(
                files.errors(
                    "[host]\ntls-cert-file = \"server.pem\"\ntls-key-file = \"other.key\"\n"
                ),
                [format!(
                    "{fleet}:3: host.tls-key-file: {other_key}: this private key does not \
                     belong to the certificate of {cert} (a key and certificate of different \
                     renewals?)"
                )]
            );
            let missing = files.path("missing.pem");
            let errors = files
                .errors("[host]\ntls-cert-file = \"missing.pem\"\ntls-key-file = \"other.key\"\n");
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert!(
                errors[0].starts_with(&format!(
                    "{fleet}:2: host.tls-cert-file: {missing}: cannot read it"
                )),
                "{errors:?}"
            );
            // A key in the certificate's place.
            let errors = files
                .errors("[host]\ntls-cert-file = \"other.key\"\ntls-key-file = \"other.key\"\n");
            assert!(
                errors[0].starts_with(&format!(
                    "{fleet}:2: host.tls-cert-file: {other_key}: no PEM certificate"
                )),
                "{errors:?}"
            );
        }
    }

    #[test]
    fn plugin_isolation_and_call_timeout_default_and_parse() {
        let fleet = parse("").expect("valid");
        assert_eq!(fleet.host.plugin_isolation, PluginIsolation::InProcess);
        assert_eq!(fleet.host.plugin_call_timeout, Duration::from_secs(1));
        let fleet =
            parse("[host]\nplugin-isolation = \"process\"\nplugin-call-timeout = \"250ms\"\n")
                .expect("valid");
        assert_eq!(fleet.host.plugin_isolation, PluginIsolation::Process);
        assert_eq!(fleet.host.plugin_call_timeout, Duration::from_millis(250));
        let all = parse("[host]\nplugin-isolation = \"jail\"\nplugin-call-timeout = \"0s\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            all.contains("fleet.toml:2: host.plugin-isolation: unknown plugin isolation `jail`"),
            "{all}"
        );
        assert!(
            all.contains("fleet.toml:3: host.plugin-call-timeout: must be greater than 0"),
            "{all}"
        );
        // The bounds come from the reference's entry, and the message names both.
        let long = parse("[host]\nplugin-call-timeout = \"2h\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            long.contains("host.plugin-call-timeout: must be greater than 0 and at most 1h"),
            "{long}"
        );
        assert!(parse("[host]\nplugin-call-timeout = \"1h\"\n").is_ok());
    }

    #[test]
    fn workers_and_requests_per_cluster_default_and_parse() {
        let fleet = parse("").expect("valid");
        assert_eq!(
            fleet.host.workers, None,
            "one per core, decided at run time"
        );
        assert_eq!(fleet.host.max_requests_per_cluster, 4);
        let fleet = parse("[host]\nworkers = 3\nmax-requests-per-cluster = 16\n").expect("valid");
        assert_eq!(fleet.host.workers, Some(3));
        assert_eq!(fleet.host.max_requests_per_cluster, 16);
        let all = parse("[host]\nworkers = 0\nmax-requests-per-cluster = \"many\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            all.contains("fleet.toml:2: host.workers: expected a whole number from 1 to 1024"),
            "{all}"
        );
        assert!(
            all.contains(
                "fleet.toml:3: host.max-requests-per-cluster: expected a whole number from 1 to 256"
            ),
            "{all}"
        );
        let too_many = parse("[host]\nworkers = 1025\n").unwrap_err().to_string();
        assert!(too_many.contains("host.workers"), "{too_many}");
    }

    #[test]
    fn parses_host_defaults_and_jobs() {
        let fleet = parse(
            r#"
[host]
plugins = "mods"
interval = "30s"

[defaults]
"scaling.alignment.mode" = "EVENLY_SPREAD"
"utilization.target" = 0.6

[[jobs]]
name = "orders"
job = "jobs/orders.toml"
duration = "2h"
[jobs.config]
"job.autoscaler.scaling.parallelism-alignment.mode" = "buckets"
"scaling.alignment.mode.buckets.class" = "bucket-align"
"vertex.max-parallelism" = 64
"scaling.enabled" = true

[[jobs]]
name = "live"
engine = "flink"
rest = "http://127.0.0.1:8081"
[jobs.config]
scaling.alignment.mode = "OFF"
"#,
        )
        .expect("valid");
        assert_eq!(fleet.host.plugins_dir, Path::new("/etc/flowscale/mods"));
        assert_eq!(fleet.host.interval, Duration::from_secs(30));
        let orders = fleet.job("orders").expect("orders");
        assert_eq!(
            orders.engine,
            EngineSpec::Sim {
                job: PathBuf::from("/etc/flowscale/jobs/orders.toml"),
                duration: Some(Duration::from_secs(7200)),
                cluster: None,
            }
        );
        assert_eq!(orders.config.get("scaling.alignment.mode"), Some("buckets"));
        assert_eq!(orders.config.get("utilization.target"), Some("0.6"));
        assert_eq!(orders.config.get("vertex.max-parallelism"), Some("64"));
        assert_eq!(orders.config.get("scaling.enabled"), Some("true"));
        let origin = orders
            .config
            .origin("scaling.alignment.mode")
            .expect("origin");
        assert_eq!(origin.line, Some(15));
        let live = fleet.job("live").expect("live");
        assert_eq!(live.config.get("scaling.alignment.mode"), Some("OFF"));
        assert!(fleet.warnings.is_empty(), "{:?}", fleet.warnings);
    }

    #[test]
    fn reports_every_problem_with_file_line_and_path() {
        let errors = parse(
            r#"
[host]
interval = "soon"

[[jobs]]
name = "a"
engine = "spark"

[[jobs]]
engine = "sim"
job = "x.toml"

[[jobs]]
name = "c"
engine = "flink"

[[jobs]]
name = "d"
job = "d.toml"
[[jobs]]
name = "d"
job = "d.toml"
"#,
        )
        .unwrap_err();
        let text: Vec<String> = errors.0.iter().map(ToString::to_string).collect();
        let all = text.join("\n");
        assert!(
            all.contains("fleet.toml:3: host.interval: `soon` is not a duration"),
            "{all}"
        );
        assert!(
            all.contains(
                "fleet.toml:7: jobs[0].engine: unknown engine `spark` (valid: sim, flink, replay)"
            ),
            "{all}"
        );
        assert!(
            all.contains("jobs[1]: every job needs a non-empty `name`"),
            "{all}"
        );
        assert!(all.contains("the flink engine needs `rest`"), "{all}");
        assert!(all.contains("duplicate job name `d`"), "{all}");
        assert_eq!(errors.0.len(), 5, "{all}");
    }

    #[test]
    fn integers_are_read_as_toml_defines_them_in_every_base() {
        // Each literal and the decimal value TOML gives it: 0x10 = 1*16, 0o20 = 2*8,
        // 0b10000 = 2^4, 1_000 = one thousand (underscores only separate digits).
        let fleet = parse(
            r#"
[host]
interval = 0x3E8

[[jobs]]
name = "a"
job = "a.toml"
[jobs.config]
"hex" = 0x10
"octal" = 0o20
"binary" = 0b10000
"underscored" = 1_000
"signed" = -1_0
"scaling.alignment.mode.X.slots-per-worker" = 0b100
"list" = [0x10, 0o20, 0b11]
"#,
        )
        .expect("valid");
        // 0x3E8 = 3*256 + 14*16 + 8 = 1000 ms.
        assert_eq!(fleet.host.interval, Duration::from_millis(1000));
        let config = &fleet.job("a").expect("a").config;
        for (key, expected) in [
            ("hex", "16"),
            ("octal", "16"),
            ("binary", "16"),
            ("underscored", "1000"),
            ("signed", "-10"),
            // 0b100 = 4, not the decimal digits 100.
            ("scaling.alignment.mode.X.slots-per-worker", "4"),
            ("list", "16;16;3"),
        ] {
            assert_eq!(config.get(key), Some(expected), "{key}");
        }
    }

    #[test]
    fn an_integer_beyond_64_bits_is_an_error_with_its_line() {
        let errors = parse(
            "[[jobs]]\nname = \"a\"\njob = \"a.toml\"\n[jobs.config]\n\"x\" = 0xFFFFFFFFFFFFFFFF\n",
        )
        .unwrap_err();
        let all = errors.to_string();
        assert!(
            all.contains("fleet.toml:5: jobs[0].config.\"x\": integer out of range"),
            "{all}"
        );
    }

    #[test]
    fn the_host_interval_and_the_flink_url_are_range_checked_with_their_lines() {
        let errors = parse(
            r#"[host]
interval = "1ms"

[[jobs]]
name = "tls"
engine = "flink"
rest = "https://flink:8081"

[[jobs]]
name = "port"
engine = "flink"
rest = "http://flink:99999"
"#,
        )
        .unwrap_err();
        let all = errors.to_string();
        assert!(
            all.contains(
                "fleet.toml:2: host.interval: `1ms` is out of range (valid: 100ms to 365d)"
            ),
            "{all}"
        );
        assert!(
            !all.contains("jobs[0].rest"),
            "an https:// URL is valid: {all}"
        );
        assert!(
            all.contains("fleet.toml:12: jobs[1].rest: `http://flink:99999`: port `99999` is out of range (valid: 1 to 65535)"),
            "{all}"
        );
        assert_eq!(errors.0.len(), 2, "{all}");
        // 3,000 years of 365 days, in hours: far beyond the one-year bound.
        let errors = parse("[host]\ninterval = \"26280000h\"\n").unwrap_err();
        assert!(
            errors.to_string().contains("fleet.toml:2: host.interval"),
            "{errors}"
        );
        let fleet = parse("[host]\ninterval = \"100ms\"\n").expect("the lower bound is valid");
        assert_eq!(fleet.host.interval, INTERVAL_RANGE.min);
    }

    #[test]
    fn a_reading_keeps_every_readable_job_next_to_every_problem() {
        let reading = parse_fleet_with(
            Path::new("/etc/flowscale/fleet.toml"),
            r#"[host]
interval = "soon"

[defaults]
"metrics.widnow" = "5 min"

[[jobs]]
name = "a"
job = "a.toml"
duration = "forever"
[jobs.config]
"utilization.targt" = 0.5
"scaling.alignment.mode" = "EVENLY_SPREAD"
"#,
            KeyPolicy::default(),
        )
        .expect("TOML");
        let all: Vec<String> = reading.errors.iter().map(ToString::to_string).collect();
        for expected in [
            "fleet.toml:2: host.interval: `soon` is not a duration",
            "fleet.toml:5: defaults.\"metrics.widnow\": unknown key `metrics.widnow` (did you mean `metrics.window`?",
            "fleet.toml:10: jobs[0].duration: `forever` is not a duration",
            "fleet.toml:12: jobs[0].config.\"utilization.targt\": unknown key `utilization.targt` (did you mean `utilization.target`?",
        ] {
            assert!(
                all.iter().any(|e| e.contains(expected)),
                "{expected}\n{all:#?}"
            );
        }
        assert_eq!(all.len(), 4, "{all:#?}");
        // The job is still there, so its mode and options can be checked too.
        let job = reading.fleet.job("a").expect("job a is kept");
        assert_eq!(
            job.config.get("scaling.alignment.mode"),
            Some("EVENLY_SPREAD")
        );
    }

    #[test]
    fn a_shared_database_with_a_host_id_and_lease_ttl() {
        let fleet = Path::new("fleet.toml");
        let text = "[host]\nstate = \"postgres://fs@127.0.0.1:5432/fs\"\nid = \"east-1\"\nlease-ttl = \"10s\"\n";
        let host = parse_fleet(fleet, text).expect("valid").host;
        assert_eq!(
            host.state_url.as_deref(),
            Some("postgres://fs@127.0.0.1:5432/fs")
        );
        assert_eq!(host.id.as_deref(), Some("east-1"));
        assert_eq!(host.lease_ttl, Duration::from_secs(10));
        let host = parse_fleet(fleet, "").expect("valid").host;
        assert_eq!((host.state_url, host.id), (None, None));
        assert_eq!(host.lease_ttl, Duration::from_secs(30));

        let errors = parse_fleet(
            fleet,
            "[host]\nstate = \"mysql://x/y\"\nlease-ttl = \"10ms\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            errors.contains("fleet.toml:2: host.state: expected a PostgreSQL URL"),
            "{errors}"
        );
        assert!(
            errors.contains("fleet.toml:3: host.lease-ttl: `10ms` is out of range"),
            "{errors}"
        );
        let errors = parse_fleet(
            fleet,
            "[host]\nstate = \"postgres://x/y\"\nstate-dir = \"dir\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(errors.contains("cannot both be set"), "{errors}");
    }

    #[test]
    fn a_state_dir_that_is_a_file_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fleet = dir.path().join("fleet.toml");
        std::fs::write(dir.path().join("state"), "not a directory").expect("write");
        let errors = parse_fleet(&fleet, "[host]\nstate-dir = \"state\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            errors.contains("fleet.toml:2: host.state-dir:")
                && errors.contains("is not a directory"),
            "{errors}"
        );
        assert!(parse_fleet(&fleet, "[host]\nstate-dir = \"fresh\"\n").is_ok());
    }

    #[test]
    fn a_key_repeated_in_every_job_is_reported_at_each_of_its_lines() {
        // Each job is 6 lines: its key on the 5th, and a misspelt one on the 6th, counted from
        // the first line of the job; the text ends without a line end.
        let job = |i: usize| {
            format!(
                "[[jobs]]\nname = \"j{i}\"\njob = \"a.toml\"\n[jobs.config]\n\
                 \"job.autoscaler.not-read\" = \"1\"\n\"metrics.windw\" = \"1m\""
            )
        };
        let text = (0..3).map(job).collect::<Vec<_>>().join("\n");
        let reading =
            parse_fleet_with(Path::new("fleet.toml"), &text, KeyPolicy::default()).expect("parsed");
        let at = |d: &Diagnostic| d.location.clone();
        let warnings: Vec<String> = reading.fleet.warnings.iter().map(at).collect();
        let errors: Vec<String> = reading.errors.iter().map(at).collect();
        let lines = |n: usize| {
            (0..3)
                .map(|i| format!("fleet.toml:{}", i * 6 + n))
                .collect::<Vec<_>>()
        };
        let starts = |found: &[String], want: Vec<String>| {
            assert_eq!(found.len(), want.len(), "{found:?}");
            for (found, want) in found.iter().zip(&want) {
                assert!(
                    found.starts_with(&format!("{want}:")),
                    "{found} is not at {want}"
                );
            }
        };
        starts(&warnings, lines(5));
        starts(&errors, lines(6));
    }

    #[test]
    fn syntax_errors_have_lines_and_unknown_keys_warn() {
        let errors = parse("[[jobs]]\nname = \"a\"\njob = \n").unwrap_err();
        assert!(
            errors.0[0].location.ends_with("fleet.toml:3"),
            "{:?}",
            errors.0
        );
        assert!(errors.0[0].message.starts_with("invalid TOML"));

        // Typos of the file's own keys are errors naming the key meant; other keys warn.
        let errors = parse("[hots]\n[[jobs]]\nname = \"a\"\njob = \"a.toml\"\nengin = \"sim\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            errors.contains("fleet.toml:1: hots: unknown key (did you mean `host`?"),
            "{errors}"
        );
        assert!(
            errors.contains("fleet.toml:5: jobs[0].engin: unknown key (did you mean `engine`?"),
            "{errors}"
        );
        let fleet = parse("[extra]\n[[jobs]]\nname = \"a\"\njob = \"a.toml\"\nowner = \"me\"\n")
            .expect("warnings only");
        let warnings: Vec<String> = fleet.warnings.iter().map(ToString::to_string).collect();
        assert!(
            warnings[0].contains("fleet.toml:1: extra: unknown key, ignored"),
            "{warnings:?}"
        );
        assert!(
            warnings[1].contains("fleet.toml:5: jobs[0].owner: unknown key, ignored"),
            "{warnings:?}"
        );
        // --strict refuses them.
        let strict = KeyPolicy { strict: true };
        let reading = parse_fleet_with(
            Path::new("/etc/flowscale/fleet.toml"),
            "[extra]\n[[jobs]]\nname = \"a\"\njob = \"a.toml\"\nowner = \"me\"\n",
            strict,
        )
        .expect("TOML");
        assert_eq!(reading.errors.len(), 2, "{:?}", reading.errors);
        assert!(reading.errors[1].message.contains("--strict"));
    }
}
