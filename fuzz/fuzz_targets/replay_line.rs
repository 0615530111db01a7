//! Replay JSON Lines: `ReplayCollector::parse`, then, for what it accepts, the control loop run
//! over the replay (`ReplayEngine` under a `JobRunner` with short windows, so recorded
//! observations reach the decision pipeline, the alignment and the realizer).
//!
//! Never panics; an accepted replay has non-decreasing times and its records survive a
//! serialize/parse round trip.

#![warn(missing_docs, unreachable_pub)]
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use flowscale::alignment::{JobAlignment, NoCustomModes};
use flowscale::config::JobConfig;
use flowscale::engine::replay::{ReplayCollector, ReplayEngine, ReplayRecord, RescalePolicy};
use flowscale::plan::JobSettings;
use flowscale::runner::JobRunner;
use libfuzzer_sys::fuzz_target;

/// At most this many steps per input (a replay may span any time).
const MAX_STEPS: usize = 64;

fn trace() -> &'static PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        tempfile::tempdir()
            .expect("temp dir")
            .keep()
            .join("trace.jsonl")
    })
}

fuzz_target!(|data: &[u8]| {
    // `ReplayCollector::from_path` refuses a file that is not UTF-8 before parsing.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(collector) = ReplayCollector::parse(text, RescalePolicy::Apply) else {
        return;
    };
    let times = collector.times();
    assert!(!times.is_empty(), "accepted an empty replay");
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "accepted out-of-order times"
    );
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let record: ReplayRecord = serde_json::from_str(line).expect("an accepted line parses");
        let again = serde_json::to_string(&record).expect("a record serializes");
        let back: ReplayRecord = serde_json::from_str(&again).expect("a serialized record parses");
        assert_eq!(
            serde_json::to_string(&back).expect("serializes"),
            again,
            "a record does not survive a round trip"
        );
    }

    let path = trace();
    std::fs::write(path, data).expect("write the trace");
    let engine = ReplayEngine::open(path, RescalePolicy::Apply).expect("an accepted replay opens");
    let config = JobConfig::from_pairs([
        ("metrics.window", "2 s"),
        ("stabilization.interval", "0"),
        ("scaling-cooldown-period", "0"),
        ("scale-down.interval", "0"),
    ]);
    let settings = JobSettings::from_config(&config).expect("valid settings");
    let alignment = JobAlignment::resolve("replay", &config, &NoCustomModes).expect("a mode");
    let mut runner = JobRunner::new("replay", engine, alignment, &settings, 1000);
    let mut previous = None;
    for &at in times.iter().take(MAX_STEPS) {
        if previous == Some(at) {
            continue;
        }
        previous = Some(at);
        let _ = runner.step(at, Vec::new());
    }
});
