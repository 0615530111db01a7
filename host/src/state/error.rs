//! Why state could not be read or written: one error type for every store and the leases.

use std::path::PathBuf;

/// Why state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A state file or directory could not be read.
    #[error("failed to read state from {}: {source}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A state file could not be written, renamed or removed.
    #[error("failed to write state to {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A state file is not a flowscale state file (hint: move it away to start the job afresh).
    #[error("state file {} is not valid flowscale state (hint: move it away to start the job afresh): {source}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        #[source]
        source: serde_json::Error,
    },
    /// Another process holds the state directory's lock.
    #[error(
        "the state directory {} is in use by another flowscale host ({}); stop that host, or give this one another `state-dir`",
        dir.display(),
        holder.map_or_else(|| "an unknown process".to_string(), |pid| format!("process {pid}"))
    )]
    Locked {
        /// The state directory.
        dir: PathBuf,
        /// The holder's process id, as written in the lock file, when it could be read.
        holder: Option<u32>,
    },
    /// The state directory's lock file could not be created or locked.
    #[error("cannot lock the state directory through {}: {source}", path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Writing a job's state would replace a file that holds something else: a file that could
    /// not be read as state (and was not kept aside), or the state of another job.
    #[error(
        "the state of job `{job}` is not written to {}: that file holds {holds}; it is kept as it is (move it away to let the job persist its state)",
        path.display()
    )]
    Occupied {
        /// The job.
        job: String,
        /// The file.
        path: PathBuf,
        /// What the file holds instead.
        holds: String,
    },
    /// The database behind `[host] state` refused a statement or cannot be reached.
    #[error("PostgreSQL state ({action}): {}", describe(source))]
    Database {
        /// What was being done.
        action: String,
        /// What the client said.
        #[source]
        source: postgres::Error,
    },
    /// `[host] state` is not a URL the state link can use (never with its password).
    #[error("`[host] state` is not a usable PostgreSQL URL: {reason}")]
    Url {
        /// What is wrong with it.
        reason: String,
    },
    /// The state link cannot be made before the server is asked: its TLS files cannot be used
    /// (the file and the cause, never its contents), or there is no password to give.
    #[error("PostgreSQL state (connect to {server}): {reason}")]
    Link {
        /// The server's address.
        server: String,
        /// Why.
        reason: String,
    },
    /// The database holds a schema newer than this host knows: a newer flowscale migrated it.
    #[error(
        "the PostgreSQL schema is at version {found}, this host knows up to {known}: upgrade this host (a newer flowscale migrated the database)"
    )]
    SchemaTooNew {
        /// The version in the database.
        found: i32,
        /// The newest version this host knows.
        known: i32,
    },
    /// A stored section does not have the shape its owner expects.
    #[error("state section `{section}` of job `{job}` cannot be decoded: {source}")]
    Decode {
        /// The job.
        job: String,
        /// The section.
        section: String,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
    /// A value could not be turned into JSON (e.g. a map with non-string keys).
    #[error("state section `{section}` of job `{job}` cannot be encoded: {source}")]
    Encode {
        /// The job.
        job: String,
        /// The section.
        section: String,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
}

/// What a client error says, with the server's own message (the client's `Display` alone says
/// only "db error") or the cause of a broken connection.
pub(super) fn describe(error: &postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return format!("{}: {} ({})", db.severity(), db.message(), db.code().code());
    }
    match std::error::Error::source(error) {
        Some(cause) => format!("{error}: {cause}"),
        None => error.to_string(),
    }
}
