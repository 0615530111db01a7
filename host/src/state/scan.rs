//! Reading a state directory without changing anything in it: the jobs whose files could be
//! read, and what is wrong with the others.
//!
//! `flowscale run` (through [`FileStateStore`](super::FileStateStore)) and `flowscale validate`
//! both read a directory through [`scan_dir`], so they find the same things. Nothing found in a
//! file is fatal: a file that is not state, or a job named by several files, is a
//! [`StateFinding`] for the caller to report, and the file is left as it is.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::StateError;
use super::names::job_of_stem;

/// The extension of job files.
pub(super) const EXTENSION: &str = "json";
/// The extension of a file being written; what a killed host leaves behind.
pub(super) const TEMP_EXTENSION: &str = "tmp";

/// The content of a job file.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct JobFile {
    pub(super) job: String,
    #[serde(default)]
    pub(super) sections: BTreeMap<String, serde_json::Value>,
}

/// A job's state as read from its file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StoredJob {
    /// The file it was read from.
    pub(crate) path: PathBuf,
    /// Its sections, undecoded: whether each has the shape its owner expects is the owner's
    /// business.
    pub(crate) sections: BTreeMap<String, serde_json::Value>,
}

/// Something wrong with the files of a state directory.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StateFinding {
    /// A file that is not flowscale state (not JSON, or not `{"job": ..., "sections": {...}}`),
    /// or that could not be read at all.
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        reason: String,
        /// The job its file name encodes, when it encodes one.
        job: Option<String>,
    },
    /// Several files name one job: which one is current cannot be told, so none is read.
    Ambiguous {
        /// The job.
        job: String,
        /// The files, sorted.
        paths: Vec<PathBuf>,
    },
}

impl StateFinding {
    /// The job the finding concerns, when known.
    pub(crate) fn job(&self) -> Option<&str> {
        match self {
            StateFinding::Unreadable { job, .. } => job.as_deref(),
            StateFinding::Ambiguous { job, .. } => Some(job),
        }
    }

    /// The files it concerns.
    pub(crate) fn paths(&self) -> Vec<&Path> {
        match self {
            StateFinding::Unreadable { path, .. } => vec![path.as_path()],
            StateFinding::Ambiguous { paths, .. } => paths.iter().map(PathBuf::as_path).collect(),
        }
    }
}

impl fmt::Display for StateFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateFinding::Unreadable { path, reason, .. } => {
                write!(
                    f,
                    "state file {} is not flowscale state: {reason}",
                    path.display()
                )
            }
            StateFinding::Ambiguous { job, paths } => {
                let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                write!(
                    f,
                    "the state of job `{job}` is in {} files ({}): which one is current cannot be told; move away all but one",
                    paths.len(),
                    names.join(", ")
                )
            }
        }
    }
}

/// What a state directory holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct DirScan {
    /// The jobs whose state was read, by name (never a job of an [`StateFinding::Ambiguous`]).
    pub(crate) jobs: BTreeMap<String, StoredJob>,
    /// What is wrong with the other files, in file-name order.
    pub(crate) findings: Vec<StateFinding>,
    /// Files of writes that never completed (a host was killed while writing): the state in
    /// them never replaced anything.
    pub(crate) temp_files: Vec<PathBuf>,
}

