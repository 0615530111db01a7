//! The decision pipeline's options, their defaults and their validation (docs/decision-pipeline.md#configuration).
//!
//! Keys are canonical (no `job.autoscaler.` prefix). Where the Flink autoscaler still honours a
//! deprecated key, it is read after the canonical one: `target.utilization` for
//! `utilization.target`, `scale-up.grace-period` for `scale-down.interval`.
//!
//! Not implemented, hence not read: memory tuning (`memory.tuning.*`). The custom evaluator and executor keys are read where the job's plugins are resolved
//! (`scaling::custom`, docs/plugin-kinds.md).

use std::time::Duration;

use jiff::tz::TimeZone;

use crate::config::{ConfigLookup, ConfigLookupExt, DurationRange, KeyError, parse_memory_size};

use super::excluded_periods::ExcludedPeriods;

/// Which aggregate of `busyTimeMsPerSecond` over subtasks is used, and how the true processing
/// rate is derived (`metrics.busy-time.aggregator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusyTimeAggregator {
    /// The busiest subtask (default).
    Max,
    /// The least busy subtask.
    Min,
    /// The average; TPR then comes from the accumulated busy time.
    Avg,
}

/// Every option the decision pipeline reads, with the Flink autoscaler's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoscalerOptions {
    /// `enabled` (false): the master switch. The pipeline does not read it; the control loop
    /// decides whether to run a cycle (and clears the job's state when it is off).
    pub enabled: bool,
    /// `scaling.enabled` (true): false = advisor mode (recommend, do not scale).
    pub scaling_enabled: bool,
    /// `metrics.window` (15 min).
    pub metrics_window: Duration,
    /// `stabilization.interval` (5 min).
    pub stabilization_interval: Duration,
    /// `excluded.periods` (none): daily ranges and Quartz crons, read in
    /// `excluded.periods.time-zone` (UTC), during which nothing is scaled.
    pub excluded_periods: ExcludedPeriods,
    /// `utilization.target` (0.7; deprecated `target.utilization`).
    pub utilization_target: f64,
    /// `target.utilization.boundary` (0.3), used when `utilization.max`/`min` are unset.
    pub target_utilization_boundary: f64,
    /// `utilization.max` (unset).
    pub utilization_max: Option<f64>,
    /// `utilization.min` (unset).
    pub utilization_min: Option<f64>,
    /// `scale-down.interval` (1 h; deprecated `scale-up.grace-period`); zero disables the delay.
    pub scale_down_interval: Duration,
    /// `vertex.min-parallelism` (1).
    pub vertex_min_parallelism: i64,
    /// `vertex.max-parallelism` (200).
    pub vertex_max_parallelism: i64,
    /// `scale-down.max-factor` (0.6): the scale factor is at least `1 - x`.
    pub scale_down_max_factor: f64,
    /// `scale-up.max-factor` (100000.0): the scale factor is at most `1 + x`.
    pub scale_up_max_factor: f64,
    /// `catch-up.duration` (30 min); zero disables lag catch-up and the restart term.
    pub catch_up_duration: Duration,
    /// `restart.time` (5 min).
    pub restart_time: Duration,
    /// `restart.time-tracking.enabled` (false).
    pub restart_time_tracking_enabled: bool,
    /// `restart.time-tracking.limit` (15 min).
    pub restart_time_tracking_limit: Duration,
    /// `backlog-processing.lag-threshold` (5 min).
    pub backlog_processing_lag_threshold: Duration,
    /// `observed-true-processing-rate.lag-threshold` (30 s).
    pub observed_tpr_lag_threshold: Duration,
    /// `observed-true-processing-rate.switch-threshold` (0.15).
    pub observed_tpr_switch_threshold: f64,
    /// `observed-true-processing-rate.min-observations` (2).
    pub observed_tpr_min_observations: i64,
    /// `scaling.effectiveness.detection.enabled` (false).
    pub scaling_effectiveness_detection_enabled: bool,
    /// `scaling.effectiveness.threshold` (0.1).
    pub scaling_effectiveness_threshold: f64,
    /// `memory.gc-pressure.threshold` (1.0).
    pub gc_pressure_threshold: f64,
    /// `memory.heap-usage.threshold` (1.0).
    pub heap_usage_threshold: f64,
    /// `history.max.count` (3).
    pub history_max_count: i64,
    /// `history.max.age` (24 h).
    pub history_max_age: Duration,
    /// `metrics.busy-time.aggregator` (MAX).
    pub busy_time_aggregator: BusyTimeAggregator,
    /// `vertex.exclude.ids` (none): vertices never scaled.
    pub vertex_exclude_ids: Vec<String>,
    /// `scaling.event.interval` (30 min): how long identical events are suppressed.
    pub scaling_event_interval: Duration,
    /// `observed-scalability.enabled` (false).
    pub observed_scalability_enabled: bool,
    /// `observed-scalability.min-observations` (3).
    pub observed_scalability_min_observations: i64,
    /// `observed-scalability.coefficient-min` (0.5).
    pub observed_scalability_coefficient_min: f64,
    /// `quota.cpu` (unset): the CPU cores the job's TaskManagers may have together; a scale-up
    /// that needs more TaskManagers than fit is blocked (docs/decision-pipeline.md#resource-quota).
    pub quota_cpu: Option<f64>,
    /// `quota.memory` (unset): the TaskManager process memory, in bytes, the job may have
    /// together (Flink's memory size syntax, e.g. `16 gb`).
    pub quota_memory: Option<u64>,
}

