//! Every version of every plugin file the host has loaded, by content.
//!
//! The dynamic loader hands back the library it already has for a path it knows, even after the
//! file at that path was replaced: a new build dropped into the plugins directory under the same
//! name would never run. And a library overwritten in place while mapped can crash the process
//! that maps it. So the host never maps the user's file: each trusted file's bytes are copied
//! into a private directory (owned by the host's user, mode 0700) under a name made of the file's
//! stem and a hash of its content, and that copy is probed and loaded. A new build gets a new
//! name, hence a new library; the same build seen again (a rescan, the file renamed) is the
//! library already loaded, with the very same mode objects.
//!
//! A copy is only needed while it is being loaded: a mapped library stays valid after its file is
//! gone, so the private directory goes away with this set. A host that never dropped its set
//! (killed, or crashed) leaves its directory behind: the next host on the machine removes the
//! directories of hosts that no longer run. A worker process of `process` isolation loads (and,
//! after a crash, reloads) the checked file itself.
//!
//! Libraries are never unloaded (abi_stable keeps them mapped for the life of the process), so
//! each new version costs its mapped size for good: past [`MAX_LOADED_VERSIONS`] a new version
//! is refused, and a restart frees them.

use std::collections::BTreeMap;
use std::fs;
use std::hash::{DefaultHasher, Hasher};
use std::path::{Path, PathBuf};

use flowscale_sdk::abi::ManifestInfo;

use super::kinds::Exports;
use super::report::{PluginListing, Refusal};
use super::{probe, trust};

/// How many plugin libraries one host process loads at most (every version of every file that
/// reached the loader, refused ones included: they stay mapped too). A restart frees them.
pub(crate) const MAX_LOADED_VERSIONS: usize = 64;

/// One plugin file, staged for loading: its content's hash, its manifest, and the private copy
/// to load.
#[derive(Debug, Clone)]
pub(super) struct Staged {
    /// The file as listed in the plugins directory.
    pub(crate) listed: PathBuf,
    /// The checked file it resolves to (after links).
    pub(crate) real: PathBuf,
    /// Hash of its content (names the private copy, tells versions apart).
    pub(crate) hash: u64,
    /// Its manifest, read from the private copy.
    pub(crate) info: ManifestInfo,
    /// What to load: the private copy (or the checked file itself, without a private
    /// directory).
    pub(crate) load_from: PathBuf,
}

/// The outcome of loading one version: its modes, evaluators and executors, or why it was
/// refused.
type Loaded = Result<Exports, Refusal>;

/// The host's plugin libraries by content hash.
#[derive(Debug)]
pub(crate) struct PluginVersions {
    /// Where private copies live; `None` when it could not be made (plugins then load from
    /// their own files and a replaced file cannot be loaded again).
    private: Option<PathBuf>,
    /// Manifests of the contents probed so far (or why they were refused).
    probed: BTreeMap<u64, Result<ManifestInfo, Refusal>>,
    /// Contents that reached the loader.
    loaded: BTreeMap<u64, Loaded>,
    /// At most this many contents reach the loader.
    limit: usize,
}

impl Default for PluginVersions {
    fn default() -> PluginVersions {
        PluginVersions::new()
    }
}

impl Drop for PluginVersions {
    fn drop(&mut self) {
        // Loaded copies stay mapped after their file is gone; only the names go.
        if let Some(dir) = &self.private {
            let _ = fs::remove_dir_all(dir);
        }
    }
}

impl PluginVersions {
    /// An empty set with a fresh private directory under the system's temporary directory.
    pub(crate) fn new() -> PluginVersions {
        let private = match private_dir() {
            Ok(dir) => Some(dir),
            Err(err) => {
                tracing::warn!(
                    %err,
                    "no private directory for plugin copies: plugins load from their own files, \
                     and a replaced file cannot be loaded again until a restart"
                );
                None
            }
        };
        PluginVersions {
            private,
            probed: BTreeMap::new(),
            loaded: BTreeMap::new(),
            limit: MAX_LOADED_VERSIONS,
        }
    }

    /// Libraries mapped for good so far.
    pub(crate) fn loaded_versions(&self) -> usize {
        self.loaded.len()
    }

    /// Checks who may have planted `file` (see `trust`) and that its header is a shared library
    /// for this platform, copies its bytes privately and reads the copy's manifest (once per
    /// content).
    pub(super) fn stage(&mut self, file: &Path) -> Result<Staged, Refusal> {
        let real = trust::check(file)?;
        let bytes = fs::read(&real).map_err(|e| Refusal::Unreadable(e.to_string()))?;
        // Nothing that is not a shared library for this platform reaches the loader.
        probe::check_library_header(&bytes[..bytes.len().min(64)], bytes.len() as u64)?;
        let hash = content_hash(&bytes);
        let load_from = match &self.private {
            Some(dir) => {
                let copy = dir.join(copy_name(file, hash));
                if !copy.exists() {
                    write_private(&copy, &bytes).map_err(|e| {
                        Refusal::Unreadable(format!("cannot copy it privately: {e}"))
                    })?;
                }
                copy
            }
            None => real.clone(),
        };
        let info = self
            .probed
            .entry(hash)
            .or_insert_with(|| probe::read_manifest(&load_from))
            .clone()?;
        Ok(Staged {
            listed: file.to_path_buf(),
            real,
            hash,
            info,
            load_from,
        })
    }

