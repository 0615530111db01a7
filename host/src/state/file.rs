//! A state store that keeps one JSON file per job in a directory, so a restarted host resumes
//! where it stopped.
//!
//! Each file holds `{"job": <name>, "sections": {<section>: <value>, ...}}`; the job's name is
//! read from the content, the file name is only a safe encoding of it, and a job's state is
//! written back to the file it was read from. Files are replaced atomically (write a temporary
//! file of this process in the same directory, sync it, rename it over the old one), so a crash
//! leaves either the old or the new state, never half of one.
//!
//! The store holds the directory's lock ([`StateDirLock`]) for as long as it lives, and never
//! loses what it cannot read: a file that is not state, or the state of a job named by several
//! files, is a [`StateFinding`] and is never overwritten; a job whose file or section cannot be
//! read keeps it in `quarantine/` ([`StateStore::quarantine`]) before its file is replaced.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::error::StateError;
use super::lock::StateDirLock;
use super::names::file_stem;
use super::pending::{PendingJobs, delegate_to_pending};
use super::quarantine::{keep_copy, move_aside, sync_dir};
use super::scan::{EXTENSION, JobFile, StateFinding, TEMP_EXTENSION, read_job_file, scan_dir};
use super::store::{StateStore, StoredProblem};

/// One JSON file per job in a directory; changes are written by [`StateStore::flush`].
#[derive(Debug)]
pub struct FileStateStore {
    dir: PathBuf,
    // Held for the store's lifetime: dropping it releases the directory.
    _lock: StateDirLock,
    pending: PendingJobs,
    /// Where each job read from the directory is written back.
    paths: BTreeMap<String, PathBuf>,
    findings: Vec<StateFinding>,
    /// Files that are not state, not yet moved aside: never overwritten.
    unreadable: BTreeMap<PathBuf, String>,
    /// Jobs named by several files, with the files: none of them is read or written.
    ambiguous: BTreeMap<String, Vec<PathBuf>>,
    /// Where each job's file was kept aside during this run.
    quarantined: BTreeMap<String, PathBuf>,
}

