//! One job under control: observe, decide, align, cool down, realize, rate-limit.
//!
//! Data flows one way per step: engine → pipeline (with the job's alignment) → cooldown
//! executor → engine. A failing engine call becomes an event; the job goes on at its next step.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::alignment::JobAlignment;
use crate::backpressure::{BackpressureSettings, BatchInfo, RateController};
use crate::engine::{
    Engine, EngineError, JobObservation, JobStatus, Unfenced, WriteFence, slots_needed,
};
use crate::events::{Event, EventReason, Severity};
use crate::plan::{COOLDOWN_PERIOD_KEY, JobSettings};
use crate::scaling::{
    Autoscaler, JobCustom, JobScalingState, REPORT_HEADER_ENABLED, ScalingSummary, run_cycle_custom,
};
use crate::state::{
    DEFAULT_EVENT_CAPACITY, EventLog, JobLeases, StateError, StateStore, save, sections,
};

use super::arbiter::{SlotGrant, SlotRequest};
use super::cooldown::{CooldownExecutor, CooldownState, ScalingOperation};
use super::fence::LeaseFence;
use super::report::{CycleReport, format_time};
use super::restore::{RestoreError, restore};

/// Why a job's state could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The decision state could not be turned into JSON.
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    /// The store refused a section or could not be flushed.
    #[error(transparent)]
    Store(#[from] StateError),
}

struct RateControl {
    controller: RateController,
    interval_ms: i64,
    next_ms: Option<i64>,
}

/// A job, its engine and everything that decides for it.
pub struct JobRunner<E: Engine> {
    name: String,
    engine: E,
    alignment: JobAlignment,
    /// The job's custom evaluator and executor chain, resolved with its alignment.
    custom: JobCustom,
    autoscaler: Autoscaler,
    enabled: bool,
    interval_ms: i64,
    next_cycle_ms: Option<i64>,
    cooldown: CooldownExecutor,
    rate: Option<RateControl>,
    /// What `rate` was built from, to tell whether a new configuration changes it.
    rate_settings: Option<BackpressureSettings>,
    scaling: JobScalingState,
    events: EventLog,
    /// With shared state: the lease this host acts under, which every rescale must pass.
    fence: Option<LeaseFence>,
    /// `scaling.priority`: its share of a cluster's slots.
    priority: i64,
    /// The sources' pending records at the last observation, and when: how fast the lag grows.
    last_lag: Option<(i64, f64)>,
    /// Records per second the sources' pending records grew by between the last two
    /// observations.
    lag_growth: f64,
    /// A step whose rescale waits for its cluster's slots (see [`JobRunner::prepare`]).
    pending: Option<PendingStep>,
    /// The parallelism the job ran at when last observed.
    running: BTreeMap<String, u32>,
    /// The slot-sharing group of each vertex the engine reports one for, as last observed.
    groups: BTreeMap<String, String>,
}

/// A step decided and not yet finished: what [`JobRunner::complete`] realizes and reports.
struct PendingStep {
    now_ms: i64,
    /// The job was observed in this step (`running` is its parallelism).
    observed: bool,
    started: std::time::Instant,
    report: CycleReport,
    events: Vec<Event>,
    rescale: Option<PendingRescale>,
}

/// An operation the cooldown executor let through, before it is sent.
struct PendingRescale {
    operation: ScalingOperation,
    running: BTreeMap<String, u32>,
    recorded_now: BTreeMap<Arc<str>, ScalingSummary>,
    /// The executor's state before the operation: restored if no slot is free for it.
    before: CooldownState,
}

impl<E: Engine> Drop for JobRunner<E> {
    /// The job's loop ended (a reload removed it, or it ended by itself): a plugin worker
    /// running its mode need not keep what it was sent of the job.
    fn drop(&mut self) {
        self.alignment.forget_job(&self.name);
        self.custom.forget_job(&self.name);
    }
}

