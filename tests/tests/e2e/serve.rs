//! `flowscale run --listen`: the API answers what the command line answers, and the dashboard
//! shows the demo fleet in a real browser (headless Chromium driven through chromedriver's
//! WebDriver protocol; `#[ignore]`d, it runs with `FLOWSCALE_BROWSER_E2E=1`, as `.ci/run` does).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flowscale_tests::{build, plugin_file, plugins_dir, profile_dir, promtool_check};
use serde_json::{Value, json};

use crate::harness::{Cli, flowscale_bin, repo_root};

/// A free loopback port (bound, then released for the child to take).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The test CAs the HTTPS tests made: every agent trusts them, and only them, for `https://`
/// (the tests talk to their own servers only).
static TRUSTED: Mutex<Vec<ureq::tls::Certificate<'static>>> = Mutex::new(Vec::new());

/// Has every agent made from now on trust the CA certificate (PEM) `ca`.
pub(crate) fn trust(ca: &Path) {
    let pem = std::fs::read(ca).expect("the CA certificate");
    let cert = ureq::tls::Certificate::from_pem(&pem)
        .expect("a PEM certificate")
        .to_owned();
    TRUSTED.lock().unwrap_or_else(|e| e.into_inner()).push(cert);
}

/// HTTPS trusting the test CAs (rustls with ring).
pub(crate) fn tls_config() -> ureq::tls::TlsConfig {
    let roots = TRUSTED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    ureq::tls::TlsConfig::builder()
        .provider(ureq::tls::TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .root_certs(ureq::tls::RootCerts::new_with_certs(&roots))
        .build()
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(30)))
        .http_status_as_error(false)
        .tls_config(tls_config())
        .build()
        .into()
}

/// The largest body [`get`] reads. The HTTP client's default (10 MB) is less than
/// `/metrics` of a 10,000-job fleet, whose body would then read as empty.
const BODY_LIMIT: u64 = 1 << 30;

/// `GET url`: status and body (status 0 when the server could not be reached).
pub(crate) fn get(url: &str) -> (u16, String) {
    match agent().get(url).call() {
        Ok(mut r) => (
            r.status().as_u16(),
            r.body_mut()
                .with_config()
                .limit(BODY_LIMIT)
                .read_to_string()
                .unwrap_or_default(),
        ),
        Err(_) => (0, String::new()),
    }
}

/// `method url` with a JSON body: status and parsed body.
fn send(method: &str, url: &str, body: &Value) -> (u16, Value) {
    let agent = agent();
    let bytes = body.to_string();
    let response = match method {
        "POST" => agent
            .post(url)
            .content_type("application/json")
            .send(bytes.as_bytes()),
        _ => agent.delete(url).call(),
    };
    match response {
        Ok(mut r) => (
            r.status().as_u16(),
            serde_json::from_str(&r.body_mut().read_to_string().unwrap_or_default())
                .unwrap_or(Value::Null),
        ),
        Err(e) => panic!("{method} {url}: {e}"),
    }
}

