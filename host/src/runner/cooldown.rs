//! The cooldown executor: at most one scaling operation per `scaling-cooldown-period`, without
//! dropping the scaling events that arrive in between.
//!
//! - A scaling event outside a cooldown period is executed right away and starts a period.
//! - An event inside a period is queued; queueing does not restart or extend the period (that
//!   would delay scaling further).
//! - When the period ends, every queued event is aggregated into ONE operation: per vertex the
//!   most recent value wins, and vertices whose aggregated value equals their running
//!   parallelism drop out. If something remains it is executed and a new period starts;
//!   otherwise nothing happens and no period starts. Queued events are never executed one by
//!   one at the cooldown pace: that would add a period of delay per event.
//! - A period is half-open, `[start, start + period)`: an event at exactly `start + period` is
//!   outside it and joins the queued events in the one operation executed at that instant.
//!
//! Time is passed in (`now_ms`), never read from a clock, so the control loop, the simulator and
//! the tests drive it. The end of a period is noticed by the next call, [`CooldownExecutor::poll`]
//! or [`CooldownExecutor::submit`]: the loop polls every cycle, so an aggregated operation runs
//! at most one cycle after the period ended and the new period starts when it actually runs.
//! The queue, the period start and the last operation are a [`CooldownState`], persisted with
//! the job's state so that a host restart neither loses queued events nor shortens a period.
//!
//! The executor only decides: it returns the operation to realize and the events to record.
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::time::Duration;
//!
//! use flowscale::runner::{CooldownExecutor, CooldownState};
//! use flowscale::state::{InMemoryStateStore, load, save, sections};
//!
//! let mut store = InMemoryStateStore::new();
//! let state: CooldownState = load(&store, "orders", sections::COOLDOWN)?.unwrap_or_default();
//! let mut cooldown = CooldownExecutor::restore("orders", Duration::from_secs(300), state);
//! let running = BTreeMap::from([("map".to_string(), 2), ("sink".to_string(), 2)]);
//!
//! // A cycle: first let a period that has ended release its queue, then submit the new event.
//! assert!(cooldown.poll(0, &running).operation.is_none());
//! let outcome = cooldown.submit(0, BTreeMap::from([("map".to_string(), 4)]), &running);
//! let operation = outcome.operation.expect("outside a period: executed at once");
//! // Realizer::rescale wants every vertex.
//! assert_eq!(
//!     operation.full_parallelism(&running),
//!     BTreeMap::from([("map".to_string(), 4), ("sink".to_string(), 2)])
//! );
//! save(&mut store, "orders", sections::COOLDOWN, cooldown.state())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::events::{Event, EventReason, Severity};
use crate::plan::COOLDOWN_PERIOD_KEY;

/// A scaling event waiting for the end of a cooldown period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct QueuedScalingEvent {
    /// When it arrived, in ms.
    pub(crate) at_ms: i64,
    /// The changed vertices: vertex id -> new parallelism.
    pub(crate) parallelism: BTreeMap<String, u32>,
}

/// A scaling operation to realize.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScalingOperation {
    /// When it was executed, in ms; a cooldown period starts here.
    pub(crate) at_ms: i64,
    /// The vertices to change: vertex id -> new parallelism (never empty, never a vertex at its
    /// running parallelism).
    pub(crate) parallelism: BTreeMap<String, u32>,
    /// How many scaling events were aggregated into it (1 for an immediate execution).
    #[serde(default)]
    pub(crate) aggregated_events: usize,
}

impl ScalingOperation {
    /// The complete map a realizer expects: every running vertex, at its new parallelism if
    /// this operation changes it, else at its running one.
    pub fn full_parallelism(&self, running: &BTreeMap<String, u32>) -> BTreeMap<String, u32> {
        let mut full = running.clone();
        full.extend(self.parallelism.iter().map(|(v, p)| (v.clone(), *p)));
        full
    }
}

/// What survives a restart: the queue, the start of the last period and the last operation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CooldownState {
    /// Start of the last cooldown period (the instant of the last operation), if any.
    #[serde(default)]
    pub(crate) period_start_ms: Option<i64>,
    /// Events queued during the current period, oldest first.
    #[serde(default)]
    pub(crate) queue: Vec<QueuedScalingEvent>,
    /// The last executed operation.
    #[serde(default)]
    pub(crate) last_operation: Option<ScalingOperation>,
}

