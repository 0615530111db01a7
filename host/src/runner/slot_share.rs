//! One arbiter per cluster: the jobs of a shared cluster step in rounds, and the rescales due
//! in a round share the cluster's free slots through [`arbitrate`].
//!
//! On a virtual clock (a simulated cluster) a round is an instant of the jobs' clock. Every job
//! of the cluster steps in lockstep (no job steps at an instant while another is still behind
//! it): the jobs due at the instant prepare their step (observe, decide, cool down) and submit
//! what their rescale asks for; once every one of them has, the round is arbitrated against
//! the free slots the cluster's [`SlotSource`] reports, the scale-downs are realized first
//! (their slots are then free), and then the scale-ups within their grants.
//!
//! On the wall clock (a Flink cluster) no job waits for another to catch up: a round gathers
//! the steps that come within [`GATHER`] of its first one (the jobs of one cluster started
//! together are due together), or until every job of the cluster submitted; then it is
//! arbitrated the same way. A job due while a round's turns are being realized is in the next.
//!
//! The slots come from a [`SlotSource`]: a simulated cluster's pool, or a Flink cluster's
//! REST API ([`FlinkSlots`]). When several hosts share a PostgreSQL state, each host's arbiter
//! arbitrates its own jobs of a Flink cluster under the cluster's lock in the shared database
//! (a [`SlotLedger`]): it counts with the cluster's free slots less what the other hosts
//! granted and the cluster does not show yet, and reserves what it grants until the job's
//! rescale is realized (see [`super::slot_reservations`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::arbiter::{SlotGrant, SlotRequest, arbitrate};
use super::slot_reservations::{queued, reservations, unseen};
use crate::config::SimClusterSpec;
use crate::engine::flink::FlinkSlots;
use crate::sim::SlotPool;
use crate::state::SlotLedger;

/// How long a wall-clock round waits for the cluster's other jobs to submit after its first
/// one did (at most half the job's interval): long enough for the jobs of one cluster that
/// are due together to observe and decide, short enough not to delay a rescale noticeably.
pub(crate) const GATHER: Duration = Duration::from_secs(3);

/// A cluster's slots as an arbiter needs them.
pub(crate) trait SlotSource: Send + Sync {
    /// The slots held by no job now; `None` when they cannot be read (then every request is
    /// granted as asked: the cluster itself has the last word).
    fn free(&self) -> Option<u32>;
    /// The slots `job` holds, when the source knows better than the job's last observation
    /// (a restart under way already holds its new slots).
    fn held(&self, job: &str) -> Option<u32>;
    /// `job` left the cluster: what it held is free.
    fn release(&self, job: &str);
}

impl SlotSource for SlotPool {
    fn free(&self) -> Option<u32> {
        Some(self.usage().free)
    }
    fn held(&self, job: &str) -> Option<u32> {
        Some(SlotPool::held(self, job))
    }
    fn release(&self, job: &str) {
        SlotPool::release(self, job);
    }
}

impl SlotSource for FlinkSlots {
    fn free(&self) -> Option<u32> {
        match FlinkSlots::free(self) {
            Ok(free) => free,
            Err(err) => {
                tracing::debug!(%err, "cannot read the cluster's free slots");
                None
            }
        }
    }
    fn held(&self, job: &str) -> Option<u32> {
        self.job(job).ok().map(|slots| slots.declared)
    }
    fn release(&self, job: &str) {
        self.leave(job);
    }
}

/// What a job of the round may do with its rescale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Not yet: the round is not arbitrated, or scale-downs of the round are still being
    /// realized.
    Wait,
    /// Go on with this grant (`None`: no rescale, or no arbitration).
    Go(Option<SlotGrant>),
}

#[derive(Debug)]
struct Member {
    /// The instant of its next step; `None` before its first (its clock not started).
    next_ms: Option<i64>,
    /// What it submitted for the round at `next_ms`.
    submitted: Option<Option<SlotRequest>>,
    /// Its turn, once the round is arbitrated.
    turn: Option<Option<SlotGrant>>,
    /// The slots it held at its first round: what a job of a higher priority leaves it.
    floor: Option<u32>,
    /// On the wall clock, another host steps it now (this host lost or never won its lease):
    /// the rounds here do not wait for it until it submits again.
    away: bool,
}

#[derive(Debug, Default)]
struct Rounds {
    members: BTreeMap<String, Member>,
    /// Scale-downs of the arbitrated round not yet realized: the scale-ups wait for them.
    downs_left: usize,
    /// The wall-clock round.
    gather: Gather,
}

