//! Every series of a job: `flowscale_vertex_parallelism` (four gauges per vertex), the
//! evaluated metrics of each vertex ([`super::vertex_gauges`]: rates, lag, load, thresholds),
//! its counters (`flowscale_decisions_total` and `flowscale_plugin_faults_total` per alignment
//! mode it ran, `flowscale_rescales_total`, `flowscale_engine_errors_total`), its lease gauges,
//! and the per-job families of [`super::job_gauges`] (events by reason, cycle lateness, the
//! times of the last decision and rescale, its interval and catch-up target, the cooldown).
//! The vertex families are the bulk of `/metrics`: about 11 samples per vertex.
//!
//! They are plain atomics grouped by job, and their exposition is written here in one pass per
//! family from precomputed label text, instead of through the client's generic encoder: that
//! encoder costs about a microsecond per sample (40 ms for 64,000 samples), which a scrape every
//! second takes from the decision loop on a small machine. Keeping a job's series in one value
//! of our own also means that removing the job removes them all: the client's label families
//! would keep a removed job's series until each label set was named again, and their tables
//! never shrink.
//!
//! The text of a gauge family is the same in the Prometheus and the OpenMetrics formats; a
//! counter family is named after its `_total` samples in the Prometheus format and without the
//! suffix in OpenMetrics, as the client does it.
//!
//! The control loop only stores into atomics it already holds; a scrape takes the jobs' `Arc`s
//! under a lock held for the copy of a list of pointers, and reads the atomics after releasing
//! it, so neither waits for the other.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use super::exposition::{header, sample, sample_f64};
use super::job_gauges::{self, JobGauges};
use super::label::escape;
use super::vertex_gauges::{self, VertexGauges};
use crate::events::EventReason;

/// The vertex family's name.
const NAME: &str = "flowscale_vertex_parallelism";
/// The vertex family's help text.
const HELP: &str = "Parallelism of a vertex: running (current), computed (target), aligned, \
                    and recommended (what the last decision cycle decided for it: its new \
                    parallelism when the cycle decided a rescale, else the current one; absent \
                    until the metric window is fully collected)";

/// The `kind` label of each of a vertex's four gauges, in order.
const KINDS: [&str; 4] = ["current", "target", "aligned", "recommended"];

/// The help text of the parallelism family, for the tests of its readers.
#[cfg(test)]
pub(super) fn tests_help() -> &'static str {
    HELP
}

/// What ends a vertex's label text before the `kind` label's value.
const KIND_LABEL: &str = ",kind=\"";

/// A gauge that has never been set: it is not exposed (a vertex without a target yet has no
/// `kind="target"` sample, a job that never held a lease no lease gauges).
const ABSENT: i64 = i64::MIN;

/// A counter family: its name (without `_total`), its help text and how to read a job's (or
/// a job's mode's) value.
struct CounterFamily<T> {
    name: &'static str,
    help: &'static str,
    value: fn(&T) -> &AtomicU64,
}

/// `flowscale_decisions_total{job, mode}`.
const DECISIONS: CounterFamily<ModeSeries> = CounterFamily {
    name: "flowscale_decisions",
    help: "Decision cycles that evaluated the job, by alignment mode",
    value: |m| &m.decisions,
};
/// `flowscale_rescales_total{job}`.
const RESCALES: CounterFamily<JobSeries> = CounterFamily {
    name: "flowscale_rescales",
    help: "Scaling operations realized on the engine",
    value: |j| &j.rescales,
};
/// `flowscale_plugin_faults_total{job, mode}`.
const PLUGIN_FAULTS: CounterFamily<ModeSeries> = CounterFamily {
    name: "flowscale_plugin_faults",
    help: "Plugin modes that panicked, failed or answered out of range",
    value: |m| &m.plugin_faults,
};
/// `flowscale_engine_errors_total{job}`.
const ENGINE_ERRORS: CounterFamily<JobSeries> = CounterFamily {
    name: "flowscale_engine_errors",
    help: "Steps whose engine could not be reached or refused a request",
    value: |j| &j.engine_errors,
};
/// `flowscale_lease_held{job}`: name and help text.
const LEASE_HELD: (&str, &str) = (
    "flowscale_lease_held",
    "With state shared by several hosts: 1 while this host holds the job's lease",
);
/// `flowscale_lease_token{job}`.
const LEASE_TOKEN: (&str, &str) = (
    "flowscale_lease_token",
    "The fencing token of the job's lease this host last held",
);
/// `flowscale_lease_owner{job, owner}`.
const LEASE_OWNER: (&str, &str) = (
    "flowscale_lease_owner",
    "With state shared by several hosts: 1 for the host (this one or another) that holds the \
     job's lease, named in the owner label, as this host's last lease round read it",
);

