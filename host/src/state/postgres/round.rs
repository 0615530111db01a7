//! One lease round of a host: heartbeat, renew, give up, claim, in one transaction.
//!
//! The rounds of all hosts are serialized by PostgreSQL (a transaction-level advisory lock, and
//! the lease rows locked `FOR UPDATE`, which the fence of a rescale locks too), so every round
//! sees the leases as the previous one left them. Time is the database's clock by default, so
//! the hosts' own clocks never have to agree; tests pass their own instants.
//!
//! How the jobs are spread ([`plan_round`]): the live hosts (a heartbeat not older than the
//! lease TTL) are sorted by id and the `n` jobs divided among them, the first `n % h` hosts
//! taking one more. A host renews what it holds, gives up jobs beyond its share when another
//! live host is below its own (never a busy job: one in a cooldown period or a rescale), and
//! claims the jobs given up or never held while below its share, or when every live host is at
//! its share, or once the job has been free for a TTL (a host below its share may be stalled). A lease that lapsed (its host died or
//! stalled) is claimed by the first host whose round sees it, whatever its share: the job is
//! without an owner for at most one round after the TTL. Each claim increments the job's
//! fencing token.

use std::collections::{BTreeMap, BTreeSet};

use postgres::Transaction;

use super::error::db_error;
use crate::state::StateError;

/// The key of the advisory lock that serializes lease rounds.
const ROUND_LOCK: i64 = 0x666c_6f77_7364;

/// The database's clock in ms since the epoch (the moment the statement runs).
pub(super) const DB_NOW_MS: &str = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/// A job's lease as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaseRow {
    /// The job.
    pub(crate) job: String,
    /// The host that holds (or last held) it; `None` when given up or never held.
    pub(crate) owner: Option<String>,
    /// The fencing token of the last claim.
    pub(crate) token: i64,
    /// Until when the lease holds (ms, database clock); held only while `now < expires_ms`.
    pub(crate) expires_ms: i64,
}

impl LeaseRow {
    /// The holder at `now_ms`, if any.
    pub(crate) fn holder(&self, now_ms: i64) -> Option<&str> {
        self.owner.as_deref().filter(|_| now_ms < self.expires_ms)
    }
}

/// What a host does with one job in a round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LeaseAction {
    /// Extends its lease.
    Renew(String),
    /// Gives it up (to even out the load).
    Release(String),
    /// Takes it (a new token).
    Claim(String),
}

/// How many of `jobs` the host at `index` of `hosts` live hosts should hold.
pub(crate) fn share(jobs: usize, hosts: usize, index: usize) -> usize {
    if hosts == 0 {
        return 0;
    }
    jobs / hosts + usize::from(index < jobs % hosts)
}

/// Decides `me`'s round at `now_ms` over `rows` (the jobs `me` runs), given the live hosts
/// (`me` among them), the jobs `me` may not give up (`busy`), and the lease TTL.
pub(crate) fn plan_round(
    me: &str,
    now_ms: i64,
    ttl_ms: i64,
    rows: &[LeaseRow],
    live: &BTreeSet<String>,
    busy: &BTreeSet<String>,
) -> Vec<LeaseAction> {
    let hosts: Vec<&String> = live.iter().collect();
    let share_of = |host: &str| {
        hosts
            .iter()
            .position(|h| h.as_str() == host)
            .map_or(0, |i| share(rows.len(), hosts.len(), i))
    };
    let mut load: BTreeMap<&str, usize> = hosts.iter().map(|h| (h.as_str(), 0)).collect();
    for row in rows {
        if let Some(count) = row.holder(now_ms).and_then(|h| load.get_mut(h)) {
            *count += 1;
        }
    }
    let mine_share = share_of(me);
    let mut actions = Vec::new();
    let mut held = load.get(me).copied().unwrap_or(0);
    let others_below = |load: &BTreeMap<&str, usize>| {
        load.iter()
            .filter(|(h, _)| **h != me)
            .any(|(h, n)| *n < share_of(h))
    };
    for row in rows.iter().filter(|r| r.holder(now_ms) == Some(me)) {
        if held > mine_share && !busy.contains(&row.job) && others_below(&load) {
            actions.push(LeaseAction::Release(row.job.clone()));
            held -= 1;
        } else {
            actions.push(LeaseAction::Renew(row.job.clone()));
        }
    }
    if let Some(count) = load.get_mut(me) {
        *count = held;
    }
    let released: BTreeSet<String> = actions
        .iter()
        .filter_map(|a| match a {
            LeaseAction::Release(job) => Some(job.clone()),
            _ => None,
        })
        .collect();
    for row in rows
        .iter()
        .filter(|r| r.holder(now_ms).is_none() && !released.contains(&r.job))
    {
        // A lease that lapsed (its host died or stalled) is taken by the first host to see it,
        // so that the job waits at most one round; the load is evened out afterwards.
        // A job given up is left to the hosts below their share for one TTL at most: one of
        // them may be stalled itself.
        let lapsed = row.owner.is_some() || now_ms >= row.expires_ms.saturating_add(ttl_ms);
        let everyone_full = !others_below(&load);
        if lapsed || held < mine_share || everyone_full {
            actions.push(LeaseAction::Claim(row.job.clone()));
            held += 1;
            if let Some(count) = load.get_mut(me) {
                *count = held;
            }
        }
    }
    actions
}

