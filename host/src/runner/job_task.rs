//! A fleet entry's jobs as scheduler tasks: each job's control loop turned inside out, one step
//! per call, so that a bounded pool of workers runs any number of jobs.
//!
//! An entry starts as an [`OpenEntry`] task, which opens its engines (listing a Flink cluster's
//! jobs goes over the network) and starts a [`JobTask`] per job. A job task steps its runner
//! when its time comes and asks to be called again at the next due time:
//! - on a virtual clock (a simulation, a recording): back to back, or with `--pace`, once the
//!   wall clock has caught up with the step (deadlines computed from the start, so the steps'
//!   own time does not add up to drift);
//! - on the wall clock: an interval after the previous step started, persisting the job's
//!   state after every step.
//!
//! Each task delivers its [`JobRun`] into its entry's [`EntryOutcome`] when it ends.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::config::EngineSpec;
use crate::engine::flink::ClusterLimits;
use crate::engine::{Clock, Engine};
use crate::events::{Event, EventReason, Severity};
use crate::plan::JobPlan;
use crate::scaling::CycleStage;
use crate::sim::{Simulation, Summary, Timeline};
use crate::state::EventLog;

use super::engines::{FlinkCluster, NamedEngine, OpenError, OpenedEngines, open_engines_limited};
use super::fleet::{
    DEFAULT_SIMULATED_DURATION, Interrupted, JobRun, MAX_SIMULATED_DURATION, RunOptions, SlotsUse,
    wall_ms,
};
use super::job::{JobRunner, PersistError};
use super::lateness::Lateness;
use super::lease::JobLease;
use super::live::{Follower, LiveEntry};
use super::pace::{self, STOP_POLL};
use super::report::CycleReport;
use super::scheduler::{BoxedTask, Lane, Next, Task, TaskTime};
use super::slot_share::{ClusterShares, GATHER, SharedCluster, Turn};

/// Why a job's run has no result when one of its steps panicked.
pub(super) const PANICKED: &str = "the job's control loop panicked; the other jobs went on";

/// The longest an unpaced virtual clock steps before it lets the other jobs have the worker:
/// long enough that queueing costs nothing next to the steps, short enough that a paced or
/// wall-clock job sharing the worker is never noticeably late.
const SLICE: Duration = Duration::from_millis(2);

/// What every task of a fleet shares: how the fleet runs, where reports go, the clusters'
/// request limits.
#[derive(Clone, Copy)]
pub(super) struct Env<'env> {
    pub(super) options: &'env RunOptions<'env>,
    pub(super) sink: &'env (dyn Fn(&CycleReport) + Sync),
    pub(super) limits: &'env ClusterLimits,
    /// The shared clusters: their slots, arbiters and the lockstep of their jobs.
    pub(super) shares: &'env ClusterShares,
}

/// What a fleet entry's jobs came to, filled in as they end.
#[derive(Debug, Default)]
pub(super) struct EntryOutcome {
    /// Tasks of the entry not yet ended (the opening task counts until it has started the
    /// jobs).
    pending: AtomicUsize,
    runs: Mutex<Vec<(usize, JobRun)>>,
}

impl EntryOutcome {
    /// The outcome of an entry about to be opened.
    pub(super) fn opening() -> Arc<EntryOutcome> {
        Arc::new(EntryOutcome {
            pending: AtomicUsize::new(1),
            runs: Mutex::new(Vec::new()),
        })
    }

    /// True once every job of the entry has ended.
    pub(super) fn is_finished(&self) -> bool {
        self.pending.load(Ordering::Acquire) == 0
    }

    /// The runs in the order of the entry's jobs.
    pub(super) fn take_runs(&self) -> Vec<JobRun> {
        let mut runs =
            std::mem::take(&mut *self.runs.lock().unwrap_or_else(PoisonError::into_inner));
        runs.sort_by_key(|(index, _)| *index);
        runs.into_iter().map(|(_, run)| run).collect()
    }

    fn expect(&self, tasks: usize) {
        self.pending.fetch_add(tasks, Ordering::AcqRel);
    }

    fn deliver(&self, index: usize, run: JobRun) {
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((index, run));
        self.ended();
    }

