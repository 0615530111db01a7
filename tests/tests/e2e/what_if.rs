//! `POST /api/v1/align` on a running host, the way an attacker would use it: a what-if that
//! trips a plugin (a segfault, an endless loop, a child process left behind) costs neither the
//! host nor its fleet, what-if calls are bounded in number and time, SIGTERM ends the host
//! whatever they do, and a web page in the operator's browser cannot send one.
//!
//! The fixture's `tripwire` mode aligns to the target, except at the targets a request picks:
//! 666 segfaults, 667 spins, 668 starts a child process that sleeps for ten minutes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{flowscale_bin, misbehaving_plugins, repo_root};
use crate::serve::free_port;

const SEGFAULT_AT: u32 = 666;
const LOOP_AT: u32 = 667;
const FORK_AT: u32 = 668;

/// What-if calls a host runs at once (the server's bound).
const WHAT_IF_CALLS: usize = 2;

/// An answer: status, headers (lower-case names) and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }
}

/// One HTTP/1.1 request as is (the `Host` header included, when `headers` has one); an error
/// when the connection fails or closes without an answer.
fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<Answer> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(body);
    stream.write_all(&bytes)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let text = String::from_utf8_lossy(&answer).to_string();
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("no answer: {text:?}"),
        )
    })?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok(Answer {
        status,
        headers: head.to_ascii_lowercase(),
        body: body.to_string(),
    })
}

/// A what-if request for `target` with the fixture's `tripwire` mode.
fn tripwire(target: u32) -> Vec<u8> {
    json!({"current": 16, "target": target, "max_parallelism": 1024, "ship_strategies": ["HASH"],
           "config": {"scaling.alignment.mode": "t", "scaling.alignment.mode.t.class": "tripwire"}})
    .to_string()
    .into_bytes()
}

const JSON: (&str, &str) = ("Content-Type", "application/json");

/// The messages of the events of a what-if answer.
fn messages(answer: &Value) -> Vec<String> {
    answer["events"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| format!("{}: {}", e["reason"], e["message"]))
        .collect()
}

/// `flowscale run` serving a fleet whose job `trip` uses the fixture's `tripwire` mode, paced
/// (one simulated minute a second), with its stdout (JSON Lines) and stderr collected.
struct Host {
    child: Option<Child>,
    port: u16,
    lines: Arc<Mutex<Vec<Value>>>,
    stderr: Arc<Mutex<String>>,
    plugins: tempfile::TempDir,
    pids: PathBuf,
    _dir: tempfile::TempDir,
}

