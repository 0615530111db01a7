//! The fleet's supervisor: runs every fleet entry's jobs on a bounded [`Scheduler`] and, while
//! the fleet runs, applies each new plan a [`FleetSource`] offers (a reloaded configuration
//! file).
//!
//! Applying a plan compares it with the running one entry by entry, by name:
//! - an entry no longer in the plan leaves the fleet: its jobs stop at once (the scheduler
//!   steps them so that they see it);
//! - a new entry starts;
//! - an entry whose engine changed (another simulated job, another cluster or job id) restarts
//!   without its saved state, since what was learned belongs to the old engine; the new jobs
//!   start once the old ones have ended, so the two never write the same state;
//! - an entry whose configuration changed takes the new one at its next cycle and keeps its
//!   metric window, scaling history, cooldown queue and events ([`JobRunner::reconfigure`]);
//! - anything else goes on untouched.
//!
//! The pool's size is fixed when the fleet starts: `[host] workers` compute workers (default:
//! one per core), and up to `[host] max-requests-per-cluster` request threads per cluster
//! (at most [`MAX_NETWORK_THREADS`]) for the steps that wait on a Flink cluster. In
//! `in-process` plugin isolation, a worker inside one plugin call for longer than `[host]
//! plugin-call-timeout` is reported with a `JobStuck` event and replaced. The event is stamped
//! with the job's own clock: for a simulated or replayed job, the simulated instant of the
//! stuck cycle (in order with the job's other events); for a job on the wall clock, the wall
//! clock.
//!
//! [`JobRunner::reconfigure`]: super::JobRunner::reconfigure

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::alignment::JobAlignment;
use crate::allocator;
use crate::config::{
    EngineSpec, HostSettings, JobSpec, OnReload, PluginIsolation, changed_host_keys, on_reload,
};
use crate::engine::flink::{ClusterLimits, cluster_key};
use crate::events::{Event, EventReason, Severity};
use crate::plan::{FleetPlan, JobPlan};
use crate::scaling::JobCustom;

use super::fleet::{JobRun, RunOptions, wall_ms};
use super::job_task::{EntryOutcome, Env, OpenEntry};
use super::live::LiveEntry;
use super::report::CycleReport;
use super::scheduler::{PoolConfig, Scheduler, Stuck};
use super::slot_share::ClusterShares;

/// How often a serving supervisor reaps ended entries and asks its source for a new plan.
const POLL: Duration = Duration::from_millis(200);

/// Entries stopped by a reload that, ended in one look, make the host give the memory they
/// held back to the system ([`allocator::release_free_memory`]).
const BULK_STOP: usize = 64;

/// The most request threads of a fleet, however many clusters it runs on.
pub(crate) const MAX_NETWORK_THREADS: usize = 64;

/// Where a running fleet learns of a new configuration.
pub(crate) trait FleetSource {
    /// A new, valid plan when the configuration (or the plugins it uses) changed since the last
    /// call. An invalid change is the source's to report: the fleet runs on with what it has.
    fn poll(&mut self) -> Option<FleetPlan>;

    /// Reports what applying the last plan did (a `ConfigReloaded` event).
    fn applied(&mut self, event: Event);

    /// The runs of an entry a reload stopped (it left the fleet, or restarts on another
    /// engine), once its jobs have ended. The fleet does not keep them for the runs it returns
    /// at its end: a host whose fleet file adds and removes thousands of jobs over months would
    /// otherwise hold every run it ever had.
    fn left(&mut self, runs: Vec<JobRun>);
}

/// Runs every job of `plan`, passing each step's report to `sink` as it happens.
pub fn run_fleet(
    plan: &FleetPlan,
    options: &RunOptions<'_>,
    sink: &(dyn Fn(&CycleReport) + Sync),
) -> Vec<JobRun> {
    run_fleet_reloading(plan.clone(), options, sink, None)
}

/// Runs every job of `plan` like [`run_fleet`], and, with a `source`, takes every new plan it
/// offers while running (see [`Supervisor`]). With no job left after a reload, the fleet waits
/// for the next reload or for the stop.
pub(crate) fn run_fleet_reloading(
    plan: FleetPlan,
    options: &RunOptions<'_>,
    sink: &(dyn Fn(&CycleReport) + Sync),
    source: Option<&mut dyn FleetSource>,
) -> Vec<JobRun> {
    let host = &plan.fleet.host;
    let limits = ClusterLimits::new(host.max_requests_per_cluster);
    // Several hosts on one database share a Flink cluster's slots through it.
    let ledger = options
        .store
        .lock()
        .ok()
        .and_then(|store| store.slot_ledger());
    let shares = ClusterShares::new(options.arbiter).with_ledger(ledger);
    let config = pool_config(&plan);
    let stuck = |stuck: &Stuck<'_>| sink(&stuck_report(stuck));
    std::thread::scope(|scope| {
        let pool = Scheduler::start(scope, config, options.stop, Some(&stuck));
        let env = Env {
            options,
            sink,
            limits: &limits,
            shares: &shares,
        };
        let supervisor = Supervisor::start(&pool, env, plan.clone());
        let runs = match source {
            None => supervisor.join_all(),
            Some(source) => supervisor.serve(source),
        };
        pool.shutdown();
        runs
    })
}

