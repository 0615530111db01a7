//! The metric window's contents: one sample of scaling metrics per cycle, and the samples of a
//! job kept between cycles (persisted with the job's state).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::metric_map::SampleMetrics;
use super::names::ScalingMetric;
use crate::scaling::serde_double;
use crate::scaling::serde_double::Double;
use crate::scaling::topology::VertexIds;

/// The metrics collected in one cycle: per vertex and job-wide.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct CollectedMetrics {
    /// Per vertex id.
    pub(crate) vertices: VertexSamples,
    /// Job-wide (GC pressure, heap usage, slots).
    #[serde(with = "serde_double::map", default)]
    pub(crate) global: BTreeMap<ScalingMetric, f64>,
}

/// The metrics of every vertex in one sample, by the ids of the graph they were collected on
/// (shared with that graph's topology): a vertex of the same graph is found by its index, any
/// other by its id. Serialized as a map from vertex id to metrics, in id order.
#[derive(Clone, Default)]
pub(crate) struct VertexSamples {
    ids: Arc<VertexIds>,
    /// The metrics of vertex `ids[i]` at place `i`.
    values: Vec<SampleMetrics>,
}

impl VertexSamples {
    /// One map of metrics per id, in the ids' order.
    pub(crate) fn new(ids: Arc<VertexIds>, values: Vec<SampleMetrics>) -> VertexSamples {
        debug_assert_eq!(ids.ids().len(), values.len());
        VertexSamples { ids, values }
    }

    /// The metrics of vertex `id`.
    pub(crate) fn get(&self, id: &str) -> Option<&SampleMetrics> {
        self.values.get(*self.ids.get(id)?)
    }

    /// The metrics of vertex `index` of the graph with `ids` (that vertex's id is `id`).
    pub(crate) fn of(
        &self,
        ids: &Arc<VertexIds>,
        index: usize,
        id: &str,
    ) -> Option<&SampleMetrics> {
        if Arc::ptr_eq(&self.ids, ids) {
            self.values.get(index)
        } else {
            self.get(id)
        }
    }

    /// The metrics of every vertex, by index, when this sample was collected on the graph with
    /// `ids`.
    pub(crate) fn values_on(&self, ids: &Arc<VertexIds>) -> Option<&[SampleMetrics]> {
        Arc::ptr_eq(&self.ids, ids).then_some(&*self.values)
    }

    /// The metrics of vertex `id` to change.
    #[cfg(test)]
    pub(crate) fn get_mut(&mut self, id: &str) -> Option<&mut SampleMetrics> {
        self.values.get_mut(*self.ids.get(id)?)
    }

    /// The metrics of vertex `id`, added empty if absent.
    #[cfg(test)]
    pub(crate) fn entry_or_default(&mut self, id: &str) -> &mut SampleMetrics {
        let at = match self.ids.get(id) {
            Some(&at) => at,
            None => {
                let mut ids = self.ids.ids().to_vec();
                ids.push(Arc::from(id));
                self.ids = Arc::new(VertexIds::new(ids));
                self.values.push(SampleMetrics::new());
                self.values.len() - 1
            }
        };
        &mut self.values[at]
    }

    /// The buffer of per-vertex metrics, for the next sample to fill.
    pub(crate) fn into_values(self) -> Vec<SampleMetrics> {
        self.values
    }

    /// The vertices with their metrics, in id order.
    fn by_id(&self) -> Vec<(&str, &SampleMetrics)> {
        let mut pairs: Vec<(&str, &SampleMetrics)> = self
            .ids
            .ids()
            .iter()
            .map(|id| &**id)
            .zip(&self.values)
            .collect();
        pairs.sort_unstable_by(|a, b| a.0.cmp(b.0));
        pairs
    }
}

impl std::ops::Index<&str> for VertexSamples {
    type Output = SampleMetrics;

    /// The metrics of a vertex that must be present.
    ///
    /// # Panics
    /// When the vertex is absent, as indexing a `BTreeMap` does.
    fn index(&self, id: &str) -> &SampleMetrics {
        match self.get(id) {
            Some(metrics) => metrics,
            None => panic!("vertex {id} is not in the sample"),
        }
    }
}

impl PartialEq for VertexSamples {
    /// Equal when the same vertices have equal metrics, whatever graph they were collected on.
    fn eq(&self, other: &VertexSamples) -> bool {
        self.by_id() == other.by_id()
    }
}

impl fmt::Debug for VertexSamples {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.by_id()).finish()
    }
}

impl Serialize for VertexSamples {
    /// As a map from vertex id to metrics, in id order.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Inner<'a>(&'a SampleMetrics);
        impl Serialize for Inner<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_map(self.0.iter().map(|(k, v)| (k, Double(*v))))
            }
        }
        s.collect_map(self.by_id().into_iter().map(|(id, m)| (id, Inner(m))))
    }
}

impl<'de> Deserialize<'de> for VertexSamples {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<VertexSamples, D::Error> {
        let raw = BTreeMap::<String, BTreeMap<ScalingMetric, Double>>::deserialize(d)?;
        let mut ids = Vec::with_capacity(raw.len());
        let mut values = Vec::with_capacity(raw.len());
        for (id, metrics) in raw {
            ids.push(Arc::from(id));
            values.push(metrics.into_iter().map(|(m, v)| (m, v.0)).collect());
        }
        Ok(VertexSamples::new(Arc::new(VertexIds::new(ids)), values))
    }
}