impl Default for AutoscalerOptions {
    fn default() -> Self {
        AutoscalerOptions {
            enabled: false,
            scaling_enabled: true,
            metrics_window: Duration::from_secs(15 * 60),
            stabilization_interval: Duration::from_secs(5 * 60),
            excluded_periods: ExcludedPeriods::default(),
            utilization_target: 0.7,
            target_utilization_boundary: 0.3,
            utilization_max: None,
            utilization_min: None,
            scale_down_interval: Duration::from_secs(60 * 60),
            vertex_min_parallelism: 1,
            vertex_max_parallelism: 200,
            scale_down_max_factor: 0.6,
            scale_up_max_factor: 100_000.0,
            catch_up_duration: Duration::from_secs(30 * 60),
            restart_time: Duration::from_secs(5 * 60),
            restart_time_tracking_enabled: false,
            restart_time_tracking_limit: Duration::from_secs(15 * 60),
            backlog_processing_lag_threshold: Duration::from_secs(5 * 60),
            observed_tpr_lag_threshold: Duration::from_secs(30),
            observed_tpr_switch_threshold: 0.15,
            observed_tpr_min_observations: 2,
            scaling_effectiveness_detection_enabled: false,
            scaling_effectiveness_threshold: 0.1,
            gc_pressure_threshold: 1.0,
            heap_usage_threshold: 1.0,
            history_max_count: 3,
            history_max_age: Duration::from_secs(24 * 60 * 60),
            busy_time_aggregator: BusyTimeAggregator::Max,
            vertex_exclude_ids: Vec::new(),
            scaling_event_interval: Duration::from_secs(30 * 60),
            observed_scalability_enabled: false,
            observed_scalability_min_observations: 3,
            observed_scalability_coefficient_min: 0.5,
            quota_cpu: None,
            quota_memory: None,
        }
    }
}

/// Zero up to a year, for durations whose zero is harmless and needs no note.
const UP_TO_A_YEAR: DurationRange = DurationRange {
    min: Duration::ZERO,
    max: crate::config::MAX_DURATION,
    zero_means: None,
};

/// The highest parallelism Flink accepts for a vertex (its maximum max-parallelism, 2^15):
/// a limit above it can never be reached, so it is a configuration mistake.
pub(super) const FLINK_MAX_PARALLELISM: i64 = 32_768;

/// The CPU quota's key.
pub(crate) const QUOTA_CPU_KEY: &str = "quota.cpu";
/// The memory quota's key.
pub(crate) const QUOTA_MEMORY_KEY: &str = "quota.memory";

/// The canonical key the Flink autoscaler names in "Scaling execution disabled by config" reports.
pub(crate) const SCALING_ENABLED_KEY: &str = "scaling.enabled";
/// The canonical key of the excluded periods.
pub(crate) const EXCLUDED_PERIODS_KEY: &str = "excluded.periods";
/// The IANA time zone in which the excluded periods are read.
pub(crate) const EXCLUDED_PERIODS_TIME_ZONE_KEY: &str = "excluded.periods.time-zone";