/// Polls `check` every 250 ms until it answers, for at most `timeout`.
pub(crate) fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A child process killed when dropped.
pub(crate) struct Killed(pub(crate) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `flowscale run FLEET --pace 60 --listen ... --plugins ...`, its server answering.
struct Served {
    base: String,
    plugins: tempfile::TempDir,
    /// The fleet's files, when the test wrote them.
    _files: Option<tempfile::TempDir>,
    _child: Killed,
}

/// `flowscale run FLEET --pace PACE --listen 127.0.0.1:PORT --plugins PLUGINS` in the
/// repository's root (a relative `fleet` is found there), its output dropped.
pub(crate) fn run_listening(fleet: &Path, pace: u32, port: u16, plugins: &Path) -> Killed {
    let child = Command::new(flowscale_bin())
        .current_dir(repo_root())
        .arg("run")
        .arg(fleet)
        .args(["--pace", &pace.to_string(), "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--plugins")
        .arg(plugins)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("flowscale runs");
    Killed(child)
}

/// Runs `fleet` (relative to the repository's root) with the plugins of `plugins`.
fn serve(fleet: &Path, plugins: tempfile::TempDir, files: Option<tempfile::TempDir>) -> Served {
    serve_scheme(fleet, plugins, files, "http")
}

/// [`serve`] for a fleet whose server speaks `scheme` (`https`: its file sets TLS, and its
/// CA is [`trust`]ed).
fn serve_scheme(
    fleet: &Path,
    plugins: tempfile::TempDir,
    files: Option<tempfile::TempDir>,
    scheme: &str,
) -> Served {
    let port = free_port();
    let child = run_listening(fleet, 60, port, plugins.path());
    let base = format!("{scheme}://127.0.0.1:{port}");
    wait_for("the server", Duration::from_secs(60), || {
        (get(&format!("{base}/healthz")).0 == 200).then_some(())
    });
    Served {
        base,
        plugins,
        _files: files,
        _child: child,
    }
}

/// The example plugins in a directory of their own.
fn demo_plugins() -> tempfile::TempDir {
    let profile = build(&["bucket-align", "slot-align"]);
    let bucket = plugin_file(&profile, "bucket-align");
    let slot = plugin_file(&profile, "slot-align");
    plugins_dir(&[(&bucket, "libbucket_align.so"), (&slot, "libslot_align.so")])
}

/// `examples/fleet.toml` with the example plugins.
fn serve_demo_fleet() -> Served {
    serve(Path::new("examples/fleet.toml"), demo_plugins(), None)
}

/// `examples/fleet.toml` served over HTTPS on loopback (no token: the browser opens its pages
/// as they are), with a certificate for 127.0.0.1 of a test CA; also the SHA-256 of the
/// certificate's public key (base64), for Chromium to accept it.
fn serve_demo_fleet_over_https() -> (Served, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = flowscale_tests::certs::TestCa::new(dir.path(), "dashboard");
    let (cert, key) = ca.issue("server", &["127.0.0.1", "localhost"]);
    trust(ca.ca_pem());
    let fleet = demo_fleet_copy(
        dir.path(),
        &format!(
            "tls-cert-file = {}\ntls-key-file = {}\n",
            toml_string(&cert.display().to_string()),
            toml_string(&key.display().to_string())
        ),
    );
    let spki = spki_sha256(&key);
    (
        serve_scheme(&fleet, demo_plugins(), Some(dir), "https"),
        spki,
    )
}

/// `examples/fleet.toml` written into `dir` with `host` added to its `[host]` section, its job
/// files found where the example's are.
pub(crate) fn demo_fleet_copy(dir: &Path, host: &str) -> PathBuf {
    let examples = repo_root().join("examples");
    let text = std::fs::read_to_string(examples.join("fleet.toml")).expect("the demo fleet");
    let text = text.replacen("[host]\n", &format!("[host]\n{host}"), 1);
    std::os::unix::fs::symlink(examples.join("jobs"), dir.join("jobs")).expect("link the jobs");
    let fleet = dir.join("fleet.toml");
    std::fs::write(&fleet, text).expect("write the fleet");
    fleet
}

/// The base64 SHA-256 of the public key of the private key file `key` (what Chromium's
/// `--ignore-certificate-errors-spki-list` takes).
fn spki_sha256(key: &Path) -> String {
    let pem = std::fs::read_to_string(key).expect("the key");
    let key = rcgen::KeyPair::from_pem(&pem).expect("a key");
    let spki = rcgen::PublicKeyData::subject_public_key_info(&key);
    let digest = ring::digest::digest(&ring::digest::SHA256, &spki);
    encode_base64(digest.as_ref())
}

fn encode_base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

const DEMO_JOBS: [(&str, &str); 6] = [
    ("clicks", "BALANCED"),
    ("graph-iterations", "BALANCED"),
    ("orders", "ADVANCED"),
    ("payments", "EVENLY_SPREAD"),
    ("sensors", "bucket-align"),
    ("sensors-balanced", "BALANCED"),
];

#[test]
fn the_api_answers_what_the_command_line_answers() {
    let served = serve_demo_fleet();
    let base = &served.base;
    wait_for("readiness", Duration::from_secs(60), || {
        (get(&format!("{base}/readyz")).0 == 200).then_some(())
    });

    let (status, jobs) = get(&format!("{base}/api/v1/jobs"));
    assert_eq!(status, 200);
    let jobs: Value = serde_json::from_str(&jobs).expect("JSON");
    let listed: Vec<(String, String)> = jobs
        .as_array()
        .expect("an array")
        .iter()
        .map(|j| {
            (
                j["job"].as_str().unwrap_or("").into(),
                j["mode"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = DEMO_JOBS
        .iter()
        .map(|(j, m)| (j.to_string(), m.to_string()))
        .collect();
    assert_eq!(listed, expected);

    // The plugins document is `plugins --json`'s.
    let dir = served.plugins.path().to_string_lossy().to_string();
    let cli = Cli::new(["plugins", "--json", "--plugins", &dir]).run();
    let (_, api) = get(&format!("{base}/api/v1/plugins"));
    assert_eq!(
        serde_json::from_str::<Value>(&api).expect("JSON"),
        cli.json(),
        "GET /api/v1/plugins differs from `flowscale plugins --json`"
    );
    // The Plugins page shows each file of that document, loaded with its modes.
    let (status, page) = get(&format!("{base}/plugins"));
    assert_eq!(status, 200);
    let files = cli.json()["files"].as_array().cloned().unwrap_or_default();
    assert!(!files.is_empty(), "the demo's plugins are listed");
    for file in &files {
        let name = file["file"].as_str().expect("a file name");
        assert_eq!(file["status"], "loaded", "{file}");
        assert!(
            page.contains(&format!(
                "<code>{name}</code></td><td class=\"ok\">loaded</td>"
            )),
            "{name} is not shown loaded on the Plugins page:\n{page}"
        );
        for mode in file["modes"].as_array().expect("modes") {
            let id = mode["id"].as_str().expect("a mode id");
            assert!(
                page.contains(&format!("<b>{id}</b>")),
                "no mode {id}:\n{page}"
            );
        }
    }

    // The align what-if is `align --batch`'s answer to the same line, plugin modes included.
    for request in [
        json!({"current": 16, "target": 24, "max_parallelism": 128, "ship_strategies": ["HASH"]}),
        json!({"current": 10, "target": 17, "max_parallelism": 128, "ship_strategies": ["CUSTOM:48"],
               "config": {"scaling.alignment.mode": "b", "scaling.alignment.mode.b.class": "bucket-align"}}),
        json!({"current": 0, "target": 24, "max_parallelism": 128}),
    ] {
        let batch = Cli::new(["align", "--batch", "--plugins", &dir])
            .stdin(format!("{request}\n"))
            .run();
        let expected = batch.json_lines().remove(0);
        let (status, answer) = send("POST", &format!("{base}/api/v1/align"), &request);
        assert_eq!(answer, expected, "{request}");
        assert_eq!(
            status,
            if expected.get("error").is_some() {
                422
            } else {
                200
            }
        );
    }

    let (status, metrics) = get(&format!("{base}/metrics"));
    assert_eq!(status, 200);
    for (job, mode) in DEMO_JOBS {
        let line = format!("flowscale_decisions_total{{job=\"{job}\",mode=\"{mode}\"}} ");
        assert!(metrics.contains(&line), "no {line} in:\n{metrics}");
    }
    assert!(metrics.contains("flowscale_plugins_loaded 2"), "{metrics}");
}

/// Job names that break out of their label value when written raw (a Flink job's name becomes a
/// job's name, and whoever submits Flink jobs chooses it), each with its label value as the
/// exposition formats write it, derived by hand: `\` -> `\\`, `"` -> `\"`, line feed -> `\n`.
const HOSTILE_JOBS: [(&str, &str); 2] = [
    ("x\",evil=\"1", r#"x\",evil=\"1"#),
    ("a\\b\nc}", r#"a\\b\nc}"#),
];
/// The source vertex's name in the hostile fleet, and its label value.
const HOSTILE_VERTEX: (&str, &str) = ("Source: \"clicks\"\n", r#"Source: \"clicks\"\n"#);

/// A fleet of [`HOSTILE_JOBS`], whose source vertex is named [`HOSTILE_VERTEX`], served.
fn serve_hostile_fleet() -> Served {
    let files = tempfile::tempdir().expect("a temporary directory");
    let job = std::fs::read_to_string(repo_root().join("examples/jobs/keyed-step-spike.toml"))
        .expect("the example job");
    let renamed = job.replace(
        "name = \"Source: clicks\"",
        &format!("name = {}", toml_string(HOSTILE_VERTEX.0)),
    );
    assert_ne!(
        renamed, job,
        "the example job's source is named `Source: clicks`"
    );
    let job_file = files.path().join("job.toml");
    std::fs::write(&job_file, renamed).expect("write the job");
    // A short window: the first decisions (and the vertex gauges) come a few seconds in.
    let mut fleet = String::from(
        "[defaults]\n\"metrics.window\" = \"3 min\"\n\"stabilization.interval\" = \"1 min\"\n",
    );
    for (name, _) in HOSTILE_JOBS {
        fleet.push_str(&format!(
            "\n[[jobs]]\nname = {}\njob = {}\nduration = \"2h\"\n",
            toml_string(name),
            toml_string(&job_file.to_string_lossy())
        ));
    }
    let fleet_file = files.path().join("fleet.toml");
    std::fs::write(&fleet_file, fleet).expect("write the fleet");
    let plugins = tempfile::tempdir().expect("a temporary directory");
    serve(&fleet_file, plugins, Some(files))
}

/// `text` as a TOML basic string: a JSON string, whose escapes are all TOML's too.
fn toml_string(text: &str) -> String {
    Value::String(text.to_string()).to_string()
}

/// `GET /metrics` in the Prometheus text format, or OpenMetrics.
fn scrape(base: &str, openmetrics: bool) -> String {
    let mut request = agent().get(format!("{base}/metrics"));
    if openmetrics {
        request = request.header("Accept", "application/openmetrics-text; version=1.0.0");
    }
    let mut response = request.call().expect("GET /metrics");
    assert_eq!(response.status().as_u16(), 200);
    response.body_mut().read_to_string().expect("a text")
}

/// Waits for the hostile fleet's vertex gauges (its first decisions), then scrapes it.
fn scrape_hostile_fleet(served: &Served, openmetrics: bool) -> String {
    let vertex = format!("vertex=\"{}\",kind=\"target\"}}", HOSTILE_VERTEX.1);
    wait_for("the vertex gauges", Duration::from_secs(60), || {
        let text = scrape(&served.base, openmetrics);
        (HOSTILE_JOBS
            .iter()
            .all(|(_, label)| text.contains(&format!("{{job=\"{label}\",{vertex}"))))
        .then_some(text)
    })
}

#[test]
fn hostile_job_and_vertex_names_are_one_series_each_in_both_formats() {
    let served = serve_hostile_fleet();
    for openmetrics in [false, true] {
        let text = scrape_hostile_fleet(&served, openmetrics);
        for (_, label) in HOSTILE_JOBS {
            for (family, labels) in [
                (
                    "flowscale_decisions_total",
                    format!("job=\"{label}\",mode=\"BALANCED\""),
                ),
                ("flowscale_rescales_total", format!("job=\"{label}\"")),
                (
                    "flowscale_plugin_faults_total",
                    format!("job=\"{label}\",mode=\"BALANCED\""),
                ),
                ("flowscale_engine_errors_total", format!("job=\"{label}\"")),
            ] {
                let series = format!("{family}{{{labels}}} ");
                let found = text.lines().filter(|l| l.starts_with(&series)).count();
                assert_eq!(found, 1, "{series} in:\n{text}");
            }
            for kind in ["current", "target", "aligned"] {
                let series = format!(
                    "flowscale_vertex_parallelism{{job=\"{label}\",vertex=\"{}\",kind=\"{kind}\"}} ",
                    HOSTILE_VERTEX.1
                );
                let found = text.lines().filter(|l| l.starts_with(&series)).count();
                assert_eq!(found, 1, "{series} in:\n{text}");
            }
        }
        // Two jobs: two series in each counter family, and no line the names broke off.
        for family in ["flowscale_decisions_total{", "flowscale_rescales_total{"] {
            let found = text.lines().filter(|l| l.starts_with(family)).count();
            assert_eq!(found, 2, "{family} in:\n{text}");
        }
        assert!(
            text.lines()
                .all(|l| l.starts_with("# ") || l.starts_with("flowscale_")),
            "a line that is neither a comment nor a sample:\n{text}"
        );
        assert!(!text.contains("evil=\"1\""), "{text}");
    }
}

#[test]
#[ignore = "needs promtool (Debian package prometheus); .ci/run runs it"]
fn promtool_accepts_the_metrics_of_a_fleet_with_hostile_names() {
    let served = serve_hostile_fleet();
    let text = scrape_hostile_fleet(&served, false);
    if let Err(complaint) = promtool_check(&text) {
        panic!("{complaint}\non:\n{text}");
    }
}

/// A tiny WebDriver client: one session of headless Chromium through chromedriver.
struct Browser {
    url: String,
    session: String,
    _driver: Killed,
}

impl Browser {
    fn start() -> Browser {
        Browser::start_with(&[])
    }

    /// A session of Chromium started with `extra` arguments too.
    fn start_with(extra: &[&str]) -> Browser {
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver runs (apt-get install chromium chromium-driver)");
        let driver = Killed(driver);
        let url = format!("http://127.0.0.1:{port}");
        wait_for("chromedriver", Duration::from_secs(30), || {
            (get(&format!("{url}/status")).0 == 200).then_some(())
        });
        let args: Vec<&str> = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--window-size=1280,1100",
        ]
        .iter()
        .chain(extra)
        .copied()
        .collect();
        let (status, answer) = send(
            "POST",
            &format!("{url}/session"),
            &json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": {"args": args}}}}),
        );
        assert_eq!(status, 200, "no session: {answer}");
        let session = answer["value"]["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string();
        Browser {
            url,
            session,
            _driver: driver,
        }
    }

    fn command(&self, path: &str, body: &Value) -> Value {
        let (status, answer) = send(
            "POST",
            &format!("{}/session/{}/{path}", self.url, self.session),
            body,
        );
        assert_eq!(status, 200, "{path}: {answer}");
        answer["value"].clone()
    }

    fn open(&self, url: &str) {
        self.command("url", &json!({ "url": url }));
    }

    fn script(&self, script: &str) -> Value {
        self.command("execute/sync", &json!({"script": script, "args": []}))
    }

    fn screenshot(&self, to: &Path) {
        let (status, answer) = match agent()
            .get(format!("{}/session/{}/screenshot", self.url, self.session))
            .call()
        {
            Ok(mut r) => (
                r.status().as_u16(),
                serde_json::from_str::<Value>(&r.body_mut().read_to_string().unwrap_or_default())
                    .unwrap_or(Value::Null),
            ),
            Err(e) => panic!("screenshot: {e}"),
        };
        assert_eq!(status, 200);
        let png = decode_base64(answer["value"].as_str().expect("base64"));
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        std::fs::write(to, png).expect("the screenshot is written");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = send(
            "DELETE",
            &format!("{}/session/{}", self.url, self.session),
            &Value::Null,
        );
    }
}

fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0);
    for v in text.bytes().filter_map(value) {
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

/// Where the screenshots go: `FLOWSCALE_SCREENSHOT_DIR`, else the target directory.
fn screenshot_dir() -> PathBuf {
    std::env::var_os("FLOWSCALE_SCREENSHOT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(profile_dir)
}

#[test]
#[ignore = "needs chromium, chromedriver and FLOWSCALE_BROWSER_E2E=1; .ci/run runs it"]
fn the_dashboard_shows_the_fleet_and_a_jobs_chart_in_a_browser() {
    assert_eq!(
        std::env::var("FLOWSCALE_BROWSER_E2E").as_deref(),
        Ok("1"),
        "this test drives headless Chromium and needs FLOWSCALE_BROWSER_E2E=1"
    );
    let served = serve_demo_fleet();
    let browser = Browser::start();
    browser.open(&format!("{}/", served.base));
    let rows = wait_for("the six jobs", Duration::from_secs(30), || {
        let rows = browser.script(
            "return Array.from(document.querySelectorAll('#fleet tr.job')).map(r => \
             [r.dataset.job, r.querySelector('.mode').textContent]);",
        );
        (rows.as_array().map(Vec::len) == Some(6)).then_some(rows)
    });
    let shown: Vec<(String, String)> = rows
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap_or("").into(),
                r[1].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = DEMO_JOBS
        .iter()
        .map(|(j, m)| (j.to_string(), m.to_string()))
        .collect();
    assert_eq!(shown, expected);

    // The plugin job rescales its router about 21 simulated minutes in: 22 s at pace 60.
    let dir = screenshot_dir();
    std::fs::create_dir_all(&dir).expect("the screenshot directory");
    wait_for("a decision of sensors", Duration::from_secs(90), || {
        let (_, job) = get(&format!("{}/api/v1/jobs/sensors", served.base));
        let job: Value = serde_json::from_str(&job).ok()?;
        job["last_decision"].is_object().then_some(())
    });
    browser.open(&format!("{}/", served.base));
    let fleet_text = browser.script("return document.querySelector('#fleet').textContent;");
    assert!(
        fleet_text.as_str().is_some_and(|t| t.contains("rescaled")),
        "{fleet_text}"
    );
    browser.screenshot(&dir.join("dashboard.png"));
    browser.script("document.querySelector('a[href=\"/jobs/sensors\"]').click(); return 0;");
    let page = wait_for("the job page", Duration::from_secs(30), || {
        let page = browser.script(
            "const d = document.querySelector('#last-decision'); \
             const svg = document.querySelector('svg#chart'); \
             return d && svg ? {title: document.querySelector('h1').textContent, \
               decision: d.textContent, lines: svg.querySelectorAll('polyline').length, \
               width: svg.getBoundingClientRect().width} : null;",
        );
        (!page.is_null()).then_some(page)
    });
    assert_eq!(page["title"], "sensors");
    let decision = page["decision"].as_str().unwrap_or("");
    assert!(
        decision.contains("rescaled") && decision.contains("bucket-align"),
        "{decision}"
    );
    assert!(page["lines"].as_u64().is_some_and(|n| n >= 2), "{page}");
    assert!(page["width"].as_f64().is_some_and(|w| w > 500.0), "{page}");
    browser.screenshot(&dir.join("dashboard-job.png"));
    eprintln!("screenshots in {}", dir.display());
}

#[test]
#[ignore = "needs chromium, chromedriver and FLOWSCALE_BROWSER_E2E=1; .ci/run runs it"]
fn the_dashboard_works_over_https_in_a_browser() {
    assert_eq!(
        std::env::var("FLOWSCALE_BROWSER_E2E").as_deref(),
        Ok("1"),
        "this test drives headless Chromium and needs FLOWSCALE_BROWSER_E2E=1"
    );
    let (served, spki) = serve_demo_fleet_over_https();
    assert!(served.base.starts_with("https://"), "{}", served.base);
    // Chromium trusts this one certificate's key, nothing else of the test CA.
    let browser = Browser::start_with(&[&format!("--ignore-certificate-errors-spki-list={spki}")]);
    browser.open(&format!("{}/", served.base));
    let jobs = wait_for("the six jobs", Duration::from_secs(30), || {
        let jobs = browser.script(
            "return Array.from(document.querySelectorAll('#fleet tr.job')).map(r => r.dataset.job);",
        );
        (jobs.as_array().map(Vec::len) == Some(6)).then_some(jobs)
    });
    let expected: Vec<&str> = DEMO_JOBS.iter().map(|(j, _)| *j).collect();
    assert_eq!(jobs, json!(expected));
    let origin = browser.script("return [location.protocol, window.isSecureContext];");
    assert_eq!(origin, json!(["https:", true]));
    // The job page draws its chart from the API over the same HTTPS origin, once the job has
    // a few steps.
    browser.script("document.querySelector('a[href=\"/jobs/clicks\"]').click(); return 0;");
    wait_for("the job page's chart", Duration::from_secs(60), || {
        let lines = browser.script(
            "const svg = document.querySelector('svg#chart'); \
             return svg ? svg.querySelectorAll('polyline').length : null;",
        );
        if lines.as_u64().is_some_and(|n| n >= 1) {
            return Some(());
        }
        browser.open(&format!("{}/jobs/clicks", served.base));
        None
    });
    browser.screenshot(&screenshot_dir().join("dashboard-https.png"));
}
