//! Re-reading a link's credential files when they change on disk.
//!
//! Certificates are renewed by replacing their files (cert-manager, certbot, a rename over the
//! old file, or a rewrite in place). A link checks its files before it opens a connection: a
//! `stat` per file, far cheaper than the handshake it precedes, so no watcher thread is needed
//! and a change is seen by the very next connection.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use super::CredentialError;
use crate::events::{Event, EventReason, Severity};

/// What identifies one version of a file: a rewrite in place changes its size or modification
/// time, a rename over it changes its inode, and a `chmod` its permissions (a key made readable
/// by others must be refused as soon as it is). `None`: the file is missing or cannot be
/// stat'ed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    device: u64,
    inode: u64,
    size: u64,
    modified: Option<SystemTime>,
    permissions: std::fs::Permissions,
}

impl Stamp {
    /// The stamp of the file `path` leads to (a symbolic link is followed, as a Kubernetes
    /// secret volume's `..data` link is swapped on renewal).
    fn of(path: &PathBuf) -> Option<Stamp> {
        let metadata = std::fs::metadata(path).ok()?;
        let (device, inode) = identity(&metadata);
        Some(Stamp {
            device,
            inode,
            size: metadata.len(),
            modified: metadata.modified().ok(),
            permissions: metadata.permissions(),
        })
    }
}

#[cfg(unix)]
fn identity(metadata: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (metadata.dev(), metadata.ino())
}

#[cfg(not(unix))]
fn identity(_: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

/// Change detection for a set of files.
#[derive(Debug)]
pub struct FileWatch {
    files: Vec<(PathBuf, Option<Stamp>)>,
}

impl FileWatch {
    /// Watches `paths`, as they are now.
    pub fn new(paths: impl IntoIterator<Item = PathBuf>) -> FileWatch {
        FileWatch {
            files: paths
                .into_iter()
                .map(|path| {
                    let stamp = Stamp::of(&path);
                    (path, stamp)
                })
                .collect(),
        }
    }

    /// The watched files that changed (appeared, vanished, were rewritten or replaced) since
    /// the last call, or since [`FileWatch::new`].
    pub fn changed(&mut self) -> Vec<PathBuf> {
        let mut changed = Vec::new();
        for (path, seen) in &mut self.files {
            let now = Stamp::of(path);
            if now != *seen {
                *seen = now;
                changed.push(path.clone());
            }
        }
        changed
    }
}

/// The outcome of a [`Reloading::refresh`] that saw a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reload {
    /// The files were read again and the new value is in use.
    Reloaded {
        /// The files that changed.
        files: Vec<PathBuf>,
    },
    /// The changed files cannot be used: the last good value stays in use.
    Refused {
        /// The files that changed.
        files: Vec<PathBuf>,
        /// Why they cannot be used (names files, never their contents).
        reason: String,
    },
}

impl Reload {
    /// The event to record: `CredentialsReloaded`, or `CredentialsRefused` with the reason.
    pub fn event(&self) -> Event {
        let names = |files: &[PathBuf]| {
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Reload::Reloaded { files } => Event::new(
                EventReason::CredentialsReloaded,
                Severity::Normal,
                format!(
                    "read again, used from the next connection on: {}",
                    names(files)
                ),
            ),
            Reload::Refused { files, reason } => Event::new(
                EventReason::CredentialsRefused,
                Severity::Warning,
                format!(
                    "changed but cannot be used, the last good ones stay in use: {}: {reason}",
                    names(files)
                ),
            ),
        }
    }
}

/// How a [`Reloading`] makes its value.
type Loader<T> = Box<dyn Fn() -> Result<T, CredentialError> + Send + Sync>;

/// A value made from files (a TLS configuration, a token), made again when one of them
/// changes. Shared by the clones of a link's client: every method takes `&self`.
pub struct Reloading<T> {
    load: Loader<T>,
    inner: Mutex<(FileWatch, Arc<T>)>,
}

impl<T> std::fmt::Debug for Reloading<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Reloading")
            .field("watch", &inner.0)
            .finish_non_exhaustive()
    }
}