impl<E: Engine> JobRunner<E> {
    /// A runner for `name` on `engine`, cycling every `interval_ms`, with the job's validated
    /// `settings`.
    pub fn new(
        name: &str,
        engine: E,
        alignment: JobAlignment,
        settings: &JobSettings,
        interval_ms: i64,
    ) -> JobRunner<E> {
        let rate = rate_control(name, &settings.backpressure);
        JobRunner {
            name: name.to_string(),
            engine,
            alignment,
            custom: JobCustom::default(),
            autoscaler: Autoscaler::new(settings.autoscaler.clone()),
            enabled: settings.enabled,
            interval_ms: interval_ms.max(1),
            next_cycle_ms: None,
            cooldown: CooldownExecutor::new(name, settings.cooldown),
            rate,
            rate_settings: Some(settings.backpressure.clone()),
            scaling: JobScalingState::default(),
            events: EventLog::new(
                Duration::from_millis(u64::try_from(settings.event_interval_ms).unwrap_or(0)),
                DEFAULT_EVENT_CAPACITY,
            ),
            fence: None,
            priority: settings.priority,
            last_lag: None,
            lag_growth: 0.0,
            pending: None,
            running: BTreeMap::new(),
            groups: BTreeMap::new(),
        }
    }

    /// The job's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The engine.
    pub(crate) fn engine(&self) -> &E {
        &self.engine
    }

    /// The resolved alignment.
    pub(crate) fn alignment(&self) -> &JobAlignment {
        &self.alignment
    }

    /// The runner with the job's custom evaluator and executor chain.
    pub(crate) fn with_custom(mut self, custom: JobCustom) -> JobRunner<E> {
        self.custom = custom;
        self
    }

    /// Takes the custom evaluator and executors of a changed configuration from the next
    /// cycle on; those it no longer uses are told the job's loop ended for them.
    pub(crate) fn set_custom(&mut self, custom: JobCustom) {
        let old = std::mem::replace(&mut self.custom, custom);
        old.forget_unused(&self.custom, &self.name);
    }

    /// The job's persisted decision state (metric window, scaling history, ...).
    #[cfg(test)]
    pub(crate) fn scaling_state(&self) -> &JobScalingState {
        &self.scaling
    }

    /// The cooldown executor's state (queue, period start, last operation).
    #[cfg(test)]
    pub(crate) fn cooldown_state(&self) -> &CooldownState {
        self.cooldown.state()
    }

    /// The job's recent events.
    #[cfg(test)]
    pub(crate) fn events(&self) -> &EventLog {
        &self.events
    }

    /// How often the runner needs a step: the smaller of the cycle and batch intervals.
    pub(crate) fn step_ms(&self) -> i64 {
        self.rate
            .as_ref()
            .map_or(self.interval_ms, |r| r.interval_ms.min(self.interval_ms))
    }

    /// Continues from persisted state (scaling history, metric window, cooldown queue and timer,
    /// events). A section that cannot be read is kept aside in the store and starts empty, the
    /// others resume; the returned events say so, for the job's first step to report (pass them
    /// to [`JobRunner::step`]). A job whose state is in several files cannot start.
    pub fn restore(&mut self, store: &mut dyn StateStore) -> Result<Vec<Event>, RestoreError> {
        let restored = restore(store, &self.name)?;
        self.scaling = restored.scaling;
        if let Some(state) = restored.cooldown {
            self.cooldown = CooldownExecutor::restore(
                self.name.clone(),
                Duration::from_millis(u64::try_from(self.cooldown.period_ms()).unwrap_or(0)),
                state,
            );
        }
        if let Some(state) = restored.events {
            let log = std::mem::replace(&mut self.events, EventLog::new(Duration::ZERO, 1));
            self.events = log.restore(state);
        }
        Ok(restored.report)
    }

    /// Continues a job this host just took the lease of: forgets what it knew of the job (from
    /// an earlier lease, now stale), reads what the previous owner stored, and from now on
    /// sends a rescale only while `token` is the job's current one.
    pub(crate) fn take_over(
        &mut self,
        store: &mut dyn StateStore,
        leases: Arc<dyn JobLeases>,
        token: i64,
    ) -> Result<Vec<Event>, RestoreError> {
        let period = Duration::from_millis(u64::try_from(self.cooldown.period_ms()).unwrap_or(0));
        self.cooldown = CooldownExecutor::new(self.name.clone(), period);
        self.scaling = JobScalingState::default();
        self.fence = Some(LeaseFence::new(leases, &self.name, token));
        // What the engine holds now is the truth, whoever wrote it.
        self.engine.forget_writes();
        self.restore(store)
    }

    /// Stops sending rescales: the lease is gone.
    pub(crate) fn lose_lease(&mut self) {
        self.fence = None;
    }

