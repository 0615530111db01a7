//! Delayed scale-down (docs/decision-pipeline.md#delayed-scale-down): a scale-down is only executed once it has been recommended
//! for a whole `scale-down.interval`, and then to the highest parallelism recommended within
//! that interval.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// One recommendation of a scale-down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RecommendedParallelism {
    /// When it was recommended (ms).
    pub(crate) trigger_time: i64,
    /// The recommended (aligned) parallelism.
    pub(crate) parallelism: u32,
    /// Whether the vertex was outside its utilization band then.
    pub(crate) outside_utilization_bound: bool,
}

/// The pending scale-down of one vertex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VertexDelayedScaleDown {
    /// When the vertex first asked to scale down (ms).
    pub(crate) first_trigger_time: i64,
    /// Recommendations in strictly decreasing parallelism order: the head is the maximum.
    pub(crate) recommendations: Vec<RecommendedParallelism>,
}

impl VertexDelayedScaleDown {
    /// Records a recommendation; drops earlier ones that are not higher, so the list stays
    /// decreasing.
    fn record(&mut self, now_ms: i64, parallelism: u32, outside: bool) {
        while self
            .recommendations
            .last()
            .is_some_and(|r| r.parallelism <= parallelism)
        {
            self.recommendations.pop();
        }
        self.recommendations.push(RecommendedParallelism {
            trigger_time: now_ms,
            parallelism,
            outside_utilization_bound: outside,
        });
    }

    /// The maximum recommendation of the window `[window_start, now]`, or None while the
    /// vertex has not been asking for a whole interval, with whether recommendations older
    /// than the window were dropped.
    fn max_in_window(&mut self, window_start: i64) -> (Option<RecommendedParallelism>, bool) {
        if window_start < self.first_trigger_time {
            return (None, false);
        }
        let stale = self
            .recommendations
            .iter()
            .take_while(|r| r.trigger_time < window_start)
            .count();
        if stale > 0 {
            self.recommendations.drain(..stale);
        }
        (self.recommendations.first().copied(), stale > 0)
    }
}

/// Pending scale-downs per vertex id. Persisted per job (only when `is_updated()`).
///
/// Keyed by the graph's shared ids, and the lists of forgotten vertices are kept for the next
/// ones: vertices start and stop asking to scale down all the time (every executed operation
/// forgets them all), and each start copied an id and allocated a list.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct DelayedScaleDown {
    /// Vertex id -> pending scale-down.
    #[serde(with = "super::by_id")]
    pub vertices: BTreeMap<Arc<str>, VertexDelayedScaleDown>,
    #[serde(skip)]
    updated: bool,
    /// Emptied recommendation lists, reused by the next vertices that start asking; never
    /// makes two states differ.
    #[serde(skip)]
    spare: Vec<Vec<RecommendedParallelism>>,
}

impl PartialEq for DelayedScaleDown {
    fn eq(&self, other: &DelayedScaleDown) -> bool {
        self.vertices == other.vertices && self.updated == other.updated
    }
}

impl Eq for DelayedScaleDown {}

impl fmt::Debug for DelayedScaleDown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayedScaleDown")
            .field("vertices", &self.vertices)
            .field("updated", &self.updated)
            .finish()
    }
}

impl DelayedScaleDown {
    /// Records a recommendation; drops earlier ones that are not higher, so the list stays
    /// decreasing.
    #[cfg(test)]
    pub(crate) fn trigger(&mut self, vertex: &str, now_ms: i64, parallelism: u32, outside: bool) {
        // No window starts before every recommendation: nothing is dropped.
        self.trigger_in_window(&Arc::from(vertex), now_ms, parallelism, outside, i64::MIN);
    }

    /// The maximum recommendation of the window `[window_start, now]`, or None while the
    /// vertex has not been asking for a whole interval. Drops recommendations older than the
    /// window.
    #[cfg(test)]
    pub(crate) fn max_in_window(
        &mut self,
        vertex: &str,
        window_start: i64,
    ) -> Option<RecommendedParallelism> {
        let entry = self.vertices.get_mut(vertex)?;
        let (max, dropped) = entry.max_in_window(window_start);
        self.updated |= dropped;
        max
    }

    /// Records a recommendation (see [`VertexDelayedScaleDown::record`]), then returns the
    /// maximum of the window `[window_start, now]` (see
    /// [`VertexDelayedScaleDown::max_in_window`]): what a delayed scale-down asks every cycle,
    /// with one search of the map.
    pub(crate) fn trigger_in_window(
        &mut self,
        vertex: &Arc<str>,
        now_ms: i64,
        parallelism: u32,
        outside: bool,
        window_start: i64,
    ) -> Option<RecommendedParallelism> {
        let entry = match self.vertices.get_mut(&**vertex) {
            Some(entry) => entry,
            None => self
                .vertices
                .entry(Arc::clone(vertex))
                .or_insert(VertexDelayedScaleDown {
                    first_trigger_time: now_ms,
                    recommendations: self.spare.pop().unwrap_or_default(),
                }),
        };
        entry.record(now_ms, parallelism, outside);
        let (max, _) = entry.max_in_window(window_start);
        self.updated = true;
        max
    }

    /// Forgets a vertex (its target equals the current parallelism, or it scales up).
    pub(crate) fn clear_vertex(&mut self, vertex: &str) {
        if let Some(entry) = self.vertices.remove(vertex) {
            self.keep_spare(entry.recommendations);
            self.updated = true;
        }
    }

    /// Forgets every vertex (after an executed scaling).
    pub(crate) fn clear_all(&mut self) {
        if !self.vertices.is_empty() {
            for (_, entry) in std::mem::take(&mut self.vertices) {
                self.keep_spare(entry.recommendations);
            }
            self.updated = true;
        }
    }

    /// Keeps an emptied list for the next vertex that starts asking.
    fn keep_spare(&mut self, mut recommendations: Vec<RecommendedParallelism>) {
        recommendations.clear();
        self.spare.push(recommendations);
    }

    #[cfg(test)]
    /// True when modified since loaded (or since `mark_persisted`).
    pub(crate) fn is_updated(&self) -> bool {
        self.updated
    }

    #[cfg(test)]
    /// Marks the current content as persisted.
    pub(crate) fn mark_persisted(&mut self) {
        self.updated = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_a_decreasing_list_with_the_maximum_first() {
        let mut d = DelayedScaleDown::default();
        d.trigger("v", 0, 8, false);
        d.trigger("v", 10, 6, true);
        d.trigger("v", 20, 7, false);
        let ps: Vec<u32> = d.vertices["v"]
            .recommendations
            .iter()
            .map(|r| r.parallelism)
            .collect();
        assert_eq!(ps, vec![8, 7]);
        assert_eq!(d.vertices["v"].first_trigger_time, 0);
        assert!(d.is_updated());
        // Window not yet covered.
        assert_eq!(d.max_in_window("v", -5), None);
        // Window [5, now]: the 8 at t=0 is stale, 7 at t=20 is the max.
        let max = d.max_in_window("v", 5).unwrap();
        assert_eq!((max.trigger_time, max.parallelism), (20, 7));
        assert_eq!(d.vertices["v"].recommendations.len(), 1);
    }

    #[test]
    fn clearing_marks_updated_only_when_something_changes() {
        let mut d = DelayedScaleDown::default();
        d.clear_vertex("v");
        d.clear_all();
        assert!(!d.is_updated());
        d.trigger("v", 0, 1, false);
        d.mark_persisted();
        d.clear_all();
        assert!(d.is_updated());
        assert!(d.vertices.is_empty());
    }
}
