//! The Prometheus metrics of the host, through the official client (`prometheus-client`), but
//! for the per-vertex gauges (see [`super::series`]). The client writes label values as it gets
//! them, so every label set here holds [`LabelValue`]s, which escape themselves (see
//! [`super::label`]).
//!
//! Recording a step stores into counters and gauges the job's entry already holds (atomics
//! shared with the client's families), found with one lookup by job name: no label set is built
//! or hashed per sample, so the control loop pays a few microseconds per step, and it never
//! waits for a scrape.
//!
//! The encoded text is kept and served again (without a copy) until something changes: every
//! change bumps a generation counter, and a scrape encodes anew only when the generation moved
//! since the text it holds.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::body::Bytes;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use super::label::LabelValue;
use super::series::{self, JobSeries};
use crate::events::EventReason;
use crate::runner::CycleReport;

/// The content type of [`Metrics::encode`]'s output.
pub(crate) const OPENMETRICS_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of [`Metrics::encode_text`]'s output.
pub(crate) const TEXT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `{job, mode}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct JobModeLabels {
    /// The job.
    pub(crate) job: LabelValue,
    /// Its alignment mode.
    pub(crate) mode: LabelValue,
}

/// `{job}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct JobLabels {
    /// The job.
    pub(crate) job: LabelValue,
}

impl JobLabels {
    /// The labels of `job`.
    fn of(job: &str) -> JobLabels {
        JobLabels { job: job.into() }
    }
}

/// `{job, owner}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OwnerLabels {
    job: LabelValue,
    owner: LabelValue,
}

/// `{version}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: LabelValue,
}

/// What recording a step of a job touches: handles to its counters in the client's families
/// and its vertex gauges.
struct JobHandles {
    mode: String,
    decisions: Counter,
    plugin_faults: Counter,
    rescales: Counter,
    engine_errors: Counter,
    series: Arc<JobSeries>,
}

/// Every metric of the host, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    /// Every job's handles, by name (the order of the per-vertex samples).
    jobs: Mutex<BTreeMap<String, JobHandles>>,
    decisions: Family<JobModeLabels, Counter>,
    rescales: Family<JobLabels, Counter>,
    plugin_faults: Family<JobModeLabels, Counter>,
    engine_errors: Family<JobLabels, Counter>,
    cycle_duration: Histogram,
    plugins_loaded: Gauge<i64, AtomicI64>,
    lease_held: Family<JobLabels, Gauge>,
    lease_token: Family<JobLabels, Gauge>,
    lease_owner: Family<OwnerLabels, Gauge>,
    /// The owners `lease_owner` shows, job -> host.
    owners: Mutex<BTreeMap<String, String>>,
    /// Bumped after every change to a metric.
    generation: AtomicU64,
    /// The last encoded texts, in both formats.
    encoded: Mutex<Encoded>,
}

/// A text as encoded at a generation.
#[derive(Default)]
struct Cached {
    generation: Option<u64>,
    text: Bytes,
}

