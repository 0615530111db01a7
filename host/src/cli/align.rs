//! `flowscale align`: one vertex from flags, or a batch of JSON lines on stdin.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;

use flowscale_sdk::ShipStrategy;
use serde::{Deserialize, Serialize};

use super::catalog::{load_catalog, plugins_dir};
use super::exit_codes;
use crate::alignment::{Aligner, AlignmentRequest, JobAlignment, ModeCatalog};
use crate::config::{JobConfig, KeyError, Origin, load_fleet};
use crate::events::Event;
use crate::scaling::scaled_target;

/// Arguments of `flowscale align`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  flowscale align --current 16 --target 24 --max-parallelism 128 --ship HASH
  flowscale align --current 16 --target 24 --max-parallelism 128 --ship HASH --set scaling.alignment.mode=EVENLY_SPREAD
  echo '{\"current\":16,\"target\":24,\"max_parallelism\":128,\"ship_strategies\":[\"HASH\"]}' | flowscale align --batch")]
pub struct AlignArgs {
    /// Current parallelism of the vertex.
    #[arg(long, required_unless_present = "batch")]
    current: Option<u32>,
    /// Computed target parallelism.
    #[arg(long, conflicts_with = "scale_factor", required_unless_present_any = ["batch", "scale_factor"])]
    target: Option<u32>,
    /// Scale factor; the target is ceil(factor * current) clamped to [lower, min(max-parallelism, upper)].
    #[arg(long)]
    scale_factor: Option<f64>,
    /// Max parallelism of the vertex (its number of key groups).
    #[arg(long, required_unless_present = "batch")]
    max_parallelism: Option<u32>,
    /// Partition count of a source (0: not a source, or unknown).
    #[arg(long, default_value_t = 0)]
    source_partitions: u32,
    /// Lower parallelism limit.
    #[arg(long, default_value_t = 1)]
    lower: u32,
    /// Upper parallelism limit.
    #[arg(long, default_value_t = 2_147_483_647)]
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
    /// Plugins directory (default: the fleet's, else ./plugins).
    #[arg(long, env = "FLOWSCALE_PLUGINS_DIR")]
    plugins: Option<PathBuf>,
    /// Print the answer as JSON.
    #[arg(long)]
    json: bool,
    /// Read JSON requests from stdin, one per line; answer one JSON line each, in order.
    #[arg(long, conflicts_with_all = ["current", "target", "scale_factor", "max_parallelism"])]
    batch: bool,
}

/// One request, as a batch line or built from flags.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    current: u32,
    #[serde(default)]
    target: Option<u32>,
    #[serde(default)]
    scale_factor: Option<f64>,
    max_parallelism: u32,
    #[serde(default)]
    source_partitions: u32,
    #[serde(default = "default_lower")]
    lower: u32,
    #[serde(default = "default_upper")]
    upper: u32,
    #[serde(default)]
    ship_strategies: Vec<String>,
    #[serde(default)]
    config: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    vertex: Option<String>,
}

fn default_lower() -> u32 {
    1
}
fn default_upper() -> u32 {
    2_147_483_647
}

