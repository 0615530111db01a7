//! A small stand-in for a Flink cluster's REST API, for end-to-end tests of wall-clock jobs
//! without a cluster: one streaming job (source -> work -> sink) on the adaptive scheduler whose
//! operators get less busy as their parallelism grows, and which applies the resource
//! requirements `flowscale` PUTs (the job restarts at the new parallelism). Every answer has the
//! shape a Flink 2.x cluster gives; anything else is a 404 as Flink answers it.
//!
//! For the tests of stale writes it can listen on several ports (one per host, so that it can
//! tell whose request it got even from a host that names no writer), hold a PUT and answer it
//! late (a reset, a 503, or never), and log every change it applied with the writer headers.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// The job's id.
pub(crate) const JOB_ID: &str = "5e1f2a3b4c5d6e7f8091a2b3c4d5e6f7";

const SOURCE: &str = "0a1b2c3d4e5f60718293a4b5c6d7e8f9";
const WORK: &str = "1a1b2c3d4e5f60718293a4b5c6d7e8f9";
const SINK: &str = "2a1b2c3d4e5f60718293a4b5c6d7e8f9";
/// Vertices: id, name, parallelism at the start, input.
const VERTICES: [(&str, &str, u32, Option<&str>); 3] = [
    (SOURCE, "Source: events", 2, None),
    (WORK, "work", 2, Some(SOURCE)),
    (SINK, "Sink: out", 1, Some(WORK)),
];
const MAX_PARALLELISM: u32 = 128;
/// The source reads `MEAN ± SWING` records per second, a sine over `PERIOD_S` seconds, so that
/// the job scales up and down every few seconds.
const MEAN: f64 = 2500.0;
const SWING: f64 = 1500.0;
const PERIOD_S: f64 = 12.0;
/// Records per second one subtask of the work vertex can process.
const CAPACITY: f64 = 1111.0;

fn rate_at(t_s: f64) -> f64 {
    MEAN + SWING * (std::f64::consts::TAU * t_s / PERIOD_S).sin()
}

/// Records read from `from_s` to `to_s` (the integral of [`rate_at`]).
fn records_between(from_s: f64, to_s: f64) -> f64 {
    let k = std::f64::consts::TAU / PERIOD_S;
    MEAN * (to_s - from_s) - SWING / k * ((k * to_s).cos() - (k * from_s).cos())
}

struct Job {
    parallelism: BTreeMap<&'static str, u32>,
    running_since_ms: i64,
    /// Resource requirements applied so far (rescales).
    rescales: usize,
    /// Every change applied, in order.
    applied: Vec<Applied>,
}

/// A change the fake applied: when, through which of its ports, and who says it wrote it.
#[derive(Debug, Clone)]
pub(crate) struct Applied {
    /// The fake's wall clock when it applied the change (ms since the epoch).
    pub(crate) at_ms: i64,
    /// The port it came in on (its index in [`FakeFlink::urls`]).
    pub(crate) via: usize,
    /// The `X-Flowscale-Host` header, if sent.
    pub(crate) host: Option<String>,
    /// The `X-Flowscale-Fencing-Token` header, if sent.
    pub(crate) token: Option<i64>,
}

/// How the fake answers the PUT it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The connection is reset (RST), without an answer.
    Reset,
    /// `503 Service Unavailable`, as a JobManager in trouble answers.
    Unavailable,
    /// No answer ever: the connection stays open until the fake stops.
    Silent,
}

/// The PUT held on purpose: armed, then the port it arrived on, then its verdict.
#[derive(Default)]
struct PutHold {
    armed: bool,
    arrived: Option<usize>,
    verdict: Option<Verdict>,
}

