//! A map from scaling metric to value with one place per metric.
//!
//! A vertex has at most a couple of dozen metrics, and the decision cycle writes and reads them
//! for every vertex of every job in every cycle. A `BTreeMap` allocates a node per vertex and
//! walks it on every access; this map is one flat array indexed by the metric's discriminant,
//! with one bit per metric that tells whether it is present. The bits rather than an `Option`
//! per place keep a vertex's collected sample at half the size: the window holds several
//! samples of every vertex of every job. Iteration follows the metrics' order, as
//! a `BTreeMap<ScalingMetric, _>` does, and it (de)serializes as the same JSON map.
//!
//! A map has places for the first `N` metrics only: a collected sample holds collected
//! metrics, which come first in the metrics' order, and an evaluated vertex the metrics up to
//! the expected processing rate. The window keeps several samples of every vertex of every
//! job, and the scaling history an evaluation per scaled vertex: places for metrics a map never
//! holds would make them three (samples) and one and a third (evaluations) times as large, and
//! the cycle reads them all from memory the caches do not hold at 10,000 jobs.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Index;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde::ser::{Serialize, Serializer};

use super::names::{EvaluatedScalingMetric, METRIC_COUNT, ScalingMetric};

/// Scaling metrics to values, in the metrics' order, with places for the first `N` metrics.
#[derive(Clone)]
pub struct MetricMap<V, const N: usize = METRIC_COUNT> {
    /// Bit `m` is set when metric `m` is present (then `m < N`).
    present: u32,
    /// The value of metric `m` at place `m`; a filler where absent.
    values: [V; N],
}

/// The places of a collected sample: the metrics up to the observed true processing rate.
pub(crate) const COLLECTED_COUNT: usize = ScalingMetric::ObservedTpr as usize + 1;

/// The places of an evaluated vertex: the metrics up to the expected processing rate.
pub(crate) const EVALUATED_COUNT: usize = ScalingMetric::ExpectedProcessingRate as usize + 1;

/// The collected metrics of one vertex in one sample.
pub(crate) type SampleMetrics = MetricMap<f64, COLLECTED_COUNT>;

// Every metric has its bit.
const _: () = assert!(METRIC_COUNT <= u32::BITS as usize);

/// The bit of `metric` in [`MetricMap::present`].
fn bit(metric: ScalingMetric) -> u32 {
    1 << metric as u32
}

impl<V: Copy + Default, const N: usize> MetricMap<V, N> {
    /// An empty map.
    pub(crate) fn new() -> MetricMap<V, N> {
        MetricMap {
            present: 0,
            values: [V::default(); N],
        }
    }
}

impl<V: Copy, const N: usize> MetricMap<V, N> {
    /// The value of `metric`, if present.
    #[inline]
    pub(crate) fn get(&self, metric: &ScalingMetric) -> Option<&V> {
        if self.present & bit(*metric) == 0 {
            return None;
        }
        self.values.get(*metric as usize)
    }

    /// Sets `metric` to `value`; returns the value it had. A metric without a place in this
    /// map is a bug of the caller: the maps are sized for what the pipeline writes into them.
    #[inline]
    pub(crate) fn insert(&mut self, metric: ScalingMetric, value: V) -> Option<V> {
        debug_assert!((metric as usize) < N, "{metric} has no place in this map");
        self.put(metric, value)
    }

    /// Sets `metric` to `value` when it has a place in this map (else drops it); returns the
    /// value it had.
    #[inline]
    fn put(&mut self, metric: ScalingMetric, value: V) -> Option<V> {
        let old = self.get(&metric).copied();
        if let Some(place) = self.values.get_mut(metric as usize) {
            *place = value;
            self.present |= bit(metric);
        }
        old
    }

    /// The present metrics, one bit per metric at its discriminant.
    #[inline]
    pub(crate) fn present(&self) -> u32 {
        self.present
    }

    /// Removes `metric`; returns the value it had.
    pub(crate) fn remove(&mut self, metric: &ScalingMetric) -> Option<V> {
        let old = self.get(metric).copied();
        self.present &= !bit(*metric);
        old
    }

    #[cfg(test)]
    /// True when `metric` is present.
    pub(crate) fn contains_key(&self, metric: &ScalingMetric) -> bool {
        self.get(metric).is_some()
    }

    #[cfg(test)]
    /// How many metrics are present.
    pub(crate) fn len(&self) -> usize {
        self.present.count_ones() as usize
    }

