//! Configuration problems with where they are: file, line and key path.

use std::fmt;

/// One problem (or warning) in a configuration, located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// `file:line: path`, or the path alone when there is no file.
    pub location: String,
    /// What is wrong and what would be valid.
    pub message: String,
}

impl Diagnostic {
    /// A located message.
    pub fn new(location: impl Into<String>, message: impl Into<String>) -> Diagnostic {
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