/// The collected samples of a job, keyed by the cycle instant (ms). Persisted per job.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct MetricHistory {
    /// Samples in time order.
    pub(crate) samples: BTreeMap<i64, CollectedMetrics>,
    /// The per-vertex buffer of the sample the window dropped last, reused by the next sample.
    /// Not persisted, and never makes two histories differ.
    #[serde(skip)]
    spare: SpareBuffer,
}

/// A buffer kept for reuse: a job's sample is a kilobyte or more, and allocating it afresh every
/// cycle, while the window frees one of the same size, takes the allocator's slow paths.
#[derive(Default)]
struct SpareBuffer(Vec<SampleMetrics>);

impl Clone for SpareBuffer {
    /// Empty: a copy of the history does not need the buffer.
    fn clone(&self) -> SpareBuffer {
        SpareBuffer::default()
    }
}

impl PartialEq for SpareBuffer {
    fn eq(&self, _: &SpareBuffer) -> bool {
        true
    }
}

impl fmt::Debug for MetricHistory {
    /// The samples only, as without the buffer.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricHistory")
            .field("samples", &self.samples)
            .finish()
    }
}

impl MetricHistory {
    /// A buffer for the next sample's per-vertex metrics: the one a dropped sample left, else
    /// a new one.
    pub(crate) fn take_buffer(&mut self) -> Vec<SampleMetrics> {
        std::mem::take(&mut self.spare.0)
    }

    /// Drops the oldest sample, keeping its buffer for the next sample.
    pub(crate) fn drop_oldest(&mut self) {
        if let Some((_, oldest)) = self.samples.pop_first() {
            self.spare.0 = oldest.vertices.into_values();
        }
    }

    /// The newest sample.
    pub(crate) fn latest(&self) -> Option<&CollectedMetrics> {
        self.samples.last_key_value().map(|(_, m)| m)
    }
    /// Number of samples.
    pub(crate) fn len(&self) -> usize {
        self.samples.len()
    }
    #[cfg(test)]
    /// True when no sample is stored.
    pub(crate) fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(ids: &[&str]) -> Arc<VertexIds> {
        Arc::new(VertexIds::new(
            ids.iter().map(|id| Arc::from(*id)).collect(),
        ))
    }

    fn metrics(load: f64) -> SampleMetrics {
        [(ScalingMetric::Load, load), (ScalingMetric::Lag, f64::NAN)]
            .into_iter()
            .collect()
    }

    #[test]
    fn serializes_as_a_map_in_id_order() {
        // Topological order is not id order.
        let sample = VertexSamples::new(
            ids(&["c", "a", "b"]),
            vec![metrics(3.0), metrics(1.0), metrics(2.0)],
        );
        let as_map: BTreeMap<&str, SampleMetrics> = [
            ("a", metrics(1.0)),
            ("b", metrics(2.0)),
            ("c", metrics(3.0)),
        ]
        .into_iter()
        .collect();
        let json = serde_json::to_string(&sample).unwrap();
        assert!(json.starts_with("{\"a\":{\"LOAD\":1.0,\"LAG\":"), "{json}");
        let expected: serde_json::Value = serde_json::from_str(&json).unwrap();
        let map_json = serde_json::to_value(
            as_map
                .iter()
                .map(|(k, m)| {
                    let inner: BTreeMap<String, serde_json::Value> = m
                        .iter()
                        .map(|(metric, v)| {
                            (
                                metric.as_str().to_string(),
                                serde_json::to_value(Double(*v)).unwrap(),
                            )
                        })
                        .collect();
                    (k.to_string(), inner)
                })
                .collect::<BTreeMap<_, _>>(),
        )
        .unwrap();
        assert_eq!(expected, map_json);
        let back: VertexSamples = serde_json::from_str(&json).unwrap();
        assert_eq!(back["c"][&ScalingMetric::Load], 3.0);
        assert_eq!(format!("{back:?}"), format!("{sample:?}"));
    }

    #[test]
    fn finds_a_vertex_by_index_on_its_graph_and_by_id_on_another() {
        let graph = ids(&["c", "a", "b"]);
        let sample = VertexSamples::new(
            Arc::clone(&graph),
            vec![metrics(3.0), metrics(1.0), metrics(2.0)],
        );
        assert_eq!(
            sample.of(&graph, 1, "a").unwrap()[&ScalingMetric::Load],
            1.0
        );
        // The same ids in another graph (a rebuilt topology, a restored sample): by id.
        let rebuilt = ids(&["a", "b", "c", "d"]);
        assert_eq!(
            sample.of(&rebuilt, 0, "a").unwrap()[&ScalingMetric::Load],
            1.0
        );
        assert!(sample.of(&rebuilt, 3, "d").is_none());
        assert!(sample.get("d").is_none());
        // Equal whatever the order the vertices were collected in (finite values: a NaN is
        // never equal to itself).
        let finite =
            |load: f64| -> SampleMetrics { [(ScalingMetric::Load, load)].into_iter().collect() };
        let one = VertexSamples::new(ids(&["c", "a"]), vec![finite(3.0), finite(1.0)]);
        let other = VertexSamples::new(ids(&["a", "c"]), vec![finite(1.0), finite(3.0)]);
        assert_eq!(one, other);
        let changed = VertexSamples::new(ids(&["a", "c"]), vec![finite(1.0), finite(4.0)]);
        assert_ne!(one, changed);
        let fewer = VertexSamples::new(ids(&["a"]), vec![finite(1.0)]);
        assert_ne!(one, fewer);
    }
}