    /// The present metrics with their values, in the metrics' order.
    pub(crate) fn iter(&self) -> Iter<'_, V> {
        Iter {
            values: &self.values[..],
            left: self.present,
        }
    }
}

impl<V: Copy + Default, const N: usize> Default for MetricMap<V, N> {
    fn default() -> MetricMap<V, N> {
        MetricMap::new()
    }
}

impl<V: Copy + PartialEq, const N: usize> PartialEq for MetricMap<V, N> {
    /// Equal when the same metrics are present with equal values (as for a `BTreeMap`, a NaN
    /// value is not equal to itself).
    fn eq(&self, other: &MetricMap<V, N>) -> bool {
        self.present == other.present && self.iter().zip(other.iter()).all(|(a, b)| a.1 == b.1)
    }
}

impl<V: Copy + fmt::Debug, const N: usize> fmt::Debug for MetricMap<V, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V: Copy, const N: usize> Index<&ScalingMetric> for MetricMap<V, N> {
    type Output = V;

    /// The value of a metric that must be present.
    ///
    /// # Panics
    /// When the metric is absent, as indexing a `BTreeMap` does.
    fn index(&self, metric: &ScalingMetric) -> &V {
        match self.get(metric) {
            Some(value) => value,
            None => panic!("metric {metric} is not in the map"),
        }
    }
}

impl<V: Copy + Default, const N: usize> FromIterator<(ScalingMetric, V)> for MetricMap<V, N> {
    fn from_iter<I: IntoIterator<Item = (ScalingMetric, V)>>(entries: I) -> MetricMap<V, N> {
        let mut map = MetricMap::new();
        map.extend(entries);
        map
    }
}

impl<V: Copy, const N: usize> Extend<(ScalingMetric, V)> for MetricMap<V, N> {
    fn extend<I: IntoIterator<Item = (ScalingMetric, V)>>(&mut self, entries: I) {
        for (metric, value) in entries {
            self.insert(metric, value);
        }
    }
}

/// The present metrics of a [`MetricMap`] with their values, in the metrics' order.
pub struct Iter<'a, V> {
    values: &'a [V],
    /// The bits of the present metrics not listed yet.
    left: u32,
}

impl<'a, V> Iterator for Iter<'a, V> {
    type Item = (&'static ScalingMetric, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let place = self.left.trailing_zeros() as usize;
        self.left &= self.left - 1;
        Some((&ScalingMetric::ALL[place], &self.values[place]))
    }
}

impl<V> DoubleEndedIterator for Iter<'_, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let place = (u32::BITS - 1 - self.left.leading_zeros()) as usize;
        self.left &= !(1 << place);
        Some((&ScalingMetric::ALL[place], &self.values[place]))
    }
}

impl<'a, V: Copy, const N: usize> IntoIterator for &'a MetricMap<V, N> {
    type Item = (&'static ScalingMetric, &'a V);
    type IntoIter = Iter<'a, V>;

    fn into_iter(self) -> Iter<'a, V> {
        self.iter()
    }
}

impl<V: Copy + Serialize, const N: usize> Serialize for MetricMap<V, N> {
    /// As a map from the metric's name to its value, like a `BTreeMap<ScalingMetric, V>`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de, V: Copy + Default + Deserialize<'de>, const N: usize> Deserialize<'de>
    for MetricMap<V, N>
{
    /// From a map of metric names to values; a metric without a place in this map (which the
    /// pipeline never writes into it) is dropped.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<MetricMap<V, N>, D::Error> {
        struct MapVisitor<V, const N: usize>(PhantomData<V>);
        impl<'de, V: Copy + Default + Deserialize<'de>, const N: usize> Visitor<'de> for MapVisitor<V, N> {
            type Value = MetricMap<V, N>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map from scaling metric to value")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut access: A,
            ) -> Result<MetricMap<V, N>, A::Error> {
                let mut map = MetricMap::new();
                while let Some((metric, value)) = access.next_entry::<ScalingMetric, V>()? {
                    map.put(metric, value);
                }
                Ok(map)
            }
        }
        deserializer.deserialize_map(MapVisitor(PhantomData))
    }
}

/// Evaluated metrics of one vertex, by metric.
pub(crate) type VertexEvaluation = MetricMap<EvaluatedScalingMetric, EVALUATED_COUNT>;

