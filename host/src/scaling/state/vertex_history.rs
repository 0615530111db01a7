//! One vertex's scaling history: the summaries of its executed changes by decision instant, in
//! a sorted list.

use std::collections::VecDeque;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Index;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::scaling::metrics::VertexEvaluation;

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

/// A vertex's executed changes keyed by decision instant (ms), oldest first, each instant once:
/// what a `BTreeMap<i64, ScalingSummary>` holds, with the same order, insertion and JSON.
///
/// A vertex keeps at most `history.max.count` entries (a handful), and new ones come last. A
/// B-tree allocates a node of room for eleven (some 3 KiB with the summaries' metrics) for even
/// one entry, which at 10,000 jobs is cache lines read cold every cycle; a list holds the few
/// entries there are one after the other, and finds one by a short binary search. A ring
/// buffer, because the oldest entries leave from the front as new ones come at the back, every
/// cycle a vertex is scaled with its history full.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VertexHistory {
    /// Ascending by instant, no instant twice.
    entries: VecDeque<(i64, ScalingSummary)>,
}

impl VertexHistory {
    /// Adds the summary of instant `at`, replacing the one that instant had (as a map's
    /// `insert`), and returns the replaced one.
    pub(crate) fn insert(&mut self, at: i64, summary: ScalingSummary) -> Option<ScalingSummary> {
        // New instants are almost always the newest.
        if self.entries.back().is_none_or(|&(last, _)| last < at) {
            self.entries.push_back((at, summary));
            return None;
        }
        match self.entries.binary_search_by_key(&at, |&(t, _)| t) {
            Ok(i) => self
                .entries
                .get_mut(i)
                .map(|(_, kept)| std::mem::replace(kept, summary)),
            Err(i) => {
                self.entries.insert(i, (at, summary));
                None
            }
        }
    }

    /// The summary of instant `at`.
    pub fn get(&self, at: &i64) -> Option<&ScalingSummary> {
        // Usually asked for the newest.
        if let Some((last, summary)) = self.entries.back() {
            if last == at {
                return Some(summary);
            }
        }
        let i = self.entries.binary_search_by_key(at, |&(t, _)| t).ok()?;
        self.entries.get(i).map(|(_, s)| s)
    }

    /// True when instant `at` has a summary.
    pub fn contains_key(&self, at: &i64) -> bool {
        self.get(at).is_some()
    }

    /// The oldest entry.
    pub fn first_key_value(&self) -> Option<(&i64, &ScalingSummary)> {
        self.entries.front().map(|(t, s)| (t, s))
    }

    /// The newest entry.
    pub fn last_key_value(&self) -> Option<(&i64, &ScalingSummary)> {
        self.entries.back().map(|(t, s)| (t, s))
    }

    /// Drops the oldest `count` entries (all when there are fewer).
    pub(crate) fn drop_oldest(&mut self, count: usize) {
        self.entries.drain(..count.min(self.entries.len()));
    }

    /// The entries, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&i64, &ScalingSummary)> {
        self.entries.iter().map(|(t, s)| (t, s))
    }

    /// The instants, oldest first.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &i64> {
        self.entries.iter().map(|(t, _)| t)
    }

    /// The summaries, oldest first.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &ScalingSummary> {
        self.entries.iter().map(|(_, s)| s)
    }

    /// How many instants have a summary.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no instant has a summary.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<const N: usize> From<[(i64, ScalingSummary); N]> for VertexHistory {
    fn from(entries: [(i64, ScalingSummary); N]) -> VertexHistory {
        entries.into_iter().collect()
    }
}

impl FromIterator<(i64, ScalingSummary)> for VertexHistory {
    /// Inserted one by one: a later summary of an instant replaces an earlier one.
    fn from_iter<I: IntoIterator<Item = (i64, ScalingSummary)>>(entries: I) -> VertexHistory {
        let mut history = VertexHistory::default();
        for (at, summary) in entries {
            history.insert(at, summary);
        }
        history
    }
}

impl Index<&i64> for VertexHistory {
    type Output = ScalingSummary;

    /// The summary of instant `at`; panics when there is none, as a map does.
    fn index(&self, at: &i64) -> &ScalingSummary {
        self.get(at).expect("no scaling summary at this instant")
    }
}

