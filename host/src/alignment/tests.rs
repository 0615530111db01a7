//! Alignment tests: the worked examples of the contract, every mode over many `N`, resolution,
//! ADVANCED validation, and property tests against plain scans of the Flink autoscaler's loops.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use flowscale_sdk::{AlignmentContext, AlignmentMode, ModeError, ShipStrategy};
use proptest::prelude::*;

use super::catalog::StaticCatalog;
use super::inputs::{Inputs, default_applicable};
use super::resolve::LEGACY_KEY;
use super::search::Rule;
use super::*;
use crate::config::KeyError;
use crate::events::EventReason;

use crate::config::config_map as config;

fn job(pairs: &[(&str, &str)]) -> JobAlignment {
    JobAlignment::resolve("job", &config(pairs), &NoCustomModes).expect("valid config")
}

fn mode(name: &str) -> JobAlignment {
    job(&[("scaling.alignment.mode", name)])
}

fn legacy(name: &str) -> JobAlignment {
    job(&[(LEGACY_KEY, name)])
}

/// A keyed vertex (HASH input) over `k` key groups, or a source when `s > 0`.
fn ctx(c: u32, t: u32, k: u32, s: u32, lower: u32, upper: u32) -> AlignmentContext {
    let ships = if s > 0 {
        vec![]
    } else {
        vec![ShipStrategy::Hash]
    };
    AlignmentContext::builder(c, t, k)
        .identity("job", "v1", "vertex one")
        .source_partitions(s)
        .limits(lower, upper)
        .input_ship_strategies(ships)
        .build()
}

fn keyed(c: u32, t: u32, k: u32) -> AlignmentContext {
    ctx(c, t, k, 0, 1, 200.max(c))
}

// ---------------------------------------------------------------------------------------------
// The worked examples of alignment.md.

#[test]
fn worked_example_key_groups_128() {
    let c = keyed(16, 24, 128);
    assert_eq!(mode("BALANCED").decide(&c).parallelism, 26);
    assert_eq!(mode("EVENLY_SPREAD").decide(&c).parallelism, 32);
    assert_eq!(mode("OFF").decide(&c).parallelism, 24);
}

#[test]
fn worked_example_prime_ish_partitions_keep_the_target_without_events() {
    let c = ctx(22, 25, 128, 35, 20, 30);
    for name in ["BALANCED", "EVENLY_SPREAD"] {
        let out = mode(name).decide(&c);
        assert_eq!(out.parallelism, 25, "{name}");
        assert!(out.events.is_empty(), "{name}: {:?}", out.events);
        assert!(out.applicable);
    }
}

#[test]
fn worked_example_new_modes_do_not_relax_below_the_target() {
    let c = ctx(5, 7, 8, 12, 1, 200);
    let out = mode("EVENLY_SPREAD").decide(&c);
    assert_eq!(out.parallelism, 7);
    assert!(out.events.is_empty());
}

#[test]
fn worked_example_source_never_gets_more_subtasks_than_partitions() {
    for t in [180, 50, 10] {
        let c = ctx(100, t, 180, 15, 1, 200);
        for name in ["BALANCED", "EVENLY_SPREAD"] {
            assert_eq!(mode(name).decide(&c).parallelism, 15, "{name} t={t}");
        }
    }
}

#[test]
fn worked_examples_legacy() {
    let out = legacy("EVENLY_SPREAD").decide(&ctx(5, 7, 8, 12, 1, 200));
    assert_eq!(out.parallelism, 6);
    assert_eq!(out.events.len(), 1);
    let e = &out.events[0];
    assert_eq!(e.reason, EventReason::ScalingLimited);
    assert_eq!((e.expected, e.actual), (Some(7), Some(6)));

    let out = legacy("EVENLY_SPREAD").decide(&ctx(22, 25, 128, 35, 20, 30));
    assert_eq!(out.parallelism, 22, "blocked");
    assert_eq!(out.events.len(), 1);
    let e = &out.events[0];
    assert_eq!((e.expected, e.actual), (Some(25), Some(22)));
    assert_eq!(e.details["num_key_groups_or_partitions"], 35);
    assert_eq!(e.details["upper_bound_for_alignment"], 30);
    assert_eq!(e.details["lower_limit"], 20);
    assert_eq!(e.vertex.as_deref(), Some("v1"));
    assert_eq!(e.job.as_deref(), Some("job"));
    assert!(e.message.contains(
        "Scaling limited detected for v1 (expected parallelism: 25, actual parallelism 22). \
         Scaling limited due to numKeyGroupsOrPartitions : 35\u{ff0c}upperBoundForAlignment(maxParallelism or parallelismUpperLimit): 30, parallelismLowerLimit: 20."
    ));
}

#[test]
fn legacy_applies_the_cap_caused_candidate_instead_of_holding_a_source_above_its_partitions() {
    // t = 180 > UA = 15; relaxed candidate 15 <= c would invert, but the cap caused it.
    let out = legacy("MAXIMIZE_UTILISATION").decide(&ctx(100, 180, 180, 15, 1, 200));
    assert_eq!(out.parallelism, 15);
    assert_eq!(out.events[0].actual, Some(15));
}

