//! `flowscale align`: one vertex from flags, or a batch of JSON lines on stdin.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;

use flowscale_sdk::{ShipStrategy, SubtaskLoad};
use serde::{Deserialize, Serialize};

use super::catalog::{isolation, load_catalog_isolated, plugins_dir};
use super::exit_codes;
use super::json_out::write_json;
use crate::alignment::{Aligner, AlignmentRequest, JobAlignment, ModeCatalog};
use crate::config::{JobConfig, KeyError, Origin, PluginIsolation, load_fleet};
use crate::events::Event;
use crate::scaling::scaled_target;
use crate::serve::MAX_BODY_BYTES;

/// The largest parallelism Flink can run: a parallelism is a Java `int`. Every parallelism of a
/// request and of an answer stays within it, so an answer can be fed back to Flink as is.
pub(super) const MAX_PARALLELISM_VALUE: u32 = 2_147_483_647;
/// Flink's bound on a vertex's max parallelism (its number of key groups), 2^15: a larger value
/// is refused by Flink, so a request naming one describes no real vertex.
pub(super) const MAX_KEY_GROUPS: u32 = 32_768;

/// Arguments of `flowscale align`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  flowscale align --current 16 --target 24 --max-parallelism 128 --ship HASH
  flowscale align --current 16 --target 24 --max-parallelism 128 --ship HASH --set scaling.alignment.mode=EVENLY_SPREAD
  echo '{\"current\":16,\"target\":24,\"max_parallelism\":128,\"ship_strategies\":[\"HASH\"]}' | flowscale align --batch")]
pub(super) struct AlignArgs {
    /// Current parallelism of the vertex.
    #[arg(long, required_unless_present = "batch",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_PARALLELISM_VALUE)))]
    current: Option<u32>,
    /// Computed target parallelism, in [lower, min(max-parallelism, upper)] (the upper bound wins if they cross).
    #[arg(long, conflicts_with = "scale_factor", required_unless_present_any = ["batch", "scale_factor"],
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_PARALLELISM_VALUE)))]
    target: Option<u32>,
    /// Scale factor, finite and > 0; the target is ceil(factor * current) clamped to [lower, min(max-parallelism, upper)].
    #[arg(long, value_parser = parse_scale_factor)]
    scale_factor: Option<f64>,
    /// Max parallelism of the vertex (its number of key groups), in [1, 32768].
    #[arg(long, required_unless_present = "batch",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_KEY_GROUPS)))]
    max_parallelism: Option<u32>,
    /// Partition count of a source (0: not a source, or unknown).
    #[arg(long, default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_PARALLELISM_VALUE)))]
    source_partitions: u32,
    /// Lower parallelism limit.
    #[arg(long, default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_PARALLELISM_VALUE)))]
    lower: u32,
    /// Upper parallelism limit.
    #[arg(long, default_value_t = MAX_PARALLELISM_VALUE,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_PARALLELISM_VALUE)))]
    upper: u32,
    /// Input ship strategies, comma-separated (HASH, REBALANCE, RESCALE, FORWARD, CUSTOM:<buckets>, ...).
    #[arg(long, value_delimiter = ',')]
    ship: Vec<String>,
    /// A configuration key for the decision (repeatable), e.g. scaling.alignment.mode=EVENLY_SPREAD.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// A fleet configuration whose job's keys (and plugins directory) to use.
    #[arg(long, requires = "job")]
    config: Option<PathBuf>,
    /// The job of --config.
    #[arg(long, requires = "config")]
    job: Option<String>,
    /// A name for the vertex in the answer.
    #[arg(long)]
    vertex: Option<String>,
    /// Busy ratio of each subtask at the current parallelism, comma-separated, each in [0, 1]
    /// (one per subtask; Flink's busyTimeMsPerSecond / 1000). Load-aware modes read it.
    #[arg(long, value_delimiter = ',', value_name = "RATIO,...")]
    subtask_busy: Vec<f64>,
    /// Records received per second by each subtask at the current parallelism, comma-separated
    /// (one per subtask; Flink's numRecordsInPerSecond).
    #[arg(long, value_delimiter = ',', value_name = "RATE,...")]
    subtask_records_in: Vec<f64>,
    /// Plugins directory (default: the fleet's, else ./plugins).
    #[arg(long, env = "FLOWSCALE_PLUGINS_DIR")]
    plugins: Option<PathBuf>,
    /// Where plugin modes run: in-process (default; a crashing plugin ends the host) or
    /// process (a worker process per plugin file; crashes and hangs are contained). Overrides
    /// the fleet's `[host] plugin-isolation`.
    #[arg(long, value_name = "in-process|process")]
    plugin_isolation: Option<PluginIsolation>,
    /// Print the answer as JSON (batch answers are always JSON lines).
    #[arg(long)]
    json: bool,
    /// Read JSON requests from stdin, one per line; answer exactly one JSON line per input line,
    /// in order (a line that cannot be answered gets {"line": N, "error": "..."}). Flags
    /// describing one request are refused with it: each line carries its own fields.
    #[arg(long, conflicts_with_all = [
        "current", "target", "scale_factor", "max_parallelism", "source_partitions",
        "lower", "upper", "ship", "set", "vertex", "subtask_busy", "subtask_records_in",
    ])]
    batch: bool,
}

