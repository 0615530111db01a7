//! Delayed scale-down (docs/decision-pipeline.md#delayed-scale-down): a scale-down is only executed once it has been recommended
//! for a whole `scale-down.interval`, and then to the highest parallelism recommended within
//! that interval.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::iter::Peekable;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::scaling::topology::VertexIds;

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
pub(crate) struct VertexDelayedScaleDown {
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

/// Pending scale-downs per vertex id. Persisted per job (only when `is_updated()`), as a map
/// from vertex id to pending scale-down.
///
/// A cycle asks about every vertex of the job, so the entries of the current graph's vertices
/// are kept by the graph's index ([`DelayedScaleDown::bind`]): a vertex's entry is one slot
/// away instead of a search comparing ids, and a vertex that asks nothing costs nothing while
/// no vertex does. Entries of other ids (a restored state before its first cycle, vertices a
/// changed graph no longer has, which stay until the next executed operation as they always
/// did) are kept by id. The id is the only key that is saved or compared: where an entry is
/// kept never makes two states differ.
///
/// The lists of forgotten vertices are kept for the next ones: vertices start and stop asking
/// to scale down all the time (every executed operation forgets them all), and each start
/// allocated a list.
#[derive(Clone, Default)]
pub struct DelayedScaleDown {
    /// The graph `slots` are by: its ids and each id's index. None until a cycle binds one.
    graph: Option<Arc<VertexIds>>,
    /// The pending scale-down of each vertex of `graph`, by its index; empty until one of
    /// them starts asking.
    slots: Vec<Option<VertexDelayedScaleDown>>,
    /// How many of `slots` hold an entry.
    taken: usize,
    /// The pending scale-downs of ids that are not in `graph`, by id.
    others: BTreeMap<Arc<str>, VertexDelayedScaleDown>,
    updated: bool,
    /// Emptied recommendation lists, reused by the next vertices that start asking; never
    /// makes two states differ.
    spare: Vec<Vec<RecommendedParallelism>>,
}

/// The saved form: `{"vertices": {id: pending scale-down, ...}}` in id order.
#[derive(Serialize)]
struct Saved<'a> {
    vertices: Entries<'a>,
}

/// The saved form, read.
#[derive(Deserialize)]
struct Loaded {
    #[serde(with = "super::by_id")]
    vertices: BTreeMap<Arc<str>, VertexDelayedScaleDown>,
}

/// Every entry of a [`DelayedScaleDown`] in id order, serialized as a map.
struct Entries<'a>(&'a DelayedScaleDown);

impl Serialize for Entries<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.entries())
    }
}

impl Serialize for DelayedScaleDown {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Saved {
            vertices: Entries(self),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for DelayedScaleDown {
    /// A loaded state keeps every entry by id until its first cycle binds a graph.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let loaded = Loaded::deserialize(deserializer)?;
        Ok(DelayedScaleDown {
            others: loaded.vertices,
            ..DelayedScaleDown::default()
        })
    }
}

impl PartialEq for DelayedScaleDown {
    fn eq(&self, other: &DelayedScaleDown) -> bool {
        self.updated == other.updated && self.entries().eq(other.entries())
    }
}

impl Eq for DelayedScaleDown {}

impl fmt::Debug for DelayedScaleDown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayedScaleDown")
            .field("vertices", &DebugEntries(self))
            .field("updated", &self.updated)
            .finish()
    }
}

/// The entries as the map they stand for.
struct DebugEntries<'a>(&'a DelayedScaleDown);

impl fmt::Debug for DebugEntries<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.0.entries()).finish()
    }
}

/// Two iterators of entries in strictly increasing id order, merged into one.
struct Merged<A: Iterator, B: Iterator> {
    a: Peekable<A>,
    b: Peekable<B>,
}

