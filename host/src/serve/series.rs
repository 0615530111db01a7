//! `flowscale_vertex_parallelism`: three gauges per vertex, the bulk of `/metrics` (60,000 of
//! the 64,000 samples of 1,000 jobs x 20 vertices).
//!
//! The gauges are plain atomics grouped by job, and their exposition is written here in one
//! pass from precomputed label text, instead of through the client's generic encoder: that
//! encoder costs about a microsecond per sample (40 ms for such a fleet), which a scrape every
//! second takes from the decision loop on a small machine. The text is the same in the
//! Prometheus and the OpenMetrics formats (a gauge family with a name, a help text and integer
//! samples), and the other families are still encoded by the client around it.
//!
//! The control loop only stores into atomics it already holds; a scrape takes the jobs' `Arc`s
//! under a lock held for the copy of a list of pointers, and reads the atomics after releasing
//! it, so neither waits for the other.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use super::label::escape;

/// The family's name.
const NAME: &str = "flowscale_vertex_parallelism";
/// The family's help text.
const HELP: &str = "Parallelism of a vertex: running (current), computed (target) and aligned";

/// The `kind` label of each of a vertex's three gauges, in order.
const KINDS: [&str; 3] = ["current", "target", "aligned"];

/// A gauge that has never been set: it is not exposed (a vertex without a target yet has no
/// `kind="target"` sample).
const ABSENT: i64 = i64::MIN;

/// The three gauges of a vertex.
struct VertexSeries {
    /// The vertex's name, to find it again in the next report.
    name: String,
    /// `job="...",vertex="...",kind="`, escaped, ready to be written.
    labels: String,
    values: [AtomicI64; 3],
}

/// A job's vertex gauges. The loop stores into the atomics; a vertex it has not seen yet
/// replaces the whole `Arc` (the values carried over), so a scrape reads a list that does not
/// change under it.
pub(super) struct JobSeries {
    job: String,
    vertices: Vec<VertexSeries>,
}

impl JobSeries {
    /// A job with no vertex yet.
    pub(super) fn new(job: &str) -> JobSeries {
        JobSeries {
            job: job.to_string(),
            vertices: Vec::new(),
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

    /// A copy with the vertices named in `names` that it lacks appended, at [`ABSENT`].
    pub(super) fn with_vertices<'a>(&self, names: impl Iterator<Item = &'a str>) -> JobSeries {
        let mut vertices: Vec<VertexSeries> = self
            .vertices
            .iter()
            .map(|v| VertexSeries {
                name: v.name.clone(),
                labels: v.labels.clone(),
                values: v
                    .values
                    .each_ref()
                    .map(|a| AtomicI64::new(a.load(Ordering::Relaxed))),
            })
            .collect();
        for name in names {
            if !vertices.iter().any(|v| v.name == name) {
                vertices.push(VertexSeries {
                    name: name.to_string(),
                    labels: labels(&self.job, name),
                    values: [ABSENT; 3].map(AtomicI64::new),
                });
            }
        }
        JobSeries {
            job: self.job.clone(),
            vertices,
        }
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
}

/// `job="<job>",vertex="<vertex>",kind="`, the label values escaped.
fn labels(job: &str, vertex: &str) -> String {
    let mut out = String::with_capacity(job.len() + vertex.len() + 24);
    out.push_str("job=\"");
    // Writing into a String cannot fail.
    let _ = escape(job, &mut out);
    out.push_str("\",vertex=\"");
    let _ = escape(vertex, &mut out);
    out.push_str("\",kind=\"");
    out
}

/// Writes the family (`# HELP`, `# TYPE` and every set gauge of `jobs`, in their order).
pub(super) fn write(jobs: &[Arc<JobSeries>], out: &mut String) {
    out.push_str("# HELP ");
    out.push_str(NAME);
    out.push(' ');
    out.push_str(HELP);
    out.push_str(".\n# TYPE ");
    out.push_str(NAME);
    out.push_str(" gauge\n");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_gauges_are_written_with_escaped_labels_and_unset_ones_are_not() {
        let job = JobSeries::new("j\"1").with_vertices(["a\\b", "c\nd"].into_iter());
        job.set(0, [Some(4), None, Some(8)]);
        job.set(1, [Some(2), Some(3), None]);
        let mut out = String::new();
        write(&[Arc::new(job)], &mut out);
        assert_eq!(
            out,
            "# HELP flowscale_vertex_parallelism Parallelism of a vertex: running (current), \
             computed (target) and aligned.\n\
             # TYPE flowscale_vertex_parallelism gauge\n\
             flowscale_vertex_parallelism{job=\"j\\\"1\",vertex=\"a\\\\b\",kind=\"current\"} 4\n\
             flowscale_vertex_parallelism{job=\"j\\\"1\",vertex=\"a\\\\b\",kind=\"aligned\"} 8\n\
             flowscale_vertex_parallelism{job=\"j\\\"1\",vertex=\"c\\nd\",kind=\"current\"} 2\n\
             flowscale_vertex_parallelism{job=\"j\\\"1\",vertex=\"c\\nd\",kind=\"target\"} 3\n"
        );
    }

    #[test]
    fn a_new_vertex_keeps_the_values_of_the_known_ones() {
        let job = JobSeries::new("j").with_vertices(["a"].into_iter());
        job.set(0, [Some(4), Some(5), Some(6)]);
        let grown = job.with_vertices(["b", "a"].into_iter());
        assert_eq!(grown.position(0, "a"), Some(0));
        assert_eq!(grown.position(0, "b"), Some(1));
        assert_eq!(grown.position(0, "c"), None);
        let values: Vec<i64> = grown.vertices[0]
            .values
            .iter()
            .map(|v| v.load(Ordering::Relaxed))
            .collect();
        assert_eq!(values, vec![4, 5, 6]);
        assert!(
            grown.vertices[1]
                .values
                .iter()
                .all(|v| v.load(Ordering::Relaxed) == ABSENT)
        );
    }
}
