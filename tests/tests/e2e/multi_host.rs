//! Three `flowscale run` hosts sharing a fleet of three wall-clock jobs (each its own
//! `fake_flink`) through one PostgreSQL: every job has one owner, a killed owner's job is taken
//! over within the lease TTL plus an interval and resumes its state, a paused owner loses its
//! job and does not act on it when it wakes up (nor does one frozen in the middle of a step:
//! what it attempts is refused by the fence), and every rescale a cluster received was
//! admitted by the fence exactly once.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postgres::{Client, NoTls};
use serde_json::Value;

use crate::fake_flink::{FakeFlink, JOB_ID};
use crate::harness::flowscale_bin;

mod stale_writes;
mod tls;

const TTL_MS: i64 = 2000;
const INTERVAL_MS: i64 = 500;

/// A new, empty database named `name` on the server of `FLOWSCALE_POSTGRES_URL`; its URL.
pub(super) fn fresh_database(name: &str) -> String {
    let base = std::env::var("FLOWSCALE_POSTGRES_URL")
        .expect("FLOWSCALE_POSTGRES_URL names a PostgreSQL server (.ci/run starts one)");
    let mut admin = Client::connect(&base, NoTls).expect("the test server accepts connections");
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .expect("drop the old database");
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .expect("a fresh database");
    let (server, _) = base.rsplit_once('/').expect("a URL with a database");
    format!("{server}/{name}")
}

/// The fleet file of host `id`: the three jobs, the shared database, short leases.
fn write_fleet(dir: &Path, id: &str, url: &str, rests: &[String]) -> PathBuf {
    let jobs: Vec<(String, &str)> = rests
        .iter()
        .enumerate()
        .map(|(i, rest)| (format!("j{i}"), rest.as_str()))
        .collect();
    let jobs: Vec<(&str, &str)> = jobs.iter().map(|(n, r)| (n.as_str(), *r)).collect();
    write_fleet_of(dir, id, url, (TTL_MS, INTERVAL_MS), &jobs)
}

/// The fleet file of host `id` with the jobs `(name, rest)` on the shared database at `url`,
/// with a lease TTL and interval of `(ttl_ms, interval_ms)`: jobs that decide within seconds.
pub(super) fn write_fleet_of(
    dir: &Path,
    id: &str,
    url: &str,
    (ttl_ms, interval_ms): (i64, i64),
    jobs: &[(&str, &str)],
) -> PathBuf {
    let mut text = format!(
        r#"
[host]
interval = "{interval_ms}ms"
state = "{url}"
id = "{id}"
lease-ttl = "{ttl_ms}ms"

[defaults]
"metrics.window" = "2s"
"stabilization.interval" = "1s"
"scaling-cooldown-period" = "3s"
"scale-down.interval" = "0"
"utilization.max" = "0.8"
"utilization.min" = "0.5"
"#
    );
    for (name, rest) in jobs {
        text.push_str(&format!(
            "\n[[jobs]]\nname = \"{name}\"\nengine = \"flink\"\nrest = \"{rest}\"\njob-id = \"{JOB_ID}\"\n"
        ));
    }
    let fleet = dir.join(format!("{id}.toml"));
    std::fs::write(&fleet, text).expect("write the fleet");
    fleet
}

/// A running host and the JSON lines it printed so far.
pub(super) struct Host {
    /// The host's `[host] id`.
    pub(super) id: String,
    /// The `flowscale run` process.
    pub(super) child: Child,
    lines: Arc<Mutex<Vec<Value>>>,
    /// Everything it printed, stdout and stderr, as text.
    output: Arc<Mutex<String>>,
}

impl Host {
    pub(super) fn start(fleet: &Path, id: &str) -> Host {
        Host::start_with(fleet, id, &[])
    }

