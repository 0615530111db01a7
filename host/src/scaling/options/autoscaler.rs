//! The decision pipeline's options (docs/decision-pipeline.md#configuration). Their names,
//! fallbacks, defaults and ranges are entries of the configuration reference
//! (`config::reference`, docs/configuration.md); this file reads them into one struct.
//!
//! Keys are canonical (no `job.autoscaler.` prefix). Where the Flink autoscaler still honours a
//! deprecated key, it is the entry's fallback, read after the canonical one: `target.utilization`
//! for `utilization.target`, `scale-up.grace-period` for `scale-down.interval`.
//!
//! Not implemented, hence not read: memory tuning (`memory.tuning.*`). The custom evaluator and executor keys are read where the job's plugins are resolved
//! (`scaling::custom`, docs/plugin-kinds.md).

use std::time::Duration;

use jiff::tz::TimeZone;

use crate::config::reference::{
    BACKLOG_PROCESSING_LAG_THRESHOLD, BUSY_TIME_AGGREGATOR, CATCH_UP_DURATION, ENABLED,
    EXCLUDED_PERIODS, EXCLUDED_PERIODS_TIME_ZONE, GC_PRESSURE_THRESHOLD, HEAP_USAGE_THRESHOLD,
    HISTORY_MAX_AGE, HISTORY_MAX_COUNT, METRICS_WINDOW, OBSERVED_SCALABILITY_COEFFICIENT_MIN,
    OBSERVED_SCALABILITY_ENABLED, OBSERVED_SCALABILITY_MIN_OBSERVATIONS,
    OBSERVED_TPR_LAG_THRESHOLD, OBSERVED_TPR_MIN_OBSERVATIONS, OBSERVED_TPR_SWITCH_THRESHOLD,
    QUOTA_CPU, QUOTA_MEMORY, RESTART_TIME, RESTART_TIME_TRACKING_ENABLED,
    RESTART_TIME_TRACKING_LIMIT, SCALE_DOWN_INTERVAL, SCALE_DOWN_MAX_FACTOR, SCALE_UP_MAX_FACTOR,
    SCALING_EFFECTIVENESS_DETECTION_ENABLED, SCALING_EFFECTIVENESS_THRESHOLD, SCALING_ENABLED,
    SCALING_EVENT_INTERVAL, SCALING_RESTART_AWARE, SCALING_SKEW_AWARE, STABILIZATION_INTERVAL,
    TARGET_UTILIZATION_BOUNDARY, UTILIZATION_MAX, UTILIZATION_MIN, UTILIZATION_TARGET,
    VERTEX_EXCLUDE_IDS, VERTEX_MAX_PARALLELISM, VERTEX_MIN_PARALLELISM,
};
use crate::config::spec::{BoolKey, DurationKey, FloatKey, IntKey};
use crate::config::{ConfigLookup, ConfigLookupExt, KeyError, parse_memory_size};

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

