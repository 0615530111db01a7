//! The shape of one entry of the configuration reference (`config::reference`): a key's name,
//! its fallbacks, its type with default and valid values, and what it means.
//!
//! Each type of value has a struct of its own, so that a reader gets its default and its bounds
//! typed (`METRICS_WINDOW.default` is a `Duration`) and a key read as the wrong type does not
//! compile. [`Described`] is what they share for the generated reference.

use std::time::Duration;

use super::duration::{DurationRange, describe};

/// Where a key belongs in the reference; also where it is written (see [`Section::scope`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Section {
    /// The alignment step's keys.
    Alignment,
    /// The decision pipeline's keys (the Flink autoscaler's).
    Pipeline,
    /// Rate control of the sources with the PID estimator.
    Backpressure,
    /// The cooldown between two scaling operations.
    Cooldown,
    /// Custom metric evaluators and scaling executors.
    Plugins,
    /// Flink keys flowscale recognises.
    Engine,
    /// The `[host]` table of the fleet file.
    Host,
    /// A `[clusters.<name>]` table of the fleet file.
    Clusters,
    /// The fields of a `[[jobs]]` entry of the fleet file.
    Jobs,
}

impl Section {
    /// Every section, in the order of the reference.
    pub(crate) const ALL: [Section; 9] = [
        Section::Alignment,
        Section::Pipeline,
        Section::Backpressure,
        Section::Cooldown,
        Section::Plugins,
        Section::Engine,
        Section::Host,
        Section::Clusters,
        Section::Jobs,
    ];

    /// The section's title (plain words, so that its anchor in the generated page is stable:
    /// `#decision-pipeline`).
    pub(crate) fn title(self) -> &'static str {
        match self {
            Section::Alignment => "Alignment",
            Section::Pipeline => "Decision pipeline",
            Section::Backpressure => "Backpressure (PID rate control)",
            Section::Cooldown => "Cooldown",
            Section::Plugins => "Plugins",
            Section::Engine => "Engine (Flink)",
            Section::Host => "Host",
            Section::Clusters => "Clusters",
            Section::Jobs => "Jobs",
        }
    }

    /// One sentence under the title: what the keys are for and where they are written.
    pub(crate) fn intro(self) -> &'static str {
        match self {
            Section::Alignment => {
                "How a target parallelism is aligned (docs/alignment.md); job configuration keys."
            }
            Section::Pipeline => {
                "The decision pipeline, with the Flink autoscaler's keys and defaults (docs/decision-pipeline.md); job configuration keys."
            }
            Section::Backpressure => {
                "Rate control of the sources with the PID estimator (docs/control-loop.md); job configuration keys."
            }
            Section::Cooldown => {
                "The minimum time between two scaling operations (docs/control-loop.md#cooldown); job configuration keys."
            }
            Section::Plugins => {
                "Custom metric evaluators and scaling executors (docs/plugin-kinds.md); job configuration keys."
            }
            Section::Engine => {
                "Flink keys that are accepted without a warning but not implemented; job configuration keys."
            }
            Section::Host => "The `[host]` table of the fleet file.",
            Section::Clusters => {
                "A `[clusters.<name>]` table of the fleet file: a Flink cluster defined once, named by jobs with `cluster`."
            }
            Section::Jobs => "The fields of a `[[jobs]]` entry of the fleet file.",
        }
    }

    /// Where its keys are written.
    pub(crate) fn scope(self) -> Scope {
        match self {
            Section::Host => Scope::Host,
            Section::Clusters => Scope::Cluster,
            Section::Jobs => Scope::JobEntry,
            _ => Scope::JobConfig,
        }
    }
}

/// Where a key is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// A flat key of a job's configuration (`[defaults]`, `[jobs.config]`, a Flink
    /// configuration): the `job.autoscaler.` / `kubernetes.operator.job.autoscaler.` prefixes
    /// and Flink's aliases apply.
    JobConfig,
    /// A key of `[host]`.
    Host,
    /// A key of `[clusters.<name>]`.
    Cluster,
    /// A field of `[[jobs]]`.
    JobEntry,
}

/// Whether flowscale acts on a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Read and acted on.
    Read,
    /// Accepted (not a typo, no warning) but not read: a Flink key whose behaviour flowscale
    /// does not implement.
    NotImplemented,
}

/// What every entry has.
#[derive(Debug, Clone, Copy)]
pub(crate) struct About {
    /// The canonical name (job keys without prefix). `<name>` and `<param>` stand for a part
    /// the user chooses: such a key names a family of keys.
    pub(crate) name: &'static str,
    /// Where it belongs.
    pub(crate) section: Section,
    /// Older spellings read when the canonical key is unset, in order.
    pub(crate) fallbacks: &'static [&'static str],
    /// One line: what it does.
    pub(crate) meaning: &'static str,
    /// Whether it is read.
    pub(crate) status: Status,
}

