//! The fleet view: what the server shows, kept up to date by the control loop.
//!
//! The loop hands every step's report to [`FleetView::record`], which takes one short lock to
//! update the job's entry and the job's metrics (atomics it holds handles to). Requests read a
//! copy of an entry under the same lock and render it after releasing it, so a slow client
//! never holds the lock and never slows the loop.
//!
//! The view shows the fleet's entries as the running host has them: an entry is added when the
//! fleet starts or a reload adds it ([`FleetView::add_job`]), and removed, with its jobs and
//! every series of theirs, when a reload removes it ([`FleetView::remove_entries`]). A report
//! is taken only while its entry is in the fleet, and only from the run of the entry that
//! started after the entry was added: a step that was still running when the reload removed
//! its job ends after the removal, and must not bring the job back.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use serde::Serialize;
use utoipa::ToSchema;

use super::metrics::Metrics;
use crate::events::{Event, EventReason};
use crate::runner::{CycleReport, next_entry_run};
use crate::scaling::{CycleStage, JobCustom};
use crate::state::{JobLeases, LeaseOwner};

/// Decisions kept per job (the newest first on the job's page).
pub(crate) const MAX_DECISIONS: usize = 50;
/// Events kept per job.
pub(crate) const MAX_EVENTS: usize = 200;
/// Points of the time series kept per job; older ones are thinned out, not dropped, so the
/// chart always covers the whole run.
pub(crate) const MAX_POINTS: usize = 720;

/// A job as the server lists it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct JobSummary {
    /// The job's name.
    pub(crate) job: String,
    /// Its engine: `sim`, `flink` or `replay`.
    pub(crate) engine: String,
    /// Its alignment mode.
    pub(crate) mode: String,
    /// What its last step did, in a word or two (`starting` before the first).
    pub(crate) status: String,
    /// Steps so far.
    pub(crate) steps: u64,
    /// The engine answered at least once.
    pub(crate) reached: bool,
    /// The last decision: when (engine time, ms) and in words.
    pub(crate) last_decision: Option<DecisionSummary>,
    /// With state shared by several hosts (`[host] state`): whether this host holds the job's
    /// lease, and under which fencing token it last held it. `null` without shared state.
    pub(crate) lease: Option<LeaseView>,
    /// With state shared by several hosts: the host that holds the job's lease now (this one
    /// or another), as this host's last lease round read it from the lease table. `null`
    /// without shared state, or while no host holds it.
    pub(crate) owner: Option<OwnerView>,
}

/// A job's custom metric evaluator and scaling executors (docs/plugin-kinds.md), and the last
/// operation an executor vetoed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub(crate) struct CustomView {
    /// The evaluator, when the job uses one.
    pub(crate) evaluator: Option<EvaluatorView>,
    /// The executors, in the order they run (ascending priority).
    pub(crate) executors: Vec<ExecutorView>,
    /// The last veto of this run, when there was one.
    pub(crate) last_veto: Option<VetoView>,
}

/// A job's evaluator instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub(crate) struct EvaluatorView {
    /// The instance name (`metrics.custom-evaluator.<instance>.*`).
    pub(crate) instance: String,
    /// Its implementation id (`.class`).
    pub(crate) class: String,
}

/// One executor instance of a job's chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub(crate) struct ExecutorView {
    /// The instance name (`scaling.custom-executor.<instance>.*`).
    pub(crate) instance: String,
    /// Its implementation id (`.class`).
    pub(crate) class: String,
    /// Its priority: lower runs first.
    pub(crate) priority: i32,
}

/// An operation a custom executor vetoed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub(crate) struct VetoView {
    /// The instance that vetoed.
    pub(crate) instance: String,
    /// Its implementation id.
    pub(crate) class: String,
    /// Why (the executor's words, or the fault).
    pub(crate) reason: String,
    /// When, engine time in ms.
    pub(crate) at_ms: i64,
}

