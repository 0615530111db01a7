//! A simulated cluster's task slots, shared by the simulated jobs that run on it
//! (`[clusters.<name>] slots = N`, and `cluster = "<name>"` on `engine = "sim"` jobs).
//!
//! Each job is one slot-sharing group, as Flink's default: it needs as many slots as its widest
//! vertex. A rescale asks the pool for that many and gets at most what is free (plus what the
//! job holds already); a job that got fewer than it decided runs every vertex at
//! min(decided, granted), as Flink's adaptive scheduler runs a job on the slots it has, and
//! takes more as soon as some are free (another restart, as the adaptive scheduler's upscale
//! is). What the job observes is the parallelism it actually runs at.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

/// A simulated cluster's slots and who holds them.
#[derive(Debug)]
pub(crate) struct SlotPool {
    slots: u32,
    state: Mutex<PoolState>,
}

#[derive(Debug, Default)]
struct PoolState {
    held: BTreeMap<String, u32>,
    max_in_use: u32,
}

impl PoolState {
    fn in_use(&self) -> u32 {
        self.held.values().sum()
    }
}

/// What a pool looks like at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolUsage {
    /// The cluster's slots.
    pub(crate) slots: u32,
    /// Slots held by no job.
    pub(crate) free: u32,
    /// The most slots ever held at once.
    pub(crate) max_in_use: u32,
}

impl SlotPool {
    /// A cluster's pool of `slots` slots, none held.
    pub(crate) fn new(slots: u32) -> SlotPool {
        SlotPool {
            slots,
            state: Mutex::new(PoolState::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        // The state is a map of counts: a panic elsewhere cannot leave it half-written.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `job` wants to hold `wanted` slots: it gets at most those it holds plus the free ones.
    /// Returns what it holds now.
    pub(crate) fn acquire(&self, job: &str, wanted: u32) -> u32 {
        let mut state = self.lock();
        let own = state.held.get(job).copied().unwrap_or(0);
        let free = self.slots.saturating_sub(state.in_use() - own);
        let granted = wanted.min(free);
        state.held.insert(job.to_string(), granted);
        state.max_in_use = state.max_in_use.max(state.in_use());
        granted
    }

    /// `job` gives back every slot it holds (it ended).
    pub(crate) fn release(&self, job: &str) {
        self.lock().held.remove(job);
    }

    /// The slots `job` holds.
    pub(crate) fn held(&self, job: &str) -> u32 {
        self.lock().held.get(job).copied().unwrap_or(0)
    }

    /// The slots, the free ones, and the most ever in use.
    pub(crate) fn usage(&self) -> PoolUsage {
        let state = self.lock();
        PoolUsage {
            slots: self.slots,
            free: self.slots.saturating_sub(state.in_use()),
            max_in_use: state.max_in_use,
        }
    }
}

/// A simulated job's place on a shared cluster.
#[derive(Debug, Clone)]
pub(crate) struct Seat {
    pub(crate) pool: std::sync::Arc<SlotPool>,
    /// The job's name in the pool.
    pub(crate) job: String,
    /// The parallelism last decided for each vertex (what the job runs at once it has the
    /// slots).
    pub(crate) decided: Vec<u32>,
}

/// The slots a parallelism needs: its widest vertex (one slot-sharing group).
pub(crate) fn slots_needed(parallelism: &[u32]) -> u32 {
    parallelism.iter().copied().max().unwrap_or(0)
}

/// `decided` run on `granted` slots: no vertex wider than the slots.
pub(crate) fn capped(decided: &[u32], granted: u32) -> Vec<u32> {
    decided.iter().map(|&p| p.min(granted).max(1)).collect()
}