/// A wall-clock round: the steps it gathered, then the turns they were given.
#[derive(Debug, Default)]
struct Gather {
    /// When the round resolves at the latest (set by its first step).
    deadline: Option<Instant>,
    /// The steps gathered, with what they ask for.
    submitted: BTreeMap<String, Option<SlotRequest>>,
    /// Once arbitrated: the turns not yet realized.
    turns: Option<BTreeMap<String, Option<SlotGrant>>>,
    /// Being arbitrated (the free slots are read without the lock).
    resolving: bool,
    /// Steps submitted while the turns are realized: the next round's, with their deadline.
    next: BTreeMap<String, (Option<SlotRequest>, Instant)>,
}

impl Rounds {
    /// True when another job's turn of the round, not yet realized, comes before `job`'s
    /// `turn`: scale-downs first, then the others, each in the order of their names.
    fn realized_first(&self, job: &str, turn: &Option<SlotGrant>) -> bool {
        let own = realization_key(job, turn);
        self.members.iter().any(|(name, m)| {
            name.as_str() != job
                && m.turn
                    .as_ref()
                    .is_some_and(|other| realization_key(name, other) < own)
        })
    }
}

/// Where a turn comes in its round's realization: scale-downs (false sorts first), then by name.
fn realization_key<'a>(job: &'a str, turn: &Option<SlotGrant>) -> (bool, &'a str) {
    let down = turn.as_ref().is_some_and(SlotGrant::is_scale_down);
    (!down, job)
}

/// A shared cluster: its slots, its arbiter and the lockstep of its jobs.
pub(crate) struct SharedCluster {
    name: String,
    source: Arc<dyn SlotSource>,
    /// The simulated cluster's pool, which its jobs join.
    pool: Option<Arc<SlotPool>>,
    /// The Flink cluster's slots, which its jobs join.
    flink: Option<Arc<FlinkSlots>>,
    /// Where the hosts sharing the cluster reserve the slots they grant (several hosts on one
    /// database), under the cluster's key.
    ledger: Option<(Arc<dyn SlotLedger>, String)>,
    /// False: the jobs only step in lockstep, each rescale sent as decided (the cluster gives
    /// what it has), for comparison.
    arbiter: bool,
    /// True where a job's own steps take slots first-come (a simulated cluster's pool: an
    /// observation takes slots freed since the last one, a rescale takes what is free): the
    /// jobs due at an instant then prepare one after another in the order of their names, and
    /// realize their turns one after another (scale-downs first, then the others, each in the
    /// order of their names), so that a run gives the same result whatever the threads' timing.
    ordered: bool,
    rounds: Mutex<Rounds>,
}

impl std::fmt::Debug for SharedCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedCluster")
            .field("name", &self.name)
            .field("arbiter", &self.arbiter)
            .finish_non_exhaustive()
    }
}

impl SharedCluster {
    fn lock(&self) -> MutexGuard<'_, Rounds> {
        // Counts and small maps, each update complete under the lock.
        self.rounds.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cluster's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The simulated cluster's pool.
    pub(crate) fn pool(&self) -> Option<&Arc<SlotPool>> {
        self.pool.as_ref()
    }

    /// `job` will run on the cluster: the others wait for its first step at each instant
    /// from now on.
    pub(crate) fn expect(&self, job: &str) {
        self.lock()
            .members
            .entry(job.to_string())
            .or_insert(Member {
                next_ms: None,
                submitted: None,
                turn: None,
                floor: None,
                away: false,
            });
    }

    /// On the wall clock: this host does not step `job` now (another host holds its lease).
    /// It still runs on the cluster, holding its slots, so nothing is released; the rounds
    /// here stop waiting for it, and one that waited only for it is arbitrated at the next
    /// poll. Its next [`SharedCluster::submit_wall`] makes it a member again.
    pub(crate) fn stand_aside(&self, job: &str) {
        if let Some(member) = self.lock().members.get_mut(job) {
            member.away = true;
        }
    }

    /// `job` left (its run ended, or it could not start): its slots are free, and a round
    /// waiting for it goes on.
    pub(crate) fn leave(&self, job: &str) {
        let mut rounds = self.lock();
        if let Some(member) = rounds.members.remove(job)
            && let Some(Some(grant)) = member.turn
            && grant.is_scale_down()
        {
            rounds.downs_left = rounds.downs_left.saturating_sub(1);
        }
        rounds.gather.submitted.remove(job);
        rounds.gather.next.remove(job);
        if let Some(turns) = rounds.gather.turns.as_mut()
            && let Some(Some(grant)) = turns.remove(job)
            && grant.is_scale_down()
        {
            rounds.downs_left = rounds.downs_left.saturating_sub(1);
        }
        Self::next_gather(&mut rounds);
        self.source.release(job);
        self.try_resolve(&mut rounds);
        drop(rounds);
        self.release_reserved(job);
    }

