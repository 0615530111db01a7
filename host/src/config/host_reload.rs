//! What a running host does with a `[host]` key changed in its fleet file: a few keys take effect
//! at once, the others are fixed when the host starts (the pool's threads, the server's socket,
//! the state store and its leases, the plugins directory and how plugins run), and a reload that
//! changes one of those says that it needs a restart instead of passing over it.

use super::fleet::HostSettings;

/// How a running host takes a changed `[host]` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnReload {
    /// From the reload on.
    Applied,
    /// At the next start: the running host keeps the value it started with.
    NeedsRestart,
}

/// Every `[host]` key with how a running host takes a change of it, in the order the keys are
/// documented.
pub(crate) const HOST_KEYS_ON_RELOAD: &[(&str, OnReload)] = &[
    ("interval", OnReload::Applied),
    ("api-token", OnReload::Applied),
    ("api-token-file", OnReload::Applied),
    ("plugins", OnReload::NeedsRestart),
    ("plugin-isolation", OnReload::NeedsRestart),
    ("plugin-call-timeout", OnReload::NeedsRestart),
    ("workers", OnReload::NeedsRestart),
    ("max-requests-per-cluster", OnReload::NeedsRestart),
    ("listen", OnReload::NeedsRestart),
    ("tls-cert-file", OnReload::NeedsRestart),
    ("tls-key-file", OnReload::NeedsRestart),
    ("listen-plaintext", OnReload::NeedsRestart),
    ("state-dir", OnReload::NeedsRestart),
    ("state", OnReload::NeedsRestart),
    ("id", OnReload::NeedsRestart),
    ("lease-ttl", OnReload::NeedsRestart),
];

/// How a running host takes a change of `key` (a key of [`HOST_KEYS_ON_RELOAD`]; any other one
/// is taken to need a restart).
pub(crate) fn on_reload(key: &str) -> OnReload {
    HOST_KEYS_ON_RELOAD
        .iter()
        .find(|(k, _)| *k == key)
        .map_or(OnReload::NeedsRestart, |(_, on)| *on)
}

/// The `[host]` keys whose values differ between `old` and `new`, in the order of
/// [`HOST_KEYS_ON_RELOAD`].
pub(crate) fn changed_host_keys(old: &HostSettings, new: &HostSettings) -> Vec<&'static str> {
    // Taken apart field by field, so that a new setting cannot be forgotten here.
    let HostSettings {
        plugins_dir,
        interval,
        state_dir,
        plugin_isolation,
        plugin_call_timeout,
        workers,
        max_requests_per_cluster,
        listen,
        api_token,
        api_token_file,
        tls,
        listen_plaintext,
        state_url,
        id,
        lease_ttl,
    } = old;
    let changed = [
        ("interval", *interval != new.interval),
        ("api-token", *api_token != new.api_token),
        ("api-token-file", *api_token_file != new.api_token_file),
        ("plugins", *plugins_dir != new.plugins_dir),
        (
            "plugin-isolation",
            *plugin_isolation != new.plugin_isolation,
        ),
        (
            "plugin-call-timeout",
            *plugin_call_timeout != new.plugin_call_timeout,
        ),
        ("workers", *workers != new.workers),
        (
            "max-requests-per-cluster",
            *max_requests_per_cluster != new.max_requests_per_cluster,
        ),
        ("listen", *listen != new.listen),
        (
            "tls-cert-file",
            tls.as_ref().map(|t| &t.cert) != new.tls.as_ref().map(|t| &t.cert),
        ),
        (
            "tls-key-file",
            tls.as_ref().map(|t| &t.key) != new.tls.as_ref().map(|t| &t.key),
        ),
        (
            "listen-plaintext",
            *listen_plaintext != new.listen_plaintext,
        ),
        ("state-dir", *state_dir != new.state_dir),
        ("state", *state_url != new.state_url),
        ("id", *id != new.id),
        ("lease-ttl", *lease_ttl != new.lease_ttl),
    ];
    changed
        .into_iter()
        .filter(|(_, changed)| *changed)
        .map(|(key, _)| key)
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::fleet::host_keys;
    use crate::config::parse_fleet;

    #[test]
    fn every_host_key_says_how_a_reload_takes_it() {
        let mut documented: Vec<&str> = HOST_KEYS_ON_RELOAD.iter().map(|(k, _)| *k).collect();
        let mut read: Vec<&str> = host_keys();
        documented.sort_unstable();
        read.sort_unstable();
        assert_eq!(documented, read);
    }

    #[test]
    fn a_change_of_one_key_is_that_key_alone() {
        let host = |text: &str| {
            parse_fleet(Path::new("fleet.toml"), &format!("[host]\n{text}\n"))
                .expect("a valid fleet")
                .host
        };
        let base = host("");
        assert!(changed_host_keys(&base, &base.clone()).is_empty());
        assert_eq!(
            changed_host_keys(&base, &host("workers = 3\nlisten = \"127.0.0.1:9464\"")),
            ["workers", "listen"]
        );
        assert_eq!(on_reload("workers"), OnReload::NeedsRestart);
        assert_eq!(on_reload("api-token"), OnReload::Applied);
    }
}