    /// True while the job must not move to another host: a cooldown period runs or decisions
    /// wait in its queue (a rescale in flight is within the period it started).
    pub(crate) fn is_busy(&self, now_ms: i64) -> bool {
        self.cooldown.in_cooldown(now_ms) || !self.cooldown.state().queue.is_empty()
    }

    /// Takes a changed configuration from the next cycle on, keeping what the job has learned:
    /// the metric window, scaling history, cooldown queue and period, and the event log. The
    /// rate controller starts over only when its own settings changed (its PID state belongs
    /// to the old gains), and the next cycle stays when it was planned.
    pub(crate) fn reconfigure(
        &mut self,
        alignment: JobAlignment,
        settings: &JobSettings,
        interval_ms: i64,
    ) {
        let old = std::mem::replace(&mut self.alignment, alignment);
        if !old.same_implementation(&self.alignment) {
            old.forget_job(&self.name);
        }
        self.autoscaler = Autoscaler::new(settings.autoscaler.clone());
        self.enabled = settings.enabled;
        self.priority = settings.priority;
        self.interval_ms = interval_ms.max(1);
        self.cooldown = CooldownExecutor::restore(
            self.name.clone(),
            settings.cooldown,
            self.cooldown.state().clone(),
        );
        if self.rate_settings.as_ref() != Some(&settings.backpressure) {
            self.rate = rate_control(&self.name, &settings.backpressure);
            self.rate_settings = Some(settings.backpressure.clone());
        }
        self.events.set_interval_ms(settings.event_interval_ms);
    }

    /// Writes the job's state into `store` (the caller flushes).
    pub fn persist(&self, store: &mut dyn StateStore) -> Result<(), PersistError> {
        for (section, value) in self.scaling.to_sections()? {
            store.put(&self.name, section, value);
        }
        save(store, &self.name, sections::COOLDOWN, self.cooldown.state())?;
        save(store, &self.name, sections::EVENTS, &self.events.state())?;
        Ok(())
    }

    /// True when nothing remains to do: the engine's job has finished.
    pub(crate) fn is_finished(&self) -> bool {
        self.engine.is_finished()
    }

    /// Runs what is due at `now_ms` (engine time): a rate-control batch, a decision cycle, or
    /// both. Returns `None` when nothing was due.
    pub fn step(&mut self, now_ms: i64, extra_events: Vec<Event>) -> Option<CycleReport> {
        self.prepare(now_ms, extra_events)?;
        self.complete(None)
    }

    /// The first half of [`JobRunner::step`]: observes, decides and cools down, and stops
    /// before a rescale is sent, so that the rescales due on one cluster in one round can
    /// share its slots. `None` when nothing was due; otherwise the slots the step's rescale
    /// asks for (`Some(None)`: no rescale). [`JobRunner::complete`] finishes the step.
    pub(crate) fn prepare(
        &mut self,
        now_ms: i64,
        extra_events: Vec<Event>,
    ) -> Option<Option<SlotRequest>> {
        let cycle_due = self.next_cycle_ms.is_none_or(|next| now_ms >= next);
        let rate_due = self
            .rate
            .as_ref()
            .is_some_and(|r| r.next_ms.is_none_or(|next| now_ms >= next));
        if !cycle_due && !rate_due && extra_events.is_empty() {
            return None;
        }
        let started = std::time::Instant::now();
        let mut report = CycleReport::new(&self.name, now_ms);
        let mut events = extra_events;
        let mut rescale = None;
        let mut seen = false;
        if cycle_due {
            self.next_cycle_ms = Some(now_ms + self.interval_ms);
        }
        if let Some(rate) = self.rate.as_mut().filter(|_| rate_due) {
            rate.next_ms = Some(now_ms + rate.interval_ms);
        }
        if cycle_due || rate_due {
            let observed = self.engine.observe(now_ms);
            // A credential reload before this cycle's requests is reported with the cycle.
            events.extend(
                self.engine
                    .take_events()
                    .into_iter()
                    .map(|event| event.job(&self.name)),
            );
            match observed {
                Ok(observation) => {
                    seen = true;
                    self.running = observation
                        .vertices
                        .iter()
                        .map(|v| (v.id.clone(), v.parallelism))
                        .collect();
                    self.groups = observation
                        .vertices
                        .iter()
                        .filter_map(|v| Some((v.id.clone(), v.slot_sharing_group.clone()?)))
                        .collect();
                    self.track_lag(now_ms, &observation);
                    if rate_due {
                        self.rate_control(now_ms, &observation, &mut report, &mut events);
                    }
                    if cycle_due {
                        rescale = self.decide(now_ms, &observation, &mut report, &mut events);
                    }
                }
                // Not an engine failure: the job was deleted; waiting will not bring it back.
                Err(EngineError::JobGone(why)) => {
                    report.job_gone = true;
                    events.push(self.warning(
                        EventReason::JobGone,
                        format!("the job is gone from the cluster: {why}"),
                    ));
                }
                Err(err) => {
                    report.engine_failed = true;
                    events.push(self.warning(
                        EventReason::EngineError,
                        format!("cannot observe the job: {err}"),
                    ));
                }
            }
        }
        self.pending = Some(PendingStep {
            now_ms,
            observed: seen,
            started,
            report,
            events,
            rescale,
        });
        Some(self.slot_request())
    }

