//! The keys flowscale reads, to catch misspellings without rejecting the rest of a Flink
//! configuration (which legitimately carries many keys that are not ours).

use std::sync::OnceLock;

use super::closest::typo_of;
use super::reference::KEYS;
use super::spec::Scope;

/// Every job-configuration key of the reference by canonical name, fallbacks included, and
/// every family prefix (`scaling.alignment.mode.` of `scaling.alignment.mode.<name>.class`):
/// keys flowscale reads or recognises.
struct Known {
    keys: Vec<&'static str>,
    families: Vec<&'static str>,
}

fn known() -> &'static Known {
    static KNOWN: OnceLock<Known> = OnceLock::new();
    KNOWN.get_or_init(|| {
        let mut keys = Vec::new();
        let mut families = Vec::new();
        for about in KEYS.iter().map(|k| k.about()) {
            if about.section.scope() != Scope::JobConfig {
                continue;
            }
            match about.family() {
                Some(family) => {
                    if !families.contains(&family) {
                        families.push(family);
                    }
                }
                None => keys.extend(about.names()),
            }
        }
        Known { keys, families }
    })
}

/// How an unknown key is reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UnknownKey {
    /// Reported and ignored (an autoscaler-prefixed key flowscale does not read).
    Warning(String),
    /// Refused: a misspelling of a known key (whose default would silently be used instead),
    /// or any unknown key under `--strict`.
    Error(String),
}

/// How to treat keys flowscale does not read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct KeyPolicy {
    /// Every unknown key is an error, not only misspellings of known ones (`--strict`).
    pub(crate) strict: bool,
}

/// The verdict on `key` (canonical) written as `raw_key`, or `None` when it is known or passes
/// silently. A key within a typo of a known key (or of a known family such as
/// `scaling.alignment.mode.`) is an error naming the known key; other keys of a Flink
/// configuration pass silently (a key written with an autoscaler prefix is a warning), unless
/// `policy` is strict.
pub(crate) fn check_key(key: &str, raw_key: &str, policy: KeyPolicy) -> Option<UnknownKey> {
    let known = known();
    if known.keys.contains(&key) || known.families.iter().any(|p| key.starts_with(p)) {
        return None;
    }
    // The prefix the user wrote (`job.autoscaler.` ...), kept in the suggestion.
    let written_prefix = raw_key.strip_suffix(key).unwrap_or_default();
    if let Some(known) = typo_of(key, known.keys.iter().copied()) {
        return Some(UnknownKey::Error(format!(
            "unknown key `{raw_key}` (did you mean `{written_prefix}{known}`? a misspelt key \
             would be ignored and its default used)"
        )));
    }
    if let Some(fixed) = family_typo(key) {
        return Some(UnknownKey::Error(format!(
            "unknown key `{raw_key}` (did you mean `{written_prefix}{fixed}`? a misspelt key \
             would be ignored and its default used)"
        )));
    }
    if policy.strict {
        return Some(UnknownKey::Error(format!(
            "unknown key `{raw_key}` (--strict refuses every key flowscale does not read; see \
             docs/configuration.md or `flowscale config keys`)"
        )));
    }
    (raw_key != key).then(|| {
        UnknownKey::Warning(format!(
            "unknown autoscaler key `{raw_key}`, ignored (see docs/configuration.md or `flowscale config keys`)"
        ))
    })
}

