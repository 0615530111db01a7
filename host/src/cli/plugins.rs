//! `flowscale plugins`: what is in the plugins directory and whether it loads.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::catalog::plugins_dir;
use super::exit_codes;
use super::json_out::write_json;
use crate::plugins::{
    Isolation, MAX_LOADED_VERSIONS, ModeOrigin, ModeRegistry, PluginFileReport, PluginListing,
    PluginStatus, PluginVersions,
};

/// Arguments of `flowscale plugins`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct PluginsArgs {
    /// The plugins directory.
    #[arg(long, value_name = "DIR", env = "FLOWSCALE_PLUGINS_DIR")]
    pub(crate) plugins: Option<PathBuf>,
    /// Print one JSON object: the directory, one report per plugin file (`files`), and the
    /// plugin versions loaded.
    #[arg(long)]
    pub(crate) json: bool,
    /// Show abi_stable's full report under a layout refusal.
    #[arg(long)]
    pub(crate) verbose: bool,
}

impl PluginsArgs {
    /// The directory to scan.
    pub(crate) fn dir(&self) -> PathBuf {
        plugins_dir(self.plugins.as_deref(), None)
    }
}

/// Runs `flowscale plugins`. Exit code 0 when every plugin file loaded, 1 when one was refused
/// (the listing is still complete) or the listing could not be written.
pub(crate) fn exec(args: PluginsArgs) -> u8 {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match write_listing(&args.dir(), args.json, args.verbose, &mut out)
        .and_then(|refused| out.flush().map(|()| refused))
    {
        Ok(false) => exit_codes::OK,
        Ok(true) => exit_codes::FAILED,
        Err(e) => {
            eprintln!("error: cannot write the plugin listing: {e}");
            exit_codes::FAILED
        }
    }
}

/// Discovers `dir` and writes a table (or, with `json`, one [`PluginListing`] object) to `out`; `verbose` adds abi_stable's full report under a layout refusal in the
/// table. Returns whether any file was refused.
pub(crate) fn write_listing(
    dir: &Path,
    json: bool,
    verbose: bool,
    out: &mut dyn Write,
) -> io::Result<bool> {
    let mut versions = PluginVersions::new();
    let (registry, reports) =
        ModeRegistry::discover_versions(dir, &Isolation::InProcess, &mut versions);
    if json {
        let listing = PluginListing {
            directory: dir.to_path_buf(),
            files: reports.clone(),
            versions_loaded: versions.loaded_versions(),
            version_limit: MAX_LOADED_VERSIONS,
        };
        write_json(out, &listing)?;
    } else {
        write_table(dir, &registry, &reports, verbose, out)?;
    }
    Ok(reports.iter().any(|r| r.status == PluginStatus::Refused))
}

/// Writes the reports as a table: one row per file, then its modes and, when refused, why;
/// last, the modes, evaluators and executors linked into the binary.
fn write_table(
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
        write_files(reports, verbose, out)?;
    }
    let modes = registry.modes().map(|m| (m.id.as_str(), &m.origin));
    let evaluators = registry.evaluators().map(|e| (e.id(), &e.origin));
    let executors = registry.executors().map(|x| (x.id(), &x.origin));
    write_linked("modes", modes, out)?;
    write_linked("evaluators", evaluators, out)?;
    write_linked("executors", executors, out)
}

/// The line `linked <kind>: <ids>` of the objects of one kind compiled into the binary, from
/// `objects` (implementation id and origin); nothing when there is none.
fn write_linked<'a>(
    kind: &str,
    objects: impl Iterator<Item = (&'a str, &'a ModeOrigin)>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let linked: Vec<&str> = objects
        .filter(|(_, origin)| **origin == ModeOrigin::Linked)
        .map(|(id, _)| id)
        .collect();
    if !linked.is_empty() {
        writeln!(out, "linked {kind}: {}", linked.join(", "))?;
    }
    Ok(())
}

const HEADERS: [&str; 6] = ["FILE", "STATUS", "PLUGIN", "VERSION", "SDK", "MODES"];

