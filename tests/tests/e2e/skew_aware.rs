//! Skew-aware targets (`scaling.skew-aware`, docs/skew-aware.md) as a user meets them:
//! `flowscale simulate` on the `hot-key-groups` example job with the key on, off and absent.

use crate::harness::{Cli, repo_root};

fn simulate(extra: &[&str]) -> crate::harness::Output {
    let job = repo_root().join("examples/jobs/hot-key-groups.toml");
    let mut args = vec!["simulate".to_string(), job.display().to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = Cli::new(args).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    out
}

/// The decision lines of the keyed vertex (`--verbose`).
fn decisions(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("keyed-aggregate: "))
        .collect()
}

/// The number after `label` in `line`.
fn number_after(line: &str, label: &str) -> f64 {
    let at = line
        .find(label)
        .unwrap_or_else(|| panic!("no `{label}`: {line}"))
        + label.len();
    line[at..]
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after `{label}`: {line}"))
}

#[test]
fn without_the_key_the_decisions_are_exactly_as_with_it_off() {
    let absent = simulate(&["--json"]);
    let off = simulate(&["--json", "--set", "scaling.skew-aware=false"]);
    assert_eq!(absent.stdout, off.stdout);
    let on = simulate(&["--json", "--set", "scaling.skew-aware=true"]);
    assert_ne!(on.stdout, off.stdout, "the key changes the decisions");
    let verbose = simulate(&["--verbose"]);
    assert!(
        !verbose.stderr.contains("[skew-aware]"),
        "{}",
        verbose.stderr
    );
}

/// The job's keyed vertex runs at 8 over K = 128 (16 key groups each) with key-group weights 6
/// at 5, 7, 40, 42, 100 and 102 and 1 elsewhere (158 in all): subtasks 0, 2 and 6 carry 26
/// each, the others 16. The estimate spreads these over each subtask's 16 key groups; the
/// busiest share at 8 is 26/158 (MAX aggregator). The first decision's capacity and TPR give
/// the scale factor `f`; the skew-aware target is the smallest `p` above 8 whose predicted
/// busiest subtask is within `(26/158) / f`, computed here from the key-group ranges.
#[test]
fn the_first_step_is_the_smallest_parallelism_whose_busiest_subtask_carries_the_capacity() {
    let on = simulate(&["--verbose", "--set", "scaling.skew-aware=true"]);
    let first = *decisions(&on.stderr).first().expect("a decision");
    assert!(first.contains("[skew-aware]"), "{first}");
    let f = number_after(first, "capacity ") / number_after(first, "/ TPR ");
    let limit = 26.0 / 158.0 / f;

    let k = 128u64;
    let start = |i: u64, p: u64| (i * k).div_ceil(p) as usize;
    let mut units = vec![0.0; 128];
    for (i, load) in [26.0, 16.0, 26.0, 16.0, 16.0, 16.0, 26.0, 16.0]
        .iter()
        .enumerate()
    {
        let (a, b) = (start(i as u64, 8), start(i as u64 + 1, 8));
        units[a..b]
            .iter_mut()
            .for_each(|u| *u = load / (b - a) as f64);
    }
    let busiest = |p: u64| {
        (0..p)
            .map(|i| units[start(i, p)..start(i + 1, p)].iter().sum::<f64>())
            .fold(0.0, f64::max)
            / 158.0
    };
    let expected = (9..=128u64)
        .find(|&p| busiest(p) <= limit * (1.0 + 1e-9))
        .expect("a parallelism carries it");
    let aligned = number_after(first, "-> aligned ") as u64;
    assert_eq!(aligned, expected, "{first}");
    // The Flink autoscaler's target, ceil(f · 8), is in the line too; BALANCED moves it on
    // without the key.
    let off = simulate(&["--verbose"]);
    let first_off = *decisions(&off.stderr).first().expect("a decision");
    assert!(first_off.contains("[BALANCED]"), "{first_off}");
}

/// The demo fleet's `orders` job: `examples/jobs/diurnal.toml` for two simulated days under
/// the fleet's keys (ADVANCED, window 5 min, stabilization 1 min, cooldown 5 min, scale-down
/// interval 30 min), with `scaling.skew-aware` set to `on`; the run's summary.
fn orders(on: bool) -> serde_json::Value {
    let job = repo_root().join("examples/jobs/diurnal.toml");
    let skew = format!("scaling.skew-aware={on}");
    let args = [
        "simulate",
        &job.display().to_string(),
        "--duration",
        "2d",
        "--mode",
        "ADVANCED",
        "--set",
        "scaling.alignment.mode.ADVANCED.scale-up=WITHIN_RANGE:DIVISOR, ABOVE_TARGET:LOAD_REDUCING",
        "--set",
        "metrics.window=5min",
        "--set",
        "stabilization.interval=1min",
        "--set",
        "scaling-cooldown-period=5min",
        "--set",
        "scale-down.interval=30min",
        "--set",
        &skew,
        "--json",
    ]
    .map(str::to_string);
    let out = Cli::new(args).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json()["runs"][0]["summary"].clone()
}

/// Its keyed `count-per-user` vertex has Zipf keys (exponent 0.4) over 256 key groups: the
/// skew-aware targets rescale it less often, and the lag stays within the catch-up target
/// (`catch-up.duration`, 5 min by default: a backlog is to be caught up within it).
#[test]
fn the_orders_job_rescales_less_with_its_lag_within_the_catch_up_target() {
    let (off, on) = (orders(false), orders(true));
    let rescales = |s: &serde_json::Value| s["rescales"].as_u64().expect("rescales");
    let p99 = |s: &serde_json::Value| s["p99_lag_s"].as_f64().expect("p99 lag");
    assert!(
        rescales(&on) < rescales(&off),
        "skew-aware: {on}\noff: {off}"
    );
    assert!(p99(&on) <= 300.0, "{on}");
    assert!(p99(&on) <= p99(&off), "skew-aware: {on}\noff: {off}");
}
