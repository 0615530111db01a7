//! Reading fleet and job configuration: the TOML fleet file, flat Flink-style keys with their
//! prefixes and aliases, typed reads, and located diagnostics.

mod closest;
mod duration;
mod errors;
mod fleet;
mod isolation;
mod job;
mod keys;
mod known;
mod lookup;
mod rest_url;

pub use closest::{closest, typo_of};
pub use duration::{DurationError, DurationRange, MAX_DURATION, format_duration, parse_duration};
pub use errors::{ConfigErrors, Diagnostic, KeyError};
pub use fleet::{
    DEFAULT_INTERVAL, DEFAULT_LEASE_TTL, DEFAULT_MAX_REQUESTS_PER_CLUSTER, DEFAULT_PLUGINS_DIR,
    EngineSpec, FleetConfig, FleetReading, HostSettings, INTERVAL_RANGE, JobSpec, ListenError,
    MAX_REQUESTS_PER_CLUSTER, MAX_WORKERS, check_listen, load_fleet, parse_fleet, parse_fleet_with,
    parse_listen, read_fleet,
};
pub use isolation::{DEFAULT_PLUGIN_CALL_TIMEOUT, PluginIsolation, UnknownIsolation};
pub use job::{JobConfig, Origin};
pub use keys::{CanonicalKey, canonical_key};
pub use known::{KNOWN_KEYS, KeyPolicy, UnknownKey, check_key};
pub use rest_url::{RestUrlError, check_rest_url};

/// The key whose location stands in for a mode parameter that was not written.
pub const MODE_KEY_FOR_LOCATION: &str = flowscale_sdk::MODE_KEY;
pub use lookup::{ConfigLookup, ConfigLookupExt};