/// A vertex's evaluated metric, with NaN halves when the evaluation did not produce it.
pub(crate) fn evaluated_or_nan(
    metrics: &VertexEvaluation,
    metric: ScalingMetric,
) -> EvaluatedScalingMetric {
    metrics
        .get(&metric)
        .copied()
        .unwrap_or(EvaluatedScalingMetric {
            current: f64::NAN,
            average: f64::NAN,
        })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn every_metric_has_its_own_place_in_order() {
        for (i, metric) in ScalingMetric::ALL.iter().enumerate() {
            assert_eq!(*metric as usize, i, "{metric}");
        }
        assert!(ScalingMetric::ALL.is_sorted());
    }

    #[test]
    fn behaves_as_a_btree_map_of_the_same_entries() {
        let entries = [
            (ScalingMetric::ScaleUpRateThreshold, 3.0),
            (ScalingMetric::Load, 0.5),
            (ScalingMetric::MetaspaceMemoryUsed, 9.0),
            (ScalingMetric::Lag, f64::INFINITY),
        ];
        let mut map: MetricMap<f64> = entries.into_iter().collect();
        let mut tree: BTreeMap<ScalingMetric, f64> = entries.into_iter().collect();
        assert_eq!(map.insert(ScalingMetric::Load, 0.7), Some(0.5));
        assert_eq!(tree.insert(ScalingMetric::Load, 0.7), Some(0.5));
        assert_eq!(map.remove(&ScalingMetric::Lag), Some(f64::INFINITY));
        assert_eq!(map.remove(&ScalingMetric::Lag), None);
        tree.remove(&ScalingMetric::Lag);
        let listed: Vec<(ScalingMetric, f64)> = map.iter().map(|(k, v)| (*k, *v)).collect();
        let expected: Vec<(ScalingMetric, f64)> = tree.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(listed, expected);
        let backwards: Vec<ScalingMetric> = map.iter().rev().map(|(k, _)| *k).collect();
        let tree_backwards: Vec<ScalingMetric> = tree.keys().rev().copied().collect();
        assert_eq!(backwards, tree_backwards);
        assert_eq!(map.len(), 3);
        assert!(map.contains_key(&ScalingMetric::Load));
        assert!(!map.contains_key(&ScalingMetric::Lag));
        assert_eq!(map[&ScalingMetric::MetaspaceMemoryUsed], 9.0);
        assert_eq!(format!("{map:?}"), format!("{tree:?}"));
        assert_eq!(
            serde_json::to_string(&map).unwrap(),
            serde_json::to_string(&tree).unwrap()
        );
        let back: MetricMap<f64> =
            serde_json::from_str(&serde_json::to_string(&tree).unwrap()).unwrap();
        assert_eq!(back, map);
    }

    #[test]
    fn sized_maps_keep_their_metrics_and_read_others_as_absent() {
        // A vertex's collected sample is one cache line.
        assert_eq!(std::mem::size_of::<SampleMetrics>(), 64);
        let mut sample = SampleMetrics::new();
        sample.insert(ScalingMetric::ObservedTpr, 2.0);
        assert_eq!(sample.get(&ScalingMetric::ObservedTpr), Some(&2.0));
        assert_eq!(sample.get(&ScalingMetric::TrueProcessingRate), None);
        // A stored sample with a metric that is never collected reads without it.
        let read: SampleMetrics =
            serde_json::from_str(r#"{"LOAD":0.5,"TRUE_PROCESSING_RATE":3.0,"OBSERVED_TPR":2.0}"#)
                .unwrap();
        assert_eq!(
            serde_json::to_string(&read).unwrap(),
            r#"{"LOAD":0.5,"OBSERVED_TPR":2.0}"#
        );
        let mut evaluated = VertexEvaluation::new();
        evaluated.insert(
            ScalingMetric::ExpectedProcessingRate,
            EvaluatedScalingMetric::of(1.0),
        );
        assert_eq!(evaluated.iter().count(), 1);
        assert!(evaluated.get(&ScalingMetric::GcPressure).is_none());
    }

    #[test]
    fn equality_looks_at_the_present_metrics_only() {
        let mut a = MetricMap::new();
        a.insert(ScalingMetric::Load, 1.0);
        a.insert(ScalingMetric::Lag, 2.0);
        a.remove(&ScalingMetric::Lag);
        let b: MetricMap<f64> = [(ScalingMetric::Load, 1.0)].into_iter().collect();
        assert_eq!(a, b);
        assert_ne!(a, MetricMap::new());
    }
}
