//! What discovery says about each plugin file: loaded, or refused and why. `flowscale plugins`
//! prints these reports; their JSON form is the one it writes.

use std::path::{Path, PathBuf};

use flowscale_sdk::SDK_VERSION;
use flowscale_sdk::abi::ManifestError;
use serde::Serialize;

use super::trust::Distrust;

/// Whether a plugin file's modes were registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginStatus {
    /// Every mode of the file is registered.
    Loaded,
    /// None of the file's modes is registered; `reason` says why.
    Refused,
}

/// One mode, metric evaluator or scaling executor as listed in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ModeSummary {
    /// The implementation id.
    pub(crate) id: String,
    /// The one-line description.
    pub(crate) description: String,
}

/// The outcome for one plugin file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginFileReport {
    /// The file.
    pub(crate) file: PathBuf,
    /// Loaded or refused.
    pub status: PluginStatus,
    /// Why it was refused and what to do (None when loaded).
    pub(crate) reason: Option<String>,
    /// The plugin's name, when its manifest could be read.
    pub(crate) plugin: Option<String>,
    /// The plugin's version, when its manifest could be read.
    pub(crate) version: Option<String>,
    /// The SDK version it was built against, when its manifest could be read.
    pub(crate) sdk_version: Option<String>,
    /// The modes it exports (from its manifest), loaded or not.
    pub(crate) modes: Vec<ModeSummary>,
    /// The metric evaluators it exports (from its kinds table, SDK 0.1.3), loaded or not.
    pub(crate) evaluators: Vec<ModeSummary>,
    /// The scaling executors it exports (from its kinds table), loaded or not.
    pub(crate) executors: Vec<ModeSummary>,
    /// The full text behind a condensed reason (abi_stable's layout report), for `--verbose`.
    #[serde(skip)]
    pub(crate) details: Option<String>,
}

impl PluginFileReport {
    pub(super) fn refused(file: &Path, refusal: &Refusal) -> PluginFileReport {
        PluginFileReport {
            file: file.to_path_buf(),
            status: PluginStatus::Refused,
            reason: Some(refusal.to_string()),
            plugin: None,
            version: None,
            sdk_version: None,
            modes: Vec::new(),
            evaluators: Vec::new(),
            executors: Vec::new(),
            details: refusal.details().map(str::to_string),
        }
    }

    pub(super) fn refuse(&mut self, refusal: &Refusal) {
        self.status = PluginStatus::Refused;
        self.reason = Some(refusal.to_string());
        self.details = refusal.details().map(str::to_string);
    }
}

/// Why a plugin file was refused. Each message says what is wrong and what to do; the report
/// line names the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The file, a directory on its path or one holding a link to it can be changed by someone
    /// other than root and the host's user (see `trust`).
    #[error(transparent)]
    Untrusted(#[from] Distrust),
    /// The file's metadata or the directory could not be read.
    #[error("cannot read it: {0}")]
    Unreadable(String),
    /// A symbolic link whose target does not exist.
    #[error(
        "dangling symbolic link to `{}`: its target does not exist; fix the link or remove it",
        .0.display()
    )]
    DanglingLink(PathBuf),
    /// Symbolic links that lead back to one another.
    #[error(
        "symbolic link loop: following the link never reaches a file; fix the link or remove it"
    )]
    LinkLoop,
    /// The host has loaded as many plugin versions as it keeps (libraries are never unloaded).
    #[error(
        "not loaded: this host already keeps {limit} plugin versions (a library is never \
         unloaded); restart the host to load new versions"
    )]
    TooManyVersions {
        /// [`MAX_LOADED_VERSIONS`](super::MAX_LOADED_VERSIONS).
        limit: usize,
    },
    /// `dlopen` failed.
    #[error("not a loadable shared library ({0}); build plugins as a `cdylib` for this platform")]
    NotLoadable(String),
    /// A shared library without a flowscale manifest.
    #[error(
        "no flowscale manifest: not a flowscale plugin (or not built with \
         `flowscale_sdk::export_plugin!`); remove it from the plugins directory"
    )]
    NoManifest,
    /// A manifest the host cannot read.
    #[error("{0}; rebuild the plugin against flowscale-sdk {SDK_VERSION}")]
    BadManifest(ManifestError),
    /// Built against an incompatible SDK.
    #[error(
        "built against flowscale-sdk {plugin}, this host uses {SDK_VERSION}; rebuild the plugin \
         against flowscale-sdk {SDK_VERSION}"
    )]
    SdkVersion {
        /// The plugin's SDK version.
        plugin: String,
    },
    /// Built with `panic = "abort"`.
    #[error(
        "built with panic = \"abort\": a panic in it would kill the host; rebuild it with \
         panic = \"unwind\" (the default)"
    )]
    PanicAbort,
    /// The manifest lists no modes, and the kinds table no evaluators or executors.
    #[error(
        "exports no modes, metric evaluators or scaling executors; list them in \
         `flowscale_sdk::export_plugin!`"
    )]
    NoModes,
    /// An implementation id that is empty or contains whitespace.
    #[error("implementation id {0:?} is not valid (non-empty, no whitespace); rename it")]
    InvalidId(String),
    /// An implementation id of an evaluator or executor that is empty or contains whitespace.
    #[error("{kind} id {id:?} is not valid (non-empty, no whitespace); rename it")]
    InvalidKindId {
        /// "evaluator" or "executor".
        kind: &'static str,
        /// The id.
        id: String,
    },
    /// An implementation id that is a built-in mode name.
    #[error("implementation id `{0}` is a reserved built-in mode name; rename it")]
    Reserved(String),
    /// The same id twice in one file.
    #[error("exports implementation id `{0}` twice; rename one of them")]
    DuplicateInFile(String),
    /// The same evaluator or executor id twice in one file.
    #[error("exports {kind} `{id}` twice; rename one of them")]
    DuplicateKindInFile {
        /// "evaluator" or "executor".
        kind: &'static str,
        /// The id.
        id: String,
    },
    /// In `process` isolation: the file's worker could not be started or refused the file.
    #[error("{0}")]
    Worker(String),
    /// The same id in another file or among the linked modes.
    #[error(
        "implementation id `{id}` is also exported by {other}; neither is loaded: remove or \
         rename one of them"
    )]
    Duplicate {
        /// The contested id.
        id: String,
        /// The other claimant (a file, or "a mode linked into flowscale").
        other: String,
    },
    /// The same evaluator or executor id in another file or among the linked ones.
    #[error(
        "{kind} `{id}` is also exported by {other}; neither is loaded: remove or rename one of \
         them"
    )]
    DuplicateKind {
        /// "evaluator" or "executor".
        kind: &'static str,
        /// The contested id.
        id: String,
        /// The other claimant (a file, or "an evaluator linked into flowscale").
        other: String,
    },
    /// abi_stable's version or layout check failed.
    #[error(
        "ABI check failed: {summary}; rebuild the plugin against flowscale-sdk {SDK_VERSION} \
         (--verbose shows the full report)"
    )]
    Abi {
        /// The first differences.
        summary: String,
        /// abi_stable's whole report.
        details: String,
    },
    /// The kinds table lists an evaluator or executor the plugin cannot create.
    #[error("{kind} `{id}` could not be created: {message}")]
    KindConstructor {
        /// "evaluator" or "executor".
        kind: &'static str,
        /// The implementation id.
        id: String,
        /// The plugin's error.
        message: String,
    },
    /// The manifest lists a mode the root module cannot create.
    #[error("mode `{id}` could not be created: {message}")]
    Constructor {
        /// The implementation id.
        id: String,
        /// The plugin's error.
        message: String,
    },
}

