//! The metric window's contents: one sample of scaling metrics per cycle, and the samples of a
//! job kept between cycles (persisted with the job's state).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::metric_map::MetricMap;
use super::names::ScalingMetric;
use crate::scaling::serde_double;

/// The metrics collected in one cycle: per vertex and job-wide.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CollectedMetrics {
    /// Per vertex id.
    #[serde(with = "serde_double::nested_map")]
    pub vertices: BTreeMap<String, MetricMap<f64>>,
    /// Job-wide (GC pressure, heap usage, slots).
    #[serde(with = "serde_double::map", default)]
    pub global: BTreeMap<ScalingMetric, f64>,
}

impl CollectedMetrics {
    /// A vertex metric, if collected.
    pub fn vertex(&self, vertex: &str, metric: ScalingMetric) -> Option<f64> {
        self.vertices.get(vertex)?.get(&metric).copied()
    }
}

/// The collected samples of a job, keyed by the cycle instant (ms). Persisted per job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricHistory {
    /// Samples in time order.
    pub samples: BTreeMap<i64, CollectedMetrics>,
}

impl MetricHistory {
    /// The newest sample.
    pub fn latest(&self) -> Option<&CollectedMetrics> {
        self.samples.last_key_value().map(|(_, m)| m)
    }
    /// Number of samples.
    pub fn len(&self) -> usize {
        self.samples.len()
    }
    /// True when no sample is stored.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}
