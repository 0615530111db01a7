//! The Prometheus metrics of the host, through the official client (`prometheus-client`).
//!
//! Counters and gauges are atomics behind the client's families: recording a step takes no lock
//! a scrape holds for long, and a scrape encodes from the same families.
//!
//! Encoding a large fleet is the expensive part of a scrape (1,000 jobs x 20 vertices is 60,000
//! samples, about 4 MB of text), so the encoded text is kept and served again until something
//! changes: every change bumps a generation counter, and a scrape encodes anew only when the
//! generation moved since the text it holds. The buffers are sized from the previous text, and
//! the conversion to the Prometheus text format is a single pass.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::events::EventReason;
use crate::runner::CycleReport;

/// The content type of [`Metrics::encode`]'s output.
pub(crate) const OPENMETRICS_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of [`Metrics::encode_text`]'s output.
pub(crate) const TEXT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Which parallelism of a vertex.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub(crate) enum Kind {
    /// The running parallelism.
    current,
    /// The target before alignment.
    target,
    /// The target after alignment.
    aligned,
}

/// `{job, vertex, kind}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct VertexLabels {
    /// The job.
    pub job: String,
    /// The vertex's name.
    pub vertex: String,
    /// Which parallelism.
    pub kind: Kind,
}

/// `{job, mode}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct JobModeLabels {
    /// The job.
    pub job: String,
    /// Its alignment mode.
    pub mode: String,
}

/// `{job}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct JobLabels {
    /// The job.
    pub job: String,
}

/// `{version}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
}

/// Every metric of the host, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    parallelism: Family<VertexLabels, Gauge>,
    decisions: Family<JobModeLabels, Counter>,
    rescales: Family<JobLabels, Counter>,
    plugin_faults: Family<JobModeLabels, Counter>,
    engine_errors: Family<JobLabels, Counter>,
    cycle_duration: Histogram,
    plugins_loaded: Gauge<i64, AtomicI64>,
    lease_held: Family<JobLabels, Gauge>,
    lease_token: Family<JobLabels, Gauge>,
    /// Bumped after every change to a metric.
    generation: AtomicU64,
    /// The last encoded texts, in both formats.
    encoded: Mutex<Encoded>,
}

/// A text as encoded at a generation.
#[derive(Default)]
struct Cached {
    generation: Option<u64>,
    text: String,
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
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let parallelism = Family::<VertexLabels, Gauge>::default();
        registry.register(
            "flowscale_vertex_parallelism",
            "Parallelism of a vertex: running (current), computed (target) and aligned",
            parallelism.clone(),
        );
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
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_string(),
            })
            .set(1);
        registry.register(
            "flowscale_build_info",
            "Always 1; the flowscale version in its label",
            build,
        );
        Metrics {
            registry,
            parallelism,
            decisions,
            rescales,
            plugin_faults,
            engine_errors,
            cycle_duration,
            plugins_loaded,
            lease_held,
            lease_token,
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

    /// Counts a job with no step yet, so that its counters exist (at 0) from the start.
    pub fn add_job(&self, job: &str, mode: &str) {
        let labels = JobLabels {
            job: job.to_string(),
        };
        let modes = JobModeLabels {
            job: job.to_string(),
            mode: mode.to_string(),
        };
        let _ = self.decisions.get_or_create(&modes);
        let _ = self.plugin_faults.get_or_create(&modes);
        let _ = self.rescales.get_or_create(&labels);
        let _ = self.engine_errors.get_or_create(&labels);
        self.changed();
    }

    /// Takes in one step of a job running `mode`.
    pub fn record(&self, report: &CycleReport, mode: &str) {
        self.cycle_duration.observe(report.elapsed.as_secs_f64());
        let job = JobLabels {
            job: report.job.clone(),
        };
        let modes = JobModeLabels {
            job: report.job.clone(),
            mode: mode.to_string(),
        };
        if report.stage.is_some() {
            self.decisions.get_or_create(&modes).inc();
        }
        if report.operation.is_some() {
            self.rescales.get_or_create(&job).inc();
        }
        if report.engine_failed {
            self.engine_errors.get_or_create(&job).inc();
        }
        for event in &report.events {
            let held = match event.reason {
                EventReason::LeaseAcquired => 1,
                EventReason::LeaseLost => 0,
                _ => continue,
            };
            self.lease_held.get_or_create(&job).set(held);
            if let Some(&token) = event.details.get("token") {
                self.lease_token.get_or_create(&job).set(token);
            }
        }
        let faults = report
            .events
            .iter()
            .filter(|e| e.reason == EventReason::PluginFault)
            .count();
        if faults > 0 {
            self.plugin_faults
                .get_or_create(&modes)
                .inc_by(u64::try_from(faults).unwrap_or(u64::MAX));
        }
        for v in &report.vertices {
            let running = report
                .operation
                .as_ref()
                .and_then(|op| op.get(&v.vertex))
                .copied()
                .unwrap_or(v.current);
            for (kind, value) in [
                (Kind::current, Some(running)),
                (Kind::target, v.target),
                (Kind::aligned, v.aligned),
            ] {
                if let Some(value) = value {
                    self.parallelism
                        .get_or_create(&VertexLabels {
                            job: report.job.clone(),
                            vertex: v.name.clone(),
                            kind,
                        })
                        .set(i64::from(value));
                }
            }
        }
        self.changed();
    }

    /// The OpenMetrics text of every metric ([`OPENMETRICS_TYPE`]).
    pub fn encode(&self) -> String {
        let mut encoded = self.encoded.lock().unwrap_or_else(PoisonError::into_inner);
        self.refresh_openmetrics(&mut encoded.openmetrics);
        encoded.openmetrics.text.clone()
    }

    /// The Prometheus text format (0.0.4, [`TEXT_TYPE`]) of every metric, for clients that do
    /// not ask for OpenMetrics (`promtool`, `curl`): the same samples, with the counter
    /// families named after their `_total` samples and without OpenMetrics' `# UNIT` and
    /// `# EOF` lines.
    pub fn encode_text(&self) -> String {
        let mut encoded = self.encoded.lock().unwrap_or_else(PoisonError::into_inner);
        let Encoded {
            openmetrics,
            prometheus,
        } = &mut *encoded;
        let fresh = self.refresh_openmetrics(openmetrics);
        if fresh || prometheus.generation != openmetrics.generation {
            prometheus.text.clear();
            write_prometheus_text(&openmetrics.text, &mut prometheus.text);
            prometheus.generation = openmetrics.generation;
        }
        prometheus.text.clone()
    }

    /// Encodes the OpenMetrics text again unless nothing changed since `cached` was encoded;
    /// whether it did.
    fn refresh_openmetrics(&self, cached: &mut Cached) -> bool {
        let generation = self.generation.load(Ordering::Acquire);
        if cached.generation == Some(generation) {
            return false;
        }
        // The previous text's size, so that the buffer does not grow step by step.
        cached.text.clear();
        cached.text.reserve(64 * 1024);
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut cached.text, &self.registry);
        cached.generation = Some(generation);
        true
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
    let mut lines = openmetrics.lines().peekable();
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
mod tests {
    use super::*;

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
