//! A bounded pool of workers that runs tasks by their next due time.
//!
//! A fleet of thousands of jobs does not need a thread per job: each job's cycle is due every
//! interval and takes a few microseconds of computation. The scheduler keeps the jobs in a queue
//! ordered by due time; a worker takes the earliest task once it is due, runs one step of it and
//! puts it back at the time the step asks for. A task is out of the queue while a worker runs
//! it, so one job's steps never run concurrently.
//!
//! Two lanes keep waiting off the workers:
//! - the compute lane: `workers` threads for steps that only compute (simulated and replayed
//!   jobs, whose engines are in memory);
//! - the network lane: a bounded pool of request threads, started as they are needed, for
//!   steps that wait on an engine over the network. A step waiting for a slow cluster holds one
//!   of these, never a compute worker; how many requests reach one cluster at once is bounded
//!   by the engine's own per-cluster limit.
//!
//! A watchdog looks at every compute worker: one that has been inside a single call into an
//! in-process plugin for longer than the call deadline is reported stuck (once per call, at the
//! instant the task's own clock stands at: see [`TaskTime`]) and replaced by a substitute
//! worker, so the other jobs go on; nothing can interrupt the call itself. The worker leaves the pool when the call returns. Substitutes are bounded: a fleet
//! whose plugin hangs in every job does not grow threads without end.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::Scope;
use std::time::{Duration, Instant};

use crate::allocator::ReleaseWatch;

use crate::plugins::CallClock;

/// The longest a worker waits without looking at the stop flag: Ctrl-C reaches every waiting
/// task within this.
const STOP_POLL: Duration = Duration::from_millis(100);

/// How often the watchdog looks at the workers.
const WATCH_EVERY: Duration = Duration::from_millis(50);

/// Where a task's next step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lane {
    /// The step computes: a compute worker runs it.
    Compute,
    /// The step waits on the network: a request thread runs it.
    Network,
}

/// What a step asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    /// Run the next step at this instant (now or earlier: as soon as a worker is free).
    At(Instant),
    /// The task is over; it has delivered its result itself.
    Done,
}

/// A task as the scheduler holds it.
pub(super) type BoxedTask<'env> = Box<dyn Task<'env> + 'env>;

/// A unit of work the scheduler steps: one job's loop, turned inside out.
pub(super) trait Task<'env>: Send {
    /// Runs one step. Tasks it starts (pushed on `spawned`) are due at once.
    fn step(&mut self, spawned: &mut Vec<BoxedTask<'env>>) -> Next;

    /// Where the next step runs.
    fn lane(&self) -> Lane;

    /// Names the task in a stuck report.
    fn label(&self) -> &str;

    /// Where the task publishes the instant of the step it is in, when it runs on a clock of
    /// its own; `None`: the wall clock.
    fn time(&self) -> Option<&Arc<TaskTime>> {
        None
    }

    /// Delivers the task's result after one of its steps panicked; the task is dropped next.
    fn panicked(&mut self);
}

/// The sizes and deadlines of a pool.
#[derive(Debug, Clone, Copy)]
pub(super) struct PoolConfig {
    /// Compute workers.
    pub(super) workers: usize,
    /// The most request threads the network lane starts.
    pub(super) network_threads: usize,
    /// A compute worker inside one plugin call for longer than this is reported stuck and
    /// replaced; `None`: never.
    pub(super) stuck_after: Option<Duration>,
    /// The most substitutes alive at once.
    pub(super) max_substitutes: usize,
}

/// The instant of the step a task is in, on the task's own clock, readable by the watchdog
/// while a worker runs the task.
///
/// A job on a virtual clock (a simulation, a recording) lives in its own time: its events are
/// stamped with it, so a report that its step is stuck must be too, or its event stream would
/// mix clocks. The task sets the time of each cycle before it runs the cycle.
#[derive(Debug)]
pub(super) struct TaskTime(AtomicI64);

impl TaskTime {
    /// No instant published yet.
    const UNSET: i64 = i64::MIN;

    pub(super) fn new() -> Arc<TaskTime> {
        Arc::new(TaskTime(AtomicI64::new(TaskTime::UNSET)))
    }

    /// The task is now in the step at `at_ms` of its clock.
    pub(super) fn set(&self, at_ms: i64) {
        self.0.store(at_ms, Ordering::Relaxed);
    }

    /// The instant last published, if any.
    pub(super) fn get(&self) -> Option<i64> {
        let at_ms = self.0.load(Ordering::Relaxed);
        (at_ms != TaskTime::UNSET).then_some(at_ms)
    }
}

