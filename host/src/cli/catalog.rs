//! Which custom modes the commands can use: the plugins directory.

use std::path::{Path, PathBuf};

use crate::alignment::ModeCatalog;
use crate::plugins::{ModeRegistry, PluginStatus};

/// The plugins directory: `--plugins`, else the fleet's, else `plugins/` in the working directory.
pub fn plugins_dir(flag: Option<&Path>, from_fleet: Option<&Path>) -> PathBuf {
    flag.or(from_fleet)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("plugins"))
}

/// The modes linked into the binary and those of the loadable plugins in `dir`; each refused
/// file is reported on stderr and the others are used.
pub fn load_catalog(dir: &Path) -> Box<dyn ModeCatalog + Send + Sync> {
    let (registry, reports) = ModeRegistry::discover(dir);
    for report in reports {
        if report.status == PluginStatus::Refused {
            eprintln!(
                "warning: plugin {} refused: {}",
                report.file.display(),
                report.reason.as_deref().unwrap_or("no reason given")
            );
        }
    }
    Box::new(registry)
}
