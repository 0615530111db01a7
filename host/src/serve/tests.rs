//! Tests of the server: the view and its metrics, the routes, the token, and clients that are
//! slow or send garbage.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::shared::MAX_WHAT_IF_CALLS;
use super::view::MAX_POINTS;
use super::{Backend, FleetView, HEADER_TIMEOUT, MAX_BODY_BYTES, ServeConfig, Server};
use crate::events::{Event, EventReason, Severity};
use crate::plugins::{PluginFileReport, PluginListing, PluginStatus};
use crate::runner::CycleReport;
use crate::scaling::{CycleStage, VertexDecision};

struct FakeBackend;

impl Backend for FakeBackend {
    fn plugins(&self) -> PluginListing {
        let mut refused = PluginFileReport::demo(PluginStatus::Refused, Some("bad <layout>"));
        refused.file = "/p/libx.so".into();
        PluginListing {
            files: vec![PluginFileReport::demo(PluginStatus::Loaded, None), refused],
            versions_loaded: 2,
            ..PluginListing::empty("/p".into())
        }
    }
    fn align(&self, request: &[u8]) -> Result<serde_json::Value, serde_json::Value> {
        serde_json::from_slice::<serde_json::Value>(request)
            .map(|v| serde_json::json!({"echo": v}))
            .map_err(|e| serde_json::json!({"line": 1, "error": e.to_string()}))
    }
}

fn vertex(id: &str, current: u32, target: u32, aligned: u32) -> VertexDecision {
    VertexDecision {
        vertex: id.into(),
        name: format!("op {id}").into(),
        current,
        target: Some(target),
        aligned: Some(aligned),
        proposed: Some(aligned),
        mode: Some("BALANCED".into()),
        outside_band: true,
        excluded: false,
        reason: "busy 0.95 > 0.8".into(),
        explanation: vec!["accepted <26> by LOAD_REDUCING".to_string()].into(),
    }
}

fn report(job: &str, at_ms: i64, current: u32, scaled_to: Option<u32>) -> CycleReport {
    let mut r = CycleReport::new(job, at_ms);
    r.stage = Some(if scaled_to.is_some() {
        CycleStage::Scaled
    } else {
        CycleStage::WithinBounds
    });
    r.vertices = vec![vertex("a", current, 24, scaled_to.unwrap_or(current))];
    r.operation = scaled_to.map(|p| BTreeMap::from([("a".to_string(), p)]));
    r.load = Some(1000.0 + at_ms as f64);
    r.elapsed = Duration::from_micros(300);
    r
}

fn start(view: Arc<FleetView>, token: Option<&str>) -> Server {
    start_with(view, token, Arc::new(FakeBackend))
}

fn start_with(view: Arc<FleetView>, token: Option<&str>, backend: Arc<dyn Backend>) -> Server {
    let config = ServeConfig {
        listen: "127.0.0.1:0".parse().expect("an address"),
        api_token: token.map(str::to_string),
        api_token_file: None,
        tls: None,
    };
    Server::start(&config, view, backend).expect("the server starts")
}

/// A backend whose what-if answers only once `open` is set (or after a minute), counting the
/// calls running meanwhile.
#[derive(Default)]
struct GatedBackend {
    open: std::sync::atomic::AtomicBool,
    running: std::sync::atomic::AtomicUsize,
}

impl Backend for GatedBackend {
    fn plugins(&self) -> PluginListing {
        PluginListing::empty("/p".into())
    }
    fn align(&self, _: &[u8]) -> Result<serde_json::Value, serde_json::Value> {
        use std::sync::atomic::Ordering;
        self.running.fetch_add(1, Ordering::SeqCst);
        let until = Instant::now() + Duration::from_secs(60);
        while !self.open.load(Ordering::SeqCst) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.running.fetch_sub(1, Ordering::SeqCst);
        Ok(serde_json::json!({"done": true}))
    }
}