    fn ended(&self) {
        self.pending.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An entry's first task: opens its engines and starts a task per job.
pub(super) struct OpenEntry<'env> {
    env: Env<'env>,
    live: Arc<LiveEntry>,
    /// Wall-clock jobs do not resume from the store: their engine changed, so what was learned
    /// about the old one is wrong.
    fresh: bool,
    outcome: Arc<EntryOutcome>,
    name: String,
    lane: Lane,
    /// When the task was made: a wait for the cluster ends with the run's duration.
    created: Instant,
    /// Set while a discovering entry's cluster cannot list its jobs.
    waiting: Option<Waiting>,
}

/// A discovering Flink entry (no `job-id`) whose cluster could not list its jobs: it tries
/// again at each of its cycles, as a job named by `job-id` observes its unreachable job again
/// at each of its cycles, each attempt with the client's own retries and backoff.
struct Waiting {
    /// When the next attempt is due.
    next: Instant,
    /// The last failure: the run's error if the wait ends before the cluster answers.
    error: String,
    /// The failures recorded (and logged) so far, so that a cluster down for hours is reported
    /// like a job's unreachable engine: once per `scaling.event.interval`, and whenever the
    /// cause changes.
    reported: EventLog,
}

impl<'env> OpenEntry<'env> {
    /// The task that opens the entry `live` follows, delivering into `outcome`.
    pub(super) fn new(
        env: Env<'env>,
        live: Arc<LiveEntry>,
        fresh: bool,
        outcome: Arc<EntryOutcome>,
    ) -> OpenEntry<'env> {
        let (job, _) = live.current();
        // Listing a cluster's jobs waits on the network; opening a file does not.
        let lane = match job.spec.engine {
            EngineSpec::Flink { .. } => Lane::Network,
            _ => Lane::Compute,
        };
        OpenEntry {
            env,
            name: job.spec.name.clone(),
            live,
            fresh,
            outcome,
            lane,
            created: Instant::now(),
            waiting: None,
        }
    }

    /// While waiting for the cluster: ends the wait when the entry left the fleet (it ran
    /// nothing, so it leaves no run), or when the fleet stops or its time is up (the last
    /// failure is the run's error); `Next::At` the next attempt while it is not due. `None`:
    /// not waiting, or an attempt is due.
    fn wait(&mut self) -> Option<Next> {
        let waiting = self.waiting.as_ref()?;
        if self.live.is_removed() {
            self.outcome.ended();
            return Some(Next::Done);
        }
        let options = self.env.options;
        let end = options.wall_duration.map(|d| self.created + d);
        let now = Instant::now();
        if options.stop.load(Ordering::Relaxed) || end.is_some_and(|end| now >= end) {
            let (job, _) = self.live.current();
            let run = JobRun::failed(
                self.name.clone(),
                job.alignment.mode_id(),
                waiting.error.clone(),
            );
            self.outcome.deliver(0, run);
            return Some(Next::Done);
        }
        let next = end.map_or(waiting.next, |end| end.min(waiting.next));
        (now < next).then_some(Next::At(next))
    }

    /// After a failed opening: `Next::At` the next attempt when the entry waits for its
    /// cluster, reporting the failure (one line naming the cluster, its address and the
    /// cause). A discovering Flink entry waits when the cluster could not list its jobs, and,
    /// once it waited, also when the cluster answered with no RUNNING job (a cluster that just
    /// came up is still starting its jobs). `None`: the entry fails (`--once`, a file that
    /// cannot be read, a cluster that answered at start with nothing to scale).
    fn retry_later(&mut self, job: &JobPlan, interval_ms: i64, err: &OpenError) -> Option<Next> {
        let discovers = matches!(job.spec.engine, EngineSpec::Flink { job_id: None, .. });
        let waits = match err {
            OpenError::Flink(_) => true,
            OpenError::NoRunningJob { .. } => self.waiting.is_some(),
            _ => false,
        };
        if !discovers || !waits || self.env.options.once {
            return None;
        }
        let message = match err {
            OpenError::NoRunningJob { .. } => format!("{err} yet; waiting for one"),
            _ => format!("cannot list the cluster's jobs, trying again at the next cycle: {err}"),
        };
        let interval = Duration::from_millis(u64::try_from(interval_ms).unwrap_or(0).max(1));
        let waiting = self.waiting.get_or_insert_with(|| Waiting {
            next: Instant::now(),
            error: String::new(),
            reported: EventLog::new(
                Duration::from_millis(u64::try_from(job.settings.event_interval_ms).unwrap_or(0)),
                1,
            ),
        });
        waiting.next = Instant::now() + interval;
        waiting.error.clone_from(&message);
        let now_ms = wall_ms();
        let event =
            Event::new(EventReason::EngineError, Severity::Warning, message).job(&self.name);
        let mut report = CycleReport::new(&self.name, now_ms);
        report.engine_failed = true;
        if waiting.reported.record(now_ms, event.clone(), None) {
            report.events.push(event);
        }
        report.entry = Some(self.live.run().clone());
        (self.env.sink)(&report);
        Some(Next::At(waiting.next))
    }
}