/// The table's header and one row per file, each followed by the file's modes and refusal.
fn write_files(reports: &[PluginFileReport], verbose: bool, out: &mut dyn Write) -> io::Result<()> {
    let rows: Vec<[String; 6]> = reports.iter().map(row).collect();
    let mut widths = HEADERS.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    writeln!(out, "{}", aligned(HEADERS, widths))?;
    for (row, report) in rows.iter().zip(reports) {
        writeln!(
            out,
            "{}",
            aligned(row.each_ref().map(String::as_str), widths)
        )?;
        for mode in &report.modes {
            writeln!(out, "    {}: {}", mode.id, mode.description)?;
        }
        for evaluator in &report.evaluators {
            writeln!(
                out,
                "    evaluator {}: {}",
                evaluator.id, evaluator.description
            )?;
        }
        for executor in &report.executors {
            writeln!(
                out,
                "    executor {}: {}",
                executor.id, executor.description
            )?;
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
    Ok(())
}

/// One file's cells, in the order of [`HEADERS`].
fn row(report: &PluginFileReport) -> [String; 6] {
    let modes: Vec<&str> = report.modes.iter().map(|m| m.id.as_str()).collect();
    [
        file_label(report),
        match report.status {
            PluginStatus::Loaded => "loaded".into(),
            PluginStatus::Refused => "refused".into(),
        },
        dash(report.plugin.as_deref()).into(),
        dash(report.version.as_deref()).into(),
        dash(report.sdk_version.as_deref()).into(),
        if modes.is_empty() {
            "-".into()
        } else {
            modes.join(", ")
        },
    ]
}

/// The cells padded to their column's width, two spaces apart; the last one is not padded.
fn aligned(cells: [&str; 6], widths: [usize; 6]) -> String {
    let mut text = String::new();
    for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
        if i + 1 == cells.len() {
            text.push_str(cell);
        } else {
            text.push_str(&format!("{cell:<w$}  "));
        }
    }
    text
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lists_modes_and_reasons() {
        let mut out = Vec::new();
        let reports = vec![
            PluginFileReport::demo(PluginStatus::Loaded, None),
            PluginFileReport::demo(PluginStatus::Refused, Some("built with panic = \"abort\"")),
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

    struct Nothing;

    impl flowscale_sdk::MetricEvaluator for Nothing {
        fn evaluate(
            &self,
            _: &flowscale_sdk::EvaluatorContext,
        ) -> Result<flowscale_sdk::VertexMetrics, flowscale_sdk::ModeError> {
            Ok(Vec::new())
        }
    }

    impl flowscale_sdk::ScalingExecutor for Nothing {
        fn apply(
            &self,
            ctx: &flowscale_sdk::ExecutorContext,
        ) -> Result<flowscale_sdk::ExecutorVerdict, flowscale_sdk::ModeError> {
            Ok(flowscale_sdk::ExecutorVerdict::Apply(
                ctx.summaries().to_vec(),
            ))
        }
    }

    /// Evaluators and executors compiled into the binary are listed as its modes are, each
    /// kind on a line of its own, sorted by id.
    #[test]
    fn table_lists_the_linked_evaluators_and_executors_like_the_linked_modes() {
        use std::sync::Arc;

        use crate::scaling::{CustomEvaluator, CustomExecutor};

        let mut registry = ModeRegistry::default();
        for id in ["queue-rate", "lag-rate"] {
            registry.insert_evaluator(CustomEvaluator::linked(id, "", Arc::new(Nothing)));
        }
        registry.insert_executor(CustomExecutor::linked("budget", "", Arc::new(Nothing)));
        let mut out = Vec::new();
        write_table(Path::new("/p"), &registry, &[], false, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines.contains(&"linked evaluators: lag-rate, queue-rate"),
            "{text}"
        );
        assert!(lines.contains(&"linked executors: budget"), "{text}");
        assert!(!text.contains("linked modes"), "no linked mode: {text}");
    }
}
