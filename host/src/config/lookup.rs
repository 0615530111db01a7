//! Read access to one job's flat configuration, shared by every component that has options.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use flowscale_sdk::ModeParams;

use super::duration::{DurationRange, parse_duration};
use super::errors::KeyError;

/// One job's flat configuration, read by canonical key: without the `job.autoscaler.` /
/// `kubernetes.operator.job.autoscaler.` prefix and with Flink's aliases already resolved
/// (the `config` module does that), e.g. `utilization.target`, `scaling-cooldown-period`.
pub trait ConfigLookup {
    /// The raw value of a canonical key, if set.
    fn get(&self, key: &str) -> Option<&str>;

    /// Every `(key, value)` whose canonical key starts with `prefix`, sorted by key.
    fn with_prefix(&self, prefix: &str) -> Vec<(String, String)>;
}

impl ConfigLookup for BTreeMap<String, String> {
    fn get(&self, key: &str) -> Option<&str> {
        BTreeMap::get(self, key).map(String::as_str)
    }

    fn with_prefix(&self, prefix: &str) -> Vec<(String, String)> {
        self.range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// Typed reads with defaults; every error names the key and what would be valid.
pub(crate) trait ConfigLookupExt: ConfigLookup {
    /// A value parsed with `FromStr`, or `default` when unset.
    fn parsed_or<T: FromStr>(&self, key: &str, default: T, what: &str) -> Result<T, KeyError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| KeyError::new(key, format!("expected {what}, got `{v}`"))),
        }
    }
    /// A number, or `default`.
    fn f64_or(&self, key: &str, default: f64) -> Result<f64, KeyError> {
        self.parsed_or(key, default, "a number")
    }
    /// An optional number.
    fn f64_opt(&self, key: &str) -> Result<Option<f64>, KeyError> {
        self.get(key)
            .map(|_| self.f64_or(key, f64::NAN))
            .transpose()
    }
    /// An integer, or `default`.
    fn i64_or(&self, key: &str, default: i64) -> Result<i64, KeyError> {
        self.parsed_or(key, default, "an integer")
    }
    /// A boolean (`true`/`false`, case-insensitive), or `default`.
    fn bool_or(&self, key: &str, default: bool) -> Result<bool, KeyError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) if v.trim().eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.trim().eq_ignore_ascii_case("false") => Ok(false),
            Some(v) => Err(KeyError::new(
                key,
                format!("expected true or false, got `{v}`"),
            )),
        }
    }
    /// A duration in Flink syntax, or `default`.
    fn duration_or(&self, key: &str, default: Duration) -> Result<Duration, KeyError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => parse_duration(v).map_err(|e| KeyError::new(key, e.to_string())),
        }
    }
    /// A duration in Flink syntax within `range`, or `default` (which is not checked: defaults
    /// are in range by construction).
    fn duration_in(
        &self,
        key: &str,
        default: Duration,
        range: DurationRange,
    ) -> Result<Duration, KeyError> {
        let d = self.duration_or(key, default)?;
        match self.get(key) {
            Some(v) => range
                .check(d)
                .map(|()| d)
                .map_err(|m| KeyError::new(key, format!("`{}` is {m}", v.trim()))),
            None => Ok(d),
        }
    }
    /// A `;`-separated list (Flink's list syntax; `,` accepted too), empty when unset.
    fn list(&self, key: &str) -> Vec<String> {
        self.get(key)
            .map(|v| {
                v.split([';', ','])
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }
    /// The prefix-stripped parameters of the instance `name` of a plugin kind whose keys start
    /// with `family` (`scaling.alignment.mode`, `metrics.custom-evaluator`,
    /// `scaling.custom-executor`): every `<family>.<name>.<param>` key as `<param> -> value`,
    /// `class` included. A key written both with the `kubernetes.operator.` prefix and without
    /// one was resolved to the unprefixed spelling's value when the configuration was read
    /// (`config::keys`), so the canonical key wins here as in the Flink autoscaler.
    fn instance_params(&self, family: &'static str, name: &str) -> ModeParams {
        let prefix = format!("{family}.{name}.");
        let entries = self
            .with_prefix(&prefix)
            .into_iter()
            .filter_map(|(key, value)| {
                let rest = key.strip_prefix(&prefix)?;
                (!rest.is_empty()).then(|| (rest.to_string(), value))
            })
            .collect();
        ModeParams::under(family, name, entries)
    }
    /// One of `choices`, case-insensitive, returned as spelled in `choices`; or `default`.
    fn choice_or<'c>(
        &self,
        key: &str,
        choices: &[&'c str],
        default: &'c str,
    ) -> Result<&'c str, KeyError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => choices
                .iter()
                .find(|c| c.eq_ignore_ascii_case(v.trim()))
                .copied()
                .ok_or_else(|| {
                    KeyError::new(
                        key,
                        format!("unknown value `{v}` (valid: {})", choices.join(", ")),
                    )
                }),
        }
    }
}

impl<T: ConfigLookup + ?Sized> ConfigLookupExt for T {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_reads_with_defaults_and_errors() {
        let cfg: BTreeMap<String, String> = [
            ("a", "0.5"),
            ("b", "TRUE"),
            ("c", "5 min"),
            ("d", "x;y, z"),
            ("e", "max"),
            ("bad", "nope"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(cfg.f64_or("a", 1.0), Ok(0.5));
        assert_eq!(cfg.f64_or("missing", 1.0), Ok(1.0));
        assert_eq!(cfg.bool_or("b", false), Ok(true));
        assert_eq!(
            cfg.duration_or("c", Duration::ZERO),
            Ok(Duration::from_secs(300))
        );
        assert_eq!(cfg.list("d"), vec!["x", "y", "z"]);
        assert_eq!(cfg.choice_or("e", &["MAX", "MIN", "AVG"], "MAX"), Ok("MAX"));
        let err = cfg.f64_or("bad", 0.0).unwrap_err();
        assert_eq!(err.key, "bad");
        assert!(err.to_string().contains("expected a number"));
        assert!(
            cfg.choice_or("bad", &["MAX"], "MAX")
                .unwrap_err()
                .message
                .contains("valid: MAX")
        );
    }
}
