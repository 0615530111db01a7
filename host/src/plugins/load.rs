//! Scanning a plugins directory: probe every candidate, settle duplicate ids across files, then
//! load the survivors with abi_stable and register their modes.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use abi_stable::library::{LibraryError, lib_header_from_path};
use abi_stable::std_types::{RResult, RStr};
use flowscale_sdk::abi::{HostLogger, LogLevel, ManifestInfo, PluginRootRef};

use super::isolation::{self, Isolation};
use super::kinds::{self, Exports};
use super::logger;
use super::mode::PluginMode;
use super::probe;
use super::registry::ModeRegistry;
use super::report::{ModeSummary, PluginFileReport, PluginStatus, Refusal};
use super::versions::{PluginVersions, Staged};
use crate::alignment::{CustomMode, ModeOrigin};

/// How many differences of abi_stable's layout report the one-line reason keeps.
const ABI_SUMMARY_ITEMS: usize = 3;

/// The plugin files of `dir`, sorted by name: regular files (after following links) with the
/// platform's shared-library extension, and symbolic links with that extension that lead
/// nowhere (refused by [`broken_link`], so that each says why instead of being passed over).
fn candidates(dir: &Path) -> Result<Vec<PathBuf>, std::io::Error> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let is_library = path
            .extension()
            .is_some_and(|ext| ext == std::env::consts::DLL_EXTENSION);
        if is_library && (path.is_file() || broken_link(&path).is_some()) {
            files.push(path);
        } else {
            tracing::debug!(file = %path.display(), "not a plugin file; ignored");
        }
    }
    files.sort();
    Ok(files)
}

/// Why `path` is a symbolic link that leads to no file, if it is one: its target does not exist,
/// or following it comes back to a link already followed.
pub(super) fn broken_link(path: &Path) -> Option<Refusal> {
    if !fs::symlink_metadata(path).ok()?.file_type().is_symlink() {
        return None;
    }
    let err = fs::metadata(path).err()?;
    if err.kind() == std::io::ErrorKind::NotFound {
        let target = fs::read_link(path).unwrap_or_default();
        return Some(Refusal::DanglingLink(target));
    }
    #[cfg(unix)]
    if rustix::io::Errno::from_io_error(&err) == Some(rustix::io::Errno::LOOP) {
        return Some(Refusal::LinkLoop);
    }
    Some(Refusal::Unreadable(err.to_string()))
}

fn summaries(listed: &[(String, String)]) -> Vec<ModeSummary> {
    listed
        .iter()
        .map(|(id, description)| ModeSummary {
            id: id.clone(),
            description: description.clone(),
        })
        .collect()
}

fn report_for(file: &Path, info: &ManifestInfo) -> PluginFileReport {
    PluginFileReport {
        file: file.to_path_buf(),
        status: PluginStatus::Loaded,
        reason: None,
        plugin: Some(info.plugin_name.clone()),
        version: Some(info.plugin_version.clone()),
        sdk_version: Some(info.sdk_version.clone()),
        modes: summaries(&info.modes),
        evaluators: summaries(&info.evaluators),
        executors: summaries(&info.executors),
        details: None,
    }
}

/// Which kind of export a claimed id belongs to: each kind has ids of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Mode,
    Evaluator,
    Executor,
}

impl Kind {
    /// The ids of this kind that `info` lists.
    fn listed(self, info: &ManifestInfo) -> &[(String, String)] {
        match self {
            Kind::Mode => &info.modes,
            Kind::Evaluator => &info.evaluators,
            Kind::Executor => &info.executors,
        }
    }

    /// Whether an object of this kind linked into the binary has `id`, and how to name it.
    fn linked(self, registry: &ModeRegistry, id: &str) -> Option<&'static str> {
        match self {
            Kind::Mode => registry
                .contains(id)
                .then_some("a mode linked into flowscale"),
            Kind::Evaluator => registry
                .evaluator(id)
                .is_some()
                .then_some("an evaluator linked into flowscale"),
            Kind::Executor => registry
                .executor(id)
                .is_some()
                .then_some("an executor linked into flowscale"),
        }
    }

    /// The refusal of a file whose `id` of this kind is also claimed by `other`.
    fn duplicate(self, id: &str, other: String) -> Refusal {
        let id = id.to_string();
        match self {
            Kind::Mode => Refusal::Duplicate { id, other },
            Kind::Evaluator => Refusal::DuplicateKind {
                kind: "evaluator",
                id,
                other,
            },
            Kind::Executor => Refusal::DuplicateKind {
                kind: "executor",
                id,
                other,
            },
        }
    }
}