/// What a call decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CooldownOutcome {
    /// The operation to realize now, if any.
    pub operation: Option<ScalingOperation>,
    /// Events to record (`CooldownQueued` when the event was queued).
    pub(crate) events: Vec<Event>,
}

/// Applies the cooldown period to one job's scaling events.
#[derive(Debug, Clone, PartialEq)]
pub struct CooldownExecutor {
    job: String,
    period_ms: i64,
    state: CooldownState,
}

impl CooldownExecutor {
    /// An executor for `job` with a cooldown of `period` (zero disables it: every event is
    /// executed right away). Periods beyond `i64::MAX` ms are treated as that.
    pub(crate) fn new(job: impl Into<String>, period: Duration) -> CooldownExecutor {
        CooldownExecutor::restore(job, period, CooldownState::default())
    }

    /// An executor that continues from a persisted `state`.
    pub fn restore(
        job: impl Into<String>,
        period: Duration,
        state: CooldownState,
    ) -> CooldownExecutor {
        CooldownExecutor {
            job: job.into(),
            period_ms: i64::try_from(period.as_millis()).unwrap_or(i64::MAX),
            state,
        }
    }

    /// The state to persist after every call.
    pub fn state(&self) -> &CooldownState {
        &self.state
    }

    /// Puts back what a realized operation left out: `parallelism` (vertex -> parallelism) is
    /// queued as if it had arrived at `at_ms`, and runs with the next operation, at the end of
    /// the period (a scale-up its cluster's slots cut short).
    pub(crate) fn requeue(&mut self, at_ms: i64, parallelism: BTreeMap<String, u32>) {
        if !parallelism.is_empty() {
            self.state
                .queue
                .push(QueuedScalingEvent { at_ms, parallelism });
        }
    }

    /// Takes back an operation that was not realized at all (no slot for it): the state
    /// returns to `before` (no period started) with the operation queued, so the next cycle
    /// executes it again, as soon as slots are free.
    pub(crate) fn take_back(&mut self, before: CooldownState, operation: &ScalingOperation) {
        self.state = before;
        self.requeue(operation.at_ms, operation.parallelism.clone());
    }

    /// The cooldown period in ms (0 = disabled).
    pub(crate) fn period_ms(&self) -> i64 {
        self.period_ms
    }

    /// The end of the current (or last) period: the first instant outside it.
    pub(crate) fn period_end_ms(&self) -> Option<i64> {
        self.state
            .period_start_ms
            .map(|start| start.saturating_add(self.period_ms))
    }

    /// True if `now_ms` is inside a cooldown period.
    pub(crate) fn in_cooldown(&self, now_ms: i64) -> bool {
        self.period_end_ms().is_some_and(|end| now_ms < end)
    }

    /// A scaling event (changed vertex -> new parallelism) arrives at `now_ms`; `running` is the
    /// job's running parallelism. Inside a period it is queued; outside, it is executed at once,
    /// together with whatever was queued during the period that has just ended.
    pub fn submit(
        &mut self,
        now_ms: i64,
        event: BTreeMap<String, u32>,
        running: &BTreeMap<String, u32>,
    ) -> CooldownOutcome {
        if event.is_empty() {
            return self.poll(now_ms, running);
        }
        if let Some(end) = self.period_end_ms().filter(|end| now_ms < *end) {
            self.state.queue.push(QueuedScalingEvent {
                at_ms: now_ms,
                parallelism: event,
            });
            return CooldownOutcome {
                operation: None,
                events: vec![self.queued_event(now_ms, end)],
            };
        }
        self.state.queue.push(QueuedScalingEvent {
            at_ms: now_ms,
            parallelism: event,
        });
        self.execute_queue(now_ms, running)
    }

    /// Notices the end of a period: if it has ended and events are queued, they are aggregated
    /// into one operation, executed at `now_ms`. Call it every cycle.
    pub fn poll(&mut self, now_ms: i64, running: &BTreeMap<String, u32>) -> CooldownOutcome {
        if self.state.queue.is_empty() || self.in_cooldown(now_ms) {
            return CooldownOutcome::default();
        }
        self.execute_queue(now_ms, running)
    }

