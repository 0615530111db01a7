//! A simulated cluster's slots shared by its jobs (`cluster.rs`).

use std::sync::Arc;

use std::collections::BTreeMap;

use super::cluster::SlotPool;
use crate::engine::{Collector, Realizer};
use crate::sim::Simulation;

/// A job of three vertices, the widest at 4: it needs 4 slots.
const JOB: &str = r#"
[job]
name = "j"
[[vertices]]
id = "src"
kind = "source"
parallelism = 2
capacity = 10000
partitions = 16
[[vertices]]
id = "agg"
kind = "operator"
parallelism = 4
capacity = 1000
[[vertices]]
id = "sink"
kind = "sink"
parallelism = 1
capacity = 10000
[[edges]]
from = "src"
to = "agg"
ship = "HASH"
[[edges]]
from = "agg"
to = "sink"
ship = "REBALANCE"
[workload.src]
[[workload.src.rate]]
kind = "constant"
rate = 1000
[restart]
downtime = "5s"
"#;

fn parallelism(sim: &mut Simulation, now_ms: i64) -> BTreeMap<String, u32> {
    let observation = sim.observe(now_ms).expect("a simulation observes");
    observation
        .vertices
        .iter()
        .map(|v| (v.id.clone(), v.parallelism))
        .collect()
}

fn map(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
    pairs.iter().map(|(v, p)| (v.to_string(), *p)).collect()
}

#[test]
fn a_pool_grants_at_most_what_is_free() {
    let pool = SlotPool::new(10);
    assert_eq!(pool.acquire("a", 7), 7);
    assert_eq!(pool.acquire("b", 7), 3, "7 of 10 are held");
    // Asking again counts what the job holds already.
    assert_eq!(pool.acquire("b", 3), 3);
    assert_eq!(pool.acquire("a", 2), 2, "a scale-down always goes through");
    assert_eq!(pool.usage().free, 5);
    assert_eq!(pool.acquire("b", 9), 8);
    pool.release("a");
    assert_eq!(pool.usage().free, 2);
    assert_eq!(pool.usage().max_in_use, 10);
}

#[test]
fn a_job_below_its_decision_runs_at_what_it_got_then_takes_freed_slots() {
    let pool = Arc::new(SlotPool::new(10));
    let mut a = Simulation::from_toml_str(JOB).expect("valid job");
    let mut b = Simulation::from_toml_str(JOB).expect("valid job");
    a.join_pool(Arc::clone(&pool), "a");
    b.join_pool(Arc::clone(&pool), "b");
    assert_eq!(pool.usage().free, 2, "each holds its widest vertex, 4");

    // b decides agg = 9: 4 held + 2 free = 6 slots, so every vertex runs at most 6 wide.
    b.rescale(&map(&[("agg", 9), ("src", 8)])).expect("rescale");
    assert_eq!(
        parallelism(&mut b, 10_000),
        map(&[("src", 6), ("agg", 6), ("sink", 1)]),
        "observed at the parallelism it runs at, after the restart"
    );
    assert_eq!(pool.usage().free, 0);
    assert_eq!(a.observation().global["taskSlotsAvailable"], 0.0);
    assert_eq!(a.observation().global["taskSlotsTotal"], 10.0);

    // a scales down to 1: 3 slots free, which b takes at its next observation.
    a.rescale(&map(&[("agg", 1), ("src", 1)])).expect("rescale");
    assert_eq!(pool.usage().free, 3);
    assert_eq!(
        parallelism(&mut b, 11_000),
        map(&[("src", 6), ("agg", 6), ("sink", 1)]),
        "restarting towards the decision"
    );
    assert_eq!(
        parallelism(&mut b, 30_000),
        map(&[("src", 8), ("agg", 9), ("sink", 1)])
    );
    assert_eq!(pool.held("b"), 9);
    assert!(pool.usage().max_in_use <= 10);
}

#[test]
fn a_job_without_a_cluster_runs_at_its_decision() {
    let mut a = Simulation::from_toml_str(JOB).expect("valid job");
    a.rescale(&map(&[("agg", 90)])).expect("rescale");
    assert_eq!(parallelism(&mut a, 10_000)["agg"], 90);
}
