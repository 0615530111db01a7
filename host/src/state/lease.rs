//! The seam between a job's control loop and the leases of a store several hosts share: which
//! jobs this host may act on now, and the fence every rescale passes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::error::StateError;

/// Job leases of one host over a shared store.
///
/// A job thread announces its job with [`JobLeases::want`]; the leases are taken and renewed
/// elsewhere (a lease thread of the host), so [`JobLeases::held`] is a cheap look at what this
/// host holds now. A lease this host lets expire, or gives up, is not held from that instant on,
/// even before the next renewal notices.
pub trait JobLeases: Send + Sync {
    /// This host's id (`[host] id`).
    fn host_id(&self) -> &str;
    /// Asks for `job`'s lease: the host runs a loop for it and will act on it when it holds it.
    fn want(&self, job: &str);
    /// The job's loop ended: its lease, if held, is given up at the next renewal.
    fn unwant(&self, job: &str);
    /// Marks `job` as in the middle of something (a cooldown period, a rescale): it is not
    /// moved to another host to even out the load while busy, only when this host is gone.
    fn set_busy(&self, job: &str, busy: bool);
    /// Runs one lease round now (heartbeat, renew, claim what this host may) instead of
    /// waiting for the renewal thread: a run of one step (`run --once`) steps only the jobs it
    /// holds, and would otherwise step none.
    fn claim_now(&self) -> Result<(), StateError>;
    /// `job`'s lease when this host holds it now, on this host's own clock.
    fn lease(&self, job: &str) -> Option<HeldLease>;
    /// The fencing token of `job`'s lease when this host holds it now.
    fn held(&self, job: &str) -> Option<i64> {
        self.lease(job).map(|lease| lease.token)
    }
    /// The token of the last lease this host held of `job`, held now or not.
    fn last_token(&self, job: &str) -> Option<i64> {
        self.held(job)
    }
    /// How long before its lease ends on this host's clock a change must have left the host
    /// (and how long after a claim a new owner waits before it changes a job). It covers what
    /// happens between the last check and the engine applying a request (the request on the
    /// wire, the engine reading it) and a difference in pace between this host's clock and
    /// the database's.
    fn margin(&self) -> Duration {
        Duration::ZERO
    }
    /// The host holding each job this host runs a loop for, with its fencing token, as this
    /// host's last lease round left them (this host's own claims and give-ups included). A job
    /// no host holds is left out; so is everything when the last round is older than the TTL
    /// (this host cannot tell any more).
    fn owners(&self) -> BTreeMap<String, LeaseOwner>;
    /// Records a rescale of `job` to `parallelism` under `token`, in the transaction that
    /// checks that `token` is still the job's current one. `Ok` means the rescale may be sent.
    fn admit(
        &self,
        job: &str,
        token: i64,
        parallelism: &BTreeMap<String, u32>,
    ) -> Result<(), Fenced>;
}

/// A lease this host holds, on this host's monotonic clock (which goes on while the process
/// is paused: a paused host that wakes up sees at once that its time ran out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldLease {
    /// Its fencing token.
    pub token: i64,
    /// The start of the lease round that claimed it under this token: the previous holder's
    /// lease had run out in the database by then.
    pub since: Instant,
    /// When this host stops counting on it: never later than its expiry in the database.
    pub until: Instant,
}

/// The current holder of a job's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseOwner {
    /// The holder's `[host] id`.
    pub(crate) host: String,
    /// The fencing token of its lease.
    pub(crate) token: i64,
}

/// Why a rescale was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fenced {
    /// Another lease (or none) is current: this host lost the job.
    #[error(
        "fencing token {token} of this host is no longer current (the job's lease is now {} with token {current})",
        owner.as_deref().map_or_else(|| "free".to_string(), |o| format!("held by {o}"))
    )]
    Superseded {
        /// The token this host holds.
        token: i64,
        /// The current token.
        current: i64,
        /// The current holder, when the lease is held.
        owner: Option<String>,
    },
    /// The check could not be made (the database cannot be reached): the rescale is not sent,
    /// since whether this host still owns the job cannot be told.
    #[error("the fencing token cannot be checked: {0}")]
    Unavailable(String),
}
