//! The state-store seam, its errors, typed access and the in-memory store.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::StateError;
use super::lease::JobLeases;
use super::slot_ledger::SlotLedger;

/// Names of the sections the host stores per job.
pub mod sections {
    /// The cooldown executor's `CooldownState`.
    pub const COOLDOWN: &str = "cooldown";
    /// The job's `EventLogState`.
    pub const EVENTS: &str = "events";
}

/// Keyed JSON sections per job.
///
/// Writes are visible to `get` at once; [`StateStore::flush`] makes them durable. A store never
/// interprets a section: typed access goes through [`load`] and [`save`].
pub trait StateStore {
    /// The value of `section` of `job`, if stored.
    fn get(&self, job: &str, section: &str) -> Option<serde_json::Value>;
    /// Stores `value` as `section` of `job`, replacing what was there.
    fn put(&mut self, job: &str, section: &str, value: serde_json::Value);
    /// Forgets everything about `job` (the Flink autoscaler clears all state of a job whose autoscaler is
    /// disabled, and of a job that is gone).
    fn remove_job(&mut self, job: &str);
    /// `job` left the fleet (a reload removed it, or restarted it on another engine): forgets
    /// what the store holds of it in memory, keeping what it persisted (a state file, the
    /// database's rows) for the job's return, which reads it again ([`StateStore::readmit`],
    /// or [`StateStore::refresh`] when a lease is taken). A store that persists nothing forgets
    /// the job: without a state directory, a job that comes back starts empty. Changes not yet
    /// written are kept until they are.
    fn release(&mut self, job: &str);
    /// `job` starts (again): what [`StateStore::release`] let go of it is read again from
    /// where it is persisted. Nothing to do for a job whose state is in memory. What cannot be
    /// read is found by [`StateStore::problem`], as at start.
    fn readmit(&mut self, _job: &str) {}
    /// The jobs that have state, sorted.
    fn jobs(&self) -> Vec<String>;
    /// What was found wrong with `job`'s stored state when the store read it: a file that is not
    /// state at all, or several files naming the job. `None` when its state, if any, was read.
    fn problem(&self, _job: &str) -> Option<StoredProblem> {
        None
    }
    /// Keeps `job`'s stored state as it is now where nothing overwrites it, then forgets
    /// `section` (with `None`, everything of the job) so that it starts empty and the next flush
    /// writes the rest. Called when the owner of a section cannot read it: the host goes on
    /// without that section, and a person can still look at what it held. Returns where the
    /// state was kept, when the store keeps it somewhere a person can look.
    fn quarantine(
        &mut self,
        job: &str,
        section: Option<&str>,
    ) -> Result<Option<PathBuf>, StateError>;
    /// Makes every change since the last flush durable. Call once per cycle.
    fn flush(&mut self) -> Result<(), StateError> {
        Ok(())
    }
    /// Reads `job`'s state again from where it is kept, dropping what this store holds of it
    /// in memory. A store shared by several hosts needs it when a job changes hands: the new
    /// owner resumes what the previous one last stored. Stores only one host writes need not.
    fn refresh(&mut self, _job: &str) -> Result<(), StateError> {
        Ok(())
    }
    /// The job leases of the hosts sharing this store, when it is shared: a job is only acted
    /// on by the host holding its lease. `None` for a store of one host (files, memory).
    fn leases(&self) -> Option<Arc<dyn JobLeases>> {
        None
    }
    /// The slot reservations of the hosts sharing this store, when it is shared: the slot
    /// arbiter of a cluster records in it what it grants, so that another host's arbiter does
    /// not hand out the same free slots. `None` for a store of one host.
    fn slot_ledger(&self) -> Option<Arc<dyn SlotLedger>> {
        None
    }
}

/// What a store found wrong with a job's stored state when it read it.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredProblem {
    /// The job's file is not flowscale state (not JSON, not the expected shape) or could not be
    /// read at all. It is kept as it is until the job quarantines it.
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        reason: String,
    },
    /// Several files name the job, so which one is current cannot be told; none is used.
    Ambiguous {
        /// The files, sorted.
        paths: Vec<PathBuf>,
    },
}

/// Reads `section` of `job` as a `T`; `Ok(None)` when nothing is stored.
pub fn load<T: DeserializeOwned>(
    store: &dyn StateStore,
    job: &str,
    section: &str,
) -> Result<Option<T>, StateError> {
    store
        .get(job, section)
        .map(|value| {
            serde_json::from_value(value).map_err(|source| StateError::Decode {
                job: job.to_string(),
                section: section.to_string(),
                source,
            })
        })
        .transpose()
}

/// Stores `value` as `section` of `job`.
pub fn save<T: Serialize + ?Sized>(
    store: &mut dyn StateStore,
    job: &str,
    section: &str,
    value: &T,
) -> Result<(), StateError> {
    let value = serde_json::to_value(value).map_err(|source| StateError::Encode {
        job: job.to_string(),
        section: section.to_string(),
        source,
    })?;
    store.put(job, section, value);
    Ok(())
}

