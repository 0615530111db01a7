//! The Prometheus metrics of the host, through the official client (`prometheus-client`).
//!
//! Counters and gauges are atomics behind the client's families: recording a step takes no lock
//! a scrape holds for long, and a scrape encodes from the same families.

use std::sync::atomic::AtomicI64;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::events::EventReason;
use crate::runner::CycleReport;

/// The content type of [`Metrics::encode`]'s output.
pub const OPENMETRICS_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of [`Metrics::encode_text`]'s output.
pub const TEXT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Which parallelism of a vertex.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Kind {
    /// The running parallelism.
    current,
    /// The target before alignment.
    target,
    /// The target after alignment.
    aligned,
}

/// `{job, vertex, kind}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VertexLabels {
    /// The job.
    pub job: String,
    /// The vertex's name.
    pub vertex: String,
    /// Which parallelism.
    pub kind: Kind,
}

/// `{job, mode}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobModeLabels {
    /// The job.
    pub job: String,
    /// Its alignment mode.
    pub mode: String,
}

/// `{job}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobLabels {
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
        }
    }

    /// Sets the number of loaded plugin files.
    pub fn set_plugins_loaded(&self, loaded: usize) {
        self.plugins_loaded
            .set(i64::try_from(loaded).unwrap_or(i64::MAX));
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
    }

    /// The OpenMetrics text of every metric ([`OPENMETRICS_TYPE`]).
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(64 * 1024);
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// The Prometheus text format (0.0.4, [`TEXT_TYPE`]) of every metric, for clients that do
    /// not ask for OpenMetrics (`promtool`, `curl`): the same samples, with the counter
    /// families named after their `_total` samples and without OpenMetrics' `# UNIT` and
    /// `# EOF` lines.
    pub fn encode_text(&self) -> String {
        to_prometheus_text(&self.encode())
    }
}

/// Converts the client's OpenMetrics output to the Prometheus text format.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        match renamed {
            Some(line) => out.push_str(&line),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}