/// Collects typed reads, keeping every error instead of stopping at the first.
struct Reader<'a, C: ConfigLookup + ?Sized> {
    config: &'a C,
    errors: Vec<KeyError>,
}

impl<C: ConfigLookup + ?Sized> Reader<'_, C> {
    fn keep<T>(&mut self, result: Result<T, KeyError>, default: T) -> T {
        match result {
            Ok(v) => v,
            Err(e) => {
                self.errors.push(e);
                default
            }
        }
    }
    /// The first of `keys` that is set (canonical first, deprecated after).
    fn first_set<'k>(&self, keys: &[&'k str]) -> &'k str {
        keys.iter()
            .copied()
            .find(|k| self.config.get(k).is_some())
            .unwrap_or(keys[0])
    }
    fn f64(&mut self, keys: &[&str], default: f64) -> f64 {
        let key = self.first_set(keys);
        let r = self.config.f64_or(key, default);
        self.keep(r, default)
    }
    fn f64_opt(&mut self, key: &str) -> Option<f64> {
        let r = self.config.f64_opt(key);
        self.keep(r, None)
    }
    /// An optional memory size in Flink's syntax (`16 gb`), in bytes.
    fn memory_size_opt(&mut self, key: &str) -> Option<u64> {
        let raw = self.config.get(key)?;
        match parse_memory_size(raw) {
            Ok(bytes) => Some(bytes),
            Err(e) => {
                self.errors.push(KeyError::new(key, e.to_string()));
                None
            }
        }
    }
    fn i64(&mut self, key: &str, default: i64) -> i64 {
        let r = self.config.i64_or(key, default);
        self.keep(r, default)
    }
    fn bool(&mut self, key: &str, default: bool) -> bool {
        let r = self.config.bool_or(key, default);
        self.keep(r, default)
    }
    fn duration(&mut self, keys: &[&str], default: Duration, range: DurationRange) -> Duration {
        let key = self.first_set(keys);
        let r = self.config.duration_in(key, default, range);
        self.keep(r, default)
    }
    /// `metrics.busy-time.aggregator`.
    fn busy_time_aggregator(&mut self) -> BusyTimeAggregator {
        let busy = self.config.choice_or(
            "metrics.busy-time.aggregator",
            &["MAX", "MIN", "AVG"],
            "MAX",
        );
        match self.keep(busy, "MAX") {
            "MIN" => BusyTimeAggregator::Min,
            "AVG" => BusyTimeAggregator::Avg,
            _ => BusyTimeAggregator::Max,
        }
    }
    /// `excluded.periods`, read in the zone of `excluded.periods.time-zone`.
    fn excluded_periods(&mut self) -> ExcludedPeriods {
        let zone = match self.config.get(EXCLUDED_PERIODS_TIME_ZONE_KEY) {
            None => TimeZone::UTC,
            Some(name) => match TimeZone::get(name.trim()) {
                Ok(zone) => zone,
                Err(_) => {
                    self.errors.push(KeyError::new(
                        EXCLUDED_PERIODS_TIME_ZONE_KEY,
                        format!(
                            "`{name}` is not a time zone of the IANA database; valid: names such as `UTC`, `Europe/Berlin`, `America/New_York`"
                        ),
                    ));
                    TimeZone::UTC
                }
            },
        };
        match self.config.get(EXCLUDED_PERIODS_KEY) {
            None => ExcludedPeriods::default(),
            Some(raw) => match ExcludedPeriods::parse(raw, zone) {
                Ok(p) => p,
                Err(err) => {
                    self.errors
                        .push(KeyError::new(EXCLUDED_PERIODS_KEY, err.to_string()));
                    ExcludedPeriods::default()
                }
            },
        }
    }
    /// Every option by its key (canonical first, deprecated after), defaulting what is unset.
    fn options(
        &mut self,
        busy_time_aggregator: BusyTimeAggregator,
        excluded_periods: ExcludedPeriods,
    ) -> AutoscalerOptions {
        let d = AutoscalerOptions::default();
        AutoscalerOptions {
            enabled: self.bool("enabled", d.enabled),
            scaling_enabled: self.bool(SCALING_ENABLED_KEY, d.scaling_enabled),
            metrics_window: self.duration(
                &["metrics.window"],
                d.metrics_window,
                DurationRange::POSITIVE,
            ),
            stabilization_interval: self.duration(
                &["stabilization.interval"],
                d.stabilization_interval,
                DurationRange::zero_or_up_to_a_year(
                    "collects metrics right after a start or rescale",
                ),
            ),
            excluded_periods,
            utilization_target: self.f64(
                &["utilization.target", "target.utilization"],
                d.utilization_target,
            ),
            target_utilization_boundary: self.f64(
                &["target.utilization.boundary"],
                d.target_utilization_boundary,
            ),
            utilization_max: self.f64_opt("utilization.max"),
            utilization_min: self.f64_opt("utilization.min"),
            scale_down_interval: self.duration(
                &["scale-down.interval", "scale-up.grace-period"],
                d.scale_down_interval,
                DurationRange::zero_or_up_to_a_year("disables the scale-down delay"),
            ),
            vertex_min_parallelism: self.i64("vertex.min-parallelism", d.vertex_min_parallelism),
            vertex_max_parallelism: self.i64("vertex.max-parallelism", d.vertex_max_parallelism),
            scale_down_max_factor: self.f64(&["scale-down.max-factor"], d.scale_down_max_factor),
            scale_up_max_factor: self.f64(&["scale-up.max-factor"], d.scale_up_max_factor),
            catch_up_duration: self.duration(
                &["catch-up.duration"],
                d.catch_up_duration,
                DurationRange::zero_or_up_to_a_year("disables lag catch-up and the restart term"),
            ),
            restart_time: self.duration(&["restart.time"], d.restart_time, UP_TO_A_YEAR),
            restart_time_tracking_enabled: self.bool(
                "restart.time-tracking.enabled",
                d.restart_time_tracking_enabled,
            ),
            restart_time_tracking_limit: self.duration(
                &["restart.time-tracking.limit"],
                d.restart_time_tracking_limit,
                UP_TO_A_YEAR,
            ),
            backlog_processing_lag_threshold: self.duration(
                &["backlog-processing.lag-threshold"],
                d.backlog_processing_lag_threshold,
                UP_TO_A_YEAR,
            ),
            observed_tpr_lag_threshold: self.duration(
                &["observed-true-processing-rate.lag-threshold"],
                d.observed_tpr_lag_threshold,
                UP_TO_A_YEAR,
            ),
            observed_tpr_switch_threshold: self.f64(
                &["observed-true-processing-rate.switch-threshold"],
                d.observed_tpr_switch_threshold,
            ),
            observed_tpr_min_observations: self.i64(
                "observed-true-processing-rate.min-observations",
                d.observed_tpr_min_observations,
            ),
            scaling_effectiveness_detection_enabled: self.bool(
                "scaling.effectiveness.detection.enabled",
                d.scaling_effectiveness_detection_enabled,
            ),
            scaling_effectiveness_threshold: self.f64(
                &["scaling.effectiveness.threshold"],
                d.scaling_effectiveness_threshold,
            ),
            gc_pressure_threshold: self
                .f64(&["memory.gc-pressure.threshold"], d.gc_pressure_threshold),
            heap_usage_threshold: self
                .f64(&["memory.heap-usage.threshold"], d.heap_usage_threshold),
            history_max_count: self.i64("history.max.count", d.history_max_count),
            history_max_age: self.duration(&["history.max.age"], d.history_max_age, UP_TO_A_YEAR),
            busy_time_aggregator,
            vertex_exclude_ids: self.config.list("vertex.exclude.ids"),
            scaling_event_interval: self.duration(
                &["scaling.event.interval"],
                d.scaling_event_interval,
                DurationRange::zero_or_up_to_a_year("reports every identical event"),
            ),
            observed_scalability_enabled: self.bool(
                "observed-scalability.enabled",
                d.observed_scalability_enabled,
            ),
            observed_scalability_min_observations: self.i64(
                "observed-scalability.min-observations",
                d.observed_scalability_min_observations,
            ),
            observed_scalability_coefficient_min: self.f64(
                &["observed-scalability.coefficient-min"],
                d.observed_scalability_coefficient_min,
            ),
            quota_cpu: self.f64_opt(QUOTA_CPU_KEY),
            quota_memory: self.memory_size_opt(QUOTA_MEMORY_KEY),
        }
    }
    /// `value` in `(min, max]`.
    fn range_above(&mut self, key: &str, value: f64, min: f64, max: f64) {
        if !(value > min && value <= max) {
            self.errors.push(KeyError::new(
                key,
                format!("must be in ({min}, {max}], got {value}"),
            ));
        }
    }
    fn range(&mut self, key: &str, value: f64, min: f64, max: f64) {
        if !(min..=max).contains(&value) {
            let bound = if max.is_infinite() {
                format!("must be >= {min}")
            } else {
                format!("must be between {min} and {max}")
            };
            self.errors
                .push(KeyError::new(key, format!("{bound}, got {value}")));
        }
    }
}