/// The gauges of a vertex.
struct VertexSeries {
    /// The vertex's name, to find it again in the next report.
    name: String,
    /// The vertex's id, which its evaluated metrics are found by.
    id: Arc<str>,
    /// `job="...",vertex="...",kind="`, escaped, ready to be written; without its
    /// [`KIND_LABEL`], the labels of the evaluated metrics.
    labels: String,
    /// `current`, `target`, `aligned` and `recommended` ([`KINDS`]).
    values: [AtomicI64; 4],
    /// The evaluated metrics.
    evaluated: VertexGauges,
}

impl VertexSeries {
    /// `job="...",vertex="..."`.
    fn base_labels(&self) -> &str {
        &self.labels[..self.labels.len() - KIND_LABEL.len()]
    }
}

/// The counters of a job under one alignment mode.
struct ModeSeries {
    mode: String,
    /// `job="...",mode="..."`, escaped.
    labels: String,
    decisions: AtomicU64,
    plugin_faults: AtomicU64,
}

/// Every series of a job. The loop stores into the atomics; a vertex or a mode it has not
/// seen yet replaces the whole `Arc` (the values carried over), so a scrape reads lists that
/// do not change under it.
pub(super) struct JobSeries {
    job: String,
    /// `job="..."`, escaped.
    job_label: String,
    /// The modes the job ran, in the order it first ran them.
    modes: Vec<ModeSeries>,
    rescales: AtomicU64,
    engine_errors: AtomicU64,
    /// 1 while this host holds the job's lease, 0 once it lost it; [`ABSENT`] before either.
    lease_held: AtomicI64,
    /// The token of the last lease held, [`ABSENT`] before one.
    lease_token: AtomicI64,
    vertices: Vec<VertexSeries>,
    /// Events by reason, lateness, times, interval, catch-up target, cooldown.
    gauges: JobGauges,
}

/// A copy of a counter's value, for a copy of the series that holds it.
fn copy_u64(a: &AtomicU64) -> AtomicU64 {
    AtomicU64::new(a.load(Ordering::Relaxed))
}

fn copy_i64(a: &AtomicI64) -> AtomicI64 {
    AtomicI64::new(a.load(Ordering::Relaxed))
}

impl JobSeries {
    /// A job with no vertex and no mode yet.
    pub(super) fn new(job: &str) -> JobSeries {
        let mut job_label = String::with_capacity(job.len() + 6);
        job_label.push_str("job=\"");
        push_escaped(job, &mut job_label);
        job_label.push('"');
        JobSeries {
            job: job.to_string(),
            job_label,
            modes: Vec::new(),
            rescales: AtomicU64::new(0),
            engine_errors: AtomicU64::new(0),
            lease_held: AtomicI64::new(ABSENT),
            lease_token: AtomicI64::new(ABSENT),
            vertices: Vec::new(),
            gauges: JobGauges::new(),
        }
    }

    /// A copy with the same values, changed by `change` before it is shared.
    fn copy(&self, change: impl FnOnce(&mut JobSeries)) -> JobSeries {
        let mut copy = JobSeries {
            job: self.job.clone(),
            job_label: self.job_label.clone(),
            modes: self
                .modes
                .iter()
                .map(|m| ModeSeries {
                    mode: m.mode.clone(),
                    labels: m.labels.clone(),
                    decisions: copy_u64(&m.decisions),
                    plugin_faults: copy_u64(&m.plugin_faults),
                })
                .collect(),
            rescales: copy_u64(&self.rescales),
            engine_errors: copy_u64(&self.engine_errors),
            lease_held: copy_i64(&self.lease_held),
            lease_token: copy_i64(&self.lease_token),
            vertices: self
                .vertices
                .iter()
                .map(|v| VertexSeries {
                    name: v.name.clone(),
                    id: Arc::clone(&v.id),
                    labels: v.labels.clone(),
                    values: v.values.each_ref().map(copy_i64),
                    evaluated: v.evaluated.copy(),
                })
                .collect(),
            gauges: self.gauges.copy(),
        };
        change(&mut copy);
        copy
    }