impl FileStateStore {
    /// Opens (creating it if needed) the state directory `dir`, takes its lock, reads every job
    /// file in it and removes what killed writers left behind. Fails when the directory cannot
    /// be used or another host holds it ([`StateError::Locked`]); what is wrong with single
    /// files is in [`FileStateStore::findings`].
    pub fn open(dir: impl Into<PathBuf>) -> Result<FileStateStore, StateError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|source| StateError::Write {
            path: dir.clone(),
            source,
        })?;
        // Before anything is read: the state of a directory another host writes is not ours.
        let lock = StateDirLock::acquire(&dir)?;
        let scan = scan_dir(&dir)?;
        // Holding the lock, no other host is writing here: these writes never completed.
        for temp in &scan.temp_files {
            if let Err(err) = fs::remove_file(temp) {
                tracing::debug!(path = %temp.display(), %err, "cannot remove an old temporary file");
            }
        }
        let mut store = FileStateStore {
            dir,
            _lock: lock,
            pending: PendingJobs::default(),
            paths: BTreeMap::new(),
            findings: scan.findings,
            unreadable: BTreeMap::new(),
            ambiguous: BTreeMap::new(),
            quarantined: BTreeMap::new(),
        };
        for (job, stored) in scan.jobs {
            store.paths.insert(job.clone(), stored.path);
            store.pending.jobs.insert(job, stored.sections);
        }
        for finding in &store.findings {
            match finding {
                StateFinding::Unreadable { path, reason, .. } => {
                    store.unreadable.insert(path.clone(), reason.clone());
                }
                StateFinding::Ambiguous { job, paths } => {
                    store.ambiguous.insert(job.clone(), paths.clone());
                }
            }
        }
        Ok(store)
    }

    /// The directory's lock file (holding the host's process id).
    #[cfg(test)]
    pub(crate) fn lock_file(&self) -> &Path {
        self._lock.path()
    }

    /// What was wrong with the directory's files when it was opened, in file-name order.
    pub(crate) fn findings(&self) -> &[StateFinding] {
        &self.findings
    }

    /// The file that holds `job`'s state: the one it was read from, else the encoding of its
    /// name.
    pub(crate) fn path_of(&self, job: &str) -> PathBuf {
        self.paths
            .get(job)
            .cloned()
            .unwrap_or_else(|| self.canonical_path(job))
    }

    fn canonical_path(&self, job: &str) -> PathBuf {
        self.dir.join(format!("{}.{EXTENSION}", file_stem(job)))
    }

    /// What `path` holds other than `job`'s state, if anything: writing `job` there would lose it.
    fn held_by_other(&self, job: &str, path: &Path) -> Option<String> {
        if self.unreadable.contains_key(path) {
            return Some("content that is not flowscale state".to_string());
        }
        if let Some((other, _)) = self
            .ambiguous
            .iter()
            .find(|(_, p)| p.iter().any(|p| p == path))
        {
            return Some(format!("state of job `{other}`, which several files name"));
        }
        self.paths
            .iter()
            .find(|(other, p)| other.as_str() != job && p.as_path() == path)
            .map(|(other, _)| format!("the state of job `{other}`"))
    }

    fn write_job(&self, job: &str) -> Result<(), StateError> {
        let path = self.path_of(job);
        let Some(sections) = self.pending.jobs.get(job) else {
            return Ok(());
        };
        if let Some(holds) = self.held_by_other(job, &path) {
            return Err(StateError::Occupied {
                job: job.to_string(),
                path,
                holds,
            });
        }
        let file = JobFile {
            job: job.to_string(),
            sections: sections.clone(),
        };
        let text = serde_json::to_vec_pretty(&file).map_err(|source| StateError::Encode {
            job: job.to_string(),
            section: "*".to_string(),
            source,
        })?;
        let temp = temp_path(&path);
        let write_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StateError::Write { path, source }
        };
        let mut out = fs::File::create(&temp).map_err(write_err(&temp))?;
        out.write_all(&text).map_err(write_err(&temp))?;
        out.sync_all().map_err(write_err(&temp))?;
        drop(out);
        fs::rename(&temp, &path).map_err(write_err(&path))?;
        sync_dir(&self.dir);
        Ok(())
    }

    fn delete_job_file(&self, job: &str) -> Result<(), StateError> {
        let path = self.path_of(job);
        if self.held_by_other(job, &path).is_some() {
            return Ok(());
        }
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(StateError::Write { path, source: e })
            }
            _ => Ok(()),
        }
    }

    /// The job's file kept in the quarantine, once per run: the first copy is the file as it
    /// was read, later calls of the same run return it again.
    fn keep_job_file(&mut self, job: &str) -> Result<Option<PathBuf>, StateError> {
        if let Some(kept) = self.quarantined.get(job) {
            return Ok(Some(kept.clone()));
        }
        let path = self.path_of(job);
        if !self.paths.contains_key(job) || !path.is_file() {
            return Ok(None);
        }
        let kept = keep_copy(&self.dir, &path)?;
        self.quarantined.insert(job.to_string(), kept.clone());
        Ok(Some(kept))
    }
}

/// This process's temporary file for `path`: two processes never write the same one, even
/// when they share a directory they could not lock.
fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.{TEMP_EXTENSION}", std::process::id()));
    path.with_file_name(name)
}

impl StateStore for FileStateStore {
    delegate_to_pending!();

    /// Reads the job's file again when [`StateStore::release`] let its sections go: the file
    /// it was read from or written to, else the one its name encodes. A file that is not state
    /// now is kept as unreadable (the job's restore quarantines it, as at start); a file that
    /// names another job is left alone.
    fn readmit(&mut self, job: &str) {
        if self.pending.jobs.contains_key(job) || self.ambiguous.contains_key(job) {
            return;
        }
        let path = self.path_of(job);
        if !path.is_file() {
            return;
        }
        match read_job_file(&path) {
            Ok(file) if file.job == job => {
                self.pending.jobs.insert(job.to_string(), file.sections);
                self.paths.insert(job.to_string(), path);
            }
            Ok(_) => {}
            // As at start: never overwritten, quarantined by the job's restore.
            Err(reason) => {
                self.paths.remove(job);
                self.unreadable.insert(path, reason);
            }
        }
    }

