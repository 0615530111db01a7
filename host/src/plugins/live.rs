//! A plugins directory watched while the host runs: a new file is checked and loaded, a
//! replaced file is loaded as a new version, a removed file takes its modes away.
//!
//! The directory is looked at when inotify (through `notify`) says something changed in it, and
//! every few seconds anyway (every second when no watcher could be set up): a look lists the
//! plugin files with their size, modification time, inode, owner and mode, and what the trust
//! check (`trust`) says of each, so that fixing (or breaking) the permissions of a directory on a
//! plugin's path is a change even though no file in the directory changed; inotify does not see
//! those directories, the next look does. A change is acted on once the listing stayed the same
//! for one more look, so a file still being copied in is not probed half-written. Acting means
//! discovering the whole directory again through the same [`PluginVersions`]: unchanged files
//! give their very same modes, new contents are loaded as new versions (see `versions`), and the
//! differences become events. SIGHUP ([`LivePlugins::recheck`]) discovers it again at once,
//! refused files included.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use notify::Watcher;

use super::report::{PluginFileReport, PluginListing, PluginStatus};
use super::trust::{self, Distrust};
use super::versions::{MAX_LOADED_VERSIONS, PluginVersions};
use super::{Isolation, ModeRegistry};
use crate::alignment::HostMode;
use crate::events::{Event, EventReason, Severity};
use crate::scaling::{HostEvaluator, HostExecutor};

/// How often the directory is looked at without a word from inotify.
const SAFETY_LOOK: Duration = Duration::from_secs(5);
/// How often it is looked at when no inotify watcher could be set up.
const POLL_LOOK: Duration = Duration::from_secs(1);

/// What a look at one plugin file saw: enough to notice a new file, a rewrite or a rename, and
/// a change of who may change it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
    /// The file's owner and permission bits (it can be made readable or private in place).
    owner_mode: (u32, u32),
    /// What the trust check says: the file it loads, or the path that makes it untrusted with
    /// its owner and mode. Changes when a directory on the way is fixed or broken.
    trust: Result<PathBuf, Distrust>,
}

type Stamps = BTreeMap<PathBuf, Stamp>;

/// What the host knows about one listed file.
#[derive(Debug, Clone, PartialEq)]
struct Known {
    hash: Option<u64>,
    report: PluginFileReport,
}

/// What changed in the directory since the last update.
#[derive(Debug, Clone)]
pub(crate) struct PluginUpdate {
    /// `PluginLoaded`, `PluginReplaced`, `PluginRemoved` and `PluginRefused` events.
    pub(crate) events: Vec<Event>,
    /// The modes available now, when they changed (a mode came, went, or has a new version).
    pub(crate) registry: Option<Arc<ModeRegistry>>,
}

/// A plugins directory and what was loaded from it.
pub(crate) struct LivePlugins {
    dir: PathBuf,
    isolation: Isolation,
    versions: PluginVersions,
    registry: Arc<ModeRegistry>,
    known: BTreeMap<PathBuf, Known>,
    stamps: Stamps,
    pending: Option<Stamps>,
    wake: Arc<AtomicBool>,
    watcher: Option<notify::RecommendedWatcher>,
    last_look: Instant,
}

impl std::fmt::Debug for LivePlugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LivePlugins")
            .field("dir", &self.dir)
            .field("files", &self.known.len())
            .field("versions", &self.versions.loaded_versions())
            .finish_non_exhaustive()
    }
}

impl LivePlugins {
    /// Discovers `dir` (as [`ModeRegistry::discover_with`]) and starts watching it.
    pub(crate) fn open(dir: &Path, isolation: Isolation) -> LivePlugins {
        let wake = Arc::new(AtomicBool::new(false));
        let watcher = watch(dir, Arc::clone(&wake));
        let mut versions = PluginVersions::new();
        let stamps = stamps(dir);
        let (registry, found) = ModeRegistry::discover_hashed(dir, &isolation, &mut versions);
        LivePlugins {
            dir: dir.to_path_buf(),
            isolation,
            versions,
            registry: Arc::new(registry),
            known: known(found),
            stamps,
            pending: None,
            wake,
            watcher,
            last_look: Instant::now(),
        }
    }

    /// The modes available now.
    pub(crate) fn registry(&self) -> Arc<ModeRegistry> {
        Arc::clone(&self.registry)
    }

    /// The report of every listed file, as `flowscale plugins` prints them.
    pub(crate) fn reports(&self) -> Vec<PluginFileReport> {
        self.known.values().map(|k| k.report.clone()).collect()
    }

    /// Plugin libraries loaded so far (every version), out of [`MAX_LOADED_VERSIONS`].
    pub(crate) fn loaded_versions(&self) -> usize {
        self.versions.loaded_versions()
    }