    /// Gives `job`'s reservation up, if the cluster's slots are shared with other hosts.
    fn release_reserved(&self, job: &str) {
        if let Some((ledger, key)) = &self.ledger
            && let Err(err) = ledger.release(key, job)
        {
            // It lapses with the lease TTL.
            tracing::warn!(cluster = %self.name, job, %err, "cannot release a slot reservation");
        }
    }

    /// True when `job` may step at `now_ms`: no other job of the cluster is behind it (and, on
    /// an ordered cluster, every job due at `now_ms` whose name comes first has prepared).
    pub(crate) fn may_step(&self, job: &str, now_ms: i64) -> bool {
        let mut rounds = self.lock();
        if let Some(member) = rounds.members.get_mut(job) {
            member.next_ms = Some(now_ms);
        }
        rounds
            .members
            .iter()
            .filter(|(name, _)| name.as_str() != job)
            .all(|(name, m)| {
                m.next_ms.is_some_and(|next| next >= now_ms)
                    && !(self.ordered
                        && name.as_str() < job
                        && m.next_ms == Some(now_ms)
                        && m.submitted.is_none())
            })
    }

    /// `request` with what the source knows the job holds: a job asking to keep what it holds
    /// keeps what the cluster gave it.
    fn with_held(&self, job: &str, request: Option<SlotRequest>) -> Option<SlotRequest> {
        request.map(|mut request| {
            if let Some(held) = self.source.held(job) {
                if request.wanted == request.held {
                    request.wanted = held;
                }
                request.held = held;
            }
            request
        })
    }

    /// `job` prepared its step at `now_ms`, with what its rescale asks for.
    pub(crate) fn submit(&self, job: &str, now_ms: i64, request: Option<SlotRequest>) {
        let request = self.with_held(job, request);
        let mut rounds = self.lock();
        let mut request = request;
        if let Some(member) = rounds.members.get_mut(job) {
            if let Some(request) = request.as_mut() {
                request.floor = *member.floor.get_or_insert(request.held);
            }
            member.next_ms = Some(now_ms);
            member.submitted = Some(request);
        }
        self.try_resolve(&mut rounds);
    }

    /// `job`'s turn in the round it submitted to.
    pub(crate) fn turn(&self, job: &str) -> Turn {
        let rounds = self.lock();
        let Some(member) = rounds.members.get(job) else {
            return Turn::Go(None);
        };
        match &member.turn {
            None => Turn::Wait,
            Some(Some(grant)) if !grant.is_scale_down() && rounds.downs_left > 0 => Turn::Wait,
            Some(turn) if self.ordered && rounds.realized_first(job, turn) => Turn::Wait,
            Some(grant) => Turn::Go(grant.clone()),
        }
    }

    /// `job` realized its turn; its next step is at `next_ms`.
    pub(crate) fn done(&self, job: &str, next_ms: i64) {
        let mut rounds = self.lock();
        let Some(member) = rounds.members.get_mut(job) else {
            return;
        };
        let was_down = matches!(&member.turn, Some(Some(grant)) if grant.is_scale_down());
        member.turn = None;
        member.submitted = None;
        member.next_ms = Some(next_ms);
        if was_down {
            rounds.downs_left = rounds.downs_left.saturating_sub(1);
        }
    }

    /// On the wall clock: `job` prepared a step, with what its rescale asks for; the round it
    /// joins resolves by `deadline` at the latest.
    pub(crate) fn submit_wall(&self, job: &str, request: Option<SlotRequest>, deadline: Instant) {
        let request = self.with_held(job, request);
        let mut rounds = self.lock();
        let mut request = request;
        if let Some(member) = rounds.members.get_mut(job) {
            member.away = false;
            if let Some(request) = request.as_mut() {
                request.floor = *member.floor.get_or_insert(request.held);
            }
        }
        let gather = &mut rounds.gather;
        if gather.turns.is_some() || gather.resolving {
            gather.next.insert(job.to_string(), (request, deadline));
        } else {
            gather.deadline.get_or_insert(deadline);
            gather.submitted.insert(job.to_string(), request);
        }
    }