impl<T> Reloading<T> {
    /// Makes the value from `paths` with `load`; an error now is the caller's to report (a
    /// link that cannot start).
    pub fn new(
        paths: Vec<PathBuf>,
        load: impl Fn() -> Result<T, CredentialError> + Send + Sync + 'static,
    ) -> Result<Reloading<T>, CredentialError> {
        // Stamp the files before reading them: a change during the read is seen next time.
        let watch = FileWatch::new(paths);
        let value = load()?;
        Ok(Reloading {
            load: Box::new(load),
            inner: Mutex::new((watch, Arc::new(value))),
        })
    }

    /// The value in use.
    pub fn current(&self) -> Arc<T> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(&inner.1)
    }

    /// Checks the files; when one changed, makes the value again and uses it, or keeps the
    /// last good one when the new files cannot be used. `None` when nothing changed.
    pub fn refresh(&self) -> Option<Reload> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let files = inner.0.changed();
        if files.is_empty() {
            return None;
        }
        Some(match (self.load)() {
            Ok(value) => {
                inner.1 = Arc::new(value);
                Reload::Reloaded { files }
            }
            Err(err) => Reload::Refused {
                files,
                reason: err.to_string(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::credentials::read_secret;

    fn write_private(path: &Path, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, text).expect("write");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }

    /// A token file read through [`Reloading`].
    fn token(path: &Path) -> Reloading<String> {
        let file = path.to_path_buf();
        Reloading::new(vec![file.clone()], move || {
            read_secret(&file).map(|s| s.expose().to_string())
        })
        .expect("readable at first")
    }

    #[test]
    fn an_unchanged_file_is_not_read_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("token");
        write_private(&path, "one");
        let reloading = token(&path);
        assert_eq!(reloading.refresh(), None);
        assert_eq!(*reloading.current(), "one");
    }

    #[test]
    fn a_rewrite_in_place_and_a_rename_over_are_both_seen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("token");
        write_private(&path, "one");
        let reloading = token(&path);

        // Same size, in place: the modification time tells (set it apart explicitly, as two
        // writes within one clock tick of a coarse file system would not be).
        write_private(&path, "two");
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(later))
            .expect("set mtime");
        assert_eq!(
            reloading.refresh(),
            Some(Reload::Reloaded {
                files: vec![path.clone()]
            })
        );
        assert_eq!(*reloading.current(), "two");

        // A new file renamed over the old one, even with the old one's times: a new inode.
        let next = dir.path().join("token.new");
        write_private(&next, "six");
        std::fs::File::options()
            .write(true)
            .open(&next)
            .and_then(|f| f.set_modified(later))
            .expect("set mtime");
        std::fs::rename(&next, &path).expect("rename");
        assert!(matches!(reloading.refresh(), Some(Reload::Reloaded { .. })));
        assert_eq!(*reloading.current(), "six");
        assert_eq!(reloading.refresh(), None);
    }

    #[test]
    fn a_file_changed_into_garbage_keeps_the_last_good_value_until_it_is_fixed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("token");
        write_private(&path, "good-secret");
        let reloading = token(&path);

        write_private(&path, "");
        let refused = reloading.refresh().expect("a change");
        let Reload::Refused { files, reason } = &refused else {
            panic!("{refused:?}");
        };
        assert_eq!(files, std::slice::from_ref(&path));
        assert!(reason.ends_with("it is empty"), "{reason}");
        assert_eq!(*reloading.current(), "good-secret");
        let event = refused.event();
        assert_eq!(event.reason, EventReason::CredentialsRefused);
        assert!(event.message.contains(&path.display().to_string()));
        assert!(!event.message.contains("good-secret"));

        // A chmod alone is a change: the file is no longer private.
        write_private(&path, "good-secret");
        assert!(matches!(reloading.refresh(), Some(Reload::Reloaded { .. })));
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .expect("chmod");
        let refused = reloading.refresh().expect("a chmod is a change");
        assert!(
            matches!(&refused, Reload::Refused { reason, .. } if reason.contains("chmod 600")),
            "{refused:?}"
        );
        assert_eq!(*reloading.current(), "good-secret");

        std::fs::remove_file(&path).expect("rm");
        assert!(matches!(reloading.refresh(), Some(Reload::Refused { .. })));
        assert_eq!(*reloading.current(), "good-secret");

        write_private(&path, "new-secret");
        let reloaded = reloading.refresh().expect("a change");
        assert_eq!(reloaded.event().reason, EventReason::CredentialsReloaded);
        assert!(!reloaded.event().message.contains("new-secret"));
        assert_eq!(*reloading.current(), "new-secret");
    }
}
