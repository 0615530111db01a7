//! A job's saved state file: the bytes are written as the only file of a state directory, which
//! `FileStateStore::open` decodes; every job it accepts is restored into a `JobRunner` (the
//! typed sections: scaling state, cooldown queue, events), stepped, and persisted again.
//!
//! The decoding entry point is the one call to `FileStateStore::open` below; keep the target
//! that thin so it follows the decoder when it moves.
//!
//! Never panics; accepted state can be written back and read again unchanged, and a restored
//! job can persist its state again.

#![warn(missing_docs, unreachable_pub)]
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use flowscale::alignment::{JobAlignment, NoCustomModes};
use flowscale::config::JobConfig;
use flowscale::engine::replay::{ReplayEngine, RescalePolicy};
use flowscale::plan::JobSettings;
use flowscale::runner::JobRunner;
use flowscale::state::{FileStateStore, InMemoryStateStore, StateStore};
use libfuzzer_sys::fuzz_target;

/// A small recorded job to restore state into.
const TRACE: &str = r#"{"at_ms": 0, "observation": {"status": "RUNNING", "running_since_ms": 0, "vertices": [{"id": "a", "name": "A", "parallelism": 2, "max_parallelism": 8}], "edges": []}}
{"at_ms": 60000, "observation": {"status": "RUNNING", "running_since_ms": 0, "vertices": [{"id": "a", "name": "A", "parallelism": 2, "max_parallelism": 8}], "edges": []}}
"#;

struct Dirs {
    state: PathBuf,
    copy: PathBuf,
    trace: PathBuf,
}

fn dirs() -> &'static Dirs {
    static DIRS: OnceLock<Dirs> = OnceLock::new();
    DIRS.get_or_init(|| {
        let root = tempfile::tempdir().expect("temp dir").keep();
        let trace = root.join("trace.jsonl");
        std::fs::write(&trace, TRACE).expect("write the trace");
        Dirs {
            state: root.join("state"),
            copy: root.join("copy"),
            trace,
        }
    })
}

/// The sections the host stores per job.
fn sections(store: &dyn StateStore, job: &str) -> Vec<(String, serde_json::Value)> {
    [
        "metric-history",
        "scaling-history",
        "scaling-tracking",
        "delayed-scale-down",
        "parallelism-overrides",
        "pending-summaries",
        "cooldown",
        "events",
    ]
    .into_iter()
    .filter_map(|s| store.get(job, s).map(|v| (s.to_string(), v)))
    .collect()
}

fuzz_target!(|data: &[u8]| {
    let dirs = dirs();
    let _ = std::fs::remove_dir_all(&dirs.state);
    let _ = std::fs::remove_dir_all(&dirs.copy);
    std::fs::create_dir_all(&dirs.state).expect("state dir");
    std::fs::write(dirs.state.join("job.json"), data).expect("write the state file");

    let Ok(mut store) = FileStateStore::open(&dirs.state) else {
        return;
    };

    // Accepted state is written back and read again unchanged.
    let mut copy = FileStateStore::open(&dirs.copy).expect("an empty state dir opens");
    for job in store.jobs() {
        for (section, value) in sections(&store, &job) {
            copy.put(&job, &section, value);
        }
    }
    copy.flush().expect("accepted state can be written back");
    // One host per state directory: the copy's lock goes with it before it is read again.
    drop(copy);
    let reread = FileStateStore::open(&dirs.copy).expect("written state reads back");
    for job in reread.jobs() {
        assert_eq!(
            sections(&reread, &job),
            sections(&store, &job),
            "job `{job}` changed"
        );
    }

    // Every accepted job restores into a runner, which can step and persist again.
    let config =
        JobConfig::from_pairs([("metrics.window", "10 s"), ("stabilization.interval", "0")]);
    let settings = JobSettings::from_config(&config).expect("valid settings");
    // Restoring may keep an unreadable section aside (it never fails on one): only a job whose
    // state is in several files is refused.
    let jobs: Vec<String> = store.jobs().into_iter().take(4).collect();
    for job in jobs {
        let engine = ReplayEngine::open(&dirs.trace, RescalePolicy::Apply).expect("the trace");
        let alignment = JobAlignment::resolve(&job, &config, &NoCustomModes).expect("a mode");
        let mut runner = JobRunner::new(&job, engine, alignment, &settings, 30_000);
        let _ = runner.restore(&mut store);
        for at in [0, 30_000, 60_000] {
            let _ = runner.step(at, Vec::new());
        }
        let mut out = InMemoryStateStore::new();
        runner
            .persist(&mut out)
            .expect("a restored job persists its state again");
    }
});
