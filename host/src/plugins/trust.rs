//! Who may plant a plugin: a plugin runs with the host's rights, so before a file is opened the
//! host checks that nobody but root and the user it runs as can have put it there or can
//! replace it, the way sshd's `StrictModes` checks authorized keys.
//!
//! The check is about what is actually loaded: the file after following every symbolic link,
//! and every directory on its canonical path up to `/`. Each must be owned by root or by the
//! host's effective user and must not be writable by group or others. A root-owned directory
//! with the sticky bit (like `/tmp`) is accepted although it is world-writable: others may add
//! entries to it but cannot rename or delete what they do not own. The directory holding each
//! link on the way (the plugins directory first) is checked the same way, because whoever can
//! write there can point the link at another file.
//!
//! The caller loads the resolved path it gets back, not the link, so that a link changed after
//! the check cannot make it load something else.

use std::fmt;
use std::path::{Path, PathBuf};

/// What one path on the way is, as far as the check is concerned (the parts of `stat` it reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Node {
    /// The owner's uid.
    pub(crate) uid: u32,
    /// The permission bits, with the sticky bit (`0o1000`).
    pub(crate) mode: u32,
    /// A directory (a file otherwise).
    pub(crate) is_dir: bool,
}

/// The sticky bit: in a directory, only an entry's owner may rename or delete it.
const STICKY: u32 = 0o1000;
/// Write permission for group and others.
const GROUP_OR_OTHER_WRITE: u32 = 0o022;
/// Links followed before giving up, as the kernel's own limit (`ELOOP`).
const MAX_LINKS: usize = 40;

/// A file or a directory, as the message names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// The library itself.
    File,
    /// A directory on its path.
    Directory,
}

impl fmt::Display for PathKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PathKind::File => "file",
            PathKind::Directory => "directory",
        })
    }
}

/// Why a plugin file is not trusted: the first offending path, what is wrong with it and how to
/// fix it, in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Distrust {
    /// Owned by someone who is neither root nor the host's user.
    #[error(
        "{kind} `{}` is owned by uid {uid}, neither root nor the user flowscale runs as (uid \
         {euid}): that user could replace the code the host runs; run `chown {euid} {}` as root, \
         or keep the plugin elsewhere",
        path.display(), path.display()
    )]
    Owner {
        /// A file or a directory.
        kind: PathKind,
        /// The offending path (canonical).
        path: PathBuf,
        /// Its owner.
        uid: u32,
        /// The host's effective uid.
        euid: u32,
    },
    /// Writable by group or others (and not a root-owned sticky directory).
    #[error(
        "{kind} `{}` is writable by group or others (mode {mode:04o}): anyone could inject code \
         into the host; run `chmod go-w {}`",
        path.display(), path.display()
    )]
    Writable {
        /// A file or a directory.
        kind: PathKind,
        /// The offending path (canonical).
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A path on the way could not be resolved or examined.
    #[error("cannot check who may change `{}`: {error}", path.display())]
    Unresolvable {
        /// The path that could not be examined.
        path: PathBuf,
        /// Why.
        error: String,
    },
}

/// Judges one path: owned by root or `euid`, and not writable by group or others unless it is
/// a root-owned sticky directory.
pub(super) fn judge(path: &Path, node: Node, euid: u32) -> Result<(), Distrust> {
    let kind = if node.is_dir {
        PathKind::Directory
    } else {
        PathKind::File
    };
    if node.uid != 0 && node.uid != euid {
        return Err(Distrust::Owner {
            kind,
            path: path.to_path_buf(),
            uid: node.uid,
            euid,
        });
    }
    let sticky_root_dir = node.is_dir && node.uid == 0 && node.mode & STICKY != 0;
    if node.mode & GROUP_OR_OTHER_WRITE != 0 && !sticky_root_dir {
        return Err(Distrust::Writable {
            kind,
            path: path.to_path_buf(),
            mode: node.mode & 0o7777,
        });
    }
    Ok(())
}