/// What a round came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RoundOutcome {
    /// The round's instant (ms, the database's clock unless given).
    pub(crate) now_ms: i64,
    /// The jobs this host holds after the round, with their tokens.
    pub(crate) held: BTreeMap<String, i64>,
    /// The jobs it claimed in this round.
    pub(crate) claimed: Vec<String>,
    /// The jobs it gave up in this round.
    pub(crate) released: Vec<String>,
    /// The holder and token of every job of the round held after it, by this host or another:
    /// who acts on each job, for the host's dashboard and metrics.
    pub(crate) owners: BTreeMap<String, (String, i64)>,
}

/// Runs `me`'s round over `jobs` in `tx` (committed by the caller): `now_ms` or the database's
/// clock, a heartbeat valid for `ttl_ms`, then [`plan_round`] applied. `busy` is asked once the
/// lease rows are locked: a rescale admitted meanwhile (its fence holds the row lock until it
/// commits, and marks the job busy before) is seen, so its job is not given up before its
/// state is stored.
pub(crate) fn run_round(
    tx: &mut Transaction<'_>,
    me: &str,
    ttl_ms: i64,
    jobs: &BTreeSet<String>,
    busy: &dyn Fn() -> BTreeSet<String>,
    now_ms: Option<i64>,
) -> Result<RoundOutcome, StateError> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&ROUND_LOCK])
        .map_err(db_error("serialize the lease round"))?;
    let now_ms = match now_ms {
        Some(now) => now,
        None => tx
            .query_one(DB_NOW_MS, &[])
            .map_err(db_error("read the clock"))?
            .get(0),
    };
    let expires = now_ms + ttl_ms;
    tx.execute(
        "INSERT INTO flowscale_hosts (id, expires_ms) VALUES ($1, $2) \
         ON CONFLICT (id) DO UPDATE SET expires_ms = EXCLUDED.expires_ms",
        &[&me, &expires],
    )
    .map_err(db_error("heartbeat"))?;
    let names: Vec<&str> = jobs.iter().map(String::as_str).collect();
    tx.execute(
        "INSERT INTO flowscale_leases (job) SELECT unnest($1::text[]) ORDER BY 1 \
         ON CONFLICT (job) DO NOTHING",
        &[&names],
    )
    .map_err(db_error("register the jobs"))?;
    let rows: Vec<LeaseRow> = tx
        .query(
            "SELECT job, owner, token, expires_ms FROM flowscale_leases \
             WHERE job = ANY($1) ORDER BY job FOR UPDATE",
            &[&names],
        )
        .map_err(db_error("lock the leases"))?
        .iter()
        .map(|r| LeaseRow {
            job: r.get(0),
            owner: r.get(1),
            token: r.get(2),
            expires_ms: r.get(3),
        })
        .collect();
    let live: BTreeSet<String> = tx
        .query(
            "SELECT id FROM flowscale_hosts WHERE expires_ms > $1",
            &[&now_ms],
        )
        .map_err(db_error("read the live hosts"))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut outcome = RoundOutcome {
        now_ms,
        held: BTreeMap::new(),
        claimed: Vec::new(),
        released: Vec::new(),
        owners: rows
            .iter()
            .filter_map(|r| Some((r.job.clone(), (r.holder(now_ms)?.to_string(), r.token))))
            .collect(),
    };
    for action in plan_round(me, now_ms, ttl_ms, &rows, &live, &busy()) {
        match action {
            LeaseAction::Renew(job) => {
                tx.execute(
                    "UPDATE flowscale_leases SET expires_ms = $2 WHERE job = $1",
                    &[&job, &expires],
                )
                .map_err(db_error("renew a lease"))?;
                let token = rows.iter().find(|r| r.job == job).map_or(0, |r| r.token);
                outcome.owners.insert(job.clone(), (me.to_string(), token));
                outcome.held.insert(job, token);
            }
            LeaseAction::Release(job) => {
                tx.execute(
                    "UPDATE flowscale_leases SET owner = NULL, expires_ms = $2 WHERE job = $1",
                    &[&job, &now_ms],
                )
                .map_err(db_error("give up a lease"))?;
                outcome.owners.remove(&job);
                outcome.released.push(job);
            }
            LeaseAction::Claim(job) => {
                let token: i64 = tx
                    .query_one(
                        "UPDATE flowscale_leases SET owner = $2, token = token + 1, \
                         expires_ms = $3 WHERE job = $1 RETURNING token",
                        &[&job, &me, &expires],
                    )
                    .map_err(db_error("claim a lease"))?
                    .get(0);
                outcome.held.insert(job.clone(), token);
                outcome.owners.insert(job.clone(), (me.to_string(), token));
                outcome.claimed.push(job);
            }
        }
    }
    Ok(outcome)
}

