use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::runner::arbiter::arbitrate;

fn reservation(job: &str, held: u32, target: u32) -> Reservation {
    Reservation {
        job: job.to_string(),
        host: "other".to_string(),
        held,
        target,
    }
}

#[test]
fn a_reservation_counts_until_the_cluster_shows_its_rescale_and_never_twice() {
    let others = [reservation("a", 2, 6), reservation("b", 1, 3)];
    // Neither rescale landed: 4 + 2 slots the cluster does not show.
    assert_eq!(unseen(&others, |_| Some(0).filter(|_| false)), 6);
    assert_eq!(
        unseen(&others, |job| Some(if job == "a" { 2 } else { 1 })),
        6
    );
    // `a`'s landed (it declares 6: the cluster's free slots count them), `b`'s half-way.
    assert_eq!(
        unseen(&others, |job| Some(if job == "a" { 6 } else { 2 })),
        1
    );
    // A job declaring less than it held when granted (read mid-restart) still counts from held.
    assert_eq!(
        unseen(&others, |job| Some(if job == "a" { 0 } else { 3 })),
        4
    );
}

#[test]
fn only_grants_beyond_what_is_held_are_reserved() {
    let grant = |job: &str, held, granted| SlotGrant {
        job: job.to_string(),
        held,
        granted,
        wanted: granted + 1,
        free_at_turn: 0,
    };
    let kept = reservations(&[grant("up", 2, 5), grant("same", 3, 3), grant("down", 4, 1)]);
    assert_eq!(
        kept,
        vec![Reservation {
            job: "up".to_string(),
            host: String::new(),
            held: 2,
            target: 5,
        }]
    );
}

#[test]
fn without_the_database_scale_ups_wait_and_scale_downs_go() {
    let request = |job: &str, held, wanted| SlotRequest {
        job: job.to_string(),
        held,
        wanted,
        priority: 0,
        lag_growth: 1.0,
        floor: 0,
    };
    let grants = queued(&[request("up", 2, 5), request("down", 4, 1)]);
    assert_eq!(
        grants.iter().map(|g| g.granted).collect::<Vec<_>>(),
        vec![2, 1]
    );
    assert!(grants[0].is_short());
}

/// A job of the model: what the cluster runs and declares for it, and its host.
#[derive(Debug, Clone)]
struct Job {
    owner: usize,
    running: u32,
    declared: u32,
    priority: i64,
}

/// The protocol over one cluster of `total` slots and several hosts: each host arbitrates its
/// own jobs in rounds that take the cluster's lock, reading the cluster and the other hosts'
/// live reservations, and records its own; a grant is realized later (the job declares it and
/// its reservation is released); the cluster starts the declared slots when it has them; a
/// host dies (its reservations die with its leases, its grants are never sent, another host
/// takes its jobs).
#[derive(Debug)]
struct Model {
    total: u32,
    jobs: Vec<Job>,
    alive: Vec<bool>,
    /// job -> (host, held, target): the live reservations.
    reserved: BTreeMap<usize, (usize, u32, u32)>,
    /// job -> granted: scale-ups granted and not realized yet.
    granted: BTreeMap<usize, u32>,
}

#[derive(Debug, Clone)]
enum Op {
    /// A round of a host, with what each job would want and how far below its slots a job of
    /// a higher priority may take it.
    Round {
        host: usize,
        wants: Vec<(u32, u32, f64)>,
    },
    Realize(usize),
    Schedule(usize),
    Die(usize),
}

impl Model {
    /// The slots promised: for each job the most of what it runs, declares and was granted.
    fn committed(&self) -> u32 {
        self.jobs
            .iter()
            .enumerate()
            .map(|(j, job)| {
                let target = self.reserved.get(&j).map_or(0, |r| r.2);
                job.running.max(job.declared).max(target)
            })
            .sum()
    }

    /// The free slots as the host reads them from the cluster: free now, less what the jobs
    /// declared and do not run yet.
    fn cluster_free(&self) -> u32 {
        let running: u32 = self.jobs.iter().map(|j| j.running).sum();
        let pending: u32 = self.jobs.iter().map(|j| j.declared - j.running).sum();
        (self.total - running).saturating_sub(pending)
    }

