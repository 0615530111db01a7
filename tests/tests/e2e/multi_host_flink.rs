//! Three `flowscale run` hosts sharing one PostgreSQL database and one real Apache Flink 2.3
//! session cluster with three copies of the load job.
//!
//! `#[ignore]`d, gated on `FLOWSCALE_FLINK_E2E=1` like the other real-Flink tests, and it needs
//! `FLOWSCALE_POSTGRES_URL` like the other multi-host tests (`.ci/run` runs it in its Flink step
//! with PostgreSQL up). Two jobs (`hot0`, `hot1`) have their keyed `count` vertex overloaded
//! (2 ms of wall time per record at 1000 records/s: two subtasks' worth at parallelism 1), so a
//! scale-up is coming once the metric window is full; the third (`calm`, 50 records/s) never
//! needs one. The test
//!
//! 1. waits until each job has one owner and each host owns one job;
//! 2. once the owners of `hot0` and `hot1` are filling their metric windows (a rescale is
//!    coming, none was made), SIGKILLs the owner of `hot0` and SIGSTOPs the owner of `hot1`;
//! 3. checks that the third host takes `hot0` over within the lease TTL plus one interval (and
//!    a little slack for a loaded machine), with a larger fencing token;
//! 4. SIGCONTs the paused host once `hot1` was taken over from it: it reports `LeaseLost`, never
//!    rescales `hot1`, and whatever it attempted under its old token was refused by the fence
//!    (`RescaleFenced`, recorded as not admitted, never sent);
//! 5. checks from Flink's REST answers that `hot0` and `hot1` were each rescaled exactly once
//!    (one `UPDATE_REQUIREMENT` rescale in the job's rescale history, `count` at the parallelism
//!    of the one admitted operation in `flowscale_operations`, the other vertices untouched),
//!    and that `calm` was never rescaled.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use postgres::{Client, NoTls};
use serde_json::Value;

use flowscale_tests::flink::{self, Cluster, run_script, wait_for as wait_until};

use super::flink::{settled_parallelism, vertex};
use super::multi_host::{Host, fresh_database, owners, wait_for};

/// The lease TTL and the step interval of every host.
const TTL: Duration = Duration::from_secs(6);
const INTERVAL: Duration = Duration::from_secs(2);
/// The metric window: a decision comes once it is full.
const WINDOW: Duration = Duration::from_secs(20);
/// What a loaded two-core machine (two JVMs, three hosts, PostgreSQL) may add to a takeover.
const SLACK: Duration = Duration::from_secs(2);
/// `vertex.max-parallelism`: two rescaled jobs at 4 and one at 1 fit the cluster's slots.
const VERTEX_MAX: u32 = 4;
const SLOTS: u32 = 10;
/// Key groups of every vertex.
const MAX_PARALLELISM: &str = "128";

/// One copy of the load job.
struct TestJob {
    name: &'static str,
    rate: &'static str,
    id: String,
    /// The keyed vertex's id (read from Flink).
    count: String,
}

fn submit(cluster: &Cluster, rate: &str) -> String {
    run_script(
        "job.sh",
        &[
            "submit",
            &cluster.url,
            "--rate",
            rate,
            "--cost-ms",
            "0",
            "--keyed-cost-ms",
            "2",
            "--parallelism",
            "1",
            "--max-parallelism",
            MAX_PARALLELISM,
        ],
        &[],
    )
}