impl OpenEntry<'_> {
    /// An entry of a shared cluster that does not run: the cluster's other jobs stop waiting
    /// for it.
    fn leave_cluster(&self, job: &JobPlan) {
        if let EngineSpec::Sim {
            cluster: Some(cluster),
            ..
        } = &job.spec.engine
        {
            self.env.shares.simulated(cluster).leave(&job.spec.name);
        }
    }
}

impl<'env> Task<'env> for OpenEntry<'env> {
    fn step(&mut self, spawned: &mut Vec<BoxedTask<'env>>) -> Next {
        if let Some(next) = self.wait() {
            return next;
        }
        let (job, interval_ms) = self.live.current();
        let job = job.as_ref();
        let start = Start {
            env: self.env,
            live: &self.live,
            outcome: &self.outcome,
            job,
            interval_ms,
        };
        match open_engines_limited(&job.spec.name, &job.spec.engine, self.env.limits) {
            Ok(OpenedEngines::Simulated {
                simulation,
                duration,
                cluster,
            }) => {
                let duration = self
                    .env
                    .options
                    .simulated_duration
                    .or(duration)
                    .unwrap_or(DEFAULT_SIMULATED_DURATION);
                let mut simulation = *simulation;
                let timelines = self.env.options.timelines;
                simulation.record_timeline(timelines);
                // The last step is at the end of `duration` and simulates up to it: one tick
                // more than the duration holds, at most.
                let tick_ms = u64::try_from(simulation.spec().tick_ms.max(1)).unwrap_or(1);
                let duration_ticks =
                    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX) / tick_ms;
                simulation.summarise_at_most(duration_ticks.saturating_add(2));
                let share = cluster.map(|cluster| self.env.shares.simulated(&cluster));
                if let Some(pool) = share.as_ref().and_then(|share| share.pool()) {
                    simulation.join_pool(Arc::clone(pool), &job.spec.name);
                }
                let runner = start.runner(&job.spec.name, simulation);
                let kind = Kind::Simulated { duration };
                self.outcome.expect(1);
                let mut task = start.task(0, runner, kind, summarise_simulation);
                task.share = share;
                spawned.push(Box::new(task));
            }
            Ok(OpenedEngines::Jobs(engines)) => {
                spawned.extend(engine_tasks(&start, self.fresh, engines, None));
            }
            Ok(OpenedEngines::Flink { engines, cluster }) => {
                spawned.extend(engine_tasks(&start, self.fresh, engines, Some(&cluster)));
            }
            Err(err) => {
                if let Some(next) = self.retry_later(job, interval_ms, &err) {
                    return next;
                }
                self.leave_cluster(job);
                self.outcome.deliver(
                    0,
                    JobRun::failed(
                        job.spec.name.clone(),
                        job.alignment.mode_id(),
                        err.to_string(),
                    ),
                );
                return Next::Done;
            }
        }
        self.outcome.ended();
        Next::Done
    }

    fn lane(&self) -> Lane {
        self.lane
    }

    fn label(&self) -> &str {
        &self.name
    }

    fn panicked(&mut self) {
        let (job, _) = self.live.current();
        self.leave_cluster(&job);
        self.outcome.deliver(
            0,
            JobRun::failed(self.name.clone(), job.alignment.mode_id(), PANICKED),
        );
    }
}

/// A task for each engine of an entry (the `fresh` ones do not resume from the store); the
/// jobs of a Flink `cluster` share its slots.
pub(super) fn engine_tasks<'env>(
    start: &Start<'_, 'env>,
    fresh: bool,
    engines: Vec<NamedEngine>,
    cluster: Option<&FlinkCluster>,
) -> Vec<BoxedTask<'env>> {
    // A job the engine no longer knows stops its loop, unless the entry names it by `job-id`:
    // the fleet asks for that job, so its loop waits for a job with that id to come back.
    let await_return = matches!(
        start.job.spec.engine,
        EngineSpec::Flink {
            job_id: Some(_),
            ..
        }
    );
    start.outcome.expect(engines.len());
    engines
        .into_iter()
        .enumerate()
        .map(|(index, (label, engine))| {
            let runner = start.runner(&label, engine);
            let kind = Kind::Engine {
                fresh,
                await_return,
            };
            let mut task = start.task(index, runner, kind, |_, _| None);
            task.share = cluster
                .and_then(|c| Some((c, c.ids.get(index)?)))
                .map(|(c, id)| {
                    let share = start.env.shares.flink(&c.key, &c.client, &label, id);
                    share.expect(&label);
                    share
                });
            let task: BoxedTask<'env> = Box::new(task);
            task
        })
        .collect()
}