impl CustomView {
    /// The view of a job's resolved evaluator and executors (no veto yet).
    pub(crate) fn of(custom: &JobCustom) -> CustomView {
        CustomView {
            evaluator: custom
                .evaluator_view()
                .map(|(instance, class)| EvaluatorView {
                    instance: instance.to_string(),
                    class: class.to_string(),
                }),
            executors: custom
                .executors_view()
                .map(|(instance, class, priority)| ExecutorView {
                    instance: instance.to_string(),
                    class: class.to_string(),
                    priority,
                })
                .collect(),
            last_veto: None,
        }
    }
}

/// The holder of a job's lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub(crate) struct OwnerView {
    /// Its `[host] id`.
    pub(crate) host: String,
    /// The fencing token of its lease.
    pub(crate) token: i64,
    /// It is this host.
    pub(crate) this_host: bool,
}

/// What another host acting on the job makes of its status here.
const OWNED_ELSEWHERE: &str = "another host holds the lease";

/// This host's lease of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub(crate) struct LeaseView {
    /// This host holds the lease and acts on the job; otherwise another host does.
    pub(crate) held: bool,
    /// The fencing token of the last lease this host held.
    pub(crate) token: i64,
}

/// A decision in a line.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct DecisionSummary {
    /// Engine time, ms.
    pub(crate) at_ms: i64,
    /// What was decided, e.g. `scaled: map=24` or `within bounds`.
    pub(crate) text: String,
}

/// One vertex's parallelism.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub(crate) struct VertexView {
    /// The vertex id.
    pub(crate) vertex: String,
    /// The vertex name.
    pub(crate) name: String,
    /// The running parallelism.
    pub(crate) current: u32,
    /// The target of the last evaluation, before alignment.
    pub(crate) target: Option<u32>,
    /// The target after alignment.
    pub(crate) aligned: Option<u32>,
}

/// One vertex of a decision, with its reasons.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct VertexDecisionView {
    /// The vertex id.
    pub(crate) vertex: String,
    /// The vertex name.
    pub(crate) name: String,
    /// Running parallelism.
    pub(crate) current: u32,
    /// Target before alignment.
    pub(crate) target: Option<u32>,
    /// Target after alignment.
    pub(crate) aligned: Option<u32>,
    /// The alignment mode that decided.
    pub(crate) mode: Option<String>,
    /// Why, with the numbers.
    pub(crate) reason: String,
    /// The alignment's explanation.
    pub(crate) explanation: Vec<String>,
}

/// A decision cycle that changed or queued something, or was blocked.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct DecisionView {
    /// Engine time, ms.
    pub(crate) at_ms: i64,
    /// In a line.
    pub(crate) text: String,
    /// The parallelism applied to the changed vertices, if an operation was realized.
    pub(crate) operation: Option<BTreeMap<String, u32>>,
    /// The decision was queued by the cooldown.
    pub(crate) queued: bool,
    /// Every vertex of the decision.
    pub(crate) vertices: Vec<VertexDecisionView>,
}

/// An event with its time.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct EventView {
    /// Engine time, ms.
    pub(crate) at_ms: i64,
    /// The reason, e.g. `ScalingReport`.
    pub(crate) reason: String,
    /// `Normal` or `Warning`.
    pub(crate) severity: String,
    /// The vertex it concerns, if any.
    pub(crate) vertex: Option<String>,
    /// What happened.
    pub(crate) message: String,
}

/// The cooldown of a job.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct CooldownView {
    /// In a cooldown period at the last step.
    pub(crate) active: bool,
    /// Its end (engine time, ms).
    pub(crate) until_ms: Option<i64>,
    /// A decision is queued until it ends.
    pub(crate) queued: bool,
}

/// One point of a job's time series.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct Point {
    /// Engine time, ms.
    pub(crate) at_ms: i64,
    /// Records/s the sources were asked to read, once evaluated.
    pub(crate) load: Option<f64>,
    /// The running parallelism of each vertex, in the order of the job's `vertices`.
    pub(crate) parallelism: Vec<u32>,
}

