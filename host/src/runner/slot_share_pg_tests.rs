//! Two hosts' arbiters on one PostgreSQL database and one Flink cluster (a fake REST API):
//! `.ci/run` starts the database and sets `FLOWSCALE_POSTGRES_URL`.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use postgres::{Client, NoTls};

use super::*;
use crate::engine::flink::fake_server::FakeFlink;
use crate::engine::flink::{FlinkClient, FlinkOptions};
use crate::state::StateStore;
use crate::state::postgres::tests::fresh_database;
use crate::state::postgres::{HostLeases, PostgresStateStore};

const KEY: &str = "cluster:shared";
const IDS: [(&str, &str); 2] = [
    ("ja", "000000000000000000000000000000a1"),
    ("jb", "000000000000000000000000000000b1"),
];

/// The fake cluster: 6 slots, `available` of them free, and each job running one vertex at
/// parallelism 1 with the upper bound `declared` (ja, jb).
fn cluster(fake: &FakeFlink, available: u32, declared: [u32; 2]) {
    fake.replace_json(
        "GET /overview",
        &format!(r#"{{"slots-total":6,"slots-available":{available}}}"#),
    );
    fake.replace_json("GET /jobmanager/config", "[]");
    for ((_, id), upper) in IDS.iter().zip(declared) {
        fake.replace_json(
            &format!("GET /jobs/{id}"),
            r#"{"state":"RUNNING","vertices":[{"id":"v","parallelism":1}]}"#,
        );
        fake.replace_json(
            &format!("GET /jobs/{id}/resource-requirements"),
            &format!(r#"{{"v":{{"parallelism":{{"lowerBound":1,"upperBound":{upper}}}}}}}"#),
        );
    }
}

/// A host `id` of the database at `url` holding the lease of `job` only, and its arbiter of the
/// cluster at `fake` (every job of the fleet joined, as a host of the same fleet file does).
struct Host {
    leases: Arc<HostLeases>,
    share: Arc<SharedCluster>,
    job: &'static str,
    _shares: ClusterShares,
}

fn host(url: &str, id: &str, job: &'static str, fake: &FakeFlink) -> (Host, PostgresStateStore) {
    let leases = Arc::new(HostLeases::connect(url, id, Duration::from_secs(30)).expect("connect"));
    crate::state::JobLeases::want(leases.as_ref(), job);
    leases.renew().expect("a lease round");
    assert!(crate::state::JobLeases::held(leases.as_ref(), job).is_some());
    let store = PostgresStateStore::open(url, Some(Arc::clone(&leases))).expect("the store");
    let shares = ClusterShares::new(true).with_ledger(store.slot_ledger());
    let client = FlinkClient::new(FlinkOptions::new(fake.url()));
    let mut share = None;
    for (name, flink_id) in IDS {
        share = Some(shares.flink(KEY, &client, name, flink_id));
    }
    let share = share.expect("a share");
    share.expect(job);
    let host = Host {
        leases,
        share,
        job,
        _shares: shares,
    };
    (host, store)
}

impl Host {
    /// One round in which the host's job asks to grow from 1 to `wanted` slots: its grant.
    fn round(&self, wanted: u32) -> SlotGrant {
        let request = SlotRequest {
            job: self.job.to_string(),
            held: 1,
            wanted,
            priority: 0,
            lag_growth: 1.0,
            floor: 1,
        };
        self.share
            .submit_wall(self.job, Some(request), Instant::now());
        loop {
            match self.share.turn_wall(self.job, Instant::now()) {
                Turn::Go(grant) => return grant.expect("an arbitrated grant"),
                Turn::Wait => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }
}

fn reserved(url: &str) -> Vec<(String, String, i32)> {
    let mut client = Client::connect(url, NoTls).expect("connect");
    client
        .query(
            "SELECT job, host, target FROM flowscale_slot_reservations ORDER BY job",
            &[],
        )
        .expect("the reservations")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

#[test]
#[ignore = "needs PostgreSQL: .ci/run starts one"]
fn two_hosts_never_grant_the_same_free_slots() {
    let url = fresh_database("fs_slot_ledger");
    let fake = FakeFlink::start();
    // 4 of 6 free; each job runs on 1 slot and declares 1.
    cluster(&fake, 4, [1, 1]);
    let (a, _a_store) = host(&url, "a", "ja", &fake);
    let (b, _b_store) = host(&url, "b", "jb", &fake);
    let hosts = [a, b];
    for _ in 0..5 {
        // Both jobs ask for 3 more at once, each on its own host: 6 wanted, 4 free.
        let start = Barrier::new(2);
        let grants: Vec<SlotGrant> = std::thread::scope(|scope| {
            let rounds: Vec<_> = hosts
                .iter()
                .map(|host| {
                    let start = &start;
                    scope.spawn(move || {
                        start.wait();
                        host.round(4)
                    })
                })
                .collect();
            rounds
                .into_iter()
                .map(|r| r.join().expect("a round"))
                .collect()
        });
        // The first round takes its 3, the second sees them reserved: 4 - 3 = 1 left.
        let mut extra: Vec<u32> = grants.iter().map(|g| g.granted - g.held).collect();
        extra.sort_unstable();
        assert_eq!(extra, vec![1, 3], "{grants:?}");
        assert_eq!(reserved(&url).len(), 2);
        // Not realized (nothing sent): the reservations are given up, the next round starts
        // from the cluster as it is.
        for host in &hosts {
            host.share.done_wall(host.job);
        }
        assert!(reserved(&url).is_empty());
    }

    // `ja` grows to 4 and the cluster shows it (declared 4, running 1): its reservation is
    // released, and `jb` is left 4 - (4 - 1) = 1 slot, not 4 again.
    let a = hosts[0].round(4);
    assert_eq!(a.granted, 4);
    assert_eq!(reserved(&url), vec![("ja".to_string(), "a".to_string(), 4)]);
    cluster(&fake, 4, [4, 1]);
    hosts[0].share.done_wall("ja");
    assert!(reserved(&url).is_empty());
    assert_eq!(hosts[1].round(4).granted, 2);
    hosts[1].share.done_wall("jb");

    // A reservation dies with its host's lease: `a` reserves 3 and gives its leases up before
    // sending anything; `b` then has the 4 free slots again.
    cluster(&fake, 4, [1, 1]);
    assert_eq!(hosts[0].round(4).granted, 4);
    assert_eq!(hosts[1].round(4).granted, 2);
    hosts[1].share.done_wall("jb");
    hosts[0].leases.leave().expect("leave");
    assert_eq!(hosts[1].round(5).granted, 5);
    hosts[1].share.done_wall("jb");
}
