use std::collections::BTreeMap;

use flowscale_sdk::{EXECUTOR_KEY, ScalingSummary};

use super::*;

// Instants (ms since the epoch), computed independently with Python's zoneinfo.
/// Saturday 2026-12-05 10:15 UTC.
const SAT_1015_UTC: i64 = 1_796_465_700_000;
/// Monday 2026-12-07 05:59 UTC.
const MON_0559_UTC: i64 = 1_796_623_140_000;
/// Monday 2026-12-07 06:00 UTC.
const MON_0600_UTC: i64 = 1_796_623_200_000;
/// Friday 2026-12-04 23:59 UTC.
const FRI_2359_UTC: i64 = 1_796_428_740_000;
/// Wednesday 2026-12-02 12:30 in Berlin (CET, 11:30 UTC).
const WED_1230_CET: i64 = 1_796_211_000_000;
/// Wednesday 2026-07-01 12:30 in Berlin (CEST, 10:30 UTC).
const WED_1230_CEST: i64 = 1_782_901_800_000;
/// Wednesday 2026-07-01 13:30 in Berlin (CEST, 11:30 UTC).
const WED_1330_CEST: i64 = 1_782_905_400_000;

fn params(pairs: &[(&str, &str)]) -> ModeParams {
    ModeParams::under(
        EXECUTOR_KEY,
        "freeze",
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn proposed() -> Vec<ScalingSummary> {
    vec![ScalingSummary {
        vertex_id: "v".into(),
        current_parallelism: 2,
        new_parallelism: 4,
        metrics: Vec::new(),
    }]
}

fn apply(pairs: &[(&str, &str)], now_ms: i64) -> ExecutorVerdict {
    let ctx = ExecutorContext::new("job", proposed(), now_ms).with_params(params(pairs));
    ChangeFreeze.apply(&ctx).expect("valid parameters")
}

fn veto(verdict: ExecutorVerdict) -> String {
    match verdict {
        ExecutorVerdict::Veto(reason) => reason,
        ExecutorVerdict::Apply(s) => panic!("applied {s:?}"),
    }
}

const WEEKEND: &[(&str, &str)] = &[("windows", "Sat 00:00-Mon 06:00,Wed 12:00-Wed 13:00")];

#[test]
fn a_weekend_window_wraps_over_the_week_end() {
    let reason = veto(apply(WEEKEND, SAT_1015_UTC));
    assert!(reason.contains("window Sat 00:00-Mon 06:00"), "{reason}");
    assert!(reason.contains("UTC; it is Sat 10:15"), "{reason}");
    assert!(reason.starts_with("change-freeze"), "{reason}");
    veto(apply(WEEKEND, MON_0559_UTC));
    assert_eq!(
        apply(WEEKEND, MON_0600_UTC),
        ExecutorVerdict::Apply(proposed())
    );
    assert_eq!(
        apply(WEEKEND, FRI_2359_UTC),
        ExecutorVerdict::Apply(proposed())
    );
}

#[test]
fn windows_are_in_the_wall_time_of_their_zone() {
    let berlin = &[
        ("windows", "Wed 12:00-Wed 13:00"),
        ("time-zone", "Europe/Berlin"),
    ];
    let reason = veto(apply(berlin, WED_1230_CET));
    assert!(
        reason.contains("Wed 12:00-Wed 13:00 (Europe/Berlin; it is Wed 12:30)"),
        "{reason}"
    );
    // Summer time: 12:30 in Berlin is 10:30 UTC, still inside.
    veto(apply(berlin, WED_1230_CEST));
    assert_eq!(
        apply(berlin, WED_1330_CEST),
        ExecutorVerdict::Apply(proposed())
    );
    // The same instants in UTC (11:30 and 10:30) are outside the window.
    let utc = &[("windows", "Wed 12:00-Wed 13:00")];
    assert_eq!(apply(utc, WED_1230_CET), ExecutorVerdict::Apply(proposed()));
    assert_eq!(
        apply(utc, WED_1230_CEST),
        ExecutorVerdict::Apply(proposed())
    );
}

#[test]
fn a_flag_file_freezes_while_it_exists() {
    let dir = tempfile::tempdir().expect("temp dir");
    let flag = dir.path().join("freeze");
    let flag_text = flag.to_str().expect("utf-8 temp path");
    let pairs = &[("flag-file", flag_text)];
    assert_eq!(
        apply(pairs, FRI_2359_UTC),
        ExecutorVerdict::Apply(proposed())
    );
    std::fs::write(&flag, "").expect("create flag");
    let reason = veto(apply(pairs, FRI_2359_UTC));
    assert_eq!(
        reason,
        format!("change-freeze: flag file {flag_text} exists")
    );
    // The flag file is checked before the windows and named as the rule that matched.
    let both = &[("flag-file", flag_text), WEEKEND[0]];
    assert!(veto(apply(both, SAT_1015_UTC)).contains("flag file"));
    std::fs::remove_file(&flag).expect("remove flag");
    assert!(veto(apply(both, SAT_1015_UTC)).contains("window"));
}

#[test]
fn a_flag_file_that_cannot_be_checked_freezes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("plain");
    std::fs::write(&file, "").expect("create file");
    // A path through a plain file: neither there nor absent, the check fails (ENOTDIR).
    let below = file.join("freeze");
    let below_text = below.to_str().expect("utf-8 temp path");
    let reason = veto(apply(&[("flag-file", below_text)], FRI_2359_UTC));
    assert!(reason.contains("cannot be checked"), "{reason}");
}

#[test]
fn parameters_are_checked_with_their_full_key() {
    let err = |pairs: &[(&str, &str)]| {
        ChangeFreeze
            .validate(&params(pairs))
            .expect_err("invalid")
            .to_string()
    };
    let none = err(&[("class", ID), ("time-zone", "UTC")]);
    assert!(
        none.contains("`scaling.custom-executor.freeze.flag-file`"),
        "{none}"
    );
    assert!(none.contains("windows"), "{none}");
    let relative = err(&[("flag-file", "freeze")]);
    assert!(relative.contains("must be an absolute path"), "{relative}");
    let zone = err(&[
        ("windows", "Sat 00:00-Sun 00:00"),
        ("time-zone", "Europe/Berlinn"),
    ]);
    assert!(
        zone.contains("`scaling.custom-executor.freeze.time-zone`"),
        "{zone}"
    );
    assert!(
        zone.contains("Europe/Berlinn") && zone.contains("IANA"),
        "{zone}"
    );
    let window = err(&[("windows", "Sat 00:00-Mon 25:00")]);
    assert!(
        window.contains("`scaling.custom-executor.freeze.windows`"),
        "{window}"
    );
    assert!(window.contains("00:00 to 23:59"), "{window}");
    let typo = err(&[("flag-file", "/f"), ("window", "Sat 00:00-Sun 00:00")]);
    assert!(
        typo.contains("scaling.custom-executor.freeze.window`"),
        "{typo}"
    );
    assert!(
        ChangeFreeze
            .validate(&params(&[("flag-file", "/etc/freeze")]))
            .is_ok()
    );
    assert!(
        ChangeFreeze
            .validate(&params(&[
                ("windows", "fri 18:00-mon 06:00"),
                ("time-zone", "America/New_York")
            ]))
            .is_ok()
    );
}

#[test]
fn an_instant_out_of_range_is_an_error() {
    let ctx = ExecutorContext::new("job", proposed(), i64::MAX).with_params(params(WEEKEND));
    assert!(ChangeFreeze.apply(&ctx).is_err());
}