/// Why a `--scale-factor` is refused.
#[derive(Debug, thiserror::Error)]
enum ScaleFactorError {
    /// Not a number at all.
    #[error("not a number: {0}")]
    NotANumber(#[from] std::num::ParseFloatError),
    /// NaN, infinite, zero or negative.
    #[error("must be a finite number > 0, got {0}")]
    OutOfRange(f64),
}

/// `--scale-factor`: a finite number above 0. NaN would silently become the lower limit through
/// the saturating cast, and a factor of 0 or below never describes a real scaling decision.
fn parse_scale_factor(text: &str) -> Result<f64, ScaleFactorError> {
    let factor: f64 = text.trim().parse()?;
    check_scale_factor(factor).map_err(|_| ScaleFactorError::OutOfRange(factor))
}

/// The scale factor if it is finite and above 0 (the same rule for the flag and the batch field).
fn check_scale_factor(factor: f64) -> Result<f64, RequestError> {
    if factor.is_finite() && factor > 0.0 {
        Ok(factor)
    } else {
        Err(RequestError::ScaleFactor(factor))
    }
}

/// One request, as a batch line or built from flags.
///
/// The integers are read as `i64` so that a negative or oversized value gets an error naming its
/// valid range rather than serde's "expected u32".
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    current: i64,
    #[serde(default)]
    target: Option<i64>,
    #[serde(default)]
    scale_factor: Option<f64>,
    max_parallelism: i64,
    #[serde(default)]
    source_partitions: i64,
    #[serde(default = "default_lower")]
    lower: i64,
    #[serde(default = "default_upper")]
    upper: i64,
    #[serde(default)]
    ship_strategies: Vec<String>,
    #[serde(default)]
    config: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    vertex: Option<String>,
    /// Busy ratio per subtask at the current parallelism (empty: not known).
    #[serde(default)]
    subtask_busy: Vec<f64>,
    /// Records in per second per subtask at the current parallelism (empty: not known).
    #[serde(default)]
    subtask_records_in: Vec<f64>,
}

fn default_lower() -> i64 {
    1
}
fn default_upper() -> i64 {
    i64::from(MAX_PARALLELISM_VALUE)
}

/// A request whose numbers are all within their ranges.
#[derive(Debug, Clone, Copy)]
struct Checked {
    current: u32,
    target: u32,
    max_parallelism: u32,
    source_partitions: u32,
    lower: u32,
    upper: u32,
}

/// The answer to a line that cannot be answered: its line number, for machines, and a message
/// that starts with it, for people.
#[derive(Debug, Serialize)]
struct ErrorAnswer {
    line: usize,
    error: String,
}

/// One answer.
#[derive(Debug, Serialize)]
pub(super) struct Answer {
    #[serde(skip_serializing_if = "Option::is_none")]
    vertex: Option<String>,
    current: u32,
    target: u32,
    parallelism: u32,
    mode: String,
    applicable: bool,
    events: Vec<Event>,
    explanation: Vec<String>,
}