    /// On the wall clock: `job`'s turn in the round it submitted to, arbitrating the round
    /// when it is complete or its deadline passed.
    pub(crate) fn turn_wall(&self, job: &str, now: Instant) -> Turn {
        self.resolve_wall(now);
        let rounds = self.lock();
        let Some(turns) = rounds.gather.turns.as_ref() else {
            return Turn::Wait;
        };
        match turns.get(job) {
            None => Turn::Wait,
            Some(Some(grant)) if !grant.is_scale_down() && rounds.downs_left > 0 => Turn::Wait,
            Some(grant) => Turn::Go(grant.clone()),
        }
    }

    /// On the wall clock: `job` realized its turn.
    pub(crate) fn done_wall(&self, job: &str) {
        let mut rounds = self.lock();
        let Some(turns) = rounds.gather.turns.as_mut() else {
            return;
        };
        let turn = turns.remove(job);
        if let Some(Some(grant)) = &turn
            && grant.is_scale_down()
        {
            rounds.downs_left = rounds.downs_left.saturating_sub(1);
        }
        Self::next_gather(&mut rounds);
        drop(rounds);
        // Realized (the cluster shows the job's new slots as declared) or not sent.
        if let Some(Some(grant)) = turn
            && grant.granted > grant.held
        {
            self.release_reserved(job);
        }
    }

    /// Once every turn of an arbitrated round is realized, the steps that came meanwhile make
    /// the next round.
    fn next_gather(rounds: &mut Rounds) {
        let gather = &mut rounds.gather;
        if gather.turns.as_ref().is_some_and(BTreeMap::is_empty) {
            gather.turns = None;
            gather.deadline = gather.next.values().map(|(_, deadline)| *deadline).min();
            gather.submitted = std::mem::take(&mut gather.next)
                .into_iter()
                .map(|(job, (request, _))| (job, request))
                .collect();
        }
    }

    /// Arbitrates the wall-clock round once every job of the cluster submitted to it or its
    /// deadline passed. The free slots are read without the lock (a REST call on Flink).
    fn resolve_wall(&self, now: Instant) {
        let requests: Vec<SlotRequest> = {
            let mut rounds = self.lock();
            let all_in = rounds
                .members
                .iter()
                .filter(|(_, member)| !member.away)
                .all(|(job, _)| rounds.gather.submitted.contains_key(job));
            let gather = &mut rounds.gather;
            let due = gather.deadline.is_some_and(|deadline| now >= deadline);
            if gather.turns.is_some()
                || gather.resolving
                || gather.submitted.is_empty()
                || !(all_in || due)
            {
                return;
            }
            gather.resolving = true;
            gather.submitted.values().flatten().cloned().collect()
        };
        let grants = if !self.arbiter || requests.is_empty() {
            Vec::new()
        } else if let Some((ledger, key)) = &self.ledger {
            self.arbitrate_shared(ledger.as_ref(), key, &requests)
        } else {
            self.source
                .free()
                .map_or_else(Vec::new, |free| arbitrate(free, &requests))
        };
        let mut rounds = self.lock();
        rounds.downs_left = grants.iter().filter(|g| g.is_scale_down()).count();
        let gather = &mut rounds.gather;
        gather.resolving = false;
        let turns = std::mem::take(&mut gather.submitted)
            .into_keys()
            .map(|job| {
                let grant = grants.iter().find(|g| g.job == job).cloned();
                (job, grant)
            })
            .collect();
        gather.turns = Some(turns);
        gather.deadline = None;
    }

    /// Arbitrates `requests` under the cluster's lock in the shared database: with the free
    /// slots less the other hosts' reservations the cluster does not show yet, and reserving
    /// what is granted. When the database cannot be reached no slot is handed out.
    fn arbitrate_shared(
        &self,
        ledger: &dyn SlotLedger,
        key: &str,
        requests: &[SlotRequest],
    ) -> Vec<SlotGrant> {
        let mut grants = Vec::new();
        let result = ledger.round(key, &mut |others| {
            grants = match self.source.free() {
                Some(free) => {
                    let unseen = unseen(others, |job| self.source.held(job));
                    arbitrate(free.saturating_sub(unseen), requests)
                }
                None => Vec::new(),
            };
            reservations(&grants)
        });
        match result {
            Ok(()) => grants,
            Err(err) => {
                tracing::warn!(cluster = %self.name, %err, "cannot reserve slots: scale-ups wait");
                queued(requests)
            }
        }
    }