    fn round(&mut self, host: usize, wants: &[(u32, u32, f64)]) -> Result<(), TestCaseError> {
        let mine = |j: &usize| self.jobs[*j].owner == host;
        // A host's next round comes once its last one is realized.
        if !self.alive[host] || self.granted.keys().any(mine) {
            return Ok(());
        }
        let others: Vec<Reservation> = self
            .reserved
            .iter()
            .filter(|(_, r)| r.0 != host)
            .map(|(&j, &(_, held, target))| reservation(&format!("{j}"), held, target))
            .collect();
        let declared = |job: &str| job.parse::<usize>().ok().map(|j| self.jobs[j].declared);
        let free = self
            .cluster_free()
            .saturating_sub(unseen(&others, declared));
        let requests: Vec<SlotRequest> = self
            .jobs
            .iter()
            .enumerate()
            .filter(|(_, job)| job.owner == host)
            .map(|(j, job)| {
                let (wanted, below, growth) = wants[j % wants.len()];
                SlotRequest {
                    job: format!("{j}"),
                    held: job.declared,
                    wanted: wanted % (self.total + 4),
                    priority: job.priority,
                    lag_growth: growth,
                    floor: job.declared.saturating_sub(below),
                }
            })
            .collect();
        let grants = arbitrate(free, &requests);
        // Within the round: never more than free (with what its scale-downs give back), and
        // no scale-up cut while one of a lower priority gets slots.
        let handed: i64 = grants
            .iter()
            .map(|g| i64::from(g.granted) - i64::from(g.held))
            .sum();
        prop_assert!(handed <= i64::from(free), "{handed} handed out of {free}");
        for (hi, hg) in requests.iter().zip(&grants) {
            for (lo, lg) in requests.iter().zip(&grants) {
                if !hi.is_scale_down()
                    && !lo.is_scale_down()
                    && hi.priority > lo.priority
                    && lg.granted > lo.held
                {
                    prop_assert_eq!(hg.granted, hi.wanted);
                }
            }
        }
        for own in reservations(&grants) {
            let j: usize = own.job.parse().expect("a job index");
            self.reserved.insert(j, (host, own.held, own.target));
            self.granted.insert(j, own.target);
        }
        // The round's scale-downs are realized before its scale-ups.
        for g in grants.iter().filter(|g| g.is_scale_down()) {
            let job = &mut self.jobs[g.job.parse::<usize>().expect("a job index")];
            job.declared = g.granted;
            job.running = job.running.min(g.granted);
        }
        Ok(())
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let jobs = self.jobs.len();
        match op {
            Op::Round { host, wants } => self.round(*host % self.alive.len(), wants)?,
            Op::Realize(j) => {
                let j = *j % jobs;
                if let Some(target) = self.granted.remove(&j) {
                    self.jobs[j].declared = target;
                    self.reserved.remove(&j);
                }
            }
            Op::Schedule(j) => {
                let running: u32 = self.jobs.iter().map(|j| j.running).sum();
                let job = &mut self.jobs[*j % jobs];
                job.running = job.declared.min(job.running + (self.total - running));
            }
            Op::Die(host) => {
                let host = *host % self.alive.len();
                let Some(heir) = (0..self.alive.len()).find(|&h| h != host && self.alive[h]) else {
                    return Ok(());
                };
                self.alive[host] = false;
                let dead: Vec<usize> = (0..jobs).filter(|&j| self.jobs[j].owner == host).collect();
                for j in dead {
                    self.reserved.remove(&j);
                    self.granted.remove(&j);
                    self.jobs[j].owner = heir;
                }
            }
        }
        Ok(())
    }
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let want = (0u32..40, 0u32..4, prop::num::f64::ANY);
    let op = prop_oneof![
        3 => (0usize..8, prop::collection::vec(want, 1..8))
            .prop_map(|(host, wants)| Op::Round { host, wants }),
        2 => (0usize..16).prop_map(Op::Realize),
        2 => (0usize..16).prop_map(Op::Schedule),
        1 => (0usize..8).prop_map(Op::Die),
    ];
    prop::collection::vec(op, 0..60)
}

proptest! {
    /// Over any number of hosts and any interleaving of their rounds, rescales, the cluster's
    /// scheduling and host deaths, the slots promised (run, declared or reserved) never exceed
    /// the cluster's: no two hosts hand out the same free slot.
    #[test]
    fn hosts_never_hand_out_more_than_the_cluster_has(
        hosts in 1usize..6,
        running in prop::collection::vec((0u32..6, -2i64..3), 1..10),
        spare in 0u32..20,
        ops in ops(),
    ) {
        let total = running.iter().map(|r| r.0).sum::<u32>() + spare;
        let mut model = Model {
            total,
            jobs: running
                .iter()
                .enumerate()
                .map(|(j, &(slots, priority))| Job {
                    owner: j % hosts,
                    running: slots,
                    declared: slots,
                    priority,
                })
                .collect(),
            alive: vec![true; hosts],
            reserved: BTreeMap::new(),
            granted: BTreeMap::new(),
        };
        for op in &ops {
            model.apply(op)?;
            prop_assert!(
                model.committed() <= total,
                "{} promised of {} after {:?}: {:?}", model.committed(), total, op, model
            );
        }
    }
}

/// Why the reservations: two hosts that both read the cluster before either rescale landed
/// hand out the same free slots when they do not count each other's grants.
#[test]
fn without_reservations_two_hosts_hand_out_the_same_slots() {
    // 6 slots, two jobs on 1 each, 4 free; each host's job asks for 3 more.
    let request = |job: &str| SlotRequest {
        job: job.to_string(),
        held: 1,
        wanted: 4,
        priority: 0,
        lag_growth: 1.0,
        floor: 1,
    };
    let free = 4;
    let a = arbitrate(free, &[request("a")]);
    let blind = arbitrate(free, &[request("b")]);
    assert_eq!(a[0].granted - 1 + blind[0].granted - 1, 6);
    // With `a`'s reservation counted (the cluster still declares 1 for it), `b` gets the 1 left.
    let seen = arbitrate(
        free - unseen(&[reservation("a", 1, 4)], |_| Some(1)),
        &[request("b")],
    );
    assert_eq!(seen[0].granted - 1, 1);
}