    /// The second half of [`JobRunner::step`]: sends the prepared rescale, within `grant`
    /// (the cluster's name and what its arbiter granted; `None`: all of it), records the
    /// step's events and reports it. `None` when no step was prepared.
    pub(crate) fn complete(&mut self, grant: Option<(&str, &SlotGrant)>) -> Option<CycleReport> {
        let PendingStep {
            now_ms,
            observed: _,
            started,
            mut report,
            mut events,
            rescale,
        } = self.pending.take()?;
        // Slots taken back from a job with no rescale of its own: it shrinks to what it keeps.
        let rescale = rescale.or_else(|| {
            grant
                .filter(|(_, grant)| grant.granted < grant.wanted.min(grant.held))
                .map(|_| PendingRescale {
                    operation: ScalingOperation {
                        at_ms: now_ms,
                        parallelism: BTreeMap::new(),
                        aggregated_events: 0,
                    },
                    running: self.running.clone(),
                    recorded_now: BTreeMap::new(),
                    before: self.cooldown.state().clone(),
                })
        });
        if let Some(rescale) = rescale {
            self.realize(now_ms, rescale, grant, &mut report, &mut events);
        }
        for event in events {
            let recorded = record_event(&mut self.events, now_ms, &event);
            if recorded {
                report.events.push(event);
            }
        }
        report.cooldown_until_ms = self.cooldown.period_end_ms().filter(|&end| now_ms < end);
        report.cooldown_queued = Some(!self.cooldown.state().queue.is_empty());
        report.decision_interval = Some(Duration::from_millis(
            u64::try_from(self.interval_ms).unwrap_or(0),
        ));
        report.catch_up_target = Some(self.autoscaler.options().catch_up_duration);
        report.elapsed = started.elapsed();
        Some(report)
    }

    /// What the prepared step asks of the cluster's slots: the slots of its decided
    /// parallelism against those of its running one (per slot-sharing group the widest
    /// vertex, summed over the groups); a step without a rescale asks to keep what it holds.
    /// `None` when the job could not be observed.
    fn slot_request(&self) -> Option<SlotRequest> {
        let pending = self.pending.as_ref()?;
        let (held, wanted) = match &pending.rescale {
            Some(rescale) => {
                let full = rescale.operation.full_parallelism(&rescale.running);
                (self.slots(&rescale.running), self.slots(&full))
            }
            None if pending.observed => (self.slots(&self.running), self.slots(&self.running)),
            None => return None,
        };
        Some(SlotRequest {
            job: self.name.clone(),
            held,
            wanted,
            priority: self.priority,
            lag_growth: self.lag_growth,
            floor: 0,
        })
    }

    /// The slots `parallelism` takes, the vertices in their observed slot-sharing groups.
    fn slots(&self, parallelism: &BTreeMap<String, u32>) -> u32 {
        slots_needed(parallelism, |v| self.groups.get(v).map(String::as_str))
    }

    /// Follows the sources' pending records, for [`SlotRequest::lag_growth`].
    fn track_lag(&mut self, now_ms: i64, observation: &JobObservation) {
        let Some(lag) = pending_records(observation) else {
            return;
        };
        if let Some((at_ms, last)) = self.last_lag
            && now_ms > at_ms
        {
            self.lag_growth = (lag - last) / ((now_ms - at_ms) as f64 / 1000.0);
        }
        self.last_lag = Some((now_ms, lag));
    }

