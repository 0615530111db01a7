//! `/metrics` read back by the official parsers, with arbitrary job, mode, vertex and host
//! names: the Python client's parsers of both text formats
//! (`prometheus_client.parser` and `prometheus_client.openmetrics.parser`) must find exactly
//! the series the host meant, each name as its label value, and `promtool check metrics` must
//! accept the Prometheus text.
//!
//! The parsers run as one Python process for the whole test, fed one exposition per line of
//! JSON, and promtool once per generated batch of names, so that a few hundred names take a
//! few seconds. `#[ignore]`d: it needs `python3` with `prometheus_client` and `promtool`
//! (Debian's `prometheus`), which `.ci/run` installs before running it.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use flowscale_tests::promtool_check;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::metrics::tests::fed;

/// Reads requests `{"format": "prometheus" | "openmetrics", "text": ...}`, one a line, and
/// answers each with `{"samples": [[name, labels, value], ...]}` or `{"error": ...}`.
const PARSER: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families as prometheus
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    parse = openmetrics if request["format"] == "openmetrics" else prometheus
    try:
        samples = [[s.name, s.labels, s.value] for f in parse(request["text"]) for s in f.samples]
        answer = {"samples": samples}
    except Exception as e:
        answer = {"error": "%s: %s" % (type(e).__name__, e)}
    print(json.dumps(answer), flush=True)
"#;

/// What to install when a tool is missing.
const INSTALL: &str = "install prometheus_client (python3 -m pip install prometheus_client) \
                       and promtool (apt-get install prometheus), as .ci/run does";

/// A sample as compared: family sample name, labels, value.
type Sample = (String, BTreeMap<String, String>, i64);

/// The Python parsers, running.
struct Parsers {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Parsers {
    fn start() -> Parsers {
        let mut child = Command::new("python3")
            .args(["-c", PARSER])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run python3 ({e}): {INSTALL}"));
        let input = child.stdin.take().expect("piped stdin");
        let output = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut parsers = Parsers {
            child,
            input,
            output,
        };
        let ready = parsers.answer();
        assert_eq!(ready["ready"], true, "{ready}");
        parsers
    }