/// The pool a fleet runs on: see the module's documentation.
fn pool_config(plan: &FleetPlan) -> PoolConfig {
    let host = &plan.fleet.host;
    let workers = host.workers.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    // Each cluster's own limit: a named cluster's `max-requests`, else the host's.
    let clusters: BTreeMap<String, usize> = plan
        .jobs
        .iter()
        .filter_map(|job| match &job.spec.engine {
            EngineSpec::Flink { rest, cluster, .. } => Some((
                cluster_key(rest, cluster.as_deref()),
                cluster
                    .as_ref()
                    .and_then(|c| c.max_requests)
                    .unwrap_or(host.max_requests_per_cluster),
            )),
            _ => None,
        })
        .collect();
    let network_threads = if clusters.is_empty() {
        host.max_requests_per_cluster
    } else {
        clusters
            .values()
            .fold(0usize, |sum, n| sum.saturating_add(*n))
    }
    .min(MAX_NETWORK_THREADS);
    let stuck_after =
        (host.plugin_isolation == PluginIsolation::InProcess).then_some(host.plugin_call_timeout);
    PoolConfig {
        workers,
        network_threads,
        stuck_after,
        max_substitutes: workers,
    }
}

/// The `JobStuck` report of a job whose step has been inside one plugin call for too long, at
/// the instant of the stuck step on the job's clock (the wall clock when it has none of its
/// own).
fn stuck_report(stuck: &Stuck<'_>) -> CycleReport {
    let job = stuck.label;
    let event = Event::new(
        EventReason::JobStuck,
        Severity::Warning,
        format!(
            "a call into an in-process plugin has not returned after {} ms (`[host] \
             plugin-call-timeout`): the job is stuck until it does and the other jobs go on \
             without it; nothing can interrupt the call, `plugin-isolation = \"process\"` would \
             have ended it",
            stuck.running.as_millis()
        ),
    )
    .job(job);
    let mut report = CycleReport::new(job, stuck.at_ms.unwrap_or_else(wall_ms));
    // On a virtual clock, a readable log orders it by time among the job's other steps.
    report.virtual_clock = stuck.at_ms.is_some();
    report.events.push(event);
    report
}

/// One entry of the fleet and the tasks running it.
struct Running {
    /// Start order, to report runs in the order the fleet lists its jobs.
    seq: usize,
    spec: JobSpec,
    alignment: JobAlignment,
    /// The custom evaluator and executors the entry runs with, compared like `alignment`.
    custom: JobCustom,
    live: Arc<LiveEntry>,
    outcome: Arc<EntryOutcome>,
}

/// The entries of a fleet and what they came to.
pub(super) struct Supervisor<'p, 'scope, 'env> {
    pool: &'p Scheduler<'scope, 'env>,
    env: Env<'env>,
    host: HostSettings,
    /// Entries in the plan now.
    planned: usize,
    running: Vec<Running>,
    /// Entries to start once the entry of the same name has ended (`true`: without state).
    waiting: Vec<(JobPlan, bool)>,
    runs: Vec<(usize, Vec<JobRun>)>,
    started: usize,
}

