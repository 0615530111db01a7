//! Against a real PostgreSQL: `.ci/run` starts one and sets `FLOWSCALE_POSTGRES_URL`. Each test
//! works in a database of its own, created afresh.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use postgres::{Client, NoTls};

use super::round::{leave, run_round};
use super::schema::{SCHEMA_VERSION, migrate};
use super::*;
use crate::state::{JobLeases, StateError, StateStore};

const NEEDS: &str = "needs PostgreSQL: .ci/run starts one (FLOWSCALE_POSTGRES_URL)";

/// A new, empty database named `name` on the server of `FLOWSCALE_POSTGRES_URL`; its URL.
pub(crate) fn fresh_database(name: &str) -> String {
    let base = std::env::var("FLOWSCALE_POSTGRES_URL").expect(NEEDS);
    let mut admin = Client::connect(&base, NoTls).expect("the test server accepts connections");
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .expect("the old database dropped");
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .expect("a fresh database");
    let (server, _) = base.rsplit_once('/').expect("a URL with a database");
    format!("{server}/{name}")
}

fn count(client: &mut Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).expect("a count").get(0)
}

#[test]
#[ignore = "needs PostgreSQL: .ci/run starts one"]
fn the_schema_is_created_once_and_versioned() {
    let url = fresh_database("fs_schema");
    let mut client = Client::connect(&url, NoTls).expect("connect");
    let all: Vec<i32> = (1..=SCHEMA_VERSION).collect();
    assert_eq!(migrate(&mut client).expect("first migration"), all);
    assert_eq!(migrate(&mut client).expect("second"), Vec::<i32>::new());
    assert_eq!(
        count(&mut client, "SELECT count(*) FROM flowscale_schema"),
        i64::from(SCHEMA_VERSION)
    );
    // A database a newer host migrated is refused, not written.
    client
        .execute(
            "INSERT INTO flowscale_schema (version) VALUES ($1)",
            &[&(SCHEMA_VERSION + 1)],
        )
        .expect("a future version");
    let err = migrate(&mut client).expect_err("too new");
    assert!(
        matches!(err, StateError::SchemaTooNew { found, known } if found == SCHEMA_VERSION + 1 && known == SCHEMA_VERSION),
        "{err}"
    );
}

#[test]
#[ignore = "needs PostgreSQL: .ci/run starts one"]
fn sections_survive_a_new_store_and_flush_in_one_transaction() {
    let url = fresh_database("fs_store");
    let mut store = PostgresStateStore::open(&url, None).expect("open");
    assert!(store.jobs().is_empty());
    store.put("a", "cooldown", serde_json::json!({"queue": [1, 2]}));
    store.put("a", "events", serde_json::json!({"events": []}));
    store.put("b", "cooldown", serde_json::json!(3));
    // Not flushed: nothing in the database yet.
    let mut client = Client::connect(&url, NoTls).expect("connect");
    assert_eq!(
        count(&mut client, "SELECT count(*) FROM flowscale_job_sections"),
        0
    );
    store.flush().expect("flush");
    assert_eq!(
        count(&mut client, "SELECT count(*) FROM flowscale_job_sections"),
        3
    );
    let reopened = PostgresStateStore::open(&url, None).expect("reopen");
    assert_eq!(reopened.jobs(), ["a", "b"]);
    assert_eq!(
        reopened.get("a", "cooldown"),
        Some(serde_json::json!({"queue": [1, 2]}))
    );
    store.remove_job("b");
    store.flush().expect("flush");
    let mut reopened = PostgresStateStore::open(&url, None).expect("reopen");
    assert_eq!(reopened.jobs(), ["a"]);
    // Another host's write is seen after a refresh.
    store.put("a", "cooldown", serde_json::json!("new"));
    store.flush().expect("flush");
    assert_eq!(
        reopened.get("a", "cooldown"),
        Some(serde_json::json!({"queue": [1, 2]}))
    );
    reopened.refresh("a").expect("refresh");
    assert_eq!(
        reopened.get("a", "cooldown"),
        Some(serde_json::json!("new"))
    );
    // Quarantine keeps the sections in a table and drops the one named.
    reopened
        .quarantine("a", Some("events"))
        .expect("quarantine");
    assert_eq!(reopened.get("a", "events"), None);
    assert_eq!(
        count(&mut client, "SELECT count(*) FROM flowscale_quarantine"),
        1
    );
}

