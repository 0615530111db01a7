//! Restart-aware hysteresis (`scaling.restart-aware`, docs/decision-pipeline.md#restart-aware-hysteresis):
//! every rescale stops and restores the job, so an operation that is not needed to keep up is
//! applied only when what it changes in slots, over the time it is expected to hold, outweighs
//! what the restart costs.
//!
//! In slot-seconds: the operation pays when `|slots after − slots before| × hold time` exceeds
//! `slots before × restart time` (the whole job, at its current size, processes nothing during
//! the restart). An operation with a scale-up that is needed to keep up (a vertex whose true
//! processing rate is below its scale-up threshold, i.e. over `utilization.max` with the lag's
//! catch-up rate included) is never skipped.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::engine::ObservedVertex;
use crate::events::{Event, EventReason, Severity};
use crate::scaling::metrics::{ScalingMetric, evaluated_or_nan};
use crate::scaling::options::AutoscalerOptions;
use crate::scaling::state::{ScalingHistory, ScalingSummary};
use crate::scaling::topology::Topology;

/// The dedupe key of a `ScalingSkipped` event: the figures change from cycle to cycle, so the
/// key (not the message) makes two skips the same for `scaling.event.interval`.
pub(crate) const SCALING_SKIPPED_KEY: &str = "ScalingSkipped";

/// Whether a scale-up of one vertex is needed to keep up: its true processing rate (the
/// window's average, as the band check reads it) is below its scale-up threshold, the rate
/// it needs at `utilization.max` to process its target rate plus the lag's catch-up rate. A
/// vertex whose rate or threshold is unknown counts as needed: what cannot be judged is not
/// skipped.
fn needed_to_keep_up(summary: &ScalingSummary) -> bool {
    let tpr = evaluated_or_nan(&summary.metrics, ScalingMetric::TrueProcessingRate).average;
    let threshold = evaluated_or_nan(&summary.metrics, ScalingMetric::ScaleUpRateThreshold).current;
    !(tpr.is_finite() && threshold.is_finite()) || tpr < threshold
}

/// The slots the job takes before and after an operation: per slot-sharing group the widest
/// vertex (a group's vertices share slots), a vertex without a group counting alone, summed.
/// Every vertex of the graph counts, at its new parallelism when the operation changes it.
pub(crate) fn job_slots<K: Borrow<str> + Ord>(
    topology: &Topology,
    observed: &[ObservedVertex],
    summaries: &BTreeMap<K, ScalingSummary>,
) -> (u64, u64) {
    let groups: BTreeMap<&str, &str> = observed
        .iter()
        .filter_map(|v| Some((v.id.as_str(), v.slot_sharing_group.as_deref()?)))
        .collect();
    let mut widest: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let (mut before, mut after) = (0u64, 0u64);
    for vertex in &topology.vertices {
        let current = u64::from(vertex.parallelism);
        let new = summaries
            .get(&*vertex.id)
            .map_or(current, |s| u64::from(s.new_parallelism));
        match groups.get(&*vertex.id) {
            Some(group) => {
                let w = widest.entry(group).or_insert((0, 0));
                *w = (w.0.max(current), w.1.max(new));
            }
            None => {
                before += current;
                after += new;
            }
        }
    }
    for (b, a) in widest.into_values() {
        before += b;
        after += a;
    }
    (before, after)
}

/// How long an operation is expected to hold: the mean time between the job's past rescales
/// (the distinct instants of its scaling history, first to last over their number less one),
/// never less than the floor `max(scale-down.interval, metrics.window)`: a scale-down waits
/// that long before it is applied, and no decision is taken on less than a window. With
/// fewer than two past rescales, the floor.
pub(crate) fn expected_hold_time(history: &ScalingHistory, opts: &AutoscalerOptions) -> Duration {
    let floor = opts.scale_down_interval.max(opts.metrics_window);
    let instants: BTreeSet<i64> = history
        .vertices
        .values()
        .flat_map(|h| h.keys().copied())
        .collect();
    let (Some(first), Some(last)) = (instants.first(), instants.last()) else {
        return floor;
    };
    let gaps = instants.len().saturating_sub(1);
    if gaps == 0 {
        return floor;
    }
    let span = u64::try_from(last.saturating_sub(*first)).unwrap_or(0);
    let mean = Duration::from_millis(span / gaps as u64);
    mean.max(floor)
}