#[test]
fn legacy_found_value_emits_nothing() {
    let out = legacy("MAXIMIZE_UTILISATION").decide(&keyed(16, 24, 128));
    assert_eq!(out.parallelism, 26);
    assert!(out.events.is_empty());
    assert_eq!(&*out.mode, "legacy:MAXIMIZE_UTILISATION");
    let out = legacy("evenly_spread").decide(&keyed(16, 24, 128));
    assert_eq!(out.parallelism, 32);
}

// ---------------------------------------------------------------------------------------------
// Every mode over primes, semiprimes, highly composite numbers and powers of two.

const NS: &[u32] = &[7, 13, 127, 15, 35, 143, 12, 60, 360, 720, 5040, 128, 32768];

/// The Flink autoscaler's loops transcribed as plainly as possible: the reference for the
/// modes.
fn flink_first_aligned(c: u64, t: u64, n: u64, cap: u64, load_reducing: bool) -> u64 {
    let end = if t > c { cap } else { c.min(cap) };
    let mut p = t;
    while p <= end {
        if n % p == 0 || (load_reducing && n / p < n / t) {
            return p;
        }
        p += 1;
    }
    0
}

fn flink_relaxed_fallback(n: u64, t: u64, lower: u64) -> u64 {
    let mut p = t;
    let mut found = 0;
    while p > 0 {
        if n / p > n / t {
            found = if n % p != 0 { p + 1 } else { p };
            break;
        }
        p -= 1;
    }
    found.max(lower)
}

