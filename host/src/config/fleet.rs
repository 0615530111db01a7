//! The fleet configuration file: host settings, defaults for every job, and the jobs.
//!
//! ```toml
//! [host]
//! plugins = "plugins"          # default: plugins/ beside this file
//! interval = "10s"             # control-loop interval
//! plugin-isolation = "process" # in-process (default) | process: a worker process per plugin
//! plugin-call-timeout = "1s"   # deadline of one call into a plugin
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

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::closest::closest;
use super::duration::parse_duration;
use super::errors::{ConfigErrors, Diagnostic};
use super::isolation::{DEFAULT_PLUGIN_CALL_TIMEOUT, PluginIsolation};
use super::job::{JobConfig, Origin};

/// Default control-loop interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// Where plugins are discovered when nothing says otherwise: beside the fleet file for `run` and
/// `validate`, in the working directory for commands without a fleet file.
pub const DEFAULT_PLUGINS_DIR: &str = "plugins";

/// The keys of the `[host]` section.
const HOST_KEYS: &[&str] = &[
    "plugins",
    "interval",
    "state-dir",
    "plugin-isolation",
    "plugin-call-timeout",
];

/// The `[host]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct HostSettings {
    /// Where plugins are discovered.
    pub plugins_dir: PathBuf,
    /// Time between two cycles of a job.
    pub interval: Duration,
    /// Where per-job state is persisted (in memory when unset).
    pub state_dir: Option<PathBuf>,
    /// Where plugin code runs.
    pub plugin_isolation: PluginIsolation,
    /// The deadline of one call into a plugin.
    pub plugin_call_timeout: Duration,
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
    },
    /// A real Flink cluster.
    Flink {
        /// REST endpoint, e.g. `http://127.0.0.1:8081`.
        rest: String,
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
    pub index: usize,
    /// Where the entry starts.
    pub location: String,
    /// Its engine.
    pub engine: EngineSpec,
    /// `[defaults]` overlaid with the job's own keys.
    pub config: JobConfig,
}

/// A parsed fleet configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetConfig {
    /// The file it was read from.
    pub file: PathBuf,
    /// Host settings.
    pub host: HostSettings,
    /// The jobs, in file order.
    pub jobs: Vec<JobSpec>,
    /// Non-fatal findings (unknown keys, ...).
    pub warnings: Vec<Diagnostic>,
}

impl FleetConfig {
    /// The job with this name.
    pub fn job(&self, name: &str) -> Option<&JobSpec> {
        self.jobs.iter().find(|j| j.name == name)
    }
}

/// Reads and parses a fleet configuration file, reporting every problem at once.
pub fn load_fleet(path: &Path) -> Result<FleetConfig, ConfigErrors> {
    let text = std::fs::read_to_string(path).map_err(|err| {
        ConfigErrors(vec![Diagnostic::new(
            path.display().to_string(),
            format!("cannot read the file: {err}"),
        )])
    })?;
    parse_fleet(path, &text)
}