/// The last OpenMetrics and Prometheus texts.
#[derive(Default)]
struct Encoded {
    openmetrics: Cached,
    prometheus: Cached,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// The metrics, registered, all at zero.
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::default();
        // `flowscale_vertex_parallelism` is written by `series`, before these families.
        let decisions = Family::<JobModeLabels, Counter>::default();
        registry.register(
            "flowscale_decisions",
            "Decision cycles that evaluated the job, by alignment mode",
            decisions.clone(),
        );
        let rescales = Family::<JobLabels, Counter>::default();
        registry.register(
            "flowscale_rescales",
            "Scaling operations realized on the engine",
            rescales.clone(),
        );
        let plugin_faults = Family::<JobModeLabels, Counter>::default();
        registry.register(
            "flowscale_plugin_faults",
            "Plugin modes that panicked, failed or answered out of range",
            plugin_faults.clone(),
        );
        let engine_errors = Family::<JobLabels, Counter>::default();
        registry.register(
            "flowscale_engine_errors",
            "Steps whose engine could not be reached or refused a request",
            engine_errors.clone(),
        );
        // 100 us to about 26 s.
        let cycle_duration = Histogram::new(exponential_buckets(0.0001, 4.0, 10));
        registry.register_with_unit(
            "flowscale_cycle_duration",
            "Wall-clock time of one step of a job (observe, decide, act)",
            Unit::Seconds,
            cycle_duration.clone(),
        );
        let plugins_loaded = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "flowscale_plugins_loaded",
            "Plugin files loaded from the plugins directory",
            plugins_loaded.clone(),
        );
        let lease_held = Family::<JobLabels, Gauge>::default();
        registry.register(
            "flowscale_lease_held",
            "With state shared by several hosts: 1 while this host holds the job's lease",
            lease_held.clone(),
        );
        let lease_token = Family::<JobLabels, Gauge>::default();
        registry.register(
            "flowscale_lease_token",
            "The fencing token of the job's lease this host last held",
            lease_token.clone(),
        );
        let lease_owner = Family::<OwnerLabels, Gauge>::default();
        registry.register(
            "flowscale_lease_owner",
            "With state shared by several hosts: 1 for the host (this one or another) that holds \
             the job's lease, named in the owner label, as this host's last lease round read it",
            lease_owner.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").into(),
            })
            .set(1);
        registry.register(
            "flowscale_build_info",
            "Always 1; the flowscale version in its label",
            build,
        );
        Metrics {
            registry,
            jobs: Mutex::new(BTreeMap::new()),
            decisions,
            rescales,
            plugin_faults,
            engine_errors,
            cycle_duration,
            plugins_loaded,
            lease_held,
            lease_token,
            lease_owner,
            owners: Mutex::new(BTreeMap::new()),
            generation: AtomicU64::new(0),
            encoded: Mutex::new(Encoded::default()),
        }
    }

    /// Marks a change, after it was made: a scrape that read the generation before the change
    /// encodes again at the next scrape.
    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Sets the number of loaded plugin files.
    pub fn set_plugins_loaded(&self, loaded: usize) {
        self.plugins_loaded
            .set(i64::try_from(loaded).unwrap_or(i64::MAX));
        self.changed();
    }

    /// Shows `owners` (job -> host holding its lease) in `flowscale_lease_owner`, replacing
    /// what it showed: a job that changed hands has one series, with its new owner.
    pub(crate) fn set_owners(&self, owners: BTreeMap<String, String>) {
        let mut shown = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
        if *shown == owners {
            return;
        }
        self.lease_owner.clear();
        for (job, owner) in &owners {
            let labels = OwnerLabels {
                job: job.as_str().into(),
                owner: owner.as_str().into(),
            };
            self.lease_owner.get_or_create(&labels).set(1);
        }
        *shown = owners;
        drop(shown);
        self.changed();
    }

    fn lock_jobs(&self) -> MutexGuard<'_, BTreeMap<String, JobHandles>> {
        // Every update under the lock is a whole assignment: a panic leaves it consistent.
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The handles of `job` in `mode`, with its counters created (at 0) in the families.
    fn handles(&self, job: &str, mode: &str, series: Arc<JobSeries>) -> JobHandles {
        let labels = JobLabels::of(job);
        let modes = JobModeLabels {
            job: job.into(),
            mode: mode.into(),
        };
        JobHandles {
            mode: mode.to_string(),
            decisions: self.decisions.get_or_create(&modes).clone(),
            plugin_faults: self.plugin_faults.get_or_create(&modes).clone(),
            rescales: self.rescales.get_or_create(&labels).clone(),
            engine_errors: self.engine_errors.get_or_create(&labels).clone(),
            series,
        }
    }

    /// The entry of `job` in `mode` in `jobs`, made or moved to `mode` as needed.
    fn entry<'a>(
        &self,
        jobs: &'a mut BTreeMap<String, JobHandles>,
        job: &str,
        mode: &str,
    ) -> &'a mut JobHandles {
        let stale = jobs.get(job).map(|h| h.mode != mode);
        if stale != Some(false) {
            let series = jobs
                .get(job)
                .map_or_else(|| Arc::new(JobSeries::new(job)), |h| Arc::clone(&h.series));
            let handles = self.handles(job, mode, series);
            jobs.insert(job.to_string(), handles);
        }
        // Inserted just above when it was missing.
        jobs.get_mut(job).expect("the job's entry")
    }

    /// Counts a job with no step yet, so that its counters exist (at 0) from the start.
    pub fn add_job(&self, job: &str, mode: &str) {
        let mut jobs = self.lock_jobs();
        self.entry(&mut jobs, job, mode);
        drop(jobs);
        self.changed();
    }

    /// Takes in one step of a job running `mode`.
    pub(crate) fn record(&self, report: &CycleReport, mode: &str) {
        self.cycle_duration.observe(report.elapsed.as_secs_f64());
        let mut jobs = self.lock_jobs();
        let handles = self.entry(&mut jobs, &report.job, mode);
        if report.stage.is_some() {
            handles.decisions.inc();
        }
        if report.operation.is_some() {
            handles.rescales.inc();
        }
        if report.engine_failed {
            handles.engine_errors.inc();
        }
        let faults = report
            .events
            .iter()
            .filter(|e| e.reason == EventReason::PluginFault)
            .count();
        if faults > 0 {
            handles
                .plugin_faults
                .inc_by(u64::try_from(faults).unwrap_or(u64::MAX));
        }
        record_parallelism(handles, report);
        drop(jobs);
        self.record_leases(report);
        self.changed();
    }

    /// The lease gauges, from the step's lease events (rare: no handles kept).
    fn record_leases(&self, report: &CycleReport) {
        for event in &report.events {
            let held = match event.reason {
                EventReason::LeaseAcquired => 1,
                EventReason::LeaseLost => 0,
                _ => continue,
            };
            let job = JobLabels::of(&report.job);
            self.lease_held.get_or_create(&job).set(held);
            if let Some(&token) = event.details.get("token") {
                self.lease_token.get_or_create(&job).set(token);
            }
        }
    }

    /// The OpenMetrics text of every metric ([`OPENMETRICS_TYPE`]).
    #[cfg(test)]
    pub(crate) fn encode(&self) -> String {
        String::from_utf8_lossy(&self.encoded(true)).into_owned()
    }

    /// The Prometheus text format (0.0.4, [`TEXT_TYPE`]) of every metric, for clients that do
    /// not ask for OpenMetrics (`promtool`, `curl`): the same samples, with the counter
    /// families named after their `_total` samples and without OpenMetrics' `# UNIT` and
    /// `# EOF` lines.
    pub fn encode_text(&self) -> String {
        String::from_utf8_lossy(&self.encoded(false)).into_owned()
    }

    /// The text of [`Metrics::encode`] (`openmetrics`) or [`Metrics::encode_text`], shared with
    /// the cache rather than copied: what the server sends.
    pub fn encoded(&self, openmetrics: bool) -> Bytes {
        let mut encoded = self.encoded.lock().unwrap_or_else(PoisonError::into_inner);
        let cached = if openmetrics {
            &mut encoded.openmetrics
        } else {
            &mut encoded.prometheus
        };
        let generation = self.generation.load(Ordering::Acquire);
        if cached.generation != Some(generation) {
            cached.text = Bytes::from(self.render(openmetrics, cached.text.len()));
            cached.generation = Some(generation);
        }
        cached.text.clone()
    }

    /// Encodes every metric: the per-vertex gauges written directly, then the client's
    /// families (converted to the Prometheus text format unless `openmetrics`). `size` is the
    /// previous text's, so that the buffer does not grow step by step.
    fn render(&self, openmetrics: bool, size: usize) -> String {
        let series: Vec<Arc<JobSeries>> = self
            .lock_jobs()
            .values()
            .map(|h| Arc::clone(&h.series))
            .collect();
        let mut out = String::with_capacity(size + 1024);
        series::write(&series, &mut out);
        let mut client = String::with_capacity(64 * 1024);
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut client, &self.registry);
        if openmetrics {
            out.push_str(&client);
        } else {
            write_prometheus_text(&client, &mut out);
        }
        out
    }
}