    /// The listing `flowscale plugins --json` prints, for this running host.
    pub(crate) fn listing(&self) -> PluginListing {
        PluginListing {
            directory: self.dir.clone(),
            files: self.reports(),
            versions_loaded: self.loaded_versions(),
            version_limit: MAX_LOADED_VERSIONS,
        }
    }

    /// Looks at the directory if it is time to, and acts on a settled change.
    pub(crate) fn poll(&mut self) -> Option<PluginUpdate> {
        let every = if self.watcher.is_some() {
            SAFETY_LOOK
        } else {
            POLL_LOOK
        };
        let woken = self.wake.swap(false, Ordering::AcqRel);
        if !woken && self.pending.is_none() && self.last_look.elapsed() < every {
            return None;
        }
        self.last_look = Instant::now();
        let now = stamps(&self.dir);
        if now == self.stamps {
            self.pending = None;
            return None;
        }
        if self.pending.as_ref() != Some(&now) {
            // Changed since the last look: look again before acting.
            self.pending = Some(now);
            return None;
        }
        self.pending = None;
        self.stamps = now;
        Some(self.rescan())
    }

    /// Looks at the directory now and discovers it again at once, whether or not the look saw
    /// a change (SIGHUP): every refused file is checked again, so a fix that no look can see
    /// (another user's rights, a library's dependencies) is taken when asked for.
    pub(crate) fn recheck(&mut self) -> PluginUpdate {
        self.last_look = Instant::now();
        self.pending = None;
        self.stamps = stamps(&self.dir);
        self.rescan()
    }

    /// Discovers the directory again and says what changed.
    fn rescan(&mut self) -> PluginUpdate {
        let (registry, found) =
            ModeRegistry::discover_hashed(&self.dir, &self.isolation, &mut self.versions);
        let known = known(found);
        let versions = self.versions.loaded_versions();
        let events = changes(&self.known, &known, versions);
        self.known = known;
        let changed = !same_modes(&self.registry, &registry);
        if changed {
            self.registry = Arc::new(registry);
        }
        PluginUpdate {
            events,
            registry: changed.then(|| Arc::clone(&self.registry)),
        }
    }
}

/// Sets `wake` whenever something happens in `dir`; `None` (polling instead) when inotify is
/// not available or the directory does not exist yet.
fn watch(dir: &Path, wake: Arc<AtomicBool>) -> Option<notify::RecommendedWatcher> {
    let mut watcher = notify::recommended_watcher(move |_event: notify::Result<notify::Event>| {
        wake.store(true, Ordering::Release);
    })
    .map_err(|err| tracing::info!(%err, "no inotify watcher: the plugins directory is polled"))
    .ok()?;
    match watcher.watch(dir, notify::RecursiveMode::NonRecursive) {
        Ok(()) => Some(watcher),
        Err(err) => {
            tracing::info!(dir = %dir.display(), %err, "cannot watch the plugins directory: it is polled");
            None
        }
    }
}

/// The plugin files of `dir` (by extension, links followed; a link that leads nowhere as
/// itself) with what a look can see.
fn stamps(dir: &Path) -> Stamps {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Stamps::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.extension()
                .is_some_and(|ext| ext == std::env::consts::DLL_EXTENSION)
        })
        .filter_map(|path| {
            let meta = std::fs::metadata(&path)
                .or_else(|_| std::fs::symlink_metadata(&path))
                .ok()?;
            #[cfg(unix)]
            let (inode, owner_mode) = {
                use std::os::unix::fs::MetadataExt;
                (meta.ino(), (meta.uid(), meta.mode()))
            };
            #[cfg(not(unix))]
            let (inode, owner_mode) = (0, (0, 0));
            let stamp = Stamp {
                len: meta.len(),
                modified: meta.modified().ok(),
                inode,
                owner_mode,
                trust: trust::check(&path),
            };
            Some((path, stamp))
        })
        .collect()
}

fn known(found: Vec<(PluginFileReport, Option<u64>)>) -> BTreeMap<PathBuf, Known> {
    found
        .into_iter()
        .map(|(report, hash)| (report.file.clone(), Known { hash, report }))
        .collect()
}

/// True when both lists hold the same ids, each with the very same object.
fn same_objects<T: ?Sized>(a: &[(&str, &Arc<T>)], b: &[(&str, &Arc<T>)]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.0 == y.0 && std::ptr::addr_eq(Arc::as_ptr(x.1), Arc::as_ptr(y.1)))
}

fn modes(r: &ModeRegistry) -> Vec<(&str, &Arc<dyn HostMode>)> {
    r.modes().map(|m| (m.id.as_str(), &m.mode)).collect()
}

fn evaluators(r: &ModeRegistry) -> Vec<(&str, &Arc<dyn HostEvaluator>)> {
    r.evaluators().map(|e| (e.id(), &e.evaluator)).collect()
}