/// Everything the server knows about a job.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct JobDetail {
    /// The job's name.
    pub(crate) job: String,
    /// Its engine: `sim`, `flink` or `replay`.
    pub(crate) engine: String,
    /// Its alignment mode.
    pub(crate) mode: String,
    /// What its last step did.
    pub(crate) status: String,
    /// Steps so far.
    pub(crate) steps: u64,
    /// The engine answered at least once.
    pub(crate) reached: bool,
    /// Engine time of the last step, ms.
    pub(crate) at_ms: Option<i64>,
    /// Its vertices, in topological order.
    pub(crate) vertices: Vec<VertexView>,
    /// The cooldown.
    pub(crate) cooldown: CooldownView,
    /// The last decision with its explanation.
    pub(crate) last_decision: Option<DecisionView>,
    /// Recent decisions, newest first.
    pub(crate) decisions: Vec<DecisionView>,
    /// The time series of parallelism and load, oldest first.
    pub(crate) series: Vec<Point>,
    /// The host that holds the job's lease now, as in [`JobSummary::owner`].
    pub(crate) owner: Option<OwnerView>,
    /// Its custom evaluator and executor chain, and the last veto.
    pub(crate) custom: CustomView,
}

/// A job's entry.
#[derive(Debug, Clone)]
struct JobEntry {
    /// The fleet entry the job belongs to: its own name, but for the jobs a Flink entry without
    /// a job id finds on its cluster.
    entry: String,
    engine: String,
    mode: String,
    status: String,
    steps: u64,
    reached: bool,
    at_ms: Option<i64>,
    vertices: Vec<VertexView>,
    /// The ids and names of `vertices` as the last report shared them with the job's graph:
    /// compared by pointer first, so that a step with the same vertices compares no text.
    shared: Vec<(Arc<str>, Arc<str>)>,
    cooldown_until_ms: Option<i64>,
    queued: bool,
    decisions: VecDeque<DecisionView>,
    events: VecDeque<EventView>,
    series: VecDeque<Point>,
    /// Keep every `stride`-th point once the series is full.
    stride: u64,
    skipped: u64,
    lease: Option<LeaseView>,
    custom: CustomView,
}

impl JobEntry {
    fn new(entry: &str, engine: &str, mode: &str) -> JobEntry {
        JobEntry {
            entry: entry.to_string(),
            engine: engine.to_string(),
            mode: mode.to_string(),
            status: "starting".to_string(),
            steps: 0,
            reached: false,
            at_ms: None,
            vertices: Vec::new(),
            shared: Vec::new(),
            cooldown_until_ms: None,
            queued: false,
            decisions: VecDeque::new(),
            events: VecDeque::new(),
            series: VecDeque::new(),
            stride: 1,
            skipped: 0,
            lease: None,
            custom: CustomView::default(),
        }
    }

    fn summary(&self, job: &str) -> JobSummary {
        JobSummary {
            job: job.to_string(),
            engine: self.engine.clone(),
            mode: self.mode.clone(),
            status: self.status.clone(),
            steps: self.steps,
            reached: self.reached,
            last_decision: self.decisions.front().map(|d| DecisionSummary {
                at_ms: d.at_ms,
                text: d.text.clone(),
            }),
            lease: self.lease,
            owner: None,
        }
    }

    /// True when [`JobEntry::push_point`] keeps the next point: one that is not kept is not
    /// built (its parallelism is a vector of the job's vertices).
    fn keeps_next_point(&self) -> bool {
        self.skipped + 1 >= self.stride
    }

    fn push_point(&mut self, point: Point) {
        self.skipped += 1;
        if self.skipped < self.stride {
            return;
        }
        self.skipped = 0;
        self.series.push_back(point);
        if self.series.len() > MAX_POINTS {
            // Halve the resolution: keep every other point, and from now on every other step.
            let kept: VecDeque<Point> = self.series.drain(..).step_by(2).collect();
            self.series = kept;
            self.stride *= 2;
        }
    }
}

/// The fleet's entries and jobs, behind the view's lock.
#[derive(Debug, Default)]
struct Fleet {
    /// The fleet's entries now, each with the first of its runs whose reports are taken
    /// ([`next_entry_run`] when the entry was added).
    entries: HashMap<String, u64>,
    /// Every job shown, by name.
    jobs: BTreeMap<String, JobEntry>,
}

