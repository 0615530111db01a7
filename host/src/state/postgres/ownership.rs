//! Who owns which job, read from the shared database for `flowscale status`: the leases and
//! the hosts' heartbeats as they stand now, by the database's clock.
//!
//! Read-only: nothing is migrated or written, so looking never disturbs the running hosts.
//! A database no host has used yet (no lease table) reads as no hosts and no owners.

use std::collections::BTreeMap;

use super::connector::Connector;
use super::error::db_error;
use super::round::DB_NOW_MS;
use crate::state::StateError;

/// A job's current lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobOwner {
    /// The host that holds the lease.
    pub(crate) host: String,
    /// Its fencing token.
    pub(crate) token: i64,
    /// When the lease expires unless renewed (ms since the epoch, database clock).
    pub(crate) expires_ms: i64,
}

/// A host whose heartbeat has not expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LiveHost {
    /// The host's id (`[host] id`).
    pub(crate) id: String,
    /// When its heartbeat expires unless renewed (ms since the epoch, database clock).
    pub(crate) expires_ms: i64,
}

/// The ownership of a fleet's jobs at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ownership {
    /// The database's clock when it was read (ms since the epoch).
    pub(crate) now_ms: i64,
    /// The live hosts, by id.
    pub(crate) hosts: Vec<LiveHost>,
    /// The owner of each job asked about; `None`: no host holds its lease now.
    pub(crate) jobs: BTreeMap<String, Option<JobOwner>>,
}

/// Reads who owns each of `jobs` and which hosts are live in the database at `url`, in one
/// read-only transaction (one consistent instant).
pub(crate) fn read_ownership(url: &str, jobs: &[&str]) -> Result<Ownership, StateError> {
    let mut client = Connector::new(url)?.connect(None)?;
    let mut tx = client
        .build_transaction()
        .read_only(true)
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .start()
        .map_err(db_error("begin reading the leases"))?;
    let now_ms: i64 = tx
        .query_one(DB_NOW_MS, &[])
        .map_err(db_error("read the clock"))?
        .get(0);
    let used: bool = tx
        .query_one(
            "SELECT to_regclass('flowscale_leases') IS NOT NULL \
             AND to_regclass('flowscale_hosts') IS NOT NULL",
            &[],
        )
        .map_err(db_error("look for the lease tables"))?
        .get(0);
    let mut ownership = Ownership {
        now_ms,
        hosts: Vec::new(),
        jobs: jobs.iter().map(|j| (j.to_string(), None)).collect(),
    };
    if !used {
        return Ok(ownership);
    }
    ownership.hosts = tx
        .query(
            "SELECT id, expires_ms FROM flowscale_hosts WHERE expires_ms > $1 ORDER BY id",
            &[&now_ms],
        )
        .map_err(db_error("read the hosts"))?
        .iter()
        .map(|r| LiveHost {
            id: r.get(0),
            expires_ms: r.get(1),
        })
        .collect();
    let names: Vec<&str> = jobs.to_vec();
    let rows = tx
        .query(
            "SELECT job, owner, token, expires_ms FROM flowscale_leases \
             WHERE job = ANY($1) AND owner IS NOT NULL AND expires_ms > $2",
            &[&names, &now_ms],
        )
        .map_err(db_error("read the leases"))?;
    for row in rows {
        let job: String = row.get(0);
        if let Some(slot) = ownership.jobs.get_mut(&job) {
            *slot = Some(JobOwner {
                host: row.get(1),
                token: row.get(2),
                expires_ms: row.get(3),
            });
        }
    }
    tx.commit().map_err(db_error("end reading the leases"))?;
    Ok(ownership)
}
