//! The simulator as an engine: loading a job file, and the [`Collector`] / [`Realizer`] seams
//! with Flink's metric names.

use std::collections::BTreeMap;
use std::path::Path;

use super::error::SimError;
use super::parse::parse_job;
use super::simulation::{Simulation, Subtask, VertexState};
use super::spec::{VertexKind, VertexSpec};
use crate::engine::{
    AggregatedMetric, Collector, EngineError, IoMetrics, JobObservation, JobStatus, ObservedEdge,
    ObservedVertex, Realizer, SubtaskMetrics, VertexMetrics, WriteFence,
};

impl Simulation {
    /// Loads a job file; trace paths in it are relative to the file.
    pub(crate) fn from_file(path: impl AsRef<Path>) -> Result<Simulation, SimError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| SimError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Ok(Simulation::new(parse_job(
            &text,
            &path.display().to_string(),
            base,
        )?))
    }

    /// Builds a simulation from job-file text (named `<string>` in errors; trace paths relative
    /// to the working directory).
    pub fn from_toml_str(text: &str) -> Result<Simulation, SimError> {
        Ok(Simulation::new(parse_job(
            text,
            "<string>",
            Path::new("."),
        )?))
    }

    /// Flink's metric-name form of a source vertex: non-alphanumerics become `_` (so
    /// `Source: orders` reads `Source__orders`), prefixed with `Source__` if the name lacks it.
    pub(crate) fn source_metric_prefix(name: &str) -> String {
        let clean: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        if clean.starts_with("Source__") {
            clean
        } else {
            format!("Source__{clean}")
        }
    }

    /// The job as a collector would report it right now.
    pub fn observation(&self) -> JobObservation {
        let tick_s = self.spec.tick_ms as f64 / 1000.0;
        let status = self.status();
        let vertices = self
            .spec
            .vertices
            .iter()
            .zip(&self.vertices)
            .map(|(s, v)| ObservedVertex {
                id: s.id.clone(),
                name: s.name.clone(),
                parallelism: v.parallelism,
                max_parallelism: s.max_parallelism,
                source_partitions: s.partitions,
                finished: v.finished,
                slot_sharing_group: Some(s.slot_sharing_group.clone()),
            })
            .collect();
        let edges = self
            .edges
            .iter()
            .map(|e| ObservedEdge {
                from: self.spec.vertices[e.from].id.clone(),
                to: self.spec.vertices[e.to].id.clone(),
                ship_strategy: e.ship.to_string(),
            })
            .collect();
        let mut metrics = BTreeMap::new();
        if status != JobStatus::Restarting {
            for (s, v) in self.spec.vertices.iter().zip(&self.vertices) {
                metrics.insert(s.id.clone(), vertex_metrics(s, v, tick_s));
            }
        }
        // A slot-sharing group needs as many slots as its widest vertex; the job, the sum over
        // its groups (with every vertex in the default group: its widest vertex).
        let slots = self.slots_needed();
        // On a shared cluster, the cluster's slots and those free, as Flink's `/overview`.
        let (total, available) = match self.pool() {
            Some(pool) => {
                let usage = pool.usage();
                (usage.slots, usage.free)
            }
            None => (slots, 0),
        };
        let global = BTreeMap::from([
            ("taskSlotsTotal".to_string(), f64::from(total)),
            ("taskSlotsAvailable".to_string(), f64::from(available)),
        ]);
        JobObservation {
            status,
            running_since_ms: self.running_since_ms,
            vertices,
            edges,
            metrics,
            global,
            task_managers: self.spec.task_managers,
        }
    }

    /// The slots the job occupies: per slot-sharing group its widest vertex, summed.
    fn slots_needed(&self) -> u32 {
        let mut widest: BTreeMap<&str, u32> = BTreeMap::new();
        for (s, v) in self.spec.vertices.iter().zip(&self.vertices) {
            let w = widest.entry(s.slot_sharing_group.as_str()).or_insert(0);
            *w = (*w).max(v.parallelism);
        }
        widest.values().sum()
    }
}

