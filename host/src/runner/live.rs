//! A fleet entry's current plan, shared between the fleet's supervisor (which applies a reloaded
//! configuration) and the tasks that run the entry's jobs (which take it at their next step).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::plan::JobPlan;

use super::report::EntryRun;

/// Runs of fleet entries started so far in this process: each [`LiveEntry`] takes the next
/// number, so a later run always has a larger one.
static RUNS: AtomicU64 = AtomicU64::new(0);

/// The number the next entry run will take. Whoever shows the reports of an entry it learns of
/// now (the server's view, told of a reload before the fleet starts the new entries) accepts
/// the runs from this number on, and so drops the late steps of an earlier run of the same
/// name that was still ending.
pub(crate) fn next_entry_run() -> u64 {
    RUNS.load(Ordering::SeqCst)
}

/// Takes the next run number, for an entry that starts now.
pub(crate) fn take_entry_run() -> u64 {
    RUNS.fetch_add(1, Ordering::SeqCst)
}

/// The plan one fleet entry runs with now, and whether it was removed from the fleet.
///
/// The supervisor only ever replaces the plan as a whole and bumps a generation counter; a job
/// thread compares the counter with the one it last took, so taking a change costs one atomic
/// load per step and never blocks the supervisor.
#[derive(Debug)]
pub(super) struct LiveEntry {
    plan: Mutex<Arc<JobPlan>>,
    interval_ms: AtomicI64,
    generation: AtomicU64,
    removed: AtomicBool,
    /// This run of the entry, which its jobs' reports carry.
    run: EntryRun,
}

impl LiveEntry {
    /// An entry running `plan`, cycling every `interval_ms`.
    pub(super) fn new(plan: JobPlan, interval_ms: i64) -> LiveEntry {
        let run = EntryRun {
            entry: plan.spec.name.as_str().into(),
            run: take_entry_run(),
        };
        LiveEntry {
            run,
            plan: Mutex::new(Arc::new(plan)),
            interval_ms: AtomicI64::new(interval_ms),
            generation: AtomicU64::new(0),
            removed: AtomicBool::new(false),
        }
    }

    /// The plan and cycle interval now.
    pub(super) fn current(&self) -> (Arc<JobPlan>, i64) {
        let plan = Arc::clone(&self.plan.lock().unwrap_or_else(PoisonError::into_inner));
        (plan, self.interval_ms.load(Ordering::Acquire))
    }

    /// Replaces the plan; the entry's jobs take it at their next step.
    pub(super) fn update(&self, plan: JobPlan, interval_ms: i64) {
        *self.plan.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(plan);
        self.interval_ms.store(interval_ms, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The entry left the fleet (or must restart): its jobs stop at their next step.
    pub(super) fn remove(&self) {
        self.removed.store(true, Ordering::Release);
    }

    /// This run of the entry.
    pub(super) fn run(&self) -> &EntryRun {
        &self.run
    }

    /// True once [`LiveEntry::remove`] was called.
    pub(super) fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// A follower that has seen the plan as it is now.
    pub(super) fn follow(self: &Arc<LiveEntry>) -> Follower {
        Follower {
            entry: Arc::clone(self),
            seen: self.generation.load(Ordering::Acquire),
        }
    }
}

/// One job's view of its entry: which update it took last.
#[derive(Debug)]
pub(super) struct Follower {
    entry: Arc<LiveEntry>,
    seen: u64,
}

impl Follower {
    /// The entry followed.
    pub(super) fn entry(&self) -> &LiveEntry {
        &self.entry
    }

    /// The plan and interval when they changed since the last call (or since following began).
    pub(super) fn changed(&mut self) -> Option<(Arc<JobPlan>, i64)> {
        let now = self.entry.generation.load(Ordering::Acquire);
        if now == self.seen {
            return None;
        }
        self.seen = now;
        Some(self.entry.current())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::alignment::NoCustomModes;
    use crate::config::parse_fleet;
    use crate::plan::plan_fleet;

    fn plan(mode: &str) -> JobPlan {
        let job = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/jobs/diurnal.toml");
        let text = format!(
            "[[jobs]]\nname = \"a\"\njob = {job:?}\n[jobs.config]\n\"scaling.alignment.mode\" = \"{mode}\"\n"
        );
        let fleet = parse_fleet(Path::new("fleet.toml"), &text).expect("a valid fleet");
        let mut plan = plan_fleet(fleet, &NoCustomModes).expect("a valid plan");
        plan.jobs.remove(0)
    }

    #[test]
    fn a_follower_sees_each_update_once_and_the_latest_plan() {
        let entry = Arc::new(LiveEntry::new(plan("BALANCED"), 1000));
        let mut follower = entry.follow();
        assert!(follower.changed().is_none());
        entry.update(plan("EVENLY_SPREAD"), 1000);
        entry.update(plan("OFF"), 500);
        let (latest, interval) = follower.changed().expect("an update");
        assert_eq!(latest.alignment.mode_id(), "OFF");
        assert_eq!(interval, 500);
        assert!(follower.changed().is_none());
        assert!(!entry.is_removed());
        entry.remove();
        assert!(entry.is_removed());
    }
}
