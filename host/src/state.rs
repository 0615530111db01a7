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
pub(crate) mod postgres;
mod quarantine;
mod scan;
mod slot_ledger;
mod store;

pub(crate) use error::StateError;
pub(crate) use event_log::{DEFAULT_EVENT_CAPACITY, EventLog, EventLogState, LoggedEvent};
pub use file::FileStateStore;
pub(crate) use lease::{Fenced, HeldLease, JobLeases, LeaseOwner};
pub(crate) use lock::LOCK_FILE;
pub(crate) use lock::lock_holder;
pub(crate) use quarantine::QUARANTINE_DIR;
pub(crate) use scan::{StateFinding, scan_dir};
pub(crate) use slot_ledger::{LedgerRound, Reservation, SlotLedger};
pub(crate) use store::StoredProblem;
pub use store::{InMemoryStateStore, StateStore, load, save, sections};