/// What starting an entry's job tasks needs.
pub(super) struct Start<'a, 'env> {
    pub(super) env: Env<'env>,
    pub(super) live: &'a Arc<LiveEntry>,
    pub(super) outcome: &'a Arc<EntryOutcome>,
    pub(super) job: &'a JobPlan,
    pub(super) interval_ms: i64,
}

impl<'env> Start<'_, 'env> {
    fn runner<E: Engine>(&self, name: &str, engine: E) -> JobRunner<E> {
        JobRunner::new(
            name,
            engine,
            self.job.alignment.clone(),
            &self.job.settings,
            self.interval_ms,
        )
        .with_custom(self.job.custom.clone())
    }

    fn task<E: Engine>(
        &self,
        index: usize,
        runner: JobRunner<E>,
        kind: Kind,
        summarise: Summarise<E>,
    ) -> JobTask<'env, E> {
        JobTask {
            env: self.env,
            follower: self.live.follow(),
            outcome: Arc::clone(self.outcome),
            index,
            name: runner.name().to_string(),
            runner,
            kind,
            summarise,
            clock: ClockState::Unstarted,
            time: TaskTime::new(),
            first_events: Vec::new(),
            steps: 0,
            failed: 0,
            lateness: Lateness::default(),
            late: None,
            lease: None,
            share: None,
            prepared_at: None,
            wall_prepared: None,
        }
    }
}

/// A simulation's summary, and its timeline when `timelines` asks for it (a chart), read once
/// its run is over.
fn summarise_simulation(
    simulation: &Simulation,
    timelines: bool,
) -> Option<(Option<Timeline>, Summary)> {
    let timeline = timelines.then(|| simulation.timeline());
    Some((timeline, simulation.summary()))
}

/// Reads a finished job's simulation results (the timeline only when asked for one): what a
/// [`JobRun`] carries of a simulated job; engines that are not simulations have none.
type Summarise<E> = fn(&E, bool) -> Option<(Option<Timeline>, Summary)>;

/// What kind of job a task runs.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A simulated job, for this much simulated time (or until it finishes).
    Simulated { duration: Duration },
    /// A job of an engine (Flink, a recording), resumed from the store unless `fresh`;
    /// with `await_return`, a job the engine lost is awaited rather than ended.
    Engine { fresh: bool, await_return: bool },
}

/// Where a job's clock stands.
#[derive(Debug, Clone, Copy)]
enum ClockState {
    /// Before the first step.
    Unstarted,
    /// A virtual clock from `start_ms` to `end`, at `now`; `reached` is the last instant
    /// stepped.
    Virtual {
        started: Instant,
        start_ms: i64,
        end: i64,
        now: i64,
        reached: i64,
    },
    /// The wall clock; `next` is when the next step is due, on the wall clock and on the
    /// monotonic one.
    Wall {
        started: Instant,
        gone: bool,
        next: Option<NextWallStep>,
    },
}

/// When a wall-clock job's next step is due.
#[derive(Debug, Clone, Copy)]
struct NextWallStep {
    /// An interval after the previous step started, on the wall clock: the step starts once
    /// the wall clock reached it, so that the runner finds its next cycle due.
    wall_ms: i64,
    /// The same on the monotonic clock: what the step's lateness is measured from.
    at: Instant,
    /// The step runs by then anyway (twice the interval): a wall clock set back must not
    /// stall the job.
    latest: Instant,
}