/// Waits up to 5 s for `check`.
fn eventually(mut check: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    while !check() {
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// Sends `request` as is and returns the status code and the body of the answer.
fn raw(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("a timeout");
    stream.write_all(request).expect("sends");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

fn get(addr: SocketAddr, path: &str, extra: &str) -> (u16, String) {
    raw(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{extra}\r\n")
            .as_bytes(),
    )
}

fn post(addr: SocketAddr, path: &str, body: &[u8]) -> (u16, String) {
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    raw(addr, &request)
}

#[test]
fn the_view_and_the_metrics_show_whether_this_host_holds_a_jobs_lease() {
    let view = FleetView::new();
    view.add_job("j", "flink", "BALANCED");
    view.add_job("k", "flink", "BALANCED");
    assert_eq!(view.jobs()[0].lease, None, "no shared state: no lease");
    let mut acquired = report("j", 10_000, 10, None);
    acquired.events.push(
        Event::new(EventReason::LeaseAcquired, Severity::Normal, "taken")
            .job("j")
            .detail("token", 7),
    );
    view.record(&acquired);
    let mut lost = report("k", 10_000, 10, None);
    lost.events.push(
        Event::new(EventReason::LeaseLost, Severity::Warning, "lost")
            .job("k")
            .detail("token", 3),
    );
    view.record(&lost);
    let jobs = view.jobs();
    assert_eq!(
        jobs[0].lease,
        Some(crate::serve::view::LeaseView {
            held: true,
            token: 7
        })
    );
    assert_eq!(
        jobs[1].lease,
        Some(crate::serve::view::LeaseView {
            held: false,
            token: 3
        })
    );
    assert_eq!(jobs[1].status, "another host holds the lease");
    let text = view.metrics().encode_text();
    for line in [
        "flowscale_lease_held{job=\"j\"} 1",
        "flowscale_lease_token{job=\"j\"} 7",
        "flowscale_lease_held{job=\"k\"} 0",
        "flowscale_lease_token{job=\"k\"} 3",
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
    }
}

#[test]
fn the_view_keeps_the_last_decision_and_the_metrics_count_steps() {
    let view = FleetView::new();
    view.add_job("j", "sim", "BALANCED");
    assert!(!view.all_reached(), "no step yet");
    view.record(&report("j", 10_000, 10, None));
    let mut scaled = report("j", 20_000, 10, Some(26));
    scaled
        .events
        .push(Event::new(EventReason::PluginFault, Severity::Warning, "boom").job("j"));
    view.record(&scaled);
    view.record(&report("j", 30_000, 26, None));
    assert!(view.all_reached());

    let detail = view.job("j").expect("the job");
    assert_eq!(detail.steps, 3);
    assert_eq!(detail.vertices[0].current, 26);
    let last = detail.last_decision.expect("a decision");
    assert_eq!(last.at_ms, 20_000);
    assert_eq!(last.text, "rescaled: op a=26");
    assert_eq!(
        last.vertices[0].explanation,
        vec!["accepted <26> by LOAD_REDUCING"]
    );
    let parallelism: Vec<u32> = detail.series.iter().map(|p| p.parallelism[0]).collect();
    assert_eq!(parallelism, vec![10, 26, 26]);
    assert_eq!(view.events("j").expect("events")[0].reason, "PluginFault");

    let text = view.metrics().encode_text();
    for line in [
        "flowscale_decisions_total{job=\"j\",mode=\"BALANCED\"} 3",
        "flowscale_rescales_total{job=\"j\"} 1",
        "flowscale_plugin_faults_total{job=\"j\",mode=\"BALANCED\"} 1",
        "flowscale_engine_errors_total{job=\"j\"} 0",
        "flowscale_vertex_parallelism{job=\"j\",vertex=\"op a\",kind=\"current\"} 26",
        "flowscale_vertex_parallelism{job=\"j\",vertex=\"op a\",kind=\"target\"} 24",
        "flowscale_cycle_duration_seconds_count 3",
        "# TYPE flowscale_decisions_total counter",
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
    }
    assert!(!text.contains("# EOF"), "{text}");
    assert!(view.metrics().encode().ends_with("# EOF\n"));
}

#[test]
fn a_long_series_is_thinned_to_cover_the_whole_run() {
    let view = FleetView::new();
    view.add_job("j", "sim", "BALANCED");
    let steps = MAX_POINTS * 5;
    for i in 0..steps {
        view.record(&report("j", i as i64 * 1000, 10 + (i as u32 % 3), None));
    }
    let series = view.job("j").expect("the job").series;
    assert!(
        series.len() <= MAX_POINTS && series.len() >= MAX_POINTS / 2,
        "{}",
        series.len()
    );
    assert_eq!(series[0].at_ms, 0, "the start is kept");
    let last = series.last().expect("points").at_ms;
    assert!(last >= (steps as i64 - 8) * 1000, "the end is kept: {last}");
}

#[test]
fn the_routes_answer_json_html_and_metrics() {
    let view = Arc::new(FleetView::new());
    view.add_job("a&b", "sim", "EVENLY_SPREAD");
    view.record(&report("a&b", 1000, 10, Some(16)));
    let server = start(Arc::clone(&view), None);
    let addr = server.local_addr();

    assert_eq!(get(addr, "/healthz", ""), (200, "ok\n".to_string()));
    assert_eq!(get(addr, "/readyz", "").0, 200);
    let (status, jobs) = get(addr, "/api/v1/jobs", "");
    assert_eq!(status, 200);
    let jobs: serde_json::Value = serde_json::from_str(&jobs).expect("JSON");
    assert_eq!(jobs[0]["job"], "a&b");
    assert_eq!(jobs[0]["mode"], "EVENLY_SPREAD");
    let (status, job) = get(addr, "/api/v1/jobs/a%26b", "");
    assert_eq!(status, 200, "{job}");
    let job: serde_json::Value = serde_json::from_str(&job).expect("JSON");
    assert_eq!(job["last_decision"]["operation"]["a"], 16);
    assert_eq!(get(addr, "/api/v1/jobs/nope", "").0, 404);
    assert_eq!(get(addr, "/api/v1/jobs/nope/events", "").0, 404);
    assert_eq!(get(addr, "/api/v1/jobs/a%26b/events", "").0, 200);
    let (_, plugins) = get(addr, "/api/v1/plugins", "");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&plugins).expect("JSON"),
        serde_json::to_value(FakeBackend.plugins()).expect("a listing is JSON")
    );
    let (status, answer) = post(addr, "/api/v1/align", br#"{"current": 3}"#);
    assert_eq!(
        (status, answer.as_str()),
        (200, r#"{"echo":{"current":3}}"#)
    );
    assert_eq!(post(addr, "/api/v1/align", b"{nope").0, 422);

    let (status, metrics) = get(addr, "/metrics", "");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("flowscale_rescales_total{job=\"a&b\"} 1"),
        "{metrics}"
    );
    let (_, om) = get(addr, "/metrics", "Accept: application/openmetrics-text\r\n");
    assert!(om.ends_with("# EOF\n"));

    let (status, fleet) = get(addr, "/", "");
    assert_eq!(status, 200);
    assert!(
        fleet.contains("a&amp;b") && !fleet.contains("a&b<"),
        "escaped: {fleet}"
    );
    assert!(fleet.contains("href=\"/jobs/a%26b\""));
    let (status, page) = get(addr, "/jobs/a%26b", "");
    assert_eq!(status, 200);
    assert!(page.contains("<svg id=\"chart\"") && page.contains("<polyline"));
    assert!(page.contains("accepted &lt;26&gt; by LOAD_REDUCING"));
    let (_, plugins_page) = get(addr, "/plugins", "");
    assert!(
        plugins_page.contains("bad &lt;layout&gt;"),
        "{plugins_page}"
    );
    assert!(
        plugins_page.contains("<code>/p/libdemo.so</code></td><td class=\"ok\">loaded</td>")
            && plugins_page.contains("<b>demo</b>: does things"),
        "{plugins_page}"
    );
    assert!(
        plugins_page.contains("<code>/p</code>: 2 plugin version(s) loaded"),
        "{plugins_page}"
    );
    assert_eq!(get(addr, "/no/such/page", "").0, 404);
}

#[test]
fn the_openapi_document_describes_every_api_route() {
    let doc: serde_json::Value =
        serde_json::from_str(&super::openapi_json()).expect("the document is JSON");
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")));
    for path in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/api/v1/jobs",
        "/api/v1/jobs/{job}",
        "/api/v1/jobs/{job}/events",
        "/api/v1/plugins",
        "/api/v1/align",
        "/api/v1/openapi.json",
    ] {
        assert!(doc["paths"][path].is_object(), "no {path} in the document");
    }
    assert!(doc["paths"]["/api/v1/align"]["post"]["requestBody"].is_object());
    assert!(doc["components"]["schemas"]["JobDetail"].is_object());
    // The answers of the rules every request and every what-if pass.
    let align = &doc["paths"]["/api/v1/align"]["post"]["responses"];
    for status in ["415", "503"] {
        assert!(align[status].is_object(), "no {status} for the what-if");
    }
    assert!(
        align["503"]["headers"]["Retry-After"].is_object(),
        "{align}"
    );
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("a path item") {
            assert_eq!(
                operation["responses"]["421"]["content"]["application/json"]["schema"]["$ref"],
                "#/components/schemas/ApiError",
                "{method} {path} does not declare the Host rule's 421"
            );
        }
    }
}