/// The figures of a judged operation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RestartVerdict {
    pub(crate) slots_before: u64,
    pub(crate) slots_after: u64,
    pub(crate) hold: Duration,
    pub(crate) restart: Duration,
    /// `|after − before| × hold`, in slot-seconds.
    pub(crate) saving: f64,
    /// `before × restart`, in slot-seconds.
    pub(crate) cost: f64,
}

impl RestartVerdict {
    /// Whether the operation pays for its restart: strictly more saved than it costs.
    pub(crate) fn pays(&self) -> bool {
        self.saving > self.cost
    }

    fn kind(&self) -> &'static str {
        match self.slots_after.cmp(&self.slots_before) {
            std::cmp::Ordering::Less => "scale-down",
            std::cmp::Ordering::Greater => "scale-up not needed to keep up",
            std::cmp::Ordering::Equal => "rescale that frees no slot",
        }
    }

    /// The event's message: the reason and the figures.
    pub(crate) fn message(&self) -> String {
        format!(
            "Restart-aware scaling skipped a {}: slots {} -> {}, expected hold {} s, restart {} s; saving {} slot-seconds <= restart cost {} slot-seconds (scaling.restart-aware)",
            self.kind(),
            self.slots_before,
            self.slots_after,
            self.hold.as_secs(),
            self.restart.as_secs(),
            self.saving.round(),
            self.cost.round(),
        )
    }
}

/// The verdict on an operation, or `None` when it is not judged: the key is off, or a
/// changing vertex's scale-up is needed to keep up.
pub(crate) fn judge<K: Borrow<str> + Ord>(
    opts: &AutoscalerOptions,
    topology: &Topology,
    observed: &[ObservedVertex],
    summaries: &BTreeMap<K, ScalingSummary>,
    history: &ScalingHistory,
    restart: Duration,
) -> Option<RestartVerdict> {
    if !opts.restart_aware {
        return None;
    }
    let needed = summaries
        .values()
        .any(|s| s.new_parallelism > s.current_parallelism && needed_to_keep_up(s));
    if needed {
        return None;
    }
    let (slots_before, slots_after) = job_slots(topology, observed, summaries);
    let hold = expected_hold_time(history, opts);
    let saving = slots_before.abs_diff(slots_after) as f64 * hold.as_secs_f64();
    let cost = slots_before as f64 * restart.as_secs_f64();
    Some(RestartVerdict {
        slots_before,
        slots_after,
        hold,
        restart,
        saving,
        cost,
    })
}

