//! [`FlinkCollector`]: one job's topology and the metrics the autoscaler needs, read over REST.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use super::client::FlinkClient;
use super::metrics::{FlinkMetric, count_source_partitions, select_metric_names};
use super::resources::task_manager_resources;
use super::rest::{
    AggregatedEntry, ConfigEntry, JobDetails, Plan, PlanAnswer, TaskManagersAnswer, ValueEntry,
};
use super::topology::{Topology, all_tasks_up, build_topology, map_status};
use crate::engine::{
    AggregatedMetric, Collector, EngineError, JobObservation, JobStatus, SubtaskMetrics,
    TaskManagerResources, VertexMetrics,
};

/// JobManager metrics read into [`JobObservation::global`].
const JM_METRICS: [&str; 2] = ["taskSlotsTotal", "taskSlotsAvailable"];

/// TaskManager metrics read (their max over TaskManagers) into [`JobObservation::global`]. The
/// GC metric comes last because it is not always there.
const TM_METRICS: [&str; 5] = [
    "Status.JVM.Memory.Heap.Max",
    "Status.JVM.Memory.Heap.Used",
    "Status.Flink.Memory.Managed.Used",
    "Status.JVM.Memory.Metaspace.Used",
    "Status.JVM.GarbageCollector.All.TimeMsPerSecond",
];

/// Observes one job of a Flink cluster.
///
/// Per observation: the job details (status, `timestamps.RUNNING`, vertices with max parallelism
/// and IO counters) and the plan (edges and ship strategies), then, when the job runs, the
/// aggregated subtask metrics the Flink autoscaler queries (see docs/decision-pipeline.md#metric-collection) and the slot and memory
/// metrics of the cluster. Metric names are cached per job as the Flink autoscaler does: sources are
/// re-listed every time (`pendingRecords` appears lazily), everything is re-listed when the set of
/// vertices changes, and the cache is dropped when the job restarts.
#[derive(Debug)]
pub struct FlinkCollector {
    client: FlinkClient,
    job_id: String,
    /// Metric names per (unfinished) vertex.
    metric_names: BTreeMap<String, Vec<String>>,
    /// The `timestamps.RUNNING` the cache belongs to.
    names_running_since: Option<i64>,
    /// When the metric fetcher was last asked for anything (to know when to prime it).
    last_query: Option<Instant>,
    /// Whether the TaskManagers report the GC metric (None: not known yet).
    tm_gc_available: Option<bool>,
    /// The size of one TaskManager, with the `timestamps.RUNNING` it was read at: read once
    /// per (re)start of the job, since a cluster's TaskManagers do not change size while a job
    /// runs, and two more requests every cycle would only repeat the answer.
    task_managers: Option<(i64, TaskManagerResources)>,
}

impl FlinkCollector {
    /// A collector of job `job_id` on the cluster behind `client`.
    pub fn new(client: FlinkClient, job_id: impl Into<String>) -> FlinkCollector {
        FlinkCollector {
            client,
            job_id: job_id.into(),
            metric_names: BTreeMap::new(),
            names_running_since: None,
            last_query: None,
            tm_gc_available: None,
            task_managers: None,
        }
    }

    /// The size of one TaskManager (docs/decision-pipeline.md#resource-quota), read again when
    /// the job has (re)started since the last read. Best effort: what cannot be read is
    /// unknown, and an answer with nothing known is not kept, so the next cycle asks again.
    fn task_manager_resources(&mut self, running_since: i64) -> Option<TaskManagerResources> {
        if let Some((at, kept)) = self.task_managers
            && at == running_since
        {
            return Some(kept);
        }
        let config = self
            .client
            .get::<Vec<ConfigEntry>>("/jobmanager/config")
            .unwrap_or_else(|e| {
                tracing::debug!(job = %self.job_id, error = %e, "no JobManager configuration");
                Vec::new()
            });
        let task_managers = self
            .client
            .get::<TaskManagersAnswer>("/taskmanagers")
            .map(|a| a.taskmanagers)
            .unwrap_or_else(|e| {
                tracing::debug!(job = %self.job_id, error = %e, "no TaskManager list");
                Vec::new()
            });
        let resources = task_manager_resources(&config, &task_managers)?;
        self.task_managers = Some((running_since, resources));
        Some(resources)
    }