/// `path` and every ancestor of it, closest first, ending with the root.
fn with_ancestors(path: &Path) -> impl Iterator<Item = &Path> {
    path.ancestors().filter(|p| !p.as_os_str().is_empty())
}

/// The paths to judge for a plugin whose link chain ends at `resolved` (canonical) and whose
/// links sit in `link_dirs` (canonical): the file and its ancestors first, so that the message
/// names what is closest to the library, then each link directory and its ancestors; each path
/// once.
fn paths_to_judge(resolved: &Path, link_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = Vec::new();
    let chains = std::iter::once(resolved).chain(link_dirs.iter().map(PathBuf::as_path));
    for start in chains {
        for path in with_ancestors(start) {
            if !paths.iter().any(|p| p == path) {
                paths.push(path.to_path_buf());
            }
        }
    }
    paths
}

/// Follows `file` link by link: the canonical path it ends at, and the canonical directory of
/// every link on the way (the first is the directory `file` is listed in, when it is a link).
fn resolve(file: &Path) -> Result<(PathBuf, Vec<PathBuf>), Distrust> {
    let unresolvable = |path: &Path, error: std::io::Error| Distrust::Unresolvable {
        path: path.to_path_buf(),
        error: error.to_string(),
    };
    let mut link_dirs = Vec::new();
    let mut current = file.to_path_buf();
    for _ in 0..MAX_LINKS {
        let meta = std::fs::symlink_metadata(&current).map_err(|e| unresolvable(&current, e))?;
        if !meta.file_type().is_symlink() {
            let resolved =
                std::fs::canonicalize(&current).map_err(|e| unresolvable(&current, e))?;
            return Ok((resolved, link_dirs));
        }
        let parent = match current.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        link_dirs.push(std::fs::canonicalize(&parent).map_err(|e| unresolvable(&parent, e))?);
        let target = std::fs::read_link(&current).map_err(|e| unresolvable(&current, e))?;
        current = parent.join(target);
    }
    Err(Distrust::Unresolvable {
        path: file.to_path_buf(),
        error: format!("more than {MAX_LINKS} symbolic links"),
    })
}

/// The host's effective uid: the user whose files it may trust besides root's.
#[cfg(unix)]
pub(super) fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Checks that `file` (a plugin as listed in the plugins directory) and every path it depends on
/// can only be changed by root or the host's user; returns the canonical path to load.
#[cfg(unix)]
pub(super) fn check(file: &Path) -> Result<PathBuf, Distrust> {
    use std::os::unix::fs::MetadataExt;
    let euid = effective_uid();
    let (resolved, link_dirs) = resolve(file)?;
    for path in paths_to_judge(&resolved, &link_dirs) {
        // Canonical paths hold no links: `metadata` describes the path itself.
        let meta = std::fs::metadata(&path).map_err(|e| Distrust::Unresolvable {
            path: path.clone(),
            error: e.to_string(),
        })?;
        let node = Node {
            uid: meta.uid(),
            mode: meta.mode() & 0o7777,
            is_dir: meta.is_dir(),
        };
        judge(&path, node, euid)?;
    }
    Ok(resolved)
}