impl<'p, 'scope, 'env> Supervisor<'p, 'scope, 'env> {
    /// Starts every entry of `plan`.
    pub(super) fn start(
        pool: &'p Scheduler<'scope, 'env>,
        env: Env<'env>,
        plan: FleetPlan,
    ) -> Supervisor<'p, 'scope, 'env> {
        let mut supervisor = Supervisor {
            pool,
            env,
            host: plan.fleet.host.clone(),
            planned: plan.jobs.len(),
            running: Vec::new(),
            waiting: Vec::new(),
            runs: Vec::new(),
            started: 0,
        };
        let interval_ms = interval_ms(&supervisor.host);
        for job in plan.jobs {
            supervisor.spawn(job, interval_ms, false);
        }
        supervisor
    }

    /// Waits for every entry; the runs in fleet order.
    pub(super) fn join_all(mut self) -> Vec<JobRun> {
        self.pool.wait_idle();
        for running in std::mem::take(&mut self.running) {
            self.join(&running);
        }
        self.finish()
    }

    /// Runs until every job has ended by itself (or, with no job planned, until the stop),
    /// applying each plan `source` offers meanwhile.
    pub(super) fn serve(mut self, source: &mut dyn FleetSource) -> Vec<JobRun> {
        loop {
            self.reap(&mut *source);
            if self.running.is_empty()
                && self.waiting.is_empty()
                && (self.planned > 0 || self.stopped())
            {
                break;
            }
            std::thread::sleep(POLL);
            if self.stopped() {
                continue;
            }
            if let Some(plan) = source.poll() {
                let event = self.apply(plan);
                source.applied(event);
            }
        }
        self.finish()
    }

    fn stopped(&self) -> bool {
        self.env
            .options
            .stop
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn spawn(&mut self, job: JobPlan, interval_ms: i64, fresh: bool) {
        // The jobs of a shared cluster step in lockstep: the others wait for this one from now.
        if let EngineSpec::Sim {
            cluster: Some(cluster),
            ..
        } = &job.spec.engine
        {
            self.env.shares.simulated(cluster).expect(&job.spec.name);
        }
        let spec = job.spec.clone();
        let alignment = job.alignment.clone();
        let custom = job.custom.clone();
        let live = Arc::new(LiveEntry::new(job, interval_ms));
        let outcome = EntryOutcome::opening();
        let task = OpenEntry::new(self.env, Arc::clone(&live), fresh, Arc::clone(&outcome));
        self.pool.submit(Box::new(task));
        self.running.push(Running {
            seq: self.started,
            spec,
            alignment,
            custom,
            live,
            outcome,
        });
        self.started += 1;
    }

    fn join(&mut self, running: &Running) {
        self.runs.push((running.seq, running.outcome.take_runs()));
    }

    /// Collects the entries that ended, then starts what waited for them. The runs of an
    /// entry a reload stopped go to `source`; the entries that ended are dropped here, with the
    /// last references to their plans, and after a reload that removed most of the fleet the
    /// lists give their room back.
    fn reap(&mut self, source: &mut dyn FleetSource) {
        if self.running.iter().any(|r| r.outcome.is_finished()) {
            let (ended, alive): (Vec<_>, Vec<_>) = std::mem::take(&mut self.running)
                .into_iter()
                .partition(|r| r.outcome.is_finished());
            self.running = alive;
            let mut stopped = 0;
            for running in &ended {
                if running.live.is_removed() {
                    source.left(running.outcome.take_runs());
                    stopped += 1;
                } else {
                    self.join(running);
                }
            }
            drop(ended);
            if stopped >= BULK_STOP {
                // Many jobs' memory was freed at once: every worker gives back what it holds
                // free at its next step (woken now), this thread at once.
                allocator::ask_release();
                self.pool.wake_all();
                allocator::release_free_memory();
            }
        }
        if !self.waiting.is_empty() {
            let interval_ms = interval_ms(&self.host);
            let busy: HashSet<String> = self.running.iter().map(|r| r.spec.name.clone()).collect();
            for (job, fresh) in std::mem::take(&mut self.waiting) {
                if busy.contains(&job.spec.name) {
                    self.waiting.push((job, fresh));
                } else {
                    self.spawn(job, interval_ms, fresh);
                }
            }
        }
        shrink(&mut self.running);
        shrink(&mut self.waiting);
    }

    /// Applies a new plan; the event says what changed.
    fn apply(&mut self, plan: FleetPlan) -> Event {
        let new_interval = interval_ms(&plan.fleet.host);
        let interval_changed = new_interval != interval_ms(&self.host);
        let mut changes = Changes::default();
        // By name, so that a reload of a fleet of thousands of entries is not quadratic.
        let planned: HashSet<String> = plan.jobs.iter().map(|j| j.spec.name.clone()).collect();
        for running in self.running.iter().filter(|r| !r.live.is_removed()) {
            if !planned.contains(&running.spec.name) {
                running.live.remove();
                changes.removed.push(running.spec.name.clone());
            }
        }
        self.waiting
            .retain(|(waiting, _)| planned.contains(&waiting.spec.name));
        drop(planned);
        self.planned = plan.jobs.len();
        // Where each entry runs: the one not removed, and whether any run of it is ending.
        let mut active: HashMap<String, usize> = HashMap::new();
        let mut ending: HashSet<String> = HashSet::new();
        for (at, running) in self.running.iter().enumerate() {
            if running.live.is_removed() {
                ending.insert(running.spec.name.clone());
            } else {
                active.insert(running.spec.name.clone(), at);
            }
        }
        let mut waiting: HashMap<String, usize> = self
            .waiting
            .iter()
            .enumerate()
            .map(|(at, (job, _))| (job.spec.name.clone(), at))
            .collect();
        for job in plan.jobs {
            let name = job.spec.name.clone();
            let active = active.get(&name).and_then(|&at| self.running.get_mut(at));
            match active {
                Some(running) if running.spec.engine != job.spec.engine => {
                    running.live.remove();
                    match waiting.get(&name).and_then(|&at| self.waiting.get_mut(at)) {
                        Some(slot) => *slot = (job, true),
                        None => {
                            waiting.insert(name.clone(), self.waiting.len());
                            self.waiting.push((job, true));
                        }
                    }
                    changes.restarted.push(name);
                }
                Some(running) => {
                    let changed = config_of(&running.spec) != config_of(&job.spec);
                    let new_mode = !running.alignment.same_implementation(&job.alignment)
                        || !running.custom.same_implementations(&job.custom);
                    if changed || new_mode || interval_changed || !job.notes.is_empty() {
                        running.spec = job.spec.clone();
                        running.alignment = job.alignment.clone();
                        running.custom = job.custom.clone();
                        running.live.update(job, new_interval);
                    }
                    if changed {
                        changes.changed.push(name);
                    } else if new_mode {
                        changes.new_mode.push(name);
                    }
                }
                None => {
                    let slot = waiting.get(&name).and_then(|&at| self.waiting.get_mut(at));
                    match slot {
                        // A restart or a return still waiting for its old thread.
                        Some(slot) => slot.0 = job,
                        None if ending.contains(&name) => {
                            waiting.insert(name.clone(), self.waiting.len());
                            self.waiting.push((job, false));
                        }
                        None => self.spawn(job, new_interval, false),
                    }
                    if !changes.restarted.contains(&name) {
                        changes.added.push(name);
                    }
                }
            }
        }
        if !changes.removed.is_empty() || !changes.restarted.is_empty() {
            // The entries that left stop now rather than at their next due time.
            self.pool.wake_all();
        }
        let message = changes.describe(&self.host, &plan.fleet.host);
        // What takes effect on reload is the running host's from now on; the rest stays as it
        // started, and the next reload says again that it needs a restart.
        self.host.interval = plan.fleet.host.interval;
        self.host.api_token.clone_from(&plan.fleet.host.api_token);
        Event::new(EventReason::ConfigReloaded, Severity::Normal, message)
    }

    fn finish(mut self) -> Vec<JobRun> {
        self.runs.sort_by_key(|(seq, _)| *seq);
        self.runs.into_iter().flat_map(|(_, runs)| runs).collect()
    }
}

/// Gives a list's room back once it holds far fewer items than it has room for (a reload
/// removed most of the fleet).
fn shrink<T>(list: &mut Vec<T>) {
    if list.capacity() > 2 * list.len() + 16 {
        list.shrink_to_fit();
    }
}