    fn problem(&self, job: &str) -> Option<StoredProblem> {
        if let Some(paths) = self.ambiguous.get(job) {
            return Some(StoredProblem::Ambiguous {
                paths: paths.clone(),
            });
        }
        if self.paths.contains_key(job) {
            return None;
        }
        let path = self.canonical_path(job);
        self.unreadable
            .get(&path)
            .map(|reason| StoredProblem::Unreadable {
                path,
                reason: reason.clone(),
            })
    }

    /// A section: the job's file is copied into `quarantine/` as it was read, the section is
    /// forgotten and the job written again at the next flush. The whole job: a file that is
    /// not state is moved into `quarantine/` (nothing in it can be kept), a readable one is
    /// copied there, and the job is forgotten. A job named by several files is refused: which
    /// file to keep is for a person to decide.
    fn quarantine(
        &mut self,
        job: &str,
        section: Option<&str>,
    ) -> Result<Option<PathBuf>, StateError> {
        if let Some(paths) = self.ambiguous.get(job) {
            return Err(StateError::Occupied {
                job: job.to_string(),
                path: paths.first().cloned().unwrap_or_else(|| self.dir.clone()),
                holds: format!("one of {} files naming the job", paths.len()),
            });
        }
        let Some(section) = section else {
            let unreadable = self.canonical_path(job);
            if !self.paths.contains_key(job) && self.unreadable.contains_key(&unreadable) {
                let kept = move_aside(&self.dir, &unreadable)?;
                self.unreadable.remove(&unreadable);
                self.quarantined.insert(job.to_string(), kept.clone());
                return Ok(Some(kept));
            }
            let kept = self.keep_job_file(job)?;
            self.pending.jobs.remove(job);
            self.pending.dirty.remove(job);
            return Ok(kept);
        };
        let kept = self.keep_job_file(job)?;
        if let Some(sections) = self.pending.jobs.get_mut(job)
            && sections.remove(section).is_some()
        {
            self.pending.dirty.insert(job.to_string());
        }
        Ok(kept)
    }

    /// Writes every changed job and deletes the files of removed jobs. A job that fails stays
    /// pending for the next flush; the first failure is returned, the others are logged.
    fn flush(&mut self) -> Result<(), StateError> {
        let mut first_error = None;
        let mut note = |job: &str, result: Result<(), StateError>| match result {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(job, error = %e, "failed to persist job state; will retry");
                first_error.get_or_insert(e);
                false
            }
        };
        let removed: Vec<String> = self.pending.removed.iter().cloned().collect();
        for job in removed {
            if note(&job, self.delete_job_file(&job)) {
                self.pending.removed.remove(&job);
            }
        }
        let dirty: Vec<String> = self.pending.dirty.iter().cloned().collect();
        for job in dirty {
            if note(&job, self.write_job(&job)) {
                self.pending.dirty.remove(&job);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::scan::StoredJob;
    use crate::state::{QUARANTINE_DIR, scan_dir};

    /// The directory's state as a fresh host would read it, without locking it.
    fn on_disk(dir: &Path) -> BTreeMap<String, StoredJob> {
        scan_dir(dir).unwrap().jobs
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn quarantined(dir: &Path) -> Vec<PathBuf> {
        let Ok(entries) = fs::read_dir(dir.join(QUARANTINE_DIR)) else {
            return Vec::new();
        };
        let mut paths: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
        paths.sort();
        paths
    }

    #[test]
    fn a_restarted_store_resumes() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = FileStateStore::open(dir.path()).unwrap();
        store.put("orders", "cooldown", serde_json::json!({"queue": [1, 2]}));
        store.put("orders", "events", serde_json::json!([]));
        store.put("clicks/eu.1", "cooldown", serde_json::json!(7));
        // Visible before the flush, durable only after it.
        assert_eq!(store.get("orders", "events"), Some(serde_json::json!([])));
        assert!(on_disk(dir.path()).is_empty());
        store.flush().unwrap();
        drop(store);

        let reopened = FileStateStore::open(dir.path()).unwrap();
        assert_eq!(reopened.jobs(), vec!["clicks/eu.1", "orders"]);
        assert_eq!(
            reopened.get("orders", "cooldown"),
            Some(serde_json::json!({"queue": [1, 2]}))
        );
        assert_eq!(
            reopened.get("clicks/eu.1", "cooldown"),
            Some(serde_json::json!(7))
        );
        assert_eq!(reopened.get("orders", "missing"), None);
        assert!(reopened.findings().is_empty());
    }

    #[test]
    fn one_file_per_job_without_leftover_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = FileStateStore::open(dir.path()).unwrap();
        store.put("a", "s", serde_json::json!(1));
        store.put("b", "s", serde_json::json!(2));
        store.flush().unwrap();
        store.put("a", "s", serde_json::json!(3));
        store.flush().unwrap();
        assert_eq!(names(dir.path()), vec![".lock", "a.json", "b.json"]);
        let text = fs::read_to_string(dir.path().join("a.json")).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value, serde_json::json!({"job": "a", "sections": {"s": 3}}));
    }