/// Every option the decision pipeline reads; their defaults are the configuration reference's
/// (`config::reference`, the Flink autoscaler's except `enabled`).
#[derive(Debug, Clone, PartialEq)]
pub struct AutoscalerOptions {
    /// `enabled`: the master switch. The pipeline does not read it; the control loop
    /// decides whether to run a cycle (and clears the job's state when it is off).
    pub enabled: bool,
    /// `scaling.enabled`: false = advisor mode (recommend, do not scale).
    pub scaling_enabled: bool,
    /// `metrics.window`.
    pub metrics_window: Duration,
    /// `stabilization.interval`.
    pub stabilization_interval: Duration,
    /// `excluded.periods`: daily ranges and Quartz crons, read in
    /// `excluded.periods.time-zone`, during which nothing is scaled.
    pub excluded_periods: ExcludedPeriods,
    /// `utilization.target` (deprecated `target.utilization`).
    pub utilization_target: f64,
    /// `target.utilization.boundary`, used when `utilization.max`/`min` are unset.
    pub target_utilization_boundary: f64,
    /// `utilization.max`.
    pub utilization_max: Option<f64>,
    /// `utilization.min`.
    pub utilization_min: Option<f64>,
    /// `scale-down.interval` (deprecated `scale-up.grace-period`); zero disables the delay.
    pub scale_down_interval: Duration,
    /// `vertex.min-parallelism`.
    pub vertex_min_parallelism: i64,
    /// `vertex.max-parallelism`.
    pub vertex_max_parallelism: i64,
    /// `scale-down.max-factor`: the scale factor is at least `1 - x`.
    pub scale_down_max_factor: f64,
    /// `scale-up.max-factor`: the scale factor is at most `1 + x`.
    pub scale_up_max_factor: f64,
    /// `catch-up.duration`; zero disables lag catch-up and the restart term.
    pub catch_up_duration: Duration,
    /// `restart.time`.
    pub restart_time: Duration,
    /// `restart.time-tracking.enabled`.
    pub restart_time_tracking_enabled: bool,
    /// `restart.time-tracking.limit`.
    pub restart_time_tracking_limit: Duration,
    /// `backlog-processing.lag-threshold`.
    pub backlog_processing_lag_threshold: Duration,
    /// `observed-true-processing-rate.lag-threshold`.
    pub observed_tpr_lag_threshold: Duration,
    /// `observed-true-processing-rate.switch-threshold`.
    pub observed_tpr_switch_threshold: f64,
    /// `observed-true-processing-rate.min-observations`.
    pub observed_tpr_min_observations: i64,
    /// `scaling.effectiveness.detection.enabled`.
    pub scaling_effectiveness_detection_enabled: bool,
    /// `scaling.effectiveness.threshold`.
    pub scaling_effectiveness_threshold: f64,
    /// `memory.gc-pressure.threshold`.
    pub gc_pressure_threshold: f64,
    /// `memory.heap-usage.threshold`.
    pub heap_usage_threshold: f64,
    /// `history.max.count`.
    pub history_max_count: i64,
    /// `history.max.age`.
    pub history_max_age: Duration,
    /// `metrics.busy-time.aggregator`.
    pub busy_time_aggregator: BusyTimeAggregator,
    /// `vertex.exclude.ids`: vertices never scaled.
    pub vertex_exclude_ids: Vec<String>,
    /// `scaling.event.interval`: how long identical events are suppressed.
    pub scaling_event_interval: Duration,
    /// `observed-scalability.enabled`.
    pub observed_scalability_enabled: bool,
    /// `observed-scalability.min-observations`.
    pub observed_scalability_min_observations: i64,
    /// `observed-scalability.coefficient-min`.
    pub observed_scalability_coefficient_min: f64,
    /// `quota.cpu` (unset): the CPU cores the job's TaskManagers may have together; a scale-up
    /// that needs more TaskManagers than fit is blocked (docs/decision-pipeline.md#resource-quota).
    pub quota_cpu: Option<f64>,
    /// `quota.memory` (unset): the TaskManager process memory, in bytes, the job may have
    /// together (Flink's memory size syntax, e.g. `16 gb`).
    pub quota_memory: Option<u64>,
    /// `scaling.restart-aware` (false): skip an operation whose change in slots, held for the
    /// expected time, does not outweigh the restart it costs
    /// (docs/decision-pipeline.md#restart-aware-hysteresis).
    pub restart_aware: bool,
    /// `scaling.skew-aware` (false): where a keyed vertex's per-subtask load is known and
    /// skewed, target the smallest parallelism whose predicted busiest subtask carries the
    /// target capacity (docs/skew-aware.md).
    pub skew_aware: bool,
}

/// The default of a number key that has one (every one the options default).
const fn f64_default(key: &FloatKey) -> f64 {
    match key.default {
        Some(x) => x,
        None => f64::NAN,
    }
}

/// The default of an integer key that has one.
const fn i64_default(key: &IntKey) -> i64 {
    match key.default {
        Some(x) => x,
        None => 0,
    }
}

