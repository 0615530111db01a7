//! A job's recent events, with the Flink autoscaler's rate limit on repeated identical
//! events.
//!
//! An event is identical to an earlier one when it has the same reason and the same key, or,
//! when it has no key, the same message (docs/control-loop.md#dedupe). An identical event within
//! `scaling.event.interval` (default 30 min) of the last one that was recorded is suppressed;
//! suppressed events do not move that instant, so a condition that persists is reported once
//! per interval. The Flink autoscaler's keys, for callers: `ScalingLimited<vertex>`,
//! `ineffective<vertex><expectedIncrease>`, `gcPressure` / `heapUsage`, `ScalingExecutor`;
//! `AutoscalerError` has no interval (use [`EventLog::record_always`]).
//!
//! Recorded events are logged through `tracing` (warnings at `warn`, the rest at `info`) and kept
//! in a bounded ring, oldest dropped first.
//!
//! A restarted host reports every condition again the first time it sees it: whoever reads the
//! new process's output did not see what the old one printed, so the dedupe memory starts empty
//! at every start (the ring of recent events is restored).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::reference::SCALING_EVENT_INTERVAL;
use crate::config::{ConfigLookup, ConfigLookupExt, KeyError};
use crate::events::{Event, Severity};

/// The configuration key of the dedupe interval.
pub(crate) const EVENT_INTERVAL_KEY: &str = SCALING_EVENT_INTERVAL.about.name;

/// The dedupe interval when `scaling.event.interval` is unset (the Flink autoscaler's default).
pub(crate) const DEFAULT_EVENT_INTERVAL: Duration = SCALING_EVENT_INTERVAL.default_or_zero();

/// How many recent events a job keeps by default.
pub(crate) const DEFAULT_EVENT_CAPACITY: usize = 200;

/// An event and when it was recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LoggedEvent {
    /// When it was recorded, in ms.
    pub(crate) at_ms: i64,
    /// The event.
    pub(crate) event: Event,
}

/// What an [`EventLog`] persists: its recent events and when each identity was last recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct EventLogState {
    /// Recent events, oldest first, kept as JSON so that one event this host cannot read
    /// (a reason added by a newer version) is dropped alone instead of failing the whole log.
    #[serde(default)]
    pub(crate) events: Vec<serde_json::Value>,
    /// Identity (reason + key or message) -> when it was last recorded, in ms. Persisted for
    /// the file format's sake; [`EventLog::restore`] does not read it back.
    #[serde(default)]
    pub(crate) last_recorded: BTreeMap<String, i64>,
}

/// One job's recent events.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EventLog {
    interval_ms: i64,
    capacity: usize,
    events: VecDeque<LoggedEvent>,
    last_recorded: BTreeMap<String, i64>,
}

impl EventLog {
    /// A log suppressing identical events within `interval` (zero: never suppress) and keeping
    /// the `capacity` most recent events (at least one).
    pub(crate) fn new(interval: Duration, capacity: usize) -> EventLog {
        EventLog {
            interval_ms: i64::try_from(interval.as_millis()).unwrap_or(i64::MAX),
            capacity: capacity.max(1),
            events: VecDeque::new(),
            last_recorded: BTreeMap::new(),
        }
    }

    /// A log with `scaling.event.interval` from the job's configuration and the default capacity.
    pub(crate) fn from_config(lookup: &impl ConfigLookup) -> Result<EventLog, KeyError> {
        let interval = lookup.duration_or(EVENT_INTERVAL_KEY, DEFAULT_EVENT_INTERVAL)?;
        Ok(EventLog::new(interval, DEFAULT_EVENT_CAPACITY))
    }

    /// Continues from a persisted state: its recent events. Events this host cannot read are
    /// dropped with a warning. The dedupe instants are not restored, so a condition that still
    /// holds after a restart (an engine that is still unreachable) is reported at once, not up
    /// to `scaling.event.interval` later.
    pub(crate) fn restore(mut self, state: EventLogState) -> EventLog {
        self.events = state
            .events
            .into_iter()
            .filter_map(
                |stored| match serde_json::from_value::<LoggedEvent>(stored) {
                    Ok(logged) => Some(logged),
                    Err(err) => {
                        tracing::warn!(%err, "dropping a stored event this version cannot read");
                        None
                    }
                },
            )
            .collect();
        while self.events.len() > self.capacity {
            self.events.pop_front();
        }
        self.last_recorded.clear();
        self
    }

    /// The state to persist.
    pub(crate) fn state(&self) -> EventLogState {
        EventLogState {
            events: self
                .events
                .iter()
                .filter_map(|logged| serde_json::to_value(logged).ok())
                .collect(),
            last_recorded: self.last_recorded.clone(),
        }
    }