    /// Starts host `id` on `fleet` with the environment variables `envs` set.
    pub(super) fn start_with(fleet: &Path, id: &str, envs: &[(&str, &std::ffi::OsStr)]) -> Host {
        let mut child = Command::new(flowscale_bin())
            .arg("run")
            .arg(fleet)
            .arg("--json")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env_remove("FLOWSCALE_LOG")
            .envs(envs.iter().copied())
            .spawn()
            .expect("start flowscale");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let output = Arc::new(Mutex::new(String::new()));
        let (sink, text) = (Arc::clone(&lines), Arc::clone(&output));
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                text.lock().expect("output").push_str(&format!("{line}\n"));
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    sink.lock().expect("lines").push(value);
                }
            }
        });
        let text = Arc::clone(&output);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                text.lock().expect("output").push_str(&format!("{line}\n"));
            }
        });
        Host {
            id: id.to_string(),
            child,
            lines,
            output,
        }
    }

    /// Everything the host printed so far, stdout and stderr.
    pub(super) fn output(&self) -> String {
        self.output.lock().expect("output").clone()
    }

    /// The host's own events (`event` lines without a job) of `reason`.
    pub(super) fn host_events(&self, reason: &str) -> Vec<Value> {
        self.lines
            .lock()
            .expect("lines")
            .iter()
            .filter(|l| l["type"] == "event" && l["data"]["event"]["reason"] == reason)
            .map(|l| l["data"]["event"].clone())
            .collect()
    }

    /// The cycle reports (`data` of the `cycle` lines) this host printed for `job`.
    pub(super) fn cycles(&self, job: &str) -> Vec<Value> {
        self.lines
            .lock()
            .expect("lines")
            .iter()
            .filter(|l| l["type"] == "cycle" && l["data"]["job"] == job)
            .map(|l| l["data"].clone())
            .collect()
    }

    /// The events of `reason` for `job` this host printed (in its cycle reports, or alone).
    pub(super) fn events(&self, reason: &str, job: &str) -> Vec<Value> {
        self.lines
            .lock()
            .expect("lines")
            .iter()
            .flat_map(|l| match l["type"].as_str() {
                Some("cycle") => l["data"]["events"].as_array().cloned().unwrap_or_default(),
                Some("event") => vec![l["data"]["event"].clone()],
                _ => Vec::new(),
            })
            .filter(|e| e["reason"] == reason && e["job"] == job)
            .collect()
    }

    pub(super) fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{name}");
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// job -> (owner, token).
pub(super) type Owners = BTreeMap<String, (String, i64)>;

/// The owner and token of every lease held now, by the database's clock.
pub(super) fn owners(db: &mut Client) -> Owners {
    db.query(
        "SELECT job, owner, token FROM flowscale_leases WHERE owner IS NOT NULL \
         AND expires_ms > (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
        &[],
    )
    .expect("leases")
    .iter()
    .map(|r| (r.get(0), (r.get(1), r.get(2))))
    .collect()
}

