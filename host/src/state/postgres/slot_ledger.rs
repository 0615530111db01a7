//! The slot reservations of the hosts sharing a database: `flowscale_slot_reservations`, one
//! row per job granted slots its cluster does not show yet, and `flowscale_slot_clusters`, one
//! row per cluster whose lock a round holds (docs/control-loop.md#several-hosts-on-one-cluster).
//!
//! A round locks its cluster's row (`SELECT ... FOR UPDATE`) for the whole of its transaction:
//! it reads the cluster's free slots and the other hosts' live reservations, arbitrates, and
//! records its own, so that no other host's round on the cluster reads in between. A release
//! takes the same lock: a round that read the cluster before a rescale landed also sees its
//! reservation. A reservation is live while its job's lease is held by its host under the token
//! it was made with and the lease TTL since it was made has not passed: a host that dies or
//! loses the job holds no slots.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use postgres::{Client, Transaction};

use super::connector::Connector;
use super::error::db_error;
use super::host_leases::HostLeases;
use super::round::DB_NOW_MS;
use crate::state::{JobLeases, LedgerRound, Reservation, SlotLedger, StateError};

/// Reservations dead at `$2` (the database's clock, in ms) on cluster `$1`: expired, or whose
/// job's lease is not held by their host under their token any more.
const DROP_DEAD: &str = "DELETE FROM flowscale_slot_reservations r \
     WHERE r.cluster = $1 AND (r.expires_ms <= $2 OR NOT EXISTS ( \
         SELECT 1 FROM flowscale_leases l \
         WHERE l.job = r.job AND l.owner = r.host AND l.token = r.token AND l.expires_ms > $2))";

/// One host's slot reservations, on a connection of their own: a round holds its cluster's
/// lock while it reads the cluster over REST, which must not hold up the lease renewals.
pub(crate) struct PgSlotLedger {
    leases: Arc<HostLeases>,
    connector: Arc<Connector>,
    client: Mutex<Option<Client>>,
}

impl std::fmt::Debug for PgSlotLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgSlotLedger")
            .field("host", &self.leases.host_id())
            .finish_non_exhaustive()
    }
}

impl PgSlotLedger {
    /// The reservations of the host of `leases` (its id, the tokens of its jobs, its TTL); it
    /// connects at its first round.
    pub(crate) fn new(leases: Arc<HostLeases>) -> PgSlotLedger {
        PgSlotLedger {
            connector: leases.connector(),
            leases,
            client: Mutex::new(None),
        }
    }

    fn ttl(&self) -> Duration {
        self.leases.ttl()
    }

    /// Runs `work` in a transaction holding `cluster`'s lock.
    fn locked<T>(
        &self,
        cluster: &str,
        work: impl FnOnce(&mut Transaction<'_>, i64) -> Result<T, StateError>,
    ) -> Result<T, StateError> {
        let mut slot = self.client.lock().unwrap_or_else(|e| e.into_inner());
        let client = connected(&mut slot, &self.connector, self.ttl())?;
        let mut tx = client
            .transaction()
            .map_err(db_error("begin a slot round"))?;
        let now_ms: i64 = tx
            .query_one(DB_NOW_MS, &[])
            .map_err(db_error("read the clock"))?
            .get(0);
        tx.execute(
            "INSERT INTO flowscale_slot_clusters (cluster) VALUES ($1) ON CONFLICT DO NOTHING",
            &[&cluster],
        )
        .map_err(db_error("record the cluster"))?;
        tx.query_one(
            "SELECT cluster FROM flowscale_slot_clusters WHERE cluster = $1 FOR UPDATE",
            &[&cluster],
        )
        .map_err(db_error("lock the cluster's slots"))?;
        let out = work(&mut tx, now_ms)?;
        tx.commit().map_err(db_error("commit a slot round"))?;
        Ok(out)
    }
}

/// The open connection in `slot`, made again when there is none or it broke.
fn connected<'a>(
    slot: &'a mut MutexGuard<'_, Option<Client>>,
    connector: &Connector,
    ttl: Duration,
) -> Result<&'a mut Client, StateError> {
    let client = match slot.take() {
        Some(client) if !client.is_closed() => client,
        _ => connector.connect(Some(ttl))?,
    };
    Ok(slot.insert(client))
}

fn to_u32(n: i32) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

fn to_i32(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

impl SlotLedger for PgSlotLedger {
    fn round(&self, cluster: &str, round: &mut LedgerRound<'_>) -> Result<(), StateError> {
        let host = self.leases.host_id().to_string();
        let ttl_ms = i64::try_from(self.ttl().as_millis()).unwrap_or(i64::MAX / 4);
        self.locked(cluster, |tx, now_ms| {
            tx.execute(DROP_DEAD, &[&cluster, &now_ms])
                .map_err(db_error("drop dead slot reservations"))?;
            // This host's earlier rounds on the cluster are over: what they granted was
            // realized and released, or given up.
            tx.execute(
                "DELETE FROM flowscale_slot_reservations WHERE cluster = $1 AND host = $2",
                &[&cluster, &host],
            )
            .map_err(db_error("drop this host's slot reservations"))?;
            let others: Vec<Reservation> = tx
                .query(
                    "SELECT job, host, held, target FROM flowscale_slot_reservations \
                     WHERE cluster = $1 ORDER BY job",
                    &[&cluster],
                )
                .map_err(db_error("read the slot reservations"))?
                .iter()
                .map(|row| Reservation {
                    job: row.get(0),
                    host: row.get(1),
                    held: to_u32(row.get(2)),
                    target: to_u32(row.get(3)),
                })
                .collect();
            for own in round(&others) {
                // A job without a lease here sends nothing (its fence refuses it); a
                // reservation under no token would be dead at once.
                let Some(token) = self.leases.held(&own.job) else {
                    continue;
                };
                tx.execute(
                    "INSERT INTO flowscale_slot_reservations \
                     (cluster, job, host, token, held, target, expires_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) \
                     ON CONFLICT (cluster, job) DO UPDATE SET host = $3, token = $4, \
                     held = $5, target = $6, expires_ms = $7",
                    &[
                        &cluster,
                        &own.job,
                        &host,
                        &token,
                        &to_i32(own.held),
                        &to_i32(own.target),
                        &now_ms.saturating_add(ttl_ms),
                    ],
                )
                .map_err(db_error("record a slot reservation"))?;
            }
            Ok(())
        })
    }

    fn release(&self, cluster: &str, job: &str) -> Result<(), StateError> {
        let host = self.leases.host_id().to_string();
        self.locked(cluster, |tx, _| {
            tx.execute(
                "DELETE FROM flowscale_slot_reservations \
                 WHERE cluster = $1 AND job = $2 AND host = $3",
                &[&cluster, &job, &host],
            )
            .map_err(db_error("release a slot reservation"))?;
            Ok(())
        })
    }
}
