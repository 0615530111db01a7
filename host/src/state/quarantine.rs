//! Keeping state a host cannot read where nothing overwrites it: `<state-dir>/quarantine/`.
//!
//! A job file with a section its owner cannot decode is copied there as it was, byte for byte,
//! before the host writes the job's file again without that section; a file that is not state
//! at all is moved there. Quarantined files are named `<file stem>.<UTC time>.json` (with `-2`,
//! `-3`, ... when that name is taken), so the newest is easy to find, and they are never read
//! back: the folder is not part of the state, a person decides what to do with it.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::error::StateError;
use crate::utc::UtcTime;

/// The folder of the state directory that holds quarantined files.
pub(crate) const QUARANTINE_DIR: &str = "quarantine";

/// Copies `file` into the quarantine of `state_dir`; `file` itself is left for the caller to
/// replace. Returns the copy.
pub(super) fn keep_copy(state_dir: &Path, file: &Path) -> Result<PathBuf, StateError> {
    let bytes = fs::read(file).map_err(|source| StateError::Read {
        path: file.to_path_buf(),
        source,
    })?;
    let target = free_target(state_dir, file)?;
    let temp = target.with_extension(format!("{}.tmp", std::process::id()));
    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StateError::Write { path, source }
    };
    let mut out = fs::File::create(&temp).map_err(write_err(&temp))?;
    out.write_all(&bytes).map_err(write_err(&temp))?;
    out.sync_all().map_err(write_err(&temp))?;
    drop(out);
    fs::rename(&temp, &target).map_err(write_err(&target))?;
    sync_dir(&quarantine_dir(state_dir));
    Ok(target)
}

/// Moves `file` into the quarantine of `state_dir`. Returns where it went.
pub(super) fn move_aside(state_dir: &Path, file: &Path) -> Result<PathBuf, StateError> {
    let target = free_target(state_dir, file)?;
    fs::rename(file, &target).map_err(|source| StateError::Write {
        path: target.clone(),
        source,
    })?;
    sync_dir(&quarantine_dir(state_dir));
    sync_dir(state_dir);
    Ok(target)
}

fn quarantine_dir(state_dir: &Path) -> PathBuf {
    state_dir.join(QUARANTINE_DIR)
}

/// A name in the quarantine (created if needed) that no file has yet.
fn free_target(state_dir: &Path, file: &Path) -> Result<PathBuf, StateError> {
    let dir = quarantine_dir(state_dir);
    fs::create_dir_all(&dir).map_err(|source| StateError::Write {
        path: dir.clone(),
        source,
    })?;
    let stem = file
        .file_stem()
        .map_or_else(|| "state".into(), |s| s.to_string_lossy());
    let stamp = utc_stamp(SystemTime::now());
    let mut n = 1;
    loop {
        let suffix = if n == 1 {
            String::new()
        } else {
            format!("-{n}")
        };
        let target = dir.join(format!("{stem}.{stamp}{suffix}.json"));
        if !target.exists() {
            return Ok(target);
        }
        n += 1;
    }
}

/// Makes renames in `dir` durable. Best effort: not every platform can open or sync a
/// directory, and the files are complete either way.
pub(super) fn sync_dir(dir: &Path) {
    if let Ok(dir) = fs::File::open(dir) {
        let _ = dir.sync_all();
    }
}

/// `YYYYMMDDTHHMMSSZ`: sorts by time, and has no character a file system refuses.
fn utc_stamp(at: SystemTime) -> String {
    let ms = at
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let t = UtcTime::from_ms(ms);
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn stamps_are_utc_calendar_times() {
        let at = |secs: u64| utc_stamp(UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "19700101T000000Z");
        // 2000-02-29 23:59:59: a leap day of a century divisible by 400.
        assert_eq!(at(951_868_799), "20000229T235959Z");
        // 2024-12-31 12:34:56.
        assert_eq!(at(1_735_648_496), "20241231T123456Z");
    }

    #[test]
    fn copies_and_moves_keep_every_byte_under_a_free_name() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("orders.json");
        fs::write(&file, b"{\"job\": \"orders\"} \xff").unwrap();
        let copy = keep_copy(dir.path(), &file).unwrap();
        let second = keep_copy(dir.path(), &file).unwrap();
        assert_ne!(copy, second, "a second copy does not replace the first");
        for kept in [&copy, &second] {
            assert!(
                kept.starts_with(dir.path().join(QUARANTINE_DIR)),
                "{kept:?}"
            );
            assert_eq!(fs::read(kept).unwrap(), fs::read(&file).unwrap());
        }
        let name = copy.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("orders.") && name.ends_with("Z.json"),
            "{name}"
        );

        let bytes = fs::read(&file).unwrap();
        let moved = move_aside(dir.path(), &file).unwrap();
        assert!(!file.exists());
        assert_eq!(fs::read(&moved).unwrap(), bytes);
        let left: Vec<_> = fs::read_dir(dir.path().join(QUARANTINE_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