    fn details(&mut self) -> Result<JobDetails, EngineError> {
        let path = format!("/jobs/{}", self.job_id);
        let quiet = self
            .last_query
            .is_none_or(|t| t.elapsed() >= self.client.options().metrics_prime_after);
        let details: JobDetails = self.client.get(&path)?;
        if quiet && details.state.eq_ignore_ascii_case("RUNNING") {
            // The first read only woke the lazy metric fetcher up; its numbers are stale.
            std::thread::sleep(self.client.options().metrics_prime_delay);
            self.last_query = Some(Instant::now());
            return self.client.get(&path);
        }
        self.last_query = Some(Instant::now());
        Ok(details)
    }

    fn list_metric_names(&self, vertex: &str) -> Result<Vec<String>, EngineError> {
        let path = format!("/jobs/{}/vertices/{vertex}/subtasks/metrics", self.job_id);
        let entries: Vec<AggregatedEntry> = self.client.get(&path)?;
        Ok(entries.into_iter().map(|e| e.id).collect())
    }

    /// Refreshes the name cache for the unfinished vertices `active`. A vertex whose listing
    /// lacks even `busyTimeMsPerSecond` (its tasks have not reported yet, typical right after a
    /// start) is not cached, as in the Flink autoscaler, which only caches complete selections; its names
    /// are returned for this observation only, and the next one lists every vertex again.
    fn refresh_metric_names(
        &mut self,
        active: &BTreeSet<String>,
        sources: &BTreeSet<String>,
        running_since: i64,
    ) -> Result<BTreeMap<String, Vec<String>>, EngineError> {
        if self.names_running_since != Some(running_since) {
            self.metric_names.clear();
            self.tm_gc_available = None;
            self.names_running_since = Some(running_since);
        }
        let cached: BTreeSet<String> = self.metric_names.keys().cloned().collect();
        let to_list: Vec<String> = if &cached == active {
            active.intersection(sources).cloned().collect()
        } else {
            self.metric_names.clear();
            active.iter().cloned().collect()
        };
        let mut incomplete = BTreeMap::new();
        for vertex in to_list {
            let names = self.list_metric_names(&vertex)?;
            if names.iter().any(|n| FlinkMetric::BusyTimePerSec.matches(n)) {
                self.metric_names.insert(vertex, names);
            } else {
                incomplete.insert(vertex, names);
            }
        }
        Ok(incomplete)
    }

    fn vertex_metrics(
        &self,
        vertex: &str,
        available: Option<&Vec<String>>,
        is_source: bool,
    ) -> Result<BTreeMap<String, AggregatedMetric>, EngineError> {
        let names = available
            .map(|names| select_metric_names(names, is_source))
            .unwrap_or_default();
        if names.is_empty() {
            return Ok(BTreeMap::new());
        }
        let path = format!(
            "/jobs/{}/vertices/{vertex}/subtasks/metrics?get={}",
            self.job_id,
            query_list(&names)
        );
        let entries: Vec<AggregatedEntry> = self.client.get(&path)?;
        let wanted: BTreeSet<&String> = names.iter().collect();
        Ok(entries
            .into_iter()
            .filter(|e| wanted.contains(&e.id))
            .map(|e| {
                let metric = AggregatedMetric {
                    min: e.min,
                    max: e.max,
                    avg: e.avg,
                    sum: e.sum,
                };
                (e.id, metric)
            })
            .collect())
    }