/// Parses a fleet configuration from text; `path` names it in messages and anchors relative paths.
pub fn parse_fleet(path: &Path, text: &str) -> Result<FleetConfig, ConfigErrors> {
    let mut p = Parser {
        file: path.to_path_buf(),
        text,
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
    let mut host = HostSettings {
        plugins_dir: base.join(DEFAULT_PLUGINS_DIR),
        interval: DEFAULT_INTERVAL,
        state_dir: None,
        plugin_isolation: PluginIsolation::default(),
        plugin_call_timeout: DEFAULT_PLUGIN_CALL_TIMEOUT,
    };
    let mut defaults = JobConfig::new();
    let mut jobs = Vec::new();
    for (key, value) in root.iter() {
        match key.get_ref().as_ref() {
            "host" => p.host(value, &base, &mut host),
            "defaults" => match value.get_ref() {
                DeValue::Table(table) => p.flatten(table, "", "defaults", &mut defaults),
                _ => p.error(value, "defaults", "must be a table of flat keys"),
            },
            "jobs" => match value.get_ref() {
                DeValue::Array(items) => {
                    for (index, item) in items.iter().enumerate() {
                        if let Some(job) = p.job(item, index, &base) {
                            jobs.push(job);
                        }
                    }
                }
                _ => p.error(value, "jobs", "must be an array of tables (`[[jobs]]`)"),
            },
            other => p.unknown(key, other, "", &["host", "defaults", "jobs"]),
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
    if !p.errors.is_empty() {
        return Err(ConfigErrors(p.errors));
    }
    Ok(FleetConfig {
        file: path.to_path_buf(),
        host,
        jobs,
        warnings: p.warnings,
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
    job_id: Option<String>,
    duration: Option<Duration>,
}

struct Parser<'t> {
    file: PathBuf,
    text: &'t str,
    errors: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
}

impl Parser<'_> {
    fn line_of(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())]
            .bytes()
            .filter(|&b| b == b'\n')
            .count()
            + 1
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

    fn unknown<T>(&mut self, key: &Spanned<T>, name: &str, parent: &str, known: &[&str]) {
        let path = join(parent, name);
        let hint = closest(name, known.iter().copied())
            .map(|c| format!("did you mean `{c}`? "))
            .unwrap_or_default();
        let line = Some(self.line_of(key.span().start));
        self.warnings.push(Diagnostic::new(
            self.at(line, &path),
            format!("unknown key, ignored ({hint}known: {})", known.join(", ")),
        ));
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

    fn duration(&mut self, value: &Spanned<DeValue<'_>>, path: &str) -> Option<Duration> {
        match value.get_ref() {
            DeValue::String(s) => match parse_duration(s) {
                Ok(d) => Some(d),
                Err(err) => {
                    self.error(value, path, &err.to_string());
                    None
                }
            },
            DeValue::Integer(i) => match i.as_str().parse::<u64>() {
                Ok(ms) => Some(Duration::from_millis(ms)),
                Err(_) => {
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
                        if d.is_zero() {
                            self.error(value, &path, "must be greater than 0");
                        } else {
                            host.interval = d;
                        }
                    }
                }
                "state-dir" => host.state_dir = self.string(value, &path).map(|d| base.join(d)),
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
                        if d.is_zero() {
                            self.error(value, &path, "must be greater than 0");
                        } else {
                            host.plugin_call_timeout = d;
                        }
                    }
                }
                other => self.unknown(key, other, "host", HOST_KEYS),
            }
        }
    }

    fn job(&mut self, item: &Spanned<DeValue<'_>>, index: usize, base: &Path) -> Option<JobSpec> {
        let at = format!("jobs[{index}]");
        let DeValue::Table(table) = item.get_ref() else {
            self.error(item, &at, "must be a table (`[[jobs]]`)");
            return None;
        };
        let location = self.at(Some(self.line_of(item.span().start)), &at);
        let errors_before = self.errors.len();
        let fields = self.job_fields(table, &at, base);
        let Some(name) = fields.name.filter(|n| !n.trim().is_empty()) else {
            self.errors.push(Diagnostic::new(
                location,
                "every job needs a non-empty `name`",
            ));
            return None;
        };
        let engine = self.engine(fields.engine, &at, &name, &location);
        if self.errors.len() > errors_before {
            return None;
        }
        Some(JobSpec {
            name,
            index,
            location,
            engine: engine?,
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
                "rest" => engine.rest = self.string(value, &path),
                "job-id" => engine.job_id = self.string(value, &path),
                "duration" => engine.duration = self.duration(value, &path),
                "config" => match value.get_ref() {
                    DeValue::Table(table) => {
                        let prefix = format!("{at}.config");
                        self.flatten(table, "", &prefix, &mut fields.config);
                    }
                    _ => self.error(value, &path, "must be a table of flat keys"),
                },
                other => self.unknown(
                    key,
                    other,
                    at,
                    &[
                        "name", "engine", "job", "trace", "rest", "job-id", "duration", "config",
                    ],
                ),
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
    ) -> Option<EngineSpec> {
        let mut missing = |what: &str, engine: &str| {
            self.errors.push(Diagnostic::new(
                location.to_string(),
                format!("the {engine} engine needs `{what}` in {at} (`{name}`)"),
            ));
            None
        };
        match fields.kind.as_str() {
            "sim" => match fields.job {
                Some(job) => Some(EngineSpec::Sim {
                    job,
                    duration: fields.duration,
                }),
                None => missing("job", "sim"),
            },
            "flink" => match fields.rest {
                Some(rest) => Some(EngineSpec::Flink {
                    rest,
                    job_id: fields.job_id,
                }),
                None => missing("rest", "flink"),
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
    fn flatten(&mut self, table: &DeTable<'_>, prefix: &str, at: &str, out: &mut JobConfig) {
        for (key, value) in table.iter() {
            let name = join(prefix, key.get_ref().as_ref());
            let path = format!("{at}.\"{name}\"");
            let line = self.line_of(key.span().start);
            let text = match value.get_ref() {
                DeValue::Table(inner) => {
                    self.flatten(inner, &name, at, out);
                    continue;
                }
                DeValue::String(s) => s.to_string(),
                DeValue::Integer(i) => i.as_str().to_string(),
                DeValue::Float(f) => f.as_str().to_string(),
                DeValue::Boolean(b) => b.to_string(),
                DeValue::Datetime(d) => d.to_string(),
                DeValue::Array(items) => {
                    let mut parts = Vec::new();
                    for item in items.iter() {
                        match item.get_ref() {
                            DeValue::String(s) => parts.push(s.to_string()),
                            DeValue::Integer(i) => parts.push(i.as_str().to_string()),
                            _ => self.error(item, &path, "list items must be strings or integers"),
                        }
                    }
                    parts.join(";")
                }
            };
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
    fn syntax_errors_have_lines_and_unknown_keys_warn() {
        let errors = parse("[[jobs]]\nname = \"a\"\njob = \n").unwrap_err();
        assert!(
            errors.0[0].location.ends_with("fleet.toml:3"),
            "{:?}",
            errors.0
        );
        assert!(errors.0[0].message.starts_with("invalid TOML"));

        let fleet = parse("[hots]\n[[jobs]]\nname = \"a\"\njob = \"a.toml\"\nengin = \"sim\"\n")
            .expect("warnings only");
        let warnings: Vec<String> = fleet.warnings.iter().map(ToString::to_string).collect();
        assert!(
            warnings[0].contains("fleet.toml:1: hots: unknown key, ignored (did you mean `host`?"),
            "{warnings:?}"
        );
        assert!(
            warnings[1].contains("jobs[0].engin: unknown key, ignored (did you mean `engine`?"),
            "{warnings:?}"
        );
    }
}