/// A job's configuration as values, without where each was written: moving an entry in the
/// file is not a change.
fn config_of(spec: &JobSpec) -> Vec<(&str, &str)> {
    spec.config.iter().collect()
}

fn interval_ms(host: &HostSettings) -> i64 {
    i64::try_from(host.interval.as_millis()).unwrap_or(i64::MAX)
}

/// What a reload did, by entry name.
#[derive(Debug, Default)]
struct Changes {
    added: Vec<String>,
    removed: Vec<String>,
    changed: Vec<String>,
    /// Same configuration, another implementation of the mode, evaluator or an executor (a
    /// plugin version came or went).
    new_mode: Vec<String>,
    restarted: Vec<String>,
}

impl Changes {
    fn describe(&self, old: &HostSettings, new: &HostSettings) -> String {
        let mut parts = Vec::new();
        let mut list = |what: &str, names: &[String]| {
            if !names.is_empty() {
                parts.push(format!("{what} {}", names.join(", ")));
            }
        };
        list("added", &self.added);
        list("removed", &self.removed);
        list("changed", &self.changed);
        list("changed mode implementation", &self.new_mode);
        list(
            "restarted without saved state (engine changed)",
            &self.restarted,
        );
        let changed = changed_host_keys(old, new);
        let mut restart = Vec::new();
        for key in changed {
            match (key, on_reload(key)) {
                ("interval", _) => parts.push(format!(
                    "`[host] interval` now {} ms",
                    new.interval.as_millis()
                )),
                // Never the token itself: the log may be read by more people than the API.
                ("api-token", _) => parts.push(
                    match (&old.api_token, &new.api_token) {
                        (None, _) => "`[host] api-token` set",
                        (_, None) => "`[host] api-token` removed",
                        _ => "`[host] api-token` replaced",
                    }
                    .to_string(),
                ),
                (key, OnReload::NeedsRestart) => restart.push(format!("`[host] {key}`")),
                (key, OnReload::Applied) => parts.push(format!("`[host] {key}` changed")),
            }
        }
        if parts.is_empty() {
            parts.push("no job changed".to_string());
        }
        let mut message = format!("configuration reloaded: {}", parts.join("; "));
        if let Some((last, first)) = restart.split_last() {
            let (keys, verb) = if first.is_empty() {
                (last.clone(), "needs")
            } else {
                (format!("{} and {last}", first.join(", ")), "need")
            };
            message.push_str(&format!(
                "; {keys} {verb} a restart to take effect, the running host keeps its own"
            ));
        }
        message
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    use std::time::Instant;

    use crate::runner::{Interrupted, Pace};

    use super::*;
    use crate::alignment::NoCustomModes;
    use crate::config::parse_fleet;
    use crate::engine::flink::fake_server::FakeFlink;
    use crate::plan::plan_fleet;
    use crate::runner::wall_ms;
    use crate::state::{InMemoryStateStore, StateStore};

    const JOB: &str = "8930b1fd94e042463a80e45360195d7e";
    const OTHER_JOB: &str = "0000000000000000000000000000beef";

    /// A fleet of Flink entries `(name, job id, mode)` against `rest`, every 100 ms.
    fn plan(rest: &str, entries: &[(&str, &str, &str)]) -> FleetPlan {
        let mut text = "[host]\ninterval = \"100ms\"\n".to_string();
        for (name, id, mode) in entries {
            text.push_str(&format!(
                "[[jobs]]\nname = \"{name}\"\nengine = \"flink\"\nrest = \"{rest}\"\n\
                 job-id = \"{id}\"\n[jobs.config]\n\"scaling.alignment.mode\" = \"{mode}\"\n"
            ));
        }
        let fleet = parse_fleet(Path::new("fleet.toml"), &text).expect("a valid fleet");
        plan_fleet(fleet, &NoCustomModes).expect("a valid plan")
    }

    /// Offers its plans one after the other, a few polls apart, then stops the fleet.
    struct Script<'a> {
        plans: Vec<FleetPlan>,
        polls: usize,
        /// When each plan was handed over (wall ms).
        offered_at: Vec<i64>,
        applied: Vec<Event>,
        /// The runs of the entries the plans stopped, as they ended.
        left: Vec<JobRun>,
        stop: &'a AtomicBool,
    }

