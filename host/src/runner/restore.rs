//! Restoring a job's stored state section by section, losing nothing that cannot be read.
//!
//! Every section has one owner type. A section its owner cannot decode (a hand edit, a shape
//! from another version, a damaged disk) is kept through [`StateStore::quarantine`] — for a
//! file store, the file as it was goes to `quarantine/` — and reported as a `StateQuarantined`
//! event; only that section starts empty, every other one resumes. Before, one bad section
//! reset all six sections of the pipeline and the next write destroyed them. A job whose state
//! is in several files does not start at all: which file is current is for a person to decide.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::cooldown::CooldownState;
use crate::config::EngineSpec;
use crate::events::{Event, EventReason, Severity};
use crate::scaling::JobScalingState;
use crate::state::{EventLogState, FileStateStore, StateStore, StoredProblem, sections};

use super::engines::may_restore;

/// A stored section its owner cannot decode.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BadSection {
    /// The section's name.
    pub(crate) section: String,
    /// What its decoder said.
    pub(crate) reason: String,
}

/// Why a job cannot start from its stored state.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RestoreError {
    /// Several files name the job.
    #[error(
        "the state of job `{job}` is in {} files ({}): which one is current cannot be told; move away all but one and start again",
        paths.len(),
        paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    Ambiguous {
        /// The job.
        job: String,
        /// The files.
        paths: Vec<PathBuf>,
    },
}

/// A job's state as restored, and what to report about it at the job's first step.
#[derive(Debug, Default)]
pub(super) struct Restored {
    /// The pipeline's sections (each one that could not be read is empty).
    pub(crate) scaling: JobScalingState,
    /// The cooldown executor's state, when stored and readable.
    pub(crate) cooldown: Option<CooldownState>,
    /// The event log, when stored and readable.
    pub(crate) events: Option<EventLogState>,
    /// `StateQuarantined` (or, when even that failed, `AutoscalerError`) events.
    pub(crate) report: Vec<Event>,
}

/// The names of the pipeline's sections, as [`JobScalingState::to_sections`] writes them.
fn scaling_sections() -> Vec<&'static str> {
    JobScalingState::default()
        .to_sections()
        .map(|sections| sections.into_iter().map(|(name, _)| name).collect())
        .unwrap_or_default()
}

/// Checks every section the host stores for a job (`get` reads one) with the type that owns
/// it, without changing anything: what [`restore`] would keep aside. `validate` uses it too.
pub(crate) fn check_sections(get: impl Fn(&str) -> Option<Value>) -> Vec<BadSection> {
    let mut bad = Vec::new();
    for section in scaling_sections() {
        // Absent sections read as empty, so this decodes `section` alone.
        let alone = JobScalingState::from_sections(|s| (s == section).then(|| get(s)).flatten());
        if let Err(err) = alone {
            bad.push(BadSection {
                section: section.to_string(),
                reason: err.to_string(),
            });
        }
    }
    let mut typed = |section: &str, check: fn(Value) -> Result<(), serde_json::Error>| {
        if let Some(Err(err)) = get(section).map(check) {
            bad.push(BadSection {
                section: section.to_string(),
                reason: err.to_string(),
            });
        }
    };
    typed(sections::COOLDOWN, decodes::<CooldownState>);
    typed(sections::EVENTS, decodes::<EventLogState>);
    bad
}

fn decodes<T: DeserializeOwned>(value: Value) -> Result<(), serde_json::Error> {
    serde_json::from_value::<T>(value).map(|_| ())
}

/// Restores `job` from `store`: a file that is not state is moved aside and the job starts
/// empty; each section that cannot be decoded is kept aside and starts empty; the rest resumes.
pub(super) fn restore(store: &mut dyn StateStore, job: &str) -> Result<Restored, RestoreError> {
    let mut report = Vec::new();
    match store.problem(job) {
        Some(StoredProblem::Ambiguous { paths }) => {
            return Err(RestoreError::Ambiguous {
                job: job.to_string(),
                paths,
            });
        }
        Some(StoredProblem::Unreadable { path, reason }) => {
            report.push(whole_file_event(store, job, &path, &reason));
            return Ok(Restored {
                report,
                ..Restored::default()
            });
        }
        None => {}
    }
    let bad = check_sections(|section| store.get(job, section));
    for section in &bad {
        report.push(section_event(store, job, section));
    }
    let readable = |section: &str| !bad.iter().any(|b| b.section == section);
    let get = |section: &str| store.get(job, section).filter(|_| readable(section));
    // Every section left decoded on its own above, so together they decode too.
    let scaling = JobScalingState::from_sections(get).unwrap_or_default();
    let cooldown = get(sections::COOLDOWN).and_then(|v| serde_json::from_value(v).ok());
    let events = get(sections::EVENTS).and_then(|v| serde_json::from_value(v).ok());
    Ok(Restored {
        scaling,
        cooldown,
        events,
        report,
    })
}

/// Keeps an unreadable section aside and says so.
fn section_event(store: &mut dyn StateStore, job: &str, bad: &BadSection) -> Event {
    let what = format!(
        "stored section `{}` of job `{job}` cannot be read ({})",
        bad.section, bad.reason
    );
    let event = match store.quarantine(job, Some(&bad.section)) {
        Ok(kept) => Event::new(
            EventReason::StateQuarantined,
            Severity::Warning,
            format!(
                "{what}; it starts empty and the other sections resume{}",
                kept_at(kept.as_deref())
            ),
        ),
        Err(err) => Event::new(
            EventReason::AutoscalerError,
            Severity::Warning,
            format!(
                "{what} and cannot be kept aside ({err}); it starts empty, and the job's state is not written until its file is moved away"
            ),
        ),
    };
    event.job(job)
}