impl Fleet {
    /// The entry of the job `report` comes from, when the report is to be taken: its entry is
    /// in the fleet and the report comes from a run that started since the entry was added.
    /// A job of the entry not shown yet (a job its Flink cluster runs) is added. A report from
    /// no entry's run (the stuck-job watchdog's) is taken for a job that is shown.
    fn job_of(&mut self, report: &CycleReport) -> Option<&mut JobEntry> {
        let Some(run) = &report.entry else {
            return self.jobs.get_mut(&report.job);
        };
        let first = *self.entries.get(&*run.entry)?;
        if run.run < first {
            return None;
        }
        if !self.jobs.contains_key(&report.job) {
            let (engine, mode) = self
                .jobs
                .get(&*run.entry)
                .map_or(("-", "-"), |e| (e.engine.as_str(), e.mode.as_str()));
            let mut job = JobEntry::new(&run.entry, engine, mode);
            if let Some(e) = self.jobs.get(&*run.entry) {
                job.custom = CustomView {
                    last_veto: None,
                    ..e.custom.clone()
                };
            }
            self.jobs.insert(report.job.clone(), job);
        }
        self.jobs.get_mut(&report.job)
    }
}

/// What the control loop knows about the fleet, for the server.
pub struct FleetView {
    fleet: Mutex<Fleet>,
    metrics: Metrics,
    /// With state shared by several hosts: this host's leases, which know every job's owner.
    leases: OnceLock<Arc<dyn JobLeases>>,
}

impl Default for FleetView {
    fn default() -> Self {
        FleetView::new()
    }
}

/// What a lease event says of this host's lease.
fn lease_of(event: &Event) -> Option<LeaseView> {
    let held = match event.reason {
        EventReason::LeaseAcquired => true,
        EventReason::LeaseLost => false,
        _ => return None,
    };
    let token = event.details.get("token").copied().unwrap_or(0);
    Some(LeaseView { held, token })
}

/// Words for a stage.
fn stage_text(stage: &CycleStage) -> String {
    let mut text = String::new();
    write_stage_text(stage, &mut text);
    text
}

/// Sets `text` to the words for a stage, reusing its buffer: a job's status is rewritten at
/// every step, mostly with the words it already has.
fn write_stage_text(stage: &CycleStage, text: &mut String) {
    use std::fmt::Write as _;
    text.clear();
    // Writing into a String cannot fail.
    let _ = match stage {
        CycleStage::NotRunning => write!(text, "not running"),
        CycleStage::NotReady(why) => write!(text, "not ready: {why}"),
        CycleStage::Failed(why) => write!(text, "failed: {why}"),
        CycleStage::CollectingMetrics { samples } => {
            write!(text, "collecting metrics ({samples})")
        }
        CycleStage::WindowNotFull => write!(text, "window not full"),
        CycleStage::MemoryPressure => write!(text, "memory pressure"),
        CycleStage::WithinBounds => write!(text, "within bounds"),
        CycleStage::Blocked(why) => write!(text, "blocked: {why}"),
        CycleStage::ResourceQuotaReached => write!(text, "blocked: resource quota reached"),
        CycleStage::ScalingSkipped => write!(text, "skipped: not worth the restart"),
        CycleStage::Vetoed(veto) => write!(
            text,
            "vetoed by executor `{}` ({}): {}",
            veto.instance, veto.class, veto.reason
        ),
        CycleStage::Scaled => write!(text, "scaled"),
    };
}

fn event_view(at_ms: i64, event: &Event) -> EventView {
    EventView {
        at_ms,
        reason: event.reason.as_str().to_string(),
        severity: format!("{:?}", event.severity),
        vertex: event.vertex.clone(),
        message: event.message.clone(),
    }
}