/// Reads every job file directly in `dir` (sub-folders, such as the quarantine, are not
/// state). Fails only when the directory itself cannot be listed.
pub(crate) fn scan_dir(dir: &Path) -> Result<DirScan, StateError> {
    let read_err = |source| StateError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let mut files = Vec::new();
    let mut temp_files = Vec::new();
    for entry in fs::read_dir(dir).map_err(read_err)? {
        let path = entry.map_err(read_err)?.path();
        if !path.is_file() {
            continue;
        }
        if path.extension().is_some_and(|e| e == EXTENSION) {
            files.push(path);
        } else if is_temp_file(&path) {
            temp_files.push(path);
        }
    }
    files.sort();
    temp_files.sort();

    let mut by_job: BTreeMap<String, Vec<StoredJob>> = BTreeMap::new();
    let mut findings = Vec::new();
    for path in files {
        match read_job_file(&path) {
            Ok(file) => by_job.entry(file.job).or_default().push(StoredJob {
                path,
                sections: file.sections,
            }),
            Err(reason) => {
                let job = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .and_then(job_of_stem);
                findings.push(StateFinding::Unreadable { path, reason, job });
            }
        }
    }
    let mut jobs = BTreeMap::new();
    for (job, mut stored) in by_job {
        if stored.len() == 1 {
            if let Some(one) = stored.pop() {
                jobs.insert(job, one);
            }
        } else {
            findings.push(StateFinding::Ambiguous {
                job,
                paths: stored.into_iter().map(|s| s.path).collect(),
            });
        }
    }
    findings.sort_by(|a, b| a.paths().cmp(&b.paths()));
    Ok(DirScan {
        jobs,
        findings,
        temp_files,
    })
}

/// The file's content as a job file, or why it is not one.
pub(super) fn read_job_file(path: &Path) -> Result<JobFile, String> {
    let bytes = fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
}

/// `<name>.json.tmp` (older hosts) or `<name>.json.<pid>.tmp`.
fn is_temp_file(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    let Some(rest) = name.strip_suffix(&format!(".{TEMP_EXTENSION}")) else {
        return false;
    };
    let rest = match rest.rsplit_once('.') {
        Some((head, pid)) if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) => head,
        _ => rest,
    };
    rest.ends_with(&format!(".{EXTENSION}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_read_without_being_changed() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| fs::write(dir.path().join(name), text).unwrap();
        write("a.json", r#"{"job": "a", "sections": {"s": 1}}"#);
        write("b.json", "{not json");
        write("b-copy.json", r#"{"job": "b", "sections": {}}"#);
        write("c.json", r#"{"job": "c", "sections": {"s": 2}}"#);
        write("c-backup.json", r#"{"job": "c", "sections": {"s": 1}}"#);
        write("shape.v1.json", r#"{"job": 7}"#);
        write("a.json.tmp", "{half");
        write("a.json.1234.tmp", "{half");
        write("notes.tmp", "mine");
        write("README", "notes");
        fs::create_dir(dir.path().join("quarantine")).unwrap();
        fs::write(dir.path().join("quarantine/x.json"), "{}").unwrap();
        let before = listing(dir.path());

        let scan = scan_dir(dir.path()).unwrap();
        assert_eq!(listing(dir.path()), before, "nothing was changed");
        assert_eq!(scan.jobs.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(scan.jobs["b"].path, dir.path().join("b-copy.json"));
        assert_eq!(scan.jobs["a"].sections["s"], serde_json::json!(1));
        let jobs: Vec<Option<&str>> = scan.findings.iter().map(StateFinding::job).collect();
        assert_eq!(jobs, [Some("b"), Some("c"), None]);
        match &scan.findings[1] {
            StateFinding::Ambiguous { job, paths } => {
                assert_eq!(job, "c");
                assert_eq!(
                    paths,
                    &[dir.path().join("c-backup.json"), dir.path().join("c.json")]
                );
            }
            other => panic!("{other:?}"),
        }
        let message = scan.findings[1].to_string();
        assert!(
            message.contains("c-backup.json") && message.contains("c.json"),
            "{message}"
        );
        assert!(scan.findings[0].to_string().contains("b.json"));
        assert_eq!(
            scan.temp_files,
            [
                dir.path().join("a.json.1234.tmp"),
                dir.path().join("a.json.tmp")
            ]
        );
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let err = scan_dir(&missing).unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
    }

    fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<(String, Vec<u8>)> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .map(|p| {
                let bytes = fs::read(&p).unwrap();
                (p.display().to_string(), bytes)
            })
            .collect();
        files.sort();
        files
    }
}
