//! Scanning a plugins directory: probe every candidate, settle duplicate ids across files, then
//! load the survivors with abi_stable and register their modes.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use abi_stable::library::{LibraryError, lib_header_from_path};
use abi_stable::std_types::{RResult, RStr};
use flowscale_sdk::abi::{ManifestInfo, PluginRootRef};

use super::mode::PluginMode;
use super::report::{ModeSummary, PluginFileReport, PluginStatus, Refusal};
use super::{ModeRegistry, logger, probe};
use crate::alignment::{CustomMode, ModeOrigin};

/// How many differences of abi_stable's layout report the one-line reason keeps.
const ABI_SUMMARY_ITEMS: usize = 3;

/// The plugin files of `dir`, sorted by name: regular files (after following links) with the
/// platform's shared-library extension.
fn candidates(dir: &Path) -> Result<Vec<PathBuf>, std::io::Error> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let is_library = path
            .extension()
            .is_some_and(|ext| ext == std::env::consts::DLL_EXTENSION);
        if is_library && path.is_file() {
            files.push(path);
        } else {
            tracing::debug!(file = %path.display(), "not a plugin file; ignored");
        }
    }
    files.sort();
    Ok(files)
}

fn report_for(file: &Path, info: &ManifestInfo) -> PluginFileReport {
    PluginFileReport {
        file: file.to_path_buf(),
        status: PluginStatus::Loaded,
        reason: None,
        plugin: Some(info.plugin_name.clone()),
        version: Some(info.plugin_version.clone()),
        sdk_version: Some(info.sdk_version.clone()),
        modes: info
            .modes
            .iter()
            .map(|(id, description)| ModeSummary {
                id: id.clone(),
                description: description.clone(),
            })
            .collect(),
        details: None,
    }
}

pub(super) fn discover_into(registry: &mut ModeRegistry, dir: &Path) -> Vec<PluginFileReport> {
    let files = match candidates(dir) {
        Ok(files) => files,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!(dir = %dir.display(), "no plugins directory");
            return Vec::new();
        }
        Err(e) => {
            return vec![PluginFileReport::refused(
                dir,
                &Refusal::Unreadable(e.to_string()),
            )];
        }
    };
    let dir_refusal = probe::check_not_writable("directory", dir).err();

    // 1. Probe every file on its own.
    let mut reports = Vec::with_capacity(files.len());
    let mut manifests: Vec<Option<ManifestInfo>> = Vec::with_capacity(files.len());
    for file in &files {
        let probed = match &dir_refusal {
            Some(refusal) => Err(refusal.clone()),
            None => probe::precheck(file).and_then(|()| probe::read_manifest(file)),
        };
        match probed {
            Ok(info) => {
                let mut report = report_for(file, &info);
                match probe::check_manifest(&info) {
                    Ok(()) => manifests.push(Some(info)),
                    Err(refusal) => {
                        report.refuse(&refusal);
                        manifests.push(None);
                    }
                }
                reports.push(report);
            }
            Err(refusal) => {
                reports.push(PluginFileReport::refused(file, &refusal));
                manifests.push(None);
            }
        }
    }

    // 2. An id claimed by two files (or by a file and a linked mode) goes to nobody.
    let mut claims: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, info) in manifests.iter().enumerate() {
        for (id, _) in info.iter().flat_map(|m| &m.modes) {
            claims.entry(id.as_str()).or_default().push(i);
        }
    }
    let mut duplicate: Vec<Option<Refusal>> = vec![None; files.len()];
    for (id, claimants) in &claims {
        for &i in claimants {
            if duplicate[i].is_some() {
                continue;
            }
            let other = if registry.contains(id) {
                Some("a mode linked into flowscale".to_string())
            } else {
                claimants
                    .iter()
                    .find(|&&j| j != i)
                    .map(|&j| format!("`{}`", files[j].display()))
            };
            if let Some(other) = other {
                duplicate[i] = Some(Refusal::Duplicate {
                    id: id.to_string(),
                    other,
                });
            }
        }
    }

    // 3. Load what is left.
    for (i, file) in files.iter().enumerate() {
        let Some(info) = &manifests[i] else { continue };
        let outcome = match &duplicate[i] {
            Some(refusal) => Err(refusal.clone()),
            None => load(file, info),
        };
        match outcome {
            Ok(modes) => {
                for mode in modes {
                    registry.insert(mode);
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
    reports
}

/// Maps the library for good, checks it with abi_stable and creates its modes.
fn load(file: &Path, info: &ManifestInfo) -> Result<Vec<CustomMode>, Refusal> {
    let root = lib_header_from_path(file)
        .and_then(|header| header.init_root_module::<PluginRootRef>())
        .map_err(|e| abi_refusal(&e))?;
    (root.install_logger())(logger::host_logger(), logger::max_level());
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
    Ok(modes)
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn other_errors_keep_their_first_line() {
        assert_eq!(
            condense("\nIncompatible version numbers\n  more\n"),
            "Incompatible version numbers"
        );
    }
}