    /// A warning about this job: what the cycle reports when the engine fails it or a rescale
    /// is not sent.
    fn warning(&self, reason: EventReason, message: String) -> Event {
        Event::new(reason, Severity::Warning, message).job(&self.name)
    }

    fn rate_control(
        &mut self,
        now_ms: i64,
        observation: &JobObservation,
        report: &mut CycleReport,
        events: &mut Vec<Event>,
    ) {
        let Some(rate) = self.rate.as_mut() else {
            return;
        };
        let batch = BatchInfo::from_observation(observation, now_ms, rate.interval_ms);
        let Some(update) = rate.controller.on_batch_completed(&batch) else {
            return;
        };
        report.rate_limit = Some(update.rate);
        events.push(update.event);
        for (vertex, limit) in &update.per_source {
            if let Err(err) = self.engine.set_rate_limit(vertex, Some(*limit)) {
                report.engine_failed = true;
                events.push(
                    self.warning(
                        EventReason::EngineError,
                        format!("cannot apply the rate limit of {vertex}: {err}"),
                    )
                    .vertex(vertex),
                );
            }
        }
    }

    fn decide(
        &mut self,
        now_ms: i64,
        observation: &JobObservation,
        report: &mut CycleReport,
        events: &mut Vec<Event>,
    ) -> Option<PendingRescale> {
        if !self.enabled {
            self.scaling.clear();
            return None;
        }
        let before = self.cooldown.state().clone();
        // A decision made during a cooldown period is queued: what the pipeline recorded for
        // it (history, restart tracking) is taken back and recorded when it is executed.
        let deferred = self.cooldown.in_cooldown(now_ms);
        let history = deferred.then(|| {
            (
                self.scaling.scaling_history.clone(),
                self.scaling.scaling_tracking.clone(),
            )
        });
        let outcome = run_cycle_custom(
            &self.name,
            self.autoscaler.options(),
            observation,
            now_ms,
            &self.alignment,
            &self.custom,
            &mut self.scaling,
        );
        report.stage = Some(outcome.stage.clone());
        report.load = source_load(observation, &outcome.evaluated);
        report.vertices = outcome.vertices;
        report.evaluated = outcome.evaluated;
        let mut decided = outcome.events;
        let running: BTreeMap<String, u32> = observation
            .vertices
            .iter()
            .map(|v| (v.id.clone(), v.parallelism))
            .collect();
        let recorded_now = if deferred {
            BTreeMap::new()
        } else {
            outcome.summaries.clone()
        };
        let cooled = match outcome.decision {
            Some(decision) => {
                let changed: BTreeMap<String, u32> = decision
                    .into_iter()
                    .filter(|(vertex, p)| running.get(vertex) != Some(p))
                    .collect();
                let cooled = self.cooldown.submit(now_ms, changed, &running);
                report.queued = cooled.operation.is_none() && !cooled.events.is_empty();
                if let Some(history) = history.filter(|_| cooled.operation.is_none()) {
                    self.scaling.defer_decision(history, outcome.summaries);
                }
                cooled
            }
            // A queue released while the job is not running (restarting) could not be realized
            // and would be lost: it waits for the job to run again.
            None if observation.status == JobStatus::Running => {
                self.cooldown.poll(now_ms, &running)
            }
            None => Default::default(),
        };
        if report.queued
            && let Some(end_ms) = self.cooldown.period_end_ms()
        {
            mark_queued(&mut decided, now_ms, end_ms);
        }
        events.extend(decided);
        events.extend(cooled.events);
        cooled.operation.map(|operation| PendingRescale {
            operation,
            running,
            recorded_now,
            before,
        })
    }

