//! The order of a shared cluster's rounds: on a simulated cluster the jobs due at an instant
//! prepare, and realize their turns, one after another in a fixed order, whatever order their
//! threads arrive in.

use super::*;
use crate::config::SimClusterSpec;

fn cluster(slots: u32, arbiter: bool, jobs: &[&str]) -> Arc<SharedCluster> {
    let shares = ClusterShares::new(arbiter);
    let spec = SimClusterSpec {
        name: "c".to_string(),
        slots,
    };
    let cluster = shares.simulated(&spec);
    for job in jobs {
        cluster.expect(job);
    }
    cluster
}

fn request(job: &str, held: u32, wanted: u32) -> SlotRequest {
    SlotRequest {
        job: job.to_string(),
        held,
        wanted,
        priority: 0,
        lag_growth: 0.0,
        floor: held,
    }
}

#[test]
fn jobs_due_at_an_instant_prepare_in_the_order_of_their_names() {
    let c = cluster(8, false, &["a", "b", "c"]);
    for job in ["a", "b", "c"] {
        // Every job has arrived at instant 0 (its clock started), none has prepared.
        c.lock().members.get_mut(job).unwrap().next_ms = Some(0);
    }
    assert!(!c.may_step("c", 0), "c goes after a and b");
    assert!(!c.may_step("b", 0), "b goes after a");
    assert!(c.may_step("a", 0));
    c.submit("a", 0, None);
    assert!(!c.may_step("c", 0), "b has not prepared yet");
    assert!(c.may_step("b", 0));
    c.submit("b", 0, None);
    assert!(c.may_step("c", 0));
}

#[test]
fn turns_are_realized_scale_downs_first_then_by_name() {
    let c = cluster(8, true, &["a", "b", "c"]);
    for job in ["a", "b", "c"] {
        c.lock().members.get_mut(job).unwrap().next_ms = Some(0);
    }
    // "a" and "b" grow by one slot each, "c" shrinks from 4 to 2: 8 - (4 + 1 + 1) = 2 free.
    c.pool().unwrap().acquire("a", 1);
    c.pool().unwrap().acquire("b", 1);
    c.pool().unwrap().acquire("c", 4);
    assert!(c.may_step("a", 0));
    c.submit("a", 0, Some(request("a", 1, 2)));
    assert!(c.may_step("b", 0));
    c.submit("b", 0, Some(request("b", 1, 2)));
    assert!(c.may_step("c", 0));
    c.submit("c", 0, Some(request("c", 4, 2)));
    // The scale-down of "c" goes first, then "a", then "b".
    assert_eq!(c.turn("a"), Turn::Wait);
    assert_eq!(c.turn("b"), Turn::Wait);
    assert!(matches!(c.turn("c"), Turn::Go(Some(_))));
    c.done("c", 10);
    assert_eq!(c.turn("b"), Turn::Wait, "a comes before b");
    assert!(matches!(c.turn("a"), Turn::Go(Some(_))));
    c.done("a", 10);
    assert!(matches!(c.turn("b"), Turn::Go(Some(_))));
}

#[test]
fn without_an_arbiter_a_simulated_cluster_realizes_turns_in_the_order_of_names_too() {
    let c = cluster(8, false, &["a", "b"]);
    for job in ["a", "b"] {
        c.lock().members.get_mut(job).unwrap().next_ms = Some(0);
    }
    assert!(c.may_step("a", 0));
    c.submit("a", 0, Some(request("a", 0, 6)));
    assert!(c.may_step("b", 0));
    c.submit("b", 0, Some(request("b", 0, 6)));
    // No arbitration: both go as decided, but "b" only after "a" realized its rescale, so
    // that the pool's first-come answer is always "a" first.
    assert_eq!(c.turn("b"), Turn::Wait);
    assert_eq!(c.turn("a"), Turn::Go(None));
    c.done("a", 10);
    assert_eq!(c.turn("b"), Turn::Go(None));
}