/// The `ScalingSkipped` event when restart-aware scaling skips the operation, else `None`.
pub(crate) fn scaling_skipped<K: Borrow<str> + Ord>(
    job: &str,
    opts: &AutoscalerOptions,
    topology: &Topology,
    observed: &[ObservedVertex],
    summaries: &BTreeMap<K, ScalingSummary>,
    history: &ScalingHistory,
    restart: Duration,
) -> Option<Event> {
    let verdict = judge(opts, topology, observed, summaries, history, restart)?;
    (!verdict.pays()).then(|| {
        Event::new(
            EventReason::ScalingSkipped,
            Severity::Normal,
            verdict.message(),
        )
        .job(job)
        .key(SCALING_SKIPPED_KEY)
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::scaling::metrics::{EvaluatedScalingMetric, VertexEvaluation};
    use crate::scaling::state::VertexHistory;
    use crate::scaling::topology::{VertexIds, VertexInfo};
    use crate::state::EventLog;

    const MIN: u64 = 60;

    /// A graph of `vertices` (id, parallelism), without edges.
    fn graph(vertices: &[(&str, u32)]) -> Topology {
        let ids: Vec<Arc<str>> = vertices.iter().map(|&(id, _)| Arc::from(id)).collect();
        let infos = vertices
            .iter()
            .zip(&ids)
            .map(|(&(_, p), id)| VertexInfo {
                id: Arc::clone(id),
                name: Arc::clone(id),
                parallelism: p,
                max_parallelism: 128,
                source_partitions: 0,
                finished: false,
                inputs: vec![],
                input_strategies: Arc::from([]),
                outputs: vec![],
            })
            .collect();
        Topology {
            vertices: infos,
            index: Arc::new(VertexIds::new(ids)),
        }
    }

    /// A change `current -> new` whose vertex has true processing rate `tpr` (window average)
    /// and scale-up threshold `threshold`.
    fn change(current: u32, new: u32, tpr: f64, threshold: f64) -> ScalingSummary {
        let mut metrics = VertexEvaluation::new();
        metrics.insert(
            ScalingMetric::TrueProcessingRate,
            EvaluatedScalingMetric::new(tpr, tpr),
        );
        metrics.insert(
            ScalingMetric::ScaleUpRateThreshold,
            EvaluatedScalingMetric::of(threshold),
        );
        ScalingSummary {
            current_parallelism: current,
            new_parallelism: new,
            metrics,
        }
    }

    fn op(changes: &[(&str, ScalingSummary)]) -> BTreeMap<String, ScalingSummary> {
        changes
            .iter()
            .map(|(id, s)| (id.to_string(), s.clone()))
            .collect()
    }

    /// Restart-aware, floor max(30 min, 5 min) = 1800 s.
    fn opts() -> AutoscalerOptions {
        AutoscalerOptions {
            restart_aware: true,
            scale_down_interval: Duration::from_secs(30 * MIN),
            metrics_window: Duration::from_secs(5 * MIN),
            ..AutoscalerOptions::default()
        }
    }

    /// Past rescales at `instants` (ms), on vertex `a`.
    fn history(instants: &[i64]) -> ScalingHistory {
        let mut h = ScalingHistory::default();
        let entries: VertexHistory = instants
            .iter()
            .map(|&at| (at, change(1, 2, 1.0, 0.0)))
            .collect();
        h.vertices.insert("a".to_string(), entries);
        h
    }

    fn skipped(
        opts: &AutoscalerOptions,
        topology: &Topology,
        summaries: &BTreeMap<String, ScalingSummary>,
        history: &ScalingHistory,
        restart: Duration,
    ) -> Option<Event> {
        scaling_skipped("j", opts, topology, &[], summaries, history, restart)
    }

    /// Two vertices at 8, no groups: 16 slots.
    fn sixteen() -> Topology {
        graph(&[("a", 8), ("b", 8)])
    }

    #[test]
    fn a_scale_down_that_pays_is_applied() {
        // a 8 -> 2: 16 -> 10 slots, 6 freed × 1800 s = 10800 slot-s > 16 × 60 s = 960.
        let down = op(&[("a", change(8, 2, 500.0, 100.0))]);
        let verdict = judge(
            &opts(),
            &sixteen(),
            &[],
            &down,
            &ScalingHistory::default(),
            Duration::from_secs(60),
        )
        .expect("judged");
        assert_eq!((verdict.slots_before, verdict.slots_after), (16, 10));
        assert_eq!(verdict.hold, Duration::from_secs(1800));
        assert_eq!((verdict.saving, verdict.cost), (10800.0, 960.0));
        assert!(verdict.pays());
        let none = skipped(
            &opts(),
            &sixteen(),
            &down,
            &ScalingHistory::default(),
            Duration::from_secs(60),
        );
        assert!(none.is_none());
    }

    #[test]
    fn a_scale_down_that_does_not_pay_is_skipped_with_its_figures() {
        // a 8 -> 7: 1 slot × 1800 s = 1800 slot-s <= 16 × 300 s = 4800.
        let down = op(&[("a", change(8, 7, 500.0, 100.0))]);
        let event = skipped(
            &opts(),
            &sixteen(),
            &down,
            &ScalingHistory::default(),
            Duration::from_secs(5 * MIN),
        )
        .expect("skipped");
        assert_eq!(event.reason, EventReason::ScalingSkipped);
        assert_eq!(event.severity, Severity::Normal);
        assert_eq!(event.job.as_deref(), Some("j"));
        assert_eq!(event.key.as_deref(), Some("ScalingSkipped"));
        assert_eq!(
            event.message,
            "Restart-aware scaling skipped a scale-down: slots 16 -> 15, expected hold 1800 s, restart 300 s; saving 1800 slot-seconds <= restart cost 4800 slot-seconds (scaling.restart-aware)"
        );
        // Exactly equal is not enough: 16 × 112.5 s = 1800 = the saving.
        let equal = skipped(
            &opts(),
            &sixteen(),
            &down,
            &ScalingHistory::default(),
            Duration::from_millis(112_500),
        );
        assert!(equal.is_some());
        // A job that rescales rarely holds longer: past rescales at 0, 1 h and 3 h are 1.5 h
        // = 5400 s apart on average; 1 × 5400 = 5400 > 4800, so it pays.
        let rare = history(&[0, 3_600_000, 10_800_000]);
        assert_eq!(
            expected_hold_time(&rare, &opts()),
            Duration::from_secs(5400)
        );
        let event = skipped(
            &opts(),
            &sixteen(),
            &down,
            &rare,
            Duration::from_secs(5 * MIN),
        );
        assert!(event.is_none());
    }

    #[test]
    fn the_hold_time_never_goes_below_the_floor() {
        // Rescales 10 min apart: 600 s < the floor max(1800, 300) = 1800.
        let often = history(&[0, 600_000, 1_200_000]);
        assert_eq!(
            expected_hold_time(&often, &opts()),
            Duration::from_secs(1800)
        );
        // One past rescale has no gap: the floor.
        assert_eq!(
            expected_hold_time(&history(&[5]), &opts()),
            Duration::from_secs(1800)
        );
        // The window is the floor when it is the longer: max(0, 5 min) = 300 s.
        let no_interval = AutoscalerOptions {
            scale_down_interval: Duration::ZERO,
            ..opts()
        };
        assert_eq!(
            expected_hold_time(&ScalingHistory::default(), &no_interval),
            Duration::from_secs(300)
        );
        // The same instant on two vertices is one rescale: 0 and 2 h on a, 2 h on b -> one
        // gap of 7200 s.
        let mut two = history(&[0, 7_200_000]);
        two.vertices.insert(
            "b".to_string(),
            VertexHistory::from([(7_200_000, change(1, 2, 1.0, 0.0))]),
        );
        assert_eq!(expected_hold_time(&two, &opts()), Duration::from_secs(7200));
    }

    #[test]
    fn a_scale_up_needed_to_keep_up_is_never_skipped() {
        // a 8 -> 16 at TPR 100 below its threshold 150: needed, even with a year's restart.
        let needed = op(&[("a", change(8, 16, 100.0, 150.0))]);
        let year = Duration::from_secs(365 * 24 * 3600);
        let history = ScalingHistory::default();
        assert!(judge(&opts(), &sixteen(), &[], &needed, &history, year).is_none());
        // Alongside a scale-down that would not pay on its own: still applied.
        let mixed = op(&[
            ("a", change(8, 9, 100.0, 150.0)),
            ("b", change(8, 7, 500.0, 100.0)),
        ]);
        assert!(skipped(&opts(), &sixteen(), &mixed, &history, year).is_none());
        // Unknown rate or threshold: cannot be judged, so needed.
        let unknown = op(&[("a", change(8, 9, f64::NAN, 150.0))]);
        assert!(skipped(&opts(), &sixteen(), &unknown, &history, year).is_none());
    }

    #[test]
    fn a_small_scale_up_that_does_not_pay_is_skipped() {
        // a 8 -> 10 at TPR 200 >= its threshold 150: not needed. 16 -> 18 slots, 2 × 1800 =
        // 3600 slot-s <= 16 × 300 = 4800: skipped.
        let small = op(&[("a", change(8, 10, 200.0, 150.0))]);
        let event = skipped(
            &opts(),
            &sixteen(),
            &small,
            &ScalingHistory::default(),
            Duration::from_secs(5 * MIN),
        )
        .expect("skipped");
        assert!(
            event.message.starts_with(
                "Restart-aware scaling skipped a scale-up not needed to keep up: slots 16 -> 18,"
            ),
            "{}",
            event.message
        );
        // With a 1 min restart: 3600 > 16 × 60 = 960, applied.
        let event = skipped(
            &opts(),
            &sixteen(),
            &small,
            &ScalingHistory::default(),
            Duration::from_secs(MIN),
        );
        assert!(event.is_none());
    }

    #[test]
    fn slots_count_the_widest_vertex_of_each_group() {
        use crate::engine::ObservedVertex;
        let observed = |id: &str, group: Option<&str>| ObservedVertex {
            id: id.into(),
            name: id.into(),
            parallelism: 1,
            max_parallelism: 128,
            source_partitions: 0,
            finished: false,
            slot_sharing_group: group.map(str::to_string),
        };
        // a (8) and b (4) share g, c (3) has no group: max(8, 4) + 3 = 11 slots. a 8 -> 2
        // leaves b the widest of g: max(2, 4) + 3 = 7.
        let topology = graph(&[("a", 8), ("b", 4), ("c", 3)]);
        let vertices = [
            observed("a", Some("g")),
            observed("b", Some("g")),
            observed("c", None),
        ];
        let down = op(&[("a", change(8, 2, 500.0, 100.0))]);
        assert_eq!(job_slots(&topology, &vertices, &down), (11, 7));
        // Without groups every vertex counts: 15 -> 9.
        assert_eq!(job_slots(&topology, &[], &down), (15, 9));
    }

    #[test]
    fn with_the_key_off_nothing_is_judged() {
        let off = AutoscalerOptions {
            restart_aware: false,
            ..opts()
        };
        assert!(!AutoscalerOptions::default().restart_aware);
        let down = op(&[("a", change(8, 7, 500.0, 100.0))]);
        let year = Duration::from_secs(365 * 24 * 3600);
        let history = ScalingHistory::default();
        assert!(judge(&off, &sixteen(), &[], &down, &history, year).is_none());
        assert!(skipped(&off, &sixteen(), &down, &history, year).is_none());
    }

    #[test]
    fn skips_are_reported_once_per_event_interval_whatever_their_figures() {
        // Two skips with other figures (8 -> 7 and 8 -> 6) are the same event for the
        // per-job rate limit: the second is suppressed within the 30 min interval, the third
        // is recorded at 30 min.
        let mut log = EventLog::new(Duration::from_secs(30 * MIN), 10);
        let restart = Duration::from_secs(10 * MIN);
        let history = ScalingHistory::default();
        let mut record = |at_ms: i64, new: u32| {
            let down = op(&[("a", change(8, new, 500.0, 100.0))]);
            let event = skipped(&opts(), &sixteen(), &down, &history, restart).expect("skipped");
            let key = event.key.clone();
            log.record(at_ms, event, key.as_deref())
        };
        assert!(record(0, 7));
        assert!(!record(10 * 60_000, 6));
        assert!(record(30 * 60_000, 6));
        assert_eq!(log.len(), 2);
    }
}