    /// Sends a prepared rescale, within what its cluster's arbiter granted: a scale-up cut
    /// short runs on the slots it got and queues the rest for the end of its cooldown period;
    /// one that got no slot is taken back and runs as soon as slots are free.
    fn realize(
        &mut self,
        now_ms: i64,
        rescale: PendingRescale,
        grant: Option<(&str, &SlotGrant)>,
        report: &mut CycleReport,
        events: &mut Vec<Event>,
    ) {
        let PendingRescale {
            mut operation,
            running,
            recorded_now,
            before,
        } = rescale;
        // Short of what it asked, or below what it asked and held: slots taken back.
        let taken_back = |grant: &SlotGrant| grant.granted < grant.wanted.min(grant.held);
        let limited = |grant: &SlotGrant| grant.is_short() || taken_back(grant);
        if let Some((cluster, grant)) = grant.filter(|(_, grant)| limited(grant)) {
            let decided = !operation.parallelism.is_empty();
            let held = grant.held;
            let full = operation.full_parallelism(&running);
            let within = fit(&full, &running, grant.granted, |v| {
                self.groups.get(v).map(String::as_str)
            });
            let mut cut = BTreeMap::new();
            let mut rest = BTreeMap::new();
            for (vertex, &p) in &full {
                let within = within.get(vertex).copied().unwrap_or(p);
                if within != p && operation.parallelism.contains_key(vertex) {
                    rest.insert(vertex.clone(), p);
                }
                if running.get(vertex) != Some(&within) {
                    cut.insert(vertex.clone(), within);
                }
            }
            let why = if taken_back(grant) {
                format!(
                    "{} of the job's {held} slots of cluster `{cluster}` were taken back for a \
                     job of a higher `scaling.priority` (the job wanted {} slots; {} were free)",
                    grant.wanted.min(grant.held) - grant.granted,
                    grant.wanted,
                    grant.free_at_turn,
                )
            } else {
                format!(
                    "the scale-up needs {} slots of cluster `{cluster}` ({} more than the {held} \
                     the job holds) and {} are free",
                    grant.wanted,
                    grant.wanted.saturating_sub(held),
                    grant.free_at_turn,
                )
            };
            if cut.is_empty() {
                if decided {
                    self.cooldown.take_back(before, &operation);
                    report.queued = true;
                    events.push(self.warning(
                        EventReason::InsufficientSlots,
                        format!("{why}: queued until slots free up"),
                    ));
                }
                return;
            }
            let then = if rest.is_empty() {
                String::new()
            } else {
                ", the rest queued for the end of the cooldown period".to_string()
            };
            events.push(self.warning(
                EventReason::InsufficientSlots,
                format!("{why}: runs on {} slots{then}", grant.granted),
            ));
            self.cooldown.requeue(now_ms, rest);
            operation.parallelism = cut;
        }
        {
            let full = operation.full_parallelism(&running);
            // With shared state: the change's deadline is fixed from the lease first, then the
            // database admits it under the token, then every request of it asks the fence.
            let change = match self.fence.as_ref().map(LeaseFence::for_change) {
                None => None,
                Some(Ok(change)) => Some(change),
                Some(Err(why)) => {
                    events.push(self.warning(
                        EventReason::RescaleAbandoned,
                        format!("rescale to {full:?} not sent: {why}"),
                    ));
                    return;
                }
            };
            let fenced = self
                .fence
                .as_ref()
                .and_then(|fence| fence.leases().admit(&self.name, fence.token(), &full).err());
            if let Some(why) = fenced {
                events.push(self.warning(
                    EventReason::RescaleFenced,
                    format!("rescale to {full:?} not sent: {why}"),
                ));
                return;
            }
            let fence: &dyn WriteFence = match &change {
                Some(change) => change,
                None => &Unfenced,
            };
            match self.engine.rescale_fenced(&full, fence) {
                Ok(()) => {
                    self.scaling
                        .record_execution(now_ms, &operation.parallelism, &recorded_now);
                    report.operation = Some(operation.parallelism);
                }
                Err(EngineError::Abandoned(why)) => events.push(self.warning(
                    EventReason::RescaleAbandoned,
                    format!("rescale to {full:?} abandoned, not retried: {why}"),
                )),
                Err(EngineError::Conflict(why)) => events.push(self.warning(
                    EventReason::RescaleConflict,
                    format!("rescale to {full:?} not sent: {why}"),
                )),
                Err(err) => {
                    report.engine_failed = true;
                    events.push(self.warning(
                        EventReason::EngineError,
                        format!("rescale to {full:?} failed: {err}"),
                    ));
                }
            }
        }
    }
}

/// Rate control for a job, when its settings turn it on.
fn rate_control(job: &str, settings: &BackpressureSettings) -> Option<RateControl> {
    RateController::from_settings(job, settings).map(|controller| RateControl {
        controller,
        interval_ms: settings.options.batch_interval_ms,
        next_ms: None,
    })
}

