//! A state store that keeps one JSON file per job in a directory, so a restarted host resumes
//! where it stopped.
//!
//! Each file holds `{"job": <name>, "sections": {<section>: <value>, ...}}`; the job's name is
//! read from the content, the file name is only a safe encoding of it. Files are replaced
//! atomically (write a temporary file in the same directory, sync it, rename it over the old
//! one), so a crash leaves either the old or the new state, never half of one.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::store::{StateError, StateStore};

const EXTENSION: &str = "json";
const TEMP_SUFFIX: &str = ".tmp";
/// File names stay well below the usual 255-byte limit; longer encodings are shortened and made
/// unique with a hash of the full name.
const MAX_STEM: usize = 160;

#[derive(Debug, Serialize, Deserialize)]
struct JobFile {
    job: String,
    #[serde(default)]
    sections: BTreeMap<String, serde_json::Value>,
}

/// One JSON file per job in a directory; changes are written by [`StateStore::flush`].
#[derive(Debug)]
pub struct FileStateStore {
    dir: PathBuf,
    jobs: BTreeMap<String, BTreeMap<String, serde_json::Value>>,
    dirty: BTreeSet<String>,
    removed: BTreeSet<String>,
}

impl FileStateStore {
    /// Opens (creating it if needed) the state directory `dir` and reads every job file in it.
    /// A file that is not valid state is an error naming it, rather than a job silently
    /// starting afresh.
    pub fn open(dir: impl Into<PathBuf>) -> Result<FileStateStore, StateError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|source| StateError::Write {
            path: dir.clone(),
            source,
        })?;
        let read_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StateError::Read { path, source }
        };
        let mut jobs = BTreeMap::new();
        let mut paths = Vec::new();
        for entry in fs::read_dir(&dir).map_err(read_err(&dir))? {
            let path = entry.map_err(read_err(&dir))?.path();
            if path.extension().is_some_and(|e| e == EXTENSION) && path.is_file() {
                paths.push(path);
            }
        }
        paths.sort();
        for path in paths {
            let text = fs::read_to_string(&path).map_err(read_err(&path))?;
            let file: JobFile =
                serde_json::from_str(&text).map_err(|source| StateError::Corrupt {
                    path: path.clone(),
                    source,
                })?;
            jobs.insert(file.job, file.sections);
        }
        Ok(FileStateStore {
            dir,
            jobs,
            dirty: BTreeSet::new(),
            removed: BTreeSet::new(),
        })
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file that holds `job`'s state.
    pub fn path_of(&self, job: &str) -> PathBuf {
        self.dir.join(format!("{}.{EXTENSION}", file_stem(job)))
    }

    fn write_job(&self, job: &str) -> Result<(), StateError> {
        let path = self.path_of(job);
        let Some(sections) = self.jobs.get(job) else {
            return Ok(());
        };
        let file = JobFile {
            job: job.to_string(),
            sections: sections.clone(),
        };
        let text = serde_json::to_vec_pretty(&file).map_err(|source| StateError::Encode {
            job: job.to_string(),
            section: "*".to_string(),
            source,
        })?;
        let temp = path.with_extension(format!("{EXTENSION}{TEMP_SUFFIX}"));
        let write_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StateError::Write { path, source }
        };
        let mut out = fs::File::create(&temp).map_err(write_err(&temp))?;
        out.write_all(&text).map_err(write_err(&temp))?;
        out.sync_all().map_err(write_err(&temp))?;
        drop(out);
        fs::rename(&temp, &path).map_err(write_err(&path))?;
        // Make the rename itself durable. Best effort: not every platform can open or sync a
        // directory, and the new file is complete either way.
        if let Ok(dir) = fs::File::open(&self.dir) {
            let _ = dir.sync_all();
        }
        Ok(())
    }

    fn delete_job_file(&self, job: &str) -> Result<(), StateError> {
        let path = self.path_of(job);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(StateError::Write { path, source: e })
            }
            _ => Ok(()),
        }
    }
}

impl StateStore for FileStateStore {
    fn get(&self, job: &str, section: &str) -> Option<serde_json::Value> {
        self.jobs.get(job)?.get(section).cloned()
    }

    fn put(&mut self, job: &str, section: &str, value: serde_json::Value) {
        self.jobs
            .entry(job.to_string())
            .or_default()
            .insert(section.to_string(), value);
        self.removed.remove(job);
        self.dirty.insert(job.to_string());
    }

    fn remove_job(&mut self, job: &str) {
        self.jobs.remove(job);
        self.dirty.remove(job);
        self.removed.insert(job.to_string());
    }