impl Refusal {
    pub(in crate::plugins) fn details(&self) -> Option<&str> {
        match self {
            Refusal::Abi { details, .. } => Some(details),
            _ => None,
        }
    }
}

#[cfg(test)]
impl PluginFileReport {
    /// The report of a plugin `demo` 1.0.0 in `/p/libdemo.so` that exports the mode `demo`.
    pub(crate) fn demo(status: PluginStatus, reason: Option<&str>) -> PluginFileReport {
        PluginFileReport {
            file: PathBuf::from("/p/libdemo.so"),
            status,
            reason: reason.map(str::to_string),
            plugin: Some("demo".into()),
            version: Some("1.0.0".into()),
            sdk_version: Some("0.1.0".into()),
            modes: vec![ModeSummary {
                id: "demo".into(),
                description: "does things".into(),
            }],
            evaluators: Vec::new(),
            executors: Vec::new(),
            details: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shape_is_the_documented_one() {
        let value = serde_json::to_value(vec![
            PluginFileReport::demo(PluginStatus::Loaded, None),
            PluginFileReport::refused(Path::new("/p/x.so"), &Refusal::NoManifest),
        ])
        .unwrap();
        assert_eq!(value[0]["status"], "loaded");
        assert_eq!(value[0]["reason"], serde_json::Value::Null);
        assert_eq!(value[0]["modes"][0]["id"], "demo");
        assert_eq!(value[0]["modes"][0]["description"], "does things");
        assert_eq!(value[0]["evaluators"], serde_json::json!([]));
        assert_eq!(value[0]["executors"], serde_json::json!([]));
        assert_eq!(value[1]["status"], "refused");
        assert_eq!(value[1]["plugin"], serde_json::Value::Null);
        assert!(
            value[1]["reason"]
                .as_str()
                .unwrap()
                .contains("no flowscale manifest")
        );
        assert!(value[1].get("details").is_none());
    }
}

/// What `flowscale plugins --json` prints: every plugin file's report, and how many plugin
/// versions the process keeps loaded (libraries are never unloaded, so a host that reloads
/// plugins while it runs counts each version, up to a limit).
#[derive(Debug, Clone, serde::Serialize)]
pub struct PluginListing {
    /// The plugins directory.
    pub(crate) directory: std::path::PathBuf,
    /// One report per plugin file, in file-name order.
    pub(crate) files: Vec<PluginFileReport>,
    /// Plugin libraries loaded by this process (every version, refused ones included).
    pub(crate) versions_loaded: usize,
    /// [`MAX_LOADED_VERSIONS`](super::MAX_LOADED_VERSIONS).
    pub(crate) version_limit: usize,
}