    /// Records `event` at `now_ms` unless an identical one (same reason and `key`, or same
    /// message when `key` is `None`) was recorded less than the interval ago. Returns whether
    /// it was recorded.
    pub(crate) fn record(&mut self, now_ms: i64, event: Event, key: Option<&str>) -> bool {
        let identity = match key {
            Some(k) => format!("{}|key|{k}", event.reason.as_str()),
            None => format!("{}|message|{}", event.reason.as_str(), event.message),
        };
        let interval = self.interval_ms;
        self.last_recorded
            .retain(|_, at| now_ms.saturating_sub(*at) < interval);
        if self.last_recorded.contains_key(&identity) {
            tracing::trace!(
                job = event.job.as_deref().unwrap_or(""),
                reason = event.reason.as_str(),
                message = %event.message,
                "identical event suppressed (`{EVENT_INTERVAL_KEY}`)"
            );
            return false;
        }
        if interval > 0 {
            self.last_recorded.insert(identity, now_ms);
        }
        self.push(now_ms, event);
        true
    }

    /// Records `event` at `now_ms` whatever was recorded before (events without an interval).
    pub(crate) fn record_always(&mut self, now_ms: i64, event: Event) {
        self.push(now_ms, event);
    }

    fn push(&mut self, now_ms: i64, event: Event) {
        let job = event.job.as_deref().unwrap_or("");
        let vertex = event.vertex.as_deref().unwrap_or("");
        match event.severity {
            Severity::Warning => tracing::warn!(
                job,
                vertex,
                reason = event.reason.as_str(),
                "{}",
                event.message
            ),
            Severity::Normal => tracing::info!(
                job,
                vertex,
                reason = event.reason.as_str(),
                "{}",
                event.message
            ),
        }
        if self.events.len() == self.capacity {
            self.events.pop_front();
        }
        self.events.push_back(LoggedEvent {
            at_ms: now_ms,
            event,
        });
    }

