//! What the slot arbiter of a cluster several hosts share counts with: the free slots the
//! cluster reports, less the slots other hosts granted and the cluster does not show yet
//! (their reservations in the shared database), and the reservations a round leaves behind
//! (docs/control-loop.md#several-hosts-on-one-cluster).
//!
//! A host reads the cluster's free slots as [`crate::engine::flink::FlinkSlots`] does: what
//! `/overview` reports free, less what the fleet's jobs declared and do not run yet. A grant of
//! another host is in neither until its rescale reaches the cluster (its declared slots grow
//! then): until then its reservation counts, `target - max(declared now, held)`, so that it is
//! counted once, before and after.

use super::arbiter::{SlotGrant, SlotRequest};
use crate::state::Reservation;

/// The slots other hosts reserved that the cluster does not show yet: for each reservation,
/// what it grants beyond what its job declares now (`declared`, `None` when the job cannot be
/// read: then beyond what it held when granted).
pub(crate) fn unseen(others: &[Reservation], declared: impl Fn(&str) -> Option<u32>) -> u32 {
    others
        .iter()
        .map(|r| {
            let shown = declared(&r.job).unwrap_or(r.held).max(r.held);
            r.target.saturating_sub(shown)
        })
        .fold(0u32, u32::saturating_add)
}

/// The reservations a round's `grants` leave: one per job granted more than it holds.
pub(crate) fn reservations(grants: &[SlotGrant]) -> Vec<Reservation> {
    grants
        .iter()
        .filter(|g| g.granted > g.held)
        .map(|g| Reservation {
            job: g.job.clone(),
            host: String::new(),
            held: g.held,
            target: g.granted,
        })
        .collect()
}

/// The grants of a round whose slots cannot be reserved (the shared database cannot be
/// reached): every scale-down goes through, every scale-up waits at what it holds.
pub(crate) fn queued(requests: &[SlotRequest]) -> Vec<SlotGrant> {
    requests
        .iter()
        .map(|r| SlotGrant {
            job: r.job.clone(),
            held: r.held,
            granted: if r.is_scale_down() { r.wanted } else { r.held },
            wanted: r.wanted,
            free_at_turn: 0,
        })
        .collect()
}

#[cfg(test)]
#[path = "slot_reservations_tests.rs"]
mod tests;