    fn jobs(&self) -> Vec<String> {
        self.jobs.keys().cloned().collect()
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
        let removed: Vec<String> = self.removed.iter().cloned().collect();
        for job in removed {
            if note(&job, self.delete_job_file(&job)) {
                self.removed.remove(&job);
            }
        }
        let dirty: Vec<String> = self.dirty.iter().cloned().collect();
        for job in dirty {
            if note(&job, self.write_job(&job)) {
                self.dirty.remove(&job);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// A file-name-safe, unique encoding of a job name: ASCII letters, digits, `-` and `_` are
/// kept, every other byte becomes `%XX` (so `.`, `/` and `%` itself can never escape the
/// directory or collide); the empty name is `%`. Overlong encodings are cut and suffixed with
/// a hash of the whole name.
fn file_stem(job: &str) -> String {
    if job.is_empty() {
        return "%".to_string();
    }
    let mut stem = String::with_capacity(job.len());
    for byte in job.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_' {
            stem.push(char::from(byte));
        } else {
            stem.push_str(&format!("%{byte:02X}"));
        }
    }
    if stem.len() > MAX_STEM {
        // FNV-1a: stable across builds and platforms, unlike std's `DefaultHasher`.
        let hash = job.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        stem.truncate(MAX_STEM - 17);
        // `%XX` sequences may be cut; the hash keeps the name unique.
        stem.push_str(&format!("~{hash:016x}"));
    }
    stem
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restarted_store_resumes() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = FileStateStore::open(dir.path()).unwrap();
        store.put("orders", "cooldown", serde_json::json!({"queue": [1, 2]}));
        store.put("orders", "events", serde_json::json!([]));
        store.put("clicks/eu.1", "cooldown", serde_json::json!(7));
        // Visible before the flush, durable only after it.
        assert_eq!(store.get("orders", "events"), Some(serde_json::json!([])));
        assert!(FileStateStore::open(dir.path()).unwrap().jobs().is_empty());
        store.flush().unwrap();

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
        let mut names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, vec!["a.json", "b.json"]);
        let text = fs::read_to_string(dir.path().join("a.json")).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value, serde_json::json!({"job": "a", "sections": {"s": 3}}));
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
        assert_eq!(FileStateStore::open(dir.path()).unwrap().jobs(), vec!["b"]);
        // Re-adding after removal writes it again.
        store.remove_job("b");
        store.put("b", "s", serde_json::json!(2));
        store.flush().unwrap();
        assert_eq!(
            FileStateStore::open(dir.path()).unwrap().get("b", "s"),
            Some(serde_json::json!(2))
        );
    }

    #[test]
    fn corrupt_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("x.json"), "{not json").unwrap();
        let err = FileStateStore::open(dir.path()).unwrap_err();
        assert!(matches!(&err, StateError::Corrupt { path, .. } if path.ends_with("x.json")));
        assert!(err.to_string().contains("x.json"), "{err}");
        // Temporary files of an interrupted write and unrelated files are ignored.
        fs::remove_file(dir.path().join("x.json")).unwrap();
        fs::write(dir.path().join("y.json.tmp"), "{half").unwrap();
        fs::write(dir.path().join("README"), "notes").unwrap();
        assert!(FileStateStore::open(dir.path()).unwrap().jobs().is_empty());
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
        assert_eq!(
            FileStateStore::open(&state_dir).unwrap().get("a", "s"),
            Some(serde_json::json!(1))
        );
    }

    #[test]
    fn file_stems_are_safe_and_unique() {
        assert_eq!(file_stem("orders-v2_x"), "orders-v2_x");
        assert_eq!(file_stem("a/b"), "a%2Fb");
        assert_eq!(file_stem(".."), "%2E%2E");
        assert_eq!(file_stem("%2F"), "%252F");
        assert_eq!(file_stem(""), "%");
        let long_a = "x".repeat(300) + "a";
        let long_b = "x".repeat(300) + "b";
        assert!(file_stem(&long_a).len() <= MAX_STEM);
        assert_ne!(file_stem(&long_a), file_stem(&long_b));

        let dir = tempfile::tempdir().unwrap();
        let mut store = FileStateStore::open(dir.path()).unwrap();
        store.put(&long_a, "s", serde_json::json!("a"));
        store.put(&long_b, "s", serde_json::json!("b"));
        store.put("", "s", serde_json::json!("empty"));
        store.flush().unwrap();
        let reopened = FileStateStore::open(dir.path()).unwrap();
        assert_eq!(reopened.get(&long_a, "s"), Some(serde_json::json!("a")));
        assert_eq!(reopened.get(&long_b, "s"), Some(serde_json::json!("b")));
        assert_eq!(reopened.get("", "s"), Some(serde_json::json!("empty")));
    }
}
