//! Scaling history, scaling tracking and the restart time (docs/decision-pipeline.md#scaling-history).

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::vertex_history::{ScalingSummary, VertexHistory};
use crate::scaling::options::{AutoscalerOptions, millis, whole_seconds};
use crate::scaling::topology::Topology;

/// Executed changes per vertex id, keyed by decision instant (ms). Persisted per job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScalingHistory {
    /// Vertex id -> instant -> summary.
    pub vertices: BTreeMap<String, VertexHistory>,
}

impl ScalingHistory {
    /// Keeps entries not older than `history.max.age`, at most `history.max.count` per vertex,
    /// and drops vertices left empty or not in `topology`. One walk along the history and the
    /// graph's ids in id order (both are sorted the same way), every cycle; the map is rebuilt
    /// only in a cycle in which some vertex goes (in most, none does).
    pub(crate) fn trim_to(&mut self, now_ms: i64, opts: &AutoscalerOptions, topology: &Topology) {
        let (min_ts, max_count) = trim_limits(now_ms, opts);
        let mut graph = GraphWalk::new(topology);
        let mut drops = false;
        for (vertex, entries) in self.vertices.iter_mut() {
            trim_entries(entries, min_ts, max_count);
            drops |= entries.is_empty() || graph.index_of(vertex).is_none();
        }
        if drops {
            self.vertices
                .retain(|v, e| !e.is_empty() && topology.index.contains_key(v.as_str()));
        }
    }

    /// Records the summaries of one executed operation (by vertex id). A vertex scaled before
    /// keeps its entry: its id is copied only the first time. One walk along the history and
    /// the summaries (both in id order) finds the vertices scaled before; searching the
    /// history for each summary compared ids several times per vertex.
    pub(crate) fn add<K: Borrow<str> + Ord>(
        &mut self,
        now_ms: i64,
        summaries: &BTreeMap<K, ScalingSummary>,
    ) {
        let mut summaries = summaries.iter().peekable();
        // Vertices without a history yet, in id order (usually none).
        let mut first_time = Vec::new();
        for (vertex, entries) in self.vertices.iter_mut() {
            while let Some(&(v, s)) = summaries.peek() {
                match v.borrow().cmp(vertex.as_str()) {
                    Ordering::Less => {
                        first_time.push((v, s));
                        summaries.next();
                    }
                    Ordering::Equal => {
                        entries.insert(now_ms, s.clone());
                        summaries.next();
                        break;
                    }
                    Ordering::Greater => break,
                }
            }
            if summaries.peek().is_none() {
                break;
            }
        }
        for (v, s) in first_time.into_iter().chain(summaries) {
            let v: &str = v.borrow();
            self.vertices
                .insert(v.to_string(), VertexHistory::from([(now_ms, s.clone())]));
        }
    }
}

/// The vertices of a graph in id order, for finding those of ids asked for in id order (as the
/// history keeps them) in one walk: looking each up in the graph's index hashed every id,
/// every cycle.
struct GraphWalk<'t> {
    topology: &'t Topology,
    in_id_order: std::iter::Peekable<std::slice::Iter<'t, usize>>,
}

impl<'t> GraphWalk<'t> {
    fn new(topology: &'t Topology) -> GraphWalk<'t> {
        GraphWalk {
            topology,
            in_id_order: topology.index.in_id_order().iter().peekable(),
        }
    }

    /// The index of vertex `id`; `id` must not come before any id asked for earlier.
    fn index_of(&mut self, id: &str) -> Option<usize> {
        let ids = self.topology.index.ids();
        while let Some(&&index) = self.in_id_order.peek() {
            match ids.get(index).map(|graph_id| (**graph_id).cmp(id)) {
                Some(Ordering::Less) | None => {
                    self.in_id_order.next();
                }
                Some(Ordering::Equal) => {
                    self.in_id_order.next();
                    return Some(index);
                }
                Some(Ordering::Greater) => return None,
            }
        }
        None
    }
}

/// The oldest instant a history entry may have at `now_ms`, and how many entries a vertex keeps.
fn trim_limits(now_ms: i64, opts: &AutoscalerOptions) -> (i64, usize) {
    let min_ts = now_ms.saturating_sub(millis(opts.history_max_age));
    let max_count = usize::try_from(opts.history_max_count.max(0)).unwrap_or(usize::MAX);
    (min_ts, max_count)
}

/// Drops a vertex's entries older than `min_ts` and the oldest beyond `max_count`, from the
/// front: usually nothing.
fn trim_entries(entries: &mut VertexHistory, min_ts: i64, max_count: usize) {
    let too_old = entries.keys().take_while(|&&at| at < min_ts).count();
    let too_many = entries.len().saturating_sub(max_count);
    let drop = too_old.max(too_many);
    if drop > 0 {
        entries.drop_oldest(drop);
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
        let mut graph = GraphWalk::new(topology);
        let matches = history.vertices.iter().all(|(v, entries)| {
            let index = graph.index_of(v);
            let Some(summary) = entries.get(&at) else {
                return true;
            };
            index
                .and_then(|i| topology.vertices.get(i))
                .is_some_and(|vertex| vertex.parallelism == summary.new_parallelism)
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
    use std::sync::Arc;

    use super::*;
    use crate::engine::{JobObservation, JobStatus, ObservedVertex};
    use crate::scaling::metrics::VertexEvaluation;

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
                slot_sharing_group: None,
            }],
            edges: vec![],
            metrics: Default::default(),
            global: Default::default(),
            task_managers: None,
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
    fn add_finds_each_vertex_as_a_search_does() {
        let histories: [&[&str]; 4] = [&[], &["b"], &["a", "c", "e"], &["b", "d", "f", "g"]];
        let scaled: [&[&str]; 5] = [&[], &["a"], &["g"], &["a", "b", "c"], &["0", "c", "d", "z"]];
        for kept in histories {
            for now in scaled {
                let mut h = ScalingHistory::default();
                for (p, v) in kept.iter().enumerate() {
                    h.vertices.insert(
                        v.to_string(),
                        VertexHistory::from([(5, summary(1, p as u32))]),
                    );
                }
                let mut searched = h.clone();
                let summaries: BTreeMap<Arc<str>, ScalingSummary> = now
                    .iter()
                    .enumerate()
                    .map(|(p, v)| (Arc::from(*v), summary(2, p as u32)))
                    .collect();
                h.add(9, &summaries);
                for (v, s) in &summaries {
                    searched
                        .vertices
                        .entry(v.to_string())
                        .or_default()
                        .insert(9, s.clone());
                }
                assert_eq!(h, searched, "{kept:?} {now:?}");
            }
        }
    }

    #[test]
    fn the_graph_walk_finds_what_the_index_finds() {
        let mut obs = observation(1);
        let template = obs.vertices[0].clone();
        obs.vertices = ["m", "b", "zz", "a", "ba", "c"]
            .iter()
            .map(|id| ObservedVertex {
                id: id.to_string(),
                ..template.clone()
            })
            .collect();
        let topology = Topology::from_observation(&obs).unwrap();
        for asked in [
            vec![],
            vec!["a"],
            vec!["0", "a", "b", "bb", "c", "m", "z", "zz", "zzz"],
            vec!["b", "ba", "zz"],
            vec!["zzz"],
        ] {
            let mut walk = GraphWalk::new(&topology);
            for id in &asked {
                assert_eq!(
                    walk.index_of(id),
                    topology.index.get(id).copied(),
                    "{asked:?}"
                );
            }
        }
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