/// Why a request cannot be answered.
#[derive(Debug, thiserror::Error)]
enum RequestError {
    /// An integer field outside its range.
    #[error("`{field}` must be in [{min}, {max}] ({why}), got {value}")]
    OutOfRange {
        field: &'static str,
        value: i64,
        min: u32,
        max: u32,
        why: &'static str,
    },
    /// The limits are not `lower <= upper`.
    #[error(
        "limits must satisfy 1 <= lower <= upper <= {MAX_PARALLELISM_VALUE} (got lower {lower}, upper {upper})"
    )]
    Limits { lower: u32, upper: u32 },
    /// Both `target` and `scale_factor`.
    #[error("give either `target` or `scale_factor`, not both")]
    TargetAndFactor,
    /// Neither `target` nor `scale_factor`.
    #[error("`target` or `scale_factor` is required")]
    NoTarget,
    /// A scale factor that is NaN, infinite, zero or negative.
    #[error("`scale_factor` must be a finite number > 0, got {0}")]
    ScaleFactor(f64),
    /// A target the autoscaler would never compute: below the lower limit or above the cap.
    #[error(
        "`target` {target} is outside [{low}, {bound}]: the autoscaler computes targets between lower {lower} and min(max_parallelism {max_parallelism}, upper {upper}) = {bound}, the upper bound winning (use scale_factor to have a target clamped)"
    )]
    TargetOutOfRange {
        target: i64,
        low: u32,
        bound: u32,
        lower: u32,
        max_parallelism: u32,
        upper: u32,
    },
    /// A per-subtask list whose length is not the current parallelism.
    #[error(
        "`{field}` needs one value per subtask: {current} (the current parallelism), got {len}"
    )]
    SubtaskCount {
        field: &'static str,
        current: u32,
        len: usize,
    },
    /// A per-subtask value outside its range.
    #[error("`{field}`[{index}] must be {range}, got {value}")]
    SubtaskValue {
        field: &'static str,
        index: usize,
        range: &'static str,
        value: f64,
    },
    /// A `config` value that is not a string, number or boolean.
    #[error("config `{key}`: expected a string, number or boolean, got {value}")]
    ConfigValue {
        key: String,
        value: serde_json::Value,
    },
    /// The mode does not resolve.
    #[error("{}", join(.0))]
    Resolve(Vec<KeyError>),
}

/// A batch line that cannot be answered. Each still gets its answer line, so that answer `N` is
/// always the answer to request `N`.
#[derive(Debug, thiserror::Error)]
enum LineError {
    /// Bytes that are not UTF-8; only this line is lost, not the rest of the batch.
    #[error("line {line}: not UTF-8: {source}")]
    NotUtf8 {
        line: usize,
        source: std::str::Utf8Error,
    },
    /// A blank line: no request, but an answer all the same to keep answers in line with requests.
    #[error("line {line}: empty request")]
    Empty { line: usize },
    /// Not a request.
    #[error("line {line}: {source}")]
    Json {
        line: usize,
        source: serde_json::Error,
    },
    /// A request that cannot be answered.
    #[error("line {line}: {source}")]
    Request { line: usize, source: RequestError },
    /// A line longer than any request: skipped unread, so that it costs no memory.
    #[error("line {line}: longer than {MAX_LINE_BYTES} bytes, the most a request may have")]
    TooLong { line: usize },
}

impl LineError {
    /// The 1-based input line the error is about.
    fn line(&self) -> usize {
        match self {
            LineError::NotUtf8 { line, .. }
            | LineError::Empty { line }
            | LineError::Json { line, .. }
            | LineError::Request { line, .. }
            | LineError::TooLong { line } => *line,
        }
    }
}

impl RequestError {
    /// Whether the request's own numbers are wrong, which for flags means the command line is
    /// (exit 2, like clap's checks of single flags), rather than the configuration it names.
    fn is_usage(&self) -> bool {
        !matches!(
            self,
            RequestError::ConfigValue { .. } | RequestError::Resolve(_)
        )
    }
}