impl<'a, A, B> Iterator for Merged<A, B>
where
    A: Iterator<Item = (&'a str, &'a VertexDelayedScaleDown)>,
    B: Iterator<Item = (&'a str, &'a VertexDelayedScaleDown)>,
{
    type Item = (&'a str, &'a VertexDelayedScaleDown);

    fn next(&mut self) -> Option<Self::Item> {
        let take_a = match (self.a.peek(), self.b.peek()) {
            (Some((a, _)), Some((b, _))) => a.cmp(b) != Ordering::Greater,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if take_a { self.a.next() } else { self.b.next() }
    }
}

impl DelayedScaleDown {
    /// Every entry with its id, in id order (the saved map's).
    fn entries(&self) -> impl Iterator<Item = (&str, &VertexDelayedScaleDown)> {
        let in_graph = self.graph.iter().flat_map(move |graph| {
            let ids = graph.ids();
            graph.in_id_order().iter().filter_map(move |&index| {
                let entry = self.slots.get(index)?.as_ref()?;
                Some((&**ids.get(index)?, entry))
            })
        });
        let others = self.others.iter().map(|(id, entry)| (&**id, entry));
        Merged {
            a: in_graph.peekable(),
            b: others.peekable(),
        }
    }

    /// Keeps the entries of `graph`'s vertices by its indices from now on, which the calls
    /// that name a vertex by index refer to. Called at the start of every decision; only a
    /// graph other than the bound one moves entries.
    pub(crate) fn bind(&mut self, graph: &Arc<VertexIds>) {
        if self.graph.as_ref().is_some_and(|g| Arc::ptr_eq(g, graph)) {
            return;
        }
        if let Some(old) = self.graph.take() {
            if self.taken > 0 {
                for (slot, id) in self.slots.iter_mut().zip(old.ids()) {
                    if let Some(entry) = slot.take() {
                        self.others.insert(Arc::clone(id), entry);
                    }
                }
            }
        }
        self.slots.clear();
        self.taken = 0;
        if !self.others.is_empty() {
            for (index, id) in graph.ids().iter().enumerate() {
                if let Some(entry) = self.others.remove(&**id) {
                    if self.slots.len() <= index {
                        self.slots.resize_with(graph.ids().len(), || None);
                    }
                    if let Some(slot) = self.slots.get_mut(index) {
                        *slot = Some(entry);
                        self.taken += 1;
                    }
                }
            }
        }
        self.graph = Some(Arc::clone(graph));
    }

    /// The slot of vertex `id`, given as the vertex at `index` of the bound graph: checked
    /// by identity of the shared id, else (a vertex of another graph) looked up by id. None
    /// when the id is not in the bound graph.
    fn slot_of(&self, index: usize, id: &Arc<str>) -> Option<usize> {
        let graph = self.graph.as_deref()?;
        match graph.ids().get(index) {
            Some(at) if Arc::ptr_eq(at, id) => Some(index),
            _ => graph.get(id).copied(),
        }
    }

    /// The entry of vertex `id`, wherever it is kept.
    #[cfg(test)]
    fn entry_mut(&mut self, id: &str) -> Option<&mut VertexDelayedScaleDown> {
        match self.graph.as_deref().and_then(|g| g.get(id).copied()) {
            Some(index) => self.slots.get_mut(index)?.as_mut(),
            None => self.others.get_mut(id),
        }
    }

    /// The pending scale-down of vertex `id`.
    #[cfg(test)]
    pub(crate) fn entry(&self, id: &str) -> Option<&VertexDelayedScaleDown> {
        self.entries().find(|(at, _)| *at == id).map(|(_, e)| e)
    }

    /// True when no vertex has a pending scale-down.
    pub fn is_empty(&self) -> bool {
        self.taken == 0 && self.others.is_empty()
    }

    /// Records a recommendation; drops earlier ones that are not higher, so the list stays
    /// decreasing.
    #[cfg(test)]
    pub(crate) fn trigger(&mut self, vertex: &str, now_ms: i64, parallelism: u32, outside: bool) {
        // No window starts before every recommendation: nothing is dropped.
        let id = Arc::from(vertex);
        self.trigger_in_window(usize::MAX, &id, now_ms, parallelism, outside, i64::MIN);
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
        let entry = self.entry_mut(vertex)?;
        let (max, dropped) = entry.max_in_window(window_start);
        self.updated |= dropped;
        max
    }

    /// Records a recommendation for vertex `id` at `index` of the bound graph (see
    /// [`VertexDelayedScaleDown::record`]), then returns the maximum of the window
    /// `[window_start, now]` (see [`VertexDelayedScaleDown::max_in_window`]): what a delayed
    /// scale-down asks every cycle, with one look at the vertex's entry.
    pub(crate) fn trigger_in_window(
        &mut self,
        index: usize,
        id: &Arc<str>,
        now_ms: i64,
        parallelism: u32,
        outside: bool,
        window_start: i64,
    ) -> Option<RecommendedParallelism> {
        let slot = self.slot_of(index, id);
        let spare = &mut self.spare;
        let mut fresh = || VertexDelayedScaleDown {
            first_trigger_time: now_ms,
            recommendations: spare.pop().unwrap_or_default(),
        };
        let entry = match slot {
            Some(index) => {
                if self.slots.len() <= index {
                    let len = self.graph.as_deref().map_or(0, |g| g.ids().len());
                    self.slots.resize_with(len.max(index + 1), || None);
                }
                match self.slots.get_mut(index) {
                    Some(Some(entry)) => entry,
                    Some(slot) => {
                        self.taken += 1;
                        slot.insert(fresh())
                    }
                    // Sized above.
                    None => return None,
                }
            }
            None => match self.others.get_mut(&**id) {
                Some(entry) => entry,
                None => self.others.entry(Arc::clone(id)).or_insert_with(fresh),
            },
        };
        entry.record(now_ms, parallelism, outside);
        let (max, _) = entry.max_in_window(window_start);
        self.updated = true;
        max
    }

    /// Forgets vertex `id` at `index` of the bound graph (its target equals the current
    /// parallelism, or it scales up).
    pub(crate) fn clear_vertex(&mut self, index: usize, id: &Arc<str>) {
        if self.taken == 0 && self.others.is_empty() {
            return;
        }
        let entry = match self.slot_of(index, id) {
            Some(index) => {
                let entry = self.slots.get_mut(index).and_then(Option::take);
                if entry.is_some() {
                    self.taken -= 1;
                }
                entry
            }
            None => self.others.remove(&**id),
        };
        if let Some(entry) = entry {
            self.keep_spare(entry.recommendations);
            self.updated = true;
        }
    }

    /// Forgets every vertex (after an executed scaling).
    pub(crate) fn clear_all(&mut self) {
        if self.taken == 0 && self.others.is_empty() {
            return;
        }
        if self.taken > 0 {
            for slot in &mut self.slots {
                if let Some(mut entry) = slot.take() {
                    entry.recommendations.clear();
                    self.spare.push(entry.recommendations);
                }
            }
            self.taken = 0;
        }
        for (_, entry) in std::mem::take(&mut self.others) {
            self.keep_spare(entry.recommendations);
        }
        self.updated = true;
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
        let ps: Vec<u32> = d
            .entry("v")
            .unwrap()
            .recommendations
            .iter()
            .map(|r| r.parallelism)
            .collect();
        assert_eq!(ps, vec![8, 7]);
        assert_eq!(d.entry("v").unwrap().first_trigger_time, 0);
        assert!(d.is_updated());
        // Window not yet covered.
        assert_eq!(d.max_in_window("v", -5), None);
        // Window [5, now]: the 8 at t=0 is stale, 7 at t=20 is the max.
        let max = d.max_in_window("v", 5).unwrap();
        assert_eq!((max.trigger_time, max.parallelism), (20, 7));
        assert_eq!(d.entry("v").unwrap().recommendations.len(), 1);
    }

    #[test]
    fn clearing_marks_updated_only_when_something_changes() {
        let mut d = DelayedScaleDown::default();
        d.clear_vertex(0, &Arc::from("v"));
        d.clear_all();
        assert!(!d.is_updated());
        d.trigger("v", 0, 1, false);
        d.mark_persisted();
        d.clear_all();
        assert!(d.is_updated());
        assert!(d.is_empty());
    }

    fn graph(ids: &[&str]) -> Arc<VertexIds> {
        Arc::new(VertexIds::new(
            ids.iter().map(|&id| Arc::from(id)).collect(),
        ))
    }

    /// Triggers the vertex at `index` of `graph` as a cycle does.
    fn trigger_at(d: &mut DelayedScaleDown, graph: &VertexIds, index: usize, now_ms: i64, p: u32) {
        let id = Arc::clone(&graph.ids()[index]);
        d.trigger_in_window(index, &id, now_ms, p, false, i64::MIN);
    }

    fn saved(d: &DelayedScaleDown) -> String {
        serde_json::to_string(d).unwrap()
    }

    #[test]
    fn saves_in_id_order_wherever_the_entries_are_kept() {
        let mut by_id = DelayedScaleDown::default();
        for (id, p) in [("c", 3), ("a", 1), ("d", 4), ("b", 2)] {
            by_id.trigger(id, 5, p, false);
        }
        let mut by_index = DelayedScaleDown::default();
        let g = graph(&["d", "b", "x"]);
        by_index.bind(&g);
        // "a" and "c" are not in the graph, "d" and "b" are.
        for (id, p) in [("c", 3), ("a", 1)] {
            by_index.trigger(id, 5, p, false);
        }
        trigger_at(&mut by_index, &g, 0, 5, 4);
        trigger_at(&mut by_index, &g, 1, 5, 2);
        assert_eq!(by_index.taken, 2);
        assert_eq!(by_index.others.len(), 2);
        assert_eq!(saved(&by_index), saved(&by_id));
        assert_eq!(by_index, by_id);
        assert_eq!(format!("{by_index:?}"), format!("{by_id:?}"));
        assert!(saved(&by_id).starts_with(r#"{"vertices":{"a":"#));

        // Restored, the same entries are found by the graph's indices.
        let mut restored: DelayedScaleDown = serde_json::from_str(&saved(&by_id)).unwrap();
        assert!(!restored.is_updated());
        restored.bind(&g);
        assert_eq!(restored.taken, 2);
        assert_eq!(saved(&restored), saved(&by_id));
        trigger_at(&mut restored, &g, 0, 6, 3);
        let d = restored.entry("d").unwrap();
        assert_eq!(d.first_trigger_time, 5);
        assert_eq!(d.recommendations.len(), 2);
    }

    #[test]
    fn a_changed_graph_keeps_the_entries_of_every_id() {
        let mut d = DelayedScaleDown::default();
        let g1 = graph(&["a", "b", "c"]);
        d.bind(&g1);
        trigger_at(&mut d, &g1, 0, 1, 5);
        trigger_at(&mut d, &g1, 2, 1, 7);
        let before = saved(&d);
        // "a" leaves the graph, "c" moves to another index, "e" is new.
        let g2 = graph(&["c", "e", "b"]);
        d.bind(&g2);
        assert_eq!((d.taken, d.others.len()), (1, 1));
        assert_eq!(saved(&d), before);
        trigger_at(&mut d, &g2, 1, 2, 9);
        d.clear_vertex(2, &Arc::clone(&g2.ids()[2]));
        // The entry of "c" is at its new index.
        d.clear_vertex(0, &Arc::clone(&g2.ids()[0]));
        assert!(d.entry("c").is_none());
        assert_eq!(
            saved(&d),
            r#"{"vertices":{"a":{"first_trigger_time":1,"recommendations":[{"trigger_time":1,"parallelism":5,"outside_utilization_bound":false}]},"e":{"first_trigger_time":2,"recommendations":[{"trigger_time":2,"parallelism":9,"outside_utilization_bound":false}]}}}"#
        );
        // A vertex named by another graph's id is still found by its id.
        d.clear_vertex(0, &Arc::from("e"));
        assert!(d.entry("e").is_none());
        // Back to the first graph: "a" returns to its slot.
        d.bind(&g1);
        assert_eq!((d.taken, d.others.len()), (1, 0));
        d.clear_all();
        assert!(d.is_empty());
        assert_eq!(saved(&d), r#"{"vertices":{}}"#);
        // The emptied lists are reused.
        assert_eq!(d.spare.len(), 3);
        trigger_at(&mut d, &g1, 1, 3, 2);
        assert_eq!(d.spare.len(), 2);
    }
}