/// The running fake; stops when dropped.
pub(crate) struct FakeFlink {
    addrs: Vec<SocketAddr>,
    job: Arc<Mutex<Job>>,
    held: Arc<Held>,
    put_hold: Arc<(Mutex<PutHold>, Condvar)>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl FakeFlink {
    /// Starts serving on a loopback port. The job has been running for an hour.
    pub(crate) fn start() -> FakeFlink {
        FakeFlink::start_on(1)
    }

    /// Starts serving one job on `ports` loopback ports.
    pub(crate) fn start_on(ports: usize) -> FakeFlink {
        let addrs = (0..ports.max(1))
            .map(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
            .collect();
        FakeFlink::start_at(addrs)
    }

    /// Starts serving one job on `addrs`: a cluster that comes up at an address its clients
    /// were already trying (see [`flowscale_tests::refusing_address`]).
    pub(crate) fn start_at(wanted: Vec<SocketAddr>) -> FakeFlink {
        let job = Arc::new(Mutex::new(Job {
            parallelism: VERTICES.iter().map(|(id, _, p, _)| (*id, *p)).collect(),
            running_since_ms: now_ms() - 3_600_000,
            rescales: 0,
            applied: Vec::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let held = Arc::new(Held::default());
        let put_hold = Arc::new((Mutex::new(PutHold::default()), Condvar::new()));
        let mut addrs = Vec::new();
        let mut threads = Vec::new();
        for (via, wanted) in wanted.into_iter().enumerate() {
            let listener = TcpListener::bind(wanted).expect("bind a loopback port");
            addrs.push(listener.local_addr().expect("its address"));
            let held = Arc::clone(&held);
            let job = Arc::clone(&job);
            let stop = Arc::clone(&stop);
            let put_hold = Arc::clone(&put_hold);
            threads.push(std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let job = Arc::clone(&job);
                    let held = Arc::clone(&held);
                    let put_hold = Arc::clone(&put_hold);
                    let stop = Arc::clone(&stop);
                    std::thread::spawn(move || serve(stream, via, &job, &held, &put_hold, &stop));
                }
            }));
        }
        FakeFlink {
            addrs,
            job,
            held,
            put_hold,
            stop,
            threads,
        }
    }

    /// The REST endpoint (the first port).
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addrs[0])
    }

    /// The REST endpoint of every port, in order.
    pub(crate) fn urls(&self) -> Vec<String> {
        self.addrs.iter().map(|a| format!("http://{a}")).collect()
    }

    /// How many rescales (resource requirements) were applied.
    pub(crate) fn rescales(&self) -> usize {
        self.job.lock().unwrap_or_else(|e| e.into_inner()).rescales
    }

    /// Every change applied so far, in order.
    pub(crate) fn applied(&self) -> Vec<Applied> {
        self.job
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .applied
            .clone()
    }

    /// Holds the next PUT of resource requirements, on whichever port it comes: it is not
    /// applied, and is answered as [`FakeFlink::answer_held`] says.
    pub(crate) fn hold_next_put(&self) {
        let (hold, _) = &*self.put_hold;
        *hold.lock().unwrap_or_else(|e| e.into_inner()) = PutHold {
            armed: true,
            ..PutHold::default()
        };
    }

    /// The port the held PUT came in on, once one is held.
    pub(crate) fn held_put(&self) -> Option<usize> {
        let (hold, _) = &*self.put_hold;
        hold.lock().unwrap_or_else(|e| e.into_inner()).arrived
    }

    /// Answers the held PUT (never applied) with `verdict`.
    pub(crate) fn answer_held(&self, verdict: Verdict) {
        let (hold, wake) = &*self.put_hold;
        hold.lock().unwrap_or_else(|e| e.into_inner()).verdict = Some(verdict);
        wake.notify_all();
    }

    /// Holds every answer to a metrics request until [`FakeFlink::release`] (a host's step
    /// then waits in the middle, between its lease check and its decision).
    pub(crate) fn hold(&self) {
        self.held.on.store(true, Ordering::SeqCst);
    }

    /// Answers the held requests.
    pub(crate) fn release(&self) {
        self.held.on.store(false, Ordering::SeqCst);
    }

    /// How many requests wait for [`FakeFlink::release`].
    pub(crate) fn waiting(&self) -> usize {
        self.held.waiting.load(Ordering::SeqCst)
    }
}

/// Requests held back on purpose.
#[derive(Default)]
struct Held {
    on: AtomicBool,
    waiting: std::sync::atomic::AtomicUsize,
}