/// The fleet file of host `id`: the three jobs, the shared database, short leases, a short
/// window, and a cooldown longer than the test, so that each job is rescaled at most once by
/// design and a second rescale can only come from a second host acting on it.
fn write_fleet(dir: &Path, id: &str, db: &str, url: &str, jobs: &[TestJob]) -> PathBuf {
    let mut text = format!(
        r#"[host]
interval = "{interval}s"
state = "{db}"
id = "{id}"
lease-ttl = "{ttl}s"

[defaults]
"metrics.window" = "{window}s"
"metrics.busy-time.aggregator" = "AVG"
"utilization.target" = 0.5
"stabilization.interval" = "5s"
"scaling-cooldown-period" = "10m"
"catch-up.duration" = "30s"
"restart.time" = "2s"
"vertex.max-parallelism" = {VERTEX_MAX}
"#,
        interval = INTERVAL.as_secs(),
        ttl = TTL.as_secs(),
        window = WINDOW.as_secs(),
    );
    for job in jobs {
        text.push_str(&format!(
            "\n[[jobs]]\nname = \"{}\"\nengine = \"flink\"\nrest = \"{url}\"\njob-id = \"{}\"\n",
            job.name, job.id
        ));
    }
    let fleet = dir.join(format!("{id}.toml"));
    std::fs::write(&fleet, text).expect("write the fleet");
    fleet
}

/// (host, token, admitted, at_ms, parallelism) of the operations recorded for `job`, in order.
type Operation = (String, i64, bool, i64, Value);

fn operations(db: &mut Client, job: &str) -> Vec<Operation> {
    db.query(
        "SELECT host, token, admitted, at_ms, parallelism::text FROM flowscale_operations \
         WHERE job = $1 ORDER BY id",
        &[&job],
    )
    .expect("operations")
    .iter()
    .map(|r| {
        let text: String = r.get(4);
        let parallelism = serde_json::from_str(&text).expect("a JSON map");
        (r.get(0), r.get(1), r.get(2), r.get(3), parallelism)
    })
    .collect()
}