impl AutoscalerOptions {
    /// Reads every option from a job's configuration (canonical keys) and validates the ranges
    /// the Flink autoscaler's validator checks. Returns every error found, not only the first.
    pub fn from_config<C: ConfigLookup + ?Sized>(config: &C) -> Result<Self, Vec<KeyError>> {
        let mut r = Reader {
            config,
            errors: Vec::new(),
        };
        let busy_time_aggregator = r.busy_time_aggregator();
        let excluded_periods = r.excluded_periods();
        let o = r.options(busy_time_aggregator, excluded_periods);
        o.validate_into(&mut r);
        if r.errors.is_empty() {
            Ok(o)
        } else {
            Err(r.errors)
        }
    }

    /// The Flink autoscaler's validator ranges, plus positive parallelism limits (a limit below 1 would
    /// let a vertex be scaled to parallelism 0, which the Flink autoscaler rejects later with an error).
    fn validate_into<C: ConfigLookup + ?Sized>(&self, r: &mut Reader<'_, C>) {
        let inf = f64::INFINITY;
        r.range(
            "scale-down.max-factor",
            self.scale_down_max_factor,
            0.0,
            inf,
        );
        r.range("scale-up.max-factor", self.scale_up_max_factor, 0.0, inf);
        let target_key = r.first_set(&["utilization.target", "target.utilization"]);
        // A target of 0 would make every vertex look infinitely overloaded (the first decision
        // scales all of them to their maximum), hence the open lower bound.
        r.range_above(target_key, self.utilization_target, 0.0, 1.0);
        r.range(
            "target.utilization.boundary",
            self.target_utilization_boundary,
            0.0,
            inf,
        );
        if let Some(max) = self.utilization_max {
            r.range("utilization.max", max, self.utilization_target, 1.0);
        }
        if let Some(min) = self.utilization_min {
            r.range_above("utilization.min", min, 0.0, self.utilization_target);
        }
        r.range(
            "memory.gc-pressure.threshold",
            self.gc_pressure_threshold,
            0.0,
            1.0,
        );
        r.range(
            "memory.heap-usage.threshold",
            self.heap_usage_threshold,
            0.0,
            1.0,
        );
        // A negative quota would block every scale-up, even when the TaskManagers' size is not
        // known (which counts as 0 cores); NaN would never block. Both are mistakes.
        if let Some(cpu) = self.quota_cpu {
            r.range(QUOTA_CPU_KEY, cpu, 0.0, inf);
        }
        if self.observed_scalability_enabled {
            r.range(
                "observed-scalability.coefficient-min",
                self.observed_scalability_coefficient_min,
                0.01,
                1.0,
            );
        }
        if self.scaling_effectiveness_detection_enabled {
            r.range(
                "scaling.effectiveness.threshold",
                self.scaling_effectiveness_threshold,
                0.0,
                1.0,
            );
        }
        let limits = [
            ("vertex.min-parallelism", self.vertex_min_parallelism),
            ("vertex.max-parallelism", self.vertex_max_parallelism),
        ];
        let mut limits_valid = true;
        for (key, value) in limits {
            if !(1..=FLINK_MAX_PARALLELISM).contains(&value) {
                limits_valid = false;
                r.errors.push(KeyError::new(
                    key,
                    format!(
                        "must be between 1 and {FLINK_MAX_PARALLELISM} (Flink's highest parallelism), got {value}"
                    ),
                ));
            }
        }
        // With min above max no target is ever within both limits: the job would never scale.
        if limits_valid && self.vertex_min_parallelism > self.vertex_max_parallelism {
            r.errors.push(KeyError::new(
                "vertex.min-parallelism",
                format!(
                    "must be at most vertex.max-parallelism ({}), got {}",
                    self.vertex_max_parallelism, self.vertex_min_parallelism
                ),
            ));
        }
    }

