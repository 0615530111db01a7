//! The tables of the shared state, created and migrated by the host at connect time.
//!
//! Each migration has a version; `flowscale_schema` records the ones applied. Hosts starting at
//! once serialize on a transaction-level advisory lock, so a migration runs exactly once, and
//! the pending migrations run in one transaction with their version rows: they are applied
//! whole or not at all. A database migrated by a newer host (a version this one does not know)
//! is refused.

use postgres::Client;

use super::error::db_error;
use crate::state::StateError;

/// The key of the advisory lock migrations take (any constant; "flowscale" in ASCII, folded).
const MIGRATION_LOCK: i64 = 0x666c_6f77_7363;

/// The migrations, oldest first: (version, SQL). Never edit one that was released; add another.
const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        "CREATE TABLE flowscale_job_sections (
             job text NOT NULL,
             section text NOT NULL,
             value jsonb NOT NULL,
             PRIMARY KEY (job, section)
         );
         CREATE TABLE flowscale_quarantine (
             id bigserial PRIMARY KEY,
             job text NOT NULL,
             sections jsonb NOT NULL,
             kept_at timestamptz NOT NULL DEFAULT now()
         );",
    ),
    (
        2,
        "CREATE TABLE flowscale_hosts (
             id text PRIMARY KEY,
             expires_ms bigint NOT NULL
         );
         CREATE TABLE flowscale_leases (
             job text PRIMARY KEY,
             owner text,
             token bigint NOT NULL DEFAULT 0,
             expires_ms bigint NOT NULL DEFAULT 0
         );
         CREATE TABLE flowscale_operations (
             id bigserial PRIMARY KEY,
             job text NOT NULL,
             host text NOT NULL,
             token bigint NOT NULL,
             at_ms bigint NOT NULL,
             parallelism jsonb NOT NULL,
             admitted boolean NOT NULL
         );",
    ),
    (
        3,
        "CREATE TABLE flowscale_slot_clusters (
             cluster text PRIMARY KEY
         );
         CREATE TABLE flowscale_slot_reservations (
             cluster text NOT NULL REFERENCES flowscale_slot_clusters (cluster),
             job text NOT NULL,
             host text NOT NULL,
             token bigint NOT NULL,
             held integer NOT NULL,
             target integer NOT NULL,
             expires_ms bigint NOT NULL,
             PRIMARY KEY (cluster, job)
         );",
    ),
];

/// The newest schema version this host knows.
pub(crate) const SCHEMA_VERSION: i32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// Brings the database's schema to [`SCHEMA_VERSION`]; returns the versions it applied.
pub(crate) fn migrate(client: &mut Client) -> Result<Vec<i32>, StateError> {
    let mut tx = client
        .transaction()
        .map_err(db_error("begin the migration"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(db_error("lock the schema"))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS flowscale_schema (
             version integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )
    .map_err(db_error("create flowscale_schema"))?;
    let found: Option<i32> = tx
        .query_one("SELECT max(version) FROM flowscale_schema", &[])
        .map_err(db_error("read the schema version"))?
        .get(0);
    let found = found.unwrap_or(0);
    if found > SCHEMA_VERSION {
        return Err(StateError::SchemaTooNew {
            found,
            known: SCHEMA_VERSION,
        });
    }
    let mut applied = Vec::new();
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
        tx.batch_execute(sql)
            .map_err(db_error(&format!("apply migration {version}")))?;
        tx.execute(
            "INSERT INTO flowscale_schema (version) VALUES ($1)",
            &[version],
        )
        .map_err(db_error("record the migration"))?;
        applied.push(*version);
    }
    tx.commit().map_err(db_error("commit the migration"))?;
    Ok(applied)
}