/// For each of `files` (with its manifest, when it was probed and checked): the refusal of an
/// id it claims that another file, or a linked object of the same kind in `registry`, claims
/// too. Every claimant is refused: neither wins. Each kind has ids of its own (an evaluator may
/// share a mode's id).
fn duplicates(
    files: &[PathBuf],
    manifests: &[Option<&ManifestInfo>],
    registry: &ModeRegistry,
) -> Vec<Option<Refusal>> {
    let mut claims: BTreeMap<(Kind, &str), Vec<usize>> = BTreeMap::new();
    for (i, info) in manifests.iter().enumerate() {
        for kind in [Kind::Mode, Kind::Evaluator, Kind::Executor] {
            for (id, _) in info.iter().flat_map(|m| kind.listed(m)) {
                claims.entry((kind, id.as_str())).or_default().push(i);
            }
        }
    }
    let mut duplicate: Vec<Option<Refusal>> = vec![None; files.len()];
    for ((kind, id), claimants) in &claims {
        for &i in claimants {
            if duplicate[i].is_some() {
                continue;
            }
            let other = match kind.linked(registry, id) {
                Some(linked) => Some(linked.to_string()),
                None => claimants
                    .iter()
                    .find(|&&j| j != i)
                    .map(|&j| format!("`{}`", files[j].display())),
            };
            if let Some(other) = other {
                duplicate[i] = Some(kind.duplicate(id, other));
            }
        }
    }
    duplicate
}

/// Discovers the plugin files of `dir` into `registry`, loading each version once through
/// `versions`. Each file's report comes with the hash of the content it was staged from (none
/// when it could not be read or trusted).
pub(super) fn discover_into(
    registry: &mut ModeRegistry,
    dir: &Path,
    isolation: &Isolation,
    versions: &mut PluginVersions,
) -> Vec<(PluginFileReport, Option<u64>)> {
    let files = match candidates(dir) {
        Ok(files) => files,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!(dir = %dir.display(), "no plugins directory");
            return Vec::new();
        }
        Err(e) => {
            return vec![(
                PluginFileReport::refused(dir, &Refusal::Unreadable(e.to_string())),
                None,
            )];
        }
    };
    // 1. Check who may have planted each file, copy it privately and probe the copy on its
    //    own (see `versions`): what is probed and loaded is the content that was checked, in a
    //    file nobody else can change.
    let mut reports = Vec::with_capacity(files.len());
    let mut hashes: Vec<Option<u64>> = Vec::with_capacity(files.len());
    let mut staged: Vec<Option<Staged>> = Vec::with_capacity(files.len());
    for file in &files {
        let stage = match broken_link(file) {
            Some(refusal) => Err(refusal),
            None => versions.stage(file),
        };
        match stage {
            Ok(stage) => {
                let mut report = report_for(file, &stage.info);
                hashes.push(Some(stage.hash));
                match probe::check_manifest(&stage.info) {
                    Ok(()) => staged.push(Some(stage)),
                    Err(refusal) => {
                        report.refuse(&refusal);
                        staged.push(None);
                    }
                }
                reports.push(report);
            }
            Err(refusal) => {
                reports.push(PluginFileReport::refused(file, &refusal));
                hashes.push(None);
                staged.push(None);
            }
        }
    }
    let manifests: Vec<Option<&ManifestInfo>> =
        staged.iter().map(|s| s.as_ref().map(|s| &s.info)).collect();

    // 2. An id claimed by two files (or by a file and a linked object of its kind) goes to
    //    nobody.
    let duplicate = duplicates(&files, &manifests, registry);

    // 3. Load what is left (each version once: a version seen before gives its modes again).
    for (i, file) in files.iter().enumerate() {
        let Some(stage) = &staged[i] else { continue };
        let info = &stage.info;
        let outcome = match &duplicate[i] {
            Some(refusal) => Err(refusal.clone()),
            None => versions.load(stage, |stage| match isolation {
                Isolation::InProcess => load(
                    &stage.listed,
                    &stage.load_from,
                    info,
                    logger::host_logger(),
                    logger::max_level(),
                ),
                // The worker is handed the checked file, which it checks again itself and loads
                // again after a crash: a private copy lives only as long as discovery.
                Isolation::Process(options) => {
                    isolation::serve_file(&stage.listed, &stage.real, info, options)
                }
            }),
        };
        match outcome {
            Ok(exports) => {
                for mode in exports.modes {
                    registry.insert(mode);
                }
                for evaluator in exports.evaluators {
                    registry.insert_evaluator(evaluator);
                }
                for executor in exports.executors {
                    registry.insert_executor(executor);
                }
                tracing::info!(file = %file.display(), plugin = %info.plugin_name, "plugin loaded");
            }
            Err(refusal) => reports[i].refuse(&refusal),
        }
    }
    for report in reports.iter().filter(|r| r.status == PluginStatus::Refused) {
        tracing::warn!(
            file = %report.file.display(),
            reason = report.reason.as_deref().unwrap_or_default(),
            "plugin refused"
        );
    }
    reports.into_iter().zip(hashes).collect()
}

