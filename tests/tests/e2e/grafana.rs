//! The Grafana dashboard (`examples/grafana/flowscale-dashboard.json`) and the Prometheus alert
//! rules (`examples/prometheus/flowscale-alerts.yml`): the dashboard is a Grafana dashboard with
//! a query in every panel, naming only flowscale's metric families; promtool accepts the rules
//! and passes their unit tests (`#[ignore]`d, `FLOWSCALE_PROMTOOL=1`); and a real Prometheus
//! scraping a paced run of the host answers every panel's query and every alert's expression
//! with series (`#[ignore]`d, `FLOWSCALE_PROMETHEUS_E2E=1` with `FLOWSCALE_POSTGRES_URL`, for
//! the lease gauges; `.ci/run` runs both).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use flowscale_tests::{build, plugin_file, plugins_dir};
use serde_json::Value;

use crate::fake_flink::{FakeFlink, JOB_ID};
use crate::harness::repo_root;
use crate::multi_host::fresh_database;
use crate::serve::{Killed, demo_fleet_copy, free_port, get, run_listening, wait_for};

/// Every metric family flowscale writes (the exposition names: counters with `_total`,
/// histograms by family), as docs/operating.md lists them.
const FAMILIES: [&str; 26] = [
    "flowscale_vertex_parallelism",
    "flowscale_vertex_true_processing_rate_records_per_second",
    "flowscale_vertex_target_data_rate_records_per_second",
    "flowscale_vertex_catch_up_data_rate_records_per_second",
    "flowscale_vertex_lag_seconds",
    "flowscale_vertex_lag_records",
    "flowscale_vertex_load_ratio",
    "flowscale_vertex_scale_up_rate_threshold_records_per_second",
    "flowscale_vertex_scale_down_rate_threshold_records_per_second",
    "flowscale_decisions_total",
    "flowscale_rescales_total",
    "flowscale_plugin_faults_total",
    "flowscale_engine_errors_total",
    "flowscale_events_total",
    "flowscale_cycle_lateness_seconds",
    "flowscale_last_rescale_timestamp_seconds",
    "flowscale_last_decision_timestamp_seconds",
    "flowscale_decision_interval_seconds",
    "flowscale_catch_up_target_seconds",
    "flowscale_cooldown_queued",
    "flowscale_cycle_duration_seconds",
    "flowscale_plugins_loaded",
    "flowscale_lease_held",
    "flowscale_lease_token",
    "flowscale_lease_owner",
    "flowscale_build_info",
];

/// The alerts of the rules file, each with a unit test that fires and one that does not.
const ALERTS: [&str; 4] = [
    "FlowscaleJobLagging",
    "FlowscalePluginFaulting",
    "FlowscaleNoDecision",
    "FlowscaleLeaseLost",
];

fn dashboard_path() -> PathBuf {
    repo_root().join("examples/grafana/flowscale-dashboard.json")
}

fn rules_path() -> PathBuf {
    repo_root().join("examples/prometheus/flowscale-alerts.yml")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The dashboard's panels, those of collapsed rows included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut all = Vec::new();
    for panel in dashboard["panels"].as_array().expect("a panels array") {
        all.push(panel);
        if let Some(nested) = panel["panels"].as_array() {
            all.extend(nested);
        }
    }
    all
}

/// Every `(panel title, query)` of the dashboard.
fn dashboard_queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut queries = Vec::new();
    for panel in panels(dashboard) {
        let title = panel["title"].as_str().unwrap_or_default();
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_default();
            queries.push((title.to_string(), expr.to_string()));
        }
    }
    queries
}

/// Where each `flowscale_...` identifier of a PromQL text starts and ends (byte offsets); one
/// that only ends in `flowscale_` (`my_flowscale_x`) is not one.
fn metric_spans(query: &str) -> Vec<(usize, usize)> {
    let bytes = query.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut spans = Vec::new();
    let mut i = 0;
    while let Some(at) = query[i..].find("flowscale_") {
        let start = i + at;
        let mut end = start;
        while end < bytes.len() && word(bytes[end]) {
            end += 1;
        }
        if start == 0 || !word(bytes[start - 1]) {
            spans.push((start, end));
        }
        i = end;
    }
    spans
}

