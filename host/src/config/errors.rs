//! Configuration problems: what is wrong with a key, and where it is (file, line and key path).

use std::fmt;

/// One problem (or warning) in a configuration, located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// `file:line: path`, or the path alone when there is no file.
    pub(crate) location: String,
    /// What is wrong and what would be valid.
    pub(crate) message: String,
}

impl Diagnostic {
    /// A located message.
    pub(crate) fn new(location: impl Into<String>, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            location: location.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.location.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.location, self.message)
        }
    }
}

/// Every problem found in a configuration, reported at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<Diagnostic>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.0.len();
        writeln!(
            f,
            "{count} configuration error{}:",
            if count == 1 { "" } else { "s" }
        )?;
        for diagnostic in &self.0 {
            writeln!(f, "  {diagnostic}")?;
        }
        Ok(())
    }
}

/// A configuration problem of one key: an option set to a value it cannot take, a mode that
/// cannot be resolved, a malformed ADVANCED step. Every reader of job configuration reports with
/// it, so that callers locate and print all of them the same way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{key}`: {message}")]
pub struct KeyError {
    /// The canonical key at fault (or the full key of a mode parameter).
    pub(crate) key: String,
    /// What is wrong and what would be valid.
    pub(crate) message: String,
}

impl KeyError {
    /// An error about `key`.
    pub(crate) fn new(key: impl Into<String>, message: impl Into<String>) -> KeyError {
        KeyError {
            key: key.into(),
            message: message.into(),
        }
    }
}