    /// The index of mode `mode`, once the job ran it ([`JobSeries::with_mode`]).
    pub(super) fn mode_position(&self, mode: &str) -> Option<usize> {
        self.modes.iter().position(|m| m.mode == mode)
    }

    /// A copy with mode `mode` added, its counters at 0.
    pub(super) fn with_mode(&self, mode: &str) -> JobSeries {
        self.copy(|job| {
            let mut labels = job.job_label.clone();
            labels.push_str(",mode=\"");
            push_escaped(mode, &mut labels);
            labels.push('"');
            job.modes.push(ModeSeries {
                mode: mode.to_string(),
                labels,
                decisions: AtomicU64::new(0),
                plugin_faults: AtomicU64::new(0),
            });
        })
    }

    /// Counts a step of the job under the mode at `mode` (from [`JobSeries::mode_position`]):
    /// a decision cycle, a realized operation, a failed engine call, plugin faults.
    pub(super) fn count(&self, mode: usize, step: Step) {
        if let Some(m) = self.modes.get(mode) {
            if step.decided {
                m.decisions.fetch_add(1, Ordering::Relaxed);
            }
            m.plugin_faults
                .fetch_add(step.plugin_faults, Ordering::Relaxed);
        }
        if step.rescaled {
            self.rescales.fetch_add(1, Ordering::Relaxed);
        }
        if step.engine_failed {
            self.engine_errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sets the lease gauges: held or not, and the token when known.
    pub(super) fn set_lease(&self, held: bool, token: Option<i64>) {
        self.lease_held.store(i64::from(held), Ordering::Relaxed);
        if let Some(token) = token {
            self.lease_token.store(token, Ordering::Relaxed);
        }
    }

    /// The index of the vertex named `name`, looked for first at `hint` (reports list the
    /// vertices in the same order every step).
    pub(super) fn position(&self, hint: usize, name: &str) -> Option<usize> {
        if self.vertices.get(hint).is_some_and(|v| v.name == name) {
            return Some(hint);
        }
        self.vertices.iter().position(|v| v.name == name)
    }

    /// True when the vertex at `index` is the one named `name` with id `id` (the usual case:
    /// the job's vertices are those of its previous step, their ids shared with the graph).
    pub(super) fn is_at(&self, index: usize, id: &Arc<str>, name: &str) -> bool {
        self.vertices
            .get(index)
            .is_some_and(|v| (Arc::ptr_eq(&v.id, id) || *v.id == **id) && v.name == name)
    }

    /// The id of the vertex at `index`, shared with the job's graph.
    pub(super) fn vertex_id_arc(&self, index: usize) -> Option<&Arc<str>> {
        self.vertices.get(index).map(|v| &v.id)
    }

    /// The id of the vertex at `index`.
    pub(super) fn vertex_id(&self, index: usize) -> Option<&str> {
        self.vertices.get(index).map(|v| &*v.id)
    }

    /// A copy with the vertices of `vertices` (id, name) that it lacks appended, unset, and
    /// the known ones given their id.
    pub(super) fn with_vertices<'a>(
        &self,
        vertices: impl Iterator<Item = (&'a Arc<str>, &'a str)>,
    ) -> JobSeries {
        self.copy(|job| {
            for (id, name) in vertices {
                if let Some(known) = job.vertices.iter_mut().find(|v| v.name == name) {
                    known.id = Arc::clone(id);
                    continue;
                }
                let labels = labels(&job.job, name);
                job.vertices.push(VertexSeries {
                    name: name.to_string(),
                    id: Arc::clone(id),
                    labels,
                    values: [ABSENT; 4].map(AtomicI64::new),
                    evaluated: VertexGauges::new(),
                });
            }
        })
    }

    /// Sets the vertex at `index` (from [`JobSeries::position`]): `current`, `target` and
    /// `aligned`, the ones that are `None` left as they are.
    pub(super) fn set(&self, index: usize, values: [Option<i64>; 3]) {
        if let Some(vertex) = self.vertices.get(index) {
            for (gauge, value) in vertex.values.iter().zip(values) {
                if let Some(value) = value {
                    gauge.store(value, Ordering::Relaxed);
                }
            }
        }
    }

    /// Sets what the vertex at `index` was evaluated at: its recommended parallelism and the
    /// values of [`vertex_gauges::FAMILIES`], `None` and NaN taking the series away.
    pub(super) fn set_evaluated(
        &self,
        index: usize,
        recommended: Option<i64>,
        values: [f64; vertex_gauges::COUNT],
    ) {
        if let Some(vertex) = self.vertices.get(index) {
            vertex.values[3].store(recommended.unwrap_or(ABSENT), Ordering::Relaxed);
            vertex.evaluated.set(values);
        }
    }

    /// The vertices' count.
    pub(super) fn vertex_count(&self) -> usize {
        self.vertices.len()
    }

    /// The job's own gauges and counters.
    pub(super) fn gauges(&self) -> &JobGauges {
        &self.gauges
    }

    /// True when every reason of `reasons` has its counter.
    pub(super) fn counts_reasons(&self, mut reasons: impl Iterator<Item = EventReason>) -> bool {
        reasons.all(|r| self.gauges.counts_reason(r))
    }

    /// A copy with a counter (at 0) for the reasons of `reasons` it lacks.
    pub(super) fn with_reasons(&self, reasons: impl Iterator<Item = EventReason>) -> JobSeries {
        self.copy(|job| {
            for reason in reasons {
                job.gauges.add_reason(reason);
            }
        })
    }
}

/// What one step adds to a job's counters.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Step {
    /// A decision cycle evaluated the job.
    pub(super) decided: bool,
    /// An operation was realized on the engine.
    pub(super) rescaled: bool,
    /// The engine could not be reached or refused a request.
    pub(super) engine_failed: bool,
    /// `PluginFault` events of the step.
    pub(super) plugin_faults: u64,
}