/// One round of `host` at `now_ms` over `jobs`, committed.
fn round(
    client: &mut Client,
    host: &str,
    jobs: &BTreeSet<String>,
    now_ms: i64,
    ttl_ms: i64,
) -> round::RoundOutcome {
    let mut tx = client.transaction().expect("begin");
    let outcome =
        run_round(&mut tx, host, ttl_ms, jobs, &BTreeSet::new, Some(now_ms)).expect("round");
    tx.commit().expect("commit");
    outcome
}

fn jobs(n: usize) -> BTreeSet<String> {
    (0..n).map(|i| format!("job-{i:02}")).collect()
}

#[test]
#[ignore = "needs PostgreSQL: .ci/run starts one"]
fn two_hosts_split_the_jobs_and_a_lapsed_lease_moves_with_a_new_token() {
    let url = fresh_database("fs_split");
    let mut client = Client::connect(&url, NoTls).expect("connect");
    migrate(&mut client).expect("schema");
    let jobs = jobs(4);
    let ttl = 1000;
    // `a` alone takes all four; `b` joins: `a` gives two up at its next round, `b` takes them.
    assert_eq!(round(&mut client, "a", &jobs, 0, ttl).held.len(), 4);
    assert_eq!(round(&mut client, "b", &jobs, 100, ttl).held.len(), 0);
    let a = round(&mut client, "a", &jobs, 200, ttl);
    assert_eq!((a.held.len(), a.released.len()), (2, 2));
    let b = round(&mut client, "b", &jobs, 300, ttl);
    assert_eq!(b.claimed, a.released);
    // Each host's round names the owner of every job: its own and the other host's.
    let expected: BTreeMap<String, (String, i64)> = a
        .held
        .iter()
        .map(|(job, &t)| (job.clone(), ("a".to_string(), t)))
        .chain(
            b.held
                .iter()
                .map(|(job, &t)| (job.clone(), ("b".to_string(), t))),
        )
        .collect();
    assert_eq!(expected.len(), 4);
    assert_eq!(b.owners, expected, "b's view");
    // `a`'s round gave two up and left the other two to nobody yet: only its own are owned.
    let mine: BTreeMap<String, (String, i64)> = a
        .held
        .iter()
        .map(|(job, &t)| (job.clone(), ("a".to_string(), t)))
        .collect();
    assert_eq!(a.owners, mine, "a's view");
    // Every claim so far was the job's first or second: tokens 1 (by a) then 2 (by b).
    assert!(b.held.values().all(|&t| t == 2), "{b:?}");
    assert!(a.held.values().all(|&t| t == 1), "{a:?}");
    // `a` stops renewing; at 200 + ttl its leases lapse and `b` takes them with token 2.
    let b = round(&mut client, "b", &jobs, 1100, ttl);
    assert_eq!(b.held.len(), 2, "not before the TTL: {b:?}");
    let b = round(&mut client, "b", &jobs, 1200, ttl);
    assert_eq!(b.held.len(), 4, "{b:?}");
    for job in a.held.keys() {
        assert_eq!(b.held[job], 2, "{job}");
    }
}

/// A host of the simulation: the leases it believes it holds, with their end.
#[derive(Default)]
struct SimHost {
    client: Option<Client>,
    /// When it resumes, while paused.
    paused_until: Option<i64>,
    next_round: i64,
    beliefs: BTreeMap<String, (i64, i64)>,
}

/// A small deterministic generator (the property is checked over several seeds).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    fn chance(&mut self, per_mille: u64) -> bool {
        self.next() % 1000 < per_mille
    }
}