/// Checks, probes and loads one file as discovery does, with the plugin's log records going to
/// `log`: what a plugin worker does with the one file it serves.
fn load_file_here(
    file: &Path,
    log: HostLogger,
    max_level: LogLevel,
) -> Result<(ManifestInfo, Exports), Refusal> {
    let (info, real) = probe::probe_file(file)?;
    probe::check_manifest(&info)?;
    let exports = load(file, &real, &info, log, max_level)?;
    Ok((info, exports))
}

/// Maps the library at `real` (the checked, resolved path of `file`) for good, checks it with
/// abi_stable and creates its modes, evaluators and executors; they name `file`, as the user
/// listed it, and the plugin logs through `log`.
fn load(
    file: &Path,
    real: &Path,
    info: &ManifestInfo,
    log: HostLogger,
    max_level: LogLevel,
) -> Result<Exports, Refusal> {
    let root = lib_header_from_path(real)
        .and_then(|header| header.init_root_module::<PluginRootRef>())
        .map_err(|e| abi_refusal(&e))?;
    (root.install_logger())(log, max_level);
    let new_mode = root.new_mode();
    let mut modes = Vec::with_capacity(info.modes.len());
    for (id, description) in &info.modes {
        match new_mode(RStr::from_str(id)) {
            RResult::ROk(inner) => modes.push(CustomMode {
                id: id.clone(),
                description: description.clone(),
                origin: ModeOrigin::Plugin {
                    file: file.to_path_buf(),
                    plugin: info.plugin_name.clone(),
                    version: info.plugin_version.clone(),
                },
                mode: Arc::new(PluginMode::new(id.clone(), info.plugin_name.clone(), inner)),
            }),
            RResult::RErr(err) => {
                return Err(Refusal::Constructor {
                    id: id.clone(),
                    message: err.message.into_string(),
                });
            }
        }
    }
    let mut exports = Exports {
        modes,
        ..Exports::default()
    };
    kinds::create(file, real, info, &mut exports)?;
    Ok(exports)
}

/// abi_stable's error, condensed to its first few differences for the one-line reason.
fn abi_refusal(err: &LibraryError) -> Refusal {
    let details = err.to_string();
    Refusal::Abi {
        summary: condense(&details),
        details,
    }
}