#[test]
fn every_mode_matches_the_flink_autoscaler_loops_over_many_n() {
    let mut checked = 0;
    for &n in NS {
        let k = n.max(128);
        let upper = 40000;
        for &(c, t) in &interesting_pairs(n) {
            // Keyed over N key groups, and a source with N partitions over K >= N key groups.
            for (cx, k_used) in [
                (ctx(c, t, n, 0, 1, upper), n),
                (ctx(c, t, k, n, 1, upper), k),
            ] {
                let (c64, t64, n64) = (u64::from(c), u64::from(t), u64::from(n));
                let cap = n64.min(u64::from(k_used)).min(u64::from(upper));
                let balanced = flink_first_aligned(c64, t64, n64, cap, true);
                let evenly = flink_first_aligned(c64, t64, n64, cap, false);
                let keep = t64.min(cap);
                assert_eq!(
                    u64::from(mode("BALANCED").decide(&cx).parallelism),
                    if balanced > 0 { balanced } else { keep },
                    "BALANCED n={n} c={c} t={t}"
                );
                assert_eq!(
                    u64::from(mode("EVENLY_SPREAD").decide(&cx).parallelism),
                    if evenly > 0 { evenly } else { keep },
                    "EVENLY_SPREAD n={n} c={c} t={t}"
                );
                assert_eq!(mode("OFF").decide(&cx).parallelism, t);
                for (name, found) in [
                    ("EVENLY_SPREAD", evenly),
                    ("MAXIMIZE_UTILISATION", balanced),
                ] {
                    let out = legacy(name).decide(&cx);
                    if found > 0 {
                        assert_eq!(
                            u64::from(out.parallelism),
                            found,
                            "legacy {name} n={n} c={c} t={t}"
                        );
                        assert!(out.events.is_empty());
                    } else {
                        let cand = flink_relaxed_fallback(n64, t64, 1);
                        let up = t64 > c64;
                        let inverts = (up && cand <= c64) || (!up && cand >= c64);
                        let expected = if inverts && !(t64 > cap && cand <= cap) {
                            c64
                        } else {
                            cand
                        };
                        assert_eq!(
                            u64::from(out.parallelism),
                            expected,
                            "legacy {name} n={n} c={c} t={t}"
                        );
                        assert_eq!(out.events.len(), usize::from(expected != t64));
                    }
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 500, "checked {checked} contexts");
}

/// Scale-ups and scale-downs with divisor and non-divisor targets around `n`.
fn interesting_pairs(n: u32) -> Vec<(u32, u32)> {
    let mut targets: Vec<u32> = vec![1, 2, 3, n / 3, n / 2, n.saturating_sub(1), n, n + 1, n * 2];
    targets.extend(
        super::search::divisors(u64::from(n))
            .iter()
            .map(|&d| d as u32)
            .take(12),
    );
    targets.extend([5, 7, 11, 24, 25, 26, 100, 1000]);
    targets.retain(|&t| t >= 1);
    targets.sort_unstable();
    targets.dedup();
    let mut pairs = Vec::new();
    for &t in &targets {
        for c in [1, t / 2, t.saturating_sub(1), t + 1, t * 2, n] {
            if c >= 1 && c != t {
                pairs.push((c, t));
            }
        }
    }
    pairs
}

#[test]
fn hand_checked_values_for_each_family() {
    // prime 127: only 1 and 127 divide; BALANCED takes the first load-reducing value.
    assert_eq!(
        mode("EVENLY_SPREAD")
            .decide(&keyed(10, 20, 127))
            .parallelism,
        127
    );
    assert_eq!(mode("BALANCED").decide(&keyed(10, 20, 127)).parallelism, 22); // 127/21=6, 127/22=5
    // semiprime 143 = 11·13, scale-down from 40 to 12: within [12, 40] the first divisor is 13.
    assert_eq!(
        mode("EVENLY_SPREAD")
            .decide(&keyed(40, 12, 143))
            .parallelism,
        13
    );
    // highly composite 720, t = 25: first divisor 30, first load-reducing 26 (720/26 = 27 < 28).
    assert_eq!(
        mode("EVENLY_SPREAD")
            .decide(&keyed(10, 25, 720))
            .parallelism,
        30
    );
    assert_eq!(mode("BALANCED").decide(&keyed(10, 25, 720)).parallelism, 26);
    // 32768 with a target far from any divisor.
    assert_eq!(
        mode("EVENLY_SPREAD")
            .decide(&ctx(100, 9000, 32768, 0, 1, 32768))
            .parallelism,
        16384
    );
    // scale-down within range finds nothing: keep the target.
    assert_eq!(
        mode("EVENLY_SPREAD").decide(&keyed(9, 7, 128)).parallelism,
        8
    );
    assert_eq!(
        mode("EVENLY_SPREAD").decide(&keyed(8, 7, 127)).parallelism,
        7
    );
}

// ---------------------------------------------------------------------------------------------
// Applicability, no-ops, explanations.

#[test]
fn rebalance_only_vertices_are_untouched() {
    let c = AlignmentContext::builder(16, 24, 128)
        .input_ship_strategies(vec![ShipStrategy::Rebalance, ShipStrategy::Forward])
        .build();
    for name in ["BALANCED", "EVENLY_SPREAD", "ADVANCED"] {
        let out = mode(name).decide(&c);
        assert_eq!(out.parallelism, 24);
        assert!(!out.applicable);
    }
    let out = legacy("EVENLY_SPREAD").decide(&c);
    assert_eq!(out.parallelism, 24);
    assert!(out.events.is_empty());
}

#[test]
fn target_equal_to_current_is_not_aligned() {
    let out = mode("EVENLY_SPREAD").decide(&keyed(24, 24, 128));
    assert_eq!(out.parallelism, 24);
}

#[test]
fn explanation_names_region_rule_and_cap() {
    let out = mode("BALANCED").decide(&keyed(16, 24, 128));
    let text = out.explanation.join("\n");
    assert!(text.contains("cap UA"), "{text}");
    assert!(text.contains("ABOVE_TARGET [24, 128]"), "{text}");
    assert!(text.contains("accepted 26 by LOAD_REDUCING"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// Resolution.

struct Fixed(u32);
impl AlignmentMode for Fixed {
    fn align(&self, _ctx: &AlignmentContext) -> Result<u32, ModeError> {
        Ok(self.0)
    }
}

struct Panics;
impl AlignmentMode for Panics {
    fn is_applicable(&self, _ctx: &AlignmentContext) -> bool {
        true
    }
    fn align(&self, _ctx: &AlignmentContext) -> Result<u32, ModeError> {
        panic!("boom")
    }
}

struct Fails;
impl AlignmentMode for Fails {
    fn align(&self, ctx: &AlignmentContext) -> Result<u32, ModeError> {
        Err(ModeError::new(format!(
            "no buckets ({})",
            ctx.params().get("buckets").unwrap_or("unset")
        )))
    }
    fn validate(&self, params: &flowscale_sdk::ModeParams) -> Result<(), ModeError> {
        params.get_positive("buckets")?;
        Ok(())
    }
}

fn catalog() -> StaticCatalog {
    StaticCatalog::default()
        .with("fixed-20", Arc::new(Fixed(20)))
        .with("fixed-0", Arc::new(Fixed(0)))
        .with("fixed-huge", Arc::new(Fixed(100_000)))
        .with("panics", Arc::new(Panics))
        .with("fails", Arc::new(Fails))
}

fn custom(name: &str, class: &str, extra: &[(&str, &str)]) -> Result<JobAlignment, Vec<KeyError>> {
    let mut pairs = vec![
        ("scaling.alignment.mode".to_string(), name.to_string()),
        (
            format!("scaling.alignment.mode.{name}.class"),
            class.to_string(),
        ),
    ];
    pairs.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    JobAlignment::resolve(
        "job",
        &pairs.into_iter().collect::<BTreeMap<_, _>>(),
        &catalog(),
    )
}

#[test]
fn precedence_new_key_then_deprecated_key_then_balanced() {
    let both = job(&[
        ("scaling.alignment.mode", "OFF"),
        (LEGACY_KEY, "EVENLY_SPREAD"),
    ]);
    assert_eq!(both.mode_id(), "OFF");
    assert_eq!(
        legacy("maximize_utilisation").mode_id(),
        "legacy:MAXIMIZE_UTILISATION"
    );
    assert_eq!(job(&[]).mode_id(), "BALANCED");
}

/// Answers 20 and keeps the parameters its context carried.
#[derive(Default)]
struct RecordsParams(Mutex<Vec<(String, String)>>);
impl AlignmentMode for RecordsParams {
    fn align(&self, ctx: &AlignmentContext) -> Result<u32, ModeError> {
        let seen = ctx
            .params()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()));
        self.0.lock().expect("not poisoned").extend(seen);
        Ok(20)
    }
}

#[test]
fn custom_mode_by_class_gets_prefix_stripped_parameters() {
    let recorder = Arc::new(RecordsParams::default());
    let catalog = StaticCatalog::default().with("fixed-20", Arc::clone(&recorder) as _);
    let cfg = config(&[
        ("scaling.alignment.mode", "mine"),
        ("scaling.alignment.mode.mine.class", "fixed-20"),
        ("scaling.alignment.mode.mine.rule", "DIVISOR"),
        ("scaling.alignment.mode.other.rule", "x"),
        ("utilization.target", "0.5"),
    ]);
    let j = JobAlignment::resolve("job", &cfg, &catalog).expect("resolves");
    // The caller describes the vertex; alignment adds the parameters on the way to the mode.
    let out = j.align(AlignmentRequest {
        input_ship_strategies: [ShipStrategy::Hash].into(),
        upper_limit: 200,
        ..AlignmentRequest::new(10, 16, 128)
    });
    let seen = recorder.0.lock().expect("not poisoned").clone();
    let got: Vec<(&str, &str)> = seen.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(got, vec![("class", "fixed-20"), ("rule", "DIVISOR")]);
    assert_eq!(out.parallelism, 20);
    assert_eq!(&*out.mode, "fixed-20");
}

#[test]
fn unknown_names_are_clear_errors() {
    let err = JobAlignment::resolve(
        "job",
        &config(&[("scaling.alignment.mode", "balanced")]),
        &catalog(),
    )
    .unwrap_err();
    assert_eq!(err[0].key, "scaling.alignment.mode");
    assert!(
        err[0]
            .message
            .contains("did you mean the built-in `BALANCED`"),
        "{}",
        err[0]
    );
    assert!(
        err[0]
            .message
            .contains("scaling.alignment.mode.balanced.class"),
        "{}",
        err[0]
    );

    let err = custom("mine", "fixed-2O", &[]).unwrap_err();
    assert_eq!(err[0].key, "scaling.alignment.mode.mine.class");
    assert!(
        err[0].message.contains("did you mean `fixed-20`"),
        "{}",
        err[0]
    );
    assert!(
        err[0]
            .message
            .contains("available implementations: fails, fixed-0"),
        "{}",
        err[0]
    );

    let err =
        JobAlignment::resolve("job", &config(&[(LEGACY_KEY, "FAST")]), &catalog()).unwrap_err();
    assert!(
        err[0]
            .message
            .contains("valid: EVENLY_SPREAD, MAXIMIZE_UTILISATION")
    );

    let err = custom(
        "mine",
        "fails",
        &[("scaling.alignment.mode.mine.buckets", "0")],
    )
    .unwrap_err();
    assert!(
        err[0]
            .message
            .contains("scaling.alignment.mode.mine.buckets"),
        "{}",
        err[0]
    );
}

#[test]
fn run_time_resolution_falls_back_to_balanced_with_an_event() {
    let cfg = config(&[
        ("scaling.alignment.mode", "gone"),
        ("scaling.alignment.mode.gone.class", "vanished"),
    ]);
    let (j, events) = JobAlignment::resolve_or_balanced("orders", &cfg, &catalog());
    assert_eq!(j.mode_id(), "BALANCED");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, EventReason::ModeFallback);
    assert!(events[0].message.contains("vanished"));
    assert_eq!(j.decide(&keyed(16, 24, 128)).parallelism, 26);
}

#[test]
fn the_guard_contains_panics_errors_and_out_of_range_answers() {
    let c = ctx(10, 16, 128, 0, 1, 100);
    for (class, reason) in [
        ("panics", "panicked: boom"),
        ("fails", "failed: no buckets (unset)"),
        ("fixed-0", "below 1"),
        (
            "fixed-huge",
            "above min(max parallelism 128, upper limit 100) = 100",
        ),
    ] {
        let out = custom("m", class, &[]).expect("resolves").decide(&c);
        assert_eq!(out.parallelism, 16, "{class}");
        assert_eq!(out.events.len(), 1, "{class}");
        assert_eq!(out.events[0].reason, EventReason::PluginFault);
        assert!(
            out.events[0].message.contains(reason),
            "{class}: {}",
            out.events[0].message
        );
        assert!(out.events[0].message.contains(class));
    }
    // A plugin may not give a source more subtasks than partitions.
    let source = ctx(4, 8, 128, 12, 1, 100);
    let out = custom("m", "fixed-20", &[])
        .expect("resolves")
        .decide(&source);
    assert_eq!(out.parallelism, 8);
    assert!(out.events[0].message.contains("12 partitions"));
}

/// A plugin-like mode whose gate comes back as an error.
struct FailingGate;
impl HostMode for FailingGate {
    fn is_applicable(&self, _ctx: &AlignmentContext) -> Result<bool, ModeError> {
        Err(ModeError::new("the gate broke"))
    }
    fn align(&self, _ctx: &AlignmentContext) -> Result<u32, ModeError> {
        Ok(20)
    }
    fn validate(&self, _params: &flowscale_sdk::ModeParams) -> Result<(), ModeError> {
        Ok(())
    }
}

struct FailingGateCatalog;
impl ModeCatalog for FailingGateCatalog {
    fn find(&self, id: &str) -> Option<CustomMode> {
        (id == "failing-gate").then(|| CustomMode {
            id: id.to_string(),
            description: String::new(),
            origin: ModeOrigin::Linked,
            mode: Arc::new(FailingGate),
        })
    }
    fn ids(&self) -> Vec<String> {
        vec!["failing-gate".to_string()]
    }
}

#[test]
fn a_failing_gate_is_reported_in_place_of_the_answer() {
    let cfg = config(&[
        ("scaling.alignment.mode", "m"),
        ("scaling.alignment.mode.m.class", "failing-gate"),
    ]);
    let j = JobAlignment::resolve("job", &cfg, &FailingGateCatalog).expect("resolves");
    let out = j.decide(&keyed(10, 16, 128));
    assert_eq!(out.parallelism, 16);
    assert!(out.applicable, "a failed gate counts as applicable");
    assert_eq!(out.events.len(), 1);
    assert_eq!(out.events[0].reason, EventReason::PluginFault);
    assert!(
        out.events[0].message.contains("failed: the gate broke"),
        "{}",
        out.events[0].message
    );
    // Nothing to align: the gate's fault is not reported.
    let out = j.decide(&keyed(16, 16, 128));
    assert_eq!(out.parallelism, 16);
    assert!(out.applicable);
    assert!(out.events.is_empty());
}

// ---------------------------------------------------------------------------------------------
// ADVANCED.

fn advanced(up: &str, down: &str, fallback: &str) -> Result<JobAlignment, Vec<KeyError>> {
    JobAlignment::resolve(
        "job",
        &config(&[
            ("scaling.alignment.mode", "ADVANCED"),
            ("scaling.alignment.mode.ADVANCED.scale-up", up),
            ("scaling.alignment.mode.ADVANCED.scale-down", down),
            ("scaling.alignment.mode.ADVANCED.fallback", fallback),
        ]),
        &NoCustomModes,
    )
}

#[test]
fn advanced_composition_cheap_in_range_divisor_first() {
    let j = advanced(
        "WITHIN_RANGE:DIVISOR, ABOVE_TARGET:LOAD_REDUCING",
        "WITHIN_RANGE:LOAD_REDUCING",
        "TARGET",
    )
    .expect("valid");
    // K=128, c=10, t=24: within range 24..11 the first divisor going down is 16.
    assert_eq!(j.decide(&keyed(10, 24, 128)).parallelism, 16);
    // c=20: nothing in 24..21 divides 128, so the upward load-reducing step gives 26.
    assert_eq!(j.decide(&keyed(20, 24, 128)).parallelism, 26);
}

#[test]
fn advanced_fallbacks() {
    // S=35, c=22, t=25, limits [20, 30]: no divisor in [25, 30].
    let c = ctx(22, 25, 128, 35, 20, 30);
    let current =
        advanced("ABOVE_TARGET:DIVISOR", "WITHIN_RANGE:DIVISOR", "CURRENT").expect("valid");
    let out = current.decide(&c);
    assert_eq!(out.parallelism, 22);
    assert_eq!(out.events[0].reason, EventReason::ScalingLimited);
    let relaxed =
        advanced("ABOVE_TARGET:DIVISOR", "WITHIN_RANGE:DIVISOR", "relaxed").expect("valid");
    let out = relaxed.decide(&c);
    assert_eq!(out.parallelism, 23, "relaxed gives 20, bounded above c");
    assert!(out.events.is_empty());
    let target = advanced("ABOVE_TARGET:DIVISOR", "WITHIN_RANGE:DIVISOR", "TARGET").expect("valid");
    assert_eq!(target.decide(&c).parallelism, 25);
}

#[test]
fn advanced_below_target_saves_resources() {
    let j = advanced(
        "ABOVE_TARGET:LOAD_REDUCING",
        "BELOW_TARGET:DIVISOR",
        "TARGET",
    )
    .expect("valid");
    // c=40, t=24 over 128 key groups: the next divisor below 24 is 16.
    assert_eq!(j.decide(&keyed(40, 24, 128)).parallelism, 16);
}

#[test]
fn advanced_validation_names_key_and_step() {
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "BELOW_TARGET:DIVISOR",
            "WITHIN_RANGE:DIVISOR",
            "scale-up",
            "BELOW_TARGET does not exist for scale-up",
        ),
        (
            "ABOVE_TARGET:DIVISOR",
            "ABOVE_TARGET:DIVISOR",
            "scale-down",
            "ABOVE_TARGET does not exist for scale-down",
        ),
        (
            "WITHIN_RANGE:LOAD_REDUCING",
            "WITHIN_RANGE:DIVISOR",
            "scale-up",
            "LOAD_REDUCING on a downward-scanned region",
        ),
        (
            "ABOVE_TARGET:DIVISOR",
            "BELOW_TARGET:LOAD_REDUCING",
            "scale-down",
            "LOAD_REDUCING on a downward-scanned region",
        ),
        (
            "ABOVE_TARGET:DIVISOR, ABOVE_TARGET:DIVISOR",
            "WITHIN_RANGE:DIVISOR",
            "scale-up",
            "step 2 `ABOVE_TARGET:DIVISOR` repeats",
        ),
        (
            "ABOVE_TARGET:LOAD_REDUCING, ABOVE_TARGET:DIVISOR",
            "WITHIN_RANGE:DIVISOR",
            "scale-up",
            "stricter rule after a looser one",
        ),
        (
            "SIDEWAYS:DIVISOR",
            "WITHIN_RANGE:DIVISOR",
            "scale-up",
            "unknown region `SIDEWAYS`",
        ),
        (
            "ABOVE_TARGET:PRIME",
            "WITHIN_RANGE:DIVISOR",
            "scale-up",
            "unknown rule `PRIME`",
        ),
        (
            "ABOVE_TARGET",
            "WITHIN_RANGE:DIVISOR",
            "scale-up",
            "is not REGION:RULE",
        ),
        (
            " , ",
            "WITHIN_RANGE:DIVISOR",
            "scale-up",
            "the step list is empty",
        ),
    ];
    for (up, down, key, needle) in cases {
        let errors = advanced(up, down, "TARGET").unwrap_err();
        let full_key = format!("scaling.alignment.mode.ADVANCED.{key}");
        assert!(
            errors
                .iter()
                .any(|e| e.key == full_key && e.message.contains(needle)),
            "{up} / {down}: expected `{needle}` at {full_key}, got {errors:?}"
        );
    }
    let errors = advanced("ABOVE_TARGET:DIVISOR", "WITHIN_RANGE:DIVISOR", "NEVER").unwrap_err();
    assert!(
        errors[0]
            .message
            .contains("valid: TARGET, CURRENT, RELAXED")
    );
    let errors = JobAlignment::resolve(
        "job",
        &config(&[
            ("scaling.alignment.mode", "ADVANCED"),
            ("scaling.alignment.mode.ADVANCED.scaleup", "x"),
        ]),
        &NoCustomModes,
    )
    .unwrap_err();
    assert!(errors[0].message.contains("unknown ADVANCED parameter"));
    // Several problems are reported at once.
    let errors = advanced("BELOW_TARGET:DIVISOR", "ABOVE_TARGET:DIVISOR", "NEVER").unwrap_err();
    assert_eq!(errors.len(), 3, "{errors:?}");
}

// ---------------------------------------------------------------------------------------------
// Properties over random contexts.

fn any_context() -> impl Strategy<Value = AlignmentContext> {
    (
        prop_oneof![
            1u32..=64,
            1u32..=1000,
            Just(128u32),
            Just(720),
            Just(32768),
            1u32..=32768
        ],
        prop_oneof![Just(0u32), 1u32..=200, 1u32..=5000],
        1u32..=400,
        1u32..=400,
        1u32..=8,
        prop_oneof![Just(200u32), 1u32..=600, Just(u32::MAX)],
    )
        .prop_map(|(k, s, c, t_raw, lower_cfg, upper_cfg)| {
            let lower = c.min(lower_cfg);
            let upper = c.max(upper_cfg);
            // The pipeline's clamp: max(lower, raw) then min(K, upper).
            let t = t_raw.max(lower).min(k.min(upper)).max(1);
            ctx(c, t, k, s, lower, upper)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn builtins_stay_within_one_and_the_cap(cx in any_context()) {
        for name in ["BALANCED", "EVENLY_SPREAD"] {
            let p = mode(name).decide(&cx).parallelism;
            if cx.target_parallelism() != cx.current_parallelism() {
                prop_assert!(p >= 1 && p <= cx.alignment_cap(), "{name}: {p} cap {}", cx.alignment_cap());
            }
        }
    }

    #[test]
    fn builtins_never_invert_the_scaling_direction(cx in any_context()) {
        let (c, t) = (cx.current_parallelism(), cx.target_parallelism());
        // Only the cap may force a vertex back below c (a source must not run above its
        // partitions); then the answer is the cap itself.
        let capped = c > cx.alignment_cap();
        for name in ["BALANCED", "EVENLY_SPREAD", "OFF"] {
            let p = mode(name).decide(&cx).parallelism;
            if t > c && capped && name != "OFF" {
                prop_assert_eq!(p, cx.alignment_cap(), "{} {}->{} gave {}", name, c, t, p);
            } else if t > c {
                prop_assert!(p >= c, "{name} {c}->{t} gave {p}");
            }
            if t < c { prop_assert!(p <= c, "{name} {c}->{t} gave {p}"); }
        }
    }

    #[test]
    fn advanced_defaults_equal_balanced(cx in any_context()) {
        let adv = JobAlignment::resolve("job", &config(&[("scaling.alignment.mode", "ADVANCED")]), &NoCustomModes)
            .expect("defaults are valid");
        prop_assert_eq!(adv.decide(&cx).parallelism, mode("BALANCED").decide(&cx).parallelism);
    }

    #[test]
    fn advanced_divisor_rules_equal_evenly_spread(cx in any_context()) {
        let adv = advanced("ABOVE_TARGET:DIVISOR", "WITHIN_RANGE:DIVISOR", "TARGET").expect("valid");
        prop_assert_eq!(adv.decide(&cx).parallelism, mode("EVENLY_SPREAD").decide(&cx).parallelism);
    }

    #[test]
    fn modes_equal_plain_scans_of_the_flink_autoscaler_loops(cx in any_context()) {
        let inputs = super::inputs::Inputs::of(&cx);
        prop_assume!(inputs.t != inputs.c && cx.default_applicable());
        let keep = inputs.t.min(inputs.cap);
        for (name, lr) in [("BALANCED", true), ("EVENLY_SPREAD", false)] {
            let reference = flink_first_aligned(inputs.c, inputs.t, inputs.n, inputs.cap, lr);
            let expected = if reference > 0 { reference } else { keep };
            prop_assert_eq!(u64::from(mode(name).decide(&cx).parallelism), expected, "{}", name);
            let scanned = super::builtin::first_aligned_in_region_scan(&inputs, if lr { Rule::LoadReducing } else { Rule::Divisor });
            prop_assert_eq!(scanned.unwrap_or(0), reference);
        }
    }

    #[test]
    fn advanced_regions_equal_plain_scans(cx in any_context(), up_first in any::<bool>(), lr in any::<bool>()) {
        let inputs = super::inputs::Inputs::of(&cx);
        prop_assume!(inputs.t != inputs.c && cx.default_applicable());
        let (spec_up, spec_down) = if up_first {
            ("WITHIN_RANGE:DIVISOR, ABOVE_TARGET:LOAD_REDUCING", "BELOW_TARGET:DIVISOR")
        } else if lr {
            ("ABOVE_TARGET:LOAD_REDUCING", "WITHIN_RANGE:LOAD_REDUCING, BELOW_TARGET:DIVISOR")
        } else {
            ("ABOVE_TARGET:DIVISOR", "BELOW_TARGET:DIVISOR, WITHIN_RANGE:DIVISOR")
        };
        let adv = advanced(spec_up, spec_down, "TARGET").expect("valid");
        // Reference: enumerate each region's candidates plainly.
        let (n, t, c, cap) = (inputs.n, inputs.t, inputs.c, inputs.cap);
        let accepts = |p: u64, load_reducing: bool| n % p == 0 || (load_reducing && n / p < n / t);
        let steps = if inputs.up { spec_up } else { spec_down };
        let mut expected = None;
        for step in steps.split(',') {
            let (region, rule) = step.trim().split_once(':').expect("step");
            let load_reducing = rule == "LOAD_REDUCING";
            let candidates: Vec<u64> = match (region, inputs.up) {
                ("ABOVE_TARGET", _) => (t..=cap).collect(),
                ("WITHIN_RANGE", true) => (c + 1..=t.min(cap)).rev().collect(),
                ("WITHIN_RANGE", false) => (t..=c.min(cap)).collect(),
                _ => (inputs.lower.max(1)..=t.min(cap)).rev().collect(),
            };
            if let Some(p) = candidates.into_iter().find(|&p| accepts(p, load_reducing)) {
                expected = Some(p);
                break;
            }
        }
        let expected = expected.unwrap_or(t.min(cap));
        prop_assert_eq!(u64::from(adv.decide(&cx).parallelism), expected);
    }
}

// ---------------------------------------------------------------------------------------------
// A custom mode that cannot be called (a quarantined plugin mode).

/// Answers 20 when called; says it is quarantined when `down` is set, and then must not be called
/// at all, `validate` included (a plugin worker's mode refuses every call meanwhile). It accepts
/// its parameters when `accepts` is set, and counts the checks.
struct Quarantinable {
    down: std::sync::atomic::AtomicBool,
    accepts: std::sync::atomic::AtomicBool,
    checks: std::sync::atomic::AtomicUsize,
}

impl Quarantinable {
    fn new(down: bool, accepts: bool) -> Quarantinable {
        Quarantinable {
            down: down.into(),
            accepts: accepts.into(),
            checks: 0.into(),
        }
    }
}

impl HostMode for Quarantinable {
    fn is_applicable(&self, _: &AlignmentContext) -> Result<bool, ModeError> {
        Ok(true)
    }
    fn align(&self, _: &AlignmentContext) -> Result<u32, ModeError> {
        assert!(!self.down.load(std::sync::atomic::Ordering::Relaxed));
        Ok(20)
    }
    fn validate(&self, _: &flowscale_sdk::ModeParams) -> Result<(), ModeError> {
        use std::sync::atomic::Ordering::Relaxed;
        assert!(!self.down.load(Relaxed), "a quarantined mode is not called");
        self.checks.fetch_add(1, Relaxed);
        if self.accepts.load(Relaxed) {
            Ok(())
        } else {
            Err(ModeError::new("`limit` must be a number"))
        }
    }
    fn unavailable(&self) -> Option<String> {
        self.down
            .load(std::sync::atomic::Ordering::Relaxed)
            .then(|| "plugin mode `q` is quarantined".to_string())
    }
}

struct OneMode(CustomMode);

impl OneMode {
    /// The catalog of `mode` alone, linked under the id `q`.
    fn q(mode: Arc<dyn HostMode>) -> OneMode {
        OneMode(CustomMode {
            id: "q".into(),
            description: String::new(),
            origin: ModeOrigin::Linked,
            mode,
        })
    }
}

/// A job's configuration naming the mode `mine`, implemented by `q`.
fn mine_is_q() -> BTreeMap<String, String> {
    config(&[
        ("scaling.alignment.mode", "mine"),
        ("scaling.alignment.mode.mine.class", "q"),
    ])
}

impl ModeCatalog for OneMode {
    fn find(&self, id: &str) -> Option<CustomMode> {
        (id == self.0.id).then(|| self.0.clone())
    }
    fn ids(&self) -> Vec<String> {
        vec![self.0.id.clone()]
    }
}

#[test]
fn an_unavailable_custom_mode_aligns_with_balanced_and_says_so() {
    let mode = Arc::new(Quarantinable::new(false, true));
    let catalog = OneMode::q(Arc::clone(&mode) as Arc<dyn HostMode>);
    let j = JobAlignment::resolve("job", &mine_is_q(), &catalog).expect("resolves");
    let c = keyed(16, 24, 128);
    let up = j.decide(&c);
    assert_eq!((up.parallelism, &*up.mode), (20, "q"));
    assert!(up.events.is_empty());

    mode.down.store(true, std::sync::atomic::Ordering::Relaxed);
    let down = j.decide(&c);
    assert_eq!(down.parallelism, mode_balanced_26());
    assert_eq!(&*down.mode, "BALANCED");
    assert_eq!(down.events.len(), 1, "{:?}", down.events);
    assert_eq!(down.events[0].reason, EventReason::ModeFallback);
    assert_eq!(down.events[0].job.as_deref(), Some("job"));
    assert!(
        down.events[0]
            .message
            .contains("`mine` cannot be used, using BALANCED")
            && down.events[0].message.contains("quarantined"),
        "{}",
        down.events[0].message
    );
}

#[test]
fn a_quarantined_mode_resolves_uncalled_and_checks_its_parameters_once_it_is_back() {
    use std::sync::atomic::Ordering::Relaxed;
    let mode = Arc::new(Quarantinable::new(true, false));
    let catalog = OneMode::q(Arc::clone(&mode) as Arc<dyn HostMode>);
    let cfg = mine_is_q();
    // Resolved without a call: the parameters cannot be checked now.
    let j = JobAlignment::resolve("job", &cfg, &catalog).expect("resolves while quarantined");
    let c = keyed(16, 24, 128);
    let down = j.decide(&c);
    assert_eq!(&*down.mode, "BALANCED");
    assert!(
        down.events[0].message.contains("quarantined"),
        "{:?}",
        down.events
    );
    assert_eq!(mode.checks.load(Relaxed), 0);

    // Back, refusing the parameters: BALANCED, saying so, and asked again at the next decision.
    mode.down.store(false, Relaxed);
    for asked in 1..=2 {
        let refused = j.decide(&c);
        assert_eq!(&*refused.mode, "BALANCED");
        assert_eq!(refused.parallelism, mode_balanced_26());
        assert_eq!(refused.events[0].reason, EventReason::ModeFallback);
        assert!(
            refused.events[0]
                .message
                .contains("mode `mine` (q) refused its parameters: `limit` must be a number"),
            "{}",
            refused.events[0].message
        );
        assert_eq!(mode.checks.load(Relaxed), asked);
    }

    // Accepted: the mode decides, and its parameters are not checked again (in any clone).
    mode.accepts.store(true, Relaxed);
    let clone = j.clone();
    for alignment in [&j, &clone, &j] {
        let up = alignment.decide(&c);
        assert_eq!((up.parallelism, &*up.mode), (20, "q"));
        assert!(up.events.is_empty(), "{:?}", up.events);
    }
    assert_eq!(mode.checks.load(Relaxed), 3);

    // A mode that is there is checked when it is resolved, as before.
    let j = JobAlignment::resolve("job", &cfg, &catalog).expect("accepted");
    assert_eq!(mode.checks.load(Relaxed), 4);
    assert_eq!(j.decide(&c).parallelism, 20);
    assert_eq!(mode.checks.load(Relaxed), 4);
}

/// BALANCED's answer for 16 -> 24 over 128 key groups (the first worked example).
fn mode_balanced_26() -> u32 {
    mode("BALANCED").decide(&keyed(16, 24, 128)).parallelism
}

fn any_ship_strategy() -> impl Strategy<Value = ShipStrategy> {
    prop_oneof![
        Just(ShipStrategy::Hash),
        Just(ShipStrategy::Rebalance),
        Just(ShipStrategy::Forward),
        (0u32..=64).prop_map(|buckets| ShipStrategy::Custom { buckets }),
    ]
}

/// A request with any numbers (clamped to the pipeline's limits or not) and any inputs.
fn any_request() -> impl Strategy<Value = AlignmentRequest> {
    (
        (
            0u32..=400,
            0u32..=400,
            prop_oneof![1u32..=1000, Just(32768u32)],
        ),
        (prop_oneof![Just(0u32), 1u32..=500], 0u32..=8),
        prop_oneof![Just(u32::MAX), 0u32..=600],
        proptest::collection::vec(any_ship_strategy(), 0..4),
    )
        .prop_map(|((c, t, k), (s, lower), upper, ships)| {
            let mut request = AlignmentRequest::new(c, t, k);
            request.job = "job".into();
            request.vertex_id = "v1".into();
            request.vertex_name = "vertex one".into();
            request.source_partitions = s;
            request.lower_limit = lower;
            request.upper_limit = upper;
            request.input_ship_strategies = ships.into();
            request
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The built-in modes decide from the request itself: the same outcome, explanation and
    /// all, as from the context the request turns into.
    #[test]
    fn builtins_decide_from_the_request_as_from_its_context(request in any_request()) {
        for name in ["BALANCED", "EVENLY_SPREAD", "OFF"] {
            let job = mode(name);
            let ctx = request.clone().into_context(flowscale_sdk::ModeParams::default());
            prop_assert_eq!(Inputs::of_request(&request), Inputs::of(&ctx));
            prop_assert_eq!(default_applicable(&request), ctx.default_applicable());
            let from_context = job.decide(&ctx);
            let from_request = job.align(request.clone());
            prop_assert_eq!(&from_request, &from_context, "{}", name);
            prop_assert_eq!(from_request.explanation.lines(), from_context.explanation.lines());
        }
    }
}