fn join(errors: &[KeyError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// `value` as a `u32` if it is in `[min, max]`.
fn in_range(
    field: &'static str,
    value: i64,
    min: u32,
    max: u32,
    why: &'static str,
) -> Result<u32, RequestError> {
    u32::try_from(value)
        .ok()
        .filter(|v| (min..=max).contains(v))
        .ok_or(RequestError::OutOfRange {
            field,
            value,
            min,
            max,
            why,
        })
}

/// The request's numbers, each checked against its range, and its target: as given (only within
/// what the pipeline could compute), or computed from the scale factor the way the pipeline
/// computes it. No answer is ever above `i32::MAX`: every bound is at most that.
fn check(request: &Request) -> Result<Checked, RequestError> {
    const INT: &str = "a Flink parallelism is a Java int";
    let current = in_range("current", request.current, 1, MAX_PARALLELISM_VALUE, INT)?;
    let max_parallelism = in_range(
        "max_parallelism",
        request.max_parallelism,
        1,
        MAX_KEY_GROUPS,
        "Flink's bound on max parallelism",
    )?;
    let source_partitions = in_range(
        "source_partitions",
        request.source_partitions,
        0,
        MAX_PARALLELISM_VALUE,
        "0 for not a source or unknown",
    )?;
    let lower = in_range("lower", request.lower, 1, MAX_PARALLELISM_VALUE, INT)?;
    let upper = in_range("upper", request.upper, 1, MAX_PARALLELISM_VALUE, INT)?;
    if lower > upper {
        return Err(RequestError::Limits { lower, upper });
    }
    // The pipeline's clamp: `[lower, min(max parallelism, upper)]`, the upper bound winning when
    // the two cross, so the valid targets are `[min(lower, bound), bound]`.
    let bound = max_parallelism.min(upper);
    let low = lower.min(bound);
    let target = match (request.target, request.scale_factor) {
        (Some(_), Some(_)) => return Err(RequestError::TargetAndFactor),
        (None, None) => return Err(RequestError::NoTarget),
        (Some(t), None) => u32::try_from(t)
            .ok()
            .filter(|t| (low..=bound).contains(t))
            .ok_or(RequestError::TargetOutOfRange {
                target: t,
                low,
                bound,
                lower,
                max_parallelism,
                upper,
            })?,
        (None, Some(factor)) => {
            let factor = check_scale_factor(factor)?;
            scaled_target(
                factor,
                current,
                max_parallelism,
                i64::from(lower),
                i64::from(upper),
            )
            .target
        }
    };
    Ok(Checked {
        current,
        target,
        max_parallelism,
        source_partitions,
        lower,
        upper,
    })
}

/// The job's configuration with the request's `config` keys on top.
fn config_of(request: &Request, base: &JobConfig) -> Result<JobConfig, RequestError> {
    let mut config = base.clone();
    for (key, value) in &request.config {
        let text = match value {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            other => {
                return Err(RequestError::ConfigValue {
                    key: key.clone(),
                    value: other.clone(),
                });
            }
        };
        config.set(key, text, Origin::inline(key, &format!("config.\"{key}\"")));
    }
    Ok(config)
}

/// The per-subtask load of a request: each list empty or one value per subtask, busy ratios
/// in [0, 1], rates finite and >= 0. Empty when neither list is given.
fn subtask_loads(request: &Request, current: u32) -> Result<Vec<SubtaskLoad>, RequestError> {
    type Check = fn(f64) -> bool;
    let lists: [(&'static str, &[f64], &'static str, Check); 2] = [
        ("subtask_busy", &request.subtask_busy, "in [0, 1]", |v| {
            (0.0..=1.0).contains(&v)
        }),
        (
            "subtask_records_in",
            &request.subtask_records_in,
            "finite and >= 0",
            |v| v.is_finite() && v >= 0.0,
        ),
    ];
    for (field, values, range, ok) in lists {
        if !values.is_empty() && values.len() != current as usize {
            return Err(RequestError::SubtaskCount {
                field,
                current,
                len: values.len(),
            });
        }
        if let Some((index, &value)) = values.iter().enumerate().find(|(_, v)| !ok(**v)) {
            return Err(RequestError::SubtaskValue {
                field,
                index,
                range,
                value,
            });
        }
    }
    if request.subtask_busy.is_empty() && request.subtask_records_in.is_empty() {
        return Ok(Vec::new());
    }
    Ok((0..current as usize)
        .map(|i| SubtaskLoad {
            busy_ratio: request.subtask_busy.get(i).copied(),
            records_in_per_second: request.subtask_records_in.get(i).copied(),
        })
        .collect())
}

fn answer(
    request: &Request,
    base: &JobConfig,
    catalog: &dyn ModeCatalog,
) -> Result<Answer, RequestError> {
    let checked = check(request)?;
    let config = config_of(request, base)?;
    let alignment =
        JobAlignment::resolve("align", &config, catalog).map_err(RequestError::Resolve)?;
    let vertex = request
        .vertex
        .clone()
        .unwrap_or_else(|| "vertex".to_string());
    let subtask_loads = subtask_loads(request, checked.current)?;
    let outcome = alignment.align(AlignmentRequest {
        job: "align".into(),
        vertex_id: vertex.as_str().into(),
        vertex_name: vertex.into(),
        source_partitions: checked.source_partitions,
        lower_limit: checked.lower,
        upper_limit: checked.upper,
        input_ship_strategies: request
            .ship_strategies
            .iter()
            .map(|s| ShipStrategy::parse(s))
            .collect(),
        subtask_loads,
        ..AlignmentRequest::new(checked.current, checked.target, checked.max_parallelism)
    });
    Ok(Answer {
        vertex: request.vertex.clone(),
        current: checked.current,
        target: checked.target,
        parallelism: outcome.parallelism,
        mode: outcome.mode.to_string(),
        applicable: outcome.applicable,
        events: outcome.events,
        explanation: outcome.explanation.to_vec(),
    })
}

/// Runs `flowscale align`.
pub(super) fn exec(args: AlignArgs) -> u8 {
    let (base, fleet_plugins) = match (&args.config, &args.job) {
        (Some(path), Some(job)) => match load_fleet(path) {
            Ok(fleet) => match fleet.job(job) {
                Some(spec) => (spec.config.clone(), Some(fleet.host.clone())),
                None => {
                    let names: Vec<&str> = fleet.jobs.iter().map(|j| j.name.as_str()).collect();
                    eprintln!(
                        "error: no job `{job}` in {} (jobs: {})",
                        path.display(),
                        names.join(", ")
                    );
                    return exit_codes::FAILED;
                }
            },
            Err(errors) => {
                eprint!("error: {errors}");
                return exit_codes::FAILED;
            }
        },
        _ => (JobConfig::new(), None),
    };
    let catalog = load_catalog_isolated(
        &plugins_dir(
            args.plugins.as_deref(),
            fleet_plugins.as_ref().map(|h| h.plugins_dir.as_path()),
        ),
        &isolation(args.plugin_isolation, fleet_plugins.as_ref()),
    );
    if args.batch {
        return batch(&base, catalog.as_ref());
    }
    let mut config = BTreeMap::new();
    for pair in &args.set {
        let Some((key, value)) = pair.split_once('=') else {
            eprintln!("error: --set expects KEY=VALUE, got `{pair}`");
            return exit_codes::USAGE;
        };
        config.insert(
            key.trim().to_string(),
            serde_json::Value::String(value.trim().to_string()),
        );
    }
    let request = Request {
        current: args.current.map_or(0, i64::from),
        target: args.target.map(i64::from),
        scale_factor: args.scale_factor,
        max_parallelism: args.max_parallelism.map_or(0, i64::from),
        source_partitions: i64::from(args.source_partitions),
        lower: i64::from(args.lower),
        upper: i64::from(args.upper),
        ship_strategies: args.ship.clone(),
        config,
        vertex: args.vertex.clone(),
        subtask_busy: args.subtask_busy.clone(),
        subtask_records_in: args.subtask_records_in.clone(),
    };
    match answer(&request, &base, catalog.as_ref()) {
        Ok(answer) => {
            let mut out = std::io::stdout().lock();
            let written = if args.json {
                write_json(&mut out, &answer)
            } else {
                print_human(&mut out, &answer)
            };
            if written.is_err() {
                return exit_codes::FAILED;
            }
            exit_codes::OK
        }
        Err(err) => {
            eprintln!("error: {err}");
            if err.is_usage() {
                exit_codes::USAGE
            } else {
                exit_codes::FAILED
            }
        }
    }
}

fn print_human(out: &mut impl Write, answer: &Answer) -> std::io::Result<()> {
    writeln!(out, "parallelism: {}", answer.parallelism)?;
    writeln!(
        out,
        "mode:        {}{}",
        answer.mode,
        if answer.applicable {
            ""
        } else {
            " (not applicable: target kept)"
        }
    )?;
    writeln!(
        out,
        "current:     {}  target: {}",
        answer.current, answer.target
    )?;
    writeln!(out, "why:")?;
    for line in &answer.explanation {
        writeln!(out, "  - {line}")?;
    }
    if answer.events.is_empty() {
        writeln!(out, "events:      none")?;
    } else {
        writeln!(out, "events:")?;
        for event in &answer.events {
            writeln!(out, "  - {}: {}", event.reason.as_str(), event.message)?;
        }
    }
    Ok(())
}

/// Why a batch stopped before the end of its input.
#[derive(Debug, thiserror::Error)]
pub(super) enum BatchError {
    /// The input could not be read (not a content problem: those are answered per line).
    #[error("cannot read stdin after line {line}: {source}")]
    Read { line: usize, source: std::io::Error },
    /// The answers could not be written.
    #[error("cannot write the answer to line {line}: {source}")]
    Write { line: usize, source: std::io::Error },
}

/// What a batch answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BatchSummary {
    /// Input lines read, which is also answer lines written.
    pub(crate) lines: usize,
    /// Of them, answers that are errors.
    pub(crate) failed: usize,
}

/// The longest batch line, its line end not counted: the largest body of `POST /api/v1/align`,
/// which answers the same requests.
const MAX_LINE_BYTES: usize = MAX_BODY_BYTES;

/// `line` without its line end: `\n`, or `\r\n` from a file written on Windows.
fn strip_line_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The answer to input line `line` (1-based), whatever its bytes.
fn answer_line(
    line: usize,
    bytes: &[u8],
    base: &JobConfig,
    catalog: &dyn ModeCatalog,
) -> Result<Answer, LineError> {
    let text = std::str::from_utf8(bytes).map_err(|source| LineError::NotUtf8 { line, source })?;
    // JSON's own whitespace; anything else is left to the JSON parser to report.
    if text.trim_matches([' ', '\t', '\r', '\n']).is_empty() {
        return Err(LineError::Empty { line });
    }
    let request =
        serde_json::from_str::<Request>(text).map_err(|source| LineError::Json { line, source })?;
    answer(&request, base, catalog).map_err(|source| LineError::Request { line, source })
}

/// Answers one `align --batch` input line (1-based `line`, the bytes without the line end):
/// the JSON answer line `--batch` prints for it (without the newline), or the message of the
/// error line it prints instead (`line N: ...`). `base` is the job's configuration the request's
/// `config` keys are laid over. Nothing is read or written; a fuzz target drives it.
pub fn batch_line(
    line: usize,
    bytes: &[u8],
    base: &JobConfig,
    catalog: &dyn ModeCatalog,
) -> Result<String, String> {
    match answer_line(line, bytes, base, catalog) {
        Ok(answer) => serde_json::to_string(&answer).map_err(|e| format!("line {line}: {e}")),
        Err(err) => Err(err.to_string()),
    }
}

/// The answer to one request (the body of `POST /api/v1/align`), as a batch answers its line 1:
/// `Ok` with the answer, `Err` with the error answer.
pub(super) fn answer_request(
    bytes: &[u8],
    catalog: &dyn ModeCatalog,
) -> Result<serde_json::Value, serde_json::Value> {
    let encode = |v: Result<serde_json::Value, serde_json::Error>| {
        v.unwrap_or_else(|e| serde_json::json!({"line": 1, "error": e.to_string()}))
    };
    match answer_line(1, strip_line_end(bytes), &JobConfig::new(), catalog) {
        Ok(answer) => Ok(encode(serde_json::to_value(&answer))),
        Err(err) => Err(encode(serde_json::to_value(ErrorAnswer {
            line: err.line(),
            error: err.to_string(),
        }))),
    }
}

/// Answers every line of `input` on `out`, one line each, in order: the bytes are read as they
/// come, so a line that is blank, not UTF-8 or not a request costs only its own answer (an error
/// line `{"line": N, "error": "line N: ..."}`), and answer `N` is always the answer to line `N`.
/// A last line without a line end is a line too; a line longer than [`MAX_LINE_BYTES`] is
/// answered with an error line and never held in memory.
pub(super) fn run_batch(
    input: &mut impl BufRead,
    out: &mut impl Write,
    base: &JobConfig,
    catalog: &dyn ModeCatalog,
) -> Result<BatchSummary, BatchError> {
    let mut summary = BatchSummary {
        lines: 0,
        failed: 0,
    };
    let mut buf = Vec::new();
    loop {
        let read = read_bounded_line(input, &mut buf).map_err(|source| BatchError::Read {
            line: summary.lines,
            source,
        })?;
        let Some(complete) = read else {
            return Ok(summary);
        };
        summary.lines += 1;
        let line = summary.lines;
        let answered = if complete {
            answer_line(line, strip_line_end(&buf), base, catalog)
        } else {
            Err(LineError::TooLong { line })
        };
        let written = match answered {
            Ok(answer) => serde_json::to_writer(&mut *out, &answer),
            Err(err) => {
                summary.failed += 1;
                let answer = ErrorAnswer {
                    line: err.line(),
                    error: err.to_string(),
                };
                serde_json::to_writer(&mut *out, &answer)
            }
        };
        written
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(out))
            .map_err(|source| BatchError::Write { line, source })?;
    }
}