/// Stores a step's parallelism into the job's gauges: the running parallelism (after the
/// step's operation), the target and the aligned target of every vertex.
fn record_parallelism(handles: &mut JobHandles, report: &CycleReport) {
    let known = |series: &JobSeries| {
        report
            .vertices
            .iter()
            .enumerate()
            .all(|(i, v)| series.position(i, &v.name).is_some())
    };
    if !known(&handles.series) {
        let names = report.vertices.iter().map(|v| &*v.name);
        handles.series = Arc::new(handles.series.with_vertices(names));
    }
    for (i, v) in report.vertices.iter().enumerate() {
        let running = report
            .operation
            .as_ref()
            .and_then(|op| op.get(&*v.vertex))
            .copied()
            .unwrap_or(v.current);
        if let Some(index) = handles.series.position(i, &v.name) {
            handles.series.set(
                index,
                [Some(running), v.target, v.aligned].map(|p| p.map(i64::from)),
            );
        }
    }
}

/// Converts the client's OpenMetrics output to the Prometheus text format.
#[cfg(test)]
fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::new();
    write_prometheus_text(openmetrics, &mut out);
    out
}

/// Converts the client's OpenMetrics output to the Prometheus text format, into `out`, in one
/// pass: a counter family's `# HELP` line comes just
/// before its `# TYPE` line, so one line of look-ahead tells which names take `_total`.
fn write_prometheus_text(openmetrics: &str, out: &mut String) {
    out.reserve(openmetrics.len() + 1024);
    // Split at line feeds only: a carriage return inside a label value stays where it is.
    let mut lines = openmetrics.split_terminator('\n').peekable();
    while let Some(line) = lines.next() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let family_line = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|prefix| Some((prefix, line.strip_prefix(prefix)?.split_once(' ')?)));
        match family_line {
            Some((prefix, (name, tail))) if is_counter(name, prefix, line, lines.peek()) => {
                out.push_str(prefix);
                out.push_str(name);
                out.push_str("_total ");
                out.push_str(tail);
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
}

/// Whether the family line `line` (a `prefix` line of family `name`) belongs to a counter: its
/// own `# TYPE` says so, or, for `# HELP`, the `# TYPE` line that follows it.
fn is_counter(name: &str, prefix: &str, line: &str, next: Option<&&str>) -> bool {
    let type_line = if prefix == "# TYPE " {
        Some(line)
    } else {
        next.copied()
    };
    type_line
        .and_then(|l| l.strip_prefix("# TYPE "))
        .and_then(|l| l.strip_prefix(name))
        .is_some_and(|rest| rest == " counter")
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::events::{Event, Severity};

    #[test]
    fn counters_take_total_in_help_and_type_and_openmetrics_lines_go() {
        let openmetrics = "# HELP a_things Things.\n# TYPE a_things counter\na_things_total{job=\"j\"} 3\n\
                           # HELP b_level Level.\n# TYPE b_level gauge\nb_level 1\n\
                           # HELP c_seconds Time.\n# TYPE c_seconds histogram\n# UNIT c_seconds seconds\n\
                           c_seconds_count 0\n# EOF\n";
        assert_eq!(
            to_prometheus_text(openmetrics),
            "# HELP a_things_total Things.\n# TYPE a_things_total counter\na_things_total{job=\"j\"} 3\n\
             # HELP b_level Level.\n# TYPE b_level gauge\nb_level 1\n\
             # HELP c_seconds Time.\n# TYPE c_seconds histogram\nc_seconds_count 0\n"
        );
    }

    #[test]
    fn a_family_named_like_the_start_of_a_counter_is_not_renamed() {
        // `a` is a gauge; the counter `a_things` follows it: only exact names count.
        let openmetrics =
            "# HELP a A.\n# TYPE a gauge\na 1\n# HELP a_things T.\n# TYPE a_things counter\n";
        assert_eq!(
            to_prometheus_text(openmetrics),
            "# HELP a A.\n# TYPE a gauge\na 1\n# HELP a_things_total T.\n# TYPE a_things_total counter\n"
        );
    }

    /// A step of job `j` with vertices `(name, current, target)`.
    fn step(vertices: &[(&str, u32, Option<u32>)]) -> CycleReport {
        let mut report = CycleReport::new("j", 10_000);
        report.stage = Some(crate::scaling::CycleStage::WithinBounds);
        report.vertices = vertices
            .iter()
            .map(|&(name, current, target)| crate::scaling::VertexDecision {
                vertex: format!("id-{name}").into(),
                name: name.into(),
                current,
                target,
                aligned: target,
                proposed: target,
                mode: None,
                outside_band: false,
                excluded: false,
                reason: "within bounds".into(),
                explanation: Vec::<String>::new().into(),
            })
            .collect();
        report
    }

    #[test]
    fn vertex_gauges_follow_steps_new_vertices_and_mode_changes() {
        let metrics = Metrics::new();
        metrics.add_job("j", "BALANCED");
        metrics.record(&step(&[("a", 2, Some(3)), ("b", 4, None)]), "BALANCED");
        metrics.record(&step(&[("a", 5, Some(6)), ("c", 7, Some(8))]), "NONE");
        let text = metrics.encode_text();
        let family = |kind: &str, vertex: &str| {
            format!("flowscale_vertex_parallelism{{job=\"j\",vertex=\"{vertex}\",kind=\"{kind}\"}}")
        };
        for (line, value) in [
            (family("current", "a"), "5"),
            (family("target", "a"), "6"),
            (family("aligned", "a"), "6"),
            // `b` was not in the last step: its gauges keep their last values.
            (family("current", "b"), "4"),
            (family("current", "c"), "7"),
            (family("aligned", "c"), "8"),
        ] {
            let line = format!("{line} {value}");
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
        assert!(
            !text.contains(&family("target", "b")),
            "b never had a target"
        );
        assert_eq!(
            text.matches("# TYPE flowscale_vertex_parallelism gauge\n")
                .count(),
            1
        );
        for line in [
            "# HELP flowscale_vertex_parallelism Parallelism of a vertex: running (current), computed (target) and aligned.",
            "flowscale_decisions_total{job=\"j\",mode=\"BALANCED\"} 1",
            "flowscale_decisions_total{job=\"j\",mode=\"NONE\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
        let openmetrics = metrics.encode();
        assert!(openmetrics.contains(&format!("{} 7\n", family("current", "c"))));
        assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");
    }

    /// A name that closes its label value and adds a label of its own when written raw.
    const INJECTING: &str = "x\",evil=\"1";
    /// A name with a backslash (an escape, when raw) and a line feed (the end of a raw sample
    /// line).
    const BREAKING: &str = "a\\b\nc";

    #[test]
    fn a_job_named_to_inject_a_label_is_one_series_of_that_name_in_both_formats() {
        // Written by hand from the rules of both formats: `\` -> `\\`, `"` -> `\"`, and a
        // line feed -> `\n`.
        for (job, written) in [(INJECTING, r#"x\",evil=\"1"#), (BREAKING, r#"a\\b\nc"#)] {
            let metrics = fed(&[job], "BALANCED", "v", "h1");
            let vertex = |kind: &str, value: u32| {
                format!(
                    "flowscale_vertex_parallelism{{job=\"{written}\",vertex=\"v\",kind=\"{kind}\"}} {value}"
                )
            };
            // Every sample of each family that has a job label.
            let expected = [
                vec![format!(
                    "flowscale_decisions_total{{job=\"{written}\",mode=\"BALANCED\"}} 1"
                )],
                vec![format!("flowscale_rescales_total{{job=\"{written}\"}} 1")],
                vec![format!(
                    "flowscale_plugin_faults_total{{job=\"{written}\",mode=\"BALANCED\"}} 1"
                )],
                vec![format!(
                    "flowscale_engine_errors_total{{job=\"{written}\"}} 1"
                )],
                vec![format!("flowscale_lease_held{{job=\"{written}\"}} 1")],
                vec![format!("flowscale_lease_token{{job=\"{written}\"}} 7")],
                vec![format!(
                    "flowscale_lease_owner{{job=\"{written}\",owner=\"h1\"}} 1"
                )],
                vec![
                    vertex("current", 4),
                    vertex("target", 6),
                    vertex("aligned", 6),
                ],
            ];
            for (format, text) in [
                ("Prometheus", metrics.encode_text()),
                ("OpenMetrics", metrics.encode()),
            ] {
                for lines in &expected {
                    let family = &lines[0][..=lines[0].find('{').unwrap_or(0)];
                    let samples: Vec<&str> =
                        text.lines().filter(|l| l.starts_with(family)).collect();
                    assert_eq!(samples, *lines, "{format}, job {job:?}:\n{text}");
                }
                assert!(!text.contains("evil=\"1\"}"), "{format}:\n{text}");
            }
        }
    }

    /// Metrics of `jobs` in `mode`, each with one step that counted a decision, a rescale, an
    /// engine error and a plugin fault, set vertex `vertex` (4 running, target and aligned 6)
    /// and took the lease with token 7, and `owner` shown as the owner of every job's lease.
    pub(crate) fn fed(jobs: &[&str], mode: &str, vertex: &str, owner: &str) -> Metrics {
        let metrics = Metrics::new();
        let mut owners = BTreeMap::new();
        for &job in jobs {
            metrics.add_job(job, mode);
            let mut report = CycleReport::new(job, 10_000);
            report.stage = Some(crate::scaling::CycleStage::Scaled);
            report.operation = Some(BTreeMap::from([(format!("id-{vertex}"), 4)]));
            report.engine_failed = true;
            report.vertices = vec![crate::scaling::VertexDecision {
                vertex: format!("id-{vertex}").into(),
                name: vertex.into(),
                current: 2,
                target: Some(6),
                aligned: Some(6),
                proposed: Some(6),
                mode: None,
                outside_band: false,
                excluded: false,
                reason: "scaled".into(),
                explanation: Vec::<String>::new().into(),
            }];
            report.events = vec![
                Event::new(EventReason::PluginFault, Severity::Warning, "fault").job(job),
                Event::new(EventReason::LeaseAcquired, Severity::Normal, "taken")
                    .job(job)
                    .detail("token", 7),
            ];
            metrics.record(&report, mode);
            owners.insert(job.to_string(), owner.to_string());
        }
        metrics.set_owners(owners);
        metrics
    }

    #[test]
    fn the_encoded_text_is_kept_until_a_change_and_follows_every_change() {
        let metrics = Metrics::new();
        metrics.add_job("j", "BALANCED");
        let first = metrics.encode_text();
        assert!(
            first.contains("flowscale_rescales_total{job=\"j\"} 0"),
            "{first}"
        );
        let generation = metrics.generation.load(Ordering::Acquire);
        assert_eq!(metrics.encode_text(), first);
        assert_eq!(
            metrics.generation.load(Ordering::Acquire),
            generation,
            "a scrape changes nothing"
        );

        metrics.set_plugins_loaded(3);
        let second = metrics.encode_text();
        assert!(second.contains("flowscale_plugins_loaded 3"), "{second}");
        // The OpenMetrics text, asked after the change, carries it too, and the Prometheus
        // text asked after that is still the same as the one encoded from it.
        assert!(metrics.encode().contains("flowscale_plugins_loaded 3"));
        assert_eq!(metrics.encode_text(), second);

        let mut report = CycleReport::new("j", 10_000);
        report.operation = Some(std::collections::BTreeMap::from([("v".to_string(), 4)]));
        metrics.record(&report, "BALANCED");
        assert!(
            metrics
                .encode_text()
                .contains("flowscale_rescales_total{job=\"j\"} 1")
        );
        assert!(
            metrics
                .encode()
                .contains("flowscale_rescales_total{job=\"j\"} 1")
        );
    }
}
