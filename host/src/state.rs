//! Per-job state that must survive a host restart: keyed JSON sections per job (cooldown queue,
//! recent events, ...) in a [`StateStore`], and the job's [`EventLog`].
//!
//! Components own their section's type and read/write it with [`load`] and [`save`]; the store
//! only knows JSON values, so adding a section needs no change here. [`FileStateStore`] keeps one
//! JSON file per job and replaces it atomically on [`StateStore::flush`], which the loop calls once
//! per cycle (as the Flink autoscaler flushes its state store after every cycle). It holds the directory's
//! lock ([`StateDirLock`]) while it lives, reads a directory through [`scan_dir`] (which
//! `validate` uses too), and keeps what cannot be read in [`QUARANTINE_DIR`] instead of
//! overwriting it. [`postgres::PostgresStateStore`] keeps the same sections in PostgreSQL for
//! hosts that share a fleet, with job leases and fencing ([`JobLeases`]).

mod error;
mod event_log;
mod file;
mod lease;
mod lock;
mod names;
mod pending;
pub mod postgres;
mod quarantine;
mod scan;
mod store;

pub use error::StateError;
pub use event_log::{
    DEFAULT_EVENT_CAPACITY, DEFAULT_EVENT_INTERVAL, EVENT_INTERVAL_KEY, EventLog, EventLogState,
    LoggedEvent,
};
pub use file::FileStateStore;
pub use lease::{Fenced, JobLeases, LeaseOwner};
pub use lock::{LOCK_FILE, StateDirLock, lock_holder};
pub use quarantine::QUARANTINE_DIR;
pub use scan::{DirScan, StateFinding, StoredJob, scan_dir};
pub use store::{InMemoryStateStore, StateStore, StoredProblem, load, save, sections};