impl Drop for FakeFlink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.put_hold.1.notify_all();
        // Wake the accept loops up so that they see the flag.
        for addr in &self.addrs {
            let _ = TcpStream::connect(addr);
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn serve(
    stream: TcpStream,
    via: usize,
    job: &Mutex<Job>,
    held: &Held,
    put_hold: &(Mutex<PutHold>, Condvar),
    stop: &AtomicBool,
) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default().to_string();
    let mut length = 0usize;
    let mut headers = BTreeMap::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            let name = name.trim().to_ascii_lowercase();
            if name == "content-length" {
                length = value.trim().parse().unwrap_or(0);
            }
            headers.insert(name, value.trim().to_string());
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    if method == "PUT" && target.ends_with("/resource-requirements") {
        let (hold, wake) = put_hold;
        let mut state = hold.lock().unwrap_or_else(|e| e.into_inner());
        if state.armed {
            state.armed = false;
            state.arrived = Some(via);
            while state.verdict.is_none() && !stop.load(Ordering::SeqCst) {
                state = wake.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            let verdict = state.verdict;
            drop(state);
            match verdict {
                Some(Verdict::Reset) => reset(&writer),
                Some(Verdict::Unavailable) => {
                    let text = r#"{"errors":["Service temporarily unavailable"]}"#;
                    let reply = format!(
                        "HTTP/1.1 503 X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                        text.len()
                    );
                    let _ = writer.write_all(reply.as_bytes());
                }
                // Silent, or the fake stops: the connection closes with the fake.
                _ => {
                    while !stop.load(Ordering::SeqCst) {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                }
            }
            return;
        }
    }
    if target.contains("/metrics?get=") && held.on.load(Ordering::SeqCst) {
        held.waiting.fetch_add(1, Ordering::SeqCst);
        while held.on.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        held.waiting.fetch_sub(1, Ordering::SeqCst);
    }
    let (status, answer) = {
        let mut job = job.lock().unwrap_or_else(|e| e.into_inner());
        let before = job.rescales;
        let answered = answer(&mut job, &method, &target, &body);
        if job.rescales > before {
            job.applied.push(Applied {
                at_ms: now_ms(),
                via,
                host: headers.get("x-flowscale-host").cloned(),
                token: headers
                    .get("x-flowscale-fencing-token")
                    .and_then(|t| t.parse().ok()),
            });
        }
        answered
    };
    let text = answer.to_string();
    let reply = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = writer.write_all(reply.as_bytes());
    let _ = writer.flush();
}

/// Resets `stream` (an RST, not an orderly close): what a crashed or restarted peer, or a
/// proxy dropping the connection, looks like to the client.
fn reset(stream: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket descriptor and a `linger` value of the size passed.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    // The last descriptor of the socket closes when the request's thread returns: an RST.
}

fn answer(job: &mut Job, method: &str, target: &str, body: &[u8]) -> (u16, Value) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let wanted: Vec<&str> = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("get="))
        .map(|list| list.split(',').collect())
        .unwrap_or_default();
    let job_path = format!("/jobs/{JOB_ID}");
    let segments: Vec<&str> = path
        .strip_prefix(&job_path)
        .map(|rest| rest.split('/').filter(|s| !s.is_empty()).collect())
        .unwrap_or_default();
    match (method, path, segments.as_slice()) {
        ("GET", p, []) if p == job_path => (200, details(job)),
        ("GET", _, ["resource-requirements"]) => (200, requirements(job)),
        ("PUT", _, ["resource-requirements"]) => apply(job, body),
        ("GET", _, ["vertices", vertex, "subtasks", "metrics"]) => {
            match VERTICES.iter().find(|(id, ..)| id == vertex) {
                Some(&(_, _, _, input)) if wanted.is_empty() => (200, metric_names(input)),
                Some(&(id, ..)) => (200, metric_values(job, id, &wanted)),
                None => not_found(path),
            }
        }
        // The cluster's jobs, for an entry without `job-id`.
        ("GET", "/jobs/overview", _) => (
            200,
            json!({"jobs": [{
                "jid": JOB_ID, "name": "fake", "state": "RUNNING",
                "tasks": {"running": VERTICES.len(), "total": VERTICES.len()}
            }]}),
        ),
        ("GET", "/jobmanager/metrics", _) => (
            200,
            json!([{"id": "taskSlotsTotal", "value": "512"}, {"id": "taskSlotsAvailable", "value": "256"}]),
        ),
        ("GET", "/taskmanagers/metrics", _) => (200, json!([])),
        _ => not_found(path),
    }
}

fn not_found(path: &str) -> (u16, Value) {
    (404, json!({"errors": [format!("Not found: {path}")]}))
}