/// Wall-clock rounds (Flink clusters): a round gathers the steps due within its window.
mod wall {
    use super::super::*;

    /// A source with a fixed number of free slots, holding nothing it knows better.
    struct Fixed(u32);

    impl SlotSource for Fixed {
        fn free(&self) -> Option<u32> {
            Some(self.0)
        }
        fn held(&self, _: &str) -> Option<u32> {
            None
        }
        fn release(&self, _: &str) {}
    }

    fn cluster(free: u32) -> SharedCluster {
        SharedCluster {
            name: "c".into(),
            source: Arc::new(Fixed(free)),
            pool: None,
            flink: None,
            ledger: None,
            arbiter: true,
            ordered: false,
            rounds: Mutex::new(Rounds::default()),
        }
    }

    fn request(job: &str, held: u32, wanted: u32, priority: i64) -> SlotRequest {
        SlotRequest {
            job: job.into(),
            held,
            wanted,
            priority,
            lag_growth: 0.0,
            floor: 0,
        }
    }

    fn granted(turn: Turn) -> Option<u32> {
        match turn {
            Turn::Go(grant) => grant.map(|g| g.granted),
            Turn::Wait => None,
        }
    }

    #[test]
    fn a_wall_round_waits_for_every_job_then_serves_the_higher_priority_first() {
        let share = cluster(4);
        share.expect("low");
        share.expect("high");
        let now = Instant::now();
        let later = now + Duration::from_secs(60);
        // The low one comes first: the round waits for the high one (deadline far away).
        share.submit_wall("low", Some(request("low", 1, 4, 0)), later);
        assert_eq!(share.turn_wall("low", now), Turn::Wait);
        share.submit_wall("high", Some(request("high", 1, 4, 10)), later);
        // 4 free: high takes its 3 missing, low gets the 1 left (1 + 1 = 2 of its 4).
        assert_eq!(granted(share.turn_wall("high", now)), Some(4));
        assert_eq!(granted(share.turn_wall("low", now)), Some(2));
        share.done_wall("high");
        share.done_wall("low");
        assert!(share.lock().gather.turns.is_none());
    }

    #[test]
    fn a_wall_round_resolves_at_its_deadline_without_the_late_job() {
        let share = cluster(2);
        share.expect("a");
        share.expect("b");
        let now = Instant::now();
        share.submit_wall("a", Some(request("a", 1, 5, 0)), now);
        // `b` has not come; the deadline passed: `a` goes alone, cut to 1 + 2.
        assert_eq!(granted(share.turn_wall("a", now)), Some(3));
        // `b` comes while `a`'s turn is realized: it is in the next round.
        share.submit_wall("b", Some(request("b", 1, 2, 0)), now);
        assert_eq!(share.turn_wall("b", now), Turn::Wait);
        share.done_wall("a");
        assert_eq!(granted(share.turn_wall("b", now)), Some(2));
        share.done_wall("b");
    }

    #[test]
    fn a_scale_up_waits_for_the_scale_downs_of_its_wall_round() {
        let share = cluster(0);
        share.expect("up");
        share.expect("down");
        let now = Instant::now();
        share.submit_wall("up", Some(request("up", 1, 4, 0)), now);
        share.submit_wall("down", Some(request("down", 4, 1, 10)), now);
        // The scale-down frees 3 for the scale-up, which waits until it is realized.
        assert_eq!(share.turn_wall("up", now), Turn::Wait);
        assert_eq!(granted(share.turn_wall("down", now)), Some(1));
        share.done_wall("down");
        assert_eq!(granted(share.turn_wall("up", now)), Some(4));
        share.done_wall("up");
    }

    #[test]
    fn a_job_that_leaves_does_not_hold_up_the_round() {
        let share = cluster(3);
        share.expect("a");
        share.expect("gone");
        let now = Instant::now();
        share.submit_wall(
            "a",
            Some(request("a", 1, 3, 0)),
            now + Duration::from_secs(60),
        );
        assert_eq!(share.turn_wall("a", now), Turn::Wait);
        share.leave("gone");
        assert_eq!(granted(share.turn_wall("a", now)), Some(3));
    }