/// One job's control loop as a task.
pub(super) struct JobTask<'env, E: Engine> {
    env: Env<'env>,
    follower: Follower,
    outcome: Arc<EntryOutcome>,
    /// The job's place among its entry's jobs.
    index: usize,
    name: String,
    runner: JobRunner<E>,
    kind: Kind,
    summarise: Summarise<E>,
    clock: ClockState,
    /// On a virtual clock, the instant of the cycle the job is in: a report that the cycle is
    /// stuck is stamped with it, in the job's own time like its other events.
    time: Arc<TaskTime>,
    /// Events for the next step (what restoring the state found, a reload's notes).
    first_events: Vec<Event>,
    steps: usize,
    failed: usize,
    lateness: Lateness,
    /// The lateness of the last cycle, until a report carries it to the server's histogram.
    late: Option<Duration>,
    /// With state shared by several hosts: the job's lease, taken when its wall clock starts.
    lease: Option<JobLease>,
    /// The shared cluster the job runs on: it steps in the cluster's rounds.
    share: Option<Arc<SharedCluster>>,
    /// The instant of the step prepared and waiting for its turn in the cluster's round.
    prepared_at: Option<i64>,
    /// On the wall clock: the step prepared and waiting for its turn in the cluster's round.
    wall_prepared: Option<WallPrepared>,
}

/// A wall-clock step waiting for its turn in its cluster's round.
#[derive(Debug, Clone, Copy)]
struct WallPrepared {
    now_ms: i64,
    step_started: Instant,
}

/// How often a step waiting for its turn in a wall-clock round looks again.
const TURN_POLL: Duration = Duration::from_millis(50);

impl<'env, E: Engine> Task<'env> for JobTask<'env, E> {
    fn step(&mut self, _: &mut Vec<BoxedTask<'env>>) -> Next {
        if let ClockState::Unstarted = self.clock
            && let Some(done) = self.begin()
        {
            return done;
        }
        match self.clock {
            ClockState::Virtual { .. } => self.step_virtual(),
            _ => self.step_wall(),
        }
    }

    fn lane(&self) -> Lane {
        match self.clock {
            ClockState::Virtual { .. } => Lane::Compute,
            ClockState::Wall { .. } => Lane::Network,
            ClockState::Unstarted => match self.runner.engine().clock() {
                Clock::Virtual { .. } => Lane::Compute,
                Clock::Wall => Lane::Network,
            },
        }
    }

    fn label(&self) -> &str {
        &self.name
    }

    /// Only a virtual clock sets it: a job on the wall clock lives in the watchdog's own
    /// time.
    fn time(&self) -> Option<&Arc<TaskTime>> {
        Some(&self.time)
    }

    fn panicked(&mut self) {
        if let Some(share) = self.share.take() {
            share.leave(&self.name);
        }
        let run = JobRun::failed(
            self.name.clone(),
            self.runner.alignment().mode_id(),
            PANICKED,
        );
        self.outcome.deliver(self.index, run);
    }
}

