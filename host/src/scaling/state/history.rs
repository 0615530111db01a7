//! Scaling history, scaling tracking and the restart time (docs/decision-pipeline.md#scaling-history).

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::scaling::metrics::VertexEvaluation;
use crate::scaling::options::{AutoscalerOptions, millis, whole_seconds};
use crate::scaling::topology::Topology;

/// One executed change of one vertex, with the metrics it was decided on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalingSummary {
    /// Parallelism before.
    pub(crate) current_parallelism: u32,
    /// Parallelism after.
    pub(crate) new_parallelism: u32,
    /// The vertex's evaluated metrics at decision time (incl. `EXPECTED_PROCESSING_RATE`).
    pub(crate) metrics: VertexEvaluation,
}

/// Executed changes per vertex id, keyed by decision instant (ms). Persisted per job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScalingHistory {
    /// Vertex id -> instant -> summary.
    pub vertices: BTreeMap<String, BTreeMap<i64, ScalingSummary>>,
}

impl ScalingHistory {
    /// Keeps entries not older than `history.max.age`, at most `history.max.count` per vertex,
    /// and drops vertices left empty or not in `topology`. One walk over the history, every
    /// cycle; the map is rebuilt only in a cycle in which some vertex goes (in most, none does).
    pub(crate) fn trim_to(&mut self, now_ms: i64, opts: &AutoscalerOptions, topology: &Topology) {
        let (min_ts, max_count) = trim_limits(now_ms, opts);
        let mut drops = false;
        for (vertex, entries) in self.vertices.iter_mut() {
            trim_entries(entries, min_ts, max_count);
            drops |= entries.is_empty() || !topology.index.contains_key(vertex.as_str());
        }
        if drops {
            self.vertices
                .retain(|v, e| !e.is_empty() && topology.index.contains_key(v.as_str()));
        }
    }

    /// Records the summaries of one executed operation (by vertex id). A vertex scaled before
    /// keeps its entry: its id is copied only the first time.
    pub(crate) fn add<K: Borrow<str>>(
        &mut self,
        now_ms: i64,
        summaries: &BTreeMap<K, ScalingSummary>,
    ) {
        for (v, s) in summaries {
            let v: &str = v.borrow();
            match self.vertices.get_mut(v) {
                Some(entries) => {
                    entries.insert(now_ms, s.clone());
                }
                None => {
                    self.vertices
                        .insert(v.to_string(), BTreeMap::from([(now_ms, s.clone())]));
                }
            }
        }
    }
}

/// The oldest instant a history entry may have at `now_ms`, and how many entries a vertex keeps.
fn trim_limits(now_ms: i64, opts: &AutoscalerOptions) -> (i64, usize) {
    let min_ts = now_ms.saturating_sub(millis(opts.history_max_age));
    let max_count = usize::try_from(opts.history_max_count.max(0)).unwrap_or(usize::MAX);
    (min_ts, max_count)
}

/// Drops a vertex's entries older than `min_ts` and the oldest beyond `max_count`, from the
/// front: usually nothing, and without the new map a `split_off` builds.
fn trim_entries(entries: &mut BTreeMap<i64, ScalingSummary>, min_ts: i64, max_count: usize) {
    while entries
        .first_key_value()
        .is_some_and(|(&at, _)| at < min_ts)
    {
        entries.pop_first();
    }
    while entries.len() > max_count {
        entries.pop_first();
    }
}

/// One executed scaling operation and, once the job runs again, how long the restart took.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScalingRecord {
    /// Milliseconds from the decision until the job was running with the new parallelism.
    pub restart_duration_ms: Option<i64>,
}

/// Scaling operations by decision instant (ms). Persisted per job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScalingTracking {
    /// Instant -> record.
    pub records: BTreeMap<i64, ScalingRecord>,
}

impl ScalingTracking {
    /// Drops records older than `history.max.age` and beyond `history.max.count`, always
    /// keeping the newest one.
    pub(crate) fn trim(&mut self, now_ms: i64, opts: &AutoscalerOptions) {
        let Some((&newest_at, newest)) = self.records.last_key_value() else {
            return;
        };
        let newest = newest.clone();
        let min_ts = now_ms.saturating_sub(millis(opts.history_max_age));
        while self
            .records
            .first_key_value()
            .is_some_and(|(&at, _)| at < min_ts)
        {
            self.records.pop_first();
        }
        let max_count = usize::try_from(opts.history_max_count.max(0)).unwrap_or(usize::MAX);
        while self.records.len() > max_count {
            self.records.pop_first();
        }
        self.records.insert(newest_at, newest);
    }

    /// Records a new operation decided at `now_ms`.
    pub(crate) fn add(&mut self, now_ms: i64) {
        self.records.insert(now_ms, ScalingRecord::default());
    }

    /// If the newest operation has no restart duration yet and every vertex it scaled now runs
    /// at the recorded new parallelism, stores `running_since − decision`. True if updated.
    pub(crate) fn record_restart_if_completed(
        &mut self,
        running_since_ms: i64,
        topology: &Topology,
        history: &ScalingHistory,
    ) -> bool {
        let Some((&at, record)) = self.records.iter_mut().next_back() else {
            return false;
        };
        if record.restart_duration_ms.is_some() {
            return false;
        }
        let matches = history.vertices.iter().all(|(v, entries)| {
            let Some(summary) = entries.get(&at) else {
                return true;
            };
            topology
                .index
                .get(v.as_str())
                .is_some_and(|&i| topology.vertices[i].parallelism == summary.new_parallelism)
        });
        if matches {
            record.restart_duration_ms = Some(running_since_ms - at);
        }
        matches
    }

