//! Job state sections in PostgreSQL: one row per (job, section), written once per cycle in one
//! transaction, and fenced by the job's lease when several hosts share the database.

use std::path::PathBuf;
use std::sync::Arc;

use postgres::Client;

use super::connector::Connector;
use super::error::db_error;
use super::host_leases::HostLeases;
use super::schema::migrate;
use super::slot_ledger::PgSlotLedger;
use crate::state::pending::{PendingJobs, Sections, delegate_to_pending};
use crate::state::{JobLeases, SlotLedger, StateError, StateStore};

/// Job state in a PostgreSQL database (`[host] state = "postgres://..."`).
///
/// Reads are served from memory (every job's sections are read at open, a job's again by
/// [`StateStore::refresh`] when it changes hands); [`StateStore::flush`] writes every job
/// changed since the last flush in one transaction. With leases, a job's sections are written
/// only while the token of the last lease this host held is the job's current one, checked
/// under a row lock in that same transaction: a host that lost a job to another cannot
/// overwrite what the new owner stores, and a host that gave a job up still stores what it
/// decided before the next owner reads it.
pub(crate) struct PostgresStateStore {
    connector: Arc<Connector>,
    client: Client,
    pending: PendingJobs,
    leases: Option<Arc<HostLeases>>,
    /// The slot reservations of this host, with `leases`.
    slots: Option<Arc<PgSlotLedger>>,
}

impl std::fmt::Debug for PostgresStateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStateStore")
            .field("jobs", &self.pending.jobs.len())
            .field("dirty", &self.pending.dirty)
            .finish_non_exhaustive()
    }
}

impl PostgresStateStore {
    /// Connects to `url`, creates or migrates the schema, and reads every job's state. With
    /// `leases`, writes are fenced by them and [`StateStore::leases`] hands them to the jobs,
    /// and the connections are made as theirs are (`url` is theirs).
    pub(crate) fn open(
        url: &str,
        leases: Option<Arc<HostLeases>>,
    ) -> Result<PostgresStateStore, StateError> {
        let ttl = leases.as_ref().map(|l| l.ttl());
        let connector = match &leases {
            Some(leases) => leases.connector(),
            None => Arc::new(Connector::new(url)?),
        };
        let mut client = connector.connect(ttl)?;
        migrate(&mut client)?;
        let mut store = PostgresStateStore {
            connector,
            client,
            pending: PendingJobs::default(),
            slots: leases
                .as_ref()
                .map(|l| Arc::new(PgSlotLedger::new(Arc::clone(l)))),
            leases,
        };
        let rows = store
            .client
            .query(
                "SELECT job, section, value FROM flowscale_job_sections ORDER BY job, section",
                &[],
            )
            .map_err(db_error("read the job state"))?;
        for row in rows {
            store
                .pending
                .jobs
                .entry(row.get(0))
                .or_default()
                .insert(row.get(1), row.get(2));
        }
        Ok(store)
    }

    /// A new connection when the old one broke (the server restarted, the network dropped).
    fn connected(&mut self) -> Result<&mut Client, StateError> {
        if self.client.is_closed() {
            let ttl = self.leases.as_ref().map(|l| l.ttl());
            self.client = self.connector.connect(ttl)?;
        }
        Ok(&mut self.client)
    }

    /// The token under which this host may write `job`: `Some(None)` without leases,
    /// `Some(Some(token))` once it held the job, `None` when it never did.
    fn write_token(&self, job: &str) -> Option<Option<i64>> {
        match &self.leases {
            None => Some(None),
            Some(leases) => leases.last_token(job).map(Some),
        }
    }
}

impl StateStore for PostgresStateStore {
    delegate_to_pending!();

    /// Keeps the job's sections as they were in `flowscale_quarantine` (there is no file).
    fn quarantine(
        &mut self,
        job: &str,
        section: Option<&str>,
    ) -> Result<Option<PathBuf>, StateError> {
        let kept = serde_json::to_value(self.pending.jobs.get(job).cloned().unwrap_or_default())
            .map_err(|source| StateError::Encode {
                job: job.to_string(),
                section: section.unwrap_or("*").to_string(),
                source,
            })?;
        self.connected()?
            .execute(
                "INSERT INTO flowscale_quarantine (job, sections) VALUES ($1, $2)",
                &[&job, &kept],
            )
            .map_err(db_error("keep quarantined state"))?;
        match section {
            Some(section) => {
                if let Some(sections) = self.pending.jobs.get_mut(job) {
                    sections.remove(section);
                }
                self.pending.dirty.insert(job.to_string());
            }
            None => self.remove_job(job),
        }
        Ok(None)
    }

    fn flush(&mut self) -> Result<(), StateError> {
        if self.pending.dirty.is_empty() && self.pending.removed.is_empty() {
            return Ok(());
        }
        let writes: Vec<(String, Option<i64>)> = self
            .pending
            .dirty
            .iter()
            .chain(&self.pending.removed)
            .filter_map(|job| Some((job.clone(), self.write_token(job)?)))
            .collect();
        let removed = self.pending.removed.clone();
        let jobs = self.pending.jobs.clone();
        let client = self.connected()?;
        let mut tx = client.transaction().map_err(db_error("begin a write"))?;
        for (job, token) in &writes {
            if let Some(token) = token {
                // Every claim increments the token: an unchanged token means no other host
                // took the job since this one held it (even if its lease lapsed or was given
                // up meanwhile), so the state written last is this host's.
                let current = tx
                    .query_opt(
                        "SELECT 1 FROM flowscale_leases WHERE job = $1 AND token = $2 FOR SHARE",
                        &[job, token],
                    )
                    .map_err(db_error("check the lease"))?;
                if current.is_none() {
                    // Another host holds the job now: its state is that host's to write.
                    tracing::debug!(job, "state not written: the job's lease moved on");
                    continue;
                }
            }
            tx.execute("DELETE FROM flowscale_job_sections WHERE job = $1", &[job])
                .map_err(db_error("replace the job state"))?;
            if removed.contains(job) {
                continue;
            }
            for (section, value) in jobs.get(job).into_iter().flatten() {
                tx.execute(
                    "INSERT INTO flowscale_job_sections (job, section, value) VALUES ($1, $2, $3)",
                    &[job, section, value],
                )
                .map_err(db_error("write the job state"))?;
            }
        }
        tx.commit().map_err(db_error("commit the job state"))?;
        self.pending.dirty.clear();
        self.pending.removed.clear();
        Ok(())
    }

    fn refresh(&mut self, job: &str) -> Result<(), StateError> {
        let rows = self
            .connected()?
            .query(
                "SELECT section, value FROM flowscale_job_sections WHERE job = $1",
                &[&job],
            )
            .map_err(db_error("read the job state"))?;
        let sections: Sections = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        self.pending.dirty.remove(job);
        self.pending.removed.remove(job);
        if sections.is_empty() {
            self.pending.jobs.remove(job);
        } else {
            self.pending.jobs.insert(job.to_string(), sections);
        }
        Ok(())
    }

    fn leases(&self) -> Option<Arc<dyn JobLeases>> {
        self.leases
            .as_ref()
            .map(|l| Arc::clone(l) as Arc<dyn JobLeases>)
    }

    fn slot_ledger(&self) -> Option<Arc<dyn SlotLedger>> {
        self.slots
            .as_ref()
            .map(|l| Arc::clone(l) as Arc<dyn SlotLedger>)
    }
}
