//! Flink-style key spellings: the `job.autoscaler.` / `kubernetes.operator.job.autoscaler.`
//! prefixes and the `scaling.parallelism-alignment.mode` alias, mapped to one canonical key.

/// Prefixes Flink configurations put before autoscaler keys, in order of precedence.
const PREFIXES: &[&str] = &["job.autoscaler.", "kubernetes.operator.job.autoscaler."];

/// Flink's spelling of the alignment keys, and ours.
const ALIASES: &[(&str, &str)] = &[(
    "scaling.parallelism-alignment.mode",
    flowscale_sdk::MODE_KEY,
)];

/// A key in canonical form, and how far its spelling was from canonical: on overlap the lowest
/// rank wins (our spelling without prefix, then `job.autoscaler.`, then the operator prefix;
/// Flink's alias spelling after all of ours).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CanonicalKey {
    /// The canonical key.
    pub(crate) key: String,
    /// Precedence on overlap; 0 is the canonical spelling.
    pub(crate) rank: u8,
}

/// Maps any accepted spelling of a key to its canonical form.
pub(crate) fn canonical_key(raw: &str) -> CanonicalKey {
    let raw = raw.trim();
    let (rest, prefix_rank) = PREFIXES
        .iter()
        .enumerate()
        .find_map(|(i, p)| raw.strip_prefix(p).map(|rest| (rest, i as u8 + 1)))
        .unwrap_or((raw, 0));
    for (alias, canonical) in ALIASES {
        if let Some(tail) = rest.strip_prefix(alias)
            && (tail.is_empty() || tail.starts_with('.'))
        {
            return CanonicalKey {
                key: format!("{canonical}{tail}"),
                rank: prefix_rank + PREFIXES.len() as u8 + 1,
            };
        }
    }
    CanonicalKey {
        key: rest.to_string(),
        rank: prefix_rank,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_aliases_map_to_one_key() {
        let k = |s: &str| canonical_key(s);
        assert_eq!(k("scaling.alignment.mode").key, "scaling.alignment.mode");
        assert_eq!(k("scaling.alignment.mode").rank, 0);
        assert_eq!(
            k("job.autoscaler.utilization.target").key,
            "utilization.target"
        );
        assert_eq!(k("job.autoscaler.utilization.target").rank, 1);
        assert_eq!(
            k("kubernetes.operator.job.autoscaler.scaling.parallelism-alignment.mode.x.class").key,
            "scaling.alignment.mode.x.class"
        );
        assert_eq!(
            k("job.autoscaler.scaling.parallelism-alignment.mode").key,
            "scaling.alignment.mode"
        );
        assert!(
            k("job.autoscaler.scaling.parallelism-alignment.mode").rank
                > k("kubernetes.operator.job.autoscaler.scaling.alignment.mode").rank
        );
        // Not an alias: a different key that merely starts the same way.
        assert_eq!(
            k("scaling.parallelism-alignment.modes").key,
            "scaling.parallelism-alignment.modes"
        );
    }
}