impl<E: Engine> JobTask<'_, E> {
    /// True once the fleet was stopped or the entry left it.
    fn stopped(&self) -> bool {
        self.env.options.stop.load(Ordering::Relaxed) || self.follower.entry().is_removed()
    }

    /// Restores an engine job's state and starts its clock; `Some(Done)` when its state is
    /// ambiguous: the job does not run, the others do.
    fn begin(&mut self) -> Option<Next> {
        let simulated = match self.kind {
            Kind::Engine { fresh, .. } => {
                let restored = match self.env.options.store.lock() {
                    Ok(_) if fresh => Ok(Vec::new()),
                    // A job back in the fleet reads what it persisted before it left.
                    Ok(mut store) => {
                        store.readmit(self.runner.name());
                        self.runner.restore(store.as_mut())
                    }
                    Err(_) => Ok(Vec::new()),
                };
                match restored {
                    Ok(events) => self.first_events = events,
                    Err(err) => {
                        let mode = self.runner.alignment().mode_id();
                        let run = JobRun::failed(self.name.clone(), mode, err.to_string());
                        self.outcome.deliver(self.index, run);
                        return Some(Next::Done);
                    }
                }
                None
            }
            Kind::Simulated { duration } => Some(duration),
        };
        let started = Instant::now();
        self.clock = match self.runner.engine().clock() {
            Clock::Virtual { start_ms, end_ms } => ClockState::Virtual {
                started,
                start_ms,
                end: virtual_end(start_ms, end_ms, simulated),
                now: start_ms,
                reached: start_ms,
            },
            Clock::Wall => {
                self.lease = JobLease::of(self.env.options.store, self.runner.name());
                // One step, no time for the renewal thread to claim the job first.
                let failed_claim = self
                    .lease
                    .as_ref()
                    .filter(|_| self.env.options.once)
                    .and_then(JobLease::claim_now);
                if let Some(event) = failed_claim {
                    let mut report = CycleReport::new(self.runner.name(), wall_ms());
                    report.events.push(event);
                    self.publish(report);
                }
                ClockState::Wall {
                    started,
                    gone: false,
                    next: None,
                }
            }
        };
        None
    }

    /// Steps a virtual clock: with a pace, the step that is due (if it is); without, steps
    /// back to back for a [`SLICE`]. Ends when the time is up, the job finishes, the fleet is
    /// stopped, or the engine lost the job (a virtual clock has nothing to wait for).
    fn step_virtual(&mut self) -> Next {
        let ClockState::Virtual {
            started,
            start_ms,
            end,
            mut now,
            mut reached,
        } = self.clock
        else {
            return Next::Done;
        };
        let options = self.env.options;
        let slice_end = Instant::now() + SLICE;
        let next = loop {
            if !(now <= end && !self.runner.is_finished() && !self.stopped()) {
                break None;
            }
            if let Some(pace) = options.pace {
                let elapsed = Duration::from_millis(u64::try_from(now - start_ms).unwrap_or(0));
                match pace::deadline(pace, started, elapsed) {
                    // Never: only the stop (which wakes every task) ends the wait.
                    None => break Some(Next::At(Instant::now() + STOP_POLL)),
                    Some(due) => {
                        let now = Instant::now();
                        if due > now {
                            break Some(Next::At(due));
                        }
                        self.record_lateness(now - due);
                    }
                }
            } else if Instant::now() >= slice_end {
                break Some(Next::At(Instant::now()));
            }
            self.time.set(now);
            let stepped = match self.share.clone() {
                None => {
                    let events = self.take_events();
                    self.runner.step(now, events)
                }
                Some(share) => match self.step_shared(&share, now) {
                    // Its turn has not come: another job is behind, or the round is not
                    // arbitrated yet.
                    None => break Some(Next::At(Instant::now())),
                    Some(report) => report,
                },
            };
            if let Some(mut report) = stepped {
                report.virtual_clock = true;
                let gone = report.job_gone;
                self.account(report);
                if gone {
                    return self.finish(None, true);
                }
            }
            reached = now;
            if options.once {
                return self.finish(None, false);
            }
            now += self.runner.step_ms();
        };
        self.clock = ClockState::Virtual {
            started,
            start_ms,
            end,
            now,
            reached,
        };
        if let Some(next) = next {
            return next;
        }
        // A job that left the fleet by a reload was not interrupted: it ended as asked.
        let cut_short =
            now <= end && !self.runner.is_finished() && options.stop.load(Ordering::Relaxed);
        let interrupted = cut_short.then_some(Interrupted {
            at_ms: reached,
            end_ms: end,
        });
        self.finish(interrupted, false)
    }

    /// One step of a job of a shared cluster at `now`, in the cluster's round: once no other
    /// job is behind, the step is prepared and its rescale submitted; once the round is
    /// arbitrated (and, for a scale-up, the round's scale-downs are realized), the step is
    /// completed within its grant. `None` while its turn has not come; the step's report
    /// (`None`: nothing was due) once it ran.
    fn step_shared(&mut self, share: &SharedCluster, now: i64) -> Option<Option<CycleReport>> {
        if self.prepared_at != Some(now) {
            if !share.may_step(&self.name, now) {
                return None;
            }
            let events = self.take_events();
            let request = self.runner.prepare(now, events);
            share.submit(&self.name, now, request.flatten());
            self.prepared_at = Some(now);
        }
        let grant = match share.turn(&self.name) {
            Turn::Wait => return None,
            Turn::Go(grant) => grant,
        };
        let report = self
            .runner
            .complete(grant.as_ref().map(|grant| (share.name(), grant)));
        self.prepared_at = None;
        share.done(&self.name, now + self.runner.step_ms());
        Some(report)
    }

    /// Steps on the wall clock once the interval since the previous step's start is over,
    /// persisting the job's state after the step; ends when the run's duration is over, the
    /// job finishes, the fleet is stopped, or the engine lost the job (unless the entry names
    /// it: then it is asked for at every step until it is back).
    ///
    /// The interval runs from step start to step start: time the step itself took (a metric
    /// priming wait, a slow REST answer) is not added to it.
    fn step_wall(&mut self) -> Next {
        if self.wall_prepared.is_some()
            && let Some(share) = self.share.clone()
        {
            return self.wall_turn(&share);
        }
        let ClockState::Wall {
            started: _,
            gone,
            next,
        } = self.clock
        else {
            return Next::Done;
        };
        if let Some(due) = next {
            if self.stopped() {
                return self.finish(None, gone);
            }
            let left_ms = due.wall_ms.saturating_sub(wall_ms());
            let now = Instant::now();
            if left_ms > 0 && now < due.latest {
                let left = Duration::from_millis(u64::try_from(left_ms).unwrap_or(0));
                return Next::At(now + left.min(due.latest - now));
            }
            self.record_lateness(now.saturating_duration_since(due.at));
        }
        let options = self.env.options;
        let events = self.take_events();
        let now_ms = wall_ms();
        let step_started = Instant::now();
        let mut gone = gone;
        let mut lease_events = Vec::new();
        let store = options.store;
        let acting = self
            .lease
            .as_mut()
            .is_none_or(|lease| lease.before_step(&mut self.runner, store, &mut lease_events));
        if acting {
            let mut events = events;
            events.extend(lease_events);
            let report = match self.share.clone() {
                None => self.runner.step(now_ms, events),
                Some(share) => match self.runner.prepare(now_ms, events) {
                    // Its rescale waits for the cluster's round.
                    Some(request) => {
                        let step = Duration::from_millis(
                            u64::try_from(self.runner.step_ms()).unwrap_or(1000),
                        );
                        share.submit_wall(
                            &self.name,
                            request,
                            Instant::now() + GATHER.min(step / 2),
                        );
                        self.wall_prepared = Some(WallPrepared {
                            now_ms,
                            step_started,
                        });
                        return self.wall_turn(&share);
                    }
                    None => None,
                },
            };
            gone = self.stepped_wall(report, now_ms, gone);
        } else {
            // Not this host's job now: only what the lease did is reported, and the events
            // waiting for a step wait for the next one this host acts in. The cluster's rounds
            // here do not wait for it.
            if let Some(share) = &self.share {
                share.stand_aside(&self.name);
            }
            self.first_events = events;
            if !lease_events.is_empty() {
                let mut report = CycleReport::new(self.runner.name(), now_ms);
                report.events = lease_events;
                self.publish(report);
            }
        }
        self.after_wall_step(now_ms, step_started, gone)
    }

    /// A wall-clock step of a shared cluster's job waiting for its turn in the cluster's
    /// round: polls the turn, and once it came completes the step within its grant.
    fn wall_turn(&mut self, share: &SharedCluster) -> Next {
        let Some(WallPrepared {
            now_ms,
            step_started,
        }) = self.wall_prepared
        else {
            return Next::At(Instant::now());
        };
        let grant = match share.turn_wall(&self.name, Instant::now()) {
            Turn::Wait => return Next::At(Instant::now() + TURN_POLL),
            Turn::Go(grant) => grant,
        };
        self.wall_prepared = None;
        let report = self
            .runner
            .complete(grant.as_ref().map(|grant| (share.name(), grant)));
        share.done_wall(&self.name);
        let gone = matches!(self.clock, ClockState::Wall { gone: true, .. });
        let gone = self.stepped_wall(report, now_ms, gone);
        self.after_wall_step(now_ms, step_started, gone)
    }

    /// After a wall-clock step at `now_ms` this host acted in: reports it, persists the
    /// job's state and tells the lease. Whether the engine lost the job (`gone` before).
    fn stepped_wall(&mut self, report: Option<CycleReport>, now_ms: i64, gone: bool) -> bool {
        let mut gone = gone;
        if let Some(report) = report {
            gone = report.job_gone;
            self.account(report);
        }
        self.persist(now_ms);
        if let Some(lease) = &self.lease {
            lease.after_step(&self.runner, now_ms);
        }
        gone
    }

    /// After a wall-clock step that started at `step_started` (`now_ms`): ends the job when
    /// its run is over, else sets the next step an interval after this one started.
    fn after_wall_step(&mut self, now_ms: i64, step_started: Instant, gone: bool) -> Next {
        let ClockState::Wall { started, .. } = self.clock else {
            return Next::Done;
        };
        let options = self.env.options;
        let await_return = matches!(
            self.kind,
            Kind::Engine {
                await_return: true,
                ..
            }
        );
        if options.once
            || self.runner.is_finished()
            || (gone && !await_return)
            || options
                .wall_duration
                .is_some_and(|d| started.elapsed() >= d)
        {
            return self.finish(None, gone);
        }
        let step_ms = self.runner.step_ms();
        let step = Duration::from_millis(u64::try_from(step_ms).unwrap_or(1000));
        self.clock = ClockState::Wall {
            started,
            gone,
            next: Some(NextWallStep {
                wall_ms: now_ms.saturating_add(step_ms),
                at: step_started + step,
                latest: step_started + step * 2,
            }),
        };
        Next::At(step_started + step)
    }

    /// The events for the next step: those waiting, and the notes of the entry's new plan if
    /// a reload changed it since the last step (which the runner takes now).
    fn take_events(&mut self) -> Vec<Event> {
        let mut events = std::mem::take(&mut self.first_events);
        if let Some((plan, interval_ms)) = self.follower.changed() {
            self.runner
                .reconfigure(plan.alignment.clone(), &plan.settings, interval_ms);
            self.runner.set_custom(plan.custom.clone());
            events.extend(
                plan.notes
                    .iter()
                    .map(|note| note.clone().job(self.runner.name())),
            );
        }
        events
    }

    /// Counts how late a cycle started, in the run's histogram and, with the next report, in
    /// the server's.
    fn record_lateness(&mut self, late: Duration) {
        self.lateness.record(late);
        self.late = Some(late);
    }

    /// Passes a report on, marked with the run of the entry it comes from, with the lateness
    /// of the cycle it belongs to.
    fn publish(&mut self, mut report: CycleReport) {
        report.entry = Some(self.follower.entry().run().clone());
        report.lateness = self.late.take();
        (self.env.sink)(&report);
    }

    /// Counts a step (and whether it failed) and passes its report on.
    fn account(&mut self, report: CycleReport) {
        self.steps += 1;
        let bad = matches!(report.stage, Some(CycleStage::Failed(_)))
            || report.engine_failed
            || report
                .events
                .iter()
                .any(|e| e.reason == EventReason::EngineError);
        if bad {
            self.failed += 1;
        }
        self.publish(report);
    }

    /// Writes the runner's state into the store and flushes it. A failure does not stop the
    /// job: it is reported as an event, in a step of its own.
    fn persist(&mut self, now_ms: i64) {
        let persisted = {
            let Ok(mut store) = self.env.options.store.lock() else {
                return;
            };
            self.runner
                .persist(store.as_mut())
                .and_then(|()| store.flush().map_err(PersistError::from))
        };
        if let Err(err) = persisted {
            let event = Event::new(
                EventReason::AutoscalerError,
                Severity::Warning,
                format!("cannot persist the job's state: {err}"),
            )
            .job(self.runner.name());
            let mut report = CycleReport::new(self.runner.name(), now_ms);
            report.events.push(event);
            self.account(report);
        }
    }

    /// Delivers the job's run into its entry's outcome. A job a reload stopped lets the store
    /// forget what it holds of the job in memory (its last step persisted what it had).
    fn finish(&mut self, interrupted: Option<Interrupted>, gone: bool) -> Next {
        if self.follower.entry().is_removed()
            && let Ok(mut store) = self.env.options.store.lock()
        {
            store.release(self.runner.name());
        }
        let simulation = match self.kind {
            Kind::Simulated { .. } => {
                (self.summarise)(self.runner.engine(), self.env.options.timelines)
            }
            Kind::Engine { .. } => None,
        };
        let slots = self.share.take().and_then(|share| {
            share.leave(&self.name);
            share.pool().map(|pool| {
                let usage = pool.usage();
                SlotsUse {
                    cluster: share.name().to_string(),
                    slots: usage.slots,
                    max_in_use: usage.max_in_use,
                }
            })
        });
        let run = JobRun {
            name: self.name.clone(),
            mode: self.runner.alignment().mode_id(),
            steps: self.steps,
            failed_steps: self.failed,
            error: None,
            simulation,
            interrupted,
            gone,
            lateness: std::mem::take(&mut self.lateness),
            slots,
        };
        self.outcome.deliver(self.index, run);
        Next::Done
    }
}

/// The last instant of a virtual clock that starts at `start_ms`: the engine's end or the end of
/// the `simulated` time, whichever comes first; [`MAX_SIMULATED_DURATION`] when neither exists.
fn virtual_end(start_ms: i64, end_ms: Option<i64>, simulated: Option<Duration>) -> i64 {
    let limit = simulated.map(|d| start_ms + duration_ms(d));
    match (end_ms, limit) {
        (Some(end), Some(limit)) => end.min(limit),
        (Some(end), None) => end,
        (None, Some(limit)) => limit,
        (None, None) => start_ms + duration_ms(MAX_SIMULATED_DURATION),
    }
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4)
}

#[cfg(test)]
mod tests;
