//! Events: everything the autoscaler decides or refuses, with a reason a person can act on.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Why an event was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum EventReason {
    /// A scaling operation was executed (or, in advisor mode, recommended).
    ScalingReport,
    /// Alignment could not reach the expected parallelism (legacy modes, ADVANCED `CURRENT`).
    ScalingLimited,
    /// A previous scale-up did not raise the processing rate as expected.
    IneffectiveScaling,
    /// A scaling event arrived during a cooldown period and was queued.
    CooldownQueued,
    /// A new source rate limit was published.
    RateLimit,
    /// A plugin mode panicked, failed, or answered outside the allowed range; or a custom
    /// evaluator or executor could not answer or answered what cannot be used.
    PluginFault,
    /// A custom scaling executor vetoed the cycle's operation: nothing was applied. Keyed
    /// `ScalingVetoed:<instance>`.
    ScalingVetoed,
    /// A configured custom evaluator or executor instance is not used (no class, a class no
    /// loaded implementation has, parameters refused), or an evaluator after the first.
    PluginSkipped,
    /// The configured mode could not be used and BALANCED was used instead.
    ModeFallback,
    /// Scaling was blocked by GC or heap pressure.
    MemoryPressure,
    /// A scale-up was blocked: the TaskManagers it needs would exceed `quota.cpu` or
    /// `quota.memory`. Nothing was applied.
    ResourceQuotaReached,
    /// `scaling.restart-aware`: an operation not needed to keep up was skipped because the
    /// slots it changes, over its expected hold time, do not outweigh the restart. Nothing was
    /// applied. Keyed `ScalingSkipped`.
    ScalingSkipped,
    /// An engine could not be reached or refused a request.
    EngineError,
    /// The engine no longer knows the job (deleted from the cluster): its loop stops, or, when
    /// the fleet names the job by id, waits for a job with that id to come back.
    JobGone,
    /// Any other error of a cycle.
    AutoscalerError,
    /// Part of a job's stored state (a section, or its whole file) could not be read: the file
    /// as it was is kept in the state directory's `quarantine/` folder and only that part
    /// starts empty. Look at the kept file; delete it once it is of no use.
    StateQuarantined,
    /// A file of the state directory cannot be used (it is not state, or several files name
    /// one job) and it is left as it is. Repair, move or delete it.
    StateFileIgnored,
    /// The fleet configuration was read again (SIGHUP, or its file changed) and applied: which
    /// jobs were added, removed, changed or restarted.
    ConfigReloaded,
    /// A changed fleet configuration is invalid: the host runs on with the one it had, and the
    /// message says every problem of the new one.
    ConfigRefused,
    /// A plugin file appeared in the plugins directory (or was fixed) and its modes are
    /// available.
    PluginLoaded,
    /// A plugin file was replaced by another build: jobs use the new version from their next
    /// decision.
    PluginReplaced,
    /// A plugin file left the plugins directory: its modes are unavailable, and the jobs using
    /// them align with BALANCED until they are back.
    PluginRemoved,
    /// A plugin file in the plugins directory cannot be used; the message says why and what to
    /// do.
    PluginRefused,
    /// This host took the job's lease (`[host] state = "postgres://..."`): it acts on the job
    /// from now on, resuming the state the previous owner stored. `details.token` is the
    /// lease's fencing token.
    LeaseAcquired,
    /// This host no longer holds the job's lease (it expired, or the job moved to another
    /// host to even out the load): it stopped acting on the job at once.
    LeaseLost,
    /// A rescale was not sent: this host's fencing token is no longer the job's current one
    /// (another host took the job over while this one was paused or cut off).
    RescaleFenced,
    /// A rescale was given up part way and is not retried: this host's lease of the job ended
    /// (or came within its margin) before every request of it had left, so nothing more was
    /// sent. Whoever holds the job now decides again from what the engine holds.
    RescaleAbandoned,
    /// A rescale was not sent: the job on the engine is not as this host last saw or left it
    /// (another writer changed it). The next cycle decides from what the engine holds.
    RescaleConflict,
    /// A job's cycle has been inside one call into an in-process plugin for longer than
    /// `[host] plugin-call-timeout`: the job makes no progress until the call returns (nothing
    /// can interrupt it), and the other jobs go on on a substitute worker.
    JobStuck,
    /// A certificate, key, CA bundle or token file changed on disk and was read again: the
    /// link it secures uses it from its next connection on. The message names the files,
    /// never their contents.
    CredentialsReloaded,
    /// A certificate, key, CA bundle or token file changed into something that cannot be used
    /// (unreadable, not PEM, readable by others, a key that does not match its certificate):
    /// the link keeps the last good one. The message names the files and the reason.
    CredentialsRefused,
    /// A scale-up needs more of its cluster's slots than are free: the jobs sharing the
    /// cluster's slots got them first (a higher `scaling.priority`, or a faster growing lag),
    /// and this one was cut to what was left or queued until slots free up. The message names
    /// the slots wanted and free.
    InsufficientSlots,
}