/// Rewrites the header of the scaling report of a decision the cooldown queued: nothing is sent
/// to the engine now, and the report must not say it begins scaling.
fn mark_queued(events: &mut [Event], now_ms: i64, end_ms: i64) {
    for event in events
        .iter_mut()
        .filter(|e| e.reason == EventReason::ScalingReport)
    {
        if let Some(vertices) = event.message.strip_prefix(REPORT_HEADER_ENABLED) {
            event.message = format!(
                "{} {}, {} s from now (`{COOLDOWN_PERIOD_KEY}`), then scaling vertices:{vertices}",
                REPORT_HEADER_QUEUED,
                format_time(end_ms),
                ((end_ms - now_ms).max(0) + 999) / 1000,
            );
        }
    }
}

/// Header of the scaling report of a decision queued by the cooldown, followed by when it runs.
pub(super) const REPORT_HEADER_QUEUED: &str = "Scaling decision queued by the cooldown until";

/// How an event is rate-limited (`scaling.event.interval`).
enum Dedupe {
    /// Always recorded (scaling reports, as the Flink autoscaler's logging handler does).
    Never,
    /// Identical when reason and key match (the Flink autoscaler's message keys).
    Key(String),
    /// Identical when reason and message match.
    Message,
}

/// Records `event` in `log` under the rate limit its reason and key call for; false when the
/// limit suppressed it.
fn record_event(log: &mut EventLog, now_ms: i64, event: &Event) -> bool {
    match dedupe_key(event) {
        Dedupe::Never => {
            log.record_always(now_ms, event.clone());
            true
        }
        Dedupe::Key(key) => log.record(now_ms, event.clone(), Some(&key)),
        Dedupe::Message => log.record(now_ms, event.clone(), None),
    }
}

/// The Flink autoscaler's rules: scaling reports and errors are always recorded; an event with a message
/// key is the same as an earlier one with that key; rate limits change every batch and are
/// reported once per interval; anything else is the same when its message is. State kept aside
/// is always recorded too: each one names another kept file.
fn dedupe_key(event: &Event) -> Dedupe {
    let vertex = event.vertex.as_deref().unwrap_or_default();
    match (event.reason, &event.key) {
        (
            EventReason::ScalingReport
            | EventReason::AutoscalerError
            | EventReason::StateQuarantined
            | EventReason::StateFileIgnored
            | EventReason::LeaseAcquired
            | EventReason::LeaseLost
            | EventReason::RescaleFenced
            | EventReason::RescaleAbandoned
            | EventReason::RescaleConflict,
            _,
        ) => Dedupe::Never,
        (_, Some(key)) => Dedupe::Key(key.clone()),
        (EventReason::RateLimit, None) => Dedupe::Key("RateLimit".to_string()),
        (EventReason::PluginFault, None) => Dedupe::Key(format!("PluginFault{vertex}")),
        _ => Dedupe::Message,
    }
}

/// `full` (the decided parallelism of every vertex) within `granted` slots: the growing
/// vertices are capped at one bound, the largest that fits (a vertex is never cut below what
/// it runs at); when even that does not fit (slots taken back), every vertex is capped at the
/// largest bound that fits, 1 at least.
fn fit<'a>(
    full: &BTreeMap<String, u32>,
    running: &BTreeMap<String, u32>,
    granted: u32,
    group_of: impl Fn(&str) -> Option<&'a str> + Copy,
) -> BTreeMap<String, u32> {
    let widest = full.values().copied().max().unwrap_or(1);
    let growth_capped = |cap: u32| -> BTreeMap<String, u32> {
        full.iter()
            .map(|(v, &p)| {
                let run = running.get(v).copied().unwrap_or(0);
                let within = if p > run { p.min(cap.max(run)) } else { p };
                (v.clone(), within)
            })
            .collect()
    };
    if let Some(cap) = (0..=widest)
        .rev()
        .find(|&cap| slots_needed(&growth_capped(cap), group_of) <= granted)
    {
        return growth_capped(cap);
    }
    let capped = |cap: u32| -> BTreeMap<String, u32> {
        full.iter()
            .map(|(v, &p)| (v.clone(), p.min(cap).max(1)))
            .collect()
    };
    let cap = (1..=widest)
        .rev()
        .find(|&cap| slots_needed(&capped(cap), group_of) <= granted)
        .unwrap_or(1);
    capped(cap)
}

