//! Builders of observations: a job graph with per-cycle metrics, for tests of the pipeline.

use std::collections::BTreeMap;

use crate::engine::{
    AggregatedMetric, IoMetrics, JobObservation, JobStatus, ObservedEdge, ObservedVertex,
    VertexMetrics,
};

/// A metric with the same value in every aggregate.
pub fn agg(v: f64) -> AggregatedMetric {
    AggregatedMetric {
        min: Some(v),
        max: Some(v),
        avg: Some(v),
        sum: Some(v),
    }
}

/// A job graph with per-cycle metrics set through small helpers.
#[derive(Debug, Clone)]
pub struct Job {
    /// The observation the pipeline is given.
    pub obs: JobObservation,
}

impl Default for Job {
    fn default() -> Job {
        Job::new()
    }
}

impl Job {
    /// A running job without vertices.
    pub fn new() -> Job {
        Job {
            obs: JobObservation {
                status: JobStatus::Running,
                running_since_ms: 0,
                vertices: Vec::new(),
                edges: Vec::new(),
                metrics: BTreeMap::new(),
                global: BTreeMap::new(),
                task_managers: None,
            },
        }
    }

    /// Adds a vertex named `<id> name`.
    pub fn vertex(mut self, id: &str, parallelism: u32, max_parallelism: u32) -> Job {
        self.obs.vertices.push(ObservedVertex {
            id: id.into(),
            name: format!("{id} name"),
            parallelism,
            max_parallelism,
            source_partitions: 0,
            finished: false,
            slot_sharing_group: None,
        });
        self
    }

    /// Puts vertex `id` into the slot-sharing group `group`.
    pub fn slot_sharing_group(mut self, id: &str, group: &str) -> Job {
        if let Some(v) = self.obs.vertices.iter_mut().find(|v| v.id == id) {
            v.slot_sharing_group = Some(group.into());
        }
        self
    }

    /// Adds an edge with a ship strategy (`HASH`, `REBALANCE`, ...).
    pub fn edge(mut self, from: &str, to: &str, strategy: &str) -> Job {
        self.obs.edges.push(ObservedEdge {
            from: from.into(),
            to: to.into(),
            ship_strategy: strategy.into(),
        });
        self
    }

    /// Source metrics: busy ms/s (max), cumulative records in, pending records, records/s.
    pub fn source(&mut self, id: &str, busy: f64, records_in: f64, lag: f64, per_sec: f64) {
        let aggregated = [
            ("busyTimeMsPerSecond", agg(busy)),
            ("backPressuredTimeMsPerSecond", agg(0.0)),
            ("Source__s.numRecordsInPerSecond", agg(per_sec)),
            ("Source__s.numRecordsIn", agg(records_in)),
            ("s.pendingRecords", agg(lag)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        self.obs.metrics.insert(
            id.into(),
            VertexMetrics {
                aggregated,
                io: IoMetrics {
                    num_records_in: records_in,
                    num_records_out: records_in,
                    accumulated_busy_time: 0.0,
                },
                subtasks: Vec::new(),
            },
        );
    }

    /// Non-source metrics: busy ms/s, cumulative records in and out, records in/s.
    pub fn operator(
        &mut self,
        id: &str,
        busy: f64,
        records_in: f64,
        records_out: f64,
        per_sec: f64,
    ) {
        let aggregated = [
            ("busyTimeMsPerSecond", agg(busy)),
            ("numRecordsInPerSecond", agg(per_sec)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        self.obs.metrics.insert(
            id.into(),
            VertexMetrics {
                aggregated,
                io: IoMetrics {
                    num_records_in: records_in,
                    num_records_out: records_out,
                    accumulated_busy_time: 0.0,
                },
                subtasks: Vec::new(),
            },
        );
    }
}

/// The Flink autoscaler's BacklogBasedScalingTest configuration
/// (docs/decision-pipeline.md#worked-example).
pub fn backlog_opts() -> crate::scaling::AutoscalerOptions {
    use std::time::Duration;
    crate::scaling::AutoscalerOptions {
        utilization_target: 0.8,
        utilization_max: Some(0.9),
        utilization_min: Some(0.7),
        catch_up_duration: Duration::from_secs(2),
        restart_time: Duration::from_secs(1),
        backlog_processing_lag_threshold: Duration::from_secs(1),
        metrics_window: Duration::from_secs(1),
        stabilization_interval: Duration::ZERO,
        ..crate::scaling::AutoscalerOptions::default()
    }
}
