//! Which custom modes the commands can use: the plugins directory.

use std::path::{Path, PathBuf};

use crate::config::{
    DEFAULT_PLUGIN_CALL_TIMEOUT, DEFAULT_PLUGINS_DIR, HostSettings, PluginIsolation,
};
use crate::plan::PluginCatalog;
use crate::plugins::{Isolation, ModeRegistry};

/// The plugins directory: `--plugins`, else the fleet's, else `plugins/` in the working directory.
pub(super) fn plugins_dir(flag: Option<&Path>, from_fleet: Option<&Path>) -> PathBuf {
    flag.or(from_fleet)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_PLUGINS_DIR))
}

/// Where plugins run: `--plugin-isolation`, else the fleet's `[host] plugin-isolation`, else
/// in-process; calls are bounded by the fleet's `plugin-call-timeout` (default 1s).
pub(super) fn isolation(flag: Option<PluginIsolation>, host: Option<&HostSettings>) -> Isolation {
    let chosen = flag
        .or(host.map(|h| h.plugin_isolation))
        .unwrap_or_default();
    let timeout = host.map_or(DEFAULT_PLUGIN_CALL_TIMEOUT, |h| h.plugin_call_timeout);
    Isolation::from_settings(chosen, timeout)
}

/// The modes linked into the binary and those of the loadable plugins in `dir`, loaded as
/// `isolation` says. Each refused file is logged as a warning by discovery, and the others are
/// used.
pub(super) fn load_catalog_isolated(
    dir: &Path,
    isolation: &Isolation,
) -> Box<dyn PluginCatalog + Send + Sync> {
    let (registry, _reports) = ModeRegistry::discover_with(dir, isolation);
    Box::new(registry)
}
