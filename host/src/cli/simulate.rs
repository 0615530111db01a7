//! `flowscale simulate`: the autoscaler against a simulated job, one run per alignment mode on
//! the same seeded workload, compared side by side.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use super::catalog::{isolation, load_catalog_isolated, plugins_dir};
use super::exit_codes;
use super::json_out::write_json;
use super::run::{parse_duration_arg, report_interrupted, stop_on_ctrl_c};
use crate::alignment::{BuiltIn, ModeCatalog};
use crate::config::{
    DEFAULT_INTERVAL, EngineSpec, FleetConfig, HostSettings, JobConfig, JobSpec, Origin,
    PluginIsolation,
};
use crate::plan::plan_fleet;
use crate::runner::{
    CycleReport, DEFAULT_SIMULATED_DURATION, JobRun, Pace, RunOptions, format_elapsed, run_fleet,
};
use crate::scaling::AutoscalerOptions;
use crate::sim::{
    Oracle, OracleSettings, Simulation, Summary, clairvoyant, plot_svg, render_comparison_table,
};
use crate::state::{InMemoryStateStore, StateStore};

/// Arguments of `flowscale simulate`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  flowscale simulate examples/jobs/keyed-step-spike.toml
  flowscale simulate examples/jobs/custom-buckets.toml --compare BALANCED,EVENLY_SPREAD,bucket-align --plot buckets.svg
  flowscale simulate examples/jobs/diurnal.toml --duration 2d --oracle

With --oracle, the table gains an `oracle` column: the clairvoyant single rescale, a yardstick
that knows the workload in advance, makes at most one rescale per load change (at the earliest
moment the pipeline could decide: one metrics.window after the change, and not before
stabilization.interval + metrics.window after a restart) and picks, by simulating the same job,
seed and duration, the cheapest parallelism whose lag is back under 10 s within
catch-up.duration (or by the next load change). See docs/oracle.md.")]
pub(super) struct SimulateArgs {
    /// The simulated job (TOML).
    job: PathBuf,
    /// The alignment mode (a built-in name or a plugin implementation id).
    #[arg(long, conflicts_with = "compare")]
    mode: Option<String>,
    /// Several modes, comma-separated, run on the same seeded workload and compared.
    #[arg(long, value_delimiter = ',')]
    compare: Vec<String>,
    /// A configuration key for every run (repeatable), e.g. scaling-cooldown-period=60s.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Simulated time (default 2h).
    #[arg(long, value_parser = parse_duration_arg)]
    duration: Option<Duration>,
    /// Time between two decision cycles (default 10s).
    #[arg(long, value_parser = parse_duration_arg)]
    interval: Option<Duration>,
    /// Advance X simulated seconds per wall second (default: as fast as possible).
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pace: Option<Pace>,
    /// Write an SVG chart of load and parallelism over time, one line per mode.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Plugins directory (default: ./plugins).
    #[arg(long, env = "FLOWSCALE_PLUGINS_DIR")]
    plugins: Option<PathBuf>,
    /// Where plugin modes run: in-process (default; a crashing plugin ends the host) or
    /// process (a worker process per plugin file; crashes and hangs are contained).
    #[arg(long, value_name = "in-process|process")]
    plugin_isolation: Option<PluginIsolation>,
    /// Print the decisions of every run as they happen.
    #[arg(long)]
    verbose: bool,
    /// Also run the clairvoyant single rescale (docs/oracle.md) and show it next to the
    /// autoscaler: at most one rescale per load change, the cheapest that keeps the lag target.
    #[arg(long)]
    oracle: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct RunResult<'a> {
    mode: &'a str,
    resolved_mode: &'a str,
    error: Option<&'a str>,
    summary: Option<&'a Summary>,
    /// The simulated time the run stopped at when Ctrl-C cut it short.
    #[serde(skip_serializing_if = "Option::is_none")]
    interrupted_at_ms: Option<i64>,
}

/// The configuration that selects `mode`: a built-in name as is; anything else is taken as a
/// plugin implementation id, selected under its own name.
fn mode_keys(mode: &str, catalog: &dyn ModeCatalog) -> Vec<(String, String)> {
    let key = flowscale_sdk::MODE_KEY;
    if BuiltIn::from_name(mode).is_some() || mode == "ADVANCED" || catalog.find(mode).is_none() {
        vec![(key.to_string(), mode.to_string())]
    } else {
        vec![
            (key.to_string(), mode.to_string()),
            (format!("{key}.{mode}.class"), mode.to_string()),
        ]
    }
}