impl Serialize for VertexHistory {
    /// A map from instant to summary, oldest first: as a `BTreeMap<i64, _>` is written.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.entries.len()))?;
        for (at, summary) in &self.entries {
            map.serialize_entry(at, summary)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for VertexHistory {
    /// A map from instant to summary in any order; an instant listed twice keeps its last
    /// summary: as a `BTreeMap<i64, _>` is read.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<VertexHistory, D::Error> {
        deserializer.deserialize_map(EntriesVisitor(PhantomData))
    }
}

struct EntriesVisitor(PhantomData<VertexHistory>);

impl<'de> Visitor<'de> for EntriesVisitor {
    type Value = VertexHistory;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map from decision instant to scaling summary")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<VertexHistory, A::Error> {
        // Bounded: the size hint comes from the input.
        let mut history = VertexHistory {
            entries: VecDeque::with_capacity(map.size_hint().unwrap_or(0).min(64)),
        };
        while let Some((at, summary)) = map.next_entry::<i64, ScalingSummary>()? {
            history.insert(at, summary);
        }
        Ok(history)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn summary(p: u32) -> ScalingSummary {
        ScalingSummary {
            current_parallelism: p,
            new_parallelism: p + 1,
            metrics: VertexEvaluation::new(),
        }
    }

    /// Sequences of insertions, with instants in and out of order and repeated.
    fn insertions() -> Vec<Vec<i64>> {
        vec![
            vec![],
            vec![5],
            vec![1, 2, 3, 4],
            vec![4, 3, 2, 1],
            vec![3, 1, 3, 2, 1, 5, 0, -7, 2],
            vec![i64::MIN, i64::MAX, 0, i64::MAX],
        ]
    }

    #[test]
    fn keeps_what_a_map_keeps() {
        for instants in insertions() {
            let mut map = BTreeMap::new();
            let mut list = VertexHistory::default();
            for (p, &at) in instants.iter().enumerate() {
                let p = p as u32;
                assert_eq!(list.insert(at, summary(p)), map.insert(at, summary(p)));
                assert_eq!(list.len(), map.len());
                assert_eq!(list.is_empty(), map.is_empty());
                assert!(list.iter().eq(map.iter()), "{instants:?}");
                assert!(list.keys().eq(map.keys()));
                assert!(list.values().eq(map.values()));
                assert_eq!(list.first_key_value(), map.first_key_value());
                assert_eq!(list.last_key_value(), map.last_key_value());
                for probe in [-7, 0, 1, 2, 3, 6, i64::MAX] {
                    assert_eq!(list.get(&probe), map.get(&probe));
                    assert_eq!(list.contains_key(&probe), map.contains_key(&probe));
                }
            }
            let collected: VertexHistory = instants
                .iter()
                .enumerate()
                .map(|(p, &at)| (at, summary(p as u32)))
                .collect();
            assert_eq!(collected, list);
            for count in 0..=list.len() + 1 {
                let mut dropped = list.clone();
                dropped.drop_oldest(count);
                let mut popped = map.clone();
                for _ in 0..count {
                    popped.pop_first();
                }
                assert!(dropped.iter().eq(popped.iter()));
            }
        }
    }

    #[test]
    fn reads_and_writes_json_as_a_map() {
        for instants in insertions() {
            let mut map = BTreeMap::new();
            let mut list = VertexHistory::default();
            for (p, &at) in instants.iter().enumerate() {
                map.insert(at, summary(p as u32));
                list.insert(at, summary(p as u32));
            }
            let written = serde_json::to_string(&map).unwrap();
            assert_eq!(serde_json::to_string(&list).unwrap(), written);
            assert_eq!(
                serde_json::to_value(&list).unwrap(),
                serde_json::to_value(&map).unwrap()
            );
            let read: VertexHistory = serde_json::from_str(&written).unwrap();
            assert_eq!(read, list);
            let read: VertexHistory =
                serde_json::from_value(serde_json::to_value(&map).unwrap()).unwrap();
            assert_eq!(read, list);
        }
        // Out of order and an instant twice, as a hand-edited state may have them.
        let (s, t) = (
            serde_json::to_string(&summary(1)).unwrap(),
            serde_json::to_string(&summary(2)).unwrap(),
        );
        let text = format!(r#"{{"9":{s},"-1":{s},"9":{t}}}"#);
        let map: BTreeMap<i64, ScalingSummary> = serde_json::from_str(&text).unwrap();
        let list: VertexHistory = serde_json::from_str(&text).unwrap();
        assert!(list.iter().eq(map.iter()));
        for bad in [r#"{"x":1}"#, "[]", r#"{"1":{}}"#] {
            assert!(serde_json::from_str::<VertexHistory>(bad).is_err(), "{bad}");
            assert!(serde_json::from_str::<BTreeMap<i64, ScalingSummary>>(bad).is_err());
        }
    }
}
