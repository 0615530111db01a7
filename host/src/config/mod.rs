//! Reading fleet and job configuration: the TOML fleet file, flat Flink-style keys with their
//! prefixes and aliases, typed reads, and located diagnostics.

mod closest;
mod clusters;
#[cfg(test)]
mod clusters_tests;
mod duration;
mod errors;
mod fleet;
mod host_reload;
mod isolation;
mod job;
mod keys;
mod known;
mod lookup;
mod memory_size;
pub(crate) mod reference;
mod rest_url;
mod server_files;
pub(crate) mod spec;
#[cfg(test)]
pub(crate) mod test_certs;

pub(crate) use closest::closest;
pub(crate) use clusters::authorization;
pub use clusters::{ClusterAuth, ClusterSpec, SimClusterSpec};
pub(crate) use duration::{DurationError, format_duration, parse_duration};
pub(crate) use errors::{ConfigErrors, Diagnostic, KeyError};
pub(crate) use fleet::{
    DEFAULT_INTERVAL, DEFAULT_PLUGINS_DIR, FleetConfig, FleetReading, HostSettings, JobSpec,
    ListenError, check_listen, check_listen_token, load_fleet, parse_listen, read_fleet,
};
pub use fleet::{EngineSpec, parse_fleet};
#[cfg(test)]
pub(crate) use host_reload::HOST_KEYS_ON_RELOAD;
pub(crate) use host_reload::{OnReload, changed_host_keys, on_reload};
pub(crate) use isolation::{DEFAULT_PLUGIN_CALL_TIMEOUT, PluginIsolation};
pub use job::JobConfig;
pub(crate) use job::Origin;
pub(crate) use known::KeyPolicy;
pub(crate) use memory_size::parse_memory_size;
pub use server_files::TlsFiles;
pub(crate) use server_files::{load_tls_files, load_token_file};

/// The key whose location stands in for a mode parameter that was not written.
pub(crate) const MODE_KEY_FOR_LOCATION: &str = flowscale_sdk::MODE_KEY;
pub(crate) use lookup::{ConfigLookup, ConfigLookupExt};

/// A flat configuration map built from literal pairs, so tests of every layer that reads
/// configuration write their input the same way.
#[cfg(test)]
pub(crate) fn config_map(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