/// A job's sections, by name.
type Sections = BTreeMap<String, serde_json::Value>;

/// State kept in memory only (the Flink autoscaler's `MEMORY` store): lost when the host exits.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InMemoryStateStore {
    jobs: BTreeMap<String, Sections>,
    quarantined: Vec<(String, Sections)>,
}

impl InMemoryStateStore {
    /// An empty store.
    pub fn new() -> InMemoryStateStore {
        InMemoryStateStore::default()
    }

    /// Every section of `job`.
    #[cfg(test)]
    pub(crate) fn sections(&self, job: &str) -> Option<&BTreeMap<String, serde_json::Value>> {
        self.jobs.get(job)
    }

    /// What [`StateStore::quarantine`] kept, oldest first: the job and its sections as they were.
    #[cfg(test)]
    pub(crate) fn quarantined(&self) -> &[(String, BTreeMap<String, serde_json::Value>)] {
        &self.quarantined
    }
}

impl StateStore for InMemoryStateStore {
    fn get(&self, job: &str, section: &str) -> Option<serde_json::Value> {
        self.jobs.get(job)?.get(section).cloned()
    }

    fn put(&mut self, job: &str, section: &str, value: serde_json::Value) {
        self.jobs
            .entry(job.to_string())
            .or_default()
            .insert(section.to_string(), value);
    }

    fn remove_job(&mut self, job: &str) {
        self.jobs.remove(job);
    }

    /// Nothing else holds the job's state: it is gone with the job.
    fn release(&mut self, job: &str) {
        self.jobs.remove(job);
    }

    fn jobs(&self) -> Vec<String> {
        self.jobs.keys().cloned().collect()
    }

    /// Keeps the job's sections as they were in memory (there is no file to keep).
    fn quarantine(
        &mut self,
        job: &str,
        section: Option<&str>,
    ) -> Result<Option<PathBuf>, StateError> {
        let kept = self.jobs.get(job).cloned().unwrap_or_default();
        self.quarantined.push((job.to_string(), kept));
        match section {
            Some(section) => {
                if let Some(sections) = self.jobs.get_mut(job) {
                    sections.remove(section);
                }
            }
            None => {
                self.jobs.remove(job);
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Section {
        count: u32,
        names: Vec<String>,
    }

    #[test]
    fn sections_are_keyed_per_job() {
        let mut store = InMemoryStateStore::new();
        assert_eq!(store.get("a", "x"), None);
        store.put("a", "x", serde_json::json!(1));
        store.put("a", "y", serde_json::json!(2));
        store.put("b", "x", serde_json::json!(3));
        assert_eq!(store.get("a", "x"), Some(serde_json::json!(1)));
        assert_eq!(store.get("b", "x"), Some(serde_json::json!(3)));
        assert_eq!(store.get("b", "y"), None);
        store.put("a", "x", serde_json::json!("replaced"));
        assert_eq!(store.get("a", "x"), Some(serde_json::json!("replaced")));
        assert_eq!(store.jobs(), vec!["a", "b"]);
        store.remove_job("a");
        assert_eq!(store.get("a", "y"), None);
        assert_eq!(store.jobs(), vec!["b"]);
        assert!(store.flush().is_ok());
    }

    #[test]
    fn typed_load_and_save() {
        let mut store = InMemoryStateStore::new();
        let value = Section {
            count: 3,
            names: vec!["x".into()],
        };
        assert_eq!(load::<Section>(&store, "j", "s").unwrap(), None);
        save(&mut store, "j", "s", &value).unwrap();
        assert_eq!(load::<Section>(&store, "j", "s").unwrap(), Some(value));

        store.put("j", "s", serde_json::json!({"count": "three"}));
        let err = load::<Section>(&store, "j", "s").unwrap_err();
        assert!(
            matches!(&err, StateError::Decode { job, section, .. } if job == "j" && section == "s")
        );
        assert!(err.to_string().contains("`s` of job `j`"), "{err}");
    }

    #[test]
    fn unencodable_values_are_reported() {
        let mut store = InMemoryStateStore::new();
        let mut bad = BTreeMap::new();
        bad.insert((1, 2), 3);
        let err = save(&mut store, "j", "s", &bad).unwrap_err();
        assert!(matches!(err, StateError::Encode { .. }));
        assert_eq!(store.get("j", "s"), None);
    }

    #[test]
    fn works_through_a_trait_object() {
        let mut store: Box<dyn StateStore> = Box::new(InMemoryStateStore::new());
        save(store.as_mut(), "j", "s", &5_u32).unwrap();
        assert_eq!(load::<u32>(store.as_ref(), "j", "s").unwrap(), Some(5));
    }

    #[test]
    fn a_released_job_is_forgotten_when_nothing_else_keeps_it() {
        let mut store = InMemoryStateStore::new();
        store.put("gone", "s", serde_json::json!(1));
        store.put("kept", "s", serde_json::json!(2));
        store.release("gone");
        store.readmit("gone");
        assert_eq!(store.jobs(), ["kept"]);
        assert_eq!(store.get("gone", "s"), None);
    }
}
