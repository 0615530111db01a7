//! `flowscale run`: the control loop over every job of a fleet configuration.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::exit_codes;
use super::load::{Catalog, Checks, check_fleet};
use super::reload::{FleetWatcher, HostFlags, Started};
use super::serving::Serving;
use super::signals::Signals;
use crate::config::{
    ConfigErrors, DurationError, EngineSpec, KeyPolicy, ListenError, PluginIsolation,
    parse_duration, parse_listen,
};
use crate::events::Event;
use crate::plan::FleetPlan;
use crate::plan::PluginCatalog;
use crate::plugins::LivePlugins;
use crate::runner::{
    CycleReport, DEFAULT_HOLD_BYTES, Interrupted, JobRun, Lateness, LatenessSummary, Pace, Printer,
    RunOptions, SlotsUse, TimeOrderedLog, format_elapsed, ignored_state, run_fleet,
    run_fleet_reloading, wall_ms,
};
use crate::sim::{Summary, render_comparison_table};
use crate::state::postgres::{HostLeases, PostgresStateStore};
use crate::state::{FileStateStore, InMemoryStateStore, JobLeases, StateError, StateStore};

/// Arguments of `flowscale run`.
#[derive(Debug, clap::Args)]
pub(super) struct RunArgs {
    /// The fleet configuration file.
    config: PathBuf,
    /// Plugins directory (default: the one the file names, else plugins/ beside it).
    #[arg(long, env = "FLOWSCALE_PLUGINS_DIR")]
    plugins: Option<PathBuf>,
    /// Where plugin modes run: in-process (default; a crashing plugin ends the host) or
    /// process (a worker process per plugin file; crashes and hangs are contained). Overrides
    /// the fleet's `[host] plugin-isolation`.
    #[arg(long, value_name = "in-process|process")]
    plugin_isolation: Option<PluginIsolation>,
    /// Print JSON Lines (`{"type": "cycle" | "event" | "summary", "data": ...}`) instead of a
    /// readable log.
    #[arg(long)]
    json: bool,
    /// Print every cycle and every vertex, not only changes and events.
    #[arg(long)]
    verbose: bool,
    /// Run one step per job and stop (exit status non-zero if one failed). With `[host] state`
    /// (several hosts on PostgreSQL), one lease round first: only the jobs whose lease this
    /// host can claim now are stepped, the others are left to the hosts holding them (0 steps),
    /// and the leases are given up at the end.
    #[arg(long)]
    once: bool,
    /// Stop wall-clock jobs (Flink) after this long, e.g. 5min (default: until Ctrl-C).
    #[arg(long, value_parser = parse_duration_arg)]
    duration: Option<Duration>,
    /// Simulated time for every simulated job, e.g. 2h (default: the fleet's `duration`, else 2h).
    #[arg(long, value_parser = parse_duration_arg)]
    simulated: Option<Duration>,
    /// Refuse every key flowscale does not read, as `validate --strict` does.
    #[arg(long)]
    strict: bool,
    /// Advance simulated jobs X simulated seconds per wall second, printing as they go
    /// (default: as fast as possible).
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pace: Option<Pace>,
    /// Serve metrics, the API and the dashboard on this address, e.g. 127.0.0.1:9464 (default:
    /// `[host] listen`, else no server). Any other address than loopback needs `[host] api-token`.
    #[arg(long, value_name = "ADDR", value_parser = parse_listen_arg)]
    listen: Option<SocketAddr>,
    /// Threads that run the jobs' cycles (default: `[host] workers`, else one per core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    workers: Option<u16>,
    /// Let every job of a shared simulated cluster decide alone, as if it had every slot, and
    /// run on what the cluster gives it: the comparison the slot arbiter is measured against
    /// (default: the jobs of a cluster share its slots through its arbiter).
    #[arg(long)]
    no_arbiter: bool,
}

fn parse_listen_arg(text: &str) -> Result<SocketAddr, ListenError> {
    parse_listen(text)
}

/// Parses a duration flag with Flink's syntax.
pub(super) fn parse_duration_arg(text: &str) -> Result<Duration, DurationError> {
    parse_duration(text)
}

