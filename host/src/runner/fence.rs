//! The fence of a job's changes when several hosts share the fleet's state: a rescale leaves
//! the host only under the job's lease, checked again right before every request of it.
//!
//! The database's fence ([`JobLeases::admit`]) proves that this host held the lease when it
//! decided to rescale, but a change is several requests, each of which may be retried, and
//! the host may be paused between any two of them (a stop signal, a long GC-like stall, a slow
//! network): a retry sent after the pause would overwrite what the job's next owner did
//! meanwhile. So a change gets a deadline inside the lease, on this host's own monotonic clock,
//! and every attempt asks [`ChangeFence::check`] first:
//!
//! - the lease must still be held under the token the change was admitted with;
//! - the deadline (the lease's end here, less [`JobLeases::margin`]) must not have passed;
//!   each attempt is bounded by the time left, so none outlives it;
//! - a change starts no earlier than a margin after the lease was claimed: the previous
//!   owner's deadline ran out a margin before its lease did, which the database saw end before
//!   this claim, so this wait only widens a gap that is already there.
//!
//! What no check on this side can stop is a request already written to the socket before the
//! host paused: the engine applies it when it reads it. It left before the deadline, so it is
//! harmless as long as the engine applies it within the margin (see
//! docs/hosts.md, "The window no client-side fence can close").

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::WriteFence;
use crate::state::JobLeases;

/// A job's lease as its runner acts under it: the leases of this host and the token it took
/// the job with.
pub(super) struct LeaseFence {
    leases: Arc<dyn JobLeases>,
    job: String,
    token: i64,
}

impl LeaseFence {
    pub(super) fn new(leases: Arc<dyn JobLeases>, job: &str, token: i64) -> LeaseFence {
        LeaseFence {
            leases,
            job: job.to_string(),
            token,
        }
    }

    /// The leases, for the database's fence.
    pub(super) fn leases(&self) -> &dyn JobLeases {
        self.leases.as_ref()
    }

    /// The token the job was taken with.
    pub(super) fn token(&self) -> i64 {
        self.token
    }

    /// The fence of one change starting now, its deadline fixed from the lease as it is now;
    /// `Err` with the reason when the lease cannot carry a change any more. Waits first, when
    /// the lease was claimed less than a margin ago (see the module's notes).
    pub(super) fn for_change(&self) -> Result<ChangeFence<'_>, String> {
        let margin = self.leases.margin();
        let lease = self.current()?;
        let settled = lease.since + margin;
        let now = Instant::now();
        if now < settled {
            std::thread::sleep(settled - now);
        }
        let lease = self.current()?;
        let deadline = lease.until.checked_sub(margin).unwrap_or(lease.since);
        if deadline <= Instant::now() {
            return Err(format!(
                "the job's lease (fencing token {}) ends within its margin of {} ms on this host's clock",
                self.token,
                margin.as_millis()
            ));
        }
        Ok(ChangeFence {
            fence: self,
            deadline,
        })
    }

    /// The lease, when it is still held under the token the job was taken with.
    fn current(&self) -> Result<crate::state::HeldLease, String> {
        match self.leases.lease(&self.job) {
            Some(lease) if lease.token == self.token => Ok(lease),
            Some(lease) => Err(format!(
                "the job's lease was lost and claimed again under fencing token {} since this \
                 change was admitted under token {}",
                lease.token, self.token
            )),
            None => Err(format!(
                "host {} no longer holds the job's lease (fencing token {})",
                self.leases.host_id(),
                self.token
            )),
        }
    }
}

/// The fence of one change: the lease it was admitted under, and its deadline.
pub(super) struct ChangeFence<'a> {
    fence: &'a LeaseFence,
    deadline: Instant,
}