/// Reads the next line of `input` into `buf` (line end included): `None` at the end of the
/// input, `Some(true)` for a line of at most [`MAX_LINE_BYTES`] bytes (its line end not
/// counted), `Some(false)` for a longer one, whose bytes are consumed up to its line end
/// without being kept, so that a line of any length costs no more than that bound.
fn read_bounded_line(input: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<Option<bool>> {
    buf.clear();
    // The line end (`\r\n` at most) may follow a line of the largest length.
    let keep = MAX_LINE_BYTES + 2;
    let mut any = false;
    let mut fits = true;
    loop {
        let chunk = match input.fill_buf() {
            Ok(chunk) => chunk,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if chunk.is_empty() {
            break;
        }
        any = true;
        let (part, ends) = match chunk.iter().position(|&b| b == b'\n') {
            Some(at) => (&chunk[..=at], true),
            None => (chunk, false),
        };
        if fits {
            let room = keep - buf.len();
            if part.len() <= room {
                buf.extend_from_slice(part);
            } else {
                fits = false;
                buf.clear();
            }
        }
        let used = part.len();
        input.consume(used);
        if ends {
            break;
        }
    }
    if !any {
        return Ok(None);
    }
    Ok(Some(fits && strip_line_end(buf).len() <= MAX_LINE_BYTES))
}

fn batch(base: &JobConfig, catalog: &dyn ModeCatalog) -> u8 {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    match run_batch(&mut stdin.lock(), &mut out, base, catalog) {
        Ok(BatchSummary { failed: 0, .. }) => exit_codes::OK,
        Ok(BatchSummary { lines, failed }) => {
            eprintln!("error: {failed} of {lines} line(s) failed");
            exit_codes::FAILED
        }
        Err(err) => {
            eprintln!("error: {err}");
            exit_codes::FAILED
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alignment::NoCustomModes;

    fn line(text: &str) -> Result<String, String> {
        batch_line(7, text.as_bytes(), &JobConfig::new(), &NoCustomModes)
    }

    #[test]
    fn a_batch_line_is_answered_or_refused_with_its_number() {
        let answer = line(r#"{"current":16,"target":24,"max_parallelism":128}"#).unwrap();
        let value: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(value["target"], 24);
        let err = line("{\"current\":").unwrap_err();
        assert!(err.starts_with("line 7: "), "{err}");
        let err = batch_line(3, b"\xff\xfe", &JobConfig::new(), &NoCustomModes).unwrap_err();
        assert!(err.starts_with("line 3: "), "{err}");
    }

    /// The answers `run_batch` writes for `input`, each parsed.
    fn run(input: &[u8]) -> (BatchSummary, Vec<serde_json::Value>) {
        let mut out = Vec::new();
        let summary = run_batch(&mut &input[..], &mut out, &JobConfig::new(), &NoCustomModes)
            .expect("in-memory input and output");
        let text = String::from_utf8(out).expect("answers are UTF-8");
        let answers = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("an answer is JSON"))
            .collect();
        (summary, answers)
    }

    #[test]
    fn a_line_longer_than_a_request_may_be_gets_an_error_line_and_the_batch_goes_on() {
        let request = br#"{"current":16,"target":24,"max_parallelism":128}"#;
        // Padding with JSON whitespace keeps a line a valid request up to the bound, so that
        // the error can only come from the length.
        let padded = |len: usize| {
            let mut line = request.to_vec();
            line.resize(len, b' ');
            line
        };
        let mut input = Vec::new();
        for (len, end) in [
            (MAX_LINE_BYTES, &b"\r\n"[..]),
            (MAX_LINE_BYTES + 1, b"\n"),
            (4 * MAX_LINE_BYTES, b"\n"),
            (request.len(), b"\n"),
            (MAX_LINE_BYTES + 1, b""),
        ] {
            input.extend_from_slice(&padded(len));
            input.extend_from_slice(end);
        }
        let (summary, answers) = run(&input);
        assert_eq!(
            summary,
            BatchSummary {
                lines: 5,
                failed: 3
            }
        );
        assert_eq!(answers.len(), 5);
        for ok in [0, 3] {
            assert_eq!(answers[ok]["target"], 24, "{}", answers[ok]);
        }
        for (i, line) in [(1, 2), (2, 3), (4, 5)] {
            assert_eq!(
                answers[i],
                serde_json::json!({
                    "line": line,
                    "error": format!(
                        "line {line}: longer than {MAX_LINE_BYTES} bytes, the most a request may have"
                    ),
                })
            );
        }
    }

    #[test]
    fn a_long_line_is_never_held_in_memory() {
        let mut line = vec![b'x'; 64 * MAX_LINE_BYTES];
        line.push(b'\n');
        line.extend_from_slice(b"next\n");
        // A reader handing out small chunks, as a pipe does.
        let mut input = std::io::BufReader::with_capacity(4096, &line[..]);
        let mut buf = Vec::new();
        assert_eq!(
            read_bounded_line(&mut input, &mut buf).unwrap(),
            Some(false)
        );
        // Kept at most the bound and its line end, in a vector grown at most twice that.
        assert!(
            buf.capacity() <= 2 * (MAX_LINE_BYTES + 2),
            "{} bytes kept",
            buf.capacity()
        );
        assert_eq!(read_bounded_line(&mut input, &mut buf).unwrap(), Some(true));
        assert_eq!(buf, b"next\n");
        assert_eq!(read_bounded_line(&mut input, &mut buf).unwrap(), None);
    }

    // Found by the align_batch_line fuzz target: a target below `lower` was answered as is.
    #[test]
    fn a_target_below_lower_is_refused() {
        let err = line(r#"{"current":1,"target":1,"max_parallelism":8,"lower":4}"#).unwrap_err();
        assert!(err.contains("`target` 1 is outside [4, 8]"), "{err}");
        assert!(line(r#"{"current":1,"target":4,"max_parallelism":8,"lower":4}"#).is_ok());
    }

    // Found by the align_batch_line fuzz target: `upper` and `max_parallelism` up to u32::MAX
    // gave answers above i32::MAX, which no Flink vertex can run.
    #[test]
    fn limits_above_i32_max_are_refused() {
        let big = u64::from(u32::MAX);
        let err = line(&format!(
            r#"{{"current":1,"target":{big},"max_parallelism":{big},"upper":{big}}}"#
        ))
        .unwrap_err();
        assert!(
            err.contains("`max_parallelism` must be in [1, 32768]"),
            "{err}"
        );
        let err = line(&format!(
            r#"{{"current":1,"scale_factor":1e308,"max_parallelism":8,"upper":{big}}}"#
        ))
        .unwrap_err();
        assert!(err.contains("`upper` must be in [1, 2147483647]"), "{err}");
        // A huge factor is clamped to the cap, as the pipeline clamps it.
        let answer = line(r#"{"current":1,"scale_factor":1e308,"max_parallelism":32768}"#).unwrap();
        let value: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(value["target"], 32_768);
    }
}
