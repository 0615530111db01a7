//! The configuration reference: every key flowscale reads (and every Flink key it recognises
//! without implementing), with its type, default, valid values and meaning, in one table.
//!
//! The readers take their defaults and bounds from here (`METRICS_WINDOW.default`,
//! `UTILIZATION_TARGET.check(..)`), the misspelling check takes the known names from here, and
//! `flowscale config keys` prints this table (docs/configuration.md is its output). A key is
//! therefore added with one entry below (in the section where the reference should show it)
//! and read through its constant.
//!
//! Job keys are canonical: without the `job.autoscaler.` / `kubernetes.operator.job.autoscaler.`
//! prefix every one of them may carry, and with Flink's aliases resolved (`config::keys`).

use std::time::Duration;

use super::duration::{DurationRange, MAX_DURATION};
use super::spec::Section::{
    Alignment, Backpressure, Clusters, Cooldown, Engine, Host, Jobs, Pipeline, Plugins,
};
use super::spec::{
    About, BoolKey, Bound, ChoiceKey, Described, DurationKey, FloatKey, IntKey, Status, TextKey,
};

/// Defines each entry as a constant (what readers use) and lists them all in [`KEYS`], so that
/// an entry is written once.
macro_rules! reference {
    ($($(#[$doc:meta])* $id:ident: $ty:ty = $value:expr;)*) => {
        $($(#[$doc])* pub(crate) const $id: $ty = $value;)*
        /// Every entry, in the order of the reference.
        pub(crate) const KEYS: &[&dyn Described] = &[$(&$id),*];
    };
}

/// Zero up to a year, for durations whose zero is harmless and needs no note.
const UP_TO_A_YEAR: DurationRange = DurationRange {
    min: Duration::ZERO,
    max: MAX_DURATION,
    zero_means: None,
};

/// A key that is recognised but not read.
const fn not_implemented(name: &'static str, meaning: &'static str) -> About {
    About {
        name,
        section: Engine,
        fallbacks: &[],
        meaning,
        status: Status::NotImplemented,
    }
}

/// The highest parallelism Flink accepts for a vertex (its maximum max-parallelism, 2^15):
/// a limit above it can never be reached, so it is a configuration mistake.
pub(crate) const FLINK_MAX_PARALLELISM: i64 = 32_768;

/// The largest number of requests in flight to one cluster (`[host]` and per cluster).
const MAX_REQUESTS: i64 = 256;

/// The largest `[host] workers`: the jobs' cycles compute for microseconds, so more threads
/// than this only cost memory.
const MAX_WORKERS: i64 = 1024;

const SECOND: u64 = 1;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;

reference! {
    // --- Alignment -------------------------------------------------------------------------
    ALIGNMENT_MODE: TextKey = TextKey {
        about: About::new(
            "scaling.alignment.mode",
            Alignment,
            "how a target parallelism is aligned (docs/alignment.md); Flink's `scaling.parallelism-alignment.mode` is an alias",
        ),
        type_name: "string",
        default: Some("BALANCED"),
        unset: "",
        valid: "`BALANCED`, `EVENLY_SPREAD`, `OFF`, `ADVANCED` (matched exactly) or a custom mode name",
    };
    ALIGNMENT_MODE_CLASS: TextKey = TextKey {
        about: About::new(
            "scaling.alignment.mode.<name>.class",
            Alignment,
            "implementation id of the custom mode `<name>` (see `flowscale plugins`)",
        ),
        type_name: "string",
        default: None,
        unset: "",
        valid: "an id a plugin provides",
    };
    ALIGNMENT_MODE_PARAM: TextKey = TextKey {
        about: About::new(
            "scaling.alignment.mode.<name>.<param>",
            Alignment,
            "a parameter handed to the mode `<name>` as `<param>`; the mode checks it",
        ),
        type_name: "string",
        default: None,
        unset: "",
        valid: "what the mode accepts",
    };
    ADVANCED_SCALE_UP: TextKey = TextKey {
        about: About::new(
            "scaling.alignment.mode.ADVANCED.scale-up",
            Alignment,
            "the ordered scale-up steps of ADVANCED",
        ),
        type_name: "steps",
        default: Some("ABOVE_TARGET:LOAD_REDUCING"),
        unset: "",
        valid: "comma-separated `REGION:RULE` steps; regions `ABOVE_TARGET`, `WITHIN_RANGE`",
    };
    ADVANCED_SCALE_DOWN: TextKey = TextKey {
        about: About::new(
            "scaling.alignment.mode.ADVANCED.scale-down",
            Alignment,
            "the ordered scale-down steps of ADVANCED",
        ),
        type_name: "steps",
        default: Some("WITHIN_RANGE:LOAD_REDUCING"),
        unset: "",
        valid: "comma-separated `REGION:RULE` steps; regions `WITHIN_RANGE`, `BELOW_TARGET`",
    };
    ADVANCED_FALLBACK: ChoiceKey = ChoiceKey {
        about: About::new(
            "scaling.alignment.mode.ADVANCED.fallback",
            Alignment,
            "what ADVANCED does when no step accepts a value",
        ),
        default: "TARGET",
        choices: &["TARGET", "CURRENT", "RELAXED"],
        case_insensitive: true,
    };
    LEGACY_ALIGNMENT_MODE: ChoiceKey = ChoiceKey {
        about: About::new(
            "scaling.key-group.partitions.adjust.mode",
            Alignment,
            "deprecated blocking modes, read only when `scaling.alignment.mode` is unset",
        ),
        default: "",
        choices: &["EVENLY_SPREAD", "MAXIMIZE_UTILISATION"],
        case_insensitive: true,
    };

    // --- Decision pipeline -----------------------------------------------------------------
    /// The master switch. The Flink autoscaler defaults it to false; in flowscale, listing a
    /// job in the fleet is the opt-in, so only an explicit `false` turns it off.
    ENABLED: BoolKey = BoolKey {
        about: About::new(
            "enabled",
            Pipeline,
            "the master switch; listing a job in the fleet is the opt-in (Flink defaults it to false), so only `false` turns the autoscaler off",
        ),
        default: true,
    };
    SCALING_ENABLED: BoolKey = BoolKey {
        about: About::new(
            "scaling.enabled",
            Pipeline,
            "`false`: advisor mode, recommendations only",
        ),
        default: true,
    };
    METRICS_WINDOW: DurationKey = DurationKey {
        about: About::new("metrics.window", Pipeline, "the metric window decisions average over"),
        default: Some(Duration::from_secs(15 * MINUTE)),
        unset: "",
        range: DurationRange::POSITIVE,
    };
    STABILIZATION_INTERVAL: DurationKey = DurationKey {
        about: About::new(
            "stabilization.interval",
            Pipeline,
            "no metrics are collected this long after a start or rescale",
        ),
        default: Some(Duration::from_secs(5 * MINUTE)),
        unset: "",
        range: DurationRange::zero_or_up_to_a_year(
            "collects metrics right after a start or rescale",
        ),
    };
    EXCLUDED_PERIODS: TextKey = TextKey {
        about: About::new("excluded.periods", Pipeline, "times during which nothing is scaled"),
        type_name: "list",
        default: None,
        unset: "none",
        valid: "daily `HH:mm-HH:mm` ranges, Quartz crons, or `cron && range`, separated by `;`",
    };
    EXCLUDED_PERIODS_TIME_ZONE: TextKey = TextKey {
        about: About::new(
            "excluded.periods.time-zone",
            Pipeline,
            "the zone in which the excluded periods are read",
        ),
        type_name: "time zone",
        default: Some("UTC"),
        unset: "",
        valid: "a name of the IANA database (`Europe/Berlin`)",
    };
    UTILIZATION_TARGET: FloatKey = FloatKey {
        about: About {
            fallbacks: &["target.utilization"],
            ..About::new("utilization.target", Pipeline, "the target busy ratio of every vertex")
        },
        default: Some(0.7),
        unset: "",
        min: Bound::Open(0.0),
        max: Bound::Closed(1.0),
        checked_when: None,
    };
    TARGET_UTILIZATION_BOUNDARY: FloatKey = FloatKey {
        about: About::new(
            "target.utilization.boundary",
            Pipeline,
            "the band around the target, when `utilization.max` / `utilization.min` are unset",
        ),
        default: Some(0.3),
        unset: "",
        min: Bound::Closed(0.0),
        max: Bound::None,
        checked_when: None,
    };
    UTILIZATION_MAX: FloatKey = FloatKey {
        about: About::new("utilization.max", Pipeline, "the upper end of the utilization band"),
        default: None,
        unset: "target + boundary",
        min: Bound::Key("utilization.target"),
        max: Bound::Closed(1.0),
        checked_when: None,
    };
    UTILIZATION_MIN: FloatKey = FloatKey {
        about: About::new("utilization.min", Pipeline, "the lower end of the utilization band"),
        default: None,
        unset: "target − boundary",
        min: Bound::Open(0.0),
        max: Bound::Key("utilization.target"),
        checked_when: None,
    };
    SCALE_DOWN_INTERVAL: DurationKey = DurationKey {
        about: About {
            fallbacks: &["scale-up.grace-period"],
            ..About::new(
                "scale-down.interval",
                Pipeline,
                "scale-downs wait this long and apply the highest recommendation seen",
            )
        },
        default: Some(Duration::from_secs(HOUR)),
        unset: "",
        range: DurationRange::zero_or_up_to_a_year("disables the scale-down delay"),
    };
    VERTEX_MIN_PARALLELISM: IntKey = IntKey {
        about: About::new(
            "vertex.min-parallelism",
            Pipeline,
            "the lowest parallelism a vertex is scaled to (`lower = min(current, this)`); at most `vertex.max-parallelism`",
        ),
        default: Some(1),
        unset: "",
        range: Some((1, FLINK_MAX_PARALLELISM)),
    };
    VERTEX_MAX_PARALLELISM: IntKey = IntKey {
        about: About::new(
            "vertex.max-parallelism",
            Pipeline,
            "the highest parallelism a vertex is scaled to (`upper = max(current, this)`)",
        ),
        default: Some(200),
        unset: "",
        range: Some((1, FLINK_MAX_PARALLELISM)),
    };
    SCALE_DOWN_MAX_FACTOR: FloatKey = FloatKey {
        about: About::new(
            "scale-down.max-factor",
            Pipeline,
            "the scale factor is at least `1 − this`",
        ),
        default: Some(0.6),
        unset: "",
        min: Bound::Closed(0.0),
        max: Bound::None,
        checked_when: None,
    };
    SCALE_UP_MAX_FACTOR: FloatKey = FloatKey {
        about: About::new(
            "scale-up.max-factor",
            Pipeline,
            "the scale factor is at most `1 + this`",
        ),
        default: Some(100_000.0),
        unset: "",
        min: Bound::Closed(0.0),
        max: Bound::None,
        checked_when: None,
    };
    CATCH_UP_DURATION: DurationKey = DurationKey {
        about: About::new(
            "catch-up.duration",
            Pipeline,
            "the horizon within which a backlog is to be caught up",
        ),
        default: Some(Duration::from_secs(30 * MINUTE)),
        unset: "",
        range: DurationRange::zero_or_up_to_a_year("disables lag catch-up and the restart term"),
    };
    RESTART_TIME: DurationKey = DurationKey {
        about: About::new("restart.time", Pipeline, "the expected time a rescale takes"),
        default: Some(Duration::from_secs(5 * MINUTE)),
        unset: "",
        range: UP_TO_A_YEAR,
    };
    RESTART_TIME_TRACKING_ENABLED: BoolKey = BoolKey {
        about: About::new(
            "restart.time-tracking.enabled",
            Pipeline,
            "use the observed restart times instead of `restart.time`",
        ),
        default: false,
    };
    RESTART_TIME_TRACKING_LIMIT: DurationKey = DurationKey {
        about: About::new(
            "restart.time-tracking.limit",
            Pipeline,
            "the longest observed restart time that is used",
        ),
        default: Some(Duration::from_secs(15 * MINUTE)),
        unset: "",
        range: UP_TO_A_YEAR,
    };
    BACKLOG_PROCESSING_LAG_THRESHOLD: DurationKey = DurationKey {
        about: About::new(
            "backlog-processing.lag-threshold",
            Pipeline,
            "a source whose lag takes longer than this to drain marks the job as processing a backlog, which changes the utilization band",
        ),
        default: Some(Duration::from_secs(5 * MINUTE)),
        unset: "",
        range: UP_TO_A_YEAR,
    };
    OBSERVED_TPR_LAG_THRESHOLD: DurationKey = DurationKey {
        about: About::new(
            "observed-true-processing-rate.lag-threshold",
            Pipeline,
            "a source lagging at least this long behind is measured for its observed true processing rate",
        ),
        default: Some(Duration::from_secs(30 * SECOND)),
        unset: "",
        range: UP_TO_A_YEAR,
    };
    OBSERVED_TPR_SWITCH_THRESHOLD: FloatKey = FloatKey {
        about: About::new(
            "observed-true-processing-rate.switch-threshold",
            Pipeline,
            "relative difference from the busy-time rate above which the observed rate is used",
        ),
        default: Some(0.15),
        unset: "",
        min: Bound::None,
        max: Bound::None,
        checked_when: None,
    };
    OBSERVED_TPR_MIN_OBSERVATIONS: IntKey = IntKey {
        about: About::new(
            "observed-true-processing-rate.min-observations",
            Pipeline,
            "observations needed before the observed true processing rate is used",
        ),
        default: Some(2),
        unset: "",
        range: None,
    };
    SCALING_EFFECTIVENESS_DETECTION_ENABLED: BoolKey = BoolKey {
        about: About::new(
            "scaling.effectiveness.detection.enabled",
            Pipeline,
            "block scale-ups that did not raise throughput",
        ),
        default: false,
    };
    SCALING_EFFECTIVENESS_THRESHOLD: FloatKey = FloatKey {
        about: About::new(
            "scaling.effectiveness.threshold",
            Pipeline,
            "the share of the expected throughput gain a scale-up must deliver",
        ),
        default: Some(0.1),
        unset: "",
        min: Bound::Closed(0.0),
        max: Bound::Closed(1.0),
        checked_when: Some("scaling.effectiveness.detection.enabled"),
    };
    GC_PRESSURE_THRESHOLD: FloatKey = FloatKey {
        about: About::new(
            "memory.gc-pressure.threshold",
            Pipeline,
            "no scaling while the share of time spent in GC is above this",
        ),
        default: Some(1.0),
        unset: "",
        min: Bound::Closed(0.0),
        max: Bound::Closed(1.0),
        checked_when: None,
    };
    HEAP_USAGE_THRESHOLD: FloatKey = FloatKey {
        about: About::new(
            "memory.heap-usage.threshold",
            Pipeline,
            "no scaling while the heap usage is above this",
        ),
        default: Some(1.0),
        unset: "",
        min: Bound::Closed(0.0),
        max: Bound::Closed(1.0),
        checked_when: None,
    };
    HISTORY_MAX_COUNT: IntKey = IntKey {
        about: About::new(
            "history.max.count",
            Pipeline,
            "scaling operations kept per vertex in the history",
        ),
        default: Some(3),
        unset: "",
        range: None,
    };
    HISTORY_MAX_AGE: DurationKey = DurationKey {
        about: About::new("history.max.age", Pipeline, "how long the history keeps an operation"),
        default: Some(Duration::from_secs(24 * HOUR)),
        unset: "",
        range: UP_TO_A_YEAR,
    };
    BUSY_TIME_AGGREGATOR: ChoiceKey = ChoiceKey {
        about: About::new(
            "metrics.busy-time.aggregator",
            Pipeline,
            "the aggregate of `busyTimeMsPerSecond` over a vertex's subtasks",
        ),
        default: "MAX",
        choices: &["MAX", "MIN", "AVG"],
        case_insensitive: true,
    };
    VERTEX_EXCLUDE_IDS: TextKey = TextKey {
        about: About::new("vertex.exclude.ids", Pipeline, "vertices that are never scaled"),
        type_name: "list",
        default: None,
        unset: "none",
        valid: "vertex ids separated by `;` (or `,`)",
    };
    SCALING_EVENT_INTERVAL: DurationKey = DurationKey {
        about: About::new(
            "scaling.event.interval",
            Pipeline,
            "identical events are reported once per interval",
        ),
        default: Some(Duration::from_secs(30 * MINUTE)),
        unset: "",
        range: DurationRange::zero_or_up_to_a_year("reports every identical event"),
    };
    OBSERVED_SCALABILITY_ENABLED: BoolKey = BoolKey {
        about: About::new(
            "observed-scalability.enabled",
            Pipeline,
            "correct the scale factor by the observed scalability",
        ),
        default: false,
    };
    OBSERVED_SCALABILITY_MIN_OBSERVATIONS: IntKey = IntKey {
        about: About::new(
            "observed-scalability.min-observations",
            Pipeline,
            "observations needed before the observed scalability is used",
        ),
        default: Some(3),
        unset: "",
        range: None,
    };
    OBSERVED_SCALABILITY_COEFFICIENT_MIN: FloatKey = FloatKey {
        about: About::new(
            "observed-scalability.coefficient-min",
            Pipeline,
            "the lowest scalability coefficient used",
        ),
        default: Some(0.5),
        unset: "",
        min: Bound::Closed(0.01),
        max: Bound::Closed(1.0),
        checked_when: Some("observed-scalability.enabled"),
    };
    SCALING_PRIORITY: IntKey = IntKey {
        about: About::new(
            "scaling.priority",
            Pipeline,
            "when the scale-ups due on one cluster need more slots than are free, higher priorities are served first",
        ),
        default: Some(0),
        unset: "",
        range: None,
    };
    /// Off by default so that the decisions stay exactly the Flink autoscaler's.
    SCALING_RESTART_AWARE: BoolKey = BoolKey {
        about: About::new(
            "scaling.restart-aware",
            Pipeline,
            "skip a scale-down or a scale-up not needed to keep up when the slots it changes, over the expected hold time, do not outweigh the restart (ScalingSkipped)",
        ),
        default: false,
    };
    /// Off by default so that the decisions stay exactly the Flink autoscaler's.
    SCALING_SKEW_AWARE: BoolKey = BoolKey {
        about: About::new(
            "scaling.skew-aware",
            Pipeline,
            "where a keyed vertex's per-subtask load is known and skewed, target the smallest parallelism whose busiest subtask, predicted by key-group ranges, carries the target capacity (docs/skew-aware.md)",
        ),
        default: false,
    };
    /// Negative would block every scale-up even where the TaskManagers' size is unknown.
    QUOTA_CPU: FloatKey = FloatKey {
        about: About::new(
            "quota.cpu",
            Pipeline,
            "the CPU cores the job's TaskManagers may have together; a scale-up past it is blocked (ResourceQuotaReached)",
        ),
        default: None,
        unset: "no CPU quota",
        min: Bound::Closed(0.0),
        max: Bound::None,
        checked_when: None,
    };
    QUOTA_MEMORY: TextKey = TextKey {
        about: About::new(
            "quota.memory",
            Pipeline,
            "the TaskManager process memory the job may have together; a scale-up past it is blocked (ResourceQuotaReached)",
        ),
        type_name: "memory size",
        default: None,
        unset: "no memory quota",
        valid: "Flink's memory size, binary units: `16 gb`, `1536m`, `512 mb`",
    };

    // --- Backpressure ----------------------------------------------------------------------
    BACKPRESSURE_ENABLED: BoolKey = BoolKey {
        about: About::new(
            "backpressure.enabled",
            Backpressure,
            "rate control of the job's sources with a PID estimator",
        ),
        default: false,
    };
    RATE_ESTIMATOR: ChoiceKey = ChoiceKey {
        about: About::new("backpressure.rate-estimator", Backpressure, "the rate estimator"),
        default: "pid",
        choices: &["pid"],
        case_insensitive: true,
    };
    /// One second (the simulator's tick) when unset. Set it to the interval at which the
    /// caller actually feeds the controller (e.g. the control loop's interval on a Flink
    /// cluster), because the estimator's integral term divides by it.
    BATCH_INTERVAL: DurationKey = DurationKey {
        about: About::new(
            "backpressure.batch-interval",
            Backpressure,
            "how often the rate controller is fed a completed batch",
        ),
        default: Some(Duration::from_secs(SECOND)),
        unset: "",
        range: DurationRange::POSITIVE,
    };
    PID_PROPORTIONAL: FloatKey = FloatKey {
        about: About::new("backpressure.pid.proportional", Backpressure, "the proportional gain"),
        default: Some(1.0),
        unset: "",
        min: Bound::Closed(0.0),
        max: Bound::None,
        checked_when: None,
    };
    PID_INTEGRAL: FloatKey = FloatKey {
        about: About::new("backpressure.pid.integral", Backpressure, "the integral gain"),
        default: Some(0.2),
        unset: "",
        min: Bound::Closed(0.0),
        max: Bound::None,
        checked_when: None,
    };
    PID_DERIVED: FloatKey = FloatKey {
        about: About::new(
            "backpressure.pid.derived",
            Backpressure,
            "the derivative gain (the key says `derived`, as Spark's does)",
        ),
        default: Some(0.0),
        unset: "",
        min: Bound::Closed(0.0),
        max: Bound::None,
        checked_when: None,
    };
    PID_MIN_RATE: FloatKey = FloatKey {
        about: About::new(
            "backpressure.pid.min-rate",
            Backpressure,
            "the lowest rate limit ever published, in records per second",
        ),
        default: Some(100.0),
        unset: "",
        min: Bound::Open(0.0),
        max: Bound::None,
        checked_when: None,
    };

    // --- Cooldown --------------------------------------------------------------------------
    COOLDOWN_PERIOD: DurationKey = DurationKey {
        about: About::new(
            "scaling-cooldown-period",
            Cooldown,
            "the minimum time between two scaling operations of a job",
        ),
        default: Some(Duration::from_secs(5 * MINUTE)),
        unset: "",
        range: DurationRange::zero_or_up_to_a_year("disables the cooldown"),
    };

    // --- Plugins ---------------------------------------------------------------------------
    CUSTOM_EVALUATORS: TextKey = TextKey {
        about: About::new(
            "metrics.custom-evaluators",
            Plugins,
            "the custom metric evaluator instance of the job (only the first listed is used)",
        ),
        type_name: "list",
        default: None,
        unset: "none",
        valid: "instance names separated by `;` (or `,`)",
    };
    CUSTOM_EVALUATOR_CLASS: TextKey = TextKey {
        about: About::new(
            "metrics.custom-evaluator.<name>.class",
            Plugins,
            "implementation id of the evaluator instance `<name>`",
        ),
        type_name: "string",
        default: None,
        unset: "",
        valid: "an id a plugin provides",
    };
    CUSTOM_EVALUATOR_PARAM: TextKey = TextKey {
        about: About::new(
            "metrics.custom-evaluator.<name>.<param>",
            Plugins,
            "a parameter handed to the evaluator instance `<name>`; the evaluator checks it",
        ),
        type_name: "string",
        default: None,
        unset: "",
        valid: "what the evaluator accepts",
    };
    CUSTOM_EXECUTORS: TextKey = TextKey {
        about: About::new(
            "scaling.custom-executors",
            Plugins,
            "the chain of custom scaling executor instances, in order",
        ),
        type_name: "list",
        default: None,
        unset: "none",
        valid: "instance names separated by `;` (or `,`)",
    };
    CUSTOM_EXECUTOR_CLASS: TextKey = TextKey {
        about: About::new(
            "scaling.custom-executor.<name>.class",
            Plugins,
            "implementation id of the executor instance `<name>`",
        ),
        type_name: "string",
        default: None,
        unset: "",
        valid: "an id a plugin provides",
    };
    CUSTOM_EXECUTOR_PARAM: TextKey = TextKey {
        about: About::new(
            "scaling.custom-executor.<name>.<param>",
            Plugins,
            "a parameter handed to the executor instance `<name>`; the executor checks it",
        ),
        type_name: "string",
        default: None,
        unset: "",
        valid: "what the executor accepts",
    };

    // --- Engine (Flink keys recognised, not read) ------------------------------------------
    FLINK_REST_CLIENT_TIMEOUT: TextKey = TextKey {
        about: not_implemented(
            "flink.rest-client.timeout",
            "a REST request to Flink has a fixed 10 s deadline",
        ),
        type_name: "duration",
        default: None,
        unset: "",
        valid: "accepted and ignored",
    };
    JOBVERTEX_PARALLELISM_OVERRIDES: TextKey = TextKey {
        about: not_implemented(
            "pipeline.jobvertex-parallelism-overrides",
            "flowscale applies its decisions through its engine",
        ),
        type_name: "map",
        default: None,
        unset: "",
        valid: "accepted and ignored",
    };

    // --- Host ------------------------------------------------------------------------------
    HOST_PLUGINS: TextKey = TextKey {
        about: About::new("plugins", Host, "the directory plugins are discovered in"),
        type_name: "path",
        default: None,
        unset: "`plugins` beside the fleet file",
        valid: "a path, relative to the fleet file",
    };
    /// A cycle more often than every 100 ms would only busy-loop against the engine (its
    /// metrics do not change that fast), and more than a year apart the job is never looked at.
    HOST_INTERVAL: DurationKey = DurationKey {
        about: About::new("interval", Host, "the time between two cycles of a job"),
        default: Some(Duration::from_secs(10 * SECOND)),
        unset: "",
        range: DurationRange {
            min: Duration::from_millis(100),
            max: MAX_DURATION,
            zero_means: None,
        },
    };
    HOST_STATE_DIR: TextKey = TextKey {
        about: About::new(
            "state-dir",
            Host,
            "persist wall-clock jobs' state in files in this directory (not with `state`)",
        ),
        type_name: "path",
        default: None,
        unset: "in memory",
        valid: "a directory, or a path where one can be created",
    };
    HOST_PLUGIN_ISOLATION: ChoiceKey = ChoiceKey {
        about: About::new(
            "plugin-isolation",
            Host,
            "where plugin code runs: in the host, or a worker process per plugin file",
        ),
        default: "in-process",
        choices: &["in-process", "process"],
        case_insensitive: false,
    };
    HOST_PLUGIN_CALL_TIMEOUT: DurationKey = DurationKey {
        about: About::new("plugin-call-timeout", Host, "the deadline of one call into a plugin"),
        default: Some(Duration::from_secs(SECOND)),
        unset: "",
        range: DurationRange {
            min: Duration::from_millis(1),
            max: Duration::from_secs(HOUR),
            zero_means: None,
        },
    };
    HOST_WORKERS: IntKey = IntKey {
        about: About::new("workers", Host, "threads that run the jobs' cycles"),
        default: None,
        unset: "one per core",
        range: Some((1, MAX_WORKERS)),
    };
    /// Enough for a few jobs' cycles to overlap, few enough that a fleet of hundreds of jobs
    /// on one cluster does not flood its REST endpoint (the JobManager answers REST on a small
    /// thread pool of its own).
    HOST_MAX_REQUESTS_PER_CLUSTER: IntKey = IntKey {
        about: About::new(
            "max-requests-per-cluster",
            Host,
            "requests in flight to one Flink cluster at once, across all its jobs",
        ),
        default: Some(4),
        unset: "",
        range: Some((1, MAX_REQUESTS)),
    };
    HOST_LISTEN: TextKey = TextKey {
        about: About::new(
            "listen",
            Host,
            "where the metrics, API and dashboard server listens; another address than loopback needs a token and TLS",
        ),
        type_name: "address",
        default: None,
        unset: "no server",
        valid: "`IP:PORT`, e.g. `127.0.0.1:9464`",
    };
    HOST_API_TOKEN: TextKey = TextKey {
        about: About::new(
            "api-token",
            Host,
            "the bearer token every request to the server must carry (prefer `api-token-file`)",
        ),
        type_name: "string",
        default: None,
        unset: "",
        valid: "16 to 256 visible ASCII characters",
    };
    HOST_API_TOKEN_FILE: TextKey = TextKey {
        about: About::new(
            "api-token-file",
            Host,
            "the file the bearer token is read from, again when it changes (not with `api-token`)",
        ),
        type_name: "path",
        default: None,
        unset: "",
        valid: "a file only the host's user can read",
    };
    HOST_TLS_CERT_FILE: TextKey = TextKey {
        about: About::new(
            "tls-cert-file",
            Host,
            "the server's certificate chain (PEM): the server speaks HTTPS; with `tls-key-file`",
        ),
        type_name: "path",
        default: None,
        unset: "",
        valid: "a PEM file",
    };
    HOST_TLS_KEY_FILE: TextKey = TextKey {
        about: About::new(
            "tls-key-file",
            Host,
            "the server certificate's private key (PEM); with `tls-cert-file`",
        ),
        type_name: "path",
        default: None,
        unset: "",
        valid: "a PEM file only the host's user can read",
    };
    HOST_LISTEN_PLAINTEXT: BoolKey = BoolKey {
        about: About::new(
            "listen-plaintext",
            Host,
            "serve another address than loopback without TLS, for a TLS-terminating proxy in front",
        ),
        default: false,
    };
    HOST_STATE: TextKey = TextKey {
        about: About::new(
            "state",
            Host,
            "the PostgreSQL database several hosts share the fleet through (not with `state-dir`)",
        ),
        type_name: "URL",
        default: None,
        unset: "",
        valid: "`postgres://` or `postgresql://` URL",
    };
    HOST_ID: TextKey = TextKey {
        about: About::new("id", Host, "this host's name among the hosts sharing the database"),
        type_name: "string",
        default: None,
        unset: "hostname and process id",
        valid: "1 to 200 characters",
    };
    /// Shorter than 200 ms, a host would spend its time renewing; longer than an hour, a dead
    /// host's jobs would wait that long for a new owner.
    HOST_LEASE_TTL: DurationKey = DurationKey {
        about: About::new("lease-ttl", Host, "how long a job's lease holds without renewal"),
        default: Some(Duration::from_secs(30 * SECOND)),
        unset: "",
        range: DurationRange {
            min: Duration::from_millis(200),
            max: Duration::from_secs(HOUR),
            zero_means: None,
        },
    };

    // --- Clusters --------------------------------------------------------------------------
    CLUSTER_REST: TextKey = TextKey {
        about: About::new("rest", Clusters, "the base URL of the cluster's REST API (required)"),
        type_name: "URL",
        default: None,
        unset: "",
        valid: "`http://` or `https://` with a port in 1..=65535",
    };
    CLUSTER_CA_FILE: TextKey = TextKey {
        about: About::new("ca-file", Clusters, "the CAs trusted for this cluster (PEM bundle)"),
        type_name: "path",
        default: None,
        unset: "the system's trusted roots",
        valid: "a PEM file",
    };
    CLUSTER_CERT_FILE: TextKey = TextKey {
        about: About::new(
            "cert-file",
            Clusters,
            "the client certificate for mutual TLS; with `key-file`",
        ),
        type_name: "path",
        default: None,
        unset: "",
        valid: "a PEM file",
    };
    CLUSTER_KEY_FILE: TextKey = TextKey {
        about: About::new("key-file", Clusters, "the client certificate's key; with `cert-file`"),
        type_name: "path",
        default: None,
        unset: "",
        valid: "a PEM file only the host's user can read",
    };
    CLUSTER_TOKEN_FILE: TextKey = TextKey {
        about: About::new(
            "token-file",
            Clusters,
            "sent as `Authorization: Bearer <contents>` (not with `basic-auth-file`)",
        ),
        type_name: "path",
        default: None,
        unset: "",
        valid: "a file only the host's user can read",
    };
    CLUSTER_BASIC_AUTH_FILE: TextKey = TextKey {
        about: About::new(
            "basic-auth-file",
            Clusters,
            "one line `user:password`, sent as HTTP basic authentication",
        ),
        type_name: "path",
        default: None,
        unset: "",
        valid: "a file only the host's user can read",
    };
    CLUSTER_MAX_REQUESTS: IntKey = IntKey {
        about: About::new("max-requests", Clusters, "requests in flight to this cluster at once"),
        default: None,
        unset: "`[host] max-requests-per-cluster`",
        range: Some((1, MAX_REQUESTS)),
    };
    CLUSTER_SLOTS: IntKey = IntKey {
        about: About::new(
            "slots",
            Clusters,
            "a simulated cluster (no `rest`): the task slots its `engine = \"sim\"` jobs share",
        ),
        default: None,
        unset: "not a simulated cluster",
        range: Some((1, 100_000)),
    };

    // --- Jobs ------------------------------------------------------------------------------
    JOB_NAME: TextKey = TextKey {
        about: About::new("name", Jobs, "the job's name (required)"),
        type_name: "string",
        default: None,
        unset: "",
        valid: "non-empty, unique in the fleet",
    };
    JOB_ENGINE: ChoiceKey = ChoiceKey {
        about: About::new("engine", Jobs, "what runs the job"),
        default: "sim",
        choices: &["sim", "flink", "replay"],
        case_insensitive: false,
    };
    JOB_JOB: TextKey = TextKey {
        about: About::new("job", Jobs, "sim: the simulated job's description (required)"),
        type_name: "path",
        default: None,
        unset: "",
        valid: "a TOML file, relative to the fleet file",
    };
    JOB_TRACE: TextKey = TextKey {
        about: About::new("trace", Jobs, "replay: the recorded observations (required)"),
        type_name: "path",
        default: None,
        unset: "",
        valid: "a JSON Lines file, relative to the fleet file",
    };
    JOB_REST: TextKey = TextKey {
        about: About::new("rest", Jobs, "flink: the REST URL of the cluster (or `cluster`)"),
        type_name: "URL",
        default: None,
        unset: "",
        valid: "`http://` or `https://` with a port in 1..=65535",
    };
    JOB_CLUSTER: TextKey = TextKey {
        about: About::new("cluster", Jobs, "flink: the `[clusters.<name>]` the job runs on (or `rest`)"),
        type_name: "string",
        default: None,
        unset: "",
        valid: "a cluster of the file",
    };
    JOB_ID: TextKey = TextKey {
        about: About::new("job-id", Jobs, "flink: the job's id"),
        type_name: "string",
        default: None,
        unset: "every RUNNING job of the cluster",
        valid: "a Flink job id",
    };
    JOB_DURATION: TextKey = TextKey {
        about: About::new("duration", Jobs, "sim: simulated time to run for"),
        type_name: "duration",
        default: None,
        unset: "until the simulated job ends",
        valid: "a duration, or a TOML integer of milliseconds",
    };
    JOB_CONFIG: TextKey = TextKey {
        about: About::new(
            "config",
            Jobs,
            "the job's own flat keys (the job configuration keys above), over `[defaults]`",
        ),
        type_name: "table",
        default: None,
        unset: "`[defaults]` alone",
        valid: "a table of flat keys",
    };
}

/// The names of the entries of `section`, in order (e.g. the keys of `[host]`).
pub(crate) fn names_in(section: super::spec::Section) -> Vec<&'static str> {
    KEYS.iter()
        .map(|k| k.about())
        .filter(|a| a.section == section)
        .map(|a| a.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::spec::Scope;

    #[test]
    fn names_are_unique_within_where_they_are_written() {
        let mut seen = std::collections::BTreeSet::new();
        for key in KEYS {
            let a = key.about();
            let scope = format!("{:?}", a.section.scope());
            for name in a.names() {
                assert!(
                    seen.insert((scope.clone(), name)),
                    "{name} twice in {scope}"
                );
            }
        }
    }

    #[test]
    fn defaults_lie_within_their_ranges() {
        for d in [
            &METRICS_WINDOW,
            &STABILIZATION_INTERVAL,
            &SCALE_DOWN_INTERVAL,
            &CATCH_UP_DURATION,
            &RESTART_TIME,
            &RESTART_TIME_TRACKING_LIMIT,
            &BACKLOG_PROCESSING_LAG_THRESHOLD,
            &OBSERVED_TPR_LAG_THRESHOLD,
            &HISTORY_MAX_AGE,
            &SCALING_EVENT_INTERVAL,
            &BATCH_INTERVAL,
            &COOLDOWN_PERIOD,
            &HOST_INTERVAL,
            &HOST_PLUGIN_CALL_TIMEOUT,
            &HOST_LEASE_TTL,
        ] {
            let default = d.default.expect("a default");
            assert_eq!(d.range.check(default), Ok(()), "{}", d.about.name);
        }
        let target = UTILIZATION_TARGET.default.expect("a default");
        for f in [
            &UTILIZATION_TARGET,
            &TARGET_UTILIZATION_BOUNDARY,
            &SCALE_DOWN_MAX_FACTOR,
            &SCALE_UP_MAX_FACTOR,
            &SCALING_EFFECTIVENESS_THRESHOLD,
            &GC_PRESSURE_THRESHOLD,
            &HEAP_USAGE_THRESHOLD,
            &OBSERVED_SCALABILITY_COEFFICIENT_MIN,
            &PID_PROPORTIONAL,
            &PID_INTEGRAL,
            &PID_DERIVED,
            &PID_MIN_RATE,
        ] {
            let default = f.default.expect("a default");
            assert_eq!(f.check(default, |_| target), Ok(()), "{}", f.about.name);
        }
        for i in [
            &VERTEX_MIN_PARALLELISM,
            &VERTEX_MAX_PARALLELISM,
            &HOST_MAX_REQUESTS_PER_CLUSTER,
        ] {
            let (min, max) = i.range.expect("a range");
            let default = i.default.expect("a default");
            assert!((min..=max).contains(&default), "{}", i.about.name);
        }
    }

    #[test]
    fn the_mode_keys_are_the_sdks() {
        assert_eq!(ALIGNMENT_MODE.about.name, flowscale_sdk::MODE_KEY);
        for (family, sdk) in [
            (ALIGNMENT_MODE_CLASS.about.family(), flowscale_sdk::MODE_KEY),
            (
                CUSTOM_EVALUATOR_CLASS.about.family(),
                flowscale_sdk::EVALUATOR_KEY,
            ),
            (
                CUSTOM_EXECUTOR_CLASS.about.family(),
                flowscale_sdk::EXECUTOR_KEY,
            ),
        ] {
            assert_eq!(family, Some(format!("{sdk}.").as_str()));
        }
    }

    #[test]
    fn fleet_sections_are_fleet_scopes() {
        assert_eq!(names_in(Host).first(), Some(&"plugins"));
        assert!(names_in(Clusters).contains(&"max-requests"));
        assert_eq!(Jobs.scope(), Scope::JobEntry);
        assert_eq!(Pipeline.scope(), Scope::JobConfig);
    }
}