/// The decision of a report, when it is one worth keeping: an operation, a queued scale, a
/// scaled or blocked stage.
fn decision_of(report: &CycleReport) -> Option<DecisionView> {
    let stage = report.stage.as_ref()?;
    let keep = report.operation.is_some()
        || report.queued
        || matches!(
            stage,
            CycleStage::Scaled
                | CycleStage::Blocked(_)
                | CycleStage::ResourceQuotaReached
                | CycleStage::ScalingSkipped
                | CycleStage::Vetoed(_)
        );
    if !keep {
        return None;
    }
    let names: BTreeMap<&str, &str> = report
        .vertices
        .iter()
        .map(|v| (&*v.vertex, &*v.name))
        .collect();
    let text = match (&report.operation, report.queued) {
        (Some(op), _) => format!(
            "rescaled: {}",
            op.iter()
                .map(|(v, p)| format!("{}={p}", names.get(v.as_str()).unwrap_or(&v.as_str())))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (None, true) => "scale queued by the cooldown".to_string(),
        (None, false) => stage_text(stage),
    };
    Some(DecisionView {
        at_ms: report.at_ms,
        text,
        operation: report.operation.clone(),
        queued: report.queued,
        vertices: report
            .vertices
            .iter()
            .map(|v| VertexDecisionView {
                vertex: v.vertex.to_string(),
                name: v.name.to_string(),
                current: v.current,
                target: v.target,
                aligned: v.aligned,
                mode: v.mode.as_deref().map(str::to_string),
                reason: v.reason.to_string(),
                explanation: v.explanation.to_vec(),
            })
            .collect(),
    })
}

impl FleetView {
    /// An empty view with its metrics.
    pub fn new() -> FleetView {
        FleetView {
            fleet: Mutex::new(Fleet::default()),
            metrics: Metrics::new(),
            leases: OnceLock::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Fleet> {
        // A panic while holding the lock leaves a consistent map: every update is a whole
        // assignment or push.
        self.fleet.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Shows the owner of every job from `leases` (state shared by several hosts); a later
    /// call changes nothing.
    pub(crate) fn set_leases(&self, leases: Arc<dyn JobLeases>) {
        let _ = self.leases.set(leases);
    }

    /// The owner of every job held now, as views; empty without shared state.
    fn owners(&self) -> BTreeMap<String, OwnerView> {
        let Some(leases) = self.leases.get() else {
            return BTreeMap::new();
        };
        let me = leases.host_id();
        leases
            .owners()
            .into_iter()
            .map(|(job, LeaseOwner { host, token })| {
                let this_host = host == me;
                (
                    job,
                    OwnerView {
                        host,
                        token,
                        this_host,
                    },
                )
            })
            .collect()
    }

    /// Brings the owner metric (`flowscale_lease_owner`) up to date; before a scrape.
    pub(crate) fn refresh_owners(&self) {
        if self.leases.get().is_none() {
            return;
        }
        let owners = self
            .owners()
            .into_iter()
            .map(|(job, owner)| (job, owner.host))
            .collect();
        self.metrics.set_owners(owners);
    }

    /// Adds the fleet entry `job`, or changes its engine and mode, before its first step, so
    /// that it is listed (and not ready) and its counters exist (at 0) from the start. A new
    /// entry takes the reports of the runs started from now on.
    pub fn add_job(&self, job: &str, engine: &str, mode: &str) {
        let mut fleet = self.lock();
        if !fleet.entries.contains_key(job) {
            fleet.entries.insert(job.to_string(), next_entry_run());
        }
        let entry = fleet
            .jobs
            .entry(job.to_string())
            .or_insert_with(|| JobEntry::new(job, engine, mode));
        entry.engine = engine.to_string();
        entry.mode = mode.to_string();
        self.metrics.add_job(job, mode);
    }

    /// Sets the custom evaluator and executors the fleet entry `job` uses now (after
    /// [`FleetView::add_job`]); its last veto is kept.
    pub(crate) fn set_custom(&self, job: &str, custom: CustomView) {
        let mut fleet = self.lock();
        if let Some(entry) = fleet.jobs.get_mut(job) {
            let last_veto = entry.custom.last_veto.take();
            entry.custom = CustomView {
                last_veto,
                ..custom
            };
        }
    }

    /// Forgets a fleet entry that left the fleet (a reload removed it), as
    /// [`FleetView::remove_entries`] does.
    #[cfg(test)]
    pub(crate) fn remove_job(&self, job: &str) {
        self.remove_entries([job]);
    }

    /// Forgets the fleet entries `entries` (a reload removed them): their jobs, with their
    /// decisions, events and time series, and every metric series of those jobs. A report of
    /// theirs that comes later is dropped.
    pub(crate) fn remove_entries<'a>(&self, entries: impl IntoIterator<Item = &'a str>) {
        let mut fleet = self.lock();
        let mut removed = false;
        for entry in entries {
            removed |= fleet.entries.remove(entry).is_some();
        }
        if !removed {
            return;
        }
        let Fleet { entries, jobs } = &mut *fleet;
        let mut gone = Vec::new();
        jobs.retain(|name, job| {
            let keep = entries.contains_key(&job.entry);
            if !keep {
                gone.push(name.clone());
            }
            keep
        });
        // The table of a fleet that shrank from thousands of entries to a few gives its
        // memory back.
        if entries.capacity() > 2 * entries.len() + 64 {
            entries.shrink_to_fit();
        }
        // Under the view's lock, which `record` holds while it updates the metrics: no step
        // of these jobs can bring a series back.
        self.metrics.remove_jobs(gone.iter().map(String::as_str));
    }

    /// Takes in one step's report: the short locked update the control loop pays for. A
    /// report of a job whose entry is no longer in the fleet, or of an earlier run of the
    /// entry, is dropped.
    pub fn record(&self, report: &CycleReport) {
        let mut fleet = self.lock();
        {
            let Some(entry) = fleet.job_of(report) else {
                return;
            };
            entry.steps += 1;
            entry.at_ms = Some(report.at_ms);
            entry.cooldown_until_ms = report.cooldown_until_ms;
            if report.operation.is_some() {
                entry.queued = false;
            } else if report.queued {
                entry.queued = true;
            }
            if let Some(stage) = &report.stage {
                entry.reached = true;
                write_stage_text(stage, &mut entry.status);
                if let CycleStage::Vetoed(veto) = stage {
                    entry.custom.last_veto = Some(VetoView {
                        instance: veto.instance.clone(),
                        class: veto.class.clone(),
                        reason: veto.reason.clone(),
                        at_ms: veto.at_ms,
                    });
                }
            } else if report.engine_failed {
                entry.status = "engine unreachable".into();
            } else if report.job_gone {
                entry.status = "gone".into();
            }
            if !report.vertices.is_empty() {
                update_vertices(&mut entry.vertices, &mut entry.shared, report);
                if entry
                    .series
                    .back()
                    .is_some_and(|p| p.parallelism.len() != entry.vertices.len())
                {
                    entry.series.clear();
                    entry.stride = 1;
                }
                if entry.keeps_next_point() {
                    let point = Point {
                        at_ms: report.at_ms,
                        load: report.load,
                        parallelism: entry.vertices.iter().map(|v| v.current).collect(),
                    };
                    entry.push_point(point);
                } else {
                    entry.skipped += 1;
                }
            }
            if let Some(decision) = decision_of(report) {
                entry.decisions.push_front(decision);
                entry.decisions.truncate(MAX_DECISIONS);
            }
            for event in &report.events {
                entry.events.push_front(event_view(report.at_ms, event));
                if let Some(lease) = lease_of(event) {
                    if !lease.held {
                        entry.status = OWNED_ELSEWHERE.into();
                    }
                    entry.lease = Some(lease);
                }
            }
            entry.events.truncate(MAX_EVENTS);
            // Under the lock, so that removing the job cannot come between the update of its
            // entry and that of its metrics.
            self.metrics.record(report, &entry.mode);
        }
    }

    /// This host's lease of `job` as it is now (not as the job's last step found it): held
    /// while the lease has time left on this host's clock, and the token of the last lease
    /// held. `None` without shared state (the last lease event tells then) and for a job this
    /// host never held.
    fn live_lease(&self, job: &str) -> Option<Option<LeaseView>> {
        let leases = self.leases.get()?;
        let held = leases.held(job);
        Some(
            held.or_else(|| leases.last_token(job))
                .map(|token| LeaseView {
                    held: held.is_some(),
                    token,
                }),
        )
    }

    /// The jobs, by name, with their owners.
    pub(crate) fn jobs(&self) -> Vec<JobSummary> {
        let mut owners = self.owners();
        self.lock()
            .jobs
            .iter()
            .map(|(name, e)| {
                let mut summary = e.summary(name);
                if let Some(live) = self.live_lease(name) {
                    summary.lease = live;
                }
                summary.owner = owners.remove(name);
                if summary.owner.as_ref().is_some_and(|o| !o.this_host) {
                    summary.status = OWNED_ELSEWHERE.into();
                }
                summary
            })
            .collect()
    }

    /// One job.
    pub(crate) fn job(&self, job: &str) -> Option<JobDetail> {
        let owner = self.owners().remove(job);
        let status = |e: &JobEntry| match &owner {
            Some(o) if !o.this_host => OWNED_ELSEWHERE.to_string(),
            _ => e.status.clone(),
        };
        let fleet = self.lock();
        let e = fleet.jobs.get(job)?;
        let now = e.at_ms.unwrap_or(i64::MIN);
        Some(JobDetail {
            job: job.to_string(),
            engine: e.engine.clone(),
            mode: e.mode.clone(),
            status: status(e),
            steps: e.steps,
            reached: e.reached,
            at_ms: e.at_ms,
            vertices: e.vertices.clone(),
            cooldown: CooldownView {
                active: e.cooldown_until_ms.is_some_and(|end| now < end),
                until_ms: e.cooldown_until_ms,
                queued: e.queued,
            },
            last_decision: e.decisions.front().cloned(),
            decisions: e.decisions.iter().cloned().collect(),
            series: e.series.iter().cloned().collect(),
            owner,
            custom: e.custom.clone(),
        })
    }

    /// One job's events, newest first.
    pub(crate) fn events(&self, job: &str) -> Option<Vec<EventView>> {
        self.lock()
            .jobs
            .get(job)
            .map(|e| e.events.iter().cloned().collect())
    }

    /// Every job's engine answered at least once (a job with no entry yet is not ready).
    #[cfg(test)]
    pub(crate) fn all_reached(&self) -> bool {
        self.lock().jobs.values().all(|e| e.reached)
    }
}

/// Sets `vertices` to the report's: in place when the job's vertices are the same as at the
/// previous step (the usual case, and no string is copied), else anew.
fn update_vertices(
    vertices: &mut Vec<VertexView>,
    shared: &mut Vec<(Arc<str>, Arc<str>)>,
    report: &CycleReport,
) {
    let shares = shared.len() == report.vertices.len()
        && shared
            .iter()
            .zip(&report.vertices)
            .all(|((id, name), new)| Arc::ptr_eq(id, &new.vertex) && Arc::ptr_eq(name, &new.name));
    let same = vertices.len() == report.vertices.len()
        && (shares
            || vertices
                .iter()
                .zip(&report.vertices)
                .all(|(old, new)| *old.vertex == *new.vertex && *old.name == *new.name));
    if !shares {
        shared.clear();
        shared.extend(
            report
                .vertices
                .iter()
                .map(|v| (Arc::clone(&v.vertex), Arc::clone(&v.name))),
        );
    }
    if same {
        for (old, new) in vertices.iter_mut().zip(&report.vertices) {
            old.current = new.running_after(report.operation.as_ref());
            old.target = new.target;
            old.aligned = new.aligned;
        }
        return;
    }
    *vertices = report
        .vertices
        .iter()
        .map(|v| VertexView {
            vertex: v.vertex.to_string(),
            name: v.name.to_string(),
            current: v.running_after(report.operation.as_ref()),
            target: v.target,
            aligned: v.aligned,
        })
        .collect();
}