/// On platforms without Unix owners and permission bits only the links are resolved.
#[cfg(not(unix))]
pub(super) fn check(file: &Path) -> Result<PathBuf, Distrust> {
    resolve(file).map(|(resolved, _)| resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: u32 = 1000;

    fn node(uid: u32, mode: u32, is_dir: bool) -> Node {
        Node { uid, mode, is_dir }
    }

    #[test]
    fn owners_other_than_root_and_the_host_user_are_refused() {
        let path = Path::new("/opt/plugins/libx.so");
        assert_eq!(judge(path, node(0, 0o755, false), ME), Ok(()));
        assert_eq!(judge(path, node(ME, 0o755, false), ME), Ok(()));
        let err = judge(path, node(1001, 0o755, false), ME).unwrap_err();
        assert_eq!(
            err,
            Distrust::Owner {
                kind: PathKind::File,
                path: path.to_path_buf(),
                uid: 1001,
                euid: ME
            }
        );
        let text = err.to_string();
        assert!(text.starts_with("file `/opt/plugins/libx.so` is owned by uid 1001"));
        assert!(text.contains("chown 1000 /opt/plugins/libx.so"), "{text}");
        // A root host trusts only root's files.
        assert!(judge(path, node(ME, 0o755, false), 0).is_err());
    }

    #[test]
    fn group_or_world_write_is_refused_with_the_chmod_fix() {
        let dir = Path::new("/opt/plugins");
        for mode in [0o775, 0o757, 0o777, 0o2775] {
            let err = judge(dir, node(ME, mode, true), ME).unwrap_err();
            assert_eq!(
                err,
                Distrust::Writable {
                    kind: PathKind::Directory,
                    path: dir.to_path_buf(),
                    mode
                },
                "{mode:o}"
            );
            assert!(err.to_string().contains("chmod go-w /opt/plugins"));
        }
        for mode in [0o700, 0o755, 0o750, 0o555] {
            assert_eq!(judge(dir, node(ME, mode, true), ME), Ok(()), "{mode:o}");
        }
        let text = judge(dir, node(0, 0o770, true), ME)
            .unwrap_err()
            .to_string();
        assert!(text.contains("(mode 0770)"), "{text}");
    }

    #[test]
    fn only_a_root_owned_sticky_directory_may_be_world_writable() {
        let tmp = Path::new("/tmp");
        assert_eq!(judge(tmp, node(0, 0o1777, true), ME), Ok(()));
        // Not sticky: anyone can replace what is in it.
        assert!(judge(tmp, node(0, 0o777, true), ME).is_err());
        // Sticky but owned by a user: that user's directory, and others write into it.
        assert!(judge(tmp, node(ME, 0o1777, true), ME).is_err());
        // The sticky bit means nothing on a file.
        assert!(judge(Path::new("/tmp/libx.so"), node(0, 0o1666, false), ME).is_err());
    }

    #[test]
    fn the_file_comes_first_then_its_directories_then_those_of_the_links() {
        let paths = paths_to_judge(
            Path::new("/srv/lib/libx.so"),
            &[
                PathBuf::from("/etc/flowscale/plugins"),
                PathBuf::from("/srv"),
            ],
        );
        let expected = [
            "/srv/lib/libx.so",
            "/srv/lib",
            "/srv",
            "/",
            "/etc/flowscale/plugins",
            "/etc/flowscale",
            "/etc",
        ];
        assert_eq!(paths, expected.map(PathBuf::from));
    }

    #[cfg(unix)]
    mod filesystem {
        //! On real files in temporary directories (under `/tmp`, root-owned and sticky).

        use std::fs;
        use std::os::unix::fs::{PermissionsExt, symlink};

        use super::*;

        fn chmod(path: &Path, mode: u32) {
            fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
        }

        /// A private directory holding `sub/libx.so` (0644), both directories 0755.
        fn plugin_in_subdir() -> (tempfile::TempDir, PathBuf) {
            let dir = tempfile::tempdir().unwrap();
            chmod(dir.path(), 0o755);
            let sub = dir.path().join("sub");
            fs::create_dir(&sub).unwrap();
            chmod(&sub, 0o755);
            let file = sub.join("libx.so");
            fs::write(&file, b"x").unwrap();
            chmod(&file, 0o644);
            (dir, file)
        }

        #[test]
        fn a_group_writable_directory_is_refused_until_fixed() {
            let (_dir, file) = plugin_in_subdir();
            let sub = fs::canonicalize(file.parent().unwrap()).unwrap();
            assert_eq!(check(&file), Ok(fs::canonicalize(&file).unwrap()));

            chmod(&sub, 0o775);
            let err = check(&file).unwrap_err();
            assert_eq!(
                err,
                Distrust::Writable {
                    kind: PathKind::Directory,
                    path: sub.clone(),
                    mode: 0o775
                }
            );
            assert!(
                err.to_string()
                    .contains(&format!("chmod go-w {}", sub.display()))
            );

            // The fix the message gives is enough.
            chmod(&sub, 0o755);
            assert!(check(&file).is_ok());
        }

        #[test]
        fn a_group_writable_file_is_refused() {
            let (_dir, file) = plugin_in_subdir();
            chmod(&file, 0o664);
            let err = check(&file).unwrap_err();
            assert!(
                matches!(
                    &err,
                    Distrust::Writable {
                        kind: PathKind::File,
                        mode: 0o664,
                        ..
                    }
                ),
                "{err}"
            );
        }

        #[test]
        fn a_link_into_a_world_writable_directory_names_the_target_directory() {
            let (dir, file) = plugin_in_subdir();
            let sub = fs::canonicalize(file.parent().unwrap()).unwrap();
            chmod(&sub, 0o777);
            let plugins = dir.path().join("plugins");
            fs::create_dir(&plugins).unwrap();
            chmod(&plugins, 0o755);
            let link = plugins.join("libx.so");
            symlink(&file, &link).unwrap();
            let err = check(&link).unwrap_err();
            assert_eq!(
                err,
                Distrust::Writable {
                    kind: PathKind::Directory,
                    path: sub.clone(),
                    mode: 0o777
                }
            );
            // Fixed, the link resolves to the file itself.
            chmod(&sub, 0o755);
            assert_eq!(check(&link), Ok(fs::canonicalize(&file).unwrap()));
        }

        #[test]
        fn a_writable_directory_holding_a_link_is_refused() {
            // The target is fine, but whoever can write where the link is can re-point it.
            let (dir, file) = plugin_in_subdir();
            let plugins = dir.path().join("plugins");
            fs::create_dir(&plugins).unwrap();
            let link = plugins.join("libx.so");
            symlink("../sub/libx.so", &link).unwrap();
            chmod(&plugins, 0o757);
            let err = check(&link).unwrap_err();
            assert_eq!(
                err,
                Distrust::Writable {
                    kind: PathKind::Directory,
                    path: fs::canonicalize(&plugins).unwrap(),
                    mode: 0o757
                }
            );
            chmod(&plugins, 0o755);
            assert_eq!(check(&link), Ok(fs::canonicalize(&file).unwrap()));
        }

        #[test]
        fn a_sticky_world_writable_directory_is_trusted_only_when_root_owns_it() {
            let (_dir, file) = plugin_in_subdir();
            let sub = fs::canonicalize(file.parent().unwrap()).unwrap();
            chmod(&sub, 0o1777);
            // The directory belongs to whoever runs the test: like /tmp only for root.
            let root = effective_uid() == 0;
            assert_eq!(check(&file).is_ok(), root, "{:?}", check(&file));
        }

        #[test]
        fn a_file_of_another_user_is_refused() {
            // Only root can give a file away; as another user there is nothing to set up (the
            // owner rule itself is tested on injected metadata above).
            if effective_uid() != 0 {
                return;
            }
            let (_dir, file) = plugin_in_subdir();
            rustix::fs::chown(&file, Some(rustix::fs::Uid::from_raw(65_534)), None).unwrap();
            let err = check(&file).unwrap_err();
            assert_eq!(
                err,
                Distrust::Owner {
                    kind: PathKind::File,
                    path: fs::canonicalize(&file).unwrap(),
                    uid: 65_534,
                    euid: 0
                }
            );
        }

        #[test]
        fn a_dangling_link_cannot_be_checked() {
            let dir = tempfile::tempdir().unwrap();
            let link = dir.path().join("libx.so");
            symlink(dir.path().join("missing.so"), &link).unwrap();
            let err = check(&link).unwrap_err();
            assert!(matches!(err, Distrust::Unresolvable { .. }), "{err}");
        }
    }
}