fn executors(r: &ModeRegistry) -> Vec<(&str, &Arc<dyn HostExecutor>)> {
    r.executors().map(|x| (x.id(), &x.executor)).collect()
}

/// True when both registries offer the same modes, evaluators and executors, each the very
/// same object (a new version of a plugin creates new ones).
fn same_modes(a: &ModeRegistry, b: &ModeRegistry) -> bool {
    same_objects(&modes(a), &modes(b))
        && same_objects(&evaluators(a), &evaluators(b))
        && same_objects(&executors(a), &executors(b))
}

/// What a file exports, each kind named: "modes a, b; evaluator `e`; executors `x`, `y`".
fn mode_list(report: &PluginFileReport) -> String {
    let ids = |list: &[super::report::ModeSummary]| -> Vec<String> {
        list.iter().map(|m| format!("`{}`", m.id)).collect()
    };
    let mut parts = Vec::new();
    let modes: Vec<&str> = report.modes.iter().map(|m| m.id.as_str()).collect();
    if !modes.is_empty() {
        parts.push(format!("modes {}", modes.join(", ")));
    }
    for (kind, listed) in [
        ("evaluator", ids(&report.evaluators)),
        ("executor", ids(&report.executors)),
    ] {
        match listed.len() {
            0 => {}
            1 => parts.push(format!("{kind} {}", listed[0])),
            _ => parts.push(format!("{kind}s {}", listed.join(", "))),
        }
    }
    if parts.is_empty() {
        "no modes".to_string()
    } else {
        parts.join("; ")
    }
}

fn plugin_of(report: &PluginFileReport) -> String {
    format!(
        "{} {}",
        report.plugin.as_deref().unwrap_or("?"),
        report.version.as_deref().unwrap_or("?")
    )
}