#[test]
#[ignore = "needs PostgreSQL: .ci/run starts one"]
fn hosts_joining_leaving_and_pausing_never_share_a_job_nor_leave_one_orphaned() {
    let url = fresh_database("fs_property");
    migrate(&mut Client::connect(&url, NoTls).expect("connect")).expect("schema");
    let jobs = jobs(10);
    let (ttl, interval, tick) = (3000_i64, 1000_i64, 100_i64);
    let mut claims = 0;
    for seed in 1..=4_u64 {
        // Each seed starts from an empty lease table.
        Client::connect(&url, NoTls)
            .expect("connect")
            .batch_execute("DELETE FROM flowscale_leases; DELETE FROM flowscale_hosts")
            .expect("clean");
        let mut rng = Lcg(seed);
        let mut hosts: Vec<SimHost> = (0..6).map(|_| SimHost::default()).collect();
        // One host is up from the start; the others join at random.
        hosts[0].client = Some(Client::connect(&url, NoTls).expect("connect"));
        let start = 1_000_000 * i64::try_from(seed).expect("small");
        hosts[0].next_round = start;
        let mut last_owned: BTreeMap<&str, i64> =
            jobs.iter().map(|j| (j.as_str(), start)).collect();
        let mut last_token: BTreeMap<String, i64> = BTreeMap::new();
        let mut now = start;
        while now < start + 120_000 {
            // Random changes, keeping at least one host up and not paused.
            for i in 0..hosts.len() {
                let active = hosts
                    .iter()
                    .filter(|h| h.client.is_some() && h.paused_until.is_none_or(|p| p <= now))
                    .count();
                let host = &mut hosts[i];
                let name = format!("host-{i}");
                if host.paused_until.is_some_and(|p| p <= now) {
                    host.paused_until = None;
                }
                if host.client.is_none() {
                    if rng.chance(20) {
                        host.client = Some(Client::connect(&url, NoTls).expect("connect"));
                        host.next_round = now;
                    }
                } else if host.paused_until.is_none() && active > 1 {
                    if rng.chance(5) {
                        // Leaves on purpose.
                        let client = host.client.as_mut().expect("up");
                        let mut tx = client.transaction().expect("begin");
                        leave(&mut tx, &name).expect("leave");
                        tx.commit().expect("commit");
                        host.beliefs.clear();
                        host.client = None;
                    } else if rng.chance(5) {
                        // Dies: its leases lapse on their own.
                        host.beliefs.clear();
                        host.client = None;
                    } else if rng.chance(10) {
                        let pause = i64::try_from(rng.next() % 8000).expect("small");
                        host.paused_until = Some(now + pause);
                    }
                }
                if host.paused_until.is_none() && host.next_round <= now {
                    if let Some(client) = host.client.as_mut() {
                        let outcome = round(client, &name, &jobs, now, ttl);
                        for job in &outcome.claimed {
                            let token = outcome.held[job];
                            let previous = last_token.insert(job.clone(), token).unwrap_or(0);
                            assert!(
                                token > previous,
                                "tokens grow: {job} {token} after {previous}"
                            );
                            claims += 1;
                        }
                        host.beliefs = outcome
                            .held
                            .into_iter()
                            .map(|(job, token)| (job, (token, now + ttl)))
                            .collect();
                        host.next_round = now + interval;
                    }
                }
            }
            for job in &jobs {
                let owners: Vec<usize> = hosts
                    .iter()
                    .enumerate()
                    .filter(|(_, h)| h.beliefs.get(job).is_some_and(|&(_, until)| now < until))
                    .map(|(i, _)| i)
                    .collect();
                assert!(
                    owners.len() <= 1,
                    "seed {seed}, {} ms: {job} owned by {owners:?}",
                    now - start
                );
                if owners.is_empty() {
                    let orphaned = now - last_owned[job.as_str()];
                    assert!(
                        orphaned <= ttl + interval + tick,
                        "seed {seed}, {} ms: {job} without an owner for {orphaned} ms",
                        now - start
                    );
                } else {
                    last_owned.insert(job, now);
                }
            }
            now += tick;
        }
    }
    // The scenario did move jobs around (not a run where nothing happened).
    assert!(claims > 40, "only {claims} claims");
}