    #[test]
    fn a_wall_round_does_not_wait_for_a_job_another_host_steps() {
        let share = cluster(3);
        share.expect("here");
        share.expect("elsewhere");
        let now = Instant::now();
        let later = now + Duration::from_secs(60);
        // Another host holds `elsewhere`'s lease: the round goes on without it.
        share.stand_aside("elsewhere");
        share.submit_wall("here", Some(request("here", 1, 3, 0)), later);
        assert_eq!(granted(share.turn_wall("here", now)), Some(3));
        share.done_wall("here");
        // It came back to this host and takes part in a round...
        share.submit_wall("elsewhere", Some(request("elsewhere", 1, 2, 0)), later);
        share.submit_wall("here", None, later);
        assert!(granted(share.turn_wall("elsewhere", now)).is_some());
        assert_eq!(share.turn_wall("here", now), Turn::Go(None));
        share.done_wall("elsewhere");
        share.done_wall("here");
        // ...so the next round waits for it again.
        share.submit_wall("here", Some(request("here", 3, 4, 0)), later);
        assert_eq!(share.turn_wall("here", now), Turn::Wait);
    }

    #[test]
    fn the_jobs_of_a_flink_cluster_share_its_free_slots_by_priority() {
        use crate::engine::flink::fake_server::FakeFlink;
        use crate::engine::flink::{FlinkClient, FlinkOptions};

        let fake = FakeFlink::start();
        // 6 slots, 2 available: each job runs and declared 2 (one slot-sharing group).
        fake.json(
            "GET /overview",
            r#"{"taskmanagers":1,"slots-total":6,"slots-available":2}"#,
        );
        let (high, low) = (
            "0000000000000000000000000000000a",
            "0000000000000000000000000000000b",
        );
        for id in [high, low] {
            fake.json(
                &format!("GET /jobs/{id}"),
                r#"{"state":"RUNNING","vertices":[{"id":"v","parallelism":2,"slotSharingGroupId":"g"},{"id":"w","parallelism":1,"slotSharingGroupId":"g"}]}"#,
            );
            fake.json(
                &format!("GET /jobs/{id}/resource-requirements"),
                r#"{"v":{"parallelism":{"lowerBound":1,"upperBound":2}},"w":{"parallelism":{"lowerBound":1,"upperBound":1}}}"#,
            );
        }
        let client = FlinkClient::new(FlinkOptions::new(fake.url()));
        let shares = ClusterShares::new(true);
        let a = shares.flink(&fake.url(), &client, "high", high);
        let b = shares.flink(&fake.url(), &client, "low", low);
        assert!(Arc::ptr_eq(&a, &b), "one arbiter per REST address");
        a.expect("high");
        a.expect("low");
        let now = Instant::now();
        let later = now + Duration::from_secs(60);
        // Both want 5 of which they hold 2: 6 missing, 2 free. The priority job gets both.
        a.submit_wall("low", Some(request("low", 2, 5, 0)), later);
        a.submit_wall("high", Some(request("high", 2, 5, 10)), later);
        // The one held at what it holds is realized first (it frees nothing, but counts among
        // the round's scale-downs), then the scale-up.
        let low_turn = a.turn_wall("low", now);
        let Turn::Go(Some(low_grant)) = low_turn else {
            panic!("{low_turn:?}");
        };
        assert_eq!((low_grant.granted, low_grant.free_at_turn), (2, 0));
        assert!(low_grant.is_short());
        a.done_wall("low");
        assert_eq!(granted(a.turn_wall("high", now)), Some(4));
        a.done_wall("high");
        // The arbiter read the overview once for the round.
        assert_eq!(fake.count("GET", "/overview"), 1);
    }
}
