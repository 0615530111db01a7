//! Errors of the simulator: job files that cannot be read or are invalid, outputs that cannot be
//! written.

use std::path::PathBuf;

/// A problem in a job file, located precisely enough to fix it without guessing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFileProblem {
    /// The file (or `<string>` for text given directly).
    pub(crate) file: String,
    /// 1-based line.
    pub(crate) line: usize,
    /// 1-based column.
    pub(crate) column: usize,
    /// The key at fault (`vertices[2].parallelism`, `edges[0].ship`, ...).
    pub(crate) key: String,
    /// What is wrong.
    pub(crate) message: String,
    /// What would be valid.
    pub(crate) valid: String,
}

impl std::fmt::Display for JobFileProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}: `{}`: {} (valid: {})",
            self.file, self.line, self.column, self.key, self.message, self.valid
        )
    }
}

/// Why a simulation could not be built or its output written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The job file (or a trace it names) could not be read.
    #[error("failed to read `{path}`: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The job file is invalid.
    #[error("invalid job file: {0}")]
    Invalid(Box<JobFileProblem>),
    /// An output (timeline, chart) could not be written.
    #[error("failed to write `{path}`: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// An output could not be encoded.
    #[error("failed to encode {what}: {message}")]
    Encode {
        /// What was being encoded.
        what: String,
        /// Why it failed.
        message: String,
    },
}