/// The rescales Flink made on the job's resource requirements: (terminal state) of each
/// `UPDATE_REQUIREMENT` entry of its rescale history.
fn requirement_rescales(cluster: &Cluster, job: &TestJob) -> Vec<String> {
    let history = cluster
        .get(&format!("/jobs/{}/rescales/history", job.id))
        .expect("the job's rescale history");
    history
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .filter(|e| e["triggerCause"] == "UPDATE_REQUIREMENT")
                .map(|e| e["terminalState"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Cycles of `job` that `host` printed with a window evaluated but not yet full: one per
/// interval while the window fills.
fn filling_cycles(host: &Host, job: &str) -> usize {
    host.cycles(job)
        .iter()
        .filter(|c| c["stage"] == "WindowNotFull")
        .count()
}

/// The decision of `vertex` in the cycle of `host` that rescaled `job`, in words.
fn decision_of(host: &Host, job: &str, vertex: &str) -> String {
    host.cycles(job)
        .iter()
        .filter(|c| c["operation"].is_object())
        .filter_map(|c| {
            c["vertices"]
                .as_array()?
                .iter()
                .find(|v| v["vertex"] == vertex)
                .cloned()
        })
        .map(|d| {
            format!(
                "{} -> target {} -> aligned {} ({})",
                d["current"], d["target"], d["aligned"], d["reason"]
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Submits the three jobs and waits until each runs at parallelism 1; their ids and `count`s.
fn start_jobs(cluster: &Cluster) -> Vec<TestJob> {
    let mut jobs: Vec<TestJob> = [("hot0", "1000"), ("hot1", "1000"), ("calm", "50")]
        .into_iter()
        .map(|(name, rate)| TestJob {
            name,
            rate,
            id: submit(cluster, rate),
            count: String::new(),
        })
        .collect();
    for job in &mut jobs {
        assert_eq!(job.id.len(), 32, "job id {:?}", job.id);
        let details = wait_until("the job to run", Duration::from_secs(60), || {
            cluster
                .get(&format!("/jobs/{}", job.id))
                .filter(|d| settled_parallelism(d) == Some(1))
        });
        let count = vertex(&details, "count").expect("a count vertex");
        job.count = count["id"].as_str().expect("vertex id").to_string();
    }
    jobs
}

#[test]
#[ignore = "needs FLOWSCALE_FLINK_E2E=1 with a local Flink (flink/README.md) and FLOWSCALE_POSTGRES_URL"]
fn three_hosts_on_real_flink_take_over_a_killed_owner_and_fence_a_paused_one() {
    flink::require_enabled();
    let t0 = Instant::now();
    let db_url = fresh_database("fs_e2e_flink_hosts");
    run_script("setup.sh", &[], &[]);
    run_script("job.sh", &["build"], &[]);
    let cluster = Cluster::start(SLOTS);
    let jobs = start_jobs(&cluster);
    let ready = t0.elapsed();

    let dir = tempfile::tempdir().expect("tempdir");
    let mut hosts: Vec<Host> = ["h0", "h1", "h2"]
        .iter()
        .map(|id| {
            let fleet = write_fleet(dir.path(), id, &db_url, &cluster.url, &jobs);
            Host::start(&fleet, id)
        })
        .collect();
    let run_started = Instant::now();
    let mut db = loop {
        // The first host creates the schema.
        if let Ok(mut db) = Client::connect(&db_url, NoTls)
            && db
                .query_one("SELECT count(*) FROM flowscale_leases", &[])
                .is_ok()
        {
            break db;
        }
        assert!(run_started.elapsed() < Duration::from_secs(30), "no schema");
        std::thread::sleep(Duration::from_millis(100));
    };

    // 1. Every job has exactly one owner, and each host owns one job.
    let (spread, took) = wait_for(&mut db, Duration::from_secs(30), |o| {
        let hosts: std::collections::BTreeSet<&str> = o.values().map(|(h, _)| h.as_str()).collect();
        o.len() == jobs.len() && hosts.len() == 3
    })
    .expect("three jobs spread over three hosts");
    eprintln!("flink hosts: jobs spread one per host {took:.1?} after start: {spread:?}");

    // 2. The owners of hot0 and hot1 have filled half their windows: a rescale is coming
    //    (their keyed vertex needs two subtasks' worth of time), none was made.
    let (victim_id, victim_token) = spread["hot0"].clone();
    let (sleeper_id, sleeper_token) = spread["hot1"].clone();
    let host_of = |hosts: &[Host], id: &str| hosts.iter().position(|h| h.id == id);
    let victim = host_of(&hosts, &victim_id).expect("hot0's owner runs");
    let sleeper = host_of(&hosts, &sleeper_id).expect("hot1's owner runs");
    let filling = Instant::now();
    let half = usize::try_from(WINDOW.as_secs() / INTERVAL.as_secs() / 2).expect("small");
    while filling_cycles(&hosts[victim], "hot0") < half
        || filling_cycles(&hosts[sleeper], "hot1") < half
    {
        assert!(
            filling.elapsed() < Duration::from_secs(90),
            "the owners never evaluated a window: {:?} {:?}",
            hosts[victim].cycles("hot0").last(),
            hosts[sleeper].cycles("hot1").last()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let windows_at = run_started.elapsed();
    for (job, owner) in [("hot0", victim), ("hot1", sleeper)] {
        let made = hosts[owner]
            .cycles(job)
            .iter()
            .any(|c| c["operation"].is_object());
        assert!(!made, "{job} was rescaled before its owner was stopped");
    }
    let pre_ops = operations(&mut db, "hot0").len() + operations(&mut db, "hot1").len();
    assert_eq!(pre_ops, 0, "no rescale before the owners were stopped");
    // Still the owners (no rebalance moved the jobs meanwhile).
    let now = owners(&mut db);
    assert_eq!(now["hot0"], (victim_id.clone(), victim_token));
    assert_eq!(now["hot1"], (sleeper_id.clone(), sleeper_token));

    // SIGKILL hot0's owner and SIGSTOP hot1's at once.
    let mut killed = hosts.remove(victim);
    let sleeper = host_of(&hosts, &sleeper_id).expect("still there");
    killed.child.kill().expect("SIGKILL");
    let stopped_at = Instant::now();
    hosts[sleeper].signal("STOP");
    killed.child.wait().expect("gone");

    // 3. The third host takes hot0 over within the TTL plus one interval, with a new token.
    let (after, _) = wait_for(&mut db, TTL + INTERVAL + SLACK + SLACK, |o| {
        o.get("hot0").is_some_and(|(owner, _)| *owner != victim_id)
            && o.get("hot1").is_some_and(|(owner, _)| *owner != sleeper_id)
    })
    .expect("hot0 and hot1 taken over");
    let took = stopped_at.elapsed();
    let (heir_id, heir_token) = after["hot0"].clone();
    let (hot1_heir, hot1_token) = after["hot1"].clone();
    eprintln!(
        "flink hosts: hot0 moved from killed {victim_id} (token {victim_token}) to {heir_id} \
         (token {heir_token}), hot1 from paused {sleeper_id} (token {sleeper_token}) to \
         {hot1_heir} (token {hot1_token}), {took:.1?} after SIGKILL/SIGSTOP"
    );
    assert!(
        took <= TTL + INTERVAL + SLACK,
        "takeover took {took:?}, more than the TTL {TTL:?} plus an interval {INTERVAL:?} \
         (and {SLACK:?} of slack)"
    );
    assert!(heir_token > victim_token && hot1_token > sleeper_token);
    assert!(heir_id != sleeper_id && hot1_heir != sleeper_id);

    // Both hot jobs get rescaled by the heir, sooner than a window after the takeover: the
    // heir resumed the metric window the stopped owners had half filled.
    let rescaled = Instant::now();
    let mut settled: BTreeMap<&str, u32> = BTreeMap::new();
    while settled.len() < 2 {
        for job in &jobs[..2] {
            let p = cluster
                .get(&format!("/jobs/{}", job.id))
                .as_ref()
                .and_then(settled_parallelism);
            if let Some(p) = p.filter(|p| *p > 1) {
                settled.insert(job.name, p);
            }
        }
        assert!(
            rescaled.elapsed() < Duration::from_secs(60),
            "the hot jobs were not rescaled after the takeover: {settled:?}; ops {:?} {:?}",
            operations(&mut db, "hot0"),
            operations(&mut db, "hot1")
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let rescaled_at = run_started.elapsed();
    let after_takeover = rescaled.elapsed();
    assert!(
        after_takeover < WINDOW,
        "rescaled {after_takeover:?} after the takeover: the heir did not resume the window"
    );
    // Wake the paused host only now: the rescaled jobs are in their cooldown, so no rebalance
    // hands hot1 back to it, and its memory still holds hot1's full window at parallelism 1.
    // It must not act on hot1. Three intervals more: a second decision, by any host, would be
    // sent by then.
    hosts[sleeper].signal("CONT");
    std::thread::sleep(INTERVAL * 3 + Duration::from_secs(2));
    let decisions: BTreeMap<String, BTreeMap<&str, String>> = hosts
        .iter()
        .map(|h| {
            let of = |job: &TestJob| (job.name, decision_of(h, job.name, &job.count));
            (h.id.clone(), jobs.iter().map(of).collect())
        })
        .collect();
    let sleeper_host = &hosts[sleeper];
    let lost = sleeper_host.events("LeaseLost", "hot1");
    let fenced = sleeper_host.events("RescaleFenced", "hot1");
    let sleeper_ops: Vec<Value> = sleeper_host
        .cycles("hot1")
        .into_iter()
        .filter(|c| c["operation"].is_object())
        .collect();
    drop(hosts);
    drop(killed);

    assert!(
        lost.iter().any(|e| e["details"]["token"] == sleeper_token),
        "{sleeper_id} reports that it lost hot1 (token {sleeper_token}): {lost:?}"
    );
    assert!(
        sleeper_ops.is_empty(),
        "{sleeper_id} rescaled hot1: {sleeper_ops:?}"
    );
    let mut summary = Vec::new();
    for job in &jobs {
        let ops = operations(&mut db, job.name);
        // One host per token among the admitted operations.
        let mut holder_of: BTreeMap<i64, &str> = BTreeMap::new();
        for (host, token, ..) in ops.iter().filter(|o| o.2) {
            let first = *holder_of.entry(*token).or_insert(host.as_str());
            assert_eq!(
                first, host,
                "{}: token {token} admitted for two hosts",
                job.name
            );
        }
        let admitted: Vec<&Operation> = ops.iter().filter(|o| o.2).collect();
        let refused: Vec<&Operation> = ops.iter().filter(|o| !o.2).collect();
        let flink_rescales = requirement_rescales(&cluster, job);
        let details = cluster
            .get(&format!("/jobs/{}", job.id))
            .expect("the job's details");
        assert_eq!(details["state"], "RUNNING", "{}: {details}", job.name);
        for name in ["Source: source", "cost", "sink: Writer"] {
            let v = vertex(&details, name).unwrap_or_else(|| panic!("no {name} in {details}"));
            assert_eq!(v["parallelism"], 1, "{}: {name} was rescaled", job.name);
        }
        match job.name {
            "calm" => {
                // 50 records/s at 2 ms: 10 % of one subtask, within any band at parallelism 1.
                assert!(admitted.is_empty(), "calm was rescaled: {ops:?}");
                assert!(flink_rescales.is_empty(), "calm: {flink_rescales:?}");
            }
            name => {
                let (heir, heir_token) = if name == "hot0" {
                    (&heir_id, heir_token)
                } else {
                    (&hot1_heir, hot1_token)
                };
                let [(host, token, _, _, parallelism)] = admitted[..] else {
                    panic!("{name}: not exactly one admitted rescale: {ops:?}");
                };
                assert_eq!(host, heir, "{name}: rescaled by its new owner");
                assert_eq!(
                    *token, heir_token,
                    "{name}: under the token of the takeover"
                );
                assert_eq!(
                    flink_rescales,
                    ["COMPLETED"],
                    "{name}: Flink made exactly one rescale of the requirements"
                );
                let asked = parallelism[&job.count]
                    .as_u64()
                    .expect("count's parallelism");
                assert!(
                    asked > 1,
                    "{name}: the overloaded count was scaled up to {asked}"
                );
                assert_eq!(
                    settled_parallelism(&details).map(u64::from),
                    Some(asked),
                    "{name}: Flink runs count at what the one operation asked for"
                );
            }
        }
        // What the paused host attempted on hot1 under its old token was refused, and each
        // refusal was reported.
        if job.name == "hot1" {
            let late: Vec<_> = refused
                .iter()
                .filter(|(h, t, ..)| *h == sleeper_id && *t == sleeper_token)
                .collect();
            assert_eq!(
                late.len(),
                fenced.len(),
                "refused {late:?}, reported {fenced:?}"
            );
            assert!(
                fenced.iter().all(|e| e["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("not sent"))),
                "{fenced:?}"
            );
        } else {
            assert!(refused.is_empty(), "{}: {refused:?}", job.name);
        }
        summary.push(format!(
            "{} ({} records/s): {} admitted, {} refused, Flink rescales {flink_rescales:?}, \
             count at {:?}",
            job.name,
            job.rate,
            admitted.len(),
            refused.len(),
            settled_parallelism(&details)
        ));
        if job.name != "calm" {
            let heir = if job.name == "hot0" {
                &heir_id
            } else {
                &hot1_heir
            };
            let heir = decisions.get(heir).and_then(|d| d.get(job.name));
            summary.push(format!("  {}'s decision on count: {heir:?}", job.name));
        }
    }
    eprintln!(
        "flink hosts: cluster and jobs ready {ready:.1?}, owners stopped {windows_at:.1?} and \
         both hot jobs rescaled {rescaled_at:.1?} after the hosts started ({after_takeover:.1?} \
         after the takeover); {} rescale(s) of the \
         woken host refused; total {:.1?}",
        fenced.len(),
        t0.elapsed()
    );
    for line in summary {
        eprintln!("flink hosts: {line}");
    }
}