impl Host {
    fn start(isolation: &str, call_timeout: &str) -> Host {
        let plugins = misbehaving_plugins();
        let dir = tempfile::tempdir().expect("tempdir");
        let keyed = repo_root().join("examples/jobs/keyed-step-spike.toml");
        let fleet = dir.path().join("fleet.toml");
        std::fs::write(
            &fleet,
            format!(
                r#"
[host]
plugin-isolation = "{isolation}"
plugin-call-timeout = "{call_timeout}"

[defaults]
"metrics.window" = "3 min"
"stabilization.interval" = "1 min"

[[jobs]]
name = "trip"
job = "{keyed}"
[jobs.config]
"scaling.alignment.mode" = "t"
"scaling.alignment.mode.t.class" = "tripwire"
"#,
                keyed = keyed.display()
            ),
        )
        .expect("write the fleet");
        let pids = dir.path().join("children");
        let port = free_port();
        let mut child = Command::new(flowscale_bin())
            .args(["run", "--json", "--pace", "60", "--simulated", "100h"])
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--plugins")
            .arg(plugins.path())
            .arg(&fleet)
            .env("FLOWSCALE_FIXTURE_CHILD_PIDS", &pids)
            .env_remove("FLOWSCALE_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start flowscale");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().expect("stdout");
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    sink.lock().expect("lines").push(value);
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().expect("stderr");
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = err.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .expect("stderr")
                    .push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        });
        let host = Host {
            child: Some(child),
            port,
            lines,
            stderr,
            plugins,
            pids,
            _dir: dir,
        };
        host.wait_for("the server", Duration::from_secs(60), || {
            http(port, "GET", "/healthz", &[], b"")
                .is_ok_and(|a| a.status == 200)
                .then_some(())
        });
        host
    }

    fn what_if(&self, target: u32) -> Answer {
        http(
            self.port,
            "POST",
            "/api/v1/align",
            &[JSON],
            &tripwire(target),
        )
        .unwrap_or_else(|e| {
            panic!(
                "no answer to a what-if for {target} ({e}); the host {}; its stderr:\n{}",
                self.state(),
                self.stderr()
            )
        })
    }

    fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr").clone()
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// "runs", or how it ended.
    fn state(&self) -> String {
        let pid = self.pid();
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) if !stat.contains(") Z ") => "runs".to_string(),
            _ => "has ended".to_string(),
        }
    }

    /// The cycles of job `trip` so far.
    fn cycles(&self) -> Vec<Value> {
        self.lines
            .lock()
            .expect("lines")
            .iter()
            .filter(|l| l["type"] == "cycle" && l["data"]["job"] == "trip")
            .map(|l| l["data"].clone())
            .collect()
    }

    fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut() -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = check() {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the host {}; its stderr:\n{}",
                self.state(),
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Cycles of `trip` in which the fleet's own `tripwire` aligned a vertex.
    fn tripwire_cycles(&self) -> usize {
        self.cycles()
            .iter()
            .filter(|c| {
                c["vertices"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|v| v["mode"] == "tripwire")
            })
            .count()
    }

    /// The events of `trip`'s cycles that say its mode failed or was put aside.
    fn fleet_faults(&self) -> Vec<String> {
        self.cycles()
            .iter()
            .flat_map(|c| c["events"].as_array().cloned().unwrap_or_default())
            .filter(|e| e["reason"] == "PluginFault" || e["reason"] == "ModeFallback")
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Sends `signal` and waits for the host to end: how long it took. Kills it and panics if
    /// it has not ended 30 s later.
    fn stop(&mut self, signal: &str) -> Duration {
        let mut child = self.child.take().expect("running");
        let pid = child.id();
        let sent = Instant::now();
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                return sent.elapsed();
            }
            if sent.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the host did not end within 30 s of SIG{signal}; its stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Live (not zombie) plugin workers serving this host's plugins directory.
    fn workers(&self) -> Vec<u32> {
        let dir = self.plugins.path().to_string_lossy().to_string();
        processes()
            .into_iter()
            .filter(|(_, cmdline)| cmdline.contains("plugin-worker") && cmdline.contains(&dir))
            .map(|(pid, _)| pid)
            .collect()
    }

    /// The child processes the fixture recorded so far.
    fn children(&self) -> Vec<u32> {
        std::fs::read_to_string(&self.pids)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Whatever a failed test left behind.
        for pid in self.workers().into_iter().chain(self.children()) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// Every live process (zombies left out) with its command line.
fn processes() -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| alive(*pid))
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            Some((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")))
        })
        .collect()
}

/// Whether `pid` is a live process (a zombie is not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat.rsplit_once(") ")?.1.chars().next()?;
            Some(state != 'Z' && state != 'X')
        })
        .unwrap_or(false)
}

fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Three what-ifs that segfault the plugin, in each isolation of the fleet: the host answers
/// them (in-process, the plugin would have taken the host down with it), keeps stepping its job,
/// and the fleet's own use of the mode is neither faulted nor quarantined (in `process`
/// isolation, the fleet's worker would have counted the three crashes and quarantined the mode).
#[test]
fn what_ifs_that_crash_a_plugin_cost_neither_the_host_nor_its_fleet() {
    for isolation in ["in-process", "process"] {
        let host = Host::start(isolation, "1s");
        host.wait_for("the fleet's tripwire", Duration::from_secs(60), || {
            (host.tripwire_cycles() > 0).then_some(())
        });
        for attempt in 1..=3 {
            let answer = host.what_if(SEGFAULT_AT);
            assert_eq!(answer.status, 200, "{isolation}: {answer:?}");
            let said = messages(&answer.json());
            assert!(
                said.iter().any(|m| m.contains("killed by SIGSEGV")),
                "{isolation}, attempt {attempt}: {said:?}"
            );
            if attempt == 3 {
                // The what-ifs have a quarantine of their own.
                assert!(
                    said.iter()
                        .any(|m| m.contains("quarantined for what-if calls")),
                    "{isolation}: {said:?}"
                );
            }
        }
        // Meanwhile a what-if naming the mode falls back to BALANCED, as a job of the fleet
        // would, and says why: the plugin is not called.
        let answer = host.what_if(20);
        assert_eq!(answer.status, 200, "{isolation}: {answer:?}");
        let json = answer.json();
        assert_eq!(json["mode"], "BALANCED", "{isolation}: {answer:?}");
        assert!(
            json["events"]
                .as_array()
                .is_some_and(|events| events.iter().any(|e| {
                    e["reason"] == "ModeFallback"
                        && e["message"]
                            .as_str()
                            .is_some_and(|m| m.contains("is quarantined for what-if calls"))
                })),
            "{isolation}: {answer:?}"
        );
        // The fleet goes on deciding with its own tripwire, unharmed.
        let before = host.tripwire_cycles();
        host.wait_for(
            "the fleet's next decisions",
            Duration::from_secs(60),
            || (host.tripwire_cycles() >= before + 12).then_some(()),
        );
        assert_eq!(host.state(), "runs");
        assert_eq!(host.fleet_faults(), Vec::<String>::new(), "{isolation}");
        let stderr = host.stderr();
        assert!(
            !stderr.contains("the jobs that use it align with BALANCED"),
            "{isolation}: the fleet's mode was quarantined:\n{stderr}"
        );
    }
}

/// What-ifs that spin: no more than the bound run at once (the others are answered 503 at once),
/// each in a worker process of its own, and each ends at the deadline with a fault.
#[test]
fn what_ifs_that_spin_are_bounded_and_end_at_the_deadline() {
    let host = Host::start("in-process", "3s");
    let port = host.port;
    let started = Instant::now();
    let calls: Vec<_> = (0..WHAT_IF_CALLS + 2)
        .map(|_| {
            std::thread::spawn(move || {
                let answer = http(port, "POST", "/api/v1/align", &[JSON], &tripwire(LOOP_AT));
                (answer, started.elapsed())
            })
        })
        .collect();
    // Meanwhile the spinning calls run in worker processes, not in the host.
    let spinning = wait_until(Duration::from_secs(2), || {
        host.workers().len() == WHAT_IF_CALLS
    });
    let answers: Vec<(Answer, Duration)> = calls
        .into_iter()
        .map(|c| {
            let (answer, took) = c.join().expect("the client thread");
            (answer.expect("an answer"), took)
        })
        .collect();
    let (busy, served): (Vec<_>, Vec<_>) = answers.iter().partition(|(a, _)| a.status == 503);
    assert_eq!(busy.len(), 2, "{answers:#?}");
    for (answer, took) in &busy {
        assert!(
            *took < Duration::from_millis(1500),
            "refused late: {took:?}"
        );
        assert!(
            answer.json()["error"]
                .as_str()
                .is_some_and(|e| e.contains("what-if")),
            "{answer:?}"
        );
        assert!(answer.headers.contains("retry-after:"), "{answer:?}");
    }
    assert_eq!(served.len(), WHAT_IF_CALLS, "{answers:#?}");
    for (answer, took) in &served {
        assert_eq!(answer.status, 200, "{answer:?}");
        assert!(
            *took >= Duration::from_secs(3) && *took < Duration::from_secs(7),
            "ended after {took:?}"
        );
        let said = messages(&answer.json());
        assert!(
            said.iter().any(|m| m.contains("align timed out after 3s")),
            "{said:?}"
        );
    }
    assert!(
        spinning,
        "the spinning calls were not in {WHAT_IF_CALLS} workers"
    );
    assert_eq!(host.state(), "runs");
}