fn details(job: &Job) -> Value {
    // Counters since the job (re)started: every record passes every vertex.
    let (since_s, now_s) = (
        job.running_since_ms as f64 / 1000.0,
        now_ms() as f64 / 1000.0,
    );
    let records = records_between(since_s, now_s).round();
    let elapsed_s = now_s - since_s;
    let vertices: Vec<Value> = VERTICES
        .iter()
        .map(|(id, name, _, input)| {
            let p = job.parallelism[id];
            let read = if input.is_some() { records } else { 0.0 };
            let busy_ms = busy_ms_per_second(job, id) * f64::from(p) * elapsed_s;
            json!({
                "id": id, "name": name, "parallelism": p, "maxParallelism": MAX_PARALLELISM,
                "status": "RUNNING", "tasks": {"RUNNING": p},
                "metrics": {"read-records": read, "write-records": records, "accumulated-busy-time": busy_ms}
            })
        })
        .collect();
    let nodes: Vec<Value> = VERTICES
        .iter()
        .map(|(id, name, _, input)| {
            let inputs: Vec<Value> = input
                .iter()
                .map(|from| json!({"id": from, "num": 0, "ship_strategy": "HASH"}))
                .collect();
            json!({"id": id, "parallelism": job.parallelism[id], "description": format!("{name}<br/>"), "inputs": inputs})
        })
        .collect();
    json!({
        "jid": JOB_ID, "name": "fake", "state": "RUNNING", "schedulerType": "Adaptive",
        "timestamps": {"RUNNING": job.running_since_ms, "CREATED": job.running_since_ms - 100},
        "vertices": vertices,
        "plan": {"jid": JOB_ID, "name": "fake", "type": "STREAMING", "nodes": nodes}
    })
}

fn requirements(job: &Job) -> Value {
    let map: serde_json::Map<String, Value> = job
        .parallelism
        .iter()
        .map(|(id, p)| {
            let bounds = json!({"parallelism": {"lowerBound": 1, "upperBound": p}});
            ((*id).to_string(), bounds)
        })
        .collect();
    Value::Object(map)
}

/// The adaptive scheduler restarts the job at the upper bounds it was given.
fn apply(job: &mut Job, body: &[u8]) -> (u16, Value) {
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body) else {
        return (400, json!({"errors": ["bad request"]}));
    };
    for (id, requirement) in map {
        let upper = requirement["parallelism"]["upperBound"].as_u64();
        if let (Some(p), Some((key, _))) = (upper, job.parallelism.iter().find(|(k, _)| **k == id))
        {
            let key = *key;
            job.parallelism
                .insert(key, u32::try_from(p).unwrap_or(MAX_PARALLELISM));
        }
    }
    job.running_since_ms = now_ms();
    job.rescales += 1;
    (200, json!({}))
}

fn metric_names(input: Option<&str>) -> Value {
    let names: &[&str] = match input {
        None => &[
            "busyTimeMsPerSecond",
            "backPressuredTimeMsPerSecond",
            "Source__events.numRecordsInPerSecond",
            "Source__events.numRecordsIn",
            "Source__events.numRecordsOut",
        ],
        Some(_) => &[
            "busyTimeMsPerSecond",
            "numRecordsInPerSecond",
            "numRecordsIn",
        ],
    };
    Value::Array(names.iter().map(|n| json!({"id": n})).collect())
}

/// How busy each subtask of `vertex` is now: the work vertex in proportion to the rate over
/// what its subtasks can process; the source and the sink idle along.
fn busy_ms_per_second(job: &Job, vertex: &str) -> f64 {
    let p = f64::from(job.parallelism[vertex]);
    let rate = rate_at(now_ms() as f64 / 1000.0);
    if vertex == WORK {
        (1000.0 * rate / (p * CAPACITY)).min(1000.0)
    } else {
        100.0 / p
    }
}

fn metric_values(job: &Job, vertex: &str, wanted: &[&str]) -> Value {
    let p = f64::from(job.parallelism[vertex]);
    let (since_s, now_s) = (
        job.running_since_ms as f64 / 1000.0,
        now_ms() as f64 / 1000.0,
    );
    let busy = busy_ms_per_second(job, vertex);
    let entries: Vec<Value> = wanted
        .iter()
        .map(|name| {
            let sum = if name.ends_with("busyTimeMsPerSecond") {
                busy * p
            } else if name.ends_with("backPressuredTimeMsPerSecond") {
                0.0
            } else if name.ends_with("PerSecond") {
                rate_at(now_s)
            } else {
                records_between(since_s, now_s).round()
            };
            let avg = sum / p;
            json!({"id": name, "min": avg, "max": avg, "avg": avg, "sum": sum, "skew": 0.0})
        })
        .collect();
    Value::Array(entries)
}