/// The records waiting in the sources (the sum of their `pendingRecords`), when they report
/// them: the lag a job's slots work off.
fn pending_records(observation: &JobObservation) -> Option<f64> {
    let mut total = None;
    for metrics in observation.metrics.values() {
        for (name, metric) in &metrics.aggregated {
            if name.ends_with(".pendingRecords")
                && let Some(sum) = metric.sum.filter(|v| v.is_finite())
            {
                *total.get_or_insert(0.0) += sum;
            }
        }
    }
    total
}

/// The sum of the sources' target data rates (records/s), when every source has one: the load
/// the job was asked to carry in this cycle.
fn source_load(
    observation: &JobObservation,
    evaluated: &crate::scaling::EvaluatedVertices,
) -> Option<f64> {
    let mut total = 0.0;
    let mut any = false;
    for vertex in &observation.vertices {
        if observation.edges.iter().any(|e| e.to == vertex.id) {
            continue;
        }
        let rate = evaluated
            .get(&vertex.id)?
            .get(&crate::scaling::ScalingMetric::TargetDataRate)?
            .average;
        if !rate.is_finite() {
            return None;
        }
        total += rate;
        any = true;
    }
    any.then_some(total)
}

#[cfg(test)]
mod veto_tests {
    use super::*;
    use crate::events::Severity;

    fn vetoed(instance: &str, reason: &str) -> Event {
        Event::new(
            EventReason::ScalingVetoed,
            Severity::Warning,
            format!("scaling vetoed by executor `{instance}` (x): {reason}"),
        )
        .job("j")
        .key(format!("ScalingVetoed:{instance}"))
    }

    /// A veto is the same as an earlier one of its instance whatever its reason says, within
    /// `scaling.event.interval`; another instance's is not.
    #[test]
    fn vetoes_are_rate_limited_by_instance() {
        const MIN: i64 = 60_000;
        let mut log = EventLog::new(Duration::from_secs(30 * 60), 10);
        assert!(record_event(&mut log, 0, &vetoed("freeze", "Monday")));
        assert!(!record_event(
            &mut log,
            10 * MIN,
            &vetoed("freeze", "Tuesday")
        ));
        assert!(record_event(&mut log, 10 * MIN, &vetoed("budget", "spent")));
        assert!(record_event(
            &mut log,
            31 * MIN,
            &vetoed("freeze", "Monday")
        ));
    }
}

#[cfg(test)]
mod fit_tests {
    use super::*;

    fn map(list: &[(&str, u32)]) -> BTreeMap<String, u32> {
        list.iter().map(|(v, p)| (v.to_string(), *p)).collect()
    }

    #[test]
    fn one_group_caps_the_growing_vertices_at_the_granted_slots() {
        let running = map(&[("src", 2), ("agg", 4)]);
        let full = map(&[("src", 2), ("agg", 10)]);
        // 7 slots: agg 7, src unchanged.
        assert_eq!(
            fit(&full, &running, 7, |_| None),
            map(&[("src", 2), ("agg", 7)])
        );
    }

    #[test]
    fn two_groups_share_the_granted_slots_and_keep_what_they_run() {
        let groups: BTreeMap<&str, &str> = [("src", "a"), ("agg", "a"), ("sink", "b")]
            .into_iter()
            .collect();
        let group_of = |v: &str| groups.get(v).copied();
        let running = map(&[("src", 2), ("agg", 2), ("sink", 3)]);
        let full = map(&[("src", 2), ("agg", 8), ("sink", 6)]);
        // Wanted: a 8 + b 6 = 14; held 2 + 3 = 5; granted 9. A cap c on the growing vertices
        // takes max(2, min(8, c)) + max(3, min(6, c)): c = 4 gives 4 + 4 = 8, c = 5 gives
        // 5 + 5 = 10 > 9: the cap is 4.
        assert_eq!(
            fit(&full, &running, 9, group_of),
            map(&[("src", 2), ("agg", 4), ("sink", 4)])
        );
        // Granted what it holds: nothing grows.
        assert_eq!(fit(&full, &running, 5, group_of), running);
        // Taken back below what it holds (4 of 5): every vertex capped, c = 2 gives 2 + 2.
        assert_eq!(
            fit(&full, &running, 4, group_of),
            map(&[("src", 2), ("agg", 2), ("sink", 2)])
        );
        // Fewer slots than groups: 1 per vertex at least.
        assert_eq!(
            fit(&full, &running, 1, group_of),
            map(&[("src", 1), ("agg", 1), ("sink", 1)])
        );
    }
}
