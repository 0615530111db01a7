//! An in-process stand-in for a Flink REST endpoint (tests only): a loopback listener that
//! answers canned JSON per `METHOD path?query`, records every request, and can stall or hang up
//! to exercise timeouts and transport errors.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How the fake answers one route.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// Status and JSON body.
    Json(u16, String),
    /// Wait this long before answering 200 `{}` (longer than the client's timeout).
    Stall(Duration),
    /// Close the connection without answering.
    HangUp,
    /// Wait this long, then answer with status and JSON body (a slow but healthy cluster).
    Slow(Duration, u16, String),
}

/// A request the fake received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Recorded {
    pub(crate) method: String,
    pub(crate) target: String,
    pub(crate) body: String,
    /// The headers, names in lower case.
    pub(crate) headers: BTreeMap<String, String>,
}

type Routes = Arc<Mutex<BTreeMap<String, Vec<Reply>>>>;

/// The running fake; stops on drop.
pub(crate) struct FakeFlink {
    addr: SocketAddr,
    routes: Routes,
    requests: Arc<Mutex<Vec<Recorded>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeFlink {
    pub(crate) fn start() -> FakeFlink {
        FakeFlink::start_at("127.0.0.1:0".parse().expect("a loopback address"))
    }

    /// Starts serving on `addr`: a cluster that comes up at an address its clients were
    /// already trying (one that refused connections until now).
    pub(crate) fn start_at(addr: SocketAddr) -> FakeFlink {
        let listener = TcpListener::bind(addr).expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let routes: Routes = Arc::default();
        let requests: Arc<Mutex<Vec<Recorded>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (routes, requests, stop) = (routes.clone(), requests.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (routes, requests) = (routes.clone(), requests.clone());
                    std::thread::spawn(move || serve(stream, &routes, &requests));
                }
            })
        };
        FakeFlink {
            addr,
            routes,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answers `key` ("GET /jobs/x") with `reply`. Several replies for one key are served in
    /// order, the last one repeatedly.
    pub(crate) fn route(&self, key: &str, reply: Reply) -> &FakeFlink {
        self.routes
            .lock()
            .expect("routes")
            .entry(key.to_string())
            .or_default()
            .push(reply);
        self
    }

    /// Answers `key` with `body` from now on, dropping earlier replies.
    pub(crate) fn replace_json(&self, key: &str, body: &str) -> &FakeFlink {
        self.routes
            .lock()
            .expect("routes")
            .insert(key.to_string(), vec![Reply::Json(200, body.to_string())]);
        self
    }

    /// Serves the fixture job as the job `id`, restarting (no plan nodes yet): every step of
    /// a loop on it is a quick "waiting" step.
    pub(crate) fn serve_restarting(&self, id: &str) -> &FakeFlink {
        let details = include_str!("testdata/job_details.json");
        let mut details: serde_json::Value = serde_json::from_str(details).expect("fixture");
        details["jid"] = id.into();
        details["state"] = "RESTARTING".into();
        details["plan"]["nodes"] = serde_json::json!([]);
        self.json(&format!("GET /jobs/{id}"), &details.to_string());
        self.json(
            &format!("GET /jobs/{id}/plan"),
            &format!(r#"{{"plan":{{"jid":"{id}","nodes":[]}}}}"#),
        )
    }

    pub(crate) fn json(&self, key: &str, body: &str) -> &FakeFlink {
        self.route(key, Reply::Json(200, body.to_string()))
    }

    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("requests").clone()
    }

    pub(crate) fn count(&self, method: &str, target: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.method == method && r.target == target)
            .count()
    }
}

impl Drop for FakeFlink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop up so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(stream: TcpStream, routes: &Routes, requests: &Mutex<Vec<Recorded>>) {
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
    let key = format!("{method} {target}");
    requests.lock().expect("requests").push(Recorded {
        method,
        target,
        body: String::from_utf8_lossy(&body).into_owned(),
        headers,
    });
    let reply = {
        let mut routes = routes.lock().expect("routes");
        match routes.get_mut(&key) {
            Some(replies) if replies.len() > 1 => replies.remove(0),
            Some(replies) => replies[0].clone(),
            None => Reply::Json(404, r#"{"errors":["Not found: /unknown"]}"#.into()),
        }
    };
    let (status, body) = match reply {
        Reply::HangUp => return,
        Reply::Stall(wait) => {
            std::thread::sleep(wait);
            (200, "{}".to_string())
        }
        Reply::Json(status, body) => (status, body),
        Reply::Slow(wait, status, body) => {
            std::thread::sleep(wait);
            (status, body)
        }
    };
    let answer = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = writer.write_all(answer.as_bytes());
    let _ = writer.flush();
}