impl Default for AutoscalerOptions {
    /// Every option at the reference's default.
    fn default() -> Self {
        AutoscalerOptions {
            enabled: ENABLED.default,
            scaling_enabled: SCALING_ENABLED.default,
            metrics_window: METRICS_WINDOW.default_or_zero(),
            stabilization_interval: STABILIZATION_INTERVAL.default_or_zero(),
            excluded_periods: ExcludedPeriods::default(),
            utilization_target: f64_default(&UTILIZATION_TARGET),
            target_utilization_boundary: f64_default(&TARGET_UTILIZATION_BOUNDARY),
            utilization_max: UTILIZATION_MAX.default,
            utilization_min: UTILIZATION_MIN.default,
            scale_down_interval: SCALE_DOWN_INTERVAL.default_or_zero(),
            vertex_min_parallelism: i64_default(&VERTEX_MIN_PARALLELISM),
            vertex_max_parallelism: i64_default(&VERTEX_MAX_PARALLELISM),
            scale_down_max_factor: f64_default(&SCALE_DOWN_MAX_FACTOR),
            scale_up_max_factor: f64_default(&SCALE_UP_MAX_FACTOR),
            catch_up_duration: CATCH_UP_DURATION.default_or_zero(),
            restart_time: RESTART_TIME.default_or_zero(),
            restart_time_tracking_enabled: RESTART_TIME_TRACKING_ENABLED.default,
            restart_time_tracking_limit: RESTART_TIME_TRACKING_LIMIT.default_or_zero(),
            backlog_processing_lag_threshold: BACKLOG_PROCESSING_LAG_THRESHOLD.default_or_zero(),
            observed_tpr_lag_threshold: OBSERVED_TPR_LAG_THRESHOLD.default_or_zero(),
            observed_tpr_switch_threshold: f64_default(&OBSERVED_TPR_SWITCH_THRESHOLD),
            observed_tpr_min_observations: i64_default(&OBSERVED_TPR_MIN_OBSERVATIONS),
            scaling_effectiveness_detection_enabled: SCALING_EFFECTIVENESS_DETECTION_ENABLED
                .default,
            scaling_effectiveness_threshold: f64_default(&SCALING_EFFECTIVENESS_THRESHOLD),
            gc_pressure_threshold: f64_default(&GC_PRESSURE_THRESHOLD),
            heap_usage_threshold: f64_default(&HEAP_USAGE_THRESHOLD),
            history_max_count: i64_default(&HISTORY_MAX_COUNT),
            history_max_age: HISTORY_MAX_AGE.default_or_zero(),
            busy_time_aggregator: BusyTimeAggregator::Max,
            vertex_exclude_ids: Vec::new(),
            scaling_event_interval: SCALING_EVENT_INTERVAL.default_or_zero(),
            observed_scalability_enabled: OBSERVED_SCALABILITY_ENABLED.default,
            observed_scalability_min_observations: i64_default(
                &OBSERVED_SCALABILITY_MIN_OBSERVATIONS,
            ),
            observed_scalability_coefficient_min: f64_default(
                &OBSERVED_SCALABILITY_COEFFICIENT_MIN,
            ),
            restart_aware: SCALING_RESTART_AWARE.default,
            skew_aware: SCALING_SKEW_AWARE.default,
            quota_cpu: None,
            quota_memory: None,
        }
    }
}