/// A worker stuck in a plugin call, as the watchdog reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stuck<'a> {
    /// The label of the task it runs.
    pub(super) label: &'a str,
    /// The instant of the stuck step on the task's own clock; `None` for a task on the wall
    /// clock.
    pub(super) at_ms: Option<i64>,
    /// How long the call has run.
    pub(super) running: Duration,
}

/// Told about a worker stuck in a plugin call.
pub(super) type StuckHook<'env> = &'env (dyn Fn(&Stuck<'_>) + Sync);

/// A queued task and when it is due; ordered earliest first (then first queued first).
struct Queued<'env> {
    due: Instant,
    seq: u64,
    task: BoxedTask<'env>,
}

impl PartialEq for Queued<'_> {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}

impl Eq for Queued<'_> {}

impl PartialOrd for Queued<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl Ord for Queued<'_> {
    /// Reversed, so that the max-heap pops the earliest.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.due, other.seq).cmp(&(self.due, self.seq))
    }
}

/// One lane's queue and the threads that serve it.
#[derive(Default)]
struct LaneQueue<'env> {
    heap: BinaryHeap<Queued<'env>>,
    /// Threads serving the lane now.
    threads: usize,
    /// Of those, waiting for a task.
    idle: usize,
}

/// Everything behind the scheduler's lock.
struct State<'env> {
    compute: LaneQueue<'env>,
    network: LaneQueue<'env>,
    seq: u64,
    /// Tasks queued or running.
    alive: usize,
    /// Set by [`Scheduler::shutdown`]: workers end once they find nothing to run.
    closing: bool,
    /// The stop flag was seen and every queued task was made due.
    stop_seen: bool,
}

impl<'env> State<'env> {
    fn lane(&mut self, lane: Lane) -> &mut LaneQueue<'env> {
        match lane {
            Lane::Compute => &mut self.compute,
            Lane::Network => &mut self.network,
        }
    }

    fn push(&mut self, due: Instant, task: BoxedTask<'env>) -> Lane {
        // After the stop, a task is due at once: it has only to see the stop and end.
        let due = if self.stop_seen {
            due.min(Instant::now())
        } else {
            due
        };
        let lane = task.lane();
        self.seq += 1;
        let seq = self.seq;
        self.lane(lane).heap.push(Queued { due, seq, task });
        lane
    }

    /// Makes every queued task due now, keeping their order.
    fn all_due(&mut self, now: Instant) {
        for lane in [&mut self.compute, &mut self.network] {
            let tasks = std::mem::take(&mut lane.heap).into_sorted_vec();
            // Sorted ascending by the reversed order: the latest first.
            lane.heap = tasks
                .into_iter()
                .rev()
                .map(|q| Queued { due: now, ..q })
                .collect();
        }
    }
}

/// A compute worker as the watchdog sees it.
struct WorkerSlot {
    /// The plugin call this worker is in, if any.
    clock: Arc<CallClock>,
    /// Replaced by a substitute: the worker leaves the pool once its step returns.
    lost: AtomicBool,
    /// The task it runs: its label and where it publishes its time.
    task: Mutex<(String, Option<Arc<TaskTime>>)>,
}

/// What the workers share.
struct Shared<'env> {
    state: Mutex<State<'env>>,
    compute_ready: Condvar,
    network_ready: Condvar,
    /// Signalled when the last task ends.
    idle: Condvar,
    config: PoolConfig,
    stop: &'env AtomicBool,
    stuck: Option<StuckHook<'env>>,
    slots: Mutex<Vec<Arc<WorkerSlot>>>,
    /// Substitutes started and not yet ended.
    substitutes: AtomicUsize,
    /// Threads the pool runs now (workers, substitutes, request threads, the watchdog).
    threads: AtomicUsize,
    /// The most threads it ever ran at once.
    peak_threads: AtomicUsize,
}

impl<'env> Shared<'env> {
    fn lock(&self) -> MutexGuard<'_, State<'env>> {
        // A panic inside a step is caught outside the lock, so a poisoned lock still holds a
        // consistent queue.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn condvar(&self, lane: Lane) -> &Condvar {
        match lane {
            Lane::Compute => &self.compute_ready,
            Lane::Network => &self.network_ready,
        }
    }

    fn thread_started(&self) {
        let now = self.threads.fetch_add(1, Ordering::AcqRel) + 1;
        self.peak_threads.fetch_max(now, Ordering::AcqRel);
    }