/// SIGTERM while what-if calls spin in a plugin (with a deadline far away): the host ends within
/// a few seconds, and so do the workers.
#[test]
fn sigterm_ends_the_host_while_what_ifs_spin() {
    let mut host = Host::start("in-process", "60s");
    let port = host.port;
    host.wait_for("the fleet's tripwire", Duration::from_secs(60), || {
        (host.tripwire_cycles() > 0).then_some(())
    });
    for _ in 0..WHAT_IF_CALLS {
        std::thread::spawn(move || {
            let _ = http(port, "POST", "/api/v1/align", &[JSON], &tripwire(LOOP_AT));
        });
    }
    let spinning = wait_until(Duration::from_secs(5), || {
        host.workers().len() == WHAT_IF_CALLS
    });
    std::thread::sleep(Duration::from_secs(1));
    let took = host.stop("TERM");
    assert!(took < Duration::from_secs(6), "SIGTERM took {took:?}");
    assert!(
        spinning,
        "the spinning calls were not in {WHAT_IF_CALLS} workers"
    );
    let gone = wait_until(Duration::from_secs(2), || host.workers().is_empty());
    assert!(gone, "workers outlived the host: {:?}", host.workers());
}

/// A plugin's child process ends with its worker when the worker is replaced after a crash, and
/// with the host when it exits.
#[test]
fn a_plugins_child_processes_end_with_its_worker_and_with_the_host() {
    let mut host = Host::start("in-process", "2s");
    let answer = host.what_if(FORK_AT).json();
    assert_eq!(answer["parallelism"], FORK_AT, "{answer}");
    let first = host.children();
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(alive(first[0]), "the child runs");
    // The worker crashes: it is killed and reaped, and its child with it. The crash is seen as
    // one, though the child holds the worker's inherited descriptors.
    let said = messages(&host.what_if(SEGFAULT_AT).json());
    assert!(
        said.iter().any(|m| m.contains("killed by SIGSEGV")),
        "{said:?}"
    );
    assert!(
        wait_until(Duration::from_secs(2), || !alive(first[0])),
        "the child of a crashed worker lives on"
    );
    // A new worker, a new child; the host ends, and so does the child.
    let answer = host.what_if(FORK_AT).json();
    assert_eq!(answer["parallelism"], FORK_AT, "{answer}");
    let second = host.children();
    assert_eq!(second.len(), 2, "{second:?}");
    assert!(alive(second[1]));
    host.stop("TERM");
    assert!(
        wait_until(Duration::from_secs(2), || !alive(second[1])),
        "the child outlived the host"
    );
}

/// What a web page (or a DNS-rebinding one) can send is refused: a body that is not JSON by its
/// `Content-Type`, a `Host` that is not a loopback name. The loopback names pass.
#[test]
fn a_web_page_cannot_send_a_what_if() {
    let host = Host::start("in-process", "1s");
    let port = host.port;
    let balanced = json!({"current": 16, "target": 24, "max_parallelism": 128,
                          "ship_strategies": ["HASH"]})
    .to_string();
    let post = |headers: &[(&str, &str)]| {
        http(port, "POST", "/api/v1/align", headers, balanced.as_bytes()).expect("an answer")
    };
    for refused in [
        vec![("Content-Type", "text/plain")],
        vec![("Content-Type", "application/x-www-form-urlencoded")],
        vec![],
    ] {
        let answer = post(&refused);
        assert_eq!(answer.status, 415, "{refused:?}: {answer:?}");
        assert!(answer.json()["error"].is_string(), "{answer:?}");
    }
    let evil = post(&[JSON, ("Host", "evil.example")]);
    assert_eq!(evil.status, 421, "{evil:?}");
    assert!(evil.json()["error"].is_string(), "{evil:?}");
    let rebound = http(
        port,
        "GET",
        "/api/v1/jobs",
        &[("Host", &format!("evil.example:{port}"))],
        b"",
    )
    .expect("an answer");
    assert_eq!(rebound.status, 421, "{rebound:?}");
    for name in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        "localhost".to_string(),
    ] {
        let answer = post(&[JSON, ("Host", &name)]);
        assert_eq!(answer.status, 200, "Host: {name}: {answer:?}");
        assert_eq!(answer.json()["parallelism"], 26, "{answer:?}");
    }
    let charset = post(&[("Content-Type", "application/json; charset=utf-8")]);
    assert_eq!(charset.status, 200, "{charset:?}");
}