    /// Aggregates the queue (latest value wins), drops vertices at their running parallelism,
    /// and executes what remains at `now_ms`.
    fn execute_queue(&mut self, now_ms: i64, running: &BTreeMap<String, u32>) -> CooldownOutcome {
        let queue = std::mem::take(&mut self.state.queue);
        let aggregated_events = queue.len();
        let mut aggregated = BTreeMap::new();
        for event in queue {
            aggregated.extend(event.parallelism);
        }
        aggregated.retain(|vertex, parallelism| running.get(vertex) != Some(parallelism));
        if aggregated.is_empty() {
            tracing::debug!(
                job = %self.job,
                aggregated_events,
                "queued scaling events cancel out against the running parallelism; nothing to execute"
            );
            return CooldownOutcome::default();
        }
        let operation = ScalingOperation {
            at_ms: now_ms,
            parallelism: aggregated,
            aggregated_events,
        };
        tracing::debug!(
            job = %self.job,
            at_ms = now_ms,
            aggregated_events,
            vertices = operation.parallelism.len(),
            "scaling operation executed; cooldown period starts"
        );
        self.state.period_start_ms = Some(now_ms);
        self.state.last_operation = Some(operation.clone());
        CooldownOutcome {
            operation: Some(operation),
            events: Vec::new(),
        }
    }