impl EventReason {
    /// The reason's name as printed and serialized.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            EventReason::ScalingReport => "ScalingReport",
            EventReason::ScalingLimited => "ScalingLimited",
            EventReason::IneffectiveScaling => "IneffectiveScaling",
            EventReason::CooldownQueued => "CooldownQueued",
            EventReason::RateLimit => "RateLimit",
            EventReason::PluginFault => "PluginFault",
            EventReason::ScalingVetoed => "ScalingVetoed",
            EventReason::PluginSkipped => "PluginSkipped",
            EventReason::ModeFallback => "ModeFallback",
            EventReason::MemoryPressure => "MemoryPressure",
            EventReason::ResourceQuotaReached => "ResourceQuotaReached",
            EventReason::ScalingSkipped => "ScalingSkipped",
            EventReason::EngineError => "EngineError",
            EventReason::JobGone => "JobGone",
            EventReason::AutoscalerError => "AutoscalerError",
            EventReason::StateQuarantined => "StateQuarantined",
            EventReason::StateFileIgnored => "StateFileIgnored",
            EventReason::ConfigReloaded => "ConfigReloaded",
            EventReason::ConfigRefused => "ConfigRefused",
            EventReason::PluginLoaded => "PluginLoaded",
            EventReason::PluginReplaced => "PluginReplaced",
            EventReason::PluginRemoved => "PluginRemoved",
            EventReason::PluginRefused => "PluginRefused",
            EventReason::LeaseAcquired => "LeaseAcquired",
            EventReason::LeaseLost => "LeaseLost",
            EventReason::RescaleFenced => "RescaleFenced",
            EventReason::RescaleAbandoned => "RescaleAbandoned",
            EventReason::RescaleConflict => "RescaleConflict",
            EventReason::JobStuck => "JobStuck",
            EventReason::CredentialsReloaded => "CredentialsReloaded",
            EventReason::CredentialsRefused => "CredentialsRefused",
            EventReason::InsufficientSlots => "InsufficientSlots",
        }
    }
}

/// Normal or Warning, as Kubernetes events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Severity {
    /// Informational.
    Normal,
    /// Something a person should look at.
    Warning,
}

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Why.
    pub reason: EventReason,
    /// Normal or Warning.
    pub(crate) severity: Severity,
    /// The job, when known.
    pub(crate) job: Option<String>,
    /// The vertex it concerns, if any.
    pub(crate) vertex: Option<String>,
    /// The parallelism that was expected, if any.
    pub(crate) expected: Option<u32>,
    /// The parallelism that was applied instead, if any.
    pub(crate) actual: Option<u32>,
    /// Further numbers (e.g. `N`, `upper_bound`, `lower` of a SCALING_LIMITED event).
    #[serde(default)]
    pub(crate) details: BTreeMap<String, i64>,
    /// A message a person can act on.
    pub message: String,
    /// What makes two events "the same" for the per-job rate limit (the Flink autoscaler's message keys,
    /// e.g. `ScalingLimited<vertex>`); when unset, the reason and the message do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) key: Option<String>,
}

impl Event {
    /// An event with a reason and a message; the rest is filled in with the builder methods.
    pub(crate) fn new(
        reason: EventReason,
        severity: Severity,
        message: impl Into<String>,
    ) -> Event {
        Event {
            reason,
            severity,
            job: None,
            vertex: None,
            expected: None,
            actual: None,
            details: BTreeMap::new(),
            message: message.into(),
            key: None,
        }
    }
    /// Sets the job.
    pub(crate) fn job(mut self, job: impl Into<String>) -> Event {
        self.job = Some(job.into());
        self
    }
    /// Sets the vertex.
    pub(crate) fn vertex(mut self, vertex: impl Into<String>) -> Event {
        self.vertex = Some(vertex.into());
        self
    }
    /// Sets expected and actual parallelism.
    pub(crate) fn parallelism(mut self, expected: u32, actual: u32) -> Event {
        self.expected = Some(expected);
        self.actual = Some(actual);
        self
    }
    /// Sets the dedupe key.
    pub(crate) fn key(mut self, key: impl Into<String>) -> Event {
        self.key = Some(key.into());
        self
    }
    /// Adds a detail.
    pub(crate) fn detail(mut self, name: &str, value: i64) -> Event {
        self.details.insert(name.to_string(), value);
        self
    }
}