#[test]
fn a_request_from_a_web_page_is_refused() {
    let server = start(Arc::new(FleetView::new()), None);
    let addr = server.local_addr();
    let port = addr.port();
    let align = |headers: &str| {
        raw(
            addr,
            format!(
                "POST /api/v1/align HTTP/1.1\r\nConnection: close\r\n{headers}\
                 Content-Length: 2\r\n\r\n{{}}"
            )
            .as_bytes(),
        )
    };
    // An answer with `status` whose JSON error says `says`.
    let refused = |(status, body): (u16, String), expected: u16, says: &str| {
        assert_eq!(status, expected, "{body}");
        let error: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert!(
            error["error"].as_str().is_some_and(|e| e.contains(says)),
            "{body}"
        );
    };
    // What a form or a fetch without a preflight can send.
    for content_type in [
        "Content-Type: text/plain\r\n",
        "Content-Type: application/x-www-form-urlencoded\r\n",
        "Content-Type: multipart/form-data; boundary=x\r\n",
        "",
    ] {
        let headers = format!("Host: localhost\r\n{content_type}");
        refused(align(&headers), 415, "application/json");
    }
    let json = "Content-Type: application/json\r\n";
    assert_eq!(
        align("Host: localhost\r\nContent-Type: Application/JSON; charset=utf-8\r\n").0,
        200
    );
    // Names other than loopback ones (a DNS-rebinding page sends its own), on any route.
    for host in [
        "evil.example".to_string(),
        format!("evil.example:{port}"),
        format!("localhost.evil.example:{port}"),
        "127.0.0.1.evil.example".to_string(),
        "10.0.0.1".to_string(),
        "[::2]".to_string(),
        "localhost:80:80".to_string(),
        String::new(),
    ] {
        refused(align(&format!("Host: {host}\r\n{json}")), 421, "loopback");
        let (status, _) = raw(
            addr,
            format!("GET /api/v1/jobs HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        );
        assert_eq!(status, 421, "GET with Host: {host}");
    }
    // No Host at all, and a target naming another host.
    assert_eq!(raw(addr, b"GET /healthz HTTP/1.0\r\n\r\n").0, 421);
    assert_eq!(
        raw(
            addr,
            b"GET http://evil.example/healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        )
        .0,
        421
    );
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        "LOCALHOST".to_string(),
        "localhost.".to_string(),
        format!("dashboard.localhost:{port}"),
        "127.8.9.10".to_string(),
        "[::ffff:127.0.0.1]".to_string(),
    ] {
        let (status, body) = align(&format!("Host: {host}\r\n{json}"));
        assert_eq!(status, 200, "Host: {host}: {body}");
    }
}

#[test]
fn with_a_token_any_host_name_is_served() {
    let token = "s3cret-token-0123456789";
    let server = start(Arc::new(FleetView::new()), Some(token));
    let (status, _) = raw(
        server.local_addr(),
        format!(
            "GET /api/v1/jobs HTTP/1.1\r\nHost: flowscale.example:9464\r\n\
             Authorization: Bearer {token}\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_eq!(status, 200);
}

#[test]
fn the_bearer_scheme_is_read_in_any_case() {
    use super::auth::authorized;
    let token = "s3cret-token-0123456789";
    for given in [
        format!("Bearer {token}"),
        format!("bearer {token}"),
        format!("BEARER {token}"),
        format!("bEaReR   {token} "),
    ] {
        assert!(authorized(Some(given.as_bytes()), token), "{given}");
    }
    for given in [
        format!("Basic {token}"),
        format!("Bearer{token}"),
        format!("Bearer x{token}"),
        "Bearer".to_string(),
        String::new(),
    ] {
        assert!(!authorized(Some(given.as_bytes()), token), "{given}");
    }
    let server = start(Arc::new(FleetView::new()), Some(token));
    let addr = server.local_addr();
    assert_eq!(
        get(
            addr,
            "/api/v1/jobs",
            &format!("Authorization: bearer {token}\r\n")
        )
        .0,
        200
    );
}

#[test]
fn what_ifs_beyond_the_bound_are_refused_and_a_stopping_server_does_not_wait_for_them() {
    use std::sync::atomic::Ordering;
    let backend = Arc::new(GatedBackend::default());
    let server = start_with(
        Arc::new(FleetView::new()),
        None,
        Arc::clone(&backend) as Arc<dyn Backend>,
    );
    let addr = server.local_addr();
    let waiting: Vec<_> = (0..MAX_WHAT_IF_CALLS)
        .map(|_| std::thread::spawn(move || post(addr, "/api/v1/align", b"{}")))
        .collect();
    assert!(eventually(
        || backend.running.load(Ordering::SeqCst) == MAX_WHAT_IF_CALLS
    ));
    let one_more: &[u8] = b"POST /api/v1/align HTTP/1.1\r\nHost: localhost\r\n\
        Connection: close\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
    let refused = raw(addr, one_more);
    assert_eq!(refused.0, 503, "{refused:?}");
    let error: serde_json::Value = serde_json::from_str(&refused.1).expect("JSON");
    assert!(
        error["error"]
            .as_str()
            .is_some_and(|e| e.contains("what-if")),
        "{error}"
    );
    let mut stream = TcpStream::connect(addr).expect("connects");
    stream.write_all(one_more).expect("sends");
    let mut head = String::new();
    let _ = stream.read_to_string(&mut head);
    assert!(
        head.to_ascii_lowercase().contains("retry-after: 1"),
        "{head}"
    );
    // Other routes are served meanwhile.
    assert_eq!(get(addr, "/healthz", "").0, 200);
    backend.open.store(true, Ordering::SeqCst);
    for call in waiting {
        assert_eq!(call.join().expect("a client").0, 200);
    }
    assert_eq!(
        post(addr, "/api/v1/align", b"{}").0,
        200,
        "the permits are back"
    );

    // Calls that never return do not keep a stopping server.
    backend.open.store(false, Ordering::SeqCst);
    for _ in 0..MAX_WHAT_IF_CALLS {
        std::thread::spawn(move || post(addr, "/api/v1/align", b"{}"));
    }
    assert!(eventually(
        || backend.running.load(Ordering::SeqCst) == MAX_WHAT_IF_CALLS
    ));
    let stopping = Instant::now();
    drop(server);
    assert!(
        stopping.elapsed() < Duration::from_secs(3),
        "the server took {:?} to stop",
        stopping.elapsed()
    );
    backend.open.store(true, Ordering::SeqCst);
}

#[test]
fn with_a_token_every_request_needs_it() {
    let token = "s3cret-token-0123456789";
    let server = start(Arc::new(FleetView::new()), Some(token));
    let addr = server.local_addr();
    for path in ["/healthz", "/metrics", "/api/v1/jobs", "/"] {
        assert_eq!(get(addr, path, "").0, 401, "{path} without a token");
        assert_eq!(
            get(
                addr,
                path,
                "Authorization: Bearer wrong-token-0123456789\r\n"
            )
            .0,
            401,
            "{path} with a wrong token"
        );
        assert_eq!(
            get(addr, path, &format!("Authorization: Bearer {token}\r\n")).0,
            200,
            "{path} with the token"
        );
    }
    assert_eq!(post(addr, "/api/v1/align", b"{}").0, 401);
}

#[test]
fn malformed_requests_get_an_error_and_the_server_carries_on() {
    let server = start(Arc::new(FleetView::new()), None);
    let addr = server.local_addr();
    let too_big = vec![b'x'; MAX_BODY_BYTES + 1];
    assert_eq!(post(addr, "/api/v1/align", &too_big).0, 413);
    // A body longer than announced, or announced larger than the limit.
    assert_eq!(
        raw(
            addr,
            b"POST /api/v1/align HTTP/1.1\r\nHost: localhost\r\nContent-Length: 99999999\r\n\r\n{}"
        )
        .0,
        413
    );
    for garbage in [
        &b"\x00\x01\x02 garbage\r\n\r\n"[..],
        b"GET\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: -3\r\n\r\n",
        b"GET /%ff%fe HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ] {
        let (status, _) = raw(addr, garbage);
        assert!(
            status == 0 || (400..500).contains(&status),
            "{:?} got {status}",
            String::from_utf8_lossy(garbage)
        );
    }
    // Headers larger than the server's buffer.
    let huge = format!(
        "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n",
        "a".repeat(200_000)
    );
    let (status, _) = raw(addr, huge.as_bytes());
    assert!(status == 0 || status == 431 || status == 400, "{status}");
    assert_eq!(post(addr, "/api/v1/align", b"\xff\xfe not json").0, 422);
    assert_eq!(get(addr, "/healthz", ""), (200, "ok\n".to_string()));
}

#[test]
fn slow_clients_neither_block_others_nor_stay_forever() {
    let server = start(Arc::new(FleetView::new()), None);
    let addr = server.local_addr();
    // A few clients that send half a request line and then nothing, and one that sends its
    // body a byte at a time.
    let mut idle: Vec<TcpStream> = (0..16)
        .map(|_| {
            let mut s = TcpStream::connect(addr).expect("connects");
            s.write_all(b"GET /heal").expect("sends");
            s
        })
        .collect();
    let mut dribble = TcpStream::connect(addr).expect("connects");
    dribble
        .write_all(b"POST /api/v1/align HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
        .expect("sends");
    let started = Instant::now();
    assert_eq!(get(addr, "/healthz", ""), (200, "ok\n".to_string()));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a request waited {:?} behind slow clients",
        started.elapsed()
    );
    // The idle clients are cut off once the header deadline passes.
    let first = &mut idle[0];
    first
        .set_read_timeout(Some(HEADER_TIMEOUT + Duration::from_secs(10)))
        .expect("a timeout");
    let waited = Instant::now();
    let mut buf = Vec::new();
    let read = first.read_to_end(&mut buf);
    assert!(
        read.is_ok() && waited.elapsed() < HEADER_TIMEOUT + Duration::from_secs(5),
        "an idle client was kept {:?}: {read:?}",
        waited.elapsed()
    );
    assert_eq!(get(addr, "/healthz", ""), (200, "ok\n".to_string()));
    drop(dribble);
}

#[test]
fn a_non_loopback_address_needs_a_token_and_tls_or_a_proxy_in_front() {
    use crate::config::{HostSettings, ListenError, TlsFiles, check_listen};
    let host = |token: Option<&str>, file: bool, tls: bool, plaintext: bool| HostSettings {
        api_token: token.map(str::to_string),
        api_token_file: file.then(|| "token".into()),
        tls: tls.then(|| TlsFiles {
            cert: "c.pem".into(),
            key: "c.key".into(),
        }),
        listen_plaintext: plaintext,
        ..HostSettings::with_plugins_dir("plugins".into())
    };
    let any: SocketAddr = "0.0.0.0:9464".parse().expect("an address");
    let token = Some("a-long-enough-token");
    assert_eq!(
        check_listen(any, &host(None, false, true, false)),
        Err(ListenError::NeedsToken(any))
    );
    assert_eq!(
        check_listen(any, &host(Some("short"), false, true, false)),
        Err(ListenError::BadToken)
    );
    assert_eq!(
        check_listen(any, &host(token, false, false, false)),
        Err(ListenError::NeedsTls(any))
    );
    assert_eq!(
        check_listen(any, &host(None, true, false, false)),
        Err(ListenError::NeedsTls(any))
    );
    assert_eq!(check_listen(any, &host(token, false, true, false)), Ok(()));
    assert_eq!(check_listen(any, &host(None, true, true, false)), Ok(()));
    assert_eq!(check_listen(any, &host(None, true, false, true)), Ok(()));
    assert_eq!(
        check_listen(any, &host(None, false, false, true)),
        Err(ListenError::NeedsToken(any)),
        "a proxy in front lifts the TLS requirement, not the token"
    );
    for local in ["127.0.0.1:9464", "[::1]:9464"] {
        let local: SocketAddr = local.parse().expect("an address");
        assert_eq!(
            check_listen(local, &host(None, false, false, false)),
            Ok(())
        );
    }
}

/// `promtool check metrics` on the output of a view fed like a fleet's. `#[ignore]`d: it needs
/// promtool (Debian's `prometheus` package), which `.ci/run` installs, running it with
/// `FLOWSCALE_PROMTOOL=1`.
#[test]
#[ignore = "needs promtool (Debian package prometheus) and FLOWSCALE_PROMTOOL=1; .ci/run runs it"]
fn promtool_accepts_the_metrics() {
    assert_eq!(
        std::env::var("FLOWSCALE_PROMTOOL").as_deref(),
        Ok("1"),
        "this test runs promtool and needs FLOWSCALE_PROMTOOL=1"
    );
    let view = FleetView::new();
    view.metrics().set_plugins_loaded(2);
    for job in ["a", "b"] {
        view.add_job(job, "sim", "BALANCED");
        view.record(&report(job, 1000, 10, Some(16)));
    }
    if let Err(complaint) = flowscale_tests::promtool_check(&view.metrics().encode_text()) {
        panic!("{complaint}");
    }
}

/// Leases whose owners a test sets: this host is `h1`, and holds the leases owned by `h1`.
struct OwnerLeases(std::sync::Mutex<BTreeMap<String, crate::state::LeaseOwner>>);

impl OwnerLeases {
    fn set(&self, owners: &[(&str, &str, i64)]) {
        let mut last = LAST_TOKENS.lock().expect("last tokens");
        for (job, host, token) in owners {
            if *host == "h1" {
                last.insert(job.to_string(), *token);
            }
        }
        *self.0.lock().expect("owners") = owners
            .iter()
            .map(|(job, host, token)| {
                let owner = crate::state::LeaseOwner {
                    host: host.to_string(),
                    token: *token,
                };
                (job.to_string(), owner)
            })
            .collect();
    }
}

impl crate::state::JobLeases for OwnerLeases {
    fn host_id(&self) -> &str {
        "h1"
    }
    fn want(&self, _: &str) {}
    fn unwant(&self, _: &str) {}
    fn set_busy(&self, _: &str, _: bool) {}
    fn lease(&self, job: &str) -> Option<crate::state::HeldLease> {
        let owners = self.0.lock().expect("owners");
        let owner = owners.get(job).filter(|o| o.host == "h1")?;
        let now = std::time::Instant::now();
        Some(crate::state::HeldLease {
            token: owner.token,
            since: now,
            until: now + std::time::Duration::from_secs(60),
        })
    }
    fn last_token(&self, job: &str) -> Option<i64> {
        LAST_TOKENS.lock().expect("last tokens").get(job).copied()
    }
    fn owners(&self) -> BTreeMap<String, crate::state::LeaseOwner> {
        self.0.lock().expect("owners").clone()
    }
    fn claim_now(&self) -> Result<(), crate::state::StateError> {
        Ok(())
    }
    fn admit(
        &self,
        _: &str,
        _: i64,
        _: &BTreeMap<String, u32>,
    ) -> Result<(), crate::state::Fenced> {
        Err(crate::state::Fenced::Unavailable("a view test".into()))
    }
}

#[test]
fn the_api_dashboard_and_metrics_name_the_owner_of_every_job_also_another_hosts() {
    let view = Arc::new(FleetView::new());
    for job in ["j", "k", "l"] {
        view.add_job(job, "flink", "BALANCED");
    }
    let leases = Arc::new(OwnerLeases(std::sync::Mutex::new(BTreeMap::new())));
    // `j` is this host's, `k` another host's (this host never stepped it), `l` nobody's.
    leases.set(&[("j", "h1", 4), ("k", "h2", 9)]);
    view.set_leases(Arc::clone(&leases) as Arc<dyn crate::state::JobLeases>);
    view.record(&report("j", 10_000, 10, None));
    let server = start(Arc::clone(&view), None);
    let addr = server.local_addr();

    let (status, body) = get(addr, "/api/v1/jobs", "");
    assert_eq!(status, 200, "{body}");
    let jobs: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let owner = |i: usize| jobs[i]["owner"].clone();
    assert_eq!(
        owner(0),
        serde_json::json!({"host": "h1", "token": 4, "this_host": true})
    );
    assert_eq!(
        owner(1),
        serde_json::json!({"host": "h2", "token": 9, "this_host": false})
    );
    assert!(owner(2).is_null(), "{body}");
    assert_eq!(jobs[0]["status"], "within bounds", "this host's own status");
    assert_eq!(jobs[1]["status"], "another host holds the lease", "{body}");
    assert_eq!(jobs[2]["status"], "starting", "{body}");
    let (_, body) = get(addr, "/api/v1/jobs/k", "");
    let k: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(k["owner"]["host"], "h2", "{body}");

    let (_, html) = get(addr, "/", "");
    assert!(html.contains("<th>Owner</th>"), "{html}");
    assert!(
        html.contains("<td class=\"owner\">h1 (this host, token 4)</td>"),
        "{html}"
    );
    assert!(
        html.contains("<td class=\"owner\">h2 (token 9)</td>"),
        "{html}"
    );
    let (_, html) = get(addr, "/jobs/k", "");
    assert!(
        html.contains("owner <b id=\"owner\">h2 (token 9)</b>"),
        "{html}"
    );

    let (_, text) = get(addr, "/metrics", "");
    // Sorted: a family's series come in no set order.
    let lines = |text: &str| -> Vec<String> {
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("flowscale_lease_owner{"))
            .map(str::to_string)
            .collect();
        lines.sort();
        lines
    };
    assert_eq!(
        lines(&text),
        [
            "flowscale_lease_owner{job=\"j\",owner=\"h1\"} 1",
            "flowscale_lease_owner{job=\"k\",owner=\"h2\"} 1"
        ],
        "{text}"
    );
    // `k` changes hands: one series for it, with its new owner.
    leases.set(&[("j", "h1", 4), ("k", "h1", 10)]);
    let (_, text) = get(addr, "/metrics", "");
    assert_eq!(
        lines(&text),
        [
            "flowscale_lease_owner{job=\"j\",owner=\"h1\"} 1",
            "flowscale_lease_owner{job=\"k\",owner=\"h1\"} 1"
        ],
        "{text}"
    );
}

/// The last token `h1` held of each job, per test thread's jobs (their names are unique).
static LAST_TOKENS: std::sync::Mutex<BTreeMap<String, i64>> =
    std::sync::Mutex::new(BTreeMap::new());

#[test]
fn the_apis_lease_is_the_live_lease_not_the_last_event() {
    let view = Arc::new(FleetView::new());
    view.add_job("live-j", "flink", "BALANCED");
    let leases = Arc::new(OwnerLeases(std::sync::Mutex::new(BTreeMap::new())));
    view.set_leases(Arc::clone(&leases) as Arc<dyn crate::state::JobLeases>);
    let server = start(Arc::clone(&view), None);
    let lease = || {
        let (status, body) = get(server.local_addr(), "/api/v1/jobs", "");
        assert_eq!(status, 200, "{body}");
        let jobs: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        jobs[0]["lease"].clone()
    };
    // Never held: no lease.
    assert!(lease().is_null());
    // Taken: held, though no step has reported it yet.
    leases.set(&[("live-j", "h1", 4)]);
    assert_eq!(lease(), serde_json::json!({"held": true, "token": 4}));
    // Lost to another host between two steps: no longer held, with the last token.
    leases.set(&[("live-j", "h2", 5)]);
    view.record(&report("live-j", 10_000, 10, None));
    assert_eq!(lease(), serde_json::json!({"held": false, "token": 4}));
}

#[test]
fn without_shared_state_no_job_has_an_owner_and_no_owner_metric_is_set() {
    let view = FleetView::new();
    view.add_job("j", "sim", "BALANCED");
    view.refresh_owners();
    assert_eq!(view.jobs()[0].owner, None);
    assert_eq!(view.job("j").expect("j").owner, None);
    let text = view.metrics().encode_text();
    assert!(!text.contains("flowscale_lease_owner{"), "{text}");
}

#[test]
fn a_replaced_token_is_required_from_the_next_request_on() {
    let (old, new) = ("old-token-0123456789", "new-token-0123456789");
    let server = start(Arc::new(FleetView::new()), Some(old));
    let addr = server.local_addr();
    let with = |token: &str| {
        get(
            addr,
            "/api/v1/jobs",
            &format!("Authorization: Bearer {token}\r\n"),
        )
        .0
    };
    assert_eq!((with(old), with(new)), (200, 401));
    server.set_api_token(Some(new), None);
    assert_eq!((with(old), with(new)), (401, 200));
    // Removed (a loopback server may go without): every request passes.
    server.set_api_token(None, None);
    assert_eq!(get(addr, "/api/v1/jobs", "").0, 200);
}

/// Checks that `value` has the shape of `schema` in the OpenAPI document `doc`: an object has
/// exactly the properties the schema declares (each checked in turn), an array's items have
/// the shape of its items, and a scalar has the declared type (`null` where it may be absent).
fn assert_conforms(
    doc: &serde_json::Value,
    schema: &serde_json::Value,
    value: &serde_json::Value,
    at: &str,
) {
    use serde_json::Value;
    let schema = match schema["$ref"].as_str() {
        Some(reference) => {
            let name = reference.trim_start_matches("#/components/schemas/");
            &doc["components"]["schemas"][name]
        }
        None => schema,
    };
    if let Some(any) = schema["oneOf"].as_array() {
        // `Option<T>`: `null` or `T`.
        if value.is_null() && any.iter().any(|s| s["type"] == "null") {
            return;
        }
        let some = any
            .iter()
            .find(|s| s["type"] != "null")
            .expect("a non-null choice");
        return assert_conforms(doc, some, value, at);
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if value.is_null() {
        assert!(
            types.contains(&"null"),
            "{at} is null, which its schema {schema} does not allow"
        );
        return;
    }
    match value {
        Value::Object(fields) => {
            assert!(
                types.is_empty() || types.contains(&"object"),
                "{at}: {schema}"
            );
            let declared = schema["properties"].as_object().expect("an object schema");
            let mut have: Vec<&String> = fields.keys().collect();
            let mut want: Vec<&String> = declared.keys().collect();
            have.sort();
            want.sort();
            assert_eq!(
                have, want,
                "{at}: the answer's fields against the document's"
            );
            for (name, field) in fields {
                assert_conforms(doc, &declared[name], field, &format!("{at}.{name}"));
            }
        }
        Value::Array(items) => {
            assert!(
                types.contains(&"array"),
                "{at} is an array; its schema: {schema}"
            );
            for (i, item) in items.iter().enumerate() {
                assert_conforms(doc, &schema["items"], item, &format!("{at}[{i}]"));
            }
        }
        Value::String(_) => assert!(types.contains(&"string"), "{at}: {schema}"),
        Value::Bool(_) => assert!(types.contains(&"boolean"), "{at}: {schema}"),
        Value::Number(_) => assert!(
            types.contains(&"integer") || types.contains(&"number"),
            "{at}: {schema}"
        ),
        Value::Null => unreachable!("handled above"),
    }
}

#[test]
fn the_plugins_answer_has_the_shape_the_document_declares() {
    let doc: serde_json::Value =
        serde_json::from_str(&super::openapi_json()).expect("the document is JSON");
    let schema = &doc["paths"]["/api/v1/plugins"]["get"]["responses"]["200"]["content"]["application/json"]
        ["schema"];
    let server = start(Arc::new(FleetView::new()), None);
    let (status, answer) = get(server.local_addr(), "/api/v1/plugins", "");
    assert_eq!(status, 200, "{answer}");
    let answer: serde_json::Value = serde_json::from_str(&answer).expect("JSON");
    assert_conforms(&doc, schema, &answer, "/api/v1/plugins");
}

#[test]
fn every_route_that_computes_needs_json_and_a_method_a_route_lacks_is_405() {
    let doc: serde_json::Value =
        serde_json::from_str(&super::openapi_json()).expect("the document is JSON");
    let server = start(Arc::new(FleetView::new()), None);
    let addr = server.local_addr();
    let send = |method: &str, path: &str| {
        raw(
            addr,
            format!(
                "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
                 Content-Type: text/plain\r\nContent-Length: 2\r\n\r\n{{}}"
            )
            .as_bytes(),
        )
    };
    let mut computing = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        let path = path.replace("{job}", "a");
        let item = item.as_object().expect("a path item");
        for method in ["post", "put", "patch", "delete"] {
            let (status, body) = send(&method.to_uppercase(), &path);
            if item.contains_key(method) {
                computing += 1;
                assert_eq!(status, 415, "{method} {path} as text/plain: {body}");
            } else {
                assert_eq!(
                    status, 405,
                    "{method} {path}, which it does not have: {body}"
                );
            }
        }
    }
    assert!(computing >= 1, "the what-if is one such route");
}

/// The lines of `text` with a `job="<job>"` label.
fn lines_of<'t>(text: &'t str, job: &str) -> Vec<&'t str> {
    let label = format!("job=\"{job}\"");
    text.lines().filter(|l| l.contains(&label)).collect()
}

/// Jobs `keep` and `gone`, each with everything a job's steps put into the view and the
/// metrics: its vertex gauges, a rescale, an engine error, a plugin fault, a lease and its
/// owner; `gone` also ran a second mode.
fn fleet_of_two() -> FleetView {
    let view = FleetView::new();
    for job in ["keep", "gone"] {
        view.add_job(job, "flink", "BALANCED");
        view.record(&report(job, 1000, 10, Some(16)));
        let mut failed = report(job, 2000, 16, None);
        failed.engine_failed = true;
        failed.events = vec![
            Event::new(EventReason::PluginFault, Severity::Warning, "it panicked").job(job),
            Event::new(EventReason::LeaseAcquired, Severity::Normal, "held")
                .job(job)
                .detail("token", 3),
        ];
        view.record(&failed);
    }
    view.add_job("gone", "flink", "EVENLY_SPREAD");
    view.record(&report("gone", 3000, 16, None));
    view.metrics().set_owners(BTreeMap::from([
        ("keep".to_string(), "h1".to_string()),
        ("gone".to_string(), "h1".to_string()),
    ]));
    view
}

#[test]
fn a_removed_job_leaves_the_api_and_every_metric_series() {
    let view = fleet_of_two();
    let before = view.metrics().encode_text();
    // Per mode: decisions and plugin faults; per job: rescales, engine errors, lease held,
    // lease token, lease owner, three gauges of its one vertex (no recommendation and no
    // evaluated gauges: the reports carry no evaluation), events of two reasons (PluginFault,
    // LeaseAcquired), and the times of the last decision and the last rescale.
    let per_job = |modes: usize| 2 * modes + 5 + 3 + 2 + 2;
    assert_eq!(lines_of(&before, "gone").len(), per_job(2), "{before}");
    let kept = lines_of(&before, "keep");
    assert_eq!(kept.len(), per_job(1), "{before}");

    view.remove_job("gone");

    let names: Vec<String> = view.jobs().into_iter().map(|j| j.job).collect();
    assert_eq!(names, ["keep"]);
    assert!(view.job("gone").is_none());
    assert!(view.events("gone").is_none());
    let after = view.metrics().encode_text();
    assert_eq!(lines_of(&after, "gone"), Vec::<&str>::new(), "{after}");
    assert_eq!(lines_of(&after, "keep"), kept);
    let openmetrics = view.metrics().encode();
    assert_eq!(lines_of(&openmetrics, "gone"), Vec::<&str>::new());
    assert_eq!(lines_of(&openmetrics, "keep").len(), per_job(1));
    // The next lease round still reads the job's lease in the lease table: the job is not
    // this host's to show any more.
    view.metrics().set_owners(BTreeMap::from([
        ("keep".to_string(), "h1".to_string()),
        ("gone".to_string(), "h2".to_string()),
    ]));
    assert_eq!(
        lines_of(&view.metrics().encode_text(), "gone"),
        Vec::<&str>::new()
    );
}

#[test]
fn a_step_that_ends_after_its_job_was_removed_does_not_bring_it_back() {
    let view = fleet_of_two();
    view.remove_job("gone");
    // The job's step was in flight when the reload removed it: it publishes afterwards.
    view.record(&report("gone", 4000, 16, Some(20)));
    let mut stuck = CycleReport::new("gone", 5000);
    stuck
        .events
        .push(Event::new(EventReason::JobStuck, Severity::Warning, "stuck").job("gone"));
    view.record(&stuck);

    let names: Vec<String> = view.jobs().into_iter().map(|j| j.job).collect();
    assert_eq!(names, ["keep"]);
    assert!(view.job("gone").is_none());
    assert_eq!(
        lines_of(&view.metrics().encode_text(), "gone"),
        Vec::<&str>::new()
    );
}

/// `report(job, ...)` as the fleet's run `run` of entry `entry` publishes it.
fn of_run(mut report: CycleReport, entry: &str, run: u64) -> CycleReport {
    report.entry = Some(crate::runner::EntryRun {
        entry: entry.into(),
        run,
    });
    report
}

#[test]
fn a_late_step_of_an_earlier_run_of_a_job_added_again_is_dropped() {
    use crate::runner::take_entry_run;
    let view = FleetView::new();
    view.add_job("j", "sim", "BALANCED");
    // The run the fleet started for the entry.
    let first = take_entry_run();
    view.record(&of_run(report("j", 1000, 10, Some(16)), "j", first));
    assert_eq!(view.job("j").expect("j").steps, 1);

    // A reload removes the entry, the next one adds it back while the first run is still
    // ending: its last step comes after the entry was added again.
    view.remove_job("j");
    view.add_job("j", "sim", "BALANCED");
    view.record(&of_run(report("j", 2000, 16, Some(20)), "j", first));
    let again = view.job("j").expect("j is in the fleet again");
    assert_eq!((again.steps, again.decisions.len()), (0, 0));
    assert!(
        lines_of(&view.metrics().encode_text(), "j")
            .iter()
            .all(|l| !l.starts_with("flowscale_vertex_parallelism") && !l.ends_with(" 1")),
        "{}",
        view.metrics().encode_text()
    );

    // The run the fleet started for the entry added again is shown.
    let second = take_entry_run();
    view.record(&of_run(report("j", 3000, 10, None), "j", second));
    let shown = view.job("j").expect("j");
    assert_eq!((shown.steps, shown.at_ms), (1, Some(3000)));
}

#[test]
fn the_jobs_a_cluster_entry_finds_go_with_the_entry() {
    use crate::runner::take_entry_run;
    let view = FleetView::new();
    for entry in ["cluster", "other"] {
        view.add_job(entry, "flink", "EVENLY_SPREAD");
    }
    let run = take_entry_run();
    // A Flink entry without a job id runs its cluster's jobs under their own names.
    for job in ["orders", "payments"] {
        view.record(&of_run(report(job, 1000, 10, Some(16)), "cluster", run));
    }
    view.record(&of_run(
        report("other", 1000, 4, None),
        "other",
        take_entry_run(),
    ));
    let orders = view.job("orders").expect("a job the entry found is shown");
    assert_eq!(
        (orders.engine.as_str(), orders.mode.as_str()),
        ("flink", "EVENLY_SPREAD")
    );
    // A report of an entry that was never in the fleet is not.
    view.record(&of_run(report("stray", 1000, 4, None), "unknown", run));
    assert!(view.job("stray").is_none());

    view.remove_job("cluster");

    let names: Vec<String> = view.jobs().into_iter().map(|j| j.job).collect();
    assert_eq!(names, ["other"]);
    let text = view.metrics().encode_text();
    for gone in ["cluster", "orders", "payments"] {
        assert_eq!(lines_of(&text, gone), Vec::<&str>::new(), "{text}");
    }
    assert!(!lines_of(&text, "other").is_empty());
}

/// A job's custom evaluator and executor chain are shown as resolved, and a vetoed cycle is its
/// last veto, which a new configuration of the chain keeps; the JSON has them under `custom`.
#[test]
fn the_view_shows_the_custom_chain_and_the_last_veto() {
    use super::view::{CustomView, EvaluatorView, ExecutorView};
    use crate::scaling::Veto;

    let view = FleetView::new();
    view.add_job("j", "sim", "BALANCED");
    let chain = CustomView {
        evaluator: Some(EvaluatorView {
            instance: "slo".into(),
            class: "slo-target".into(),
        }),
        executors: vec![ExecutorView {
            instance: "freeze".into(),
            class: "change-freeze".into(),
            priority: -1,
        }],
        last_veto: None,
    };
    view.set_custom("j", chain.clone());
    assert_eq!(view.job("j").expect("listed").custom, chain);
    let mut vetoed = report("j", 7000, 4, None);
    vetoed.stage = Some(CycleStage::Vetoed(Veto {
        instance: "freeze".into(),
        class: "change-freeze".into(),
        reason: "weekend".into(),
        at_ms: 7000,
    }));
    view.record(&vetoed);
    view.set_custom("j", chain.clone());
    let detail = view.job("j").expect("listed");
    let veto = detail.custom.last_veto.clone().expect("a veto");
    assert_eq!(
        (veto.instance.as_str(), veto.reason.as_str(), veto.at_ms),
        ("freeze", "weekend", 7000)
    );
    assert_eq!(
        detail.status,
        "vetoed by executor `freeze` (change-freeze): weekend"
    );
    let json = serde_json::to_value(&detail).expect("serializes");
    assert_eq!(json["custom"]["executors"][0]["priority"], -1);
    assert_eq!(json["custom"]["last_veto"]["reason"], "weekend");
}
