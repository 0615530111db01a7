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