/// One answer.
#[derive(Debug, Serialize)]
struct Answer {
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
    /// `current` is 0.
    #[error("`current` must be at least 1")]
    NoCurrent,
    /// `max_parallelism` is 0.
    #[error("`max_parallelism` must be at least 1")]
    NoKeyGroups,
    /// The limits are not `1 <= lower <= upper`.
    #[error("limits must satisfy 1 <= lower <= upper (got lower {lower}, upper {upper})")]
    Limits { lower: u32, upper: u32 },
    /// Both `target` and `scale_factor`.
    #[error("give either `target` or `scale_factor`, not both")]
    TargetAndFactor,
    /// Neither `target` nor `scale_factor`.
    #[error("`target` or `scale_factor` is required")]
    NoTarget,
    /// `target` is 0.
    #[error("`target` must be at least 1")]
    ZeroTarget,
    /// A target below the lower limit.
    #[error(
        "target {target} is below lower {lower}; the autoscaler never computes such a target (use scale_factor to have it clamped)"
    )]
    TargetBelowLower { target: u32, lower: u32 },
    /// A limit above what Flink can run (a parallelism is a Java `int`).
    #[error("`{key}` must be at most {max} (Flink's largest parallelism), got {value}", max = i32::MAX)]
    AboveIntMax { key: &'static str, value: u32 },
    /// A target the autoscaler would have clamped.
    #[error(
        "target {target} is above min(max_parallelism {max_parallelism}, upper {upper}) = {bound}; the autoscaler never computes such a target (use scale_factor to have it clamped)"
    )]
    TargetAboveBound {
        target: u32,
        max_parallelism: u32,
        upper: u32,
        bound: u32,
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

/// A batch line that cannot be answered.
#[derive(Debug, thiserror::Error)]
enum LineError {
    /// Not a request.
    #[error("line {line}: {source}")]
    Json {
        line: usize,
        source: serde_json::Error,
    },
    /// A request that cannot be answered.
    #[error("line {line}: {source}")]
    Request { line: usize, source: RequestError },
}

fn join(errors: &[KeyError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The request's target: as given (never above what the pipeline could compute), or computed
/// from the scale factor the way the pipeline computes it.
fn target(request: &Request) -> Result<u32, RequestError> {
    match (request.target, request.scale_factor) {
        (Some(_), Some(_)) => Err(RequestError::TargetAndFactor),
        (None, None) => Err(RequestError::NoTarget),
        (Some(0), None) => Err(RequestError::ZeroTarget),
        (Some(t), None) if t < request.lower => Err(RequestError::TargetBelowLower {
            target: t,
            lower: request.lower,
        }),
        (Some(t), None) => {
            let bound = request.max_parallelism.min(request.upper);
            if t > bound {
                return Err(RequestError::TargetAboveBound {
                    target: t,
                    max_parallelism: request.max_parallelism,
                    upper: request.upper,
                    bound,
                });
            }
            Ok(t)
        }
        (None, Some(factor)) => Ok(scaled_target(
            factor,
            request.current,
            request.max_parallelism,
            i64::from(request.lower),
            i64::from(request.upper),
        )
        .target),
    }
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

fn answer(
    request: &Request,
    base: &JobConfig,
    catalog: &dyn ModeCatalog,
) -> Result<Answer, RequestError> {
    if request.current == 0 {
        return Err(RequestError::NoCurrent);
    }
    if request.max_parallelism == 0 {
        return Err(RequestError::NoKeyGroups);
    }
    if request.lower == 0 || request.lower > request.upper {
        return Err(RequestError::Limits {
            lower: request.lower,
            upper: request.upper,
        });
    }
    let int_max = u32::try_from(i32::MAX).unwrap_or(u32::MAX);
    for (key, value) in [
        ("max_parallelism", request.max_parallelism),
        ("upper", request.upper),
    ] {
        if value > int_max {
            return Err(RequestError::AboveIntMax { key, value });
        }
    }
    let target = target(request)?;
    let config = config_of(request, base)?;
    let alignment =
        JobAlignment::resolve("align", &config, catalog).map_err(RequestError::Resolve)?;
    let vertex = request
        .vertex
        .clone()
        .unwrap_or_else(|| "vertex".to_string());
    let outcome = alignment.align(AlignmentRequest {
        job: "align".to_string(),
        vertex_id: vertex.clone(),
        vertex_name: vertex,
        source_partitions: request.source_partitions,
        lower_limit: request.lower,
        upper_limit: request.upper,
        input_ship_strategies: request
            .ship_strategies
            .iter()
            .map(|s| ShipStrategy::parse(s))
            .collect(),
        ..AlignmentRequest::new(request.current, target, request.max_parallelism)
    });
    Ok(Answer {
        vertex: request.vertex.clone(),
        current: request.current,
        target,
        parallelism: outcome.parallelism,
        mode: outcome.mode,
        applicable: outcome.applicable,
        events: outcome.events,
        explanation: outcome.explanation,
    })
}

/// Runs `flowscale align`.
pub fn exec(args: AlignArgs) -> u8 {
    let (base, fleet_plugins) = match (&args.config, &args.job) {
        (Some(path), Some(job)) => match load_fleet(path) {
            Ok(fleet) => match fleet.job(job) {
                Some(spec) => (spec.config.clone(), Some(fleet.host.plugins_dir.clone())),
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
    let catalog = load_catalog(&plugins_dir(
        args.plugins.as_deref(),
        fleet_plugins.as_deref(),
    ));
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
        current: args.current.unwrap_or(0),
        target: args.target,
        scale_factor: args.scale_factor,
        max_parallelism: args.max_parallelism.unwrap_or(0),
        source_partitions: args.source_partitions,
        lower: args.lower,
        upper: args.upper,
        ship_strategies: args.ship.clone(),
        config,
        vertex: args.vertex.clone(),
    };
    match answer(&request, &base, catalog.as_ref()) {
        Ok(answer) => {
            let mut out = std::io::stdout().lock();
            let written = if args.json {
                serde_json::to_writer_pretty(&mut out, &answer)
                    .map_err(std::io::Error::from)
                    .and_then(|()| writeln!(out))
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
            exit_codes::FAILED
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

/// Answers one `align --batch` input line (1-based `line`, the bytes without the line end):
/// the JSON answer line `--batch` prints for it (without the newline), or the message of the
/// error line it prints instead (`line N: ...`). `base` is the job's configuration the request's `config` keys are
/// laid over. Nothing is read or written; `flowscale align --batch` is a loop over this.
pub fn batch_line(
    line: usize,
    bytes: &[u8],
    base: &JobConfig,
    catalog: &dyn ModeCatalog,
) -> Result<String, String> {
    let result = serde_json::from_slice::<Request>(bytes)
        .map_err(|source| LineError::Json { line, source })
        .and_then(|request| {
            answer(&request, base, catalog).map_err(|source| LineError::Request { line, source })
        });
    match result {
        Ok(answer) => serde_json::to_string(&answer).map_err(|e| format!("line {line}: {e}")),
        Err(err) => Err(err.to_string()),
    }
}

fn batch(base: &JobConfig, catalog: &dyn ModeCatalog) -> u8 {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut failed = 0usize;
    for (index, line) in stdin.lock().lines().enumerate() {
        let line_text = match line {
            Ok(line) => line,
            Err(err) => {
                eprintln!("error: cannot read stdin: {err}");
                return exit_codes::FAILED;
            }
        };
        if line_text.trim().is_empty() {
            continue;
        }
        let written = match batch_line(index + 1, line_text.as_bytes(), base, catalog) {
            Ok(answer) => out
                .write_all(answer.as_bytes())
                .map_err(serde_json::Error::io),
            Err(message) => {
                failed += 1;
                serde_json::to_writer(&mut out, &serde_json::json!({ "error": message }))
            }
        };
        if written.is_err() || writeln!(out).is_err() {
            return exit_codes::FAILED;
        }
    }
    if failed > 0 {
        eprintln!("error: {failed} line(s) failed");
        exit_codes::FAILED
    } else {
        exit_codes::OK
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

    // Found by the align_batch_line fuzz target: a target below `lower` was answered as is.
    #[test]
    fn a_target_below_lower_is_refused() {
        let err = line(r#"{"current":1,"target":1,"max_parallelism":8,"lower":4}"#).unwrap_err();
        assert!(err.contains("target 1 is below lower 4"), "{err}");
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
            err.contains("`max_parallelism` must be at most 2147483647"),
            "{err}"
        );
        let err = line(&format!(
            r#"{{"current":1,"scale_factor":1e308,"max_parallelism":8,"upper":{big}}}"#
        ))
        .unwrap_err();
        assert!(err.contains("`upper` must be at most 2147483647"), "{err}");
        let answer =
            line(r#"{"current":1,"scale_factor":1e308,"max_parallelism":2147483647}"#).unwrap();
        let value: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(value["target"], 2_147_483_647);
    }
}