/// Waits up to `limit` for `ready` to hold on the owners; the owners then.
pub(super) fn wait_for(
    db: &mut Client,
    limit: Duration,
    ready: impl Fn(&Owners) -> bool,
) -> Option<(Owners, Duration)> {
    let started = Instant::now();
    while started.elapsed() < limit {
        let now = owners(db);
        if ready(&now) {
            return Some((now, started.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// The database's clock, ms.
pub(super) fn db_now_ms(db: &mut Client) -> i64 {
    db.query_one(
        "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
        &[],
    )
    .expect("clock")
    .get(0)
}

/// (host, token, admitted, at_ms) of the operations recorded for `job`, in order.
pub(super) fn operations(db: &mut Client, job: &str) -> Vec<(String, i64, bool, i64)> {
    db.query(
        "SELECT host, token, admitted, at_ms FROM flowscale_operations WHERE job = $1 ORDER BY id",
        &[&job],
    )
    .expect("operations")
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
    .collect()
}

#[test]
#[ignore = "needs PostgreSQL: .ci/run starts one (FLOWSCALE_POSTGRES_URL)"]
fn three_hosts_share_the_jobs_take_over_a_killed_owner_and_fence_a_frozen_one() {
    let url = fresh_database("fs_e2e_hosts");
    let fakes: Vec<FakeFlink> = (0..3).map(|_| FakeFlink::start()).collect();
    let rests: Vec<String> = fakes.iter().map(FakeFlink::url).collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut hosts: Vec<Host> = ["h0", "h1", "h2"]
        .iter()
        .map(|id| Host::start(&write_fleet(dir.path(), id, &url, &rests), id))
        .collect();
    let mut db = loop {
        // The first host creates the schema.
        if let Ok(mut db) = Client::connect(&url, NoTls)
            && db
                .query_one("SELECT count(*) FROM flowscale_leases", &[])
                .is_ok()
        {
            break db;
        }
        std::thread::sleep(Duration::from_millis(100));
    };

    // Every job gets an owner, and the three hosts end up with one job each.
    let (spread, took) = wait_for(&mut db, Duration::from_secs(30), |o| {
        let mut per_host: BTreeMap<&str, usize> = BTreeMap::new();
        for (owner, _) in o.values() {
            *per_host.entry(owner.as_str()).or_default() += 1;
        }
        o.len() == 3 && per_host.len() == 3
    })
    .expect("three jobs spread over three hosts");
    eprintln!("jobs spread one per host after {took:?}: {spread:?}");

    // Let the jobs decide and rescale a while under their owners.
    std::thread::sleep(Duration::from_secs(6));

    // SIGKILL the owner of j0: another host takes the job over, with the next token.
    let (victim, token) = owners(&mut db)["j0"].clone();
    let index = hosts.iter().position(|h| h.id == victim).expect("a host");
    let mut killed = hosts.remove(index);
    killed.child.kill().expect("SIGKILL");
    killed.child.wait().expect("gone");
    let (after, took) = wait_for(&mut db, Duration::from_secs(10), |o| {
        o.get("j0").is_some_and(|(owner, _)| *owner != victim)
    })
    .expect("j0 taken over");
    let (heir, new_token) = after["j0"].clone();
    eprintln!(
        "j0 moved from {victim} (token {token}) to {heir} (token {new_token}) {took:?} after SIGKILL"
    );
    // The lease lapses at most a TTL after the killed host's last renewal (just before the
    // kill), and another host's round comes at most an interval later; 1 s for a busy machine.
    let bound = Duration::from_millis(u64::try_from(TTL_MS + INTERVAL_MS + 1000).expect("small"));
    assert!(took <= bound, "takeover took {took:?} > {bound:?}");
    assert!(
        new_token > token,
        "the token grows: {token} then {new_token}"
    );

    // The heir resumes the job's state: its event log holds what the killed host recorded.
    let stored_tokens = |db: &mut Client| -> Vec<i64> {
        let stored: Option<Value> = db
            .query_opt(
                "SELECT value FROM flowscale_job_sections WHERE job = 'j0' AND section = 'events'",
                &[],
            )
            .expect("j0's events")
            .map(|r| r.get(0));
        stored
            .and_then(|s| s["events"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter(|e| e["event"]["reason"] == "LeaseAcquired")
            .filter_map(|e| e["event"]["details"]["token"].as_i64())
            .collect()
    };
    let started = Instant::now();
    let mut tokens = stored_tokens(&mut db);
    // The heir's first step may wait for the engine's metrics: up to 10 s.
    while !tokens.contains(&new_token) && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
        tokens = stored_tokens(&mut db);
    }
    assert!(
        tokens.contains(&token) && tokens.contains(&new_token),
        "j0's stored events go on across the takeover (tokens {token} and {new_token}): {tokens:?}"
    );
    let heir_host = hosts.iter().find(|h| h.id == heir).expect("the heir runs");
    let acquired = heir_host.events("LeaseAcquired", "j0");
    assert!(
        acquired.iter().any(|e| e["details"]["token"] == new_token),
        "the heir reports LeaseAcquired with token {new_token}: {acquired:?}"
    );

    // SIGSTOP the owner of another job past its lease, then SIGCONT it.
    let owners_now = owners(&mut db);
    let (job, (paused_id, paused_token)) = owners_now
        .iter()
        .find(|(_, (owner, _))| hosts.iter().any(|h| h.id == *owner))
        .map(|(j, o)| (j.clone(), o.clone()))
        .expect("a job held by a running host");
    let paused = hosts.iter().find(|h| h.id == paused_id).expect("running");
    paused.signal("STOP");
    let (moved, took) = wait_for(&mut db, Duration::from_secs(10), |o| {
        o.get(&job).is_some_and(|(owner, _)| *owner != paused_id)
    })
    .expect("the paused host's job is taken over");
    eprintln!(
        "{job} moved from paused {paused_id} to {:?} {took:?} after SIGSTOP",
        moved[&job]
    );
    let taken_over_ms = db_now_ms(&mut db);
    std::thread::sleep(Duration::from_secs(1));
    paused.signal("CONT");
    std::thread::sleep(Duration::from_secs(3));
    // The woken host's next step reports the loss (together with a new token when its lease
    // round claimed the job back first); a loaded machine may take a few seconds more.
    let woken = Instant::now();
    let mut lost = paused.events("LeaseLost", &job);
    while !lost.iter().any(|e| e["details"]["token"] == paused_token)
        && woken.elapsed() < Duration::from_secs(7)
    {
        std::thread::sleep(Duration::from_millis(100));
        lost = paused.events("LeaseLost", &job);
    }
    assert!(
        lost.iter().any(|e| e["details"]["token"] == paused_token),
        "{paused_id} reports that it lost {job} (token {paused_token}): {lost:?}"
    );
    let fenced = paused.events("RescaleFenced", &job).len();
    // Nothing the woken host did on the job under its old token got through.
    let late: Vec<_> = operations(&mut db, &job)
        .into_iter()
        .filter(|(host, t, admitted, at)| {
            host == &paused_id && *t == paused_token && *admitted && *at >= taken_over_ms
        })
        .collect();
    assert!(late.is_empty(), "admitted after the takeover: {late:?}");
    eprintln!("{paused_id} woke up: LeaseLost reported, {fenced} rescale(s) refused by the fence");

    // A host frozen in the middle of a step (its lease checked, its metrics requested) and
    // woken after another host took the job over goes on with that step: whatever it decides,
    // nothing is admitted under its old token, and a rescale it attempts is refused and
    // recorded as refused. (Whether the step decides a rescale depends on the load at that
    // moment; the refusal itself is asserted deterministically by the fence tests of
    // state::postgres and runner.)
    let mut refused = 0;
    for round in 1..=3 {
        let Some((frozen_id, token)) = owners(&mut db).get("j2").cloned() else {
            std::thread::sleep(Duration::from_millis(500));
            continue;
        };
        let Some(frozen) = hosts.iter().find(|h| h.id == frozen_id) else {
            break;
        };
        let before = frozen.events("RescaleFenced", "j2").len();
        fakes[2].hold();
        let started = Instant::now();
        while fakes[2].waiting() == 0 && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        frozen.signal("STOP");
        let moved = wait_for(&mut db, Duration::from_secs(10), |o| {
            o.get("j2").is_some_and(|(owner, _)| *owner != frozen_id)
        });
        let taken_over_ms = db_now_ms(&mut db);
        fakes[2].release();
        std::thread::sleep(Duration::from_millis(300));
        frozen.signal("CONT");
        assert!(moved.is_some(), "j2 taken over from frozen {frozen_id}");
        std::thread::sleep(Duration::from_millis(1500));
        let now_refused = frozen.events("RescaleFenced", "j2").len() - before;
        let ops = operations(&mut db, "j2");
        let late: Vec<_> = ops
            .iter()
            .filter(|(h, t, admitted, at)| {
                *h == frozen_id && *t == token && *admitted && *at >= taken_over_ms
            })
            .collect();
        assert!(
            late.is_empty(),
            "admitted to the woken {frozen_id}: {late:?}"
        );
        let recorded = ops
            .iter()
            .filter(|(h, t, admitted, at)| {
                *h == frozen_id && *t == token && !admitted && *at >= taken_over_ms
            })
            .count();
        assert_eq!(
            recorded, now_refused,
            "every refusal reported is recorded: {ops:?}"
        );
        eprintln!(
            "round {round}: {frozen_id} frozen mid-step with token {token}, woke up: {now_refused} rescale(s) refused"
        );
        refused += now_refused;
    }
    eprintln!("{refused} rescale(s) of woken hosts refused by the fence");

    // Every job had one owner per token, and every rescale a cluster received was admitted
    // once by the fence (the killed host may have been killed between the two, and a host
    // whose lease ended after the admission gave the rescale up: RescaleAbandoned).
    let abandoned: BTreeMap<String, usize> = (0..fakes.len())
        .map(|i| {
            let job = format!("j{i}");
            let count = hosts
                .iter()
                .flat_map(|h| h.events("RescaleAbandoned", &job))
                .filter(|e| {
                    e["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("abandoned"))
                })
                .count();
            (job, count)
        })
        .collect();
    drop(hosts);
    for (i, fake) in fakes.iter().enumerate() {
        let job = format!("j{i}");
        let ops = operations(&mut db, &job);
        let mut holder_of: BTreeMap<i64, &str> = BTreeMap::new();
        for (host, token, _, _) in ops.iter().filter(|o| o.2) {
            let first = *holder_of.entry(*token).or_insert(host.as_str());
            assert_eq!(first, host, "{job}: token {token} admitted for two hosts");
        }
        let admitted = ops.iter().filter(|o| o.2).count();
        let received = fake.rescales();
        eprintln!("{job}: {admitted} rescale(s) admitted, {received} received by its cluster");
        let slack = usize::from(job == "j0") + abandoned[&job];
        assert!(
            received <= admitted && admitted <= received + slack,
            "{job}: {admitted} admitted, {received} received"
        );
    }
}

/// Runs `flowscale status FLEET --json`: its exit code, its JSON answer (if any), and stderr.
fn status_json(fleet: &Path) -> (Option<i32>, Option<Value>, String) {
    let out = Command::new(flowscale_bin())
        .arg("status")
        .arg(fleet)
        .arg("--json")
        .env_remove("FLOWSCALE_LOG")
        .output()
        .expect("run flowscale status");
    let json = serde_json::from_slice(&out.stdout).ok();
    (
        out.status.code(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
#[ignore = "needs PostgreSQL: .ci/run starts one (FLOWSCALE_POSTGRES_URL)"]
fn status_shows_one_running_host_as_the_owner_of_every_job() {
    let url = fresh_database("fs_e2e_status");
    let fakes: Vec<FakeFlink> = (0..3).map(|_| FakeFlink::start()).collect();
    let rests: Vec<String> = fakes.iter().map(FakeFlink::url).collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let ids = ["h0", "h1"];
    let fleets: Vec<PathBuf> = ids
        .iter()
        .map(|id| write_fleet(dir.path(), id, &url, &rests))
        .collect();
    let hosts: Vec<Host> = ids
        .iter()
        .zip(&fleets)
        .map(|(id, fleet)| Host::start(fleet, id))
        .collect();

    // Wait until the database says every job is held and both hosts hold some (3 jobs over 2
    // hosts: 2 and 1), so that `status` has something settled to show.
    let ready = |answer: &Value| {
        let jobs = answer["jobs"].as_array().cloned().unwrap_or_default();
        let owners: Vec<&str> = jobs.iter().filter_map(|j| j["owner"].as_str()).collect();
        owners.len() == 3 && ids.iter().all(|id| owners.contains(id))
    };
    let started = Instant::now();
    let answer = loop {
        let (code, json, stderr) = status_json(&fleets[0]);
        if let Some(json) = json.filter(|j| code == Some(0) && ready(j)) {
            break json;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no settled ownership within 30 s: exit {code:?}, stderr {stderr}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!("status: {answer}");

    assert_eq!(answer["state"], "postgres");
    let live: Vec<&str> = answer["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .filter_map(|h| h["id"].as_str())
        .collect();
    assert_eq!(live, ids, "the two running hosts are the live ones");
    let jobs = answer["jobs"].as_array().expect("jobs");
    let names: Vec<&str> = jobs.iter().filter_map(|j| j["name"].as_str()).collect();
    assert_eq!(names, ["j0", "j1", "j2"], "every job of the fleet, once");
    for job in jobs {
        let owner = job["owner"].as_str().expect("an owner");
        assert!(ids.contains(&owner), "{job}: owner among the running hosts");
        // One claim per job at least; a lease renewed every third of the TTL expires within it.
        assert!(job["token"].as_i64().expect("a token") >= 1, "{job}");
        let left = job["expires_in_ms"].as_i64().expect("an expiry");
        assert!(
            0 < left && left <= TTL_MS,
            "{job}: lease expires in {left} ms"
        );
        assert_eq!(
            job["expires_ms"].as_i64().expect("expires_ms") - answer["now_ms"].as_i64().unwrap(),
            left,
            "{job}"
        );
    }
    // Exactly one owner per job, and it agrees with the lease table itself.
    let mut db = Client::connect(&url, NoTls).expect("connect");
    let table = owners(&mut db);
    for job in jobs {
        let name = job["name"].as_str().expect("name");
        let (owner, token) = &table[name];
        // A rebalance between the two reads would change the token too; none is expected
        // once both hosts hold jobs, so both reads must agree.
        assert_eq!(job["owner"].as_str(), Some(owner.as_str()), "{name}");
        assert_eq!(job["token"].as_i64(), Some(*token), "{name}");
    }

    // Every host gone (SIGKILL): once the leases lapse, no job has an owner and no host is live.
    drop(hosts);
    std::thread::sleep(Duration::from_millis(u64::try_from(TTL_MS).unwrap() + 500));
    let (code, json, stderr) = status_json(&fleets[1]);
    assert_eq!(code, Some(0), "{stderr}");
    let json = json.expect("a JSON answer");
    assert_eq!(json["hosts"].as_array().map(Vec::len), Some(0), "{json}");
    for job in json["jobs"].as_array().expect("jobs") {
        assert!(job["owner"].is_null() && job["token"].is_null(), "{job}");
    }
}

#[test]
fn status_of_an_unreachable_database_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Port 1 on loopback: nothing listens there.
    let fleet = write_fleet(
        dir.path(),
        "h0",
        "postgres://flowscale@127.0.0.1:1/flowscale",
        &["http://127.0.0.1:1".to_string()],
    );
    let (code, json, stderr) = status_json(&fleet);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(json.is_none(), "nothing on stdout");
    assert!(
        stderr.contains("cannot read the state database (`[host] state`)"),
        "{stderr}"
    );
}

#[test]
fn status_with_a_state_dir_says_ownership_needs_a_shared_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("state")).expect("state dir");
    let fleet = dir.path().join("fleet.toml");
    std::fs::write(
        &fleet,
        format!(
            "[host]\nstate-dir = \"state\"\n\n[[jobs]]\nname = \"j0\"\nengine = \"flink\"\n\
             rest = \"http://127.0.0.1:1\"\njob-id = \"{JOB_ID}\"\n"
        ),
    )
    .expect("write the fleet");
    let (code, json, stderr) = status_json(&fleet);
    assert_eq!(code, Some(0), "{stderr}");
    let json = json.expect("a JSON answer");
    assert_eq!(json["state"], "files", "{json}");
    assert_eq!(json["held"], false, "no host runs: {json}");
    assert!(json["holder_pid"].is_null(), "{json}");
    assert!(
        json["message"]
            .as_str()
            .is_some_and(|m| m.contains("only with a shared database")),
        "{json}"
    );
}

/// Runs `flowscale run FLEET --once --json`: its exit code and its JSON lines.
fn run_once(fleet: &Path) -> (Option<i32>, Vec<Value>, String) {
    let out = Command::new(flowscale_bin())
        .arg("run")
        .arg(fleet)
        .args(["--once", "--json"])
        .env_remove("FLOWSCALE_LOG")
        .output()
        .expect("run flowscale run --once");
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (
        out.status.code(),
        lines,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The steps of each job in the summary lines of a run.
fn summary_steps(lines: &[Value]) -> BTreeMap<String, u64> {
    lines
        .iter()
        .filter(|l| l["type"] == "summary")
        .filter_map(|l| {
            Some((
                l["data"]["job"].as_str()?.to_string(),
                l["data"]["steps"].as_u64()?,
            ))
        })
        .collect()
}

/// The jobs a run reported `LeaseAcquired` for, with the token.
fn acquired(lines: &[Value]) -> BTreeMap<String, i64> {
    lines
        .iter()
        .filter(|l| l["type"] == "cycle")
        .flat_map(|l| l["data"]["events"].as_array().cloned().unwrap_or_default())
        .filter(|e| e["reason"] == "LeaseAcquired")
        .filter_map(|e| {
            Some((
                e["job"].as_str()?.to_string(),
                e["details"]["token"].as_i64()?,
            ))
        })
        .collect()
}

#[test]
#[ignore = "needs PostgreSQL: .ci/run starts one (FLOWSCALE_POSTGRES_URL)"]
fn run_once_claims_the_free_jobs_steps_them_and_leaves_held_ones_alone() {
    let url = fresh_database("fs_e2e_once");
    let fakes: Vec<FakeFlink> = (0..3).map(|_| FakeFlink::start()).collect();
    let rests: Vec<String> = fakes.iter().map(FakeFlink::url).collect();
    let dir = tempfile::tempdir().expect("tempdir");

    // Alone on a fresh database: every job is free, claimed (token 1) and stepped once, and
    // given up at the end.
    let fleet = write_fleet(dir.path(), "once", &url, &rests);
    let (code, lines, stderr) = run_once(&fleet);
    assert_eq!(code, Some(0), "{stderr}");
    let names = ["j0", "j1", "j2"].map(String::from);
    let steps = summary_steps(&lines);
    assert_eq!(
        steps,
        names.iter().map(|n| (n.clone(), 1)).collect(),
        "one step per job: {lines:?}"
    );
    assert_eq!(
        acquired(&lines),
        names.iter().map(|n| (n.clone(), 1)).collect(),
        "each job claimed once, first token: {lines:?}"
    );
    for name in &names {
        let stepped = lines.iter().any(|l| {
            l["type"] == "cycle"
                && l["data"]["job"] == name.as_str()
                && !l["data"]["stage"].is_null()
        });
        assert!(stepped, "{name}: a decision cycle ran: {lines:?}");
    }
    let mut db = Client::connect(&url, NoTls).expect("connect");
    assert!(
        owners(&mut db).is_empty(),
        "the leases were given up at the end"
    );

    // A running host holds every job: a run of one step claims none and steps none.
    let holder = Host::start(&write_fleet(dir.path(), "h0", &url, &rests), "h0");
    let (held, _) = wait_for(&mut db, Duration::from_secs(15), |o| {
        o.len() == 3 && o.values().all(|(h, _)| h == "h0")
    })
    .expect("h0 holds every job");
    let (code, lines, stderr) = run_once(&write_fleet(dir.path(), "once2", &url, &rests));
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        summary_steps(&lines),
        names.iter().map(|n| (n.clone(), 0)).collect(),
        "no step of a job another host holds: {lines:?}"
    );
    assert!(acquired(&lines).is_empty(), "{lines:?}");
    let after: Vec<_> = operations(&mut db, "j0")
        .into_iter()
        .chain(operations(&mut db, "j1"))
        .chain(operations(&mut db, "j2"))
        .filter(|(host, ..)| host == "once2")
        .collect();
    assert!(
        after.is_empty(),
        "no rescale attempt by the one-step run: {after:?}"
    );
    eprintln!("h0 held {held:?}; the one-step run left them alone");
    drop(holder);
}
