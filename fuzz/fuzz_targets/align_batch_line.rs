//! One `flowscale align --batch` input line, answered by `cli::align_batch_line` as the batch
//! loop answers it (no job configuration, no plugins).
//!
//! Never panics; an accepted request's answer is in range: the target is within
//! `[min(lower, bound), bound]` with `bound = min(max_parallelism, upper)` (the upper bound wins
//! when `lower` is above it, as in the pipeline's clamp), and nothing exceeds Flink's `i32::MAX`
//! parallelism.

#![warn(missing_docs, unreachable_pub)]
#![no_main]

use flowscale::alignment::NoCustomModes;
use flowscale::cli::align_batch_line;
use flowscale::config::JobConfig;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn field(value: &Value, key: &str, default: u64) -> u64 {
    match value.get(key) {
        Some(v) => v.as_u64().expect("an accepted request field is an integer"),
        None => default,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(answer) = align_batch_line(1, data, &JobConfig::new(), &NoCustomModes) else {
        return;
    };
    let request: Value = serde_json::from_slice(data).expect("an accepted line is JSON");
    let answer: Value = serde_json::from_str(&answer).expect("the answer is JSON");
    let lower = field(&request, "lower", 1);
    let upper = field(&request, "upper", i32::MAX as u64);
    let max_parallelism = field(&request, "max_parallelism", 0);
    let current = field(&request, "current", 0);
    let target = field(&answer, "target", 0);
    let parallelism = field(&answer, "parallelism", 0);
    assert_eq!(field(&answer, "current", 0), current);
    assert!(current >= 1, "accepted current {current}");
    // The pipeline's clamp: the upper bound wins when `lower` is above it.
    let bound = max_parallelism.min(upper);
    assert!(
        lower.min(bound) <= target && target <= bound,
        "accepted target {target} outside [min(lower {lower}, bound), bound = min(max_parallelism {max_parallelism}, upper {upper})]"
    );
    assert!(
        target <= i32::MAX as u64 && parallelism <= i32::MAX as u64,
        "answered target {target}, parallelism {parallelism}: above i32::MAX"
    );
    assert!(parallelism >= 1, "answered parallelism 0");
});