/// `key` with its leading segments corrected when they are a typo of a known family
/// (`scaling.alignment.mod.x.class` -> `scaling.alignment.mode.x.class`).
fn family_typo(key: &str) -> Option<String> {
    known().families.iter().find_map(|family| {
        let segments = family.trim_end_matches('.').split('.').count();
        let mut parts = key.splitn(segments + 1, '.');
        let head: Vec<&str> = parts.by_ref().take(segments).collect();
        let tail = parts.next()?;
        let head = head.join(".");
        let family = family.trim_end_matches('.');
        typo_of(&head, [family]).map(|f| format!("{f}.{tail}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LENIENT: KeyPolicy = KeyPolicy { strict: false };
    const STRICT: KeyPolicy = KeyPolicy { strict: true };

    fn error(key: &str, raw: &str) -> String {
        match check_key(key, raw, LENIENT) {
            Some(UnknownKey::Error(message)) => message,
            other => panic!("{raw}: expected an error, got {other:?}"),
        }
    }

    #[test]
    fn misspelt_keys_are_errors_naming_the_known_key() {
        assert_eq!(
            check_key("utilization.target", "utilization.target", LENIENT),
            None
        );
        assert_eq!(
            check_key("scaling.alignment.mode.x.rule", "x", LENIENT),
            None
        );
        let e = error("utilisation.target", "utilisation.target");
        assert!(e.contains("did you mean `utilization.target`"), "{e}");
        let e = error("utilization.targt", "job.autoscaler.utilization.targt");
        assert!(
            e.contains("did you mean `job.autoscaler.utilization.target`"),
            "{e}"
        );
        let e = error("scaling.alignment.mod", "scaling.alignment.mod");
        assert!(e.contains("did you mean `scaling.alignment.mode`"), "{e}");
        let e = error(
            "scaling.alignment.mod.x.class",
            "scaling.alignment.mod.x.class",
        );
        assert!(
            e.contains("did you mean `scaling.alignment.mode.x.class`"),
            "{e}"
        );
        let e = error("metrics.widnow", "metrics.widnow");
        assert!(e.contains("did you mean `metrics.window`"), "{e}");
    }

    /// Keys of a real Flink configuration (and autoscaler keys Flink has that flowscale does
    /// not read) are accepted and ignored: none may be taken for a typo of ours.
    #[test]
    fn keys_pasted_from_a_flink_configuration_pass() {
        for key in [
            "taskmanager.numberOfTaskSlots",
            "state.backend.type",
            "state.checkpoints.dir",
            "state.savepoints.dir",
            "parallelism.default",
            "pipeline.max-parallelism",
            "execution.checkpointing.interval",
            "execution.checkpointing.timeout",
            "execution.runtime-mode",
            "restart-strategy.type",
            "restart-strategy.fixed-delay.attempts",
            "restart-strategy.fixed-delay.delay",
            "jobmanager.scheduler",
            "jobmanager.memory.process.size",
            "taskmanager.memory.process.size",
            "taskmanager.memory.managed.fraction",
            "rest.port",
            "rest.address",
            "rest.bind-port",
            "heartbeat.interval",
            "heartbeat.timeout",
            "high-availability.type",
            "metrics.reporters",
            "metrics.latency.interval",
            "metrics.fetcher.update-interval",
            "web.timeout",
            "pekko.ask.timeout",
            "slot.request.timeout",
            "slotmanager.number-of-slots.max",
            "table.exec.resource.default-parallelism",
            "scheduler-mode",
            "cluster.evenly-spread-out-slots",
            "kubernetes.operator.job.restart.failed",
            "kubernetes.operator.periodic.savepoint.interval",
        ] {
            assert_eq!(check_key(key, key, LENIENT), None, "{key}");
        }
        // Autoscaler keys Flink has and flowscale does not implement: a warning, not an error.
        for key in ["memory.tuning.enabled", "memory.tuning.overhead"] {
            let raw = format!("job.autoscaler.{key}");
            assert!(
                matches!(check_key(key, &raw, LENIENT), Some(UnknownKey::Warning(_))),
                "{raw}"
            );
        }
    }

    /// The keys of the reference's job sections are known, fallbacks included, and the keys of
    /// the fleet file's own tables (`[host] interval`) are not job keys.
    #[test]
    fn the_reference_is_what_is_known() {
        for key in [
            "utilization.target",
            "target.utilization",
            "scale-up.grace-period",
            "scaling-cooldown-period",
            "backpressure.pid.derived",
            "flink.rest-client.timeout",
            "pipeline.jobvertex-parallelism-overrides",
            "scaling.key-group.partitions.adjust.mode",
            "metrics.custom-evaluators",
            "scaling.custom-executor.chain.class",
            "metrics.custom-evaluator.e.window",
        ] {
            assert_eq!(check_key(key, key, STRICT), None, "{key}");
        }
        for key in ["lease-ttl", "max-requests", "job-id"] {
            assert!(check_key(key, key, STRICT).is_some(), "{key}");
        }
    }

    /// The quota keys are read (docs/decision-pipeline.md#resource-quota): known in every
    /// spelling, also under `--strict`.
    #[test]
    fn quota_keys_are_known() {
        for key in ["quota.cpu", "quota.memory"] {
            for raw in [
                key.to_string(),
                format!("job.autoscaler.{key}"),
                format!("kubernetes.operator.job.autoscaler.{key}"),
            ] {
                assert_eq!(check_key(key, &raw, LENIENT), None, "{raw}");
                assert_eq!(check_key(key, &raw, STRICT), None, "{raw}");
            }
        }
        let e = error("quota.cpus", "job.autoscaler.quota.cpus");
        assert!(e.contains("did you mean `job.autoscaler.quota.cpu`"), "{e}");
    }

    #[test]
    fn strict_refuses_every_unknown_key() {
        for key in ["state.backend.type", "frobnicate"] {
            match check_key(key, key, STRICT) {
                Some(UnknownKey::Error(e)) => assert!(e.contains("--strict"), "{e}"),
                other => panic!("{key}: {other:?}"),
            }
        }
        assert_eq!(check_key("metrics.window", "metrics.window", STRICT), None);
        assert_eq!(
            check_key(
                "scaling.alignment.mode.x.class",
                "scaling.alignment.mode.x.class",
                STRICT
            ),
            None
        );
    }
}