/// Runs `flowscale simulate`.
pub(super) fn exec(args: SimulateArgs) -> u8 {
    let modes: Vec<String> = match (&args.mode, args.compare.is_empty()) {
        (Some(mode), _) => vec![mode.clone()],
        (None, false) => args.compare.clone(),
        (None, true) => vec!["BALANCED".to_string()],
    };
    let dir = plugins_dir(args.plugins.as_deref(), None);
    let catalog = load_catalog_isolated(&dir, &isolation(args.plugin_isolation, None));
    let mut base = JobConfig::new();
    for pair in &args.set {
        let Some((key, value)) = pair.split_once('=') else {
            eprintln!("error: --set expects KEY=VALUE, got `{pair}`");
            return exit_codes::USAGE;
        };
        base.set(
            key.trim(),
            value.trim(),
            Origin::inline(key.trim(), &format!("--set {}", key.trim())),
        );
    }
    let duration = args.duration.unwrap_or(DEFAULT_SIMULATED_DURATION);
    let jobs = modes
        .iter()
        .enumerate()
        .map(|(index, mode)| {
            let mut config = base.clone();
            for (key, value) in mode_keys(mode, catalog.as_ref()) {
                config.set(&key, value, Origin::inline(&key, "--compare"));
            }
            JobSpec {
                name: mode.clone(),
                index,
                location: format!("--compare {mode}"),
                engine: EngineSpec::Sim {
                    job: args.job.clone(),
                    duration: Some(duration),
                    cluster: None,
                },
                config,
            }
        })
        .collect();
    let fleet = FleetConfig {
        file: args.job.clone(),
        host: HostSettings {
            interval: args.interval.unwrap_or(DEFAULT_INTERVAL),
            plugin_isolation: args.plugin_isolation.unwrap_or_default(),
            ..HostSettings::with_plugins_dir(dir)
        },
        jobs,
        warnings: Vec::new(),
    };
    let plan = match plan_fleet(fleet, catalog.as_ref()) {
        Ok(plan) => plan,
        Err(errors) => {
            eprint!("error: {errors}");
            return exit_codes::FAILED;
        }
    };
    // Ctrl-C stops every run at its next step; what ran is still summarised, and said to be
    // partial (see `report`).
    let stop = stop_on_ctrl_c();
    let paced = args
        .pace
        .map(|pace| {
            let wall = pace.wall_time(duration).map_or_else(
                || "forever".to_string(),
                |wall| format_elapsed(i64::try_from(wall.as_millis()).unwrap_or(i64::MAX)),
            );
            format!(
                " at {} simulated s per wall s ({wall} wall time)",
                pace.per_second()
            )
        })
        .unwrap_or_default();
    eprintln!(
        "simulating {} for {} under {}{paced} (Ctrl-C stops early and reports what ran)",
        args.job.display(),
        format_elapsed(i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)),
        modes.join(", ")
    );
    let progress = Progress::new(&modes, duration);
    let printer = Mutex::new(crate::runner::Printer::new(std::io::stderr(), false, false));
    let sink = |report: &CycleReport| {
        progress.advance(&report.job, report.at_ms);
        if args.verbose {
            progress.suspend(|| {
                if let Ok(mut printer) = printer.lock() {
                    let _ = printer.print(report);
                }
            });
        }
    };
    let store: Mutex<Box<dyn StateStore + Send>> = Mutex::new(Box::new(InMemoryStateStore::new()));
    let options = RunOptions {
        simulated_duration: Some(duration),
        pace: args.pace,
        timelines: args.plot.is_some(),
        arbiter: true,
        ..RunOptions::new(&stop, &store)
    };
    let oracle_settings = if args.oracle {
        match oracle_settings(&args.job, &base, duration) {
            Ok(settings) => Some(settings),
            Err(message) => {
                eprintln!("error: --oracle: {message}");
                return exit_codes::FAILED;
            }
        }
    } else {
        None
    };
    // The oracle's search runs beside the autoscaler's runs (it needs none of their results).
    let (runs, oracle) = std::thread::scope(|scope| {
        let oracle = oracle_settings.map(|(simulation, settings)| {
            scope.spawn(move || {
                let started = std::time::Instant::now();
                let oracle = clairvoyant(simulation, &settings);
                (oracle, started.elapsed())
            })
        });
        let runs = run_fleet(&plan, &options, &sink);
        (runs, oracle.and_then(|handle| handle.join().ok()))
    });
    progress.finish();
    if let Some((oracle, took)) = &oracle {
        eprintln!(
            "oracle: {} load changes, {} decisions, {} rescales, {} segments missing the target; \
             searched {} simulated ticks in {:.1} s",
            oracle.load_changes,
            oracle.schedule.len(),
            oracle.summary.rescales,
            oracle.missed,
            oracle.simulated_ticks,
            took.as_secs_f64()
        );
    }
    report(&args, &runs, oracle.as_ref().map(|(o, _)| o))
}