    fn thread_ended(&self) {
        self.threads.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The pool: start it in a thread scope, submit tasks, wait for them, shut it down.
pub(super) struct Scheduler<'scope, 'env> {
    scope: &'scope Scope<'scope, 'env>,
    shared: Arc<Shared<'env>>,
}

impl<'scope, 'env> Scheduler<'scope, 'env> {
    /// Starts the compute workers (and the watchdog, with a deadline) in `scope`. `stop` ends
    /// every task's wait: each is stepped at once so that it can see the stop and end.
    pub(super) fn start(
        scope: &'scope Scope<'scope, 'env>,
        config: PoolConfig,
        stop: &'env AtomicBool,
        stuck: Option<StuckHook<'env>>,
    ) -> Scheduler<'scope, 'env> {
        let config = PoolConfig {
            workers: config.workers.max(1),
            network_threads: config.network_threads.max(1),
            ..config
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                compute: LaneQueue::default(),
                network: LaneQueue::default(),
                seq: 0,
                alive: 0,
                closing: false,
                stop_seen: false,
            }),
            compute_ready: Condvar::new(),
            network_ready: Condvar::new(),
            idle: Condvar::new(),
            config,
            stop,
            stuck,
            slots: Mutex::new(Vec::new()),
            substitutes: AtomicUsize::new(0),
            threads: AtomicUsize::new(0),
            peak_threads: AtomicUsize::new(0),
        });
        shared.lock().compute.threads = config.workers;
        for _ in 0..config.workers {
            spawn_compute(scope, &shared, false);
        }
        if config.stuck_after.is_some() && stuck.is_some() {
            let watched = Arc::clone(&shared);
            shared.thread_started();
            scope.spawn(move || watchdog(scope, &watched));
        }
        Scheduler { scope, shared }
    }

    /// Queues `task`, due now.
    pub(super) fn submit(&self, task: BoxedTask<'env>) {
        let mut state = self.shared.lock();
        state.alive += 1;
        let lane = state.push(Instant::now(), task);
        wake(self.scope, &self.shared, state, &[lane]);
    }

    /// Makes every queued task due now: each looks at its stop conditions (a removed entry)
    /// at once instead of at its next due time.
    pub(super) fn wake_all(&self) {
        let mut state = self.shared.lock();
        state.all_due(Instant::now());
        drop(state);
        self.shared.compute_ready.notify_all();
        self.shared.network_ready.notify_all();
    }

    /// Waits until no task is queued or running.
    pub(super) fn wait_idle(&self) {
        let mut state = self.shared.lock();
        while state.alive > 0 {
            state = self
                .shared
                .idle
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Ends the workers once the queue is empty. The scope joins them.
    pub(super) fn shutdown(&self) {
        self.shared.lock().closing = true;
        self.shared.compute_ready.notify_all();
        self.shared.network_ready.notify_all();
    }

    /// The most threads the pool ran at once (workers, substitutes, request threads and the
    /// watchdog).
    #[cfg(test)]
    pub(super) fn peak_threads(&self) -> usize {
        self.shared.peak_threads.load(Ordering::Acquire)
    }
}

impl Drop for Scheduler<'_, '_> {
    /// The scope joins the workers: they must be told to end, or it would wait forever.
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Wakes a waiting thread of each lane in `lanes`, starting a request thread when a network
/// task is due, none of the request threads waits, and the lane may grow. The request threads
/// stay until the pool shuts down.
fn wake<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>,
    shared: &Arc<Shared<'env>>,
    mut state: MutexGuard<'_, State<'env>>,
    lanes: &[Lane],
) {
    // One more request thread when a network task is due and no request thread waits for it.
    let due_now = state
        .network
        .heap
        .peek()
        .is_some_and(|first| first.due <= Instant::now());
    let grow = usize::from(
        lanes.contains(&Lane::Network)
            && due_now
            && state.network.idle == 0
            && state.network.threads < shared.config.network_threads,
    );
    state.network.threads += grow;
    drop(state);
    for _ in 0..grow {
        let shared = Arc::clone(shared);
        shared.thread_started();
        scope.spawn(move || {
            serve(scope, &shared, Lane::Network, None);
            shared.thread_ended();
        });
    }
    for lane in lanes {
        shared.condvar(*lane).notify_one();
    }
}

/// Starts a compute worker (a substitute when `substitute`).
fn spawn_compute<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>,
    shared: &Arc<Shared<'env>>,
    substitute: bool,
) {
    let slot = Arc::new(WorkerSlot {
        clock: Arc::new(CallClock::default()),
        lost: AtomicBool::new(false),
        task: Mutex::new((String::new(), None)),
    });
    shared
        .slots
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Arc::clone(&slot));
    if substitute {
        shared.substitutes.fetch_add(1, Ordering::AcqRel);
    }
    let shared = Arc::clone(shared);
    shared.thread_started();
    scope.spawn(move || {
        let _installed = slot.clock.install();
        serve(scope, &shared, Lane::Compute, Some(&slot));
        shared
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|s| !Arc::ptr_eq(s, &slot));
        // A lost worker gave its place to a substitute; the bound counts the threads that
        // are out of the pool, so its end makes room for another.
        if slot.lost.load(Ordering::Acquire) {
            shared.substitutes.fetch_sub(1, Ordering::AcqRel);
        }
        shared.thread_ended();
    });
}