    /// The exports of a staged version: loaded by `load` the first time, the same ones after.
    pub(super) fn load(&mut self, staged: &Staged, load: impl FnOnce(&Staged) -> Loaded) -> Loaded {
        if let Some(loaded) = self.loaded.get(&staged.hash) {
            return loaded.clone();
        }
        if self.private.is_none() && self.loaded_from_file(&staged.listed) {
            return Err(Refusal::Unreadable(
                "a new version of a file already loaded cannot be loaded without a private \
                 directory for plugin copies; restart the host"
                    .to_string(),
            ));
        }
        if self.loaded.len() >= self.limit {
            return Err(Refusal::TooManyVersions { limit: self.limit });
        }
        let loaded = load(staged);
        self.loaded.insert(staged.hash, loaded.clone());
        loaded
    }

    fn loaded_from_file(&self, file: &Path) -> bool {
        self.loaded
            .values()
            .flatten()
            .flat_map(Exports::origins)
            .any(|origin| {
                matches!(origin, crate::alignment::ModeOrigin::Plugin { file: f, .. } if f == file)
            })
    }
}

/// A hash of a file's content: equal contents, equal hash, in this process and every other
/// (std's SipHash with its fixed default keys).
fn content_hash(bytes: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    hasher.write(bytes);
    hasher.finish()
}

/// `<stem>-<hash>.<ext>`: one name per content of one listed file.
fn copy_name(file: &Path, hash: u64) -> String {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "plugin".to_string());
    format!("{stem}-{hash:016x}.{}", std::env::consts::DLL_EXTENSION)
}

/// The name of every private directory starts with this, then the host's process id.
const PRIVATE_DIR_PREFIX: &str = "flowscale-plugins-";

/// A new directory only the host's user can enter, under the system's temporary directory.
/// The directories that hosts killed before they could remove theirs left there go first.
fn private_dir() -> std::io::Result<PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let parent = std::env::temp_dir();
    let dir = parent.join(format!(
        "{PRIVATE_DIR_PREFIX}{}-{nanos:08x}",
        std::process::id()
    ));
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(&dir)?;
    let removed = remove_abandoned_dirs(&parent, &dir);
    if removed > 0 {
        tracing::info!(
            removed,
            "removed the plugin copies of hosts that stopped without removing them"
        );
    }
    Ok(dir)
}

/// Removes the private directories in `parent` left by hosts that no longer run: named with
/// [`PRIVATE_DIR_PREFIX`] and a process id that is not alive, and owned by the same user as
/// `ours` (a directory of another user, or a link planted under that name, is never touched).
/// Returns how many went. Only where live processes can be told (`/proc`); elsewhere nothing
/// is removed.
fn remove_abandoned_dirs(parent: &Path, ours: &Path) -> usize {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let proc_root = Path::new("/proc");
        if !proc_root.join("self").exists() {
            return 0;
        }
        let Ok(owner) = fs::symlink_metadata(ours).map(|m| m.uid()) else {
            return 0;
        };
        let Ok(entries) = fs::read_dir(parent) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(pid) = abandoned_dir_pid(&entry.file_name().to_string_lossy()) else {
                continue;
            };
            let mine = fs::symlink_metadata(&path)
                .is_ok_and(|m| m.file_type().is_dir() && m.uid() == owner);
            if path == ours || !mine || proc_root.join(pid.to_string()).exists() {
                continue;
            }
            if fs::remove_dir_all(&path).is_ok() {
                removed += 1;
            }
        }
        removed
    }
    #[cfg(not(unix))]
    {
        let _ = (parent, ours);
        0
    }
}

/// The process id in a private directory's name `flowscale-plugins-<pid>-<hex>`.
fn abandoned_dir_pid(name: &str) -> Option<u32> {
    let (pid, suffix) = name.strip_prefix(PRIVATE_DIR_PREFIX)?.split_once('-')?;
    if suffix.is_empty() || !suffix.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    pid.parse().ok()
}

/// Writes a private copy readable only by the host's user, in one step (a temporary name, then
/// a rename), so that a copy that exists is whole.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("partial");
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o500);
    let mut file = options.open(&tmp)?;
    std::io::Write::write_all(&mut file, bytes)?;
    file.sync_all()?;
    fs::rename(&tmp, path)
}