/// The metric names a PromQL text reads. A histogram's `_bucket`, `_sum` and `_count` series
/// are named by their family.
fn metric_names(query: &str) -> BTreeSet<String> {
    metric_spans(query)
        .into_iter()
        .map(|(start, end)| {
            let name = &query[start..end];
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(name)
                .to_string()
        })
        .collect()
}

/// The instant selectors of the metrics a PromQL text reads: `name` or `name{matchers}`, a
/// range's `[...]` left out, each once.
fn selectors(query: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (start, mut end) in metric_spans(query) {
        if query.as_bytes().get(end) == Some(&b'{') {
            end += query[end..].find('}').map_or(query.len() - end, |e| e + 1);
        }
        let selector = query[start..end].to_string();
        if !found.contains(&selector) {
            found.push(selector);
        }
    }
    found
}

/// `query` with every comparison made a `bool` one (`a > b` becomes `a > bool b`): the same
/// series, matched the same way, but kept with a value of 0 or 1 instead of dropped when the
/// comparison fails. What an alert's expression answers this way shows that each of its
/// selectors finds series and that its two sides match on their labels, whether the alert
/// would fire or not. Label matchers (inside `{}`) and strings are left as they are.
fn comparisons_as_bool(query: &str) -> String {
    let chars: Vec<char> = query.chars().collect();
    let mut out = String::with_capacity(query.len() + 16);
    let (mut braces, mut quote) = (0usize, None::<char>);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        out.push(c);
        i += 1;
        if let Some(q) = quote {
            if c == '\\' && i < chars.len() {
                out.push(chars[i]);
                i += 1;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' | '`' => quote = Some(c),
            '{' => braces += 1,
            '}' => braces = braces.saturating_sub(1),
            '>' | '<' | '=' | '!' if braces == 0 => {
                let second = chars.get(i).copied();
                let is_comparison = matches!((c, second), (_, Some('=')) | ('>' | '<', _));
                if !is_comparison {
                    continue;
                }
                if second == Some('=') {
                    out.push('=');
                    i += 1;
                }
                let rest: String = chars[i..].iter().collect();
                if !rest.trim_start().starts_with("bool ") {
                    out.push_str(" bool");
                }
            }
            _ => {}
        }
    }
    out
}

#[test]
fn comparisons_become_bool_ones_outside_matchers() {
    assert_eq!(
        comparisons_as_bool("max by (job) (a) > on (job) max by (job) (b > 0)"),
        "max by (job) (a) > bool on (job) max by (job) (b > bool 0)"
    );
    assert_eq!(
        comparisons_as_bool("time() - max(a) >= 3 * b"),
        "time() - max(a) >= bool 3 * b"
    );
    assert_eq!(comparisons_as_bool("a == bool 0"), "a == bool 0");
    assert_eq!(
        comparisons_as_bool(r#"x{a!="1",b=~"<>"} != 2 < 3 <= 4"#),
        r#"x{a!="1",b=~"<>"} != bool 2 < bool 3 <= bool 4"#
    );
}

#[test]
fn selectors_and_names_are_read_from_a_query() {
    let query = r#"sum(increase(flowscale_a_total{job="x",m="}"}[5m])) / flowscale_b_bucket"#;
    assert_eq!(
        selectors(query),
        [r#"flowscale_a_total{job="x",m="}"#, "flowscale_b_bucket"]
    );
    assert_eq!(
        metric_names(query),
        BTreeSet::from(["flowscale_a_total".to_string(), "flowscale_b".to_string()])
    );
    assert!(metric_names("my_flowscale_x").is_empty());
}

#[test]
fn the_dashboard_is_a_grafana_dashboard_with_a_query_in_every_panel() {
    let dashboard: Value = serde_json::from_str(&read(&dashboard_path())).expect("valid JSON");
    assert_eq!(dashboard["uid"], "flowscale");
    assert!(dashboard["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(dashboard["schemaVersion"].as_u64().is_some_and(|v| v >= 30));

    // The variables: a Prometheus data source, and the job read from the parallelism family.
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("variables");
    let variable = |name: &str| {
        variables
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no variable {name}"))
    };
    let datasource = variable("datasource");
    assert_eq!(datasource["type"], "datasource");
    assert_eq!(datasource["query"], "prometheus");
    let job = variable("job");
    assert_eq!(job["type"], "query");
    assert_eq!(job["datasource"]["uid"], "${datasource}");
    assert_eq!(
        job["query"]["query"],
        "label_values(flowscale_vertex_parallelism, job)"
    );
    assert_eq!(
        job["definition"],
        "label_values(flowscale_vertex_parallelism, job)"
    );

    // Every panel but a row has a query, through the data source variable, and a place.
    let mut ids = BTreeSet::new();
    let mut rows = 0;
    for panel in panels(&dashboard) {
        let title = panel["title"].as_str().expect("a title");
        let id = panel["id"].as_u64().expect("an id");
        assert!(ids.insert(id), "panel id {id} twice");
        for key in ["x", "y", "w", "h"] {
            assert!(panel["gridPos"][key].is_u64(), "{title}: gridPos.{key}");
        }
        if panel["type"] == "row" {
            rows += 1;
            continue;
        }
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel {title} has no query");
        let mut refs = BTreeSet::new();
        for target in targets {
            let expr = target["expr"].as_str().unwrap_or_default();
            assert!(!expr.trim().is_empty(), "panel {title} has an empty query");
            assert!(
                refs.insert(target["refId"].as_str().expect("refId")),
                "{title}"
            );
            assert!(
                !metric_names(expr).is_empty(),
                "{title}: {expr} reads no metric"
            );
        }
    }
    assert_eq!(rows, 3, "the rows: fleet, one job, plugin faults");

    // The job's row: its panels read the chosen job.
    let job_row: Vec<(String, String)> = dashboard_queries(&dashboard)
        .into_iter()
        .filter(|(_, q)| q.contains("$job"))
        .collect();
    assert!(job_row.len() >= 10, "{job_row:?}");

    // Every name the dashboard and the rules read is one of flowscale's families.
    let rules = read(&rules_path());
    let mut read_names = metric_names(&rules);
    for (_, query) in dashboard_queries(&dashboard) {
        read_names.extend(metric_names(&query));
    }
    for name in &read_names {
        assert!(
            FAMILIES.contains(&name.as_str()),
            "{name} is not one of flowscale's metric families"
        );
    }
    for family in [
        "flowscale_vertex_lag_seconds",
        "flowscale_plugin_faults_total",
    ] {
        assert!(read_names.contains(family), "nothing reads {family}");
    }
}

/// `promtool ARGS...` in `dir`: its output, or a panic with it when it fails.
fn promtool(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run promtool ({e}): apt-get install prometheus"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "promtool {args:?}:\n{text}");
    text
}

#[test]
#[ignore = "needs promtool (Debian package prometheus) and FLOWSCALE_PROMTOOL=1; .ci/run runs it"]
fn promtool_checks_the_example_config_and_rules_and_their_unit_tests_pass() {
    assert_eq!(
        std::env::var("FLOWSCALE_PROMTOOL").as_deref(),
        Ok("1"),
        "this test runs promtool and needs FLOWSCALE_PROMTOOL=1"
    );
    let dir = repo_root().join("examples/prometheus");
    let config = promtool(&dir, &["check", "config", "prometheus.yml"]);
    assert!(config.contains("SUCCESS: 1 rule files found"), "{config}");
    let checked = promtool(&dir, &["check", "rules", "flowscale-alerts.yml"]);
    assert!(checked.contains("SUCCESS: 4 rules found"), "{checked}");
    let tested = promtool(&dir, &["test", "rules", "flowscale-alerts.test.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");

    // Each alert is tested firing (a case expecting alerts) and not firing (`exp_alerts: []`).
    let tests = read(&dir.join("flowscale-alerts.test.yml"));
    let lines: Vec<&str> = tests.lines().map(str::trim).collect();
    for alert in ALERTS {
        let (mut firing, mut quiet) = (0, 0);
        for (i, line) in lines.iter().enumerate() {
            if *line != format!("alertname: {alert}") {
                continue;
            }
            match lines.get(i + 1) {
                Some(&"exp_alerts: []") => quiet += 1,
                Some(&"exp_alerts:") => firing += 1,
                other => panic!("{alert}: no exp_alerts after its alertname but {other:?}"),
            }
        }
        assert!(
            firing > 0 && quiet > 0,
            "{alert}: {firing} firing cases, {quiet} quiet"
        );
    }
}

/// `GET base/api/v1/query?query=...` on Prometheus: the result's series (an empty list when
/// none), or an error with what Prometheus said.
fn prometheus_query(base: &str, query: &str) -> Result<Vec<Value>, String> {
    let url = format!("{base}/api/v1/query?query={}", percent_encode(query));
    let (status, body) = get(&url);
    let answer: Value = serde_json::from_str(&body).map_err(|_| format!("{status}: {body}"))?;
    if answer["status"] != "success" {
        return Err(format!("{status}: {body}"));
    }
    let data = &answer["data"];
    match data["resultType"].as_str() {
        Some("vector" | "matrix") => Ok(data["result"].as_array().cloned().unwrap_or_default()),
        Some("scalar") => Ok(vec![data["result"].clone()]),
        other => Err(format!("result type {other:?}: {body}")),
    }
}

/// The series `query` answers over the last `seconds`, one point a second: what Grafana asks
/// for when it draws a panel. A series that pauses (the evaluated gauges are absent while a
/// rescaled job's metric window refills) is still a line on the graph, so an instant query at
/// such a moment would miss what the panel shows.
fn prometheus_range_query(base: &str, query: &str, seconds: u64) -> Result<Vec<Value>, String> {
    let end = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs();
    let url = format!(
        "{base}/api/v1/query_range?query={}&start={}&end={end}&step=1",
        percent_encode(query),
        end.saturating_sub(seconds)
    );
    let (status, body) = get(&url);
    let answer: Value = serde_json::from_str(&body).map_err(|_| format!("{status}: {body}"))?;
    if answer["status"] != "success" {
        return Err(format!("{status}: {body}"));
    }
    Ok(answer["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default())
}

/// `text` for a URL's query string: everything but unreserved characters percent-encoded.
fn percent_encode(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The demo fleet (examples/fleet.toml), its simulated jobs paced, on the shared database `url`
/// as host `id`, with a cycle every 2 s, and two more jobs: `faulty`, simulated, whose plugin
/// mode answers out of range at every alignment (its faults are real), and `streaming`, a
/// wall-clock job on the fake Flink cluster at `rest`: only a wall-clock job runs under a
/// lease, and only a lease writes the lease gauges.
fn fleet_for_prometheus(dir: &Path, url: &str, id: &str, rest: &str) -> PathBuf {
    let fleet = demo_fleet_copy(
        dir,
        &format!("state = \"{url}\"\nid = \"{id}\"\nlease-ttl = \"5s\"\n"),
    );
    let text = read(&fleet);
    assert!(
        text.contains("interval = \"10s\""),
        "the demo fleet's interval"
    );
    let mut text = text.replacen("interval = \"10s\"", "interval = \"2s\"", 1);
    text.push_str(&format!(
        r#"
[[jobs]]
name = "faulty"
job = "jobs/keyed-step-spike.toml"
duration = "2h"
[jobs.config]
"scaling.alignment.mode" = "faulty"
"scaling.alignment.mode.faulty.class" = "out-of-range"

[[jobs]]
name = "streaming"
engine = "flink"
rest = "{rest}"
job-id = "{JOB_ID}"
[jobs.config]
"metrics.window" = "4s"
"stabilization.interval" = "1s"
"scaling-cooldown-period" = "3s"
"scale-down.interval" = "0"
"#
    ));
    std::fs::write(&fleet, text).expect("write the fleet");
    fleet
}

/// The example configuration, examples/prometheus/prometheus.yml, with the alert rules beside
/// it, written into `dir` to scrape `target` and evaluate the rules every second.
fn prometheus_config(dir: &Path, target: &str) -> PathBuf {
    let example = repo_root().join("examples/prometheus/prometheus.yml");
    let mut text = read(&example);
    for (from, to) in [
        ("scrape_interval: 15s", "scrape_interval: 1s"),
        ("evaluation_interval: 15s", "evaluation_interval: 1s"),
        ("127.0.0.1:9464", target),
    ] {
        assert!(text.contains(from), "{}: no {from}", example.display());
        text = text.replacen(from, to, 1);
    }
    let config = dir.join("prometheus.yml");
    std::fs::write(&config, text).expect("write prometheus.yml");
    std::fs::copy(rules_path(), dir.join("flowscale-alerts.yml")).expect("copy the rules");
    config
}

/// A Prometheus server with the configuration `config`, its data in `dir`; its URL.
fn start_prometheus(dir: &Path, config: &Path) -> (Killed, String) {
    let port = free_port();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run prometheus ({e}): apt-get install prometheus"));
    let child = Killed(child);
    let base = format!("http://127.0.0.1:{port}");
    wait_for("Prometheus", Duration::from_secs(60), || {
        (get(&format!("{base}/-/ready")).0 == 200).then_some(())
    });
    (child, base)
}

#[test]
#[ignore = "needs prometheus; FLOWSCALE_PROMETHEUS_E2E=1 in .ci/run (with FLOWSCALE_POSTGRES_URL)"]
fn every_panel_and_alert_query_returns_series_from_a_real_prometheus() {
    assert_eq!(
        std::env::var("FLOWSCALE_PROMETHEUS_E2E").as_deref(),
        Ok("1"),
        "this test runs a Prometheus server and needs FLOWSCALE_PROMETHEUS_E2E=1"
    );
    let url = fresh_database("flowscale_grafana");
    let dir = tempfile::tempdir().expect("tempdir");
    let flink = FakeFlink::start();
    let fleet = fleet_for_prometheus(dir.path(), &url, "grafana-a", &flink.url());
    let profile = build(&["bucket-align", "fixture-out-of-range"]);
    let plugins = plugins_dir(&[
        (&plugin_file(&profile, "bucket-align"), "libbucket_align.so"),
        (
            &plugin_file(&profile, "fixture-out-of-range"),
            "libout_of_range.so",
        ),
    ]);

    let port = free_port();
    let _host = run_listening(&fleet, 120, port, plugins.path());
    let target = format!("127.0.0.1:{port}");
    wait_for("the host's server", Duration::from_secs(60), || {
        (get(&format!("http://{target}/readyz")).0 == 200).then_some(())
    });

    let data = tempfile::tempdir().expect("tempdir");
    let config = prometheus_config(data.path(), &target);
    let (_prometheus, base) = start_prometheus(data.path(), &config);
    // A few scrapes, a rescale (the last-rescale gauge and the per-job rates need one) and a
    // plugin fault recorded, then every alert evaluated at least once.
    wait_for("ten scrapes", Duration::from_secs(60), || {
        let scraped = prometheus_query(&base, "count_over_time(flowscale_build_info[5m])").ok()?;
        let count: f64 = scraped.first()?["value"][1].as_str()?.parse().ok()?;
        (count >= 10.0).then_some(())
    });
    let simulated = r#"flowscale_rescales_total{job!="streaming"}"#;
    wait_for(
        "rescales, a plugin fault, a lease",
        Duration::from_secs(60),
        || {
            let rescaled = prometheus_query(&base, &format!("{simulated} > 0")).ok()?;
            let faulted = prometheus_query(&base, "flowscale_plugin_faults_total > 0").ok()?;
            let leased = prometheus_query(&base, "flowscale_lease_held").ok()?;
            (!rescaled.is_empty() && !faulted.is_empty() && !leased.is_empty()).then_some(())
        },
    );

    // The dashboard's job variable, as Grafana asks for it: the fleet's jobs (what
    // `honor_labels: true` in the example configuration keeps; without it the only value
    // would be the scrape job's name, `flowscale`).
    let (_, values) = get(&format!(
        "{base}/api/v1/label/job/values?match[]=flowscale_vertex_parallelism"
    ));
    let values: Value = serde_json::from_str(&values).expect("label values as JSON");
    let jobs: BTreeSet<&str> = values["data"]
        .as_array()
        .expect("label values")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for job in [
        "clicks",
        "faulty",
        "orders",
        "payments",
        "sensors",
        "streaming",
    ] {
        assert!(
            jobs.contains(job),
            "{job} not among the job variable's values {jobs:?}"
        );
    }

    // $job: the simulated job that rescaled most.
    let top = prometheus_query(&base, &format!("topk(1, {simulated})")).expect("a job");
    let job = top[0]["metric"]["job"]
        .as_str()
        .expect("a job label")
        .to_string();

    // A series appears with what it counts: a job's first event of a reason, its first
    // rescale. The chosen job may have rescaled for the first time just now, so the panels are
    // asked again, for up to 30 s, until each has drawn a line; a query naming a series the host
    // never writes stays empty and is reported.
    let dashboard: Value = serde_json::from_str(&read(&dashboard_path())).expect("valid JSON");
    let panels = dashboard_queries(&dashboard);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut failures = loop {
        let mut failures = Vec::new();
        for (title, expr) in &panels {
            // Grafana's $__rate_interval is at least four scrape intervals: a minute covers
            // every scrape of this run.
            let query = expr.replace("$job", &job).replace("$__rate_interval", "1m");
            match prometheus_range_query(&base, &query, 60) {
                Ok(series) if !series.is_empty() => {}
                Ok(_) => failures.push(format!("panel {title:?}: no series for {query}")),
                Err(e) => failures.push(format!("panel {title:?}: {query} failed: {e}")),
            }
        }
        if failures.is_empty() || Instant::now() >= deadline {
            break failures;
        }
        std::thread::sleep(Duration::from_secs(1));
    };

    // The alerts as Prometheus loaded them from the rules file.
    let (_, rules) = get(&format!("{base}/api/v1/rules"));
    let rules: Value = serde_json::from_str(&rules).expect("the rules as JSON");
    let mut alerts = BTreeMap::new();
    for group in rules["data"]["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            if rule["type"] == "alerting" {
                alerts.insert(
                    rule["name"].as_str().expect("a name").to_string(),
                    rule.clone(),
                );
            }
        }
    }
    assert_eq!(
        alerts.keys().map(String::as_str).collect::<Vec<_>>(),
        {
            let mut names = ALERTS.to_vec();
            names.sort_unstable();
            names
        },
        "the alerts Prometheus loaded"
    );
    for (name, rule) in &alerts {
        let expr = rule["query"].as_str().expect("a query");
        if rule["health"] != "ok" {
            failures.push(format!(
                "alert {name}: health {} ({})",
                rule["health"], rule["lastError"]
            ));
        }
        for selector in selectors(expr) {
            match prometheus_query(&base, &selector) {
                Ok(series) if !series.is_empty() => {}
                Ok(_) => failures.push(format!("alert {name}: no series for {selector}")),
                Err(e) => failures.push(format!("alert {name}: {selector} failed: {e}")),
            }
        }
        let unfiltered = comparisons_as_bool(expr);
        match prometheus_query(&base, &unfiltered) {
            Ok(series) if !series.is_empty() => {}
            Ok(_) => failures.push(format!("alert {name}: no series for {unfiltered}")),
            Err(e) => failures.push(format!("alert {name}: {unfiltered} failed: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of the queries answered no series ($job = {job}):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