/// The first [`ABI_SUMMARY_ITEMS`] differences of abi_stable's report (thousands of lines for
/// a real mismatch), each as "what, where: expected X, found Y", joined into one line.
///
/// The report lists, for each nesting level, `N error(s)inside:` followed by the path of
/// fields down to the differing type, then `Error:<what>` with `Expected:` and `Found:` blocks.
pub(super) fn condense(report: &str) -> String {
    let lines: Vec<&str> = report
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let value = |l: &str| l.strip_prefix("field_name:").unwrap_or(l).to_string();
    let mut path: Vec<String> = Vec::new();
    let mut items: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() && items.len() < ABI_SUMMARY_ITEMS {
        let line = lines[i];
        if line.ends_with("error(s)inside:") && !line.starts_with("0 ") {
            path.clear();
            let mut j = i + 1;
            while j < lines.len() && !lines[j].starts_with("Layout of") {
                if let Some(field) = lines[j].strip_prefix("field_name:") {
                    let ty = lines
                        .get(j + 1)
                        .and_then(|l| l.strip_prefix("type:"))
                        .unwrap_or(field);
                    path.push(if field == "0" { ty } else { field }.to_string());
                }
                j += 1;
            }
            i = j;
            continue;
        }
        if let Some(what) = line.strip_prefix("Error:") {
            let after = |label: &str| {
                lines[i..]
                    .iter()
                    .position(|l| *l == label)
                    .and_then(|k| lines.get(i + k + 1))
                    .map(|l| value(l))
            };
            let mut item = what.trim().to_string();
            if !path.is_empty() {
                item.push_str(&format!(" at {}", path.join(".")));
            }
            if let (Some(expected), Some(found)) = (after("Expected:"), after("Found:")) {
                item.push_str(&format!(": expected `{expected}`, found `{found}`"));
            }
            items.push(item);
        }
        i += 1;
    }
    if items.is_empty() {
        // Not a layout report (a version mismatch, a missing symbol...): its first line.
        return lines
            .first()
            .map(|l| l.chars().take(200).collect())
            .unwrap_or_else(|| "abi_stable reported an incompatibility".to_string());
    }
    items.join("; ")
}

impl ModeRegistry {
    /// The linked modes plus every mode of every loadable plugin file in `dir`, and one report
    /// per plugin file (see the module docs for what is considered and checked). A directory
    /// that does not exist yields no reports; one that cannot be read yields a refused report
    /// for the directory itself.
    pub fn discover(dir: &Path) -> (ModeRegistry, Vec<PluginFileReport>) {
        ModeRegistry::discover_with(dir, &Isolation::InProcess)
    }

    /// [`ModeRegistry::discover`], with the plugin files loaded as `isolation` says.
    pub fn discover_with(
        dir: &Path,
        isolation: &Isolation,
    ) -> (ModeRegistry, Vec<PluginFileReport>) {
        ModeRegistry::discover_versions(dir, isolation, &mut PluginVersions::new())
    }

    /// [`ModeRegistry::discover_with`], loading each version of a file once through
    /// `versions` (a version already loaded gives its very modes again).
    pub(crate) fn discover_versions(
        dir: &Path,
        isolation: &Isolation,
        versions: &mut PluginVersions,
    ) -> (ModeRegistry, Vec<PluginFileReport>) {
        let (registry, found) = ModeRegistry::discover_hashed(dir, isolation, versions);
        (
            registry,
            found.into_iter().map(|(report, _)| report).collect(),
        )
    }

    /// [`ModeRegistry::discover_versions`], with the hash of the content each report is about.
    pub(super) fn discover_hashed(
        dir: &Path,
        isolation: &Isolation,
        versions: &mut PluginVersions,
    ) -> (ModeRegistry, Vec<(PluginFileReport, Option<u64>)>) {
        let mut registry = ModeRegistry::linked();
        let found = discover_into(&mut registry, dir, isolation, versions);
        (registry, found)
    }
}

/// Probes and loads one plugin file into this process as discovery does, the plugin logging
/// through `log`: what a plugin worker runs ([`Loader`](super::isolation::Loader)).
pub(crate) fn load_file(
    file: &Path,
    log: HostLogger,
    max_level: LogLevel,
) -> Result<(ManifestInfo, Exports), Refusal> {
    load_file_here(file, log, max_level)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn links_that_lead_nowhere_are_told_apart() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().expect("tempdir");
        let at = |name: &str| dir.path().join(name);
        fs::write(at("libreal.so"), "x").expect("write");
        symlink(at("libreal.so"), at("libgood.so")).expect("link");
        symlink(at("gone.so"), at("libdangling.so")).expect("link");
        symlink("libloop_b.so", at("libloop_a.so")).expect("link");
        symlink("libloop_a.so", at("libloop_b.so")).expect("link");
        assert_eq!(broken_link(&at("libreal.so")), None);
        assert_eq!(broken_link(&at("libgood.so")), None);
        assert_eq!(
            broken_link(&at("libdangling.so")),
            Some(Refusal::DanglingLink(at("gone.so")))
        );
        assert_eq!(broken_link(&at("libloop_a.so")), Some(Refusal::LinkLoop));
        // Each is a candidate, so that each is reported.
        let names: Vec<String> = candidates(dir.path())
            .expect("listed")
            .iter()
            .filter_map(|p| Some(p.file_name()?.to_str()?.to_string()))
            .collect();
        assert_eq!(
            names,
            [
                "libdangling.so",
                "libgood.so",
                "libloop_a.so",
                "libloop_b.so",
                "libreal.so"
            ]
        );
    }

    const REPORT: &str = "