impl PluginListing {
    /// The listing of `directory` before any plugin was looked for: no file, nothing loaded.
    pub fn empty(directory: PathBuf) -> PluginListing {
        PluginListing {
            directory,
            files: Vec::new(),
            versions_loaded: 0,
            version_limit: MAX_LOADED_VERSIONS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_named_by_stem_and_content() {
        let a = content_hash(b"one build");
        let b = content_hash(b"another build");
        assert_ne!(a, b);
        assert_eq!(a, content_hash(b"one build"), "stable within the process");
        let name = copy_name(Path::new("/p/libbucket_align.so"), a);
        assert_eq!(name, format!("libbucket_align-{a:016x}.so"));
    }

    fn staged(hash: u64) -> Staged {
        Staged {
            listed: PathBuf::from("/p/libx.so"),
            real: PathBuf::from("/p/libx.so"),
            hash,
            info: ManifestInfo {
                sdk_version: String::new(),
                plugin_name: "x".to_string(),
                plugin_version: hash.to_string(),
                panic_unwind: true,
                modes: Vec::new(),
                evaluators: Vec::new(),
                executors: Vec::new(),
            },
            load_from: PathBuf::from("/p/libx.so"),
        }
    }

    #[test]
    fn each_content_is_loaded_once_and_new_ones_stop_at_the_limit() {
        let mut versions = PluginVersions::new();
        versions.limit = 2;
        let mut loads = 0;
        let mut load = |hash| {
            versions.load(&staged(hash), |_| {
                loads += 1;
                Ok(Exports::default())
            })
        };
        assert!(load(1).is_ok());
        assert!(load(1).is_ok(), "the same content again");
        assert!(load(2).is_ok());
        assert_eq!(
            load(3).map(|_| ()),
            Err(Refusal::TooManyVersions { limit: 2 }),
            "a third version is one too many"
        );
        assert!(load(1).is_ok(), "a version already loaded is still there");
        assert_eq!(loads, 2);
        assert_eq!(versions.loaded_versions(), 2);
    }

    #[test]
    fn the_private_directory_is_the_users_alone_and_goes_away() {
        let versions = PluginVersions::new();
        let dir = versions.private.clone().expect("a private directory");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&dir).expect("metadata").permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        drop(versions);
        assert!(!dir.exists());
    }

    #[test]
    fn only_names_of_private_directories_carry_a_process_id() {
        assert_eq!(
            abandoned_dir_pid("flowscale-plugins-4242-0a1b2c3d"),
            Some(4242)
        );
        assert_eq!(abandoned_dir_pid("flowscale-plugins-4242-"), None);
        assert_eq!(abandoned_dir_pid("flowscale-plugins-4242-xyz"), None);
        assert_eq!(abandoned_dir_pid("flowscale-plugins-abc-0a"), None);
        assert_eq!(abandoned_dir_pid("other-4242-0a"), None);
    }

    /// A process id that belonged to a process which has exited (and was reaped).
    #[cfg(target_os = "linux")]
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id();
        child.wait().expect("wait");
        pid
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn directories_of_hosts_that_no_longer_run_are_removed_and_no_other() {
        let parent = std::env::temp_dir().join(format!("versions-sweep-{}", std::process::id()));
        let _ = fs::remove_dir_all(&parent);
        fs::create_dir_all(&parent).expect("parent");
        let ours = parent.join(format!("{PRIVATE_DIR_PREFIX}{}-01", std::process::id()));
        fs::create_dir(&ours).expect("ours");
        let dead = dead_pid();
        let abandoned = parent.join(format!("{PRIVATE_DIR_PREFIX}{dead}-0abc"));
        fs::create_dir(&abandoned).expect("abandoned");
        fs::write(abandoned.join("libx-00.so"), b"copy").expect("copy");
        // A live process (this one) under another suffix: another host of the same process
        // id cannot exist, but a live id is never taken for a dead one.
        let live = parent.join(format!("{PRIVATE_DIR_PREFIX}{}-02", std::process::id()));
        fs::create_dir(&live).expect("live");
        let unrelated = parent.join(format!("{PRIVATE_DIR_PREFIX}{dead}-notes"));
        fs::create_dir(&unrelated).expect("unrelated");
        // A link under an abandoned-looking name is not followed nor removed.
        let target = parent.join("target");
        fs::create_dir(&target).expect("target");
        let link = parent.join(format!("{PRIVATE_DIR_PREFIX}{dead}-0def"));
        std::os::unix::fs::symlink(&target, &link).expect("link");

        let removed = remove_abandoned_dirs(&parent, &ours);

        assert_eq!(removed, 1);
        assert!(!abandoned.exists(), "the dead host's copies go");
        assert!(ours.exists() && live.exists() && unrelated.exists() && target.exists());
        assert!(fs::symlink_metadata(&link).is_ok(), "the link stays");
        fs::remove_dir_all(&parent).expect("clean up");
    }
}