    #[test]
    fn temporary_files_are_per_process_and_old_ones_are_removed() {
        let path = Path::new("/state/orders.json");
        let temp = temp_path(path);
        assert_eq!(
            temp,
            Path::new(&format!("/state/orders.json.{}.tmp", std::process::id()))
        );
        // What killed writers left: an older host's fixed name and another process's file.
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.json.tmp"), "{half").unwrap();
        fs::write(dir.path().join("a.json.99999.tmp"), "{half").unwrap();
        fs::write(dir.path().join("notes.tmp"), "a person's file").unwrap();
        let store = FileStateStore::open(dir.path()).unwrap();
        assert!(store.jobs().is_empty());
        assert_eq!(names(dir.path()), vec![".lock", "notes.tmp"]);
    }

    #[test]
    fn a_second_store_on_a_directory_is_refused_while_the_first_lives() {
        let dir = tempfile::tempdir().unwrap();
        let first = FileStateStore::open(dir.path()).unwrap();
        assert_eq!(first.lock_file(), dir.path().join(".lock"));
        let err = FileStateStore::open(dir.path()).unwrap_err();
        assert!(
            matches!(&err, StateError::Locked { holder: Some(pid), .. } if *pid == std::process::id()),
            "{err}"
        );
        drop(first);
        FileStateStore::open(dir.path()).expect("free once the first is gone");
    }

    #[test]
    fn a_released_job_leaves_memory_keeps_its_file_and_is_read_again_when_it_returns() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = FileStateStore::open(dir.path()).unwrap();
        store.put("gone", "s", serde_json::json!({"window": [1, 2, 3]}));
        store.put("kept", "s", serde_json::json!(2));
        store.flush().unwrap();
        store.put("unwritten", "s", serde_json::json!(3));

        store.release("gone");
        store.release("unwritten");
        assert_eq!(
            store.jobs(),
            ["kept", "unwritten"],
            "a change not yet written stays"
        );
        assert_eq!(store.get("gone", "s"), None);
        store.flush().unwrap();
        assert_eq!(
            on_disk(dir.path()).keys().collect::<Vec<_>>(),
            ["gone", "kept", "unwritten"],
            "a released job's file is kept"
        );

        store.readmit("gone");
        assert_eq!(
            store.get("gone", "s"),
            Some(serde_json::json!({"window": [1, 2, 3]}))
        );
        store.readmit("never");
        assert_eq!(store.get("never", "s"), None);
        // Written back to the file it came from.
        store.put("gone", "s", serde_json::json!(4));
        store.flush().unwrap();
        assert_eq!(
            on_disk(dir.path())["gone"].sections["s"],
            serde_json::json!(4)
        );
    }

