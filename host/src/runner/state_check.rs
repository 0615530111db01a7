//! What `flowscale validate` says about a fleet's state directory: everything `flowscale run`
//! would report or keep aside there, found without changing anything (and without taking the
//! directory's lock, so it works next to a running host).

use std::path::Path;

use crate::config::{Diagnostic, EngineSpec};
use crate::state::{QUARANTINE_DIR, StateFinding, scan_dir};

use super::engines::may_restore;
use super::restore::check_sections;

/// The state directory's problems (a job would not start) and warnings (something is kept
/// aside or left alone), each located by file.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct StateCheck {
    /// What stops a job of the fleet from starting.
    pub(crate) errors: Vec<Diagnostic>,
    /// What `run` would keep aside, or leave alone because no job of the fleet uses it.
    pub(crate) warnings: Vec<Diagnostic>,
}

/// Checks `dir` for the fleet's `(name, engine)` entries. A directory that does not exist yet
/// is fine when `run` can create it.
pub(crate) fn check_state_dir(dir: &Path, jobs: &[(&str, &EngineSpec)]) -> StateCheck {
    let mut check = StateCheck::default();
    if let Some(problem) = unwritable(dir) {
        check.errors.push(problem);
        return check;
    }
    if !dir.exists() {
        return check;
    }
    let scan = match scan_dir(dir) {
        Ok(scan) => scan,
        Err(err) => {
            check.errors.push(Diagnostic::new(
                dir.display().to_string(),
                format!("the state directory (`[host] state-dir`) cannot be used: {err}"),
            ));
            return check;
        }
    };
    let used = |job: Option<&str>| {
        job.is_some_and(|job| {
            jobs.iter()
                .any(|(entry, spec)| may_restore(entry, spec, job))
        })
    };
    let quarantine = dir.join(QUARANTINE_DIR);
    let unused = "no job of this fleet uses it, so `flowscale run` leaves it as it is";
    for finding in &scan.findings {
        match finding {
            StateFinding::Unreadable { path, reason, job } => {
                let fate = match job.as_deref().filter(|j| used(Some(j))) {
                    Some(job) => format!(
                        "`flowscale run` moves it to {} and job `{job}` starts with empty state",
                        quarantine.display()
                    ),
                    None => unused.to_string(),
                };
                check.warnings.push(Diagnostic::new(
                    path.display().to_string(),
                    format!("not flowscale state ({reason}); {fate}"),
                ));
            }
            StateFinding::Ambiguous { job, paths } => {
                let location = paths
                    .first()
                    .map_or_else(|| dir.display().to_string(), |p| p.display().to_string());
                if used(Some(job)) {
                    check.errors.push(Diagnostic::new(
                        location,
                        format!("{finding}; until then job `{job}` does not start"),
                    ));
                } else {
                    check
                        .warnings
                        .push(Diagnostic::new(location, format!("{finding}; {unused}")));
                }
            }
        }
    }
    for (job, stored) in &scan.jobs {
        for bad in check_sections(|section| stored.sections.get(section).cloned()) {
            let fate = if used(Some(job)) {
                format!(
                    "`flowscale run` keeps the file as it is in {}, starts this section of job `{job}` empty and resumes the others",
                    quarantine.display()
                )
            } else {
                unused.to_string()
            };
            check.warnings.push(Diagnostic::new(
                format!("{}: sections.\"{}\"", stored.path.display(), bad.section),
                format!("cannot be read ({}); {fate}", bad.reason),
            ));
        }
    }
    check
}

