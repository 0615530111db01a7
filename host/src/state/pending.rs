//! The jobs' sections a store holds in memory, and which jobs changed since the last flush:
//! what every store that writes changes out in batches ([`StateStore::flush`]) keeps the same
//! way, whatever it writes them to.
//!
//! [`StateStore::flush`]: super::StateStore::flush

use std::collections::{BTreeMap, BTreeSet};

/// One job's sections, by name.
pub(super) type Sections = BTreeMap<String, serde_json::Value>;

/// Every job's sections, with the jobs written or removed since the last flush.
#[derive(Debug, Default)]
pub(super) struct PendingJobs {
    /// Every job's sections as the host knows them.
    pub(super) jobs: BTreeMap<String, Sections>,
    /// Jobs with sections put since the last flush.
    pub(super) dirty: BTreeSet<String>,
    /// Jobs removed since the last flush (never also dirty).
    pub(super) removed: BTreeSet<String>,
}

impl PendingJobs {
    /// A section of a job, if stored.
    pub(super) fn get(&self, job: &str, section: &str) -> Option<serde_json::Value> {
        self.jobs.get(job)?.get(section).cloned()
    }

    /// Stores a section and marks the job to be written.
    pub(super) fn put(&mut self, job: &str, section: &str, value: serde_json::Value) {
        self.jobs
            .entry(job.to_string())
            .or_default()
            .insert(section.to_string(), value);
        self.removed.remove(job);
        self.dirty.insert(job.to_string());
    }

    /// Forgets a job and marks it to be removed.
    pub(super) fn remove_job(&mut self, job: &str) {
        self.jobs.remove(job);
        self.dirty.remove(job);
        self.removed.insert(job.to_string());
    }

    /// Forgets a job's sections in memory unless they are still to be written.
    pub(super) fn release(&mut self, job: &str) {
        if !self.dirty.contains(job) {
            self.jobs.remove(job);
        }
    }

    /// The jobs with state.
    pub(super) fn job_names(&self) -> Vec<String> {
        self.jobs.keys().cloned().collect()
    }
}

/// The [`StateStore`] methods every batching store answers from its `pending` field alone,
/// written once so the stores cannot drift apart in how they read and change the jobs they hold.
/// Expands inside an `impl StateStore for` block of a type with a `pending: PendingJobs` field.
///
/// [`StateStore`]: super::StateStore
macro_rules! delegate_to_pending {
    () => {
        fn get(&self, job: &str, section: &str) -> Option<serde_json::Value> {
            self.pending.get(job, section)
        }

        fn put(&mut self, job: &str, section: &str, value: serde_json::Value) {
            self.pending.put(job, section, value);
        }

        fn remove_job(&mut self, job: &str) {
            self.pending.remove_job(job);
        }

        fn release(&mut self, job: &str) {
            self.pending.release(job);
        }

        fn jobs(&self) -> Vec<String> {
            self.pending.job_names()
        }
    };
}
pub(super) use delegate_to_pending;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_put_after_a_removal_writes_the_job_again_and_a_removal_drops_the_pending_write() {
        let mut pending = PendingJobs::default();
        pending.put("a", "s", serde_json::json!(1));
        assert_eq!(pending.get("a", "s"), Some(serde_json::json!(1)));
        assert!(pending.dirty.contains("a") && !pending.removed.contains("a"));
        pending.remove_job("a");
        assert_eq!(pending.get("a", "s"), None);
        assert!(!pending.dirty.contains("a") && pending.removed.contains("a"));
        pending.put("a", "t", serde_json::json!(2));
        assert!(pending.dirty.contains("a") && !pending.removed.contains("a"));
        assert_eq!(pending.job_names(), vec!["a".to_string()]);
    }
}