    /// The next answer; a process that ended (an import that failed) says what to install.
    fn answer(&mut self) -> serde_json::Value {
        let mut line = String::new();
        let read = self.output.read_line(&mut line).unwrap_or(0);
        assert!(
            read > 0,
            "the Python parsers ended (see their error above): {INSTALL}"
        );
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// Every sample of `text` in `format`, or the parser's error.
    fn parse(&mut self, format: &str, text: &str) -> Result<Vec<Sample>, String> {
        let request = serde_json::json!({ "format": format, "text": text });
        writeln!(self.input, "{request}").expect("the parsers read");
        let answer = self.answer();
        if let Some(error) = answer["error"].as_str() {
            return Err(error.to_string());
        }
        let samples = answer["samples"].as_array().expect("samples");
        Ok(samples
            .iter()
            // The times of the last decision and rescale are the host's clock: no whole number.
            .filter(|s| {
                !s[0]
                    .as_str()
                    .is_some_and(|n| n.starts_with("flowscale_last_"))
            })
            .map(|s| {
                let labels = s[1].as_object().expect("labels");
                let value = s[2].as_f64().expect("a value");
                assert_eq!(value.fract(), 0.0, "{s}");
                (
                    s[0].as_str().expect("a name").to_string(),
                    labels
                        .iter()
                        .map(|(k, v)| (k.clone(), v.as_str().expect("a string").to_string()))
                        .collect(),
                    value as i64,
                )
            })
            .collect())
    }
}

impl Drop for Parsers {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A name of any Unicode characters, often the ones the text formats treat specially and the
/// ones that end a line somewhere.
fn name() -> impl Strategy<Value = String> {
    let special = prop_oneof![
        Just('"'),
        Just('\\'),
        Just('\n'),
        Just('\r'),
        Just('\t'),
        Just('\0'),
        Just('{'),
        Just('}'),
        Just(','),
        Just('='),
        Just('#'),
        Just(' '),
        Just('\u{85}'),
        Just('\u{2028}'),
    ];
    prop::collection::vec(prop_oneof![3 => any::<char>(), 2 => special], 0..16)
        .prop_map(|chars| chars.into_iter().collect())
}

/// The samples [`fed`] makes for `jobs` in `mode` with `vertex` and `owner`, but the cycle
/// duration histogram's (no label of a name) and the timestamps (the host's clock).
fn expected(jobs: &[&str], mode: &str, vertex: &str, owner: &str) -> Vec<Sample> {
    let sample = |name: &str, labels: &[(&str, &str)], value: i64| {
        let labels = labels
            .iter()
            .map(|&(k, v)| (k.to_string(), v.to_string()))
            .collect();
        (name.to_string(), labels, value)
    };
    let mut samples = vec![
        sample("flowscale_plugins_loaded", &[], 0),
        sample(
            "flowscale_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))],
            1,
        ),
    ];
    for &job in jobs {
        samples.extend([
            sample(
                "flowscale_decisions_total",
                &[("job", job), ("mode", mode)],
                1,
            ),
            sample("flowscale_rescales_total", &[("job", job)], 1),
            sample(
                "flowscale_plugin_faults_total",
                &[("job", job), ("mode", mode)],
                1,
            ),
            sample("flowscale_engine_errors_total", &[("job", job)], 1),
            sample("flowscale_lease_held", &[("job", job)], 1),
            sample("flowscale_lease_token", &[("job", job)], 7),
            sample(
                "flowscale_lease_owner",
                &[("job", job), ("owner", owner)],
                1,
            ),
        ]);
        for (kind, value) in [
            ("current", 4),
            ("target", 6),
            ("aligned", 6),
            ("recommended", 6),
        ] {
            samples.push(sample(
                "flowscale_vertex_parallelism",
                &[("job", job), ("vertex", vertex), ("kind", kind)],
                value,
            ));
        }
        // 6000 records pending at 400 records/s: 15 s.
        for (family, value) in [
            ("true_processing_rate_records_per_second", 1500),
            ("target_data_rate_records_per_second", 400),
            ("catch_up_data_rate_records_per_second", 10),
            ("lag_seconds", 15),
            ("lag_records", 6000),
            ("load_ratio", 1),
            ("scale_up_rate_threshold_records_per_second", 610),
            ("scale_down_rate_threshold_records_per_second", 1210),
        ] {
            samples.push(sample(
                &format!("flowscale_vertex_{family}"),
                &[("job", job), ("vertex", vertex)],
                value,
            ));
        }
        for reason in ["PluginFault", "LeaseAcquired"] {
            samples.push(sample(
                "flowscale_events_total",
                &[("job", job), ("reason", reason)],
                1,
            ));
        }
        // One cycle 2 s late: in every bucket from `le="2.0"` on (the bounds are 1 ms to 60 s
        // as the lateness summary counts them, written as the client writes them).
        for (le, value) in [
            ("0.001", 0),
            ("0.002", 0),
            ("0.005", 0),
            ("0.01", 0),
            ("0.02", 0),
            ("0.05", 0),
            ("0.1", 0),
            ("0.2", 0),
            ("0.5", 0),
            ("1.0", 0),
            ("2.0", 1),
            ("5.0", 1),
            ("10.0", 1),
            ("20.0", 1),
            ("60.0", 1),
            ("+Inf", 1),
        ] {
            samples.push(sample(
                "flowscale_cycle_lateness_seconds_bucket",
                &[("job", job), ("le", le)],
                value,
            ));
        }
        samples.extend([
            sample("flowscale_cycle_lateness_seconds_sum", &[("job", job)], 2),
            sample("flowscale_cycle_lateness_seconds_count", &[("job", job)], 1),
            sample("flowscale_decision_interval_seconds", &[("job", job)], 10),
            sample("flowscale_catch_up_target_seconds", &[("job", job)], 300),
            sample("flowscale_cooldown_queued", &[("job", job)], 0),
        ]);
    }
    samples.sort();
    samples
}

#[test]
#[ignore = "needs python3 prometheus_client and promtool; .ci/run runs it"]
fn arbitrary_names_read_back_exactly_through_the_official_parsers() {
    let parsers = RefCell::new(Parsers::start());
    let mut runner = TestRunner::new(Config {
        cases: 32,
        failure_persistence: None,
        ..Config::default()
    });
    let batch = (
        prop::collection::btree_set(name(), 1..40),
        name(),
        name(),
        name(),
    );
    let result = runner.run(&batch, |(jobs, mode, vertex, owner)| {
        let jobs: Vec<&str> = jobs.iter().map(String::as_str).collect();
        let metrics = fed(&jobs, &mode, &vertex, &owner);
        let expected = expected(&jobs, &mode, &vertex, &owner);
        for (format, text) in [
            ("prometheus", metrics.encode_text()),
            ("openmetrics", metrics.encode()),
        ] {
            let mut parsed = parsers
                .borrow_mut()
                .parse(format, &text)
                .map_err(|e| TestCaseError::fail(format!("{format}: {e}\n{text}")))?;
            parsed.retain(|(name, _, _)| {
                !name.starts_with("flowscale_cycle_duration_seconds")
                    && !name.starts_with("flowscale_last_")
            });
            parsed.sort();
            prop_assert_eq!(&parsed, &expected, "{}:\n{}", format, text);
        }
        promtool_check(&metrics.encode_text()).map_err(TestCaseError::fail)?;
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
