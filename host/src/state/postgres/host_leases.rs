//! A host's job leases: what it holds, renewed by a thread of its own, and the fence of its
//! rescales.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use postgres::Client;

use super::connector::Connector;
use super::error::db_error;
use super::round::{DB_NOW_MS, RoundOutcome, leave, run_round};
use super::schema::migrate;
use crate::state::{Fenced, HeldLease, JobLeases, LeaseOwner, StateError};

#[derive(Debug, Default)]
struct Book {
    wanted: BTreeSet<String>,
    busy: BTreeSet<String>,
    /// The leases held after the last round. `until` is the start of the round that renewed
    /// a lease plus the TTL: the database's expiry is the TTL after a later instant, so this
    /// host always stops before another one can take the job.
    held: BTreeMap<String, HeldLease>,
    /// The token of the last lease this host held of each job, also once it is given up.
    last_tokens: BTreeMap<String, i64>,
    /// Who held each job after the last round, and until when that is worth telling.
    owners: BTreeMap<String, LeaseOwner>,
    owners_until: Option<Instant>,
}

impl Book {
    /// Forgets the last token of every job this host neither wants nor holds: its loop ended
    /// (a reload removed it) and its lease is given up, so nothing writes under the token any
    /// more. A host whose fleet comes and goes keeps no token of the jobs it no longer runs.
    fn forget_unwanted(&mut self) {
        let Book {
            wanted,
            held,
            last_tokens,
            ..
        } = self;
        last_tokens.retain(|job, _| wanted.contains(job) || held.contains_key(job));
    }
}

/// One host's leases over a shared database.
pub(crate) struct HostLeases {
    id: String,
    ttl: Duration,
    connector: Arc<Connector>,
    client: Mutex<Client>,
    book: Mutex<Book>,
}

impl std::fmt::Debug for HostLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostLeases")
            .field("id", &self.id)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl HostLeases {
    /// Connects host `id` to the database at `url` (creating or migrating the schema), with
    /// leases valid for `ttl`. Nothing is claimed until the first [`HostLeases::renew`].
    pub(crate) fn connect(url: &str, id: &str, ttl: Duration) -> Result<HostLeases, StateError> {
        let connector = Arc::new(Connector::new(url)?);
        let mut client = connector.connect(Some(ttl))?;
        migrate(&mut client)?;
        Ok(HostLeases {
            id: id.to_string(),
            ttl,
            connector,
            client: Mutex::new(client),
            book: Mutex::new(Book::default()),
        })
    }

    /// The lease TTL.
    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    /// What makes this host's connections, for its state store to share: the TLS files are
    /// watched, and their events told, once.
    pub(crate) fn connector(&self) -> Arc<Connector> {
        Arc::clone(&self.connector)
    }

    /// How often to renew: a third of the TTL, so that two renewals in a row may fail (a slow
    /// database, a short network cut) before a lease lapses; never slower than `interval`, the
    /// host's cycle.
    pub(crate) fn renew_period(&self, interval: Duration) -> Duration {
        (self.ttl / 3).min(interval).max(Duration::from_millis(50))
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn client(&self) -> Result<MutexGuard<'_, Client>, StateError> {
        let mut client = self.client.lock().unwrap_or_else(|e| e.into_inner());
        if client.is_closed() {
            *client = self.connector.connect(Some(self.ttl))?;
        }
        Ok(client)
    }

    /// One lease round: heartbeat, renew what this host holds, give up or claim jobs to even
    /// out the load. A failed round changes nothing here: the leases lapse at their own time.
    pub(crate) fn renew(&self) -> Result<RoundOutcome, StateError> {
        let started = Instant::now();
        let wanted = self.book().wanted.clone();
        let busy = || self.book().busy.clone();
        let ttl_ms = i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX / 4);
        let outcome = {
            let mut client = self.client()?;
            let mut tx = client
                .transaction()
                .map_err(db_error("begin a lease round"))?;
            let outcome = run_round(&mut tx, &self.id, ttl_ms, &wanted, &busy, None)?;
            tx.commit().map_err(db_error("commit a lease round"))?;
            outcome
        };
        let until = started + self.ttl;
        let mut book = self.book();
        let held = outcome
            .held
            .iter()
            .map(|(job, &token)| {
                // A lease renewed under the same token keeps the instant it was claimed.
                let since = book
                    .held
                    .get(job)
                    .filter(|h| h.token == token)
                    .map_or(started, |h| h.since);
                (
                    job.clone(),
                    HeldLease {
                        token,
                        since,
                        until,
                    },
                )
            })
            .collect();
        book.held = held;
        book.last_tokens.extend(
            outcome
                .held
                .iter()
                .map(|(job, &token)| (job.clone(), token)),
        );
        book.forget_unwanted();
        // A job just taken is not given up again before its loop stored a step under the new
        // lease (JobLeases::set_busy after the step clears it): what that step decided would
        // be lost to the next owner.
        book.busy.extend(outcome.claimed.iter().cloned());
        book.owners = outcome
            .owners
            .iter()
            .map(|(job, (host, token))| {
                let owner = LeaseOwner {
                    host: host.clone(),
                    token: *token,
                };
                (job.clone(), owner)
            })
            .collect();
        book.owners_until = Some(until);
        drop(book);
        Ok(outcome)
    }

    /// Renews every `period` until `stop` is set, then gives every lease up so that the other
    /// hosts take the jobs at once. A failed round is logged; the next one tries again.
    pub(crate) fn run_renewals(&self, period: Duration, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            let started = Instant::now();
            match self.renew() {
                Ok(outcome) => {
                    for job in &outcome.claimed {
                        tracing::info!(host = %self.id, job, "lease claimed");
                    }
                    for job in &outcome.released {
                        tracing::info!(host = %self.id, job, "lease given up to even out the load");
                    }
                }
                Err(err) => tracing::warn!(host = %self.id, %err, "lease round failed"),
            }
            while started.elapsed() < period && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20).min(period));
            }
        }
        if let Err(err) = self.leave() {
            tracing::warn!(host = %self.id, %err, "cannot give up the leases");
        }
    }

    /// Gives up every lease and the heartbeat.
    pub(crate) fn leave(&self) -> Result<(), StateError> {
        {
            let mut book = self.book();
            book.held.clear();
            book.owners.clear();
        }
        let mut client = self.client()?;
        let mut tx = client.transaction().map_err(db_error("begin leaving"))?;
        leave(&mut tx, &self.id)?;
        tx.commit().map_err(db_error("commit leaving"))
    }
}