/// Why `flowscale run`, run by this user, could not write in the state directory `dir`, if so:
/// it creates the directory (and the ones above it) when missing, then takes its lock file and
/// writes every job's state there. `validate` is run by the same user as `run`, usually, and
/// reading a directory does not tell whether it can be written: a read-only directory would
/// pass every other check and stop `run` at once.
#[cfg(unix)]
fn unwritable(dir: &Path) -> Option<Diagnostic> {
    use rustix::fs::{Access, AtFlags, CWD, accessat};
    // With the effective user and its capabilities, as `run` will try.
    let can_write = |path: &Path| {
        accessat(
            CWD,
            path,
            Access::WRITE_OK | Access::EXEC_OK,
            AtFlags::EACCESS,
        )
        .map_err(std::io::Error::from)
    };
    let at = dir.display().to_string();
    if dir.is_dir() {
        if let Err(err) = can_write(dir) {
            return Some(Diagnostic::new(
                at,
                format!(
                    "the state directory (`[host] state-dir`) cannot be used: `flowscale run` \
                     cannot write in it ({err}), and it keeps its lock and every job's state \
                     there; give this user write access to it, or choose another `state-dir`"
                ),
            ));
        }
        let lock = dir.join(crate::state::LOCK_FILE);
        let lock_unwritable =
            lock.exists() && accessat(CWD, &lock, Access::WRITE_OK, AtFlags::EACCESS).is_err();
        return lock_unwritable.then(|| {
            Diagnostic::new(
                lock.display().to_string(),
                "the state directory's lock file cannot be written by this user, so \
                 `flowscale run` cannot take the directory; give this user write access to it"
                    .to_string(),
            )
        });
    }
    // Not there yet: the closest directory above it must let `run` create it.
    let existing = dir.ancestors().skip(1).find(|a| a.exists())?;
    let problem = if existing.is_dir() {
        can_write(existing).err().map(|err| {
            format!(
                "`flowscale run` creates it, but cannot write in {} ({err}); create it for this \
                 user, or choose another `state-dir`",
                existing.display()
            )
        })
    } else {
        Some(format!(
            "`flowscale run` creates it, but {} is not a directory",
            existing.display()
        ))
    };
    problem.map(|problem| {
        Diagnostic::new(
            at,
            format!("the state directory (`[host] state-dir`) cannot be created: {problem}"),
        )
    })
}

/// Without Unix permissions to read, `run` finds out when it opens the directory.
#[cfg(not(unix))]
fn unwritable(_dir: &Path) -> Option<Diagnostic> {
    None
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn a_state_directory_that_cannot_be_created_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        fs::write(&file, "in the way").unwrap();
        let state = file.join("state");
        let check = check_state_dir(&state, &[]);
        assert_eq!(check.errors.len(), 1, "{:?}", check.errors);
        let text = check.errors[0].to_string();
        assert!(
            text.starts_with(&state.display().to_string())
                && text.contains("cannot be created")
                && text.contains(&format!("{} is not a directory", file.display())),
            "{text}"
        );
        // One that can be is fine.
        assert!(
            check_state_dir(&dir.path().join("new/state"), &[])
                .errors
                .is_empty()
        );
    }

    #[test]
    fn the_same_findings_as_run_located_by_file_without_changing_anything() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| fs::write(dir.path().join(name), text).unwrap();
        write(
            "orders.json",
            r#"{"job": "orders", "sections": {"cooldown": "garbage", "events": {}}}"#,
        );
        write("payments.json", "{not json");
        write("gone.json", "{not json");
        write("clicks.json", r#"{"job": "clicks", "sections": {}}"#);
        write("clicks-copy.json", r#"{"job": "clicks", "sections": {}}"#);
        write("old.json", r#"{"job": "old", "sections": {}}"#);
        write("old-copy.json", r#"{"job": "old", "sections": {}}"#);
        let flink = |id: &str| EngineSpec::Flink {
            rest: "http://127.0.0.1:9".into(),
            cluster: None,
            job_id: Some(id.into()),
        };
        let (a, b, c) = (flink("a"), flink("b"), flink("c"));
        let jobs = [("orders", &a), ("payments", &b), ("clicks", &c)];

        let check = check_state_dir(dir.path(), &jobs);
        let text = |d: &[Diagnostic]| d.iter().map(ToString::to_string).collect::<Vec<_>>();
        let (errors, warnings) = (text(&check.errors), text(&check.warnings));
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(
            errors[0].contains("clicks-copy.json") && errors[0].contains("clicks.json"),
            "{errors:#?}"
        );
        assert_eq!(warnings.len(), 4, "{warnings:#?}");
        let about = |name: &str| {
            warnings
                .iter()
                .find(|w| w.contains(name))
                .unwrap_or_else(|| panic!("no warning about {name}: {warnings:#?}"))
        };
        assert!(about("orders.json: sections.\"cooldown\"").contains("invalid type"));
        assert!(about("payments.json").contains("job `payments` starts with empty state"));
        assert!(about("gone.json").contains("leaves it as it is"));
        assert!(about("old-copy.json").contains("leaves it as it is"));
        assert!(
            !dir.path().join(QUARANTINE_DIR).exists(),
            "nothing was moved"
        );
        assert!(
            !dir.path().join(crate::state::LOCK_FILE).exists(),
            "not locked"
        );

        let missing = check_state_dir(&PathBuf::from("/nonexistent/flowscale-state"), &jobs);
        assert_eq!(missing, StateCheck::default());
    }
}
