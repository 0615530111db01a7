//! How plugin modes are run: inside the host, or each plugin file in a worker process of its
//! own (`[host] plugin-isolation`, `--plugin-isolation`), and how long one call may take.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Default deadline of one call into a plugin (`[host] plugin-call-timeout`).
pub(crate) const DEFAULT_PLUGIN_CALL_TIMEOUT: Duration =
    super::reference::HOST_PLUGIN_CALL_TIMEOUT.default_or_zero();

/// Where plugin code runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum PluginIsolation {
    /// Plugins are loaded into the host: the cheapest call, but a plugin that crashes takes
    /// the host with it.
    #[default]
    InProcess,
    /// Each plugin file is served by a worker process: a crash or a hang costs one decision of
    /// the jobs that use it, not the host.
    Process,
}

impl PluginIsolation {
    /// The name as written in the fleet file and on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            PluginIsolation::InProcess => "in-process",
            PluginIsolation::Process => "process",
        }
    }
}

impl fmt::Display for PluginIsolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A value other than `in-process` or `process`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown plugin isolation `{0}` (valid: in-process, process)")]
pub(crate) struct UnknownIsolation(pub String);

impl FromStr for PluginIsolation {
    type Err = UnknownIsolation;
    fn from_str(text: &str) -> Result<PluginIsolation, UnknownIsolation> {
        match text.trim() {
            "in-process" => Ok(PluginIsolation::InProcess),
            "process" => Ok(PluginIsolation::Process),
            other => Err(UnknownIsolation(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_names_and_refuses_others() {
        assert_eq!("process".parse(), Ok(PluginIsolation::Process));
        assert_eq!(" in-process ".parse(), Ok(PluginIsolation::InProcess));
        let err = "inprocess".parse::<PluginIsolation>().unwrap_err();
        assert!(err.to_string().contains("valid: in-process, process"));
        assert_eq!(PluginIsolation::default().to_string(), "in-process");
    }
}