    /// Arbitrates the round at the earliest instant once every job due then has submitted.
    fn try_resolve(&self, rounds: &mut Rounds) {
        let Some(now_ms) = rounds.members.values().filter_map(|m| m.next_ms).min() else {
            return;
        };
        let due: Vec<&String> = rounds
            .members
            .iter()
            .filter(|(_, m)| m.next_ms == Some(now_ms))
            .map(|(name, _)| name)
            .collect();
        let ready = rounds.members.values().all(|m| m.next_ms.is_some())
            && due.iter().all(|name| {
                rounds.members[*name].submitted.is_some() && rounds.members[*name].turn.is_none()
            });
        if !ready || due.is_empty() {
            return;
        }
        let due: Vec<String> = due.into_iter().cloned().collect();
        let requests: Vec<SlotRequest> = due
            .iter()
            .filter_map(|name| rounds.members[name].submitted.clone().flatten())
            .collect();
        let grants: Vec<SlotGrant> = match self.source.free().filter(|_| self.arbiter) {
            Some(free) => arbitrate(free, &requests),
            None => Vec::new(),
        };
        rounds.downs_left = grants.iter().filter(|g| g.is_scale_down()).count();
        for name in due {
            let grant = grants.iter().find(|g| g.job == name).cloned();
            if let Some(member) = rounds.members.get_mut(&name) {
                member.turn = Some(grant);
            }
        }
    }
}

/// The shared clusters of a fleet run, by name.
#[derive(Debug)]
pub(crate) struct ClusterShares {
    arbiter: bool,
    /// Where the hosts sharing a database reserve the slots their arbiters grant.
    ledger: Option<Arc<dyn SlotLedger>>,
    clusters: Mutex<BTreeMap<String, Arc<SharedCluster>>>,
}

impl ClusterShares {
    /// No cluster yet; with `arbiter` false, the jobs of a shared cluster decide alone.
    pub(crate) fn new(arbiter: bool) -> ClusterShares {
        ClusterShares {
            arbiter,
            ledger: None,
            clusters: Mutex::new(BTreeMap::new()),
        }
    }

    /// The Flink clusters' slots are shared with the other hosts of `ledger` (a shared state).
    pub(crate) fn with_ledger(mut self, ledger: Option<Arc<dyn SlotLedger>>) -> ClusterShares {
        self.ledger = ledger;
        self
    }

    /// The shared cluster of the Flink cluster `key` (its `[clusters.<name>]`, or its REST
    /// address; see [`crate::engine::flink::cluster_key`]), reached through `client`, made at
    /// its first use; `job` (Flink id `id`) joins it.
    pub(crate) fn flink(
        &self,
        key: &str,
        client: &crate::engine::flink::FlinkClient,
        job: &str,
        id: &str,
    ) -> Arc<SharedCluster> {
        let mut clusters = self.clusters.lock().unwrap_or_else(PoisonError::into_inner);
        let (share, slots) = match clusters.get(key).and_then(|c| Some((c, c.flink.clone()?))) {
            Some((share, slots)) => (Arc::clone(share), slots),
            None => {
                let slots = Arc::new(FlinkSlots::new(client.clone()));
                let share = Arc::new(SharedCluster {
                    name: key.trim_start_matches("cluster:").to_string(),
                    source: Arc::clone(&slots) as Arc<dyn SlotSource>,
                    pool: None,
                    flink: Some(Arc::clone(&slots)),
                    ledger: self
                        .ledger
                        .as_ref()
                        .map(|ledger| (Arc::clone(ledger), key.to_string())),
                    arbiter: self.arbiter,
                    // Wall-clock rounds gather by deadline and order their own turns.
                    ordered: false,
                    rounds: Mutex::new(Rounds::default()),
                });
                clusters.insert(key.to_string(), Arc::clone(&share));
                (share, slots)
            }
        };
        slots.join(job, id);
        share
    }

    /// The shared cluster of a simulated `[clusters.<name>]`, made at its first use.
    pub(crate) fn simulated(&self, spec: &SimClusterSpec) -> Arc<SharedCluster> {
        let mut clusters = self.clusters.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(clusters.entry(spec.name.clone()).or_insert_with(|| {
            let pool = Arc::new(SlotPool::new(spec.slots));
            Arc::new(SharedCluster {
                name: spec.name.clone(),
                source: Arc::clone(&pool) as Arc<dyn SlotSource>,
                pool: Some(pool),
                flink: None,
                ledger: None,
                arbiter: self.arbiter,
                ordered: true,
                rounds: Mutex::new(Rounds::default()),
            })
        }))
    }
}

#[cfg(test)]
#[path = "slot_share_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "slot_share_pg_tests.rs"]
mod pg_tests;