    #[test]
    fn a_released_job_whose_file_was_spoilt_meanwhile_finds_it_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = FileStateStore::open(dir.path()).unwrap();
        store.put("gone", "s", serde_json::json!(1));
        store.flush().unwrap();
        store.release("gone");
        fs::write(store.path_of("gone"), "not state").unwrap();
        store.readmit("gone");
        assert!(
            matches!(
                store.problem("gone"),
                Some(StoredProblem::Unreadable { .. })
            ),
            "{:?}",
            store.problem("gone")
        );
    }

    #[test]
    fn removing_a_job_deletes_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = FileStateStore::open(dir.path()).unwrap();
        store.put("a", "s", serde_json::json!(1));
        store.put("b", "s", serde_json::json!(1));
        store.flush().unwrap();
        store.remove_job("a");
        assert_eq!(store.get("a", "s"), None);
        // Removing a job that never had a file is fine too.
        store.remove_job("never");
        store.flush().unwrap();
        assert!(!store.path_of("a").exists());
        assert_eq!(on_disk(dir.path()).keys().collect::<Vec<_>>(), ["b"]);
        // Re-adding after removal writes it again.
        store.remove_job("b");
        store.put("b", "s", serde_json::json!(2));
        store.flush().unwrap();
        assert_eq!(on_disk(dir.path())["b"].sections["s"], serde_json::json!(2));
    }

    #[test]
    fn a_file_that_is_not_state_is_a_finding_and_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("x.json"), "{not json").unwrap();
        fs::write(
            dir.path().join("y.json"),
            r#"{"job": "y", "sections": {"s": 1}}"#,
        )
        .unwrap();
        fs::write(dir.path().join("README"), "notes").unwrap();
        // Before: the whole store refused to open.
        let mut store = FileStateStore::open(dir.path()).unwrap();
        assert_eq!(store.jobs(), vec!["y"], "the other jobs are read");
        assert_eq!(store.findings().len(), 1);
        assert_eq!(store.findings()[0].job(), Some("x"));
        let problem = store.problem("x");
        assert!(
            matches!(&problem, Some(StoredProblem::Unreadable { path, .. }) if path.ends_with("x.json")),
            "{problem:?}"
        );
        assert_eq!(store.problem("y"), None);

        // Writing the job without keeping its file aside first would lose the file.
        store.put("x", "s", serde_json::json!(2));
        let err = store.flush().unwrap_err();
        assert!(matches!(err, StateError::Occupied { .. }), "{err}");
        assert!(err.to_string().contains("x.json"), "{err}");
        assert_eq!(
            fs::read_to_string(dir.path().join("x.json")).unwrap(),
            "{not json"
        );

        // Kept aside, the job writes its state afresh.
        let kept = store.quarantine("x", None).unwrap().expect("kept");
        assert_eq!(fs::read_to_string(&kept).unwrap(), "{not json");
        assert_eq!(quarantined(dir.path()), vec![kept]);
        assert_eq!(store.problem("x"), None);
        store.put("x", "s", serde_json::json!(3));
        store.flush().unwrap();
        assert_eq!(on_disk(dir.path())["x"].sections["s"], serde_json::json!(3));
    }

    #[test]
    fn an_undecodable_section_is_kept_aside_and_only_it_is_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let original = r#"{"job": "orders", "sections": {"cooldown": "garbage", "events": [1], "history": {"a": 2}}}"#;
        fs::write(dir.path().join("orders.json"), original).unwrap();
        let mut store = FileStateStore::open(dir.path()).unwrap();

        let kept = store
            .quarantine("orders", Some("cooldown"))
            .unwrap()
            .expect("kept");
        assert_eq!(
            fs::read_to_string(&kept).unwrap(),
            original,
            "byte for byte"
        );
        // A second bad section of the same job refers to the same copy.
        let again = store.quarantine("orders", Some("events")).unwrap();
        assert_eq!(again.as_ref(), Some(&kept));
        assert_eq!(quarantined(dir.path()), vec![kept]);

        assert_eq!(store.get("orders", "cooldown"), None);
        assert_eq!(store.get("orders", "events"), None);
        // The section was forgotten: the next flush writes the rest without it.
        store.flush().unwrap();
        let written = &on_disk(dir.path())["orders"].sections;
        assert_eq!(
            written.keys().collect::<Vec<_>>(),
            ["history"],
            "{written:?}"
        );
        assert_eq!(written["history"], serde_json::json!({"a": 2}));
    }

    #[test]
    fn two_files_naming_one_job_are_an_error_naming_both_and_neither_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let current = r#"{"job": "orders", "sections": {"s": 2}}"#;
        let backup = r#"{"job": "orders", "sections": {"s": 1}}"#;
        fs::write(dir.path().join("orders.json"), current).unwrap();
        fs::write(dir.path().join("orders-backup.json"), backup).unwrap();
        let mut store = FileStateStore::open(dir.path()).unwrap();
        // Before: the later-sorted file silently won.
        assert_eq!(store.get("orders", "s"), None);
        match store.problem("orders") {
            Some(StoredProblem::Ambiguous { paths }) => assert_eq!(
                paths,
                [
                    dir.path().join("orders-backup.json"),
                    dir.path().join("orders.json")
                ]
            ),
            other => panic!("{other:?}"),
        }
        let message = store.findings()[0].to_string();
        assert!(
            message.contains("orders-backup.json") && message.contains("orders.json"),
            "{message}"
        );
        assert!(store.quarantine("orders", Some("s")).is_err());
        store.put("orders", "s", serde_json::json!(3));
        assert!(store.flush().is_err());
        assert_eq!(
            fs::read_to_string(dir.path().join("orders.json")).unwrap(),
            current
        );
        assert_eq!(
            fs::read_to_string(dir.path().join("orders-backup.json")).unwrap(),
            backup
        );
    }

    #[test]
    fn a_job_is_written_back_to_the_file_it_was_read_from() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("restored-by-hand.json"),
            r#"{"job": "orders", "sections": {"s": 1}}"#,
        )
        .unwrap();
        let mut store = FileStateStore::open(dir.path()).unwrap();
        assert_eq!(
            store.path_of("orders"),
            dir.path().join("restored-by-hand.json")
        );
        store.put("orders", "s", serde_json::json!(2));
        store.flush().unwrap();
        drop(store);
        // Written to `orders.json`, the next start would find two files naming the job.
        assert_eq!(names(dir.path()), vec![".lock", "restored-by-hand.json"]);
        let reopened = FileStateStore::open(dir.path()).unwrap();
        assert!(reopened.findings().is_empty());
        assert_eq!(reopened.get("orders", "s"), Some(serde_json::json!(2)));
    }

    #[test]
    fn flush_failures_are_reported_and_retried() {
        let dir = tempfile::tempdir().unwrap();
        let state_dir = dir.path().join("state");
        let mut store = FileStateStore::open(&state_dir).unwrap();
        store.put("a", "s", serde_json::json!(1));
        fs::remove_dir_all(&state_dir).unwrap();
        let err = store.flush().unwrap_err();
        assert!(matches!(err, StateError::Write { .. }), "{err}");
        fs::create_dir_all(&state_dir).unwrap();
        store.flush().unwrap();
        assert_eq!(on_disk(&state_dir)["a"].sections["s"], serde_json::json!(1));
    }

    #[test]
    fn long_and_odd_job_names_round_trip() {
        let long_a = "x".repeat(300) + "a";
        let long_b = "x".repeat(300) + "b";
        let dir = tempfile::tempdir().unwrap();
        let mut store = FileStateStore::open(dir.path()).unwrap();
        store.put(&long_a, "s", serde_json::json!("a"));
        store.put(&long_b, "s", serde_json::json!("b"));
        store.put("", "s", serde_json::json!("empty"));
        store.flush().unwrap();
        drop(store);
        let reopened = FileStateStore::open(dir.path()).unwrap();
        assert_eq!(reopened.get(&long_a, "s"), Some(serde_json::json!("a")));
        assert_eq!(reopened.get(&long_b, "s"), Some(serde_json::json!("b")));
        assert_eq!(reopened.get("", "s"), Some(serde_json::json!("empty")));
    }
}