/// The canonical key the Flink autoscaler names in "Scaling execution disabled by config" reports.
pub(crate) const SCALING_ENABLED_KEY: &str = SCALING_ENABLED.about.name;
/// The canonical key of the excluded periods.
pub(crate) const EXCLUDED_PERIODS_KEY: &str = EXCLUDED_PERIODS.about.name;
/// The IANA time zone in which the excluded periods are read.
const EXCLUDED_PERIODS_TIME_ZONE_KEY: &str = EXCLUDED_PERIODS_TIME_ZONE.about.name;

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
    /// The first of the key's names that is set (canonical first, fallbacks after).
    fn first_set(&self, name: &'static str, fallbacks: &[&'static str]) -> &'static str {
        std::iter::once(name)
            .chain(fallbacks.iter().copied())
            .find(|k| self.config.get(k).is_some())
            .unwrap_or(name)
    }
    fn f64(&mut self, key: &FloatKey) -> f64 {
        let name = self.first_set(key.about.name, key.about.fallbacks);
        let default = f64_default(key);
        let r = self.config.f64_or(name, default);
        self.keep(r, default)
    }
    fn f64_opt(&mut self, key: &FloatKey) -> Option<f64> {
        let r = self.config.f64_opt(key.about.name);
        self.keep(r, key.default)
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
    fn i64(&mut self, key: &IntKey) -> i64 {
        let default = i64_default(key);
        let r = self.config.i64_or(key.about.name, default);
        self.keep(r, default)
    }
    fn bool(&mut self, key: &BoolKey) -> bool {
        let r = self.config.bool_or(key.about.name, key.default);
        self.keep(r, key.default)
    }
    fn duration(&mut self, key: &DurationKey) -> Duration {
        let name = self.first_set(key.about.name, key.about.fallbacks);
        let default = key.default_or_zero();
        let r = self.config.duration_in(name, default, key.range);
        self.keep(r, default)
    }
    /// `metrics.busy-time.aggregator`.
    fn busy_time_aggregator(&mut self) -> BusyTimeAggregator {
        let key = &BUSY_TIME_AGGREGATOR;
        let busy = self
            .config
            .choice_or(key.about.name, key.choices, key.default);
        match self.keep(busy, key.default) {
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
        AutoscalerOptions {
            enabled: self.bool(&ENABLED),
            scaling_enabled: self.bool(&SCALING_ENABLED),
            metrics_window: self.duration(&METRICS_WINDOW),
            stabilization_interval: self.duration(&STABILIZATION_INTERVAL),
            excluded_periods,
            utilization_target: self.f64(&UTILIZATION_TARGET),
            target_utilization_boundary: self.f64(&TARGET_UTILIZATION_BOUNDARY),
            utilization_max: self.f64_opt(&UTILIZATION_MAX),
            utilization_min: self.f64_opt(&UTILIZATION_MIN),
            scale_down_interval: self.duration(&SCALE_DOWN_INTERVAL),
            vertex_min_parallelism: self.i64(&VERTEX_MIN_PARALLELISM),
            vertex_max_parallelism: self.i64(&VERTEX_MAX_PARALLELISM),
            scale_down_max_factor: self.f64(&SCALE_DOWN_MAX_FACTOR),
            scale_up_max_factor: self.f64(&SCALE_UP_MAX_FACTOR),
            catch_up_duration: self.duration(&CATCH_UP_DURATION),
            restart_time: self.duration(&RESTART_TIME),
            restart_time_tracking_enabled: self.bool(&RESTART_TIME_TRACKING_ENABLED),
            restart_time_tracking_limit: self.duration(&RESTART_TIME_TRACKING_LIMIT),
            backlog_processing_lag_threshold: self.duration(&BACKLOG_PROCESSING_LAG_THRESHOLD),
            observed_tpr_lag_threshold: self.duration(&OBSERVED_TPR_LAG_THRESHOLD),
            observed_tpr_switch_threshold: self.f64(&OBSERVED_TPR_SWITCH_THRESHOLD),
            observed_tpr_min_observations: self.i64(&OBSERVED_TPR_MIN_OBSERVATIONS),
            scaling_effectiveness_detection_enabled: self
                .bool(&SCALING_EFFECTIVENESS_DETECTION_ENABLED),
            scaling_effectiveness_threshold: self.f64(&SCALING_EFFECTIVENESS_THRESHOLD),
            gc_pressure_threshold: self.f64(&GC_PRESSURE_THRESHOLD),
            heap_usage_threshold: self.f64(&HEAP_USAGE_THRESHOLD),
            history_max_count: self.i64(&HISTORY_MAX_COUNT),
            history_max_age: self.duration(&HISTORY_MAX_AGE),
            busy_time_aggregator,
            vertex_exclude_ids: self.config.list(VERTEX_EXCLUDE_IDS.about.name),
            scaling_event_interval: self.duration(&SCALING_EVENT_INTERVAL),
            observed_scalability_enabled: self.bool(&OBSERVED_SCALABILITY_ENABLED),
            observed_scalability_min_observations: self.i64(&OBSERVED_SCALABILITY_MIN_OBSERVATIONS),
            observed_scalability_coefficient_min: self.f64(&OBSERVED_SCALABILITY_COEFFICIENT_MIN),
            restart_aware: self.bool(&SCALING_RESTART_AWARE),
            skew_aware: self.bool(&SCALING_SKEW_AWARE),
            quota_cpu: self.f64_opt(&QUOTA_CPU),
            quota_memory: self.memory_size_opt(QUOTA_MEMORY.about.name),
        }
    }
    /// `value` within the reference's range of `key` (the spelling that was set is named),
    /// a bound given by `utilization.target` resolved to `target`.
    fn range(&mut self, key: &FloatKey, value: f64, target: f64) {
        let name = self.first_set(key.about.name, key.about.fallbacks);
        if let Err(message) = key.check(value, |_| target) {
            self.errors.push(KeyError::new(name, message));
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

    /// The Flink autoscaler's validator ranges (the reference's), plus positive parallelism
    /// limits (a limit below 1 would let a vertex be scaled to parallelism 0, which the Flink
    /// autoscaler rejects later with an error).
    fn validate_into<C: ConfigLookup + ?Sized>(&self, r: &mut Reader<'_, C>) {
        let target = self.utilization_target;
        // A target of 0 would make every vertex look infinitely overloaded (the first decision
        // scales all of them to their maximum), hence the open lower bound of its range.
        for (key, value) in [
            (&SCALE_DOWN_MAX_FACTOR, Some(self.scale_down_max_factor)),
            (&SCALE_UP_MAX_FACTOR, Some(self.scale_up_max_factor)),
            (&UTILIZATION_TARGET, Some(self.utilization_target)),
            (
                &TARGET_UTILIZATION_BOUNDARY,
                Some(self.target_utilization_boundary),
            ),
            (&UTILIZATION_MAX, self.utilization_max),
            (&UTILIZATION_MIN, self.utilization_min),
            (&GC_PRESSURE_THRESHOLD, Some(self.gc_pressure_threshold)),
            (&HEAP_USAGE_THRESHOLD, Some(self.heap_usage_threshold)),
            // A negative quota would block every scale-up, even when the TaskManagers' size
            // is not known (which counts as 0 cores); NaN would never block. Both are mistakes.
            (&QUOTA_CPU, self.quota_cpu),
        ] {
            if let Some(value) = value {
                r.range(key, value, target);
            }
        }
        // Checked only when the feature that reads them is on (`checked_when`), as in Flink.
        if self.observed_scalability_enabled {
            r.range(
                &OBSERVED_SCALABILITY_COEFFICIENT_MIN,
                self.observed_scalability_coefficient_min,
                target,
            );
        }
        if self.scaling_effectiveness_detection_enabled {
            r.range(
                &SCALING_EFFECTIVENESS_THRESHOLD,
                self.scaling_effectiveness_threshold,
                target,
            );
        }
        let limits = [
            (&VERTEX_MIN_PARALLELISM, self.vertex_min_parallelism),
            (&VERTEX_MAX_PARALLELISM, self.vertex_max_parallelism),
        ];
        let mut limits_valid = true;
        for (key, value) in limits {
            let (min, max) = key.range.unwrap_or((i64::MIN, i64::MAX));
            if !(min..=max).contains(&value) {
                limits_valid = false;
                r.errors.push(KeyError::new(
                    key.about.name,
                    format!(
                        "must be between {min} and {max} (Flink's highest parallelism), got {value}"
                    ),
                ));
            }
        }
        // With min above max no target is ever within both limits: the job would never scale.
        if limits_valid && self.vertex_min_parallelism > self.vertex_max_parallelism {
            r.errors.push(KeyError::new(
                VERTEX_MIN_PARALLELISM.about.name,
                format!(
                    "must be at most {} ({}), got {}",
                    VERTEX_MAX_PARALLELISM.about.name,
                    self.vertex_max_parallelism,
                    self.vertex_min_parallelism
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
    use crate::config::reference::FLINK_MAX_PARALLELISM;

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
