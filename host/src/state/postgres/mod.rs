//! State shared by several hosts in PostgreSQL (`[host] state = "postgres://..."`).
//!
//! PostgreSQL does the hard part: every lease round and every fence check is a transaction
//! that locks the rows it reads (`SELECT ... FOR UPDATE`), so hosts never have to agree among
//! themselves. The pieces:
//! - [`migrate`]: the tables, created and migrated by the host (versioned migrations);
//! - [`PostgresStateStore`]: the jobs' state sections (scaling history, metric window, cooldown
//!   queue and timer, events), written once per cycle in one transaction, fenced by the lease;
//! - [`round`]: a host's lease round (heartbeat, renew, even out, claim) and how jobs are
//!   spread over the live hosts;
//! - [`HostLeases`]: a host's leases as its jobs see them, and the fence every rescale passes;
//! - [`PgSlotLedger`]: the slots each host's arbiter granted on a cluster and the cluster does
//!   not show yet, so that two hosts never hand out the same free slots;
//! - [`read_ownership`]: who owns which job now, for `flowscale status`;
//! - [`Connector`]: the connections, with libpq's `sslmode`, TLS files and password sources
//!   (`conninfo`, `pgpass`, `tls`).
//!
//! The client is the synchronous `postgres` crate: the host runs a thread per job, and each
//! statement here is short.

mod connector;
mod conninfo;
mod error;
mod host_leases;
mod ownership;
mod pgpass;
pub(crate) mod round;
mod schema;
mod slot_ledger;
mod store;
mod tls;

#[cfg(test)]
pub(crate) mod tests;

pub(crate) use connector::check_link;
pub(crate) use host_leases::HostLeases;
pub(crate) use ownership::{Ownership, read_ownership};
pub(crate) use store::PostgresStateStore;