    /// Each subtask's `busyTimeMsPerSecond` and `numRecordsInPerSecond`, in one request per
    /// vertex: the vertex metrics endpoint answers task metrics under `<subtask>.<name>`.
    /// Best effort: when the vertex reports neither metric, or the request fails, the vertex
    /// has no per-subtask load (alignment then treats every subtask alike).
    fn subtask_metrics(
        &self,
        vertex: &str,
        parallelism: u32,
        available: Option<&Vec<String>>,
    ) -> Vec<SubtaskMetrics> {
        let wanted: Vec<&str> = SUBTASK_METRICS
            .into_iter()
            .filter(|m| available.is_some_and(|names| names.iter().any(|n| n == m)))
            .collect();
        if wanted.is_empty() || parallelism == 0 || parallelism > MAX_SUBTASKS_READ {
            return Vec::new();
        }
        let names: Vec<String> = (0..parallelism)
            .flat_map(|i| wanted.iter().map(move |m| format!("{i}.{m}")))
            .collect();
        let path = format!(
            "/jobs/{}/vertices/{vertex}/metrics?get={}",
            self.job_id,
            query_list(&names)
        );
        match self.client.get::<Vec<ValueEntry>>(&path) {
            Ok(entries) => subtask_metrics_of(&entries, parallelism),
            Err(err) => {
                tracing::debug!(job = %self.job_id, vertex, %err, "no per-subtask metrics");
                Vec::new()
            }
        }
    }

    /// The TaskManager metrics (max over TaskManagers). Flink answers nothing when any requested
    /// name is missing; the GC metric is the one that may be, so an empty first answer is
    /// remembered as "no GC metric" and the rest asked for at once. An empty answer without
    /// the GC metric forgets that memo so the next observation probes again.
    fn taskmanager_metrics(&mut self) -> Result<Vec<AggregatedEntry>, EngineError> {
        loop {
            let names: &[&str] = if self.tm_gc_available == Some(false) {
                &TM_METRICS[..4]
            } else {
                &TM_METRICS
            };
            let path = format!("/taskmanagers/metrics?get={}&agg=max", names.join(","));
            let entries: Vec<AggregatedEntry> = self.client.get(&path)?;
            match (entries.is_empty(), self.tm_gc_available) {
                (true, None) => self.tm_gc_available = Some(false),
                (true, Some(_)) => {
                    self.tm_gc_available = None;
                    return Ok(entries);
                }
                (false, None) => {
                    self.tm_gc_available = Some(true);
                    return Ok(entries);
                }
                _ => return Ok(entries),
            }
        }
    }

    /// Slot and TaskManager memory metrics. Failing to read them degrades the observation (the
    /// decision does without), it does not fail it.
    fn global_metrics(&mut self) -> BTreeMap<String, f64> {
        let mut global = BTreeMap::new();
        let jm = self
            .client
            .get::<Vec<ValueEntry>>(&format!("/jobmanager/metrics?get={}", JM_METRICS.join(",")));
        match jm {
            Ok(entries) => {
                for entry in entries {
                    if let Some(v) = entry.value.and_then(|v| v.trim().parse::<f64>().ok()) {
                        global.insert(entry.id, v);
                    }
                }
            }
            Err(e) => tracing::warn!(job = %self.job_id, error = %e, "no JobManager metrics"),
        }
        match self.taskmanager_metrics() {
            Ok(entries) => {
                for entry in entries {
                    if let Some(max) = entry.max {
                        global.insert(entry.id, max);
                    }
                }
            }
            Err(e) => tracing::warn!(job = %self.job_id, error = %e, "no TaskManager metrics"),
        }
        global
    }

    /// The job's plan: the one embedded in the details, else `GET /jobs/:id/plan`.
    fn plan(&self, details: &JobDetails) -> Result<Plan, EngineError> {
        match &details.plan {
            Some(plan) if !plan.nodes.is_empty() => Ok(plan.clone()),
            _ => Ok(self
                .client
                .get::<PlanAnswer>(&format!("/jobs/{}/plan", self.job_id))?
                .plan),
        }
    }

