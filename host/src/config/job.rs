//! One job's flat configuration: canonical keys, their values, and where each was written.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::keys::canonical_key;
use super::lookup::ConfigLookup;

/// Where a value was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    /// The file, when it came from one.
    pub(crate) file: Option<PathBuf>,
    /// 1-based line in that file.
    pub(crate) line: Option<usize>,
    /// The key as the user spelt it.
    pub(crate) raw_key: String,
    /// The path of the value inside the file (e.g. `jobs[1].config."scaling.alignment.mode"`).
    pub(crate) path: String,
}

impl Origin {
    /// An origin that is not a file (the command line, a batch line).
    pub(crate) fn inline(raw_key: &str, path: &str) -> Origin {
        Origin {
            file: None,
            line: None,
            raw_key: raw_key.to_string(),
            path: path.to_string(),
        }
    }

    /// `file:line: path` or just `path`, for messages.
    pub(crate) fn location(&self) -> String {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => format!("{}:{line}: {}", file.display(), self.path),
            (Some(file), None) => format!("{}: {}", file.display(), self.path),
            _ => self.path.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    value: String,
    rank: u8,
    origin: Origin,
}

/// A job's configuration with every key in canonical form; where spellings overlap, the most
/// canonical one wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobConfig {
    entries: BTreeMap<String, Entry>,
}

impl JobConfig {
    /// An empty configuration.
    pub fn new() -> JobConfig {
        JobConfig::default()
    }

    /// Sets a key given in any accepted spelling. A less canonical spelling of a key that is
    /// already set does not override it; a later value of an equally canonical spelling does.
    pub(crate) fn set(&mut self, raw_key: &str, value: impl Into<String>, origin: Origin) {
        let canonical = canonical_key(raw_key);
        let entry = Entry {
            value: value.into(),
            rank: canonical.rank,
            origin,
        };
        match self.entries.get(&canonical.key) {
            Some(existing) if existing.rank < entry.rank => {}
            _ => {
                self.entries.insert(canonical.key, entry);
            }
        }
    }

    /// Builds a configuration from `key = value` pairs without a file.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> JobConfig {
        let mut config = JobConfig::new();
        for (key, value) in pairs {
            config.set(key, value, Origin::inline(key, key));
        }
        config
    }

    /// Overlays `other` on top of this configuration: its keys win.
    pub(crate) fn overlay(&mut self, other: &JobConfig) {
        for (key, entry) in &other.entries {
            self.entries.insert(key.clone(), entry.clone());
        }
    }

    /// Where a canonical key was written.
    pub(crate) fn origin(&self, key: &str) -> Option<&Origin> {
        self.entries.get(key).map(|e| &e.origin)
    }

    /// Every canonical key with its value.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries
            .iter()
            .map(|(k, e)| (k.as_str(), e.value.as_str()))
    }
}

impl ConfigLookup for JobConfig {
    fn get(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(|e| e.value.as_str())
    }

    fn with_prefix(&self, prefix: &str) -> Vec<(String, String)> {
        self.entries
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, e)| (k.clone(), e.value.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_spelling_wins_on_overlap_in_any_order() {
        for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0]] {
            let spellings = [
                ("scaling.alignment.mode", "OURS"),
                ("job.autoscaler.scaling.parallelism-alignment.mode", "FLINK"),
                (
                    "kubernetes.operator.job.autoscaler.scaling.alignment.mode",
                    "OPERATOR",
                ),
            ];
            let config = JobConfig::from_pairs(order.iter().map(|&i| spellings[i]));
            assert_eq!(
                config.get("scaling.alignment.mode"),
                Some("OURS"),
                "{order:?}"
            );
        }
        let flink_only = JobConfig::from_pairs([
            (
                "job.autoscaler.scaling.parallelism-alignment.mode",
                "custom",
            ),
            (
                "job.autoscaler.scaling.parallelism-alignment.mode.custom.class",
                "bucket-align",
            ),
        ]);
        assert_eq!(flink_only.get("scaling.alignment.mode"), Some("custom"));
        assert_eq!(
            flink_only.with_prefix("scaling.alignment.mode.custom."),
            vec![(
                "scaling.alignment.mode.custom.class".to_string(),
                "bucket-align".to_string()
            )]
        );
    }

    #[test]
    fn overlay_lets_the_job_win_over_defaults() {
        let mut defaults = JobConfig::from_pairs([("utilization.target", "0.5"), ("a", "1")]);
        let job = JobConfig::from_pairs([("job.autoscaler.utilization.target", "0.8")]);
        defaults.overlay(&job);
        assert_eq!(defaults.get("utilization.target"), Some("0.8"));
        assert_eq!(defaults.get("a"), Some("1"));
    }
}
