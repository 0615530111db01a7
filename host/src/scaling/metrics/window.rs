//! The metric window's contents: one sample of scaling metrics per cycle, and the samples of a
//! job kept between cycles (persisted with the job's state).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::metric_map::MetricMap;
use super::names::ScalingMetric;
use crate::scaling::serde_double;

/// The metrics collected in one cycle: per vertex and job-wide.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct CollectedMetrics {
    /// Per vertex id.
    #[serde(with = "vertex_samples")]
    pub(crate) vertices: BTreeMap<String, MetricMap<f64>>,
    /// Job-wide (GC pressure, heap usage, slots).
    #[serde(with = "serde_double::map", default)]
    pub(crate) global: BTreeMap<ScalingMetric, f64>,
}

/// `#[serde(with = "vertex_samples")]` for a `BTreeMap<K, MetricMap<f64>>` field: the
/// per-vertex metrics of a sample.
mod vertex_samples {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::MetricMap;
    use crate::scaling::serde_double::Double;

    pub(super) fn serialize<K: Serialize, S: Serializer>(
        m: &BTreeMap<K, MetricMap<f64>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        struct Inner<'a>(&'a MetricMap<f64>);
        impl Serialize for Inner<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_map(self.0.iter().map(|(k, v)| (k, Double(*v))))
            }
        }
        s.collect_map(m.iter().map(|(k, inner)| (k, Inner(inner))))
    }
    pub(super) fn deserialize<'de, K, D>(d: D) -> Result<BTreeMap<K, MetricMap<f64>>, D::Error>
    where
        K: Deserialize<'de> + Ord,
        D: Deserializer<'de>,
    {
        let raw = BTreeMap::<K, MetricMap<Double>>::deserialize(d)?;
        Ok(raw
            .into_iter()
            .map(|(k, inner)| (k, inner.iter().map(|(m, v)| (*m, v.0)).collect()))
            .collect())
    }
}

/// The collected samples of a job, keyed by the cycle instant (ms). Persisted per job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct MetricHistory {
    /// Samples in time order.
    pub(crate) samples: BTreeMap<i64, CollectedMetrics>,
}

impl MetricHistory {
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