    /// The topology of a job that is not running, as far as Flink can tell it: while a job
    /// restarts (after a TaskManager loss, or a rescale) its plan may be empty and its vertices
    /// may lack a parallelism. That is a state to wait out, not an error, so what cannot be read
    /// yet is left empty. A job Flink no longer knows is still reported as gone.
    fn waiting_topology(&self, details: &JobDetails) -> Result<Topology, EngineError> {
        let plan = match self.plan(details) {
            Ok(plan) => plan,
            Err(gone @ EngineError::JobGone(_)) => return Err(gone),
            Err(err) => {
                tracing::debug!(job = %self.job_id, error = %err, "no plan while the job is not running");
                Plan::default()
            }
        };
        Ok(build_topology(details, &plan).unwrap_or_else(|err| {
            tracing::debug!(job = %self.job_id, error = %err, "no topology while the job is not running");
            Topology::default()
        }))
    }
}

impl Collector for FlinkCollector {
    /// Reads the status first: only a running job's topology has to be complete, and only a
    /// running job's metrics are read. A job that is not running, or whose plan is still empty,
    /// is reported as waiting (its status, with what topology there is) so the loop waits
    /// instead of counting an error.
    fn observe(&mut self, _now_ms: i64) -> Result<JobObservation, EngineError> {
        let details = self.details()?;
        let mut status = map_status(
            &details.state,
            all_tasks_up(details.vertices.iter().map(|v| &v.tasks)),
        );
        let mut topology = if status == JobStatus::Running {
            let plan = self.plan(&details)?;
            match build_topology(&details, &plan) {
                Ok(topology) => topology,
                // RUNNING by its state, but the graph is not there yet (an empty plan, a
                // vertex without parallelism): not running as far as scaling goes.
                Err(EngineError::NotReady(why)) => {
                    tracing::debug!(job = %self.job_id, why, "RUNNING without a complete plan; waiting");
                    status = JobStatus::Created;
                    Topology::default()
                }
                Err(err) => return Err(err),
            }
        } else {
            self.waiting_topology(&details)?
        };
        let running_since = details
            .timestamps
            .get("RUNNING")
            .copied()
            .filter(|t| *t > 0);
        let mut observation = JobObservation {
            status,
            running_since_ms: running_since.unwrap_or(0),
            vertices: Vec::new(),
            edges: std::mem::take(&mut topology.edges),
            metrics: topology
                .io
                .iter()
                .map(|(id, io)| {
                    let metrics = VertexMetrics {
                        aggregated: BTreeMap::new(),
                        io: *io,
                        subtasks: Vec::new(),
                    };
                    (id.clone(), metrics)
                })
                .collect(),
            global: BTreeMap::new(),
            task_managers: None,
        };
        if status != JobStatus::Running {
            // Not running (yet): report the topology and status, the loop waits.
            observation.vertices = topology.vertices;
            return Ok(observation);
        }
        // Stabilization is measured from this timestamp; without it nothing can be judged.
        let Some(running_since) = running_since else {
            return Err(EngineError::NotReady(format!(
                "job {} is RUNNING but its details carry no timestamps.RUNNING",
                self.job_id
            )));
        };

        let active: BTreeSet<String> = topology
            .vertices
            .iter()
            .filter(|v| !v.finished)
            .map(|v| v.id.clone())
            .collect();
        let uncached = self.refresh_metric_names(&active, &topology.sources, running_since)?;
        let names_of = |id: &String| self.metric_names.get(id).or_else(|| uncached.get(id));
        for vertex in &mut topology.vertices {
            if topology.sources.contains(&vertex.id)
                && let Some(names) = names_of(&vertex.id)
            {
                vertex.source_partitions =
                    count_source_partitions(names.iter().map(String::as_str));
            }
        }
        for vertex in topology.vertices.iter().filter(|v| active.contains(&v.id)) {
            let id = &vertex.id;
            let aggregated =
                self.vertex_metrics(id, names_of(id), topology.sources.contains(id))?;
            let subtasks = self.subtask_metrics(id, vertex.parallelism, names_of(id));
            if let Some(metrics) = observation.metrics.get_mut(id) {
                metrics.aggregated = aggregated;
                metrics.subtasks = subtasks;
            }
        }
        observation.global = self.global_metrics();
        observation.task_managers = self.task_manager_resources(running_since);
        observation.vertices = topology.vertices;
        Ok(observation)
    }
}