/// Gives up every lease of `me` and its heartbeat (a host leaving the fleet on purpose), so
/// the others take its jobs at their next round instead of after the TTL.
pub(crate) fn leave(tx: &mut Transaction<'_>, me: &str) -> Result<(), StateError> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&ROUND_LOCK])
        .map_err(db_error("serialize the lease round"))?;
    tx.execute(
        "UPDATE flowscale_leases SET owner = NULL, expires_ms = 0 WHERE owner = $1",
        &[&me],
    )
    .map_err(db_error("give up the leases"))?;
    tx.execute("DELETE FROM flowscale_hosts WHERE id = $1", &[&me])
        .map_err(db_error("remove the heartbeat"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(job: &str, owner: Option<&str>, expires_ms: i64) -> LeaseRow {
        LeaseRow {
            job: job.into(),
            owner: owner.map(Into::into),
            token: 1,
            expires_ms,
        }
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn shares_add_up_to_the_jobs_and_differ_by_at_most_one() {
        for jobs in 0..12 {
            for hosts in 1..6 {
                let shares: Vec<usize> = (0..hosts).map(|i| share(jobs, hosts, i)).collect();
                assert_eq!(shares.iter().sum::<usize>(), jobs, "{jobs} over {hosts}");
                let (lo, hi) = (shares.iter().min(), shares.iter().max());
                assert!(hi.zip(lo).is_some_and(|(h, l)| h - l <= 1), "{shares:?}");
            }
        }
    }

    #[test]
    fn a_lone_host_claims_every_free_job() {
        let rows = [row("a", None, 0), row("b", Some("gone"), 50)];
        let actions = plan_round("h", 100, 1000, &rows, &set(&["h"]), &set(&[]));
        assert_eq!(
            actions,
            [
                LeaseAction::Claim("a".into()),
                LeaseAction::Claim("b".into())
            ]
        );
    }

    #[test]
    fn a_host_over_its_share_gives_up_idle_jobs_to_a_newcomer() {
        // `a` holds 4 jobs; `b` joined: shares 2 and 2. `j1` is busy and stays.
        let rows = [
            row("j1", Some("a"), 200),
            row("j2", Some("a"), 200),
            row("j3", Some("a"), 200),
            row("j4", Some("a"), 200),
        ];
        let actions = plan_round("a", 100, 1000, &rows, &set(&["a", "b"]), &set(&["j1"]));
        assert_eq!(
            actions,
            [
                LeaseAction::Renew("j1".into()),
                LeaseAction::Release("j2".into()),
                LeaseAction::Release("j3".into()),
                LeaseAction::Renew("j4".into()),
            ]
        );
        // With every job busy, nothing moves.
        let actions = plan_round(
            "a",
            100,
            1000,
            &rows,
            &set(&["a", "b"]),
            &set(&["j1", "j2", "j3", "j4"]),
        );
        assert!(actions.iter().all(|a| matches!(a, LeaseAction::Renew(_))));
        // The newcomer takes up to its share of the free jobs only.
        let rows = [
            row("j1", Some("a"), 200),
            row("j2", None, 100),
            row("j3", None, 100),
            row("j4", Some("a"), 200),
        ];
        let actions = plan_round("b", 100, 1000, &rows, &set(&["a", "b"]), &set(&[]));
        assert_eq!(
            actions,
            [
                LeaseAction::Claim("j2".into()),
                LeaseAction::Claim("j3".into())
            ]
        );
    }

    #[test]
    fn a_host_at_its_share_leaves_free_jobs_to_a_host_below_unless_none_is() {
        // 3 jobs over `a` and `b`: shares 2 and 1. `a` holds 2, `b` none, `j3` free.
        let rows = [
            row("j1", Some("a"), 200),
            row("j2", Some("a"), 200),
            row("j3", None, 0),
        ];
        let actions = plan_round("a", 100, 1000, &rows, &set(&["a", "b"]), &set(&[]));
        assert!(!actions.contains(&LeaseAction::Claim("j3".into())));
        // With `b` gone, `a` is the only live host: its share is all three, it takes `j3`.
        let actions = plan_round("a", 100, 1000, &rows, &set(&["a"]), &set(&[]));
        assert!(actions.contains(&LeaseAction::Claim("j3".into())));
    }

    #[test]
    fn a_lapsed_lease_is_taken_at_once_whatever_the_share() {
        // `b` (still heartbeating, below its share) let `j3` lapse: `a` takes it now rather
        // than leave it to `b`.
        let rows = [
            row("j1", Some("a"), 200),
            row("j2", Some("a"), 200),
            row("j3", Some("b"), 90),
        ];
        let actions = plan_round("a", 100, 1000, &rows, &set(&["a", "b"]), &set(&[]));
        assert!(
            actions.contains(&LeaseAction::Claim("j3".into())),
            "{actions:?}"
        );
    }
}
