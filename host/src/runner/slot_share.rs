//! One arbiter per cluster: the jobs of a shared cluster step in rounds, and the rescales due
//! in a round share the cluster's free slots through [`arbitrate`].
//!
//! A round is an instant of the jobs' clock. Every job of the cluster steps in lockstep (no job
//! steps at an instant while another is still behind it): the jobs due at the instant prepare
//! their step (observe, decide, cool down) and submit what their rescale asks for; once every
//! one of them has, the round is arbitrated against the free slots the cluster's
//! [`SlotSource`] reports, the scale-downs are realized first (their slots are then free), and
//! then the scale-ups within their grants.
//!
//! The slots come from a [`SlotSource`]: a simulated cluster's pool today. The same seam takes
//! a Flink cluster's (`/overview`'s `slots-available` and `slots-total`, bounded by
//! `slotmanager.number-of-slots.max`) and a source several hosts share through their
//! PostgreSQL state (the free slots of a cluster, and the holdings of each job, in a table
//! every host's arbiter reads and updates under the round's transaction).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::arbiter::{SlotGrant, SlotRequest, arbitrate};
use crate::config::SimClusterSpec;
use crate::sim::SlotPool;

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
}

#[derive(Debug, Default)]
struct Rounds {
    members: BTreeMap<String, Member>,
    /// Scale-downs of the arbitrated round not yet realized: the scale-ups wait for them.
    downs_left: usize,
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
            });
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
        self.source.release(job);
        self.try_resolve(&mut rounds);
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

    /// `job` prepared its step at `now_ms`, with what its rescale asks for.
    pub(crate) fn submit(&self, job: &str, now_ms: i64, request: Option<SlotRequest>) {
        let mut rounds = self.lock();
        let mut request = request.map(|mut request| {
            if let Some(held) = self.source.held(job) {
                // A job asking to keep what it holds keeps what the cluster gave it.
                if request.wanted == request.held {
                    request.wanted = held;
                }
                request.held = held;
            }
            request
        });
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
    clusters: Mutex<BTreeMap<String, Arc<SharedCluster>>>,
}

impl ClusterShares {
    /// No cluster yet; with `arbiter` false, the jobs of a shared cluster decide alone.
    pub(crate) fn new(arbiter: bool) -> ClusterShares {
        ClusterShares {
            arbiter,
            clusters: Mutex::new(BTreeMap::new()),
        }
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