/// Moves a file that is not state aside and says so.
fn whole_file_event(store: &mut dyn StateStore, job: &str, path: &Path, reason: &str) -> Event {
    let what = format!(
        "state file {} of job `{job}` is not flowscale state ({reason})",
        path.display()
    );
    let event = match store.quarantine(job, None) {
        Ok(kept) => Event::new(
            EventReason::StateQuarantined,
            Severity::Warning,
            format!(
                "{what}; the job starts with empty state{}",
                kept_at(kept.as_deref())
            ),
        ),
        Err(err) => Event::new(
            EventReason::AutoscalerError,
            Severity::Warning,
            format!(
                "{what} and cannot be moved aside ({err}); the job starts with empty state and does not write it until the file is moved away"
            ),
        ),
    };
    event.job(job)
}

fn kept_at(kept: Option<&Path>) -> String {
    kept.map_or_else(String::new, |path| {
        format!("; the file as it was is kept at {}", path.display())
    })
}

/// What no job of the fleet (its `(name, engine)` entries) deals with when it starts, as
/// `StateFileIgnored` events: a file that is not state and that no job would read, several
/// files naming a job the fleet does not run, a section that cannot be read of a job the fleet
/// does not run. They are reported once, when the host starts, and the files are left as they
/// are (before, a file that was not state stopped the whole host, whatever job it belonged to).
/// What concerns a job of the fleet is left to that job ([`restore`]).
pub(crate) fn ignored_state(store: &FileStateStore, jobs: &[(&str, &EngineSpec)]) -> Vec<Event> {
    let used = |job: &str| {
        jobs.iter()
            .any(|(entry, spec)| may_restore(entry, spec, job))
    };
    let mut events: Vec<Event> = store
        .findings()
        .iter()
        .filter(|finding| !finding.job().is_some_and(used))
        .map(|finding| ignored_event(finding.job(), &finding.to_string()))
        .collect();
    for job in store.jobs().iter().filter(|job| !used(job)) {
        for bad in check_sections(|section| store.get(job, section)) {
            let what = format!(
                "stored section `{}` of job `{job}` in {} cannot be read ({})",
                bad.section,
                store.path_of(job).display(),
                bad.reason
            );
            events.push(ignored_event(Some(job), &what));
        }
    }
    events
}

fn ignored_event(job: Option<&str>, what: &str) -> Event {
    let event = Event::new(
        EventReason::StateFileIgnored,
        Severity::Warning,
        format!("{what}; no job of this fleet uses it, so it is left as it is"),
    );
    match job {
        Some(job) => event.job(job),
        None => event,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{InMemoryStateStore, StateStore};

    fn store_with(sections: &[(&str, Value)]) -> InMemoryStateStore {
        let mut store = InMemoryStateStore::new();
        for (section, value) in sections {
            store.put("orders", section, value.clone());
        }
        store
    }

    #[test]
    fn every_section_the_host_stores_is_checked() {
        let names = scaling_sections();
        assert_eq!(names.len(), 6, "{names:?}");
        // Each section of the wrong type (valid JSON) is found, alone.
        for section in names
            .iter()
            .copied()
            .chain([sections::COOLDOWN, sections::EVENTS])
        {
            let store = store_with(&[(section, serde_json::json!("wrong type"))]);
            let bad = check_sections(|s| store.get("orders", s));
            assert_eq!(bad.len(), 1, "{section}: {bad:?}");
            assert_eq!(bad[0].section, section);
            assert!(bad[0].reason.contains("invalid type"), "{bad:?}");
        }
        // Empty or absent sections are fine.
        let good = JobScalingState::default().to_sections().unwrap();
        let store = store_with(
            &good
                .iter()
                .map(|(s, v)| (*s, v.clone()))
                .collect::<Vec<_>>(),
        );
        assert!(check_sections(|s| store.get("orders", s)).is_empty());
    }

    #[test]
    fn what_no_wall_clock_job_of_the_fleet_restores_is_reported_and_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("write a state file")
        };
        for job in ["orders", "cluster%2Fjob-a", "gone", "simulated"] {
            write(&format!("{job}.json"), "{not json");
        }
        write("old.v1.json", "{not json");
        write("ok.json", r#"{"job": "ok", "sections": {"cooldown": 7}}"#);
        write(
            "orders-2.json",
            r#"{"job": "orders-2", "sections": {"cooldown": 7}}"#,
        );
        let store = FileStateStore::open(dir.path()).expect("opens");
        let flink = EngineSpec::Flink {
            rest: "http://127.0.0.1:9".into(),
            cluster: None,
            job_id: Some("abc".into()),
        };
        let discovered = EngineSpec::Flink {
            rest: "http://127.0.0.1:9".into(),
            cluster: None,
            job_id: None,
        };
        let sim = EngineSpec::Sim {
            job: PathBuf::from("job.toml"),
            duration: None,
            cluster: None,
        };
        let jobs = [
            ("orders", &flink),
            ("orders-2", &flink),
            ("cluster", &discovered),
            ("simulated", &sim),
        ];
        let events = ignored_state(&store, &jobs);
        let about: Vec<(Option<&str>, bool)> = events
            .iter()
            .map(|e| {
                assert_eq!(e.reason, EventReason::StateFileIgnored);
                assert!(e.message.contains("left as it is"), "{}", e.message);
                (e.job.as_deref(), e.message.contains(".json"))
            })
            .collect();
        assert_eq!(
            about,
            [
                (Some("gone"), true),
                (None, true),
                (Some("simulated"), true),
                (Some("ok"), true),
            ]
        );
        assert!(
            events[3].message.contains("`cooldown`"),
            "{}",
            events[3].message
        );
    }
}