/// `job="<job>",vertex="<vertex>",kind="`, the label values escaped.
fn labels(job: &str, vertex: &str) -> String {
    let mut out = String::with_capacity(job.len() + vertex.len() + 24);
    out.push_str("job=\"");
    push_escaped(job, &mut out);
    out.push_str("\",vertex=\"");
    push_escaped(vertex, &mut out);
    out.push_str("\",kind=\"");
    out
}

/// Appends `value` to `out` escaped as a label value (see [`escape`]).
fn push_escaped(value: &str, out: &mut String) {
    // Writing into a String cannot fail.
    let _ = escape(value, out);
}

/// Writes the families of the vertices' evaluated metrics ([`vertex_gauges::FAMILIES`]): every
/// value that is not NaN, in the order of `jobs` and their vertices.
pub(super) fn write_vertex_gauges(jobs: &[Arc<JobSeries>], out: &mut String) {
    for (i, (name, help)) in vertex_gauges::FAMILIES.iter().enumerate() {
        header(out, name, help, false, true);
        for vertex in jobs.iter().flat_map(|j| &j.vertices) {
            let value = vertex.evaluated.get(i);
            if !value.is_nan() {
                sample_f64(out, name, vertex.base_labels(), value);
            }
        }
    }
}

/// Writes the per-job families of [`job_gauges`] for `jobs`, in their order.
pub(super) fn write_job_gauges(jobs: &[Arc<JobSeries>], openmetrics: bool, out: &mut String) {
    let jobs: Vec<(&str, &JobGauges)> = jobs
        .iter()
        .map(|j| (j.job_label.as_str(), &j.gauges))
        .collect();
    job_gauges::write(&jobs, openmetrics, out);
}