impl WriteFence for ChangeFence<'_> {
    fn check(&self) -> Result<Option<Duration>, String> {
        self.fence.current()?;
        let now = Instant::now();
        match self.deadline.checked_duration_since(now) {
            Some(left) if !left.is_zero() => Ok(Some(left)),
            _ => Err(format!(
                "the change's deadline, {} ms before the end of the job's lease (fencing token {}) \
                 on this host's clock, passed {} ms ago",
                self.fence.leases.margin().as_millis(),
                self.fence.token,
                now.saturating_duration_since(self.deadline).as_millis()
            )),
        }
    }

    fn writer(&self) -> Option<(&str, i64)> {
        Some((self.fence.leases.host_id(), self.fence.token))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::*;
    use crate::state::{Fenced, HeldLease, LeaseOwner, StateError};

    /// Leases whose one job's lease the test sets.
    struct Leases {
        lease: Mutex<Option<HeldLease>>,
        margin: Duration,
    }

    impl JobLeases for Leases {
        fn host_id(&self) -> &str {
            "a"
        }
        fn want(&self, _: &str) {}
        fn unwant(&self, _: &str) {}
        fn set_busy(&self, _: &str, _: bool) {}
        fn claim_now(&self) -> Result<(), StateError> {
            Ok(())
        }
        fn lease(&self, _: &str) -> Option<HeldLease> {
            (*self.lease.lock().expect("lease")).filter(|l| Instant::now() < l.until)
        }
        fn margin(&self) -> Duration {
            self.margin
        }
        fn owners(&self) -> BTreeMap<String, LeaseOwner> {
            BTreeMap::new()
        }
        fn admit(&self, _: &str, _: i64, _: &BTreeMap<String, u32>) -> Result<(), Fenced> {
            Ok(())
        }
    }

    fn leases(token: i64, since: Instant, until: Instant, margin_ms: u64) -> Arc<Leases> {
        Arc::new(Leases {
            lease: Mutex::new(Some(HeldLease {
                token,
                since,
                until,
            })),
            margin: Duration::from_millis(margin_ms),
        })
    }

    fn ago(ms: u64) -> Instant {
        let now = Instant::now();
        now.checked_sub(Duration::from_millis(ms)).unwrap_or(now)
    }

    #[test]
    fn a_change_is_bounded_by_the_lease_less_the_margin_and_names_its_writer() {
        let leases = leases(
            7,
            ago(5_000),
            Instant::now() + Duration::from_millis(900),
            300,
        );
        let fence = LeaseFence::new(leases.clone(), "j", 7);
        let change = fence.for_change().expect("a change may start");
        let left = change.check().expect("may send").expect("a deadline");
        assert!(left <= Duration::from_millis(600), "{left:?}");
        assert!(left > Duration::from_millis(400), "{left:?}");
        assert_eq!(change.writer(), Some(("a", 7)));
    }

    #[test]
    fn nothing_leaves_once_the_lease_is_lost_or_claimed_again_or_past_the_deadline() {
        let until = Instant::now() + Duration::from_millis(400);
        let leases = leases(7, ago(5_000), until, 100);
        let fence = LeaseFence::new(leases.clone(), "j", 7);
        let change = fence.for_change().expect("a change may start");
        assert!(change.check().is_ok());
        // Claimed again under a newer token (lost and taken back between two attempts).
        *leases.lease.lock().expect("lease") = Some(HeldLease {
            token: 9,
            since: Instant::now(),
            until,
        });
        let why = change.check().expect_err("another token");
        assert!(why.contains("token 9") && why.contains("token 7"), "{why}");
        // Lost.
        *leases.lease.lock().expect("lease") = None;
        assert!(
            change
                .check()
                .expect_err("lost")
                .contains("no longer holds")
        );
        // Held again under its own token, but the deadline (300 ms from the start) passed,
        // although the lease itself has 100 ms left.
        *leases.lease.lock().expect("lease") = Some(HeldLease {
            token: 7,
            since: ago(5_000),
            until,
        });
        std::thread::sleep(
            until.saturating_duration_since(Instant::now()) - Duration::from_millis(60),
        );
        let why = change.check().expect_err("past the deadline");
        assert!(why.contains("deadline"), "{why}");
    }

    #[test]
    fn a_lease_within_its_margin_of_the_end_carries_no_change() {
        let leases = leases(
            3,
            ago(5_000),
            Instant::now() + Duration::from_millis(100),
            200,
        );
        let fence = LeaseFence::new(leases, "j", 3);
        let why = fence.for_change().err().expect("refused");
        assert!(why.contains("within its margin"), "{why}");
    }

    #[test]
    fn a_lease_just_claimed_waits_a_margin_before_its_first_change() {
        let claimed = Instant::now();
        let leases = leases(4, claimed, claimed + Duration::from_secs(10), 250);
        let fence = LeaseFence::new(leases, "j", 4);
        let change = fence.for_change().expect("a change may start");
        assert!(claimed.elapsed() >= Duration::from_millis(250));
        assert!(change.check().is_ok());
    }
}