impl About {
    /// A key that is read, with no fallback.
    pub(crate) const fn new(name: &'static str, section: Section, meaning: &'static str) -> About {
        About {
            name,
            section,
            fallbacks: &[],
            meaning,
            status: Status::Read,
        }
    }

    /// The canonical name, then the fallbacks: the order in which a reader looks them up.
    pub(crate) fn names(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.name).chain(self.fallbacks.iter().copied())
    }

    /// The key's prefix when it names a family (`scaling.alignment.mode.` for
    /// `scaling.alignment.mode.<name>.class`).
    pub(crate) fn family(&self) -> Option<&'static str> {
        self.name.find(".<").map(|at| &self.name[..=at])
    }
}

/// What the generated reference shows of an entry.
pub(crate) trait Described: Sync {
    /// Name, section, fallbacks, meaning, status.
    fn about(&self) -> &About;
    /// The type, in a word or two.
    fn type_name(&self) -> &'static str;
    /// The default, as a user would write it; `—` when unset means nothing is set.
    fn default_text(&self) -> String;
    /// What is valid; empty when the type says it all.
    fn valid_text(&self) -> String;
}

/// A bound of a number's valid range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Bound {
    /// No bound.
    None,
    /// The value itself is valid.
    Closed(f64),
    /// The value itself is not valid.
    Open(f64),
    /// Another key's value (itself valid): `utilization.max` lies between the target and 1.
    Key(&'static str),
}

/// `true` or `false`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BoolKey {
    pub(crate) about: About,
    pub(crate) default: bool,
}

/// A number (an IEEE double).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FloatKey {
    pub(crate) about: About,
    /// `None`: unset by default (`unset` says what that means).
    pub(crate) default: Option<f64>,
    /// What an unset key without a default means.
    pub(crate) unset: &'static str,
    pub(crate) min: Bound,
    pub(crate) max: Bound,
    /// The boolean key that turns the range check on, when it is checked only then.
    pub(crate) checked_when: Option<&'static str>,
}

impl FloatKey {
    /// Whether `value` lies within the bounds (NaN never does; a key without bounds is not
    /// checked), with keys' bounds resolved by
    /// `bound_of`; the error says what would be valid, in the form every number check of the
    /// pipeline uses (`must be between 0 and 1, got 2`, `must be in (0, 1], got 0`).
    pub(crate) fn check(&self, value: f64, bound_of: impl Fn(&str) -> f64) -> Result<(), String> {
        let resolve = |b: Bound| match b {
            Bound::None => None,
            Bound::Closed(x) | Bound::Open(x) => Some(x),
            Bound::Key(key) => Some(bound_of(key)),
        };
        if self.min == Bound::None && self.max == Bound::None {
            return Ok(());
        }
        let min = resolve(self.min).unwrap_or(f64::NEG_INFINITY);
        let max = resolve(self.max).unwrap_or(f64::INFINITY);
        let above_min = match self.min {
            Bound::Open(_) => value > min,
            _ => value >= min,
        };
        let below_max = match self.max {
            Bound::Open(_) => value < max,
            _ => value <= max,
        };
        if above_min && below_max {
            return Ok(());
        }
        let bound = match (self.min, self.max) {
            (Bound::Open(_), _) => format!("must be in ({min}, {max}]"),
            (_, Bound::None) => format!("must be >= {min}"),
            _ => format!("must be between {min} and {max}"),
        };
        Err(format!("{bound}, got {value}"))
    }

    /// Finite and within constant bounds (a bound given by another key counts as none): the
    /// check of parameters validated where no other key is at hand.
    pub(crate) fn accepts(&self, value: f64) -> bool {
        value.is_finite() && self.check(value, |_| f64::NAN).is_ok()
    }
}

/// A whole number.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IntKey {
    pub(crate) about: About,
    /// `None`: unset by default (`unset` says what that means).
    pub(crate) default: Option<i64>,
    pub(crate) unset: &'static str,
    /// The valid range, both ends included; any integer when `None`.
    pub(crate) range: Option<(i64, i64)>,
}

impl IntKey {
    /// The default of a count (an entry with a default of at least 1), as a `usize`.
    pub(crate) const fn count_default(&self) -> usize {
        match self.default {
            Some(n) if n > 0 => n as usize,
            _ => 1,
        }
    }

    /// The highest valid value of a count (an entry whose range ends at 1 or above).
    pub(crate) const fn count_max(&self) -> usize {
        match self.range {
            Some((_, max)) if max > 0 => max as usize,
            _ => 1,
        }
    }
}

/// A duration in Flink syntax (`300s`, `5 min`, `1h`; a plain number is milliseconds).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DurationKey {
    pub(crate) about: About,
    /// `None`: unset by default (`unset` says what that means).
    pub(crate) default: Option<Duration>,
    pub(crate) unset: &'static str,
    pub(crate) range: DurationRange,
}

