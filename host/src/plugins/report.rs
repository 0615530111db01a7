//! What discovery says about each plugin file, for people (a table) and machines (JSON).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use flowscale_sdk::SDK_VERSION;
use flowscale_sdk::abi::ManifestError;
use serde::Serialize;

use super::ModeRegistry;

/// Whether a plugin file's modes were registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginStatus {
    /// Every mode of the file is registered.
    Loaded,
    /// None of the file's modes is registered; `reason` says why.
    Refused,
}

/// One mode as listed in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModeSummary {
    /// The implementation id.
    pub id: String,
    /// The one-line description.
    pub description: String,
}

/// The outcome for one plugin file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginFileReport {
    /// The file.
    pub file: PathBuf,
    /// Loaded or refused.
    pub status: PluginStatus,
    /// Why it was refused and what to do (None when loaded).
    pub reason: Option<String>,
    /// The plugin's name, when its manifest could be read.
    pub plugin: Option<String>,
    /// The plugin's version, when its manifest could be read.
    pub version: Option<String>,
    /// The SDK version it was built against, when its manifest could be read.
    pub sdk_version: Option<String>,
    /// The modes it exports (from its manifest), loaded or not.
    pub modes: Vec<ModeSummary>,
    /// The full text behind a condensed reason (abi_stable's layout report), for `--verbose`.
    #[serde(skip)]
    pub details: Option<String>,
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
    /// The file or its directory is writable by group or others.
    #[error(
        "{what} `{}` is writable by group or others (mode {mode:o}): anyone could inject code into \
         the host; run `chmod go-w {}`", path.display(), path.display()
    )]
    Writable {
        /// "file" or "directory".
        what: &'static str,
        /// The writable path.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file's metadata or the directory could not be read.
    #[error("cannot read it: {0}")]
    Unreadable(String),
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
    /// The manifest lists no modes.
    #[error("exports no modes; list them in `flowscale_sdk::export_plugin!`")]
    NoModes,
    /// An implementation id that is empty or contains whitespace.
    #[error("implementation id {0:?} is not valid (non-empty, no whitespace); rename it")]
    InvalidId(String),
    /// An implementation id that is a built-in mode name.
    #[error("implementation id `{0}` is a reserved built-in mode name; rename it")]
    Reserved(String),
    /// The same id twice in one file.
    #[error("exports implementation id `{0}` twice; rename one of them")]
    DuplicateInFile(String),
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
    fn details(&self) -> Option<&str> {
        match self {
            Refusal::Abi { details, .. } => Some(details),
            _ => None,
        }
    }
}

fn dash(value: Option<&str>) -> &str {
    value.filter(|v| !v.is_empty()).unwrap_or("-")
}

fn file_label(report: &PluginFileReport) -> String {
    report
        .file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| report.file.display().to_string())
}

/// Writes the reports as a table: one row per file, then its modes and, when refused, why.
pub fn write_table(
    dir: &Path,
    registry: &ModeRegistry,
    reports: &[PluginFileReport],
    verbose: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out, "plugins directory: {}", dir.display())?;
    if reports.is_empty() {
        writeln!(
            out,
            "no plugin files (*.{})",
            std::env::consts::DLL_EXTENSION
        )?;
    } else {
        let headers = ["FILE", "STATUS", "PLUGIN", "VERSION", "SDK", "MODES"];
        let rows: Vec<[String; 6]> = reports
            .iter()
            .map(|r| {
                let modes: Vec<&str> = r.modes.iter().map(|m| m.id.as_str()).collect();
                [
                    file_label(r),
                    match r.status {
                        PluginStatus::Loaded => "loaded".into(),
                        PluginStatus::Refused => "refused".into(),
                    },
                    dash(r.plugin.as_deref()).into(),
                    dash(r.version.as_deref()).into(),
                    dash(r.sdk_version.as_deref()).into(),
                    if modes.is_empty() {
                        "-".into()
                    } else {
                        modes.join(", ")
                    },
                ]
            })
            .collect();
        let mut widths = headers.map(str::len);
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: [&str; 6]| {
            let mut text = String::new();
            for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
                if i + 1 == cells.len() {
                    text.push_str(cell);
                } else {
                    text.push_str(&format!("{cell:<w$}  "));
                }
            }
            text
        };
        writeln!(out, "{}", line(headers))?;
        for (row, report) in rows.iter().zip(reports) {
            writeln!(out, "{}", line(row.each_ref().map(String::as_str)))?;
            for mode in &report.modes {
                writeln!(out, "    {}: {}", mode.id, mode.description)?;
            }
            if let Some(reason) = &report.reason {
                writeln!(out, "    refused: {reason}")?;
            }
            if verbose {
                if let Some(details) = &report.details {
                    for l in details.lines() {
                        writeln!(out, "      {l}")?;
                    }
                }
            }
        }
    }
    let linked: Vec<&str> = registry
        .modes()
        .filter(|m| m.origin == super::ModeOrigin::Linked)
        .map(|m| m.id.as_str())
        .collect();
    if !linked.is_empty() {
        writeln!(out, "linked modes: {}", linked.join(", "))?;
    }
    Ok(())
}

/// `flowscale plugins`: discovers `dir` and writes a table (or, with `json`, one JSON array with
/// one object per plugin file) to `out`. Returns whether any file was refused.
pub fn run_plugins_command(dir: &Path, json: bool, out: &mut dyn Write) -> io::Result<bool> {
    run_plugins_command_verbose(dir, json, false, out)
}

/// [`run_plugins_command`], with `verbose` adding abi_stable's full report under a layout
/// refusal in the table.
pub fn run_plugins_command_verbose(
    dir: &Path,
    json: bool,
    verbose: bool,
    out: &mut dyn Write,
) -> io::Result<bool> {
    let (registry, reports) = ModeRegistry::discover(dir);
    if json {
        serde_json::to_writer_pretty(&mut *out, &reports).map_err(io::Error::other)?;
        writeln!(out)?;
    } else {
        write_table(dir, &registry, &reports, verbose, out)?;
    }
    Ok(reports.iter().any(|r| r.status == PluginStatus::Refused))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(status: PluginStatus, reason: Option<&str>) -> PluginFileReport {
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
            details: None,
        }
    }

    #[test]
    fn json_shape_is_the_documented_one() {
        let value = serde_json::to_value(vec![
            report(PluginStatus::Loaded, None),
            PluginFileReport::refused(Path::new("/p/x.so"), &Refusal::NoManifest),
        ])
        .unwrap();
        assert_eq!(value[0]["status"], "loaded");
        assert_eq!(value[0]["reason"], serde_json::Value::Null);
        assert_eq!(value[0]["modes"][0]["id"], "demo");
        assert_eq!(value[0]["modes"][0]["description"], "does things");
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

    #[test]
    fn table_lists_modes_and_reasons() {
        let mut out = Vec::new();
        let reports = vec![
            report(PluginStatus::Loaded, None),
            report(PluginStatus::Refused, Some("built with panic = \"abort\"")),
        ];
        write_table(
            Path::new("/p"),
            &ModeRegistry::default(),
            &reports,
            false,
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("FILE"));
        assert!(text.contains("libdemo.so"));
        assert!(text.contains("    demo: does things"));
        assert!(text.contains("    refused: built with panic"));
        assert!(
            text.lines()
                .any(|l| l.contains("loaded") && l.contains("1.0.0"))
        );
    }
}