/// A thread's loop on `lane`: take the earliest due task, step it, queue it again. A lost
/// compute worker leaves once its step is over.
fn serve<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>,
    shared: &Arc<Shared<'env>>,
    lane: Lane,
    slot: Option<&WorkerSlot>,
) {
    let mut release = ReleaseWatch::new();
    loop {
        let Some(mut task) = next_due(shared, lane) else {
            return;
        };
        // Between two steps: what this thread holds free after a reload removed many jobs
        // (their tasks ended on this thread, or their blocks were allocated here).
        release.check();
        if let Some(slot) = slot {
            *slot.task.lock().unwrap_or_else(PoisonError::into_inner) =
                (task.label().to_string(), task.time().cloned());
        }
        let mut spawned = Vec::new();
        let next = std::panic::catch_unwind(AssertUnwindSafe(|| task.step(&mut spawned)));
        let next = next.unwrap_or_else(|_| {
            task.panicked();
            Next::Done
        });
        let mut state = shared.lock();
        let mut woken = Vec::new();
        for child in spawned {
            state.alive += 1;
            woken.push(state.push(Instant::now(), child));
        }
        match next {
            Next::At(due) => woken.push(state.push(due, task)),
            Next::Done => state.alive -= 1,
        }
        let all_done = state.alive == 0;
        let lost = slot.is_some_and(|s| s.lost.load(Ordering::Acquire));
        if lost {
            state.compute.threads -= 1;
        }
        wake(scope, shared, state, &woken);
        if all_done {
            shared.idle.notify_all();
        }
        if lost {
            return;
        }
    }
}

/// Waits for the earliest task of `lane` to be due and takes it; `None` once the pool closes.
fn next_due<'env>(shared: &Shared<'env>, lane: Lane) -> Option<BoxedTask<'env>> {
    let mut state = shared.lock();
    loop {
        if !state.stop_seen && shared.stop.load(Ordering::Relaxed) {
            state.stop_seen = true;
            state.all_due(Instant::now());
            shared.compute_ready.notify_all();
            shared.network_ready.notify_all();
        }
        let now = Instant::now();
        let closing = state.closing;
        let wait = match state.lane(lane).heap.peek() {
            Some(first) if first.due <= now => {
                let queued = state.lane(lane).heap.pop()?;
                return Some(queued.task);
            }
            Some(first) => (first.due - now).min(STOP_POLL),
            None if closing => return None,
            None => STOP_POLL,
        };
        state.lane(lane).idle += 1;
        let (guard, _) = shared
            .condvar(lane)
            .wait_timeout(state, wait)
            .unwrap_or_else(PoisonError::into_inner);
        state = guard;
        state.lane(lane).idle -= 1;
    }
}

/// Looks at the compute workers every [`WATCH_EVERY`]: one in a plugin call past the deadline
/// is reported and, within the bound, replaced.
fn watchdog<'scope, 'env>(scope: &'scope Scope<'scope, 'env>, shared: &Arc<Shared<'env>>) {
    let (Some(deadline), Some(stuck)) = (shared.config.stuck_after, shared.stuck) else {
        return;
    };
    loop {
        std::thread::sleep(WATCH_EVERY);
        {
            let state = shared.lock();
            if state.closing && state.alive == 0 {
                break;
            }
        }
        let slots: Vec<Arc<WorkerSlot>> = shared
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for slot in slots {
            if slot.lost.load(Ordering::Acquire) {
                continue;
            }
            let Some(running) = slot.clock.running_for() else {
                continue;
            };
            if running < deadline {
                continue;
            }
            let (label, time) = slot
                .task
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            stuck(&Stuck {
                label: &label,
                at_ms: time.and_then(|t| t.get()),
                running,
            });
            let bounded =
                shared.substitutes.load(Ordering::Acquire) < shared.config.max_substitutes;
            slot.clock.reported();
            if bounded {
                slot.lost.store(true, Ordering::Release);
                shared.lock().compute.threads += 1;
                spawn_compute(scope, shared, true);
            }
        }
    }
    shared.thread_ended();
}

#[cfg(test)]
mod tests;