/// Writes the vertex family (`# HELP`, `# TYPE` and every set gauge of `jobs`, in their order).
pub(super) fn write(jobs: &[Arc<JobSeries>], out: &mut String) {
    header(out, NAME, HELP, false, true);
    for job in jobs {
        for vertex in &job.vertices {
            for (kind, value) in KINDS.iter().zip(&vertex.values) {
                let value = value.load(Ordering::Relaxed);
                if value == ABSENT {
                    continue;
                }
                out.push_str(NAME);
                out.push('{');
                out.push_str(&vertex.labels);
                out.push_str(kind);
                out.push_str("\"} ");
                // Writing into a String cannot fail.
                let _ = write!(out, "{value}");
                out.push('\n');
            }
        }
    }
}

/// Writes the counter and lease families of `jobs`, in their order, and `owners` (job ->
/// the host holding its lease), in the Prometheus text format or in OpenMetrics.
pub(super) fn write_job_families(
    jobs: &[Arc<JobSeries>],
    owners: &BTreeMap<String, String>,
    openmetrics: bool,
    out: &mut String,
) {
    let per_mode = |out: &mut String, family: &CounterFamily<ModeSeries>| {
        header(out, family.name, family.help, true, openmetrics);
        let total = format!("{}_total", family.name);
        for mode in jobs.iter().flat_map(|j| &j.modes) {
            sample(
                out,
                &total,
                &mode.labels,
                (family.value)(mode).load(Ordering::Relaxed),
            );
        }
    };
    let per_job = |out: &mut String, family: &CounterFamily<JobSeries>| {
        header(out, family.name, family.help, true, openmetrics);
        let total = format!("{}_total", family.name);
        for job in jobs {
            sample(
                out,
                &total,
                &job.job_label,
                (family.value)(job).load(Ordering::Relaxed),
            );
        }
    };
    per_mode(out, &DECISIONS);
    per_job(out, &RESCALES);
    per_mode(out, &PLUGIN_FAULTS);
    per_job(out, &ENGINE_ERRORS);
    for ((name, help), gauge) in [
        (
            LEASE_HELD,
            (|j| &j.lease_held) as fn(&JobSeries) -> &AtomicI64,
        ),
        (LEASE_TOKEN, |j| &j.lease_token),
    ] {
        header(out, name, help, false, openmetrics);
        for job in jobs {
            let value = gauge(job).load(Ordering::Relaxed);
            if value != ABSENT {
                sample(out, name, &job.job_label, value);
            }
        }
    }
    let (name, help) = LEASE_OWNER;
    header(out, name, help, false, openmetrics);
    let mut labels = String::new();
    for (job, owner) in owners {
        labels.clear();
        labels.push_str("job=\"");
        push_escaped(job, &mut labels);
        labels.push_str("\",owner=\"");
        push_escaped(owner, &mut labels);
        labels.push('"');
        sample(out, name, &labels, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(id, name)` pairs of vertices whose id is `id-<name>`.
    fn ids(names: &[&str]) -> Vec<(Arc<str>, String)> {
        names
            .iter()
            .map(|n| (Arc::from(format!("id-{n}")), n.to_string()))
            .collect()
    }

    fn with(job: &JobSeries, vertices: &[(Arc<str>, String)]) -> JobSeries {
        job.with_vertices(vertices.iter().map(|(id, name)| (id, name.as_str())))
    }

    #[test]
    fn set_gauges_are_written_with_escaped_labels_and_unset_ones_are_not() {
        let job = with(&JobSeries::new("j\"1"), &ids(&["a\\b", "c\nd"]));
        job.set(0, [Some(4), None, Some(8)]);
        job.set(1, [Some(2), Some(3), None]);
        job.set_evaluated(1, Some(5), [f64::NAN; vertex_gauges::COUNT]);
        let mut out = String::new();
        write(&[Arc::new(job)], &mut out);
        assert_eq!(
            out,
            format!(
                "# HELP flowscale_vertex_parallelism {HELP}.\n\
                 # TYPE flowscale_vertex_parallelism gauge\n\
                 flowscale_vertex_parallelism{{job=\"j\\\"1\",vertex=\"a\\\\b\",kind=\"current\"}} 4\n\
                 flowscale_vertex_parallelism{{job=\"j\\\"1\",vertex=\"a\\\\b\",kind=\"aligned\"}} 8\n\
                 flowscale_vertex_parallelism{{job=\"j\\\"1\",vertex=\"c\\nd\",kind=\"current\"}} 2\n\
                 flowscale_vertex_parallelism{{job=\"j\\\"1\",vertex=\"c\\nd\",kind=\"target\"}} 3\n\
                 flowscale_vertex_parallelism{{job=\"j\\\"1\",vertex=\"c\\nd\",kind=\"recommended\"}} 5\n"
            )
        );
    }

    #[test]
    fn evaluated_gauges_are_written_per_family_and_nan_ones_are_not() {
        let job = with(&JobSeries::new("j"), &ids(&["src", "sink"]));
        let mut src = [f64::NAN; vertex_gauges::COUNT];
        src[vertex_gauges::TRUE_PROCESSING_RATE] = 1500.0;
        src[vertex_gauges::LAG_SECONDS] = 2.5;
        src[vertex_gauges::SCALE_DOWN_THRESHOLD] = f64::INFINITY;
        let mut sink = [f64::NAN; vertex_gauges::COUNT];
        sink[vertex_gauges::TRUE_PROCESSING_RATE] = 0.125;
        job.set_evaluated(0, Some(4), src);
        job.set_evaluated(1, None, sink);
        let mut out = String::new();
        write_vertex_gauges(&[Arc::new(job)], &mut out);
        // Every family's header, in order, and the samples written by hand: a whole number
        // as `1500.0` (as the client writes it), infinity as `+Inf`.
        let mut expected = String::new();
        for (i, (name, help)) in vertex_gauges::FAMILIES.iter().enumerate() {
            expected.push_str(&format!("# HELP {name} {help}.\n# TYPE {name} gauge\n"));
            let lines: &[&str] = match i {
                vertex_gauges::TRUE_PROCESSING_RATE => &[
                    "{job=\"j\",vertex=\"src\"} 1500.0",
                    "{job=\"j\",vertex=\"sink\"} 0.125",
                ],
                vertex_gauges::LAG_SECONDS => &["{job=\"j\",vertex=\"src\"} 2.5"],
                vertex_gauges::SCALE_DOWN_THRESHOLD => &["{job=\"j\",vertex=\"src\"} +Inf"],
                _ => &[],
            };
            for line in lines {
                expected.push_str(&format!("{name}{line}\n"));
            }
        }
        assert_eq!(out, expected);
    }

    #[test]
    fn a_new_vertex_keeps_the_values_of_the_known_ones() {
        let job = with(&JobSeries::new("j"), &ids(&["a"]));
        job.set(0, [Some(4), Some(5), Some(6)]);
        let mut evaluated = [f64::NAN; vertex_gauges::COUNT];
        evaluated[vertex_gauges::LOAD] = 0.5;
        job.set_evaluated(0, Some(7), evaluated);
        let grown = with(&job, &ids(&["b", "a"]));
        assert_eq!(grown.position(0, "a"), Some(0));
        assert_eq!(grown.position(0, "b"), Some(1));
        assert_eq!(grown.position(0, "c"), None);
        assert_eq!(grown.vertex_id(1), Some("id-b"));
        let values: Vec<i64> = grown.vertices[0]
            .values
            .iter()
            .map(|v| v.load(Ordering::Relaxed))
            .collect();
        assert_eq!(values, vec![4, 5, 6, 7]);
        assert_eq!(grown.vertices[0].evaluated.get(vertex_gauges::LOAD), 0.5);
        assert!(
            grown.vertices[1]
                .values
                .iter()
                .all(|v| v.load(Ordering::Relaxed) == ABSENT)
        );
        assert!(
            grown.vertices[1]
                .evaluated
                .get(vertex_gauges::LOAD)
                .is_nan()
        );
    }

    #[test]
    fn a_vertex_whose_id_changed_takes_the_new_one() {
        let job = with(&JobSeries::new("j"), &ids(&["a"]));
        let renamed = job.with_vertices([(&Arc::from("other"), "a")].into_iter());
        assert_eq!(renamed.vertex_count(), 1);
        assert_eq!(renamed.vertex_id(0), Some("other"));
    }
}