    /// Recent events, oldest first.
    #[cfg(test)]
    pub(crate) fn events(&self) -> impl ExactSizeIterator<Item = &LoggedEvent> + '_ {
        self.events.iter()
    }

    /// The number of events kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.events.len()
    }

    /// The dedupe interval in ms.
    pub(crate) fn interval_ms(&self) -> i64 {
        self.interval_ms
    }

    /// Changes the dedupe interval (a reloaded configuration), keeping the events and what was
    /// last reported when: a condition reported a moment ago stays quiet.
    pub(crate) fn set_interval_ms(&mut self, interval_ms: i64) {
        self.interval_ms = interval_ms.max(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventReason;
    use crate::state::{InMemoryStateStore, load, save, sections};

    const MIN: i64 = 60_000;

    fn log() -> EventLog {
        EventLog::new(DEFAULT_EVENT_INTERVAL, 5)
    }

    fn limited(vertex: &str, message: &str) -> Event {
        Event::new(EventReason::ScalingLimited, Severity::Warning, message)
            .job("orders")
            .vertex(vertex)
            .parallelism(10, 8)
    }

    #[test]
    fn identical_keyed_events_are_suppressed_within_the_interval() {
        let mut log = log();
        assert!(log.record(0, limited("v1", "first"), Some("ScalingLimitedv1")));
        // Same key, other message: identical for the dedupe.
        assert!(!log.record(10 * MIN, limited("v1", "second"), Some("ScalingLimitedv1")));
        assert!(!log.record(
            30 * MIN - 1,
            limited("v1", "third"),
            Some("ScalingLimitedv1")
        ));
        // Suppressed events did not move the instant: recorded again at exactly 30 min.
        assert!(log.record(30 * MIN, limited("v1", "fourth"), Some("ScalingLimitedv1")));
        // Another key is another event.
        assert!(log.record(30 * MIN, limited("v2", "fourth"), Some("ScalingLimitedv2")));
        let messages: Vec<&str> = log.events().map(|e| e.event.message.as_str()).collect();
        assert_eq!(messages, vec!["first", "fourth", "fourth"]);
        assert_eq!(log.events().next().map(|e| e.at_ms), Some(0));
    }

    #[test]
    fn without_a_key_the_message_decides() {
        let mut log = log();
        let quota = |m: &str| Event::new(EventReason::MemoryPressure, Severity::Normal, m);
        assert!(log.record(0, quota("heap high"), None));
        assert!(!log.record(1, quota("heap high"), None));
        assert!(log.record(2, quota("heap higher"), None));
        // Same text under another reason is a different event.
        assert!(log.record(
            3,
            Event::new(EventReason::ScalingReport, Severity::Normal, "heap high"),
            None
        ));
        // A key equal to a message is not confused with it.
        assert!(log.record(4, quota("other"), Some("heap high")));
        assert_eq!(log.len(), 4);
    }

    #[test]
    fn record_always_and_zero_interval_never_suppress() {
        let mut log = log();
        let err = Event::new(EventReason::AutoscalerError, Severity::Warning, "boom");
        log.record_always(0, err.clone());
        log.record_always(1, err.clone());
        assert_eq!(log.len(), 2);

        let mut no_interval = EventLog::new(Duration::ZERO, 10);
        assert!(no_interval.record(0, err.clone(), Some("k")));
        assert!(no_interval.record(0, err, Some("k")));
        assert_eq!(no_interval.len(), 2);
        assert!(no_interval.state().last_recorded.is_empty());
    }

    #[test]
    fn the_ring_keeps_the_most_recent_events() {
        let mut log = log();
        for i in 0..8 {
            log.record_always(
                i,
                Event::new(EventReason::RateLimit, Severity::Normal, i.to_string()),
            );
        }
        let kept: Vec<i64> = log.events().map(|e| e.at_ms).collect();
        assert_eq!(kept, vec![3, 4, 5, 6, 7]);
        assert_eq!(EventLog::new(Duration::ZERO, 0).capacity, 1);
    }

    #[test]
    fn expired_identities_are_forgotten() {
        let mut log = log();
        for i in 0..50 {
            log.record(i, limited("v", &format!("m{i}")), None);
        }
        assert_eq!(log.state().last_recorded.len(), 50);
        log.record(100 * MIN, limited("v", "late"), None);
        assert_eq!(log.state().last_recorded.len(), 1);
    }

    #[test]
    fn state_round_trip_keeps_events_and_dedupe_across_a_restart() {
        let mut log = log();
        log.record(0, limited("v1", "limited"), Some("ScalingLimitedv1"));
        log.record(
            5,
            Event::new(EventReason::CooldownQueued, Severity::Normal, "queued").detail("queued", 2),
            None,
        );
        let mut store = InMemoryStateStore::new();
        save(&mut store, "orders", sections::EVENTS, &log.state()).unwrap();

        let state: EventLogState = load(&store, "orders", sections::EVENTS).unwrap().unwrap();
        let mut restored = EventLog::new(DEFAULT_EVENT_INTERVAL, 5).restore(state);
        assert_eq!(
            restored.events().cloned().collect::<Vec<_>>(),
            log.events().cloned().collect::<Vec<_>>()
        );
        // The restarted host reports the condition once, then suppresses repeats as before.
        assert!(restored.record(MIN, limited("v1", "again"), Some("ScalingLimitedv1")));
        assert!(!restored.record(2 * MIN, limited("v1", "again"), Some("ScalingLimitedv1")));
        assert!(restored.record(31 * MIN, limited("v1", "again"), Some("ScalingLimitedv1")));
    }

    #[test]
    fn an_engine_error_still_failing_after_a_restart_is_reported_at_once() {
        let unreachable = || {
            Event::new(
                EventReason::EngineError,
                Severity::Warning,
                "cannot observe the job: connection refused",
            )
            .job("orders")
        };
        let mut before = log();
        assert!(before.record(0, unreachable(), None));
        assert!(!before.record(MIN, unreachable(), None));
        // Restarted one minute later against the same unreachable cluster: before, the saved
        // dedupe memory kept it quiet for the rest of the 30 minutes.
        let mut after = log().restore(before.state());
        assert!(after.record(2 * MIN, unreachable(), None));
        assert_eq!(after.len(), 2, "the old report and the new one");
    }

    #[test]
    fn unknown_stored_reasons_are_dropped() {
        let state: EventLogState = serde_json::from_value(serde_json::json!({
            "events": [
                {"at_ms": 1, "event": {"reason": "FromTheFuture", "severity": "Normal", "message": "?"}},
                {"at_ms": 2, "event": {"reason": "RateLimit", "severity": "Normal", "message": "ok"}},
                {"at_ms": 3, "event": {"reason": "RateLimit", "severity": "Loud", "message": "?"}}
            ],
            "last_recorded": {"x": 1}
        }))
        .unwrap();
        let log = EventLog::new(DEFAULT_EVENT_INTERVAL, 5).restore(state);
        assert_eq!(log.len(), 1);
        assert_eq!(log.events().next().unwrap().event.message, "ok");
        assert!(log.state().last_recorded.is_empty());
    }

    #[test]
    fn events_survive_the_round_trip() {
        let logged = LoggedEvent {
            at_ms: 1,
            event: Event::new(EventReason::PluginFault, Severity::Warning, "m")
                .vertex("v")
                .parallelism(3, 4)
                .detail("n", 7),
        };
        let value = serde_json::to_value(&logged).unwrap();
        assert_eq!(
            serde_json::from_value::<LoggedEvent>(value).unwrap(),
            logged
        );
    }

    #[test]
    fn interval_from_config() {
        let cfg: BTreeMap<String, String> =
            [("scaling.event.interval".to_string(), "10 min".to_string())]
                .into_iter()
                .collect();
        assert_eq!(EventLog::from_config(&cfg).unwrap().interval_ms(), 10 * MIN);
        let empty: BTreeMap<String, String> = BTreeMap::new();
        assert_eq!(
            EventLog::from_config(&empty).unwrap().interval_ms(),
            30 * MIN
        );
        let bad: BTreeMap<String, String> =
            [("scaling.event.interval".to_string(), "often".to_string())]
                .into_iter()
                .collect();
        assert_eq!(
            EventLog::from_config(&bad).unwrap_err().key,
            "scaling.event.interval"
        );
    }
}