/// A vertex's metrics under Flink's names: the per-second rates and time shares of the last
/// tick aggregated over subtasks, a source's `Source__<name>.*` metrics, and the counters since
/// the last (re)start.
fn vertex_metrics(s: &VertexSpec, v: &VertexState, tick_s: f64) -> VertexMetrics {
    let per = |f: &dyn Fn(&Subtask) -> f64| {
        AggregatedMetric::from_subtasks(&v.subtasks.iter().map(f).collect::<Vec<_>>())
    };
    let mut m = BTreeMap::new();
    m.insert("busyTimeMsPerSecond".to_string(), per(&|t| t.busy_ms));
    m.insert(
        "backPressuredTimeMsPerSecond".to_string(),
        per(&|t| t.backpressured_ms),
    );
    m.insert("idleTimeMsPerSecond".to_string(), per(&|t| t.idle_ms));
    m.insert(
        "numRecordsInPerSecond".to_string(),
        per(&|t| t.records_in as f64 / tick_s),
    );
    m.insert(
        "numRecordsOutPerSecond".to_string(),
        per(&|t| t.records_out as f64 / tick_s),
    );
    if s.kind == VertexKind::Source {
        let prefix = Simulation::source_metric_prefix(&s.name);
        m.insert(
            format!("{prefix}.numRecordsInPerSecond"),
            per(&|t| t.records_in as f64 / tick_s),
        );
        m.insert(
            format!("{prefix}.numRecordsOutPerSecond"),
            per(&|t| t.records_out as f64 / tick_s),
        );
        m.insert(format!("{prefix}.numRecordsIn"), per(&|t| t.cum_in as f64));
        m.insert(
            format!("{prefix}.numRecordsOut"),
            per(&|t| t.cum_out as f64),
        );
        m.insert(
            format!("{prefix}.pendingRecords"),
            per(&|t| {
                t.partitions
                    .iter()
                    .map(|&k| v.partitions[k].pending as f64)
                    .sum()
            }),
        );
    }
    let io = IoMetrics {
        num_records_in: v.subtasks.iter().map(|t| t.cum_in as f64).sum(),
        num_records_out: v.subtasks.iter().map(|t| t.cum_out as f64).sum(),
        accumulated_busy_time: v.subtasks.iter().map(|t| t.cum_busy_ms).sum(),
    };
    let subtasks = v
        .subtasks
        .iter()
        .map(|t| SubtaskMetrics {
            busy_time_ms_per_second: Some(t.busy_ms),
            num_records_in_per_second: Some(t.records_in as f64 / tick_s),
        })
        .collect();
    VertexMetrics {
        aggregated: m,
        io,
        subtasks,
    }
}

impl Collector for Simulation {
    /// Advances the simulation to `now_ms` (simulated time), then reports it. `*PerSecond`
    /// metrics are those of the last tick (a tick is 1 s by default, so they are exactly Flink's
    /// per-second rates); counters (`numRecordsIn`, accumulated busy time) restart at 0 after
    /// every restart, as Flink's do.
    fn observe(&mut self, now_ms: i64) -> Result<JobObservation, EngineError> {
        self.take_free_slots();
        self.advance_to(now_ms);
        Ok(self.observation())
    }
}

impl Realizer for Simulation {
    /// Restarts the job with the new parallelism; it applies after the restart downtime. On a
    /// shared cluster, the job runs at most as wide as the slots it gets. The simulation is changed in one step: the fence is asked once.
    fn rescale_fenced(
        &mut self,
        parallelism: &BTreeMap<String, u32>,
        fence: &dyn WriteFence,
    ) -> Result<(), EngineError> {
        fence.check().map_err(EngineError::Abandoned)?;
        self.request_rescale(parallelism)
    }

    /// Limits how fast a source reads (split evenly over its subtasks that own partitions).
    fn set_rate_limit(
        &mut self,
        source_vertex: &str,
        records_per_second: Option<f64>,
    ) -> Result<(), EngineError> {
        self.limit_rate(source_vertex, records_per_second)
    }
}

impl std::str::FromStr for Simulation {
    type Err = SimError;

    /// Same as [`Simulation::from_toml_str`].
    fn from_str(text: &str) -> Result<Simulation, SimError> {
        Simulation::from_toml_str(text)
    }
}

impl Simulation {
    /// The summary of the run so far (the same as that of its whole timeline, but kept up to
    /// date tick by tick, whether or not the timeline is recorded).
    pub(crate) fn summary(&self) -> super::summary::Summary {
        self.summary.summary()
    }
}