/// The oracle's fresh simulation and settings: the job file as the autoscaler's runs load it,
/// and the pipeline keys of every run (`--set`, else the reference's defaults).
fn oracle_settings(
    job: &std::path::Path,
    config: &JobConfig,
    duration: Duration,
) -> Result<(Simulation, OracleSettings), String> {
    let options = AutoscalerOptions::from_config(config).map_err(|errors| {
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    let simulation = Simulation::from_file(job).map_err(|e| e.to_string())?;
    Ok((simulation, OracleSettings::new(&options, duration)))
}

fn report(args: &SimulateArgs, runs: &[JobRun], oracle: Option<&Oracle>) -> u8 {
    let mut status = exit_codes::OK;
    let mut out = std::io::stdout().lock();
    if let Some(path) = &args.plot {
        let timelines: Vec<_> = runs
            .iter()
            .filter_map(|r| {
                r.simulation
                    .as_ref()
                    .and_then(|(t, _)| t.clone().map(|t| (r.name.clone(), t)))
            })
            .collect();
        match plot_svg(&timelines, path) {
            Ok(()) => eprintln!("chart written to {}", path.display()),
            Err(err) => {
                eprintln!("error: cannot write the chart: {err}");
                status = exit_codes::FAILED;
            }
        }
    }
    for run in runs.iter().filter(|r| r.error.is_some()) {
        eprintln!(
            "error: {}: {}",
            run.name,
            run.error.as_deref().unwrap_or_default()
        );
        status = exit_codes::FAILED;
    }
    if args.json {
        let results: Vec<RunResult<'_>> = runs
            .iter()
            .map(|r| RunResult {
                mode: &r.name,
                resolved_mode: &r.mode,
                error: r.error.as_deref(),
                summary: r.simulation.as_ref().map(|(_, s)| s),
                interrupted_at_ms: r.interrupted.map(|i| i.at_ms),
            })
            .collect();
        let mut document =
            serde_json::json!({"job": args.job.display().to_string(), "runs": results});
        if let Some(oracle) = oracle {
            document["oracle"] = serde_json::to_value(oracle).unwrap_or_default();
        }
        if write_json(&mut out, &document).is_err() {
            return exit_codes::FAILED;
        }
    } else {
        let mut summaries: Vec<(String, Summary)> = runs
            .iter()
            .filter_map(|r| {
                r.simulation
                    .as_ref()
                    .map(|(_, s)| (r.name.clone(), s.clone()))
            })
            .collect();
        if let Some(oracle) = oracle {
            summaries.push(("oracle".to_string(), oracle.summary.clone()));
        }
        if writeln!(out, "{}", render_comparison_table(&summaries)).is_err() {
            return exit_codes::FAILED;
        }
    }
    if report_interrupted("flowscale simulate", runs) {
        return exit_codes::INTERRUPTED;
    }
    status
}

/// One progress bar per mode, in simulated seconds; hidden when stderr is not a terminal.
struct Progress {
    multi: MultiProgress,
    bars: Vec<(String, ProgressBar)>,
}

impl Progress {
    fn new(modes: &[String], duration: Duration) -> Progress {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let multi = MultiProgress::with_draw_target(target);
        let style = ProgressStyle::with_template("{prefix:>16} [{bar:40}] {pos}/{len} simulated s")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        let bars = modes
            .iter()
            .map(|mode| {
                let bar = multi.add(ProgressBar::new(duration.as_secs()));
                bar.set_style(style.clone());
                bar.set_prefix(mode.clone());
                (mode.clone(), bar)
            })
            .collect();
        Progress { multi, bars }
    }

    fn advance(&self, job: &str, at_ms: i64) {
        if let Some((_, bar)) = self.bars.iter().find(|(name, _)| name == job) {
            bar.set_position(u64::try_from(at_ms / 1000).unwrap_or(0));
        }
    }

    fn suspend(&self, f: impl FnOnce()) {
        self.multi.suspend(f);
    }

    fn finish(&self) {
        for (_, bar) in &self.bars {
            bar.finish_and_clear();
        }
    }
}