    fn queued_event(&self, now_ms: i64, end_ms: i64) -> Event {
        let queued = self.state.queue.len();
        let changes = self
            .state
            .queue
            .last()
            .map(|e| {
                e.parallelism
                    .iter()
                    .map(|(v, p)| format!("{v} -> {p}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        Event::new(
            EventReason::CooldownQueued,
            Severity::Normal,
            format!(
                "scaling event queued ({changes}): inside the cooldown period until {end_ms} ms \
                 ({} ms left, {queued} event(s) queued); queued events are aggregated into one \
                 operation when the period ends (`{COOLDOWN_PERIOD_KEY}`)",
                end_ms.saturating_sub(now_ms)
            ),
        )
        .job(self.job.clone())
        .detail("cooldown_end_ms", end_ms)
        .detail("queued", i64::try_from(queued).unwrap_or(i64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const P: i64 = 300_000;

    fn map(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
        pairs.iter().map(|(v, p)| (v.to_string(), *p)).collect()
    }

    fn executor() -> CooldownExecutor {
        CooldownExecutor::new("job", Duration::from_millis(P as u64))
    }

    /// Applies an operation to the running parallelism, as a realizer would.
    fn apply(running: &mut BTreeMap<String, u32>, outcome: &CooldownOutcome) {
        if let Some(op) = &outcome.operation {
            *running = op.full_parallelism(running);
        }
    }

    #[test]
    fn one_event_is_executed_right_away_and_starts_a_period() {
        let mut ex = executor();
        let running = map(&[("a", 2), ("b", 2)]);
        let out = ex.submit(1000, map(&[("a", 4)]), &running);
        let op = out.operation.unwrap();
        assert_eq!(op.at_ms, 1000);
        assert_eq!(op.parallelism, map(&[("a", 4)]));
        assert_eq!(op.full_parallelism(&running), map(&[("a", 4), ("b", 2)]));
        assert!(out.events.is_empty());
        assert!(ex.in_cooldown(1000));
        assert!(ex.in_cooldown(1000 + P - 1));
        assert!(!ex.in_cooldown(1000 + P));
        // Nothing queued: the end of the period does nothing.
        assert_eq!(ex.poll(1000 + P, &running), CooldownOutcome::default());
    }

    #[test]
    fn sequence_diagram_events_inside_a_period_then_a_quiet_period() {
        let mut ex = executor();
        let mut running = map(&[("a", 2), ("b", 2)]);
        let first = ex.submit(0, map(&[("a", 4)]), &running);
        apply(&mut running, &first);
        let t1 = first.operation.as_ref().unwrap().at_ms;

        // Two events inside the period: queued, not executed, the period is not extended.
        let q1 = ex.submit(60_000, map(&[("b", 3)]), &running);
        assert_eq!(q1.operation, None);
        assert_eq!(q1.events.len(), 1);
        assert_eq!(q1.events[0].reason, EventReason::CooldownQueued);
        assert_eq!(q1.events[0].details.get("cooldown_end_ms"), Some(&P));
        let q2 = ex.submit(200_000, map(&[("a", 6)]), &running);
        assert_eq!(q2.operation, None);
        assert_eq!(q2.events[0].details.get("queued"), Some(&2));
        assert_eq!(ex.period_end_ms(), Some(P));

        // Polls inside the period do nothing.
        assert_eq!(ex.poll(P - 1, &running), CooldownOutcome::default());

        // End of the period: one aggregated operation.
        let second = ex.poll(P, &running);
        let op = second.operation.clone().unwrap();
        assert_eq!(op.parallelism, map(&[("a", 6), ("b", 3)]));
        assert_eq!(op.aggregated_events, 2);
        assert_eq!(op.at_ms - t1, P, "time between operations is the period");
        apply(&mut running, &second);

        // No event during the second period: nothing happens at its end, no new period.
        assert_eq!(ex.poll(2 * P, &running), CooldownOutcome::default());
        assert!(!ex.in_cooldown(2 * P));
        assert_eq!(ex.state().last_operation, Some(op));
        assert!(ex.state().queue.is_empty());

        // The next event, later, is executed right away.
        let third = ex.submit(2 * P + 5, map(&[("b", 1)]), &running);
        assert_eq!(third.operation.unwrap().at_ms, 2 * P + 5);
    }

    #[test]
    fn event_exactly_at_the_boundary_joins_the_queued_events() {
        let mut ex = executor();
        let running = map(&[("a", 2), ("b", 2), ("c", 2)]);
        ex.submit(0, map(&[("a", 4)]), &running);
        let running = map(&[("a", 4), ("b", 2), ("c", 2)]);
        assert!(
            ex.submit(10, map(&[("b", 5), ("c", 3)]), &running)
                .operation
                .is_none()
        );
        let out = ex.submit(P, map(&[("b", 7)]), &running);
        assert!(
            out.events.is_empty(),
            "not queued: it is outside the period"
        );
        let op = out.operation.unwrap();
        assert_eq!(op.at_ms, P);
        assert_eq!(op.parallelism, map(&[("b", 7), ("c", 3)]));
        assert_eq!(op.aggregated_events, 2);
        // One instant before the boundary it would have been queued.
        let mut ex = executor();
        assert!(ex.submit(0, map(&[("a", 6)]), &running).operation.is_some());
        assert!(
            ex.submit(P - 1, map(&[("b", 7)]), &running)
                .operation
                .is_none()
        );
    }

    #[test]
    fn latest_value_wins_and_no_op_vertices_drop_out() {
        let mut ex = executor();
        let running = map(&[("a", 2), ("b", 2)]);
        ex.submit(0, map(&[("a", 3)]), &running);
        let running = map(&[("a", 3), ("b", 2)]);
        ex.submit(1, map(&[("a", 5), ("b", 4)]), &running);
        ex.submit(2, map(&[("a", 8)]), &running);
        ex.submit(3, map(&[("b", 2)]), &running); // back to running
        let op = ex.poll(P, &running).operation.unwrap();
        assert_eq!(op.parallelism, map(&[("a", 8)]));
        assert_eq!(op.aggregated_events, 3);
    }

    #[test]
    fn queued_events_that_cancel_out_start_no_period() {
        let mut ex = executor();
        let running = map(&[("a", 2)]);
        ex.submit(0, map(&[("a", 4)]), &running);
        let running = map(&[("a", 4)]);
        ex.submit(100, map(&[("a", 6)]), &running);
        ex.submit(200, map(&[("a", 4)]), &running);
        assert_eq!(ex.poll(P + 50, &running), CooldownOutcome::default());
        assert!(ex.state().queue.is_empty());
        assert!(!ex.in_cooldown(P + 50));
        assert_eq!(ex.state().last_operation.as_ref().unwrap().at_ms, 0);
        // An event right after is executed at once.
        assert_eq!(
            ex.submit(P + 60, map(&[("a", 5)]), &running)
                .operation
                .unwrap()
                .at_ms,
            P + 60
        );
    }

    #[test]
    fn an_event_at_the_running_parallelism_outside_a_period_does_nothing() {
        let mut ex = executor();
        let running = map(&[("a", 2)]);
        assert_eq!(
            ex.submit(0, map(&[("a", 2)]), &running),
            CooldownOutcome::default()
        );
        assert!(!ex.in_cooldown(0));
        assert_eq!(
            ex.submit(0, BTreeMap::new(), &running),
            CooldownOutcome::default()
        );
    }

    #[test]
    fn late_poll_executes_when_called_and_the_next_period_starts_then() {
        let mut ex = executor();
        let running = map(&[("a", 2)]);
        ex.submit(0, map(&[("a", 4)]), &running);
        let running = map(&[("a", 4)]);
        ex.submit(5, map(&[("a", 6)]), &running);
        let op = ex.poll(P + 7_000, &running).operation.unwrap();
        assert_eq!(op.at_ms, P + 7_000);
        assert_eq!(ex.period_end_ms(), Some(2 * P + 7_000));
    }

    #[test]
    fn zero_disables_the_cooldown() {
        let mut ex = CooldownExecutor::new("job", Duration::ZERO);
        let mut running = map(&[("a", 1)]);
        for (t, p) in [(0, 2), (0, 3), (1, 4)] {
            let out = ex.submit(t, map(&[("a", p)]), &running);
            assert_eq!(
                out.operation.as_ref().unwrap().parallelism,
                map(&[("a", p)])
            );
            assert!(out.events.is_empty());
            apply(&mut running, &out);
        }
        assert!(ex.state().queue.is_empty());
    }

    #[test]
    fn restart_mid_period_keeps_the_queue_and_the_period() {
        let mut ex = executor();
        let running = map(&[("a", 2), ("b", 2)]);
        ex.submit(1000, map(&[("a", 4)]), &running);
        let running = map(&[("a", 4), ("b", 2)]);
        ex.submit(50_000, map(&[("b", 3)]), &running);

        let json = serde_json::to_string(ex.state()).unwrap();
        drop(ex);
        let state: CooldownState = serde_json::from_str(&json).unwrap();
        let mut restored = CooldownExecutor::restore("job", Duration::from_millis(P as u64), state);

        // Still inside the original period: a new event is queued, the period is not shortened.
        assert!(restored.in_cooldown(1000 + P - 1));
        let out = restored.submit(100_000, map(&[("a", 5)]), &running);
        assert!(out.operation.is_none());
        assert_eq!(out.events[0].details.get("queued"), Some(&2));
        assert_eq!(
            restored.poll(1000 + P - 1, &running),
            CooldownOutcome::default()
        );
        let op = restored.poll(1000 + P, &running).operation.unwrap();
        assert_eq!(op.parallelism, map(&[("a", 5), ("b", 3)]));
        assert_eq!(op.at_ms, 1000 + P);
    }

    #[test]
    fn state_json_shape_is_stable() {
        let state = CooldownState {
            period_start_ms: Some(5),
            queue: vec![QueuedScalingEvent {
                at_ms: 6,
                parallelism: map(&[("a", 2)]),
            }],
            last_operation: None,
        };
        let value = serde_json::to_value(&state).unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "period_start_ms": 5,
                "queue": [{"at_ms": 6, "parallelism": {"a": 2}}],
                "last_operation": null
            })
        );
        // Missing fields read as an empty state.
        let empty: CooldownState = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(empty, CooldownState::default());
    }

    #[derive(Debug, Clone)]
    enum Step {
        Submit(u64, Vec<(u8, u32)>),
        Poll(u64),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (
                0u64..700,
                proptest::collection::vec((0u8..3, 1u32..5), 0..3)
            )
                .prop_map(|(dt, v)| Step::Submit(dt, v)),
            (0u64..700).prop_map(Step::Poll),
        ]
    }

    proptest! {
        #[test]
        fn operations_are_never_closer_than_the_period(
            period in 0u64..400,
            steps in proptest::collection::vec(step(), 1..60),
        ) {
            let mut ex = CooldownExecutor::new("job", Duration::from_millis(period));
            let mut running = map(&[("v0", 1), ("v1", 1), ("v2", 1)]);
            let mut now = 0i64;
            let mut last_op: Option<i64> = None;
            let mut check = |out: &CooldownOutcome, running: &mut BTreeMap<String, u32>, now: i64| {
                if let Some(op) = &out.operation {
                    prop_assert_eq!(op.at_ms, now);
                    prop_assert!(!op.parallelism.is_empty());
                    for (v, p) in &op.parallelism {
                        prop_assert_ne!(running.get(v), Some(p));
                    }
                    if let Some(prev) = last_op {
                        prop_assert!(op.at_ms - prev >= period as i64,
                            "operations at {} and {} with period {}", prev, op.at_ms, period);
                    }
                    last_op = Some(op.at_ms);
                }
                apply(running, out);
                Ok(())
            };
            for s in steps {
                let out = match s {
                    Step::Submit(dt, changes) => {
                        now += dt as i64;
                        let event = changes.iter().map(|(v, p)| (format!("v{v}"), *p)).collect();
                        ex.submit(now, event, &running)
                    }
                    Step::Poll(dt) => {
                        now += dt as i64;
                        ex.poll(now, &running)
                    }
                };
                check(&out, &mut running, now)?;
            }
            // After the last period has ended, one poll drains the queue.
            now += period as i64;
            let out = ex.poll(now, &running);
            check(&out, &mut running, now)?;
            prop_assert!(ex.state().queue.is_empty());
        }
    }
}
