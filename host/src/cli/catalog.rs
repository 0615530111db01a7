//! Which custom modes the commands can use: the plugins directory.

use std::path::{Path, PathBuf};

use crate::alignment::ModeCatalog;
use crate::config::DEFAULT_PLUGINS_DIR;
use crate::plugins::{ModeRegistry, PluginFileReport};

/// The plugins directory: `--plugins`, else the fleet's, else `plugins/` in the working directory.
pub fn plugins_dir(flag: Option<&Path>, from_fleet: Option<&Path>) -> PathBuf {
    flag.or(from_fleet)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_PLUGINS_DIR))
}

/// The modes linked into the binary and those of the loadable plugins in `dir`. Each refused
/// file is logged as a warning by discovery, and the others are used.
pub fn load_catalog(dir: &Path) -> Box<dyn ModeCatalog + Send + Sync> {
    load_catalog_with_reports(dir).0
}

/// [`load_catalog`], and what discovery found about each file (the `plugins --json` document).
pub fn load_catalog_with_reports(
    dir: &Path,
) -> (Box<dyn ModeCatalog + Send + Sync>, Vec<PluginFileReport>) {
    let (registry, reports) = ModeRegistry::discover(dir);
    (Box::new(registry), reports)
}