impl DurationKey {
    /// The default of a key that has one (every duration key a reader defaults).
    pub(crate) const fn default_or_zero(&self) -> Duration {
        match self.default {
            Some(d) => d,
            None => Duration::ZERO,
        }
    }
}

/// One of a fixed set of words.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChoiceKey {
    pub(crate) about: About,
    /// The default choice; empty when unset means nothing is chosen.
    pub(crate) default: &'static str,
    pub(crate) choices: &'static [&'static str],
    /// How the value is matched.
    pub(crate) case_insensitive: bool,
}

/// Text whose form the reader checks itself: a list, a path, a URL, a mode name, a period.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TextKey {
    pub(crate) about: About,
    /// `string`, `list`, `path`, `URL`, ...
    pub(crate) type_name: &'static str,
    /// The default value, when there is one.
    pub(crate) default: Option<&'static str>,
    /// What an unset key without a default means.
    pub(crate) unset: &'static str,
    /// What is valid.
    pub(crate) valid: &'static str,
}

fn float(x: f64) -> String {
    format!("{x}")
}

fn bound_text(b: Bound) -> Option<String> {
    match b {
        Bound::None => None,
        Bound::Closed(x) | Bound::Open(x) => Some(float(x)),
        Bound::Key(key) => Some(format!("`{key}`")),
    }
}

fn unset_text(unset: &str) -> String {
    if unset.is_empty() {
        "—".to_string()
    } else {
        unset.to_string()
    }
}

impl Described for BoolKey {
    fn about(&self) -> &About {
        &self.about
    }
    fn type_name(&self) -> &'static str {
        "boolean"
    }
    fn default_text(&self) -> String {
        self.default.to_string()
    }
    fn valid_text(&self) -> String {
        "`true`, `false`".to_string()
    }
}

impl Described for FloatKey {
    fn about(&self) -> &About {
        &self.about
    }
    fn type_name(&self) -> &'static str {
        "number"
    }
    fn default_text(&self) -> String {
        self.default
            .map(float)
            .unwrap_or_else(|| unset_text(self.unset))
    }
    fn valid_text(&self) -> String {
        let range = match (bound_text(self.min), bound_text(self.max)) {
            (None, None) => "any number".to_string(),
            (Some(min), None) => match self.min {
                Bound::Open(_) => format!("> {min}"),
                _ => format!("≥ {min}"),
            },
            (None, Some(max)) => match self.max {
                Bound::Open(_) => format!("< {max}"),
                _ => format!("≤ {max}"),
            },
            (Some(min), Some(max)) => {
                let open = if matches!(self.min, Bound::Open(_)) {
                    "("
                } else {
                    "["
                };
                let close = if matches!(self.max, Bound::Open(_)) {
                    ")"
                } else {
                    "]"
                };
                format!("{open}{min}, {max}{close}")
            }
        };
        match self.checked_when {
            Some(key) => format!("{range} (checked when `{key}` is true)"),
            None => range,
        }
    }
}

impl Described for IntKey {
    fn about(&self) -> &About {
        &self.about
    }
    fn type_name(&self) -> &'static str {
        "integer"
    }
    fn default_text(&self) -> String {
        self.default
            .map(|d| d.to_string())
            .unwrap_or_else(|| unset_text(self.unset))
    }
    fn valid_text(&self) -> String {
        match self.range {
            Some((min, max)) => format!("{min} to {max}"),
            None => "any integer".to_string(),
        }
    }
}

impl Described for DurationKey {
    fn about(&self) -> &About {
        &self.about
    }
    fn type_name(&self) -> &'static str {
        "duration"
    }
    fn default_text(&self) -> String {
        self.default
            .map(describe)
            .unwrap_or_else(|| unset_text(self.unset))
    }
    fn valid_text(&self) -> String {
        self.range.to_string()
    }
}

impl Described for ChoiceKey {
    fn about(&self) -> &About {
        &self.about
    }
    fn type_name(&self) -> &'static str {
        "choice"
    }
    fn default_text(&self) -> String {
        if self.default.is_empty() {
            unset_text("")
        } else {
            format!("`{}`", self.default)
        }
    }
    fn valid_text(&self) -> String {
        let choices: Vec<String> = self.choices.iter().map(|c| format!("`{c}`")).collect();
        let case = if self.case_insensitive {
            " (any case)"
        } else {
            ""
        };
        format!("{}{case}", choices.join(", "))
    }
}

impl Described for TextKey {
    fn about(&self) -> &About {
        &self.about
    }
    fn type_name(&self) -> &'static str {
        self.type_name
    }
    fn default_text(&self) -> String {
        match self.default {
            Some(value) => format!("`{value}`"),
            None => unset_text(self.unset),
        }
    }
    fn valid_text(&self) -> String {
        self.valid.to_string()
    }
}