    /// The restart time used in this cycle: `restart.time`, or with tracking enabled the
    /// longest tracked restart (whole seconds) capped at `restart.time-tracking.limit`.
    pub(crate) fn restart_time(&self, opts: &AutoscalerOptions) -> Duration {
        if !opts.restart_time_tracking_enabled {
            return opts.restart_time;
        }
        let longest = self
            .records
            .values()
            .filter_map(|r| r.restart_duration_ms)
            .map(|ms| ms / 1000)
            .max();
        match longest {
            None => opts.restart_time,
            Some(secs) => {
                let limit = whole_seconds(opts.restart_time_tracking_limit) as i64;
                Duration::from_secs(u64::try_from(secs.min(limit)).unwrap_or(0))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{JobObservation, JobStatus, ObservedVertex};

    fn summary(cur: u32, new: u32) -> ScalingSummary {
        ScalingSummary {
            current_parallelism: cur,
            new_parallelism: new,
            metrics: VertexEvaluation::new(),
        }
    }

    fn observation(p: u32) -> JobObservation {
        JobObservation {
            status: JobStatus::Running,
            running_since_ms: 0,
            vertices: vec![ObservedVertex {
                id: "v".into(),
                name: "v".into(),
                parallelism: p,
                max_parallelism: 128,
                source_partitions: 0,
                finished: false,
            }],
            edges: vec![],
            metrics: Default::default(),
            global: Default::default(),
        }
    }

    #[test]
    fn history_trim_by_age_and_count() {
        let opts = AutoscalerOptions {
            history_max_age: Duration::from_secs(100),
            history_max_count: 2,
            ..AutoscalerOptions::default()
        };
        let mut h = ScalingHistory::default();
        for at in [0, 10_000, 50_000, 60_000, 70_000] {
            h.vertices
                .entry("v".into())
                .or_default()
                .insert(at, summary(1, 2));
        }
        h.vertices
            .entry("old".into())
            .or_default()
            .insert(0, summary(1, 2));
        // Recent, but of a vertex the graph no longer has.
        h.vertices
            .entry("gone".into())
            .or_default()
            .insert(100_000, summary(1, 2));
        let mut obs = observation(1);
        let mut old = obs.vertices[0].clone();
        old.id = "old".into();
        old.name = "old".into();
        obs.vertices.push(old);
        let topology = Topology::from_observation(&obs).unwrap();
        h.trim_to(110_000, &opts, &topology);
        assert_eq!(
            h.vertices["v"].keys().copied().collect::<Vec<_>>(),
            vec![60_000, 70_000]
        );
        assert!(!h.vertices.contains_key("old"));
        assert!(!h.vertices.contains_key("gone"));
    }

    #[test]
    fn tracking_keeps_the_newest_record() {
        let opts = AutoscalerOptions {
            history_max_age: Duration::from_secs(1),
            history_max_count: 3,
            ..AutoscalerOptions::default()
        };
        let mut t = ScalingTracking::default();
        for at in [0, 1_000, 2_000, 3_000, 4_000] {
            t.add(at);
        }
        t.trim(1_000_000, &opts);
        assert_eq!(t.records.keys().copied().collect::<Vec<_>>(), vec![4_000]);
        let opts = AutoscalerOptions {
            history_max_count: 0,
            ..opts
        };
        t.trim(1_000_000, &opts);
        assert_eq!(t.records.len(), 1);
    }

    #[test]
    fn restart_duration_recorded_when_parallelism_matches() {
        let mut h = ScalingHistory::default();
        let mut s = BTreeMap::new();
        s.insert("v".to_string(), summary(2, 4));
        h.add(10_000, &s);
        let mut t = ScalingTracking::default();
        t.add(10_000);
        let (at_2, at_4) = (observation(2), observation(4));
        let (at_2, at_4) = (
            Topology::from_observation(&at_2).unwrap(),
            Topology::from_observation(&at_4).unwrap(),
        );
        assert!(!t.record_restart_if_completed(70_000, &at_2, &h));
        assert!(t.record_restart_if_completed(70_000, &at_4, &h));
        assert_eq!(t.records[&10_000].restart_duration_ms, Some(60_000));
        // Already recorded: unchanged.
        assert!(!t.record_restart_if_completed(99_000, &at_4, &h));

        let mut opts = AutoscalerOptions::default();
        assert_eq!(t.restart_time(&opts), Duration::from_secs(300));
        opts.restart_time_tracking_enabled = true;
        assert_eq!(t.restart_time(&opts), Duration::from_secs(60));
        t.records.insert(
            20_000,
            ScalingRecord {
                restart_duration_ms: Some(3_600_500),
            },
        );
        // Capped at the tracking limit (15 min), not restart.time.
        assert_eq!(t.restart_time(&opts), Duration::from_secs(900));
    }
}