    impl Script<'_> {
        /// A script of `plans` that sets `stop` once they are all offered.
        fn of(plans: Vec<FleetPlan>, stop: &AtomicBool) -> Script<'_> {
            Script {
                plans,
                polls: 0,
                offered_at: Vec::new(),
                applied: Vec::new(),
                left: Vec::new(),
                stop,
            }
        }
    }

    /// A store in memory, as the fleet's options hold it.
    fn memory_store() -> Mutex<Box<dyn StateStore + Send>> {
        Mutex::new(Box::new(InMemoryStateStore::new()))
    }

    impl FleetSource for Script<'_> {
        fn poll(&mut self) -> Option<FleetPlan> {
            self.polls += 1;
            if self.polls % 3 != 0 {
                return None;
            }
            if self.plans.is_empty() {
                self.stop.store(true, Ordering::Relaxed);
                return None;
            }
            self.offered_at.push(wall_ms());
            Some(self.plans.remove(0))
        }

        fn applied(&mut self, event: Event) {
            self.applied.push(event);
        }

        fn left(&mut self, runs: Vec<JobRun>) {
            self.left.extend(runs);
        }
    }

    #[test]
    fn a_reload_adds_removes_changes_and_restarts_entries() {
        let fake = FakeFlink::start();
        fake.serve_restarting(JOB);
        fake.serve_restarting(OTHER_JOB);
        let url = fake.url();
        let stop = AtomicBool::new(false);
        let store = memory_store();
        let options = RunOptions::new(&stop, &store);
        let plans = vec![
            // `a` changes mode, `b` leaves, `c` joins.
            plan(&url, &[("a", JOB, "EVENLY_SPREAD"), ("c", JOB, "BALANCED")]),
            // `a` is pointed at another job: a new engine.
            plan(
                &url,
                &[("a", OTHER_JOB, "EVENLY_SPREAD"), ("c", JOB, "BALANCED")],
            ),
            // The same again: nothing to do.
            plan(
                &url,
                &[("a", OTHER_JOB, "EVENLY_SPREAD"), ("c", JOB, "BALANCED")],
            ),
        ];
        let mut script = Script::of(plans, &stop);
        let reports = Mutex::new(Vec::new());
        let sink = |r: &CycleReport| {
            reports
                .lock()
                .expect("reports")
                .push((r.job.clone(), r.at_ms))
        };
        let initial = plan(&url, &[("a", JOB, "BALANCED"), ("b", JOB, "BALANCED")]);
        let runs = crate::runner::run_fleet_reloading(initial, &options, &sink, Some(&mut script));

        let messages: Vec<&str> = script.applied.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "configuration reloaded: added c; removed b; changed a",
                "configuration reloaded: restarted without saved state (engine changed) a",
                "configuration reloaded: no job changed",
            ]
        );
        assert!(
            script
                .applied
                .iter()
                .all(|e| e.reason == EventReason::ConfigReloaded)
        );
        let first_reload = script.offered_at[0];
        let reports = reports.into_inner().expect("reports");
        let steps_of = |job: &str| -> Vec<i64> {
            reports
                .iter()
                .filter(|(j, _)| j == job)
                .map(|(_, at)| *at)
                .collect()
        };
        // `b` stopped by its next step (100 ms, with room for a slow machine) after leaving; `c`
        // ran from the reload on.
        assert!(
            steps_of("b").iter().all(|&at| at <= first_reload + 300),
            "{reports:?}"
        );
        assert!(steps_of("c").len() >= 2, "{reports:?}");
        assert!(
            steps_of("c").iter().all(|&at| at >= first_reload),
            "{reports:?}"
        );
        // The old `a` took the new mode before it was replaced; the new `a` observes the new job.
        // The runs of `b` and of the old `a` were handed over as they ended, not kept for the
        // end.
        let summary = |runs: &[JobRun]| -> Vec<(String, String)> {
            runs.iter()
                .map(|r| (r.name.clone(), r.mode.clone()))
                .collect()
        };
        let mut left = summary(&script.left);
        left.sort();
        assert_eq!(
            left,
            [
                ("a".to_string(), "EVENLY_SPREAD".to_string()),
                ("b".to_string(), "BALANCED".to_string())
            ]
        );
        assert_eq!(
            summary(&runs),
            [
                ("c".to_string(), "BALANCED".to_string()),
                ("a".to_string(), "EVENLY_SPREAD".to_string())
            ]
        );
        let asked_other = fake
            .requests()
            .iter()
            .filter(|r| r.target == format!("/jobs/{OTHER_JOB}"))
            .count();
        assert!(asked_other >= 2, "the restarted entry observes its new job");
    }

    #[test]
    fn a_job_a_reload_removes_leaves_the_store_and_the_runs_kept_for_the_end() {
        let fake = FakeFlink::start();
        fake.serve_restarting(JOB);
        let url = fake.url();
        let stop = AtomicBool::new(false);
        let store = memory_store();
        let options = RunOptions::new(&stop, &store);
        let mut script = Script::of(vec![plan(&url, &[("a", JOB, "BALANCED")])], &stop);
        let initial = plan(&url, &[("a", JOB, "BALANCED"), ("b", JOB, "BALANCED")]);
        let runs =
            crate::runner::run_fleet_reloading(initial, &options, &|_| {}, Some(&mut script));

        // Both stored their state after every step; `b`'s went with it.
        assert_eq!(store.lock().expect("the store").jobs(), ["a"]);
        let names =
            |runs: &[JobRun]| -> Vec<String> { runs.iter().map(|r| r.name.clone()).collect() };
        assert_eq!(names(&script.left), ["b"]);
        assert!(script.left[0].steps >= 1, "{:?}", script.left);
        assert_eq!(names(&runs), ["a"]);
    }

    /// Hundreds of replayed jobs paced to the wall clock, all due at the same instants, on two
    /// workers: every cycle runs, none starts an interval late. (The full-size run with the
    /// thread and memory bounds is `cargo bench --bench fleet_scale`.)
    #[test]
    fn a_paced_replay_fleet_keeps_up_with_the_wall_clock_on_two_workers() {
        const JOBS: usize = 300;
        const SECONDS: u64 = 4;
        let dir = tempfile::tempdir().expect("tempdir");
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/replay/backlog_then_scale_down.jsonl");
        let text = std::fs::read_to_string(fixture).expect("the replay fixture");
        let mut records = text.lines().filter(|l| l.starts_with('{'));
        let first = records.next().expect("a record");
        let mut last: serde_json::Value =
            serde_json::from_str(records.next_back().expect("records")).expect("a record");
        last["at_ms"] = serde_json::json!(SECONDS * 1000);
        let trace = dir.path().join("trace.jsonl");
        std::fs::write(&trace, format!("{first}\n{last}\n")).expect("write the trace");
        let mut fleet = "[host]\ninterval = \"1s\"\nworkers = 2\n".to_string();
        for i in 0..JOBS {
            fleet.push_str(&format!(
                "[[jobs]]\nname = \"r{i}\"\nengine = \"replay\"\ntrace = {:?}\n",
                trace.display().to_string()
            ));
        }
        let fleet = parse_fleet(&dir.path().join("fleet.toml"), &fleet).expect("a valid fleet");
        let plan = plan_fleet(fleet, &NoCustomModes).expect("a valid plan");
        let stop = AtomicBool::new(false);
        let store: Mutex<Box<dyn StateStore + Send>> =
            Mutex::new(Box::new(InMemoryStateStore::new()));
        let options = paced(Duration::from_secs(3600), Some(1.0), &stop, &store);
        let started = Instant::now();
        let runs = run_fleet(&plan, &options, &|_| {});
        let took = started.elapsed();
        assert_eq!(runs.len(), JOBS);
        let mut lateness = crate::runner::Lateness::default();
        for run in &runs {
            assert_eq!(run.error, None);
            // Steps at 0, 1, ..., SECONDS s of the recording.
            assert_eq!(run.steps, SECONDS as usize + 1, "{}", run.name);
            lateness.merge(&run.lateness);
        }
        assert_eq!(lateness.cycles(), (JOBS as u64) * (SECONDS + 1));
        assert!(
            lateness.max() < Duration::from_secs(1),
            "a cycle started {:?} late",
            lateness.max()
        );
        assert!(took >= Duration::from_secs(SECONDS), "{took:?}");
    }

    /// A fleet of one simulated job (the diurnal example) with a 1 min interval.
    fn simulated_plan() -> FleetPlan {
        simulated_plan_every("1min")
    }

    /// A fleet of one simulated job (the diurnal example) with the given interval.
    fn simulated_plan_every(interval: &str) -> FleetPlan {
        let job = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/jobs/diurnal.toml");
        let text = format!(
            "[host]\ninterval = {interval:?}\n[[jobs]]\nname = \"sim\"\njob = {:?}\n",
            job.display().to_string()
        );
        let fleet = parse_fleet(Path::new("fleet.toml"), &text).expect("a valid fleet");
        plan_fleet(fleet, &NoCustomModes).expect("a valid plan")
    }

    #[test]
    fn a_stopped_simulation_says_where_it_stopped() {
        let plan = simulated_plan();
        let stop = AtomicBool::new(false);
        let store: Mutex<Box<dyn StateStore + Send>> =
            Mutex::new(Box::new(InMemoryStateStore::new()));
        let options = RunOptions {
            simulated_duration: Some(Duration::from_secs(3600)),
            ..RunOptions::new(&stop, &store)
        };
        // Ctrl-C arrives while the step at 10 min is being reported.
        let runs = run_fleet(&plan, &options, &|report| {
            if report.at_ms == 600_000 {
                stop.store(true, Ordering::Relaxed);
            }
        });
        assert_eq!(
            runs[0].interrupted,
            Some(Interrupted {
                at_ms: 600_000,
                end_ms: 3_600_000
            })
        );
        // Steps at 0, 1, ..., 10 min ran; the summary covers them.
        assert_eq!(runs[0].steps, 11);
        assert!(runs[0].simulation.is_some());

        // Run to its end, the same job is not interrupted.
        let stop = AtomicBool::new(false);
        let options = RunOptions {
            stop: &stop,
            ..options
        };
        let runs = run_fleet(&plan, &options, &|_| {});
        assert_eq!(runs[0].interrupted, None);
        assert_eq!(runs[0].steps, 61, "0 to 60 min, both ends included");
    }

    /// A custom mode whose first `align` is a plugin call that runs past the deadline.
    struct SlowOnce(AtomicBool);

    impl crate::alignment::HostMode for SlowOnce {
        fn is_applicable(
            &self,
            _: &flowscale_sdk::AlignmentContext,
        ) -> Result<bool, flowscale_sdk::ModeError> {
            Ok(true)
        }
        fn align(
            &self,
            ctx: &flowscale_sdk::AlignmentContext,
        ) -> Result<u32, flowscale_sdk::ModeError> {
            if !self.0.swap(true, Ordering::AcqRel) {
                let _call = crate::plugins::plugin_call();
                std::thread::sleep(Duration::from_millis(500));
            }
            Ok(ctx.target_parallelism())
        }
        fn validate(&self, _: &flowscale_sdk::ModeParams) -> Result<(), flowscale_sdk::ModeError> {
            Ok(())
        }
    }

    /// Offers [`SlowOnce`] as the mode `slow-once`.
    struct SlowCatalog(crate::alignment::CustomMode);

    impl crate::alignment::ModeCatalog for SlowCatalog {
        fn find(&self, id: &str) -> Option<crate::alignment::CustomMode> {
            (id == self.0.id).then(|| self.0.clone())
        }
        fn ids(&self) -> Vec<String> {
            vec![self.0.id.clone()]
        }
    }

    /// No evaluators and no executors.
    impl crate::scaling::KindCatalog for SlowCatalog {}

    /// A simulated job stuck in an in-process plugin call is reported at the simulated instant
    /// of the stuck cycle, among its other steps, not at the wall clock's time.
    #[test]
    fn a_stuck_simulated_job_is_reported_in_its_simulated_time() {
        let job =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/jobs/keyed-step-spike.toml");
        let text = format!(
            "[host]\ninterval = \"1min\"\nplugin-call-timeout = \"100ms\"\n\
             [defaults]\n\"metrics.window\" = \"3 min\"\n\"stabilization.interval\" = \"1 min\"\n\
             [[jobs]]\nname = \"sim\"\njob = {:?}\n[jobs.config]\n\
             \"scaling.alignment.mode\" = \"slow\"\n\
             \"scaling.alignment.mode.slow.class\" = \"slow-once\"\n",
            job.display().to_string()
        );
        let catalog = SlowCatalog(crate::alignment::CustomMode {
            id: "slow-once".into(),
            description: String::new(),
            origin: crate::alignment::ModeOrigin::Linked,
            mode: Arc::new(SlowOnce(AtomicBool::new(false))),
        });
        let fleet = parse_fleet(Path::new("fleet.toml"), &text).expect("a valid fleet");
        let plan = plan_fleet(fleet, &catalog).expect("a valid plan");
        let stop = AtomicBool::new(false);
        let store: Mutex<Box<dyn StateStore + Send>> =
            Mutex::new(Box::new(InMemoryStateStore::new()));
        let simulated_ms = 3_600_000;
        let options = paced(Duration::from_secs(3600), None, &stop, &store);
        // (at, stuck, on a virtual clock) of every report, in the order they came.
        let reports: Mutex<Vec<(i64, bool, bool)>> = Mutex::new(Vec::new());
        let runs = run_fleet(&plan, &options, &|report| {
            let stuck = report
                .events
                .iter()
                .any(|e| e.reason == EventReason::JobStuck);
            let seen = (report.at_ms, stuck, report.virtual_clock);
            reports.lock().expect("reports").push(seen);
        });
        assert_eq!(runs[0].error, None);
        let reports = reports.into_inner().expect("reports");
        let stuck: Vec<usize> = (0..reports.len()).filter(|&i| reports[i].1).collect();
        assert_eq!(stuck.len(), 1, "one stuck call, one report: {reports:?}");
        let (at_ms, _, virtual_clock) = reports[stuck[0]];
        // A cycle of the simulated hour (one a minute), not the wall clock's time.
        assert!((0..=simulated_ms).contains(&at_ms), "stamped {at_ms}");
        assert_eq!(at_ms % 60_000, 0, "stamped {at_ms}");
        assert!(virtual_clock);
        // In order with the job's other steps; the stuck cycle reports when its call returns,
        // at the same instant.
        assert!(
            reports.windows(2).all(|w| w[0].0 <= w[1].0),
            "out of order: {reports:?}"
        );
        assert_eq!(reports.get(stuck[0] + 1).map(|r| r.0), Some(at_ms));
    }

    /// The options of a simulated run of `simulated` time at `pace` (as fast as possible when
    /// `None`).
    fn paced<'a>(
        simulated: Duration,
        pace: Option<f64>,
        stop: &'a AtomicBool,
        store: &'a Mutex<Box<dyn StateStore + Send>>,
    ) -> RunOptions<'a> {
        RunOptions {
            simulated_duration: Some(simulated),
            pace: pace.map(|p| Pace::new(p).expect("a valid pace")),
            ..RunOptions::new(stop, store)
        }
    }

    #[test]
    fn a_paced_run_takes_simulated_time_over_pace_in_wall_time() {
        let plan = simulated_plan_every("1s");
        let stop = AtomicBool::new(false);
        let store: Mutex<Box<dyn StateStore + Send>> =
            Mutex::new(Box::new(InMemoryStateStore::new()));
        let pace = 4.0;
        let simulated = Duration::from_secs(4);
        let options = paced(simulated, Some(pace), &stop, &store);
        let started = Instant::now();
        let stepped: Mutex<Vec<(i64, Duration)>> = Mutex::new(Vec::new());
        let runs = run_fleet(&plan, &options, &|report| {
            stepped
                .lock()
                .unwrap()
                .push((report.at_ms, started.elapsed()));
        });
        let took = started.elapsed();
        assert_eq!(runs[0].interrupted, None);
        let stepped = stepped.into_inner().unwrap();
        // No step comes before the wall clock has caught up with it.
        for &(at_ms, when) in &stepped {
            let due = Duration::from_millis(u64::try_from(at_ms).unwrap()).div_f64(pace);
            assert!(
                when >= due,
                "the step at {at_ms} ms came at {when:?}, due {due:?}"
            );
        }
        // The last step is at the end of the simulated time, so the run lasted at least
        // simulated / pace; it should not take much longer (a shared machine: generous).
        assert_eq!(stepped.last().map(|s| s.0), Some(4000), "{stepped:?}");
        let expected = simulated.div_f64(pace);
        assert!(took >= expected, "{took:?} < {expected:?}");
        assert!(took < expected + Duration::from_secs(3), "{took:?}");

        // Unpaced, the same run does not wait for the wall clock.
        let options = paced(simulated, None, &stop, &store);
        let started = Instant::now();
        let unpaced = run_fleet(&plan, &options, &|_| {});
        assert_eq!(unpaced[0].steps, runs[0].steps);
        assert!(started.elapsed() < expected, "{:?}", started.elapsed());
    }

    #[test]
    fn the_stop_flag_ends_a_paced_run_promptly() {
        // One step a simulated minute at one simulated second per wall second: the second step
        // is a wall minute away when the stop comes.
        let plan = simulated_plan();
        let stop = AtomicBool::new(false);
        let store: Mutex<Box<dyn StateStore + Send>> =
            Mutex::new(Box::new(InMemoryStateStore::new()));
        let options = paced(Duration::from_secs(3600), Some(1.0), &stop, &store);
        let started = Instant::now();
        let runs = std::thread::scope(|scope| {
            scope.spawn(|| {
                std::thread::sleep(Duration::from_millis(300));
                stop.store(true, Ordering::Relaxed);
            });
            run_fleet(&plan, &options, &|_| {})
        });
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(300), "{took:?}");
        assert!(took < Duration::from_secs(3), "not prompt: {took:?}");
        assert_eq!(runs[0].steps, 1);
        assert_eq!(
            runs[0].interrupted,
            Some(Interrupted {
                at_ms: 0,
                end_ms: 3_600_000
            })
        );
    }

    #[test]
    fn a_reload_that_changes_the_state_database_says_it_needs_a_restart() {
        let host = |state: &str| {
            let text = format!("[host]\n{state}\n");
            parse_fleet(Path::new("fleet.toml"), &text)
                .expect("a valid fleet")
                .host
        };
        let files = host("state-dir = \"state\"");
        let db = host("state = \"postgres://flowscale@localhost:5432/a\"");
        let other_db = host("state = \"postgres://flowscale@localhost:5432/b\"");
        let changes = Changes::default();
        let keeps = "a restart to take effect, the running host keeps its own";
        for (old, new, keys) in [
            (&db, &other_db, format!("`[host] state` needs {keeps}")),
            (
                &files,
                &db,
                format!("`[host] state-dir` and `[host] state` need {keeps}"),
            ),
            (
                &db,
                &files,
                format!("`[host] state-dir` and `[host] state` need {keeps}"),
            ),
        ] {
            assert_eq!(
                changes.describe(old, new),
                format!("configuration reloaded: no job changed; {keys}")
            );
        }
        assert_eq!(
            changes.describe(&db, &db.clone()),
            "configuration reloaded: no job changed"
        );
    }

    /// One value and another of every `[host]` key, each valid on its own.
    const HOST_SAMPLES: &[(&str, &str, &str)] = &[
        ("plugins", "\"a\"", "\"b\""),
        ("interval", "\"10s\"", "\"20s\""),
        ("state-dir", "\"s1\"", "\"s2\""),
        ("plugin-isolation", "\"in-process\"", "\"process\""),
        ("plugin-call-timeout", "\"1s\"", "\"2s\""),
        ("workers", "2", "3"),
        ("max-requests-per-cluster", "4", "8"),
        ("listen", "\"127.0.0.1:9464\"", "\"127.0.0.1:9465\""),
        ("api-token", "\"aaaaaaaaaaaaaaaa\"", "\"bbbbbbbbbbbbbbbb\""),
        ("api-token-file", "\"token-a\"", "\"token-b\""),
        ("tls-cert-file", "\"a.pem\"", "\"b.pem\""),
        ("tls-key-file", "\"a.key\"", "\"b.key\""),
        ("listen-plaintext", "false", "true"),
        (
            "state",
            "\"postgres://f@localhost:5432/a\"",
            "\"postgres://f@localhost:5432/b\"",
        ),
        ("id", "\"h1\"", "\"h2\""),
        ("lease-ttl", "\"30s\"", "\"40s\""),
    ];

    /// The `[host]` keys a running host takes on reload; every other one needs a restart.
    const RELOADED: &[&str] = &["interval", "api-token", "api-token-file"];

    /// What a sample of `key` needs beside it: the other half of the TLS pair.
    fn partner(key: &str) -> &'static str {
        match key {
            "tls-cert-file" => "tls-key-file = \"a.key\"\n",
            "tls-key-file" => "tls-cert-file = \"a.pem\"\n",
            _ => "",
        }
    }

    /// The files the samples name, in `dir`: one certificate and key under two names each
    /// (a change of path alone), two token files.
    fn sample_files(dir: &Path) {
        use flowscale_tests::certs::{TestCa, write_private};
        let (cert, key) = TestCa::new(dir, "samples").issue("a", &["127.0.0.1"]);
        std::fs::copy(&cert, dir.join("b.pem")).expect("copy the certificate");
        std::fs::copy(&key, dir.join("b.key")).expect("copy the key (mode kept)");
        write_private(&dir.join("token-a"), "aaaaaaaaaaaaaaaa");
        write_private(&dir.join("token-b"), "bbbbbbbbbbbbbbbb");
    }

    #[test]
    fn a_reload_names_every_changed_host_key_and_whether_it_needs_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        sample_files(dir.path());
        let host = |key: &str, value: &str| {
            parse_fleet(
                &dir.path().join("fleet.toml"),
                &format!("[host]\n{key} = {value}\n{}", partner(key)),
            )
            .expect("a valid fleet")
            .host
        };
        let mut sampled: Vec<&str> = HOST_SAMPLES.iter().map(|(key, _, _)| *key).collect();
        let mut keys: Vec<&str> = crate::config::HOST_KEYS_ON_RELOAD
            .iter()
            .map(|(key, _)| *key)
            .collect();
        sampled.sort_unstable();
        keys.sort_unstable();
        assert_eq!(sampled, keys, "a sample of every key");
        let changes = Changes::default();
        for (key, a, b) in HOST_SAMPLES {
            let message = changes.describe(&host(key, a), &host(key, b));
            let named = format!("`[host] {key}`");
            assert!(message.contains(&named), "{key}: {message}");
            let restart = format!("{named} needs a restart to take effect");
            assert_eq!(
                message.contains(&restart),
                !RELOADED.contains(key),
                "{key}: {message}"
            );
            // Nothing is said of a key that did not change.
            assert_eq!(
                changes.describe(&host(key, a), &host(key, a)),
                "configuration reloaded: no job changed",
                "{key}"
            );
        }
    }
}