/// The events that take the host from `before` to `after`.
fn changes(
    before: &BTreeMap<PathBuf, Known>,
    after: &BTreeMap<PathBuf, Known>,
    versions: usize,
) -> Vec<Event> {
    let loaded = |k: &Known| k.report.status == PluginStatus::Loaded;
    let mut events = Vec::new();
    for (file, now) in after {
        let was = before.get(file);
        let shown = file.display();
        let event = match (was, loaded(now)) {
            (Some(was), true) if loaded(was) && was.hash == now.hash => None,
            (Some(was), true) if loaded(was) => Some(Event::new(
                EventReason::PluginReplaced,
                Severity::Normal,
                format!(
                    "plugin file {shown} replaced: {} -> {} ({}); jobs use the new version from \
                     their next decision ({versions} of at most {MAX_LOADED_VERSIONS} plugin \
                     versions loaded)",
                    plugin_of(&was.report),
                    plugin_of(&now.report),
                    mode_list(&now.report)
                ),
            )),
            (_, true) => Some(Event::new(
                EventReason::PluginLoaded,
                Severity::Normal,
                format!(
                    "plugin file {shown} loaded: {} ({})",
                    plugin_of(&now.report),
                    mode_list(&now.report)
                ),
            )),
            // Refused: reported once per content and reason.
            (Some(was), false)
                if !loaded(was)
                    && was.hash == now.hash
                    && was.report.reason == now.report.reason =>
            {
                None
            }
            (was, false) => {
                let lost = match was {
                    Some(was) if loaded(was) => format!(
                        "; its exports ({}) are unavailable, the jobs using its modes align with \
                         BALANCED",
                        mode_list(&was.report)
                    ),
                    _ => String::new(),
                };
                Some(Event::new(
                    EventReason::PluginRefused,
                    Severity::Warning,
                    format!(
                        "plugin file {shown} refused: {}{lost}",
                        now.report.reason.as_deref().unwrap_or("no reason given")
                    ),
                ))
            }
        };
        events.extend(event);
    }
    for (file, was) in before {
        if after.contains_key(file) {
            continue;
        }
        if loaded(was) {
            events.push(Event::new(
                EventReason::PluginRemoved,
                Severity::Warning,
                format!(
                    "plugin file {} removed: its exports ({}) are unavailable, the jobs using its \
                     modes align with BALANCED until they are back",
                    file.display(),
                    mode_list(&was.report)
                ),
            ));
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::report::ModeSummary;

    fn report(file: &str, status: PluginStatus, version: &str, reason: Option<&str>) -> Known {
        let mut report = PluginFileReport::demo(status, reason);
        report.file = PathBuf::from(file);
        report.version = Some(version.to_string());
        report.modes = vec![ModeSummary {
            id: "m".to_string(),
            description: String::new(),
        }];
        Known {
            hash: Some(version.len() as u64 + u64::from(reason.is_some())),
            report,
        }
    }

    fn reasons(events: &[Event]) -> Vec<EventReason> {
        events.iter().map(|e| e.reason).collect()
    }

    #[cfg(unix)]
    #[test]
    fn a_fixed_directory_is_seen_by_a_look_and_sighup_checks_refused_files_at_once() {
        use std::os::unix::fs::PermissionsExt;
        let chmod = |path: &Path, mode: u32| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let plugins = dir.path().join("plugins");
        std::fs::create_dir(&plugins).expect("mkdir");
        let file = plugins.join("libx.so");
        std::fs::write(&file, "not a library").expect("write");
        chmod(&file, 0o644);
        chmod(&plugins, 0o775);
        let mut live = LivePlugins::open(&plugins, Isolation::InProcess);
        let reason = |live: &LivePlugins| live.reports()[0].reason.clone().unwrap_or_default();
        assert!(
            reason(&live).contains("writable by group or others"),
            "{}",
            reason(&live)
        );

        // Fixed: no file changed, yet the look differs.
        chmod(&plugins, 0o755);
        assert_ne!(stamps(&plugins), live.stamps, "a look sees the fix");
        // SIGHUP: checked again at once, without waiting for the look to settle.
        let update = live.recheck();
        assert_eq!(reasons(&update.events), [EventReason::PluginRefused]);
        assert!(
            update.events[0]
                .message
                .contains("not a loadable shared library"),
            "{}",
            update.events[0].message
        );
        assert!(reason(&live).contains("not a loadable shared library"));
        // Nothing new: no event.
        assert!(live.recheck().events.is_empty());
    }

    #[test]
    fn events_name_each_kind_a_file_exports() {
        let summary = |id: &str| ModeSummary {
            id: id.to_string(),
            description: String::new(),
        };
        let mut with_kinds = report("/p/k.so", PluginStatus::Loaded, "1", None);
        with_kinds.report.evaluators = vec![summary("rate")];
        with_kinds.report.executors = vec![summary("cap"), summary("freeze")];
        let after = BTreeMap::from([(PathBuf::from("/p/k.so"), with_kinds.clone())]);
        let events = changes(&BTreeMap::new(), &after, 1);
        assert_eq!(reasons(&events), [EventReason::PluginLoaded]);
        assert!(
            events[0]
                .message
                .ends_with("(modes m; evaluator `rate`; executors `cap`, `freeze`)"),
            "{}",
            events[0].message
        );
        // Only an executor, then removed.
        with_kinds.report.modes.clear();
        with_kinds.report.evaluators.clear();
        with_kinds.report.executors.truncate(1);
        let before = BTreeMap::from([(PathBuf::from("/p/k.so"), with_kinds)]);
        let events = changes(&before, &BTreeMap::new(), 1);
        assert_eq!(reasons(&events), [EventReason::PluginRemoved]);
        assert!(
            events[0]
                .message
                .contains("its exports (executor `cap`) are unavailable"),
            "{}",
            events[0].message
        );
    }

    #[test]
    fn each_kind_of_change_is_one_event_and_nothing_else_is_reported() {
        let mut before = BTreeMap::new();
        before.insert(
            PathBuf::from("/p/a.so"),
            report("/p/a.so", PluginStatus::Loaded, "1", None),
        );
        before.insert(
            PathBuf::from("/p/b.so"),
            report("/p/b.so", PluginStatus::Loaded, "1", None),
        );
        before.insert(
            PathBuf::from("/p/bad.so"),
            report("/p/bad.so", PluginStatus::Refused, "1", Some("no manifest")),
        );
        let mut after = before.clone();
        // a: a new build; b: gone; c: new; bad: the same refusal again.
        after.insert(
            PathBuf::from("/p/a.so"),
            report("/p/a.so", PluginStatus::Loaded, "22", None),
        );
        after.remove(Path::new("/p/b.so"));
        after.insert(
            PathBuf::from("/p/c.so"),
            report("/p/c.so", PluginStatus::Loaded, "1", None),
        );
        let events = changes(&before, &after, 3);
        assert_eq!(
            reasons(&events),
            [
                EventReason::PluginReplaced,
                EventReason::PluginLoaded,
                EventReason::PluginRemoved
            ]
        );
        assert!(
            events[0].message.contains("3 of at most 64"),
            "{}",
            events[0].message
        );
        assert!(changes(&after, &after, 3).is_empty(), "no change, no event");

        // A loaded file replaced by one that is refused: its modes are gone.
        let mut broken = after.clone();
        broken.insert(
            PathBuf::from("/p/c.so"),
            report("/p/c.so", PluginStatus::Refused, "2", Some("bad layout")),
        );
        let events = changes(&after, &broken, 3);
        assert_eq!(reasons(&events), [EventReason::PluginRefused]);
        assert!(events[0].message.contains("bad layout"));
        assert!(events[0].message.contains("BALANCED"));
    }
}