Compared <this>:
    --- Type Layout ---
    type:PrefixRef<'a, PluginRoot>
0 error(s).
0 error(s)inside:
    <other>
    field_name:0
    type:PluginRoot
Layout of expected type:
    type:PluginRoot
2 error(s)inside:
    <other>
    field_name:0
    type:PluginRoot
    size:16 align:8
    field_name:new_mode
    type:AFunctionPointer
Layout of expected type:
    fn(id,: RStr<'a>)->RResult
Layout of found type:
    fn(id,buckets,: RStr<'a>, param_1: u32)->RResult
Error:unexpected field
Expected:
    field_name:id,
    type:RStr<'a>
Found:
    field_name:id,buckets,
    type:RStr<'a>
Error:unexpected field
Expected:
    field_name:__returns
Found:
    field_name:param_1
";

    #[test]
    fn condenses_a_layout_report_to_its_differences() {
        assert_eq!(
            condense(REPORT),
            "unexpected field at PluginRoot.new_mode: expected `id,`, found `id,buckets,`; \
             unexpected field at PluginRoot.new_mode: expected `__returns`, found `param_1`"
        );
    }

    fn manifest(modes: &[&str], evaluators: &[&str], executors: &[&str]) -> ManifestInfo {
        let listed = |ids: &[&str]| -> Vec<(String, String)> {
            ids.iter()
                .map(|id| (id.to_string(), String::new()))
                .collect()
        };
        ManifestInfo {
            sdk_version: flowscale_sdk::SDK_VERSION.to_string(),
            plugin_name: "p".into(),
            plugin_version: "1".into(),
            panic_unwind: true,
            modes: listed(modes),
            evaluators: listed(evaluators),
            executors: listed(executors),
        }
    }

    #[test]
    fn an_evaluator_or_executor_claimed_twice_refuses_both_files_and_names_its_kind() {
        let files: Vec<PathBuf> = ["/p/a.so", "/p/b.so", "/p/c.so"]
            .iter()
            .map(PathBuf::from)
            .collect();
        // a and b both export the evaluator `rate`; c exports a mode and an executor named
        // `rate` too, which is no conflict: each kind has its own ids.
        let (a, b, c) = (
            manifest(&["ma"], &["rate"], &[]),
            manifest(&["mb"], &["rate"], &["freeze"]),
            manifest(&["rate"], &[], &["rate"]),
        );
        let found = duplicates(
            &files,
            &[Some(&a), Some(&b), Some(&c)],
            &ModeRegistry::default(),
        );
        let reasons: Vec<Option<String>> = found
            .iter()
            .map(|r| r.as_ref().map(Refusal::to_string))
            .collect();
        assert_eq!(
            reasons,
            [
                Some(
                    "evaluator `rate` is also exported by `/p/b.so`; neither is loaded: remove or \
                     rename one of them"
                        .to_string()
                ),
                Some(
                    "evaluator `rate` is also exported by `/p/a.so`; neither is loaded: remove or \
                     rename one of them"
                        .to_string()
                ),
                None,
            ]
        );
        // An executor claimed by two files.
        let d = manifest(&[], &[], &["freeze"]);
        let found = duplicates(&files[1..], &[Some(&b), Some(&d)], &ModeRegistry::default());
        assert!(found.iter().all(|r| matches!(
            r,
            Some(Refusal::DuplicateKind { kind: "executor", id, .. }) if id == "freeze"
        )));
    }

    #[test]
    fn other_errors_keep_their_first_line() {
        assert_eq!(
            condense("\nIncompatible version numbers\n  more\n"),
            "Incompatible version numbers"
        );
    }
}
