//! The seam between a shared cluster's slot arbiter and a store several hosts share: the slots
//! each host granted its jobs and that the cluster does not show yet, so that two hosts never
//! hand out the same free slots (docs/control-loop.md#several-hosts-on-one-cluster).

use super::error::StateError;

/// Slots a host granted one job of a cluster and reserved until the job's rescale is realized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// The job (its name in the fleet, the key of its lease).
    pub(crate) job: String,
    /// The host that granted them (ignored in what a round records: it is the recording host).
    pub(crate) host: String,
    /// The slots the job held (had declared) when they were granted.
    pub(crate) held: u32,
    /// The slots it may hold once its rescale is realized.
    pub(crate) target: u32,
}

/// What a round of one cluster does under the cluster's lock: given the live reservations of
/// the other hosts, it arbitrates and returns this host's reservations to record.
pub(crate) type LedgerRound<'a> = dyn FnMut(&[Reservation]) -> Vec<Reservation> + 'a;

/// The slot reservations of the hosts sharing a store, per cluster.
pub trait SlotLedger: Send + Sync + std::fmt::Debug {
    /// Runs `round` for `cluster` while no other host runs one for it, then records what it
    /// returns as this host's reservations of the cluster (replacing this host's earlier ones).
    /// A reservation lives until it is released, its job's lease is no longer held under the
    /// token it was made with, or the lease TTL passed since it was made.
    fn round(&self, cluster: &str, round: &mut LedgerRound<'_>) -> Result<(), StateError>;
    /// `job`'s reservation on `cluster` is over: its rescale was realized (the cluster shows
    /// it now) or not sent.
    fn release(&self, cluster: &str, job: &str) -> Result<(), StateError>;
}
