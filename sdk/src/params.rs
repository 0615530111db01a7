//! A mode's parameters: the prefix-stripped `scaling.alignment.mode.<name>.*` keys, with typed
//! getters whose errors name the full key the user wrote.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// The canonical prefix of every mode parameter.
pub const MODE_KEY: &str = "scaling.alignment.mode";
/// The canonical prefix of every metric evaluator's parameters
/// (`metrics.custom-evaluator.<name>.<param>`).
pub const EVALUATOR_KEY: &str = "metrics.custom-evaluator";
/// The canonical prefix of every scaling executor's parameters
/// (`scaling.custom-executor.<name>.<param>`).
pub const EXECUTOR_KEY: &str = "scaling.custom-executor";

/// The parameters of the selected mode: every `scaling.alignment.mode.<name>.<rest>` key as
/// `<rest> -> value` (so `.class` appears as `class`), and nothing else.
///
/// Immutable once built, and shared: the host hands the same parameters to every vertex of a
/// job, so a clone costs two reference counts, not a copy of every string.
#[derive(Clone)]
pub struct ModeParams {
    /// The key family the parameters were read under: [`MODE_KEY`], [`EVALUATOR_KEY`] or
    /// [`EXECUTOR_KEY`]; only used to name the full key in messages.
    family: &'static str,
    mode_name: Arc<str>,
    entries: Arc<BTreeMap<String, String>>,
    /// A number for these parameters, as the job graph has one (SDK 0.1.5): each built set
    /// gets one of its own from a process-wide counter (never 0) and its clones share it, so
    /// equal numbers are equal parameters. The plugin side of an evaluator's or executor's
    /// context then skips comparing parameters it already holds. Not part of the value.
    number: u64,
}

/// A new number for a set of parameters (never 0).
fn next_params_number() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    LAST.fetch_add(1, Ordering::Relaxed) + 1
}

/// Compared as the family, name and entries: the number is the boundary's business, except
/// that equal numbers are the same parameters (clones of one set), equal without a look.
impl PartialEq for ModeParams {
    fn eq(&self, other: &ModeParams) -> bool {
        self.number == other.number
            || self.family == other.family
                && self.mode_name == other.mode_name
                && self.entries == other.entries
    }
}

impl Eq for ModeParams {}

/// As the family, name and entries (the number is not part of the value).
impl fmt::Debug for ModeParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModeParams")
            .field("family", &self.family)
            .field("mode_name", &self.mode_name)
            .field("entries", &self.entries)
            .finish()
    }
}

/// A parameter that is missing or does not parse; the message names the full key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamError {
    key: String,
    message: String,
}

impl ParamError {
    /// The full configuration key (`scaling.alignment.mode.<name>.<param>`).
    pub fn key(&self) -> &str {
        &self.key
    }
    /// What is wrong and what would be valid.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.key, self.message)
    }
}

impl std::error::Error for ParamError {}

/// No parameters under no mode name: shared, so that the empty parameters every context starts
/// with (until the host sets the mode's) cost two reference counts, not two allocations.
impl Default for ModeParams {
    fn default() -> ModeParams {
        static EMPTY: OnceLock<ModeParams> = OnceLock::new();
        EMPTY
            .get_or_init(|| ModeParams {
                family: MODE_KEY,
                mode_name: Arc::from(""),
                entries: Arc::default(),
                number: next_params_number(),
            })
            .clone()
    }
}

impl ModeParams {
    /// Parameters of mode `mode_name`, keyed by the stripped rest of each key.
    pub fn new(mode_name: impl Into<String>, entries: BTreeMap<String, String>) -> ModeParams {
        ModeParams::under(MODE_KEY, mode_name, entries)
    }

    /// Parameters of the instance `name` of a plugin kind whose keys start with `family`
    /// ([`MODE_KEY`], [`EVALUATOR_KEY`] or [`EXECUTOR_KEY`]), keyed by the stripped rest of
    /// each key. The family only names the full key in messages.
    pub fn under(
        family: &'static str,
        name: impl Into<String>,
        entries: BTreeMap<String, String>,
    ) -> ModeParams {
        ModeParams {
            family,
            mode_name: Arc::from(name.into()),
            entries: Arc::new(entries),
            number: next_params_number(),
        }
    }

    /// The number of these parameters: equal numbers, equal parameters (see the field).
    pub(crate) fn number(&self) -> u64 {
        self.number
    }

    /// The mode (or evaluator or executor instance) name these parameters were selected under.
    pub fn mode_name(&self) -> &str {
        &self.mode_name
    }

