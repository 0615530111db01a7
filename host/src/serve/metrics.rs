//! The Prometheus metrics of the host: every per-job series written by [`super::series`], the
//! host-wide ones (the cycle duration histogram, the loaded plugins, the build) through the
//! official client (`prometheus-client`). Every label value is escaped (see [`super::label`]):
//! the series' precomputed label text directly, the client's label sets through [`LabelValue`].
//!
//! Recording a step stores into the atomics of the job's series, found with one lookup by job
//! name: no label set is built or hashed per sample, so the control loop pays a few
//! microseconds per step, and it never waits for a scrape. A job that leaves the fleet takes
//! all its series with it ([`Metrics::remove_jobs`]).
//!
//! The encoded text is kept and served again (without a copy) until something changes: every
//! change bumps a generation counter, and a scrape encodes anew only when the generation moved
//! since the text it holds.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::body::Bytes;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use super::label::LabelValue;
use super::series::{self, JobSeries, Step};
use super::vertex_gauges;
use crate::events::EventReason;
use crate::runner::CycleReport;
use crate::serve::job_gauges::JobGauge;

/// The content type of [`Metrics::encode`]'s output.
pub(crate) const OPENMETRICS_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of [`Metrics::encode_text`]'s output.
pub(crate) const TEXT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `{version}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: LabelValue,
}

/// What recording a step of a job touches: its series, and the index of the mode it runs in
/// them.
struct JobHandles {
    mode: String,
    mode_index: usize,
    series: Arc<JobSeries>,
}

/// A text longer than this many bytes above what it holds is shrunk before it is kept: after
/// most of the fleet was removed, the text of the fleet before must not stay allocated.
const SLACK: usize = 64 * 1024;

/// Every metric of the host, and the registry that encodes the host-wide ones.
pub struct Metrics {
    registry: Registry,
    /// Every job's series, by name (the order of the samples).
    jobs: Mutex<BTreeMap<String, JobHandles>>,
    cycle_duration: Histogram,
    plugins_loaded: Gauge<i64, AtomicI64>,
    /// The owners `flowscale_lease_owner` shows, job -> host, for the jobs in `jobs` only.
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
        // The per-job families are written by `series`, before these.
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
            cycle_duration,
            plugins_loaded,
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

    fn lock_owners(&self) -> MutexGuard<'_, BTreeMap<String, String>> {
        self.owners.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Shows `owners` (job -> host holding its lease) in `flowscale_lease_owner`, replacing
    /// what it showed: a job that changed hands has one series, with its new owner. Only the
    /// jobs of this host's fleet are shown: the lease table may still hold a job that left it.
    pub(crate) fn set_owners(&self, mut owners: BTreeMap<String, String>) {
        {
            let jobs = self.lock_jobs();
            owners.retain(|job, _| jobs.contains_key(job));
        }
        let mut shown = self.lock_owners();
        if *shown == owners {
            return;
        }
        *shown = owners;
        drop(shown);
        self.changed();
    }

    fn lock_jobs(&self) -> MutexGuard<'_, BTreeMap<String, JobHandles>> {
        // Every update under the lock is a whole assignment: a panic leaves it consistent.
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The entry of `job` in `mode` in `jobs`, made or moved to `mode` as needed: the job's
    /// series for a mode it has not run yet start at 0.
    fn entry<'a>(
        jobs: &'a mut BTreeMap<String, JobHandles>,
        job: &str,
        mode: &str,
    ) -> &'a mut JobHandles {
        let handles = jobs.entry(job.to_string()).or_insert_with(|| JobHandles {
            mode: String::new(),
            mode_index: usize::MAX,
            series: Arc::new(JobSeries::new(job)),
        });
        if handles.mode_index == usize::MAX || handles.mode != mode {
            let index = match handles.series.mode_position(mode) {
                Some(index) => index,
                None => {
                    handles.series = Arc::new(handles.series.with_mode(mode));
                    handles.series.mode_position(mode).unwrap_or(usize::MAX)
                }
            };
            handles.mode = mode.to_string();
            handles.mode_index = index;
        }
        handles
    }

    /// Counts a job with no step yet, so that its counters exist (at 0) from the start.
    pub(crate) fn add_job(&self, job: &str, mode: &str) {
        let mut jobs = self.lock_jobs();
        Metrics::entry(&mut jobs, job, mode);
        drop(jobs);
        self.changed();
    }

    /// Forgets every series of `jobs` (they left the fleet).
    pub(crate) fn remove_jobs<'a>(&self, jobs: impl IntoIterator<Item = &'a str>) {
        let mut removed = false;
        {
            let mut handles = self.lock_jobs();
            let mut owners = self.lock_owners();
            for job in jobs {
                removed |= handles.remove(job).is_some();
                owners.remove(job);
            }
        }
        if removed {
            self.changed();
        }
    }

    /// Takes in one step of a job running `mode`.
    pub(crate) fn record(&self, report: &CycleReport, mode: &str) {
        self.cycle_duration.observe(report.elapsed.as_secs_f64());
        let faults = report
            .events
            .iter()
            .filter(|e| e.reason == EventReason::PluginFault)
            .count();
        let step = Step {
            decided: report.stage.is_some(),
            rescaled: report.operation.is_some(),
            engine_failed: report.engine_failed,
            plugin_faults: u64::try_from(faults).unwrap_or(u64::MAX),
        };
        let mut jobs = self.lock_jobs();
        let handles = Metrics::entry(&mut jobs, &report.job, mode);
        handles.series.count(handles.mode_index, step);
        record_parallelism(handles, report);
        record_evaluated(handles, report);
        record_leases(handles, report);
        record_job_gauges(handles, report);
        drop(jobs);
        self.changed();
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
            let mut text = self.render(openmetrics, cached.text.len());
            if text.capacity() > text.len() + SLACK {
                text.shrink_to_fit();
            }
            cached.text = Bytes::from(text);
            cached.generation = Some(generation);
        }
        cached.text.clone()
    }

    /// Encodes every metric: the per-job families written directly, then the client's
    /// families (converted to the Prometheus text format unless `openmetrics`). `size` is the
    /// previous text's, so that the buffer does not grow step by step.
    fn render(&self, openmetrics: bool, size: usize) -> String {
        let series: Vec<Arc<JobSeries>> = self
            .lock_jobs()
            .values()
            .map(|h| Arc::clone(&h.series))
            .collect();
        let owners = self.lock_owners().clone();
        let mut out = String::with_capacity(size + 1024);
        series::write(&series, &mut out);
        series::write_vertex_gauges(&series, &mut out);
        series::write_job_families(&series, &owners, openmetrics, &mut out);
        series::write_job_gauges(&series, openmetrics, &mut out);
        let mut client = String::with_capacity(4 * 1024);
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

/// The lease gauges, from the step's lease events.
fn record_leases(handles: &JobHandles, report: &CycleReport) {
    for event in &report.events {
        let held = match event.reason {
            EventReason::LeaseAcquired => true,
            EventReason::LeaseLost => false,
            _ => continue,
        };
        handles
            .series
            .set_lease(held, event.details.get("token").copied());
    }
}

/// Stores a step's parallelism into the job's gauges: the running parallelism (after the
/// step's operation), the target and the aligned target of every vertex.
fn record_parallelism(handles: &mut JobHandles, report: &CycleReport) {
    let in_place = report.vertices.len() == handles.series.vertex_count()
        && report
            .vertices
            .iter()
            .enumerate()
            .all(|(i, v)| handles.series.is_at(i, &v.vertex, &v.name));
    if in_place {
        // The job's vertices are those of its series, in the same order: stored by position.
        for (i, v) in report.vertices.iter().enumerate() {
            let running = v.running_after(report.operation.as_ref());
            handles.series.set(
                i,
                [Some(running), v.target, v.aligned].map(|p| p.map(i64::from)),
            );
        }
        return;
    }
    let known = |series: &JobSeries| {
        report.vertices.iter().enumerate().all(|(i, v)| {
            series
                .position(i, &v.name)
                .is_some_and(|p| series.vertex_id(p) == Some(&*v.vertex))
        })
    };
    if !known(&handles.series) {
        let vertices = report.vertices.iter().map(|v| (&v.vertex, &*v.name));
        handles.series = Arc::new(handles.series.with_vertices(vertices));
    }
    for (i, v) in report.vertices.iter().enumerate() {
        let running = v.running_after(report.operation.as_ref());
        if let Some(index) = handles.series.position(i, &v.name) {
            handles.series.set(
                index,
                [Some(running), v.target, v.aligned].map(|p| p.map(i64::from)),
            );
        }
    }
}

/// On a decision cycle, stores what it evaluated for each vertex of the job's series (found by
/// id): its recommended parallelism and its evaluated gauges. A vertex the cycle did not
/// evaluate (the window was cleared by a restart or a rescale and is collecting again) has
/// none until it is evaluated again; a step without a decision cycle changes nothing.
fn record_evaluated(handles: &JobHandles, report: &CycleReport) {
    if report.stage.is_none() {
        return;
    }
    let series = &handles.series;
    for index in 0..series.vertex_count() {
        let evaluated = series
            .vertex_id_arc(index)
            .and_then(|id| report.evaluated.get_hinted(index, id));
        match evaluated {
            Some(m) => series.set_evaluated(
                index,
                vertex_gauges::recommended(m),
                vertex_gauges::values_of(m),
            ),
            None => series.set_evaluated(index, None, [f64::NAN; vertex_gauges::COUNT]),
        }
    }
}

/// The host's clock in Unix seconds (NaN before 1970, which no clock shows).
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(f64::NAN, |d| d.as_secs_f64())
}

/// The job's events by reason, the lateness of its cycle, the times of its last decision cycle
/// and rescale, its interval, catch-up target and cooldown queue.
fn record_job_gauges(handles: &mut JobHandles, report: &CycleReport) {
    let reasons = || report.events.iter().map(|e| e.reason);
    if !handles.series.counts_reasons(reasons()) {
        handles.series = Arc::new(handles.series.with_reasons(reasons()));
    }
    let gauges = handles.series.gauges();
    for reason in reasons() {
        gauges.count_event(reason);
    }
    if let Some(late) = report.lateness {
        gauges.observe_lateness(late);
    }
    let decided = report.stage.is_some();
    let rescaled = report.operation.is_some();
    if decided || rescaled {
        let now = unix_now();
        if decided {
            gauges.set(JobGauge::LastDecision, now);
        }
        if rescaled {
            gauges.set(JobGauge::LastRescale, now);
        }
    }
    if let Some(interval) = report.decision_interval {
        gauges.set(JobGauge::DecisionInterval, interval.as_secs_f64());
    }
    if let Some(target) = report.catch_up_target {
        gauges.set(JobGauge::CatchUpTarget, target.as_secs_f64());
    }
    if let Some(queued) = report.cooldown_queued {
        gauges.set(JobGauge::CooldownQueued, if queued { 1.0 } else { 0.0 });
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
        assert!(
            text.contains(
                "# HELP flowscale_vertex_parallelism Parallelism of a vertex: running (current), \
                 computed (target), aligned, and recommended"
            ),
            "{text}"
        );
        for line in [
            "flowscale_decisions_total{job=\"j\",mode=\"BALANCED\"} 1",
            "flowscale_decisions_total{job=\"j\",mode=\"NONE\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
        let openmetrics = metrics.encode();
        assert!(openmetrics.contains(&format!("{} 7\n", family("current", "c"))));
        assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");
    }

    #[test]
    fn a_step_with_the_vertices_of_the_last_one_updates_them_in_place() {
        let metrics = Metrics::new();
        metrics.add_job("j", "BALANCED");
        metrics.record(&step(&[("a", 2, Some(3)), ("b", 4, Some(5))]), "BALANCED");
        // The same vertices again (in the same order): stored by position.
        metrics.record(&step(&[("a", 6, Some(7)), ("b", 8, Some(9))]), "BALANCED");
        let has = |expected: [(&str, &str, u32); 4]| {
            let text = metrics.encode_text();
            for (vertex, kind, value) in expected {
                let line = format!(
                    "flowscale_vertex_parallelism{{job=\"j\",vertex=\"{vertex}\",kind=\"{kind}\"}} {value}"
                );
                assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
            }
        };
        has([
            ("a", "current", 6),
            ("a", "target", 7),
            ("b", "current", 8),
            ("b", "target", 9),
        ]);
        // Then in the other order: found by name, not by position.
        metrics.record(
            &step(&[("b", 10, Some(11)), ("a", 12, Some(13))]),
            "BALANCED",
        );
        has([
            ("a", "current", 12),
            ("a", "target", 13),
            ("b", "current", 10),
            ("b", "target", 11),
        ]);
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
                    vertex("recommended", 6),
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

    /// A source's evaluated metrics as `(metric, current, average)`, each on the half the
    /// pipeline computes: true processing rate 1500, target rate 400, catch-up rate 10, lag
    /// 6000 records, thresholds 610 and 1210 records/s, and `load` and `recommended`.
    fn source_metrics(
        load: f64,
        recommended: f64,
    ) -> Vec<(crate::scaling::ScalingMetric, f64, f64)> {
        use crate::scaling::ScalingMetric as M;
        let nan = f64::NAN;
        vec![
            (M::TrueProcessingRate, nan, 1500.0),
            (M::TargetDataRate, nan, 400.0),
            (M::CatchUpDataRate, 10.0, nan),
            (M::Lag, 6000.0, nan),
            (M::Load, nan, load),
            (M::ScaleUpRateThreshold, 610.0, nan),
            (M::ScaleDownRateThreshold, 1210.0, nan),
            (M::RecommendedParallelism, recommended, nan),
        ]
    }

    /// Metrics of `jobs` in `mode`, each with one step that counted a decision, a rescale, an
    /// engine error and a plugin fault, set vertex `vertex` (4 running, target, aligned and
    /// recommended 6; true processing rate 1500, target rate 400, catch-up rate 10, lag 6000
    /// records, load 1, thresholds 610 and 1210 records/s), started 2 s late, with a decision
    /// interval of 10 s, a catch-up target of 300 s and nothing queued, and took the lease with
    /// token 7, and `owner` shown as the owner of every job's lease.
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
            report.evaluated = crate::scaling::EvaluatedVertices::of(vec![(
                format!("id-{vertex}").into(),
                source_metrics(1.0, 6.0),
            )]);
            report.lateness = Some(std::time::Duration::from_secs(2));
            report.decision_interval = Some(std::time::Duration::from_secs(10));
            report.catch_up_target = Some(std::time::Duration::from_secs(300));
            report.cooldown_queued = Some(false);
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

    /// The per-job families as the official client encodes them, for the values `metrics`
    /// holds after the steps of [`the_job_families_are_what_the_client_would_encode`].
    fn client_text(openmetrics: bool) -> String {
        use prometheus_client::metrics::counter::Counter;

        #[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
        struct JobMode {
            job: String,
            mode: String,
        }
        #[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
        struct Job {
            job: String,
        }
        #[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
        struct Owner {
            job: String,
            owner: String,
        }
        let job_mode = |job: &str, mode: &str| JobMode {
            job: job.into(),
            mode: mode.into(),
        };
        let job = |job: &str| Job { job: job.into() };
        let mut registry = Registry::default();
        let decisions = Family::<JobMode, Counter>::default();
        let rescales = Family::<Job, Counter>::default();
        let faults = Family::<JobMode, Counter>::default();
        let errors = Family::<Job, Counter>::default();
        let held = Family::<Job, Gauge>::default();
        let token = Family::<Job, Gauge>::default();
        let owner = Family::<Owner, Gauge>::default();
        decisions
            .get_or_create(&job_mode("a", "BALANCED"))
            .inc_by(2);
        decisions.get_or_create(&job_mode("a", "OFF")).inc_by(1);
        let _ = decisions.get_or_create(&job_mode("b", "BALANCED"));
        faults.get_or_create(&job_mode("a", "BALANCED")).inc_by(2);
        let _ = faults.get_or_create(&job_mode("a", "OFF"));
        let _ = faults.get_or_create(&job_mode("b", "BALANCED"));
        rescales.get_or_create(&job("a")).inc();
        let _ = rescales.get_or_create(&job("b"));
        errors.get_or_create(&job("a")).inc();
        let _ = errors.get_or_create(&job("b"));
        held.get_or_create(&job("a")).set(0);
        token.get_or_create(&job("a")).set(7);
        owner
            .get_or_create(&Owner {
                job: "a".into(),
                owner: "h2".into(),
            })
            .set(1);
        registry.register("flowscale_decisions", DECISIONS_HELP, decisions);
        registry.register("flowscale_rescales", RESCALES_HELP, rescales);
        registry.register("flowscale_plugin_faults", FAULTS_HELP, faults);
        registry.register("flowscale_engine_errors", ERRORS_HELP, errors);
        registry.register("flowscale_lease_held", HELD_HELP, held);
        registry.register("flowscale_lease_token", TOKEN_HELP, token);
        registry.register("flowscale_lease_owner", OWNER_HELP, owner);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encoded");
        if openmetrics {
            text
        } else {
            to_prometheus_text(&text)
        }
    }

    const DECISIONS_HELP: &str = "Decision cycles that evaluated the job, by alignment mode";
    const RESCALES_HELP: &str = "Scaling operations realized on the engine";
    const FAULTS_HELP: &str = "Plugin modes that panicked, failed or answered out of range";
    const ERRORS_HELP: &str = "Steps whose engine could not be reached or refused a request";
    const HELD_HELP: &str =
        "With state shared by several hosts: 1 while this host holds the job's lease";
    const TOKEN_HELP: &str = "The fencing token of the job's lease this host last held";
    const OWNER_HELP: &str = "With state shared by several hosts: 1 for the host (this one or \
                              another) that holds the job's lease, named in the owner label, as \
                              this host's last lease round read it";

    /// The lines of the per-job counter and lease families, sorted (the client's come in no
    /// set order within a family).
    fn job_family_lines(text: &str) -> Vec<&str> {
        let mut lines: Vec<&str> = text
            .lines()
            .filter(|l| {
                let named = l
                    .strip_prefix("# HELP ")
                    .or_else(|| l.strip_prefix("# TYPE "))
                    .unwrap_or(l);
                [
                    "decisions",
                    "rescales",
                    "plugin_faults",
                    "engine_errors",
                    "lease_",
                ]
                .iter()
                .any(|f| named.starts_with(&format!("flowscale_{f}")))
            })
            .collect();
        lines.sort_unstable();
        lines
    }

    #[test]
    fn the_job_families_are_what_the_client_would_encode() {
        let metrics = Metrics::new();
        metrics.add_job("a", "BALANCED");
        metrics.add_job("b", "BALANCED");
        let mut faulty = CycleReport::new("a", 1000);
        faulty.stage = Some(crate::scaling::CycleStage::WithinBounds);
        faulty.engine_failed = true;
        faulty.events = vec![
            crate::events::Event::new(
                EventReason::PluginFault,
                crate::events::Severity::Warning,
                "x",
            ),
            crate::events::Event::new(
                EventReason::PluginFault,
                crate::events::Severity::Warning,
                "y",
            ),
            crate::events::Event::new(
                EventReason::LeaseAcquired,
                crate::events::Severity::Normal,
                "z",
            )
            .detail("token", 7),
        ];
        metrics.record(&faulty, "BALANCED");
        let mut rescaled = CycleReport::new("a", 2000);
        rescaled.stage = Some(crate::scaling::CycleStage::Scaled);
        rescaled.operation = Some(std::collections::BTreeMap::from([("v".to_string(), 4)]));
        rescaled.events = vec![crate::events::Event::new(
            EventReason::LeaseLost,
            crate::events::Severity::Warning,
            "lost",
        )];
        metrics.record(&rescaled, "BALANCED");
        let mut other_mode = CycleReport::new("a", 3000);
        other_mode.stage = Some(crate::scaling::CycleStage::WithinBounds);
        metrics.record(&other_mode, "OFF");
        metrics.set_owners(BTreeMap::from([("a".to_string(), "h2".to_string())]));
        for openmetrics in [false, true] {
            let ours = metrics.encoded(openmetrics);
            let ours = String::from_utf8_lossy(&ours);
            let theirs = client_text(openmetrics);
            assert_eq!(
                job_family_lines(&ours),
                job_family_lines(&theirs),
                "openmetrics: {openmetrics}\nours:\n{ours}\ntheirs:\n{theirs}"
            );
        }
    }

    /// `line` with the labels of its sample sorted (the client writes `le` first, we last),
    /// for lines whose label values hold no comma.
    fn sorted_labels(line: &str) -> String {
        match (line.find('{'), line.rfind('}')) {
            (Some(open), Some(close)) if !line.starts_with('#') => {
                let mut labels: Vec<&str> = line[open + 1..close].split(',').collect();
                labels.sort_unstable();
                format!(
                    "{}{{{}}}{}",
                    &line[..open],
                    labels.join(","),
                    &line[close + 1..]
                )
            }
            _ => line.to_string(),
        }
    }

    /// The lines of the autoscaler's families (vertex parallelism, evaluated gauges, events,
    /// lateness, interval, catch-up target, cooldown), labels sorted, lines sorted; the
    /// timestamps are left out (the host's clock).
    fn autoscaler_lines(text: &str) -> Vec<String> {
        let mut names: Vec<&str> = super::vertex_gauges::FAMILIES
            .iter()
            .map(|(name, _)| *name)
            .collect();
        names.extend([
            "flowscale_vertex_parallelism",
            "flowscale_events",
            crate::serve::job_gauges::LATENESS.0,
            "flowscale_decision_interval_seconds",
            "flowscale_catch_up_target_seconds",
            "flowscale_cooldown_queued",
        ]);
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| {
                let named = l
                    .strip_prefix("# HELP ")
                    .or_else(|| l.strip_prefix("# TYPE "))
                    .unwrap_or(l);
                names.iter().any(|n| {
                    named
                        .strip_prefix(n)
                        .is_some_and(|rest| rest.starts_with(['{', ' ', '_']))
                })
            })
            .map(sorted_labels)
            .collect();
        lines.sort_unstable();
        lines
    }

    #[test]
    fn the_autoscaler_families_are_what_the_client_would_encode() {
        use crate::scaling::ScalingMetric as M;
        use prometheus_client::metrics::counter::Counter;
        use std::time::Duration;
        const NAN: f64 = f64::NAN;

        let metrics = Metrics::new();
        metrics.add_job("j", "BALANCED");
        let before = unix_now();
        let mut first = step(&[("src", 2, Some(4)), ("sink", 3, Some(3))]);
        first.evaluated = crate::scaling::EvaluatedVertices::of(vec![
            ("id-src".into(), source_metrics(0.25, 4.0)),
            (
                "id-sink".into(),
                vec![
                    (M::TrueProcessingRate, NAN, 0.5),
                    (M::TargetDataRate, NAN, 0.001),
                    (M::RecommendedParallelism, 3.0, NAN),
                ],
            ),
        ]);
        let event = |reason| Event::new(reason, Severity::Warning, "e").job("j");
        first.events = vec![
            event(EventReason::PluginFault),
            event(EventReason::PluginFault),
            event(EventReason::ScalingReport),
        ];
        first.lateness = Some(Duration::from_millis(3));
        first.decision_interval = Some(Duration::from_secs(10));
        first.catch_up_target = Some(Duration::from_secs(300));
        first.cooldown_queued = Some(true);
        metrics.record(&first, "BALANCED");
        // Rate-control steps: no decision cycle, so the evaluated gauges stay.
        let mut second = CycleReport::new("j", 20_000);
        second.events = vec![event(EventReason::ScalingReport)];
        second.lateness = Some(Duration::from_millis(700));
        metrics.record(&second, "BALANCED");
        let mut third = CycleReport::new("j", 30_000);
        third.lateness = Some(Duration::from_secs(90));
        third.cooldown_queued = Some(false);
        metrics.record(&third, "BALANCED");
        let after = unix_now();

        // The same values through the official client. The source's lag in seconds: 6000
        // records at 400 records/s; the sink has no lag.
        #[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
        struct Vertex {
            job: String,
            vertex: String,
        }
        #[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
        struct Kind {
            job: String,
            vertex: String,
            kind: String,
        }
        #[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
        struct Reason {
            job: String,
            reason: String,
        }
        #[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
        struct Job {
            job: String,
        }
        let vertex = |v: &str| Vertex {
            job: "j".into(),
            vertex: v.into(),
        };
        let job = Job { job: "j".into() };
        let mut registry = Registry::default();
        let parallelism = Family::<Kind, Gauge>::default();
        for (v, values) in [("src", [2, 4, 4, 4]), ("sink", [3, 3, 3, 3])] {
            for (kind, value) in ["current", "target", "aligned", "recommended"]
                .into_iter()
                .zip(values)
            {
                parallelism
                    .get_or_create(&Kind {
                        job: "j".into(),
                        vertex: v.into(),
                        kind: kind.into(),
                    })
                    .set(value);
            }
        }
        registry.register(
            "flowscale_vertex_parallelism",
            super::series::tests_help(),
            parallelism,
        );
        let src = [1500.0, 400.0, 10.0, 15.0, 6000.0, 0.25, 610.0, 1210.0];
        let sink = [0.5, 0.001, NAN, NAN, NAN, NAN, NAN, NAN];
        for (i, (name, help)) in super::vertex_gauges::FAMILIES.iter().enumerate() {
            let family = Family::<Vertex, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
            for (v, values) in [("src", src), ("sink", sink)] {
                if !values[i].is_nan() {
                    family.get_or_create(&vertex(v)).set(values[i]);
                }
            }
            registry.register(*name, *help, family);
        }
        let events = Family::<Reason, Counter>::default();
        for (reason, count) in [("PluginFault", 2), ("ScalingReport", 2)] {
            events
                .get_or_create(&Reason {
                    job: "j".into(),
                    reason: reason.into(),
                })
                .inc_by(count);
        }
        registry.register(
            crate::serve::job_gauges::EVENTS.0,
            crate::serve::job_gauges::EVENTS.1,
            events,
        );
        let bounds: Vec<f64> = crate::runner::LATENESS_BOUNDS_MS
            .iter()
            .map(|&ms| ms as f64 / 1000.0)
            .collect();
        let lateness = Family::<Job, Histogram, _>::new_with_constructor(move || {
            Histogram::new(bounds.clone())
        });
        for late in [0.003, 0.7, 90.0] {
            lateness.get_or_create(&job).observe(late);
        }
        registry.register(
            crate::serve::job_gauges::LATENESS.0,
            crate::serve::job_gauges::LATENESS.1,
            lateness,
        );
        let gauges = crate::serve::job_gauges::GAUGES;
        for (index, value) in [(2, 10.0), (3, 300.0), (4, 0.0)] {
            let family = Family::<Job, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
            family.get_or_create(&job).set(value);
            registry.register(gauges[index].0, gauges[index].1, family);
        }
        let mut theirs = String::new();
        prometheus_client::encoding::text::encode(&mut theirs, &registry).expect("encoded");
        for openmetrics in [false, true] {
            let ours = String::from_utf8_lossy(&metrics.encoded(openmetrics)).into_owned();
            let expected = if openmetrics {
                theirs.clone()
            } else {
                to_prometheus_text(&theirs)
            };
            assert_eq!(
                autoscaler_lines(&ours),
                autoscaler_lines(&expected),
                "openmetrics: {openmetrics}\nours:\n{ours}\ntheirs:\n{expected}"
            );
            // The last decision was the first step's; no rescale was realized.
            let decided: f64 = ours
                .lines()
                .find_map(|l| {
                    l.strip_prefix("flowscale_last_decision_timestamp_seconds{job=\"j\"} ")
                })
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no last decision in:\n{ours}"));
            assert!(
                before <= decided && decided <= after,
                "{before} {decided} {after}"
            );
            assert!(
                !ours.contains("flowscale_last_rescale_timestamp_seconds{"),
                "{ours}"
            );
        }
    }
}