    /// Upper utilization of the band (`utilization.max`, else target + boundary).
    pub(crate) fn upper_utilization(&self) -> f64 {
        self.utilization_max
            .unwrap_or(self.utilization_target + self.target_utilization_boundary)
    }

    /// Lower utilization of the band (`utilization.min`, else target − boundary).
    pub(crate) fn lower_utilization(&self) -> f64 {
        self.utilization_min
            .unwrap_or(self.utilization_target - self.target_utilization_boundary)
    }
}

/// Whole seconds of a duration, as the Flink autoscaler's `Duration.toSeconds()` (truncating).
pub(crate) fn whole_seconds(d: Duration) -> f64 {
    d.as_secs() as f64
}

/// Milliseconds of a duration, saturating.
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {

    use super::*;

    use crate::config::config_map as cfg;

    #[test]
    fn defaults_are_the_flink_autoscalers() {
        let o = AutoscalerOptions::from_config(&cfg(&[])).unwrap();
        assert_eq!(o, AutoscalerOptions::default());
        assert_eq!(o.upper_utilization(), 1.0);
        assert!((o.lower_utilization() - 0.4).abs() < 1e-12);
        assert_eq!(o.scale_down_interval, Duration::from_secs(3600));
        assert_eq!(o.metrics_window, Duration::from_secs(900));
        assert_eq!(o.vertex_max_parallelism, 200);
        assert_eq!(o.scale_up_max_factor, 100_000.0);
    }

    #[test]
    fn deprecated_keys_are_fallbacks() {
        let o = AutoscalerOptions::from_config(&cfg(&[
            ("target.utilization", "0.5"),
            ("scale-up.grace-period", "10 min"),
        ]))
        .unwrap();
        assert_eq!(o.utilization_target, 0.5);
        assert_eq!(o.scale_down_interval, Duration::from_secs(600));
        let o = AutoscalerOptions::from_config(&cfg(&[
            ("target.utilization", "0.5"),
            ("utilization.target", "0.8"),
            ("scale-up.grace-period", "10 min"),
            ("scale-down.interval", "0"),
        ]))
        .unwrap();
        assert_eq!(o.utilization_target, 0.8);
        assert_eq!(o.scale_down_interval, Duration::ZERO);
    }

    #[test]
    fn validation_reports_every_error() {
        let errs = AutoscalerOptions::from_config(&cfg(&[
            ("utilization.target", "1.5"),
            ("scale-down.max-factor", "-1"),
            ("utilization.min", "0.9"),
            ("metrics.window", "soon"),
            ("metrics.busy-time.aggregator", "median"),
            ("vertex.min-parallelism", "0"),
        ]))
        .unwrap_err();
        let keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
        for k in [
            "utilization.target",
            "scale-down.max-factor",
            "metrics.window",
            "metrics.busy-time.aggregator",
            "vertex.min-parallelism",
        ] {
            assert!(keys.contains(&k), "{k} missing in {keys:?}");
        }
        // utilization.min must lie in [0, target]; target 1.5 is itself invalid but still the bound.
        let errs = AutoscalerOptions::from_config(&cfg(&[
            ("utilization.target", "0.7"),
            ("utilization.min", "0.8"),
            ("utilization.max", "0.6"),
        ]))
        .unwrap_err();
        assert_eq!(errs.len(), 2);
    }

    /// The single error of a configuration, as `key: message`.
    fn only_error(pairs: &[(&str, &str)]) -> String {
        let errs = AutoscalerOptions::from_config(&cfg(pairs)).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        errs[0].to_string()
    }

    #[test]
    fn utilization_lies_in_zero_exclusive_to_one() {
        let e = only_error(&[("utilization.target", "0")]);
        assert!(
            e.contains("`utilization.target`: must be in (0, 1], got 0"),
            "{e}"
        );
        let e = only_error(&[("target.utilization", "0")]);
        assert!(e.contains("`target.utilization`: must be in (0, 1]"), "{e}");
        let e = only_error(&[("utilization.target", "NaN")]);
        assert!(e.contains("must be in (0, 1]"), "{e}");
        let e = only_error(&[("utilization.min", "0")]);
        assert!(
            e.contains("`utilization.min`: must be in (0, 0.7], got 0"),
            "{e}"
        );
        let e = only_error(&[("utilization.max", "1.1")]);
        assert!(e.contains("`utilization.max`"), "{e}");
        let o = AutoscalerOptions::from_config(&cfg(&[
            ("utilization.target", "1"),
            ("utilization.min", "0.01"),
            ("utilization.max", "1"),
        ]))
        .expect("the upper ends are valid");
        assert_eq!(o.utilization_target, 1.0);
    }

    #[test]
    fn windows_and_intervals_are_bounded() {
        let e = only_error(&[("metrics.window", "0s")]);
        assert!(
            e.contains(
                "`metrics.window`: `0s` is out of range (valid: greater than 0 and at most 365d)"
            ),
            "{e}"
        );
        // 3,000 years: far beyond the one-year bound.
        let e = only_error(&[("stabilization.interval", "1095000 d")]);
        assert!(
            e.contains("`stabilization.interval`: `1095000 d` is out of range"),
            "{e}"
        );
        for key in [
            "scale-down.interval",
            "catch-up.duration",
            "restart.time",
            "restart.time-tracking.limit",
            "backlog-processing.lag-threshold",
            "observed-true-processing-rate.lag-threshold",
            "history.max.age",
            "scaling.event.interval",
        ] {
            let e = only_error(&[(key, "366 d")]);
            assert!(
                e.contains(&format!(
                    "`{key}`: `366 d` is out of range (valid: 0 to 365d"
                )),
                "{e}"
            );
            let at_bound = AutoscalerOptions::from_config(&cfg(&[(key, "365 d"), (key, "0")]));
            assert!(at_bound.is_ok(), "{key} = 0: {at_bound:?}");
            assert!(
                AutoscalerOptions::from_config(&cfg(&[(key, "365 d")])).is_ok(),
                "{key}"
            );
        }
        let e = only_error(&[("scale-up.grace-period", "400d")]);
        assert!(e.contains("`scale-up.grace-period`"), "{e}");
        let o = AutoscalerOptions::from_config(&cfg(&[("stabilization.interval", "0")]))
            .expect("zero stabilization is valid");
        assert_eq!(o.stabilization_interval, Duration::ZERO);
    }

    // The config_toml fuzz target's invariants found these limits accepted too.
    #[test]
    fn parallelism_limits_lie_in_flinks_range_with_min_at_most_max() {
        let e = only_error(&[("vertex.max-parallelism", "32769")]);
        assert!(
            e.contains("`vertex.max-parallelism`: must be between 1 and 32768"),
            "{e}"
        );
        let e = only_error(&[("vertex.min-parallelism", "0")]);
        assert!(
            e.contains("`vertex.min-parallelism`: must be between 1 and 32768"),
            "{e}"
        );
        let e = only_error(&[
            ("vertex.min-parallelism", "40"),
            ("vertex.max-parallelism", "20"),
        ]);
        assert!(
            e.contains(
                "`vertex.min-parallelism`: must be at most vertex.max-parallelism (20), got 40"
            ),
            "{e}"
        );
        // min above the default max (200) is refused too.
        let e = only_error(&[("vertex.min-parallelism", "201")]);
        assert!(e.contains("at most vertex.max-parallelism (200)"), "{e}");
        let o = AutoscalerOptions::from_config(&cfg(&[
            ("vertex.min-parallelism", "32768"),
            ("vertex.max-parallelism", "32768"),
        ]))
        .expect("equal limits at Flink's maximum are valid");
        assert_eq!(o.vertex_max_parallelism, FLINK_MAX_PARALLELISM);
    }

    #[test]
    fn feature_gated_ranges() {
        assert!(
            AutoscalerOptions::from_config(&cfg(&[("observed-scalability.coefficient-min", "0")]))
                .is_ok()
        );
        assert!(
            AutoscalerOptions::from_config(&cfg(&[
                ("observed-scalability.enabled", "true"),
                ("observed-scalability.coefficient-min", "0"),
            ]))
            .is_err()
        );
        assert!(
            AutoscalerOptions::from_config(&cfg(&[
                ("scaling.effectiveness.detection.enabled", "true"),
                ("scaling.effectiveness.threshold", "2"),
            ]))
            .is_err()
        );
    }

    #[test]
    fn excluded_periods_take_crons_in_their_time_zone() {
        let o = AutoscalerOptions::from_config(&cfg(&[
            ("excluded.periods", "* * 9-16 ? * MON-FRI && 09:30-16:00"),
            ("excluded.periods.time-zone", "America/New_York"),
        ]))
        .unwrap();
        // Monday 2024-01-15 15:00 UTC is 10:00 EST; 10:00 UTC is 05:00 EST.
        let monday_15_utc = 1_705_330_800_000;
        assert!(o.excluded_periods.is_excluded(monday_15_utc));
        assert!(
            !o.excluded_periods
                .is_excluded(monday_15_utc - 5 * 3_600_000)
        );
    }

    #[test]
    fn bad_periods_and_zones_are_refused_with_their_key() {
        let errs = AutoscalerOptions::from_config(&cfg(&[
            ("excluded.periods", "* * 9-17 * * MON-FRI"),
            ("excluded.periods.time-zone", "Europe/Atlantis"),
        ]))
        .unwrap_err();
        assert_eq!(errs.len(), 2, "{errs:?}");
        let zone = errs
            .iter()
            .find(|e| e.key == "excluded.periods.time-zone")
            .expect("the zone's error");
        assert!(
            zone.message.contains("Europe/Atlantis") && zone.message.contains("Europe/Berlin"),
            "{}",
            zone.message
        );
        let period = errs
            .iter()
            .find(|e| e.key == "excluded.periods")
            .expect("the period's error");
        assert!(period.message.contains("'?'"), "{}", period.message);
    }

    #[test]
    fn quotas_are_read_in_every_spelling() {
        let o = AutoscalerOptions::from_config(&cfg(&[])).unwrap();
        assert_eq!((o.quota_cpu, o.quota_memory), (None, None));
        let o = AutoscalerOptions::from_config(&cfg(&[
            ("quota.cpu", "12.5"),
            ("quota.memory", "16 gb"),
        ]))
        .unwrap();
        assert_eq!(o.quota_cpu, Some(12.5));
        // 16 · 2^30 bytes: Flink's units are binary.
        assert_eq!(o.quota_memory, Some(17_179_869_184));
        // Both autoscaler prefixes, through the job configuration that maps them.
        let config = crate::config::JobConfig::from_pairs([
            ("job.autoscaler.quota.cpu", "4"),
            ("kubernetes.operator.job.autoscaler.quota.memory", "1536m"),
        ]);
        let o = AutoscalerOptions::from_config(&config).unwrap();
        assert_eq!(o.quota_cpu, Some(4.0));
        assert_eq!(o.quota_memory, Some(1536 * 1024 * 1024));
    }

    #[test]
    fn bad_quotas_name_their_key_and_what_is_valid() {
        let e = only_error(&[("quota.cpu", "-1")]);
        assert!(e.contains("`quota.cpu`: must be >= 0, got -1"), "{e}");
        let e = only_error(&[("quota.cpu", "NaN")]);
        assert!(e.contains("`quota.cpu`: must be >= 0, got NaN"), "{e}");
        let e = only_error(&[("quota.cpu", "four")]);
        assert!(
            e.contains("`quota.cpu`: expected a number, got `four`"),
            "{e}"
        );
        let e = only_error(&[("quota.memory", "16 GiB")]);
        assert!(
            e.contains("`quota.memory`") && e.contains("unknown memory unit `gib`"),
            "{e}"
        );
        assert!(e.contains("gibibytes"), "{e}");
        let e = only_error(&[("quota.memory", "a lot")]);
        assert!(
            e.contains("`quota.memory`") && e.contains("is not a memory size"),
            "{e}"
        );
        // Both at once: every error is reported.
        let errs =
            AutoscalerOptions::from_config(&cfg(&[("quota.cpu", "-2"), ("quota.memory", "-3g")]))
                .unwrap_err();
        assert_eq!(errs.len(), 2, "{errs:?}");
    }

    #[test]
    fn whole_seconds_truncate() {
        assert_eq!(whole_seconds(Duration::from_millis(1999)), 1.0);
        assert_eq!(whole_seconds(Duration::from_millis(999)), 0.0);
    }
}