    /// The key family the parameters were read under (see [`ModeParams::under`]).
    pub fn family(&self) -> &'static str {
        self.family
    }

    /// The full key a parameter was read from, for messages.
    pub fn full_key(&self, param: &str) -> String {
        format!("{}.{}.{param}", self.family, self.mode_name)
    }

    /// Every parameter, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The raw string value, if set.
    pub fn get(&self, param: &str) -> Option<&str> {
        self.entries.get(param).map(String::as_str)
    }

    /// The raw string value, or an error naming the full key.
    pub fn require(&self, param: &str) -> Result<&str, ParamError> {
        self.get(param)
            .ok_or_else(|| self.error(param, "is required but not set"))
    }

    /// A positive integer (>= 1), if set.
    pub fn get_positive(&self, param: &str) -> Result<Option<u32>, ParamError> {
        match self.get_parsed::<u32>(param, "a positive integer")? {
            Some(0) => Err(self.error(param, "must be a positive integer (>= 1), got 0")),
            other => Ok(other),
        }
    }

    /// An unsigned integer, if set.
    pub fn get_u32(&self, param: &str) -> Result<Option<u32>, ParamError> {
        self.get_parsed(param, "an integer between 0 and 4294967295")
    }

    /// A floating-point number, if set (NaN is refused).
    pub fn get_f64(&self, param: &str) -> Result<Option<f64>, ParamError> {
        match self.get_parsed::<f64>(param, "a number")? {
            Some(v) if v.is_nan() => Err(self.error(param, "must be a number, got NaN")),
            other => Ok(other),
        }
    }

    /// A boolean (`true` / `false`, case-insensitive), if set.
    pub fn get_bool(&self, param: &str) -> Result<Option<bool>, ParamError> {
        match self.get(param) {
            None => Ok(None),
            Some(v) if v.trim().eq_ignore_ascii_case("true") => Ok(Some(true)),
            Some(v) if v.trim().eq_ignore_ascii_case("false") => Ok(Some(false)),
            Some(v) => Err(self.error(param, &format!("expected true or false, got `{v}`"))),
        }
    }

    /// One of `choices` (case-insensitive); returns the matching choice as written in `choices`.
    pub fn get_choice<'c>(
        &self,
        param: &str,
        choices: &[&'c str],
    ) -> Result<Option<&'c str>, ParamError> {
        match self.get(param) {
            None => Ok(None),
            Some(v) => choices
                .iter()
                .find(|c| c.eq_ignore_ascii_case(v.trim()))
                .map(|c| Some(*c))
                .ok_or_else(|| {
                    self.error(
                        param,
                        &format!("unknown value `{v}` (valid: {})", choices.join(", ")),
                    )
                }),
        }
    }

    fn get_parsed<T: FromStr>(&self, param: &str, what: &str) -> Result<Option<T>, ParamError> {
        match self.get(param) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse::<T>()
                .map(Some)
                .map_err(|_| self.error(param, &format!("expected {what}, got `{v}`"))),
        }
    }

    /// An error about `param`, naming its full key.
    pub fn error(&self, param: &str, message: &str) -> ParamError {
        ParamError {
            key: self.full_key(param),
            message: message.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> ModeParams {
        ModeParams::new(
            "bucket",
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn typed_getters_parse_and_name_the_full_key() {
        let p = params(&[
            ("buckets", "48"),
            ("zero", "0"),
            ("rule", "divisor"),
            ("flag", "TRUE"),
            ("ratio", "0.5"),
            ("bad", "x"),
        ]);
        assert_eq!(p.get_positive("buckets"), Ok(Some(48)));
        assert_eq!(p.get_positive("missing"), Ok(None));
        assert_eq!(
            p.get_choice("rule", &["DIVISOR", "LOAD_REDUCING"]),
            Ok(Some("DIVISOR"))
        );
        assert_eq!(p.get_bool("flag"), Ok(Some(true)));
        assert_eq!(p.get_f64("ratio"), Ok(Some(0.5)));

        let err = p.get_positive("zero").unwrap_err();
        assert_eq!(err.key(), "scaling.alignment.mode.bucket.zero");
        let err = p.get_u32("bad").unwrap_err();
        assert!(
            err.to_string()
                .contains("scaling.alignment.mode.bucket.bad")
        );
        assert!(err.to_string().contains("`x`"));
        let err = p.get_choice("bad", &["A", "B"]).unwrap_err();
        assert!(err.message().contains("valid: A, B"));
        let err = p.require("nope").unwrap_err();
        assert_eq!(err.key(), "scaling.alignment.mode.bucket.nope");
    }
}
