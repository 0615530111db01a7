//! The exclusive lock on a state directory, held for the life of the host that uses it.
//!
//! Two hosts writing one directory would overwrite each other's state, the last writer winning,
//! so a host takes an advisory lock (`flock`) on `<state-dir>/.lock` before it reads anything and
//! keeps it until it exits. The kernel releases the lock when the process ends, however it ends
//! (a SIGKILL included), so a stale lock never needs clearing by hand. The holder writes its
//! process id into the file, so that a second host can say which process holds the directory.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
#[cfg(test)]
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::error::StateError;

/// The lock file's name inside the state directory.
pub(crate) const LOCK_FILE: &str = ".lock";

/// How long a host that found the directory locked waits for the holder's process id to appear
/// (the holder writes it right after taking the lock).
const PID_WAIT: Duration = Duration::from_millis(200);

/// The held lock of a state directory; released when dropped (or when the process ends).
#[derive(Debug)]
pub(crate) struct StateDirLock {
    #[cfg(test)]
    path: PathBuf,
    // Holding the open file is holding the lock.
    _file: File,
}

impl StateDirLock {
    /// Takes the lock of `dir` (which must exist) without waiting: a directory another process
    /// holds is [`StateError::Locked`], naming the holder's process id when it is known.
    pub(crate) fn acquire(dir: &Path) -> Result<StateDirLock, StateError> {
        let path = dir.join(LOCK_FILE);
        let lock_err = |source| StateError::Lock {
            path: path.clone(),
            source,
        };
        // Not truncated on open: the holder's process id must survive a failed attempt.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(lock_err)?;
        match try_lock(&file) {
            Ok(true) => {}
            Ok(false) => {
                return Err(StateError::Locked {
                    dir: dir.to_path_buf(),
                    holder: holder_pid(&path),
                });
            }
            Err(source) => return Err(lock_err(source)),
        }
        let pid = format!("{}\n", std::process::id());
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(pid.as_bytes()))
            .and_then(|()| file.sync_all())
            .map_err(lock_err)?;
        Ok(StateDirLock {
            #[cfg(test)]
            path,
            _file: file,
        })
    }

    /// The lock file.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Who holds the lock of state directory `dir` now, without taking it for longer than the look
/// and without writing anything: `Ok(None)` when no host holds it (or none ever used the
/// directory), `Ok(Some(pid))` when one does (`pid` as written in the lock file, if readable).
pub(crate) fn lock_holder(dir: &Path) -> Result<Option<Option<u32>>, StateError> {
    let path = dir.join(LOCK_FILE);
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(StateError::Lock { path, source }),
    };
    match try_lock(&file) {
        // Taken here, released when `file` is dropped: no host holds the directory.
        Ok(true) => Ok(None),
        Ok(false) => Ok(Some(holder_pid(&path))),
        Err(source) => Err(StateError::Lock { path, source }),
    }
}

/// The process id written in the lock file at `path`, waiting briefly for a holder that has
/// just taken the lock and not yet written it.
fn holder_pid(path: &Path) -> Option<u32> {
    let deadline = Instant::now() + PID_WAIT;
    loop {
        let mut text = String::new();
        let read = fs::File::open(path).and_then(|mut f| f.read_to_string(&mut text));
        if let Some(pid) = read.ok().and_then(|_| text.trim().parse::<u32>().ok()) {
            return Some(pid);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Tries to take an exclusive `flock` on `file`; `Ok(false)` when another open file holds it.
#[cfg(unix)]
fn try_lock(file: &File) -> std::io::Result<bool> {
    use rustix::fs::{FlockOperation, flock};
    use rustix::io::Errno;
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(errno) if errno == Errno::WOULDBLOCK || errno == Errno::AGAIN => Ok(false),
        Err(errno) => Err(errno.into()),
    }
}

/// Without `flock` the directory is not locked: the lock file only records the process id.
#[cfg(not(unix))]
fn try_lock(_file: &File) -> std::io::Result<bool> {
    Ok(true)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_with_the_holders_pid_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = StateDirLock::acquire(dir.path()).unwrap();
        assert_eq!(first.path(), dir.path().join(LOCK_FILE));
        let written = fs::read_to_string(first.path()).unwrap();
        assert_eq!(written.trim(), std::process::id().to_string());

        // flock locks belong to an open file: a second open, even in this process, is refused.
        let err = StateDirLock::acquire(dir.path()).unwrap_err();
        match &err {
            StateError::Locked {
                dir: locked,
                holder,
            } => {
                assert_eq!(locked, dir.path());
                assert_eq!(*holder, Some(std::process::id()));
            }
            other => panic!("expected Locked, got {other}"),
        }
        let message = err.to_string();
        assert!(
            message.contains(&dir.path().display().to_string()),
            "{message}"
        );
        assert!(
            message.contains(&format!("process {}", std::process::id())),
            "{message}"
        );
        // The refused attempt left the holder's id in place.
        assert_eq!(fs::read_to_string(first.path()).unwrap(), written);

        drop(first);
        StateDirLock::acquire(dir.path()).expect("free again once the holder is gone");
    }

    #[test]
    fn the_holder_is_seen_without_taking_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(lock_holder(dir.path()).unwrap(), None, "no lock file yet");
        let held = StateDirLock::acquire(dir.path()).unwrap();
        assert_eq!(
            lock_holder(dir.path()).unwrap(),
            Some(Some(std::process::id()))
        );
        // Looking neither took the lock nor changed the holder's id.
        assert_eq!(
            fs::read_to_string(held.path()).unwrap().trim(),
            std::process::id().to_string()
        );
        drop(held);
        assert_eq!(lock_holder(dir.path()).unwrap(), None, "released");
        StateDirLock::acquire(dir.path()).expect("the look released what it took");
    }

    #[test]
    fn an_unknown_holder_is_said_so() {
        let dir = tempfile::tempdir().unwrap();
        let _first = StateDirLock::acquire(dir.path()).unwrap();
        fs::write(dir.path().join(LOCK_FILE), "").unwrap();
        let err = StateDirLock::acquire(dir.path()).unwrap_err();
        assert!(
            matches!(err, StateError::Locked { holder: None, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("unknown process"), "{err}");
    }
}