/// The per-subtask metrics read for alignment, under Flink's names.
const SUBTASK_METRICS: [&str; 2] = ["busyTimeMsPerSecond", "numRecordsInPerSecond"];

/// Above this parallelism the per-subtask request is not made (its query would run to several
/// hundred kilobytes); such a vertex has no per-subtask load.
const MAX_SUBTASKS_READ: u32 = 4096;

/// The per-subtask metrics of `<subtask>.<name>` entries: one entry per subtask of
/// `parallelism`, each metric `None` where Flink gave no (numeric) value. Empty when no entry
/// carried a value.
fn subtask_metrics_of(entries: &[ValueEntry], parallelism: u32) -> Vec<SubtaskMetrics> {
    let mut out = vec![SubtaskMetrics::default(); parallelism as usize];
    let mut any = false;
    for entry in entries {
        let Some((index, name)) = entry.id.split_once('.') else {
            continue;
        };
        let (Ok(index), Some(value)) = (
            index.parse::<usize>(),
            entry
                .value
                .as_deref()
                .and_then(|v| v.trim().parse::<f64>().ok()),
        ) else {
            continue;
        };
        let Some(slot) = out.get_mut(index) else {
            continue;
        };
        match name {
            "busyTimeMsPerSecond" => slot.busy_time_ms_per_second = Some(value),
            "numRecordsInPerSecond" => slot.num_records_in_per_second = Some(value),
            _ => continue,
        }
        any = true;
    }
    if any { out } else { Vec::new() }
}

/// A comma-separated query value with each item percent-encoded (metric names may carry topic
/// names with characters a URL does not take as is).
fn query_list(items: &[String]) -> String {
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        for byte in item.bytes() {
            if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
                out.push(char::from(byte));
            } else {
                out.push_str(&format!("%{byte:02X}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, value: Option<&str>) -> ValueEntry {
        ValueEntry {
            id: id.to_string(),
            value: value.map(str::to_string),
        }
    }

    #[test]
    fn subtask_metrics_are_placed_by_their_index_prefix() {
        let entries = [
            entry("2.busyTimeMsPerSecond", Some("900.0")),
            entry("0.busyTimeMsPerSecond", Some("250")),
            entry("0.numRecordsInPerSecond", Some("1200.5")),
            entry("1.numRecordsInPerSecond", Some("NaN-ish")),
            entry("1.busyTimeMsPerSecond", None),
            entry("7.busyTimeMsPerSecond", Some("1000")),
            entry("x.busyTimeMsPerSecond", Some("1000")),
            entry("2.backPressuredTimeMsPerSecond", Some("3")),
        ];
        let got = subtask_metrics_of(&entries, 3);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].busy_time_ms_per_second, Some(250.0));
        assert_eq!(got[0].num_records_in_per_second, Some(1200.5));
        assert_eq!(got[1], SubtaskMetrics::default(), "nothing usable for 1");
        assert_eq!(got[2].busy_time_ms_per_second, Some(900.0));
        assert_eq!(got[2].num_records_in_per_second, None);
    }

    #[test]
    fn no_usable_subtask_value_means_no_subtask_metrics() {
        assert!(subtask_metrics_of(&[entry("0.busyTimeMsPerSecond", None)], 2).is_empty());
        assert!(subtask_metrics_of(&[], 2).is_empty());
    }

    #[test]
    fn query_lists_encode_items_but_keep_separators() {
        let items = vec![
            "busyTimeMsPerSecond".to_string(),
            "0.Source__k.KafkaSourceReader.topic.a b/c".to_string(),
        ];
        assert_eq!(
            query_list(&items),
            "busyTimeMsPerSecond,0.Source__k.KafkaSourceReader.topic.a%20b%2Fc"
        );
    }
}