#[derive(Serialize)]
struct JobSummary<'a> {
    job: &'a str,
    mode: &'a str,
    steps: usize,
    failed_steps: usize,
    error: Option<&'a str>,
    summary: Option<&'a Summary>,
    /// The simulated time a job stopped at when Ctrl-C cut its run short.
    #[serde(skip_serializing_if = "Option::is_none")]
    interrupted_at_ms: Option<i64>,
    /// The engine no longer knew the job when its run ended.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    gone: bool,
    /// How late the job's cycles started after they were due (wall-clock and paced jobs).
    #[serde(skip_serializing_if = "Option::is_none")]
    lateness: Option<LatenessSummary>,
    /// A reload stopped the job (it left the fleet, or restarted on another engine): its
    /// summary was printed when it ended, not at the end of the run.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    left: bool,
    /// A job of a shared simulated cluster: the cluster's slots and the most in use at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    slots: Option<&'a SlotsUse>,
}

impl<'a> JobSummary<'a> {
    fn of(run: &'a JobRun, left: bool) -> JobSummary<'a> {
        JobSummary {
            job: &run.name,
            mode: &run.mode,
            steps: run.steps,
            failed_steps: run.failed_steps,
            error: run.error.as_deref(),
            summary: run.simulation.as_ref().map(|(_, s)| s),
            interrupted_at_ms: run.interrupted.map(|i| i.at_ms),
            gone: run.gone,
            lateness: run.lateness.summary(),
            left,
            slots: run.slots.as_ref(),
        }
    }

    /// Writes the summary as a JSON line.
    fn write(&self, out: &mut impl Write) {
        let _ = serde_json::to_writer(
            &mut *out,
            &serde_json::json!({"type": "summary", "data": self}),
        );
        let _ = writeln!(out);
    }
}

/// What the jobs a reload stopped came to, in a few numbers: their runs are summarised as they
/// end ([`Departed::take`]) and not kept, so that a host whose fleet comes and goes holds no
/// memory for the jobs it no longer runs.
#[derive(Debug, Default)]
struct Departed {
    jobs: usize,
    steps: usize,
    failed_steps: usize,
    /// Of them, jobs that could not run at all: the run fails as it would with them.
    could_not_run: usize,
    lateness: Lateness,
}

impl Departed {
    /// Prints what the runs of an entry a reload stopped came to, as the summary at the end
    /// would (a JSON line each, or the reason a job could not run), and counts them.
    fn take<W: Write>(&mut self, runs: &[JobRun], json: bool, out: &mut W) {
        for run in runs {
            if json {
                JobSummary::of(run, true).write(out);
            } else if let Some(error) = &run.error {
                let _ = writeln!(out, "{}: could not run: {error}", run.name);
            }
            self.jobs += 1;
            self.steps += run.steps;
            self.failed_steps += run.failed_steps;
            self.could_not_run += usize::from(run.error.is_some());
            self.lateness.merge(&run.lateness);
        }
        let _ = out.flush();
    }
}

/// Runs `flowscale run`.
pub(super) fn exec(args: RunArgs) -> u8 {
    let Some((plan, catalog, plugins)) = load_plan(&args) else {
        return exit_codes::FAILED;
    };
    let catalog: Arc<dyn PluginCatalog + Send + Sync> = Arc::from(catalog);
    let listen = plan.fleet.host.listen;
    let Ok(serving) = Serving::start(listen, &plan, catalog.clone(), plugins.as_ref()) else {
        return exit_codes::FAILED;
    };
    let Some((store, ignored, leases)) = open_store(&plan) else {
        return exit_codes::FAILED;
    };
    let store = Mutex::new(store);
    if let (Some(serving), Some(leases)) = (&serving, &leases) {
        serving
            .view()
            .set_leases(Arc::clone(leases) as Arc<dyn JobLeases>);
    }
    let signals = Signals::install();
    let stop = Arc::clone(&signals.stop);
    let renewals = leases
        .as_ref()
        .map(|leases| Renewals::start(Arc::clone(leases), plan.fleet.host.interval));
    if !args.json {
        eprintln!(
            "running {} job(s) from {}: {}",
            plan.jobs.len(),
            args.config.display(),
            plan.jobs
                .iter()
                .map(|j| format!("{} [{}]", j.spec.name, j.alignment.mode_id()))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let options = RunOptions {
        once: args.once,
        wall_duration: args.duration,
        simulated_duration: args.simulated,
        pace: args.pace,
        stop: &stop,
        store: &store,
        timelines: false,
        arbiter: !args.no_arbiter,
    };
    // A run of one step has nothing to reload.
    let watch = (!args.once).then(|| Watch {
        path: args.config.clone(),
        leases,
        catalog,
        plugins,
        policy: key_policy(&args),
        signals,
        started: Started {
            flags: host_flags(&args),
            serving: serving.as_ref().and(listen),
        },
    });
    let done = Arc::new(AtomicBool::new(false));
    exit_if_stuck(Arc::clone(&stop), Arc::clone(&done), STOP_GRACE);
    let (runs, departed) = run_printing(
        &plan,
        &options,
        &ignored,
        watch,
        serving.as_ref(),
        (args.json, args.verbose),
    );
    done.store(true, Ordering::Release);
    if let Some(renewals) = renewals {
        renewals.finish();
    }
    drop(serving);
    let failed = report_runs(&runs, &departed, args.json, args.once);
    if report_interrupted("flowscale run", &runs) {
        exit_codes::INTERRUPTED
    } else if failed {
        exit_codes::FAILED
    } else {
        exit_codes::OK
    }
}

/// How long the jobs have to stop after Ctrl-C (or SIGTERM) before the host ends without them.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Ends the process when the fleet has not stopped `grace` after a stop was asked for. A job
/// thread stuck in a call that never returns (an in-process plugin in an endless loop: nothing
/// can interrupt it) would otherwise keep the host from ending; every job's state was persisted
/// after its last step, so ending without it loses nothing it had decided.
fn exit_if_stuck(stop: Arc<AtomicBool>, done: Arc<AtomicBool>, grace: Duration) {
    std::thread::spawn(move || {
        let poll = Duration::from_millis(100);
        while !stop.load(Ordering::Acquire) {
            if done.load(Ordering::Acquire) {
                return;
            }
            std::thread::sleep(poll);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if done.load(Ordering::Acquire) {
                return;
            }
            std::thread::sleep(poll);
        }
        eprintln!(
            "flowscale: a job is still busy {} s after the stop (a call into an in-process plugin \
             that does not return?); ending without it. `[host] plugin-isolation = \"process\"` \
             bounds every plugin call",
            grace.as_secs()
        );
        crate::plugins::isolation::end_worker_groups();
        std::process::exit(i32::from(exit_codes::INTERRUPTED));
    });
}

/// Says on stderr, after the summary, which simulated jobs Ctrl-C stopped and at what
/// simulated time, so the partial summary is not taken for a full run; true if any was.
pub(super) fn report_interrupted(command: &str, runs: &[JobRun]) -> bool {
    let stopped: Vec<(&str, Interrupted)> = runs
        .iter()
        .filter_map(|r| r.interrupted.map(|i| (r.name.as_str(), i)))
        .collect();
    if stopped.is_empty() {
        return false;
    }
    for (job, at) in &stopped {
        eprintln!(
            "interrupted: {job} stopped at simulated time {} of {}; its summary covers only \
             the time simulated so far",
            format_elapsed(at.at_ms),
            format_elapsed(at.end_ms)
        );
    }
    eprintln!(
        "{command} was interrupted (Ctrl-C) before the end of its simulated time; exit status {}",
        exit_codes::INTERRUPTED
    );
    true
}

/// The fleet file, checked and planned with its plugins exactly as `validate` does; every error
/// and warning printed (all of them, not only the first).
fn load_plan(args: &RunArgs) -> Option<(FleetPlan, Catalog, Option<LivePlugins>)> {
    let checked = check_fleet(
        &args.config,
        args.plugins.as_deref(),
        Checks {
            policy: key_policy(args),
            state_dir: false,
            isolation: args.plugin_isolation,
            // Even a run of one step: the HTTP server lists the plugins as the watcher sees
            // them, whatever the run's length.
            watch_plugins: true,
        },
    );
    for warning in &checked.warnings {
        eprintln!("warning: {warning}");
    }
    if !checked.errors.is_empty() {
        eprint!("error: {}", ConfigErrors(checked.errors));
        return None;
    }
    let (mut plan, catalog) = checked.plan.zip(checked.catalog)?;
    host_flags(args).apply(&mut plan.fleet.host);
    Some((plan, catalog, checked.plugins))
}

fn key_policy(args: &RunArgs) -> KeyPolicy {
    KeyPolicy {
        strict: args.strict,
    }
}

fn host_flags(args: &RunArgs) -> HostFlags {
    HostFlags {
        plugins: args.plugins.clone(),
        plugin_isolation: args.plugin_isolation,
        workers: args.workers.map(usize::from),
        listen: args.listen,
    }
}

/// What a running `flowscale run` watches for a new configuration: its fleet file and its
/// plugins directory.
struct Watch {
    path: PathBuf,
    /// The shared database's connections, whose credential events the watcher prints.
    leases: Option<Arc<HostLeases>>,
    catalog: Arc<dyn PluginCatalog + Send + Sync>,
    plugins: Option<LivePlugins>,
    policy: KeyPolicy,
    signals: Signals,
    started: Started,
}

/// A store, what in its directory no job of the fleet uses and cannot be read, and the job
/// leases when the store is shared by several hosts.
type OpenedStore = (
    Box<dyn StateStore + Send>,
    Vec<Event>,
    Option<Arc<HostLeases>>,
);

/// Where wall-clock jobs keep their state: the fleet's PostgreSQL database (with job leases),
/// else its state directory (locked for as long as the store lives, that is, the whole run),
/// else memory. `None` (with the error printed) when the database or directory cannot be used
/// or another host holds the directory.
fn open_store(plan: &FleetPlan) -> Option<OpenedStore> {
    let host = &plan.fleet.host;
    if let Some(url) = host.state_url.as_deref() {
        let id = host.id.clone().unwrap_or_else(default_host_id);
        let opened = HostLeases::connect(url, &id, host.lease_ttl).and_then(|leases| {
            let leases = Arc::new(leases);
            PostgresStateStore::open(url, Some(Arc::clone(&leases))).map(|store| (store, leases))
        });
        return match opened {
            Ok((store, leases)) => Some((Box::new(store), Vec::new(), Some(leases))),
            Err(err) => {
                eprintln!("error: cannot use the state database (`[host] state`): {err}");
                None
            }
        };
    }
    let Some(dir) = plan.fleet.host.state_dir.as_deref() else {
        return Some((Box::new(InMemoryStateStore::new()), Vec::new(), None));
    };
    match FileStateStore::open(dir) {
        Ok(store) => {
            let jobs: Vec<(&str, &EngineSpec)> = plan
                .jobs
                .iter()
                .map(|j| (j.spec.name.as_str(), &j.spec.engine))
                .collect();
            let ignored = ignored_state(&store, &jobs);
            Some((Box::new(store), ignored, None))
        }
        // The message names the directory and the holder.
        Err(err @ StateError::Locked { .. }) => {
            eprintln!("error: {err}");
            None
        }
        Err(err) => {
            eprintln!(
                "error: cannot use the state directory {}: {err}",
                dir.display()
            );
            None
        }
    }
}

/// `[host] id` when unset: the machine's hostname and this process's id, unique among hosts
/// running at once.
fn default_host_id() -> String {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_string());
    format!("{hostname}-{}", std::process::id())
}

/// The thread that renews this host's job leases while the fleet runs, and gives them up when
/// it has stopped.
struct Renewals {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Renewals {
    fn start(leases: Arc<HostLeases>, interval: Duration) -> Renewals {
        let stop = Arc::new(AtomicBool::new(false));
        let period = leases.renew_period(interval);
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::spawn(move || leases.run_renewals(period, &thread_stop));
        Renewals { stop, thread }
    }

    /// Stops renewing and gives every lease up, so that the other hosts take the jobs now.
    fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        if self.thread.join().is_err() {
            eprintln!("warning: the lease thread panicked; the leases lapse after their TTL");
        }
    }
}

/// A flag that Ctrl-C (and SIGTERM) sets, so that every job stops at its next step.
pub(super) fn stop_on_ctrl_c() -> Arc<AtomicBool> {
    Signals::install().stop
}

/// Runs the fleet, printing its steps to stdout as a readable log (with `verbose`, every step)
/// or as JSON Lines, and the summaries of the jobs a reload stopped as they end.
fn run_printing(
    plan: &FleetPlan,
    options: &RunOptions<'_>,
    start_events: &[Event],
    watch: Option<Watch>,
    serving: Option<&Serving>,
    (json, verbose): (bool, bool),
) -> (Vec<JobRun>, Departed) {
    let mut departed = Departed::default();
    let mut start = Printer::new(std::io::stdout(), json, verbose);
    let now = wall_ms();
    for event in start_events {
        let _ = start.print_event(now, event);
    }
    let printer = Mutex::new(start);
    // Simulated jobs run far faster than real time on threads of their own; their readable log
    // is printed once they are done, ordered by simulated time across jobs (held in bounded
    // memory, spilled to temporary files). Paced simulated jobs, wall-clock jobs and JSON Lines
    // are printed as they happen: someone is watching.
    let simulated = Mutex::new(TimeOrderedLog::new(DEFAULT_HOLD_BYTES));
    let hold = !json && options.pace.is_none();
    let sink = |report: &CycleReport| {
        if let Some(serving) = serving {
            serving.view().record(report);
        }
        if report.virtual_clock && hold {
            let mut text = Printer::new(Vec::new(), false, verbose);
            if text.print(report).is_ok() {
                let text = text.into_inner();
                if !text.is_empty() {
                    if let Ok(mut held) = simulated.lock() {
                        held.push(report.at_ms, &report.job, text);
                    }
                }
            }
        } else if let Ok(mut printer) = printer.lock() {
            let _ = printer.print(report);
        }
    };
    let runs = match watch {
        Some(watch) => {
            let mut watcher = FleetWatcher::new(
                watch.path,
                plan.fleet.clone(),
                (watch.catalog, watch.plugins),
                (watch.policy, watch.signals),
                watch.started,
                &printer,
            );
            if let Some(serving) = serving {
                watcher.on_change(Box::new(|change| serving.changed(change)));
                watcher.host_events(Box::new(|| serving.credential_events()));
            }
            if let Some(leases) = watch.leases {
                let connector = leases.connector();
                watcher.host_events(Box::new(move || connector.take_events()));
            }
            let departed = &mut departed;
            let printer = &printer;
            watcher.on_left(Box::new(move |runs| {
                // Through the printer's lock, so that a summary never lands inside a line of
                // the log.
                if let Ok(mut printer) = printer.lock() {
                    departed.take(&runs, json, printer.out());
                }
            }));
            run_fleet_reloading(plan.clone(), options, &sink, Some(&mut watcher))
        }
        None => run_fleet(plan, options, &sink),
    };
    if let (Ok(held), Ok(mut printer)) = (simulated.into_inner(), printer.lock()) {
        let mut out = std::io::BufWriter::new(printer.out());
        let _ = held.finish(&mut out).and_then(|()| out.flush());
    }
    (runs, departed)
}

/// Prints the end-of-run summary; true if a job could not run or (with `--once`, a check) a
/// step failed or a job is gone. Over a long run a failed step is an event, counted in the
/// summary, not a failure of the run, and a job deleted from its cluster is a `JobGone` event.
/// The jobs a reload stopped were summarised as they ended: `departed` counts them.
fn report_runs(runs: &[JobRun], departed: &Departed, json: bool, once: bool) -> bool {
    let mut out = std::io::stdout().lock();
    let mut failed = departed.could_not_run > 0;
    for run in runs {
        failed |= run.error.is_some() || (once && (run.failed_steps > 0 || run.gone));
        if json {
            JobSummary::of(run, false).write(&mut out);
        } else if let Some(error) = &run.error {
            let _ = writeln!(out, "{}: could not run: {error}", run.name);
        }
    }
    if !json {
        // The whole fleet's lateness, for a host that has to keep up with the wall clock.
        let mut lateness = departed.lateness.clone();
        for run in runs {
            lateness.merge(&run.lateness);
        }
        if let Some(summary) = lateness.summary() {
            eprintln!("cycle lateness (start after due): {summary}");
        }
        let simulated: Vec<(String, Summary)> = runs
            .iter()
            .filter_map(|r| {
                r.simulation
                    .as_ref()
                    .map(|(_, s)| (format!("{} [{}]", r.name, r.mode), s.clone()))
            })
            .collect();
        if !simulated.is_empty() {
            let _ = writeln!(out, "\n{}", render_comparison_table(&simulated));
        }
        for run in runs
            .iter()
            .filter(|r| r.simulation.is_none() && r.error.is_none())
        {
            let _ = writeln!(
                out,
                "{} [{}]: {} step(s), {} failed{}",
                run.name,
                run.mode,
                run.steps,
                run.failed_steps,
                if run.gone {
                    ", gone from the cluster"
                } else {
                    ""
                }
            );
        }
        if departed.jobs > 0 {
            let _ = writeln!(
                out,
                "{} job(s) stopped by a reload while the fleet ran: {} step(s), {} failed",
                departed.jobs, departed.steps, departed.failed_steps
            );
        }
    }
    failed
}