impl JobLeases for HostLeases {
    fn host_id(&self) -> &str {
        &self.id
    }

    fn want(&self, job: &str) {
        self.book().wanted.insert(job.to_string());
    }

    fn unwant(&self, job: &str) {
        let mut book = self.book();
        book.wanted.remove(job);
        book.busy.remove(job);
    }

    fn set_busy(&self, job: &str, busy: bool) {
        let mut book = self.book();
        if busy {
            book.busy.insert(job.to_string());
        } else {
            book.busy.remove(job);
        }
    }

    fn owners(&self) -> BTreeMap<String, LeaseOwner> {
        let book = self.book();
        let now = Instant::now();
        if book.owners_until.is_none_or(|until| until <= now) {
            return BTreeMap::new();
        }
        let mut owners = book.owners.clone();
        // A lease of this host that lapsed here since is no longer this host's to claim.
        owners.retain(|job, owner| {
            owner.host != self.id || book.held.get(job).is_some_and(|h| now < h.until)
        });
        owners
    }

    fn claim_now(&self) -> Result<(), StateError> {
        self.renew().map(|_| ())
    }

    fn lease(&self, job: &str) -> Option<HeldLease> {
        let book = self.book();
        let held = book.held.get(job)?;
        (Instant::now() < held.until).then_some(*held)
    }

    /// The job's state may still be written under the last token while no other host claimed
    /// the job since (a claim increments the token): what this host decided before giving the
    /// job up is not lost.
    fn last_token(&self, job: &str) -> Option<i64> {
        self.book().last_tokens.get(job).copied()
    }

    /// A tenth of the TTL: far more than a request takes to reach the engine on a healthy
    /// network and than two clocks drift apart over one TTL, and little of the lease.
    fn margin(&self) -> Duration {
        self.ttl / 10
    }

    fn admit(
        &self,
        job: &str,
        token: i64,
        parallelism: &BTreeMap<String, u32>,
    ) -> Result<(), Fenced> {
        let unavailable = |err: StateError| Fenced::Unavailable(err.to_string());
        let value = serde_json::to_value(parallelism)
            .map_err(|e| Fenced::Unavailable(format!("cannot encode the operation: {e}")))?;
        let mut client = self.client().map_err(unavailable)?;
        let mut tx = client
            .transaction()
            .map_err(db_error("begin the fence check"))
            .map_err(unavailable)?;
        let now_ms: i64 = tx
            .query_one(DB_NOW_MS, &[])
            .map_err(db_error("read the clock"))
            .map_err(unavailable)?
            .get(0);
        let row = tx
            .query_opt(
                "SELECT owner, token, expires_ms FROM flowscale_leases WHERE job = $1 FOR UPDATE",
                &[&job],
            )
            .map_err(db_error("lock the lease"))
            .map_err(unavailable)?;
        let (owner, current, expires_ms): (Option<String>, i64, i64) = row
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .unwrap_or((None, 0, 0));
        let owner = owner.filter(|_| now_ms < expires_ms);
        let admitted = owner.as_deref() == Some(self.id.as_str()) && current == token;
        tx.execute(
            "INSERT INTO flowscale_operations (job, host, token, at_ms, parallelism, admitted) \
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[&job, &self.id, &token, &now_ms, &value, &admitted],
        )
        .map_err(db_error("record the operation"))
        .map_err(unavailable)?;
        if admitted {
            // Before the row lock goes: a round waiting for it must not give the job up until
            // the job's loop stored what it is about to do.
            self.set_busy(job, true);
        }
        tx.commit()
            .map_err(db_error("commit the operation"))
            .map_err(unavailable)?;
        if admitted {
            Ok(())
        } else {
            Err(Fenced::Superseded {
                token,
                current,
                owner,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_token_of_a_job_no_longer_run_here_is_forgotten_once_its_lease_is_gone() {
        let now = Instant::now();
        let lease = |token| HeldLease {
            token,
            since: now,
            until: now,
        };
        let mut book = Book::default();
        book.wanted.extend(["kept".to_string(), "lost".to_string()]);
        book.held.insert("kept".to_string(), lease(1));
        // Removed from the fleet, its lease not given up yet.
        book.held.insert("leaving".to_string(), lease(2));
        for (job, token) in [("kept", 1), ("lost", 5), ("leaving", 2), ("gone", 3)] {
            book.last_tokens.insert(job.to_string(), token);
        }
        book.forget_unwanted();
        let kept: Vec<&str> = book.last_tokens.keys().map(String::as_str).collect();
        // `lost` is still wanted (another host took it): its token says what this host held.
        assert_eq!(kept, ["kept", "leaving", "lost"]);
        book.held.remove("leaving");
        book.forget_unwanted();
        assert!(!book.last_tokens.contains_key("leaving"));
    }
}