#[test]
#[ignore = "needs PostgreSQL: .ci/run starts one"]
fn a_superseded_token_is_fenced_and_its_state_writes_are_dropped() {
    let url = fresh_database("fs_fence");
    let ttl = Duration::from_millis(300);
    let a = std::sync::Arc::new(HostLeases::connect(&url, "a", ttl).expect("a"));
    let b = std::sync::Arc::new(HostLeases::connect(&url, "b", ttl).expect("b"));
    a.want("job");
    b.want("job");
    a.renew().expect("a's round");
    let token_a = a.held("job").expect("a holds the job");
    assert_eq!(token_a, 1);
    b.renew().expect("b's round");
    assert_eq!(b.held("job"), None, "one owner at a time");
    let target = BTreeMap::from([("v".to_string(), 4_u32)]);
    a.admit("job", token_a, &target)
        .expect("a's token is current");
    let mut store_a = PostgresStateStore::open(&url, Some(a.clone())).expect("store a");
    store_a.put("job", "cooldown", serde_json::json!("a"));
    store_a.flush().expect("a writes");

    // `a` stalls past its TTL; `b` takes over with the next token and resumes a's state.
    std::thread::sleep(ttl + Duration::from_millis(100));
    assert_eq!(
        a.held("job"),
        None,
        "a stops counting on the lease by itself"
    );
    b.renew().expect("b's round");
    let token_b = b.held("job").expect("b took over");
    assert_eq!(token_b, token_a + 1);
    let mut store_b = PostgresStateStore::open(&url, Some(b.clone())).expect("store b");
    store_b.refresh("job").expect("refresh");
    assert_eq!(store_b.get("job", "cooldown"), Some(serde_json::json!("a")));

    // `a` wakes up and tries its rescale with the old token: refused, and recorded as such.
    let refused = a.admit("job", token_a, &target).expect_err("fenced");
    assert_eq!(
        refused,
        crate::state::Fenced::Superseded {
            token: token_a,
            current: token_b,
            owner: Some("b".into())
        }
    );
    b.admit("job", token_b, &target)
        .expect("b's token is current");
    let mut client = Client::connect(&url, NoTls).expect("connect");
    let rows: Vec<(String, i64, bool)> = client
        .query(
            "SELECT host, token, admitted FROM flowscale_operations ORDER BY id",
            &[],
        )
        .expect("operations")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        rows,
        [
            ("a".to_string(), 1, true),
            ("a".to_string(), 1, false),
            ("b".to_string(), 2, true)
        ]
    );
    // a's state writes no longer land: b's state stays.
    store_b.put("job", "cooldown", serde_json::json!("b"));
    store_b.flush().expect("b writes");
    store_a.put("job", "cooldown", serde_json::json!("stale a"));
    store_a.flush().expect("a's flush drops the job");
    store_a.refresh("job").expect("refresh");
    assert_eq!(store_a.get("job", "cooldown"), Some(serde_json::json!("b")));

    // b leaves on purpose: a takes the job at its next round, without waiting for the TTL.
    b.leave().expect("leave");
    a.renew().expect("a's round");
    assert_eq!(a.held("job"), Some(token_b + 1));
}

#[test]
#[ignore = "needs PostgreSQL: .ci/run starts one"]
fn ownership_is_read_without_writing_and_follows_the_leases() {
    let url = fresh_database("fs_ownership");
    // A database no host has used: no hosts, no owners, and still no tables after the look.
    let empty = read_ownership(&url, &["j0"]).expect("read an unused database");
    assert!(empty.hosts.is_empty());
    assert_eq!(empty.jobs, BTreeMap::from([("j0".to_string(), None)]));
    let mut client = Client::connect(&url, NoTls).expect("connect");
    let tables: Option<String> = client
        .query_one("SELECT to_regclass('flowscale_leases')::text", &[])
        .expect("look")
        .get(0);
    assert_eq!(tables, None, "status must not create the schema");

    let ttl = Duration::from_secs(10);
    let host = HostLeases::connect(&url, "a", ttl).expect("host a");
    host.want("j0");
    host.want("j1");
    host.renew().expect("a round");
    let seen = read_ownership(&url, &["j0", "j1", "other"]).expect("read");
    assert_eq!(
        seen.hosts.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(),
        ["a"]
    );
    let ttl_ms = i64::try_from(ttl.as_millis()).expect("ms");
    for job in ["j0", "j1"] {
        let owner = seen.jobs[job].as_ref().expect("held");
        // The first claim of a job is token 1; the lease runs a TTL from the round.
        assert_eq!((owner.host.as_str(), owner.token), ("a", 1), "{job}");
        assert!(owner.expires_ms > seen.now_ms && owner.expires_ms <= seen.now_ms + ttl_ms);
    }
    assert_eq!(seen.jobs["other"], None, "a job no host runs has no owner");

    // A host that leaves gives its leases and its heartbeat up.
    host.leave().expect("leave");
    let after = read_ownership(&url, &["j0", "j1"]).expect("read");
    assert!(after.hosts.is_empty());
    assert!(after.jobs.values().all(Option::is_none), "{after:?}");
}
