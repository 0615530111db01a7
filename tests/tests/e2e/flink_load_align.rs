//! Load-aware alignment (`load-align`) against a real Apache Flink 2.3 session cluster, on a job
//! whose keys are skewed on purpose.
//!
//! `#[ignore]`d and gated on `FLOWSCALE_FLINK_E2E=1`, like the other real-Flink tests (it takes
//! about two minutes; clusters of one test process take turns).
//!
//! The load job runs at parallelism 2 with `--hot-key-groups` and `--hot-share`: a known share
//! of the records goes to two key groups in the first half of the key-group range, the rest to
//! every key group in turn, so each key group's share of the load is known exactly. The test
//!
//! 1. reads the keyed vertex through `FlinkCollector` (the per-subtask request, one per vertex)
//!    and checks that each subtask's records-in share is what the keys make it, and that the
//!    hot subtask is the busier one;
//! 2. runs `flowscale run --json` with the `load-align` plugin on that vertex, until Flink runs
//!    the rescale it asked for, and checks that the decision is what `load-align` predicts from
//!    those loads (computed here from the job's key shares, not by the plugin's code), that
//!    BALANCED would have answered differently, and that the explanation in the run log names
//!    the predicted busiest share;
//! 3. reads the vertex again at the new parallelism and checks each subtask's share against
//!    Flink's key-group ranges at that parallelism.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use flowscale::engine::flink::{FlinkClient, FlinkCollector, FlinkOptions};
use flowscale::engine::{Collector, JobStatus, SubtaskMetrics};
use flowscale_tests::flink::{self, Cluster, run_script, wait_for};

use super::flink::{run_flowscale_with, settled_parallelism, vertex};

/// Records per second the source emits.
const RATE: &str = "1000";
/// Wall time `count` spends per record: the hot subtask (70 % of 1000 records/s) is about 70 %
/// busy, the other about 30 %.
const KEYED_COST_MS: &str = "1";
/// Key groups of every vertex.
const KEY_GROUPS: u32 = 128;
/// The hot key groups: both in subtask 0's range `[0, 64)` at parallelism 2, and far enough
/// apart to land in different subtasks at any parallelism from 4 up.
const HOT_GROUPS: [u32; 2] = [10, 40];
/// Share of the records on the hot key groups; the rest is spread over all key groups, so
/// subtask 0 of 2 takes `0.4 + 0.6 / 2 = 0.7` of the load.
const HOT_SHARE: f64 = 0.4;
/// The parallelism the job starts with.
pub(super) const START: u32 = 2;
/// `vertex.max-parallelism`: the alignment cap, within the cluster's 16 slots.
const VERTEX_MAX: u32 = 12;
/// How far a measured records-in share may be from the exact one (absolute).
const SHARE_TOLERANCE: f64 = 0.03;

/// Submits the load job with skewed keys at parallelism [`START`] and waits until Flink runs it:
/// the job's id and the id of its keyed vertex `count`.
pub(super) fn submit_skewed_job(cluster: &Cluster) -> (String, String) {
    let hot = HOT_GROUPS.map(|g| g.to_string()).join(",");
    let job_id = run_script(
        "job.sh",
        &[
            "submit",
            &cluster.url,
            "--rate",
            RATE,
            "--cost-ms",
            "0",
            "--keyed-cost-ms",
            KEYED_COST_MS,
            "--parallelism",
            &START.to_string(),
            "--max-parallelism",
            &KEY_GROUPS.to_string(),
            "--hot-key-groups",
            &hot,
            "--hot-share",
            &HOT_SHARE.to_string(),
        ],
        &[],
    );
    assert_eq!(job_id.len(), 32, "job id {job_id:?}");
    let details = wait_for("the job to run", Duration::from_secs(60), || {
        cluster
            .get(&format!("/jobs/{job_id}"))
            .filter(|d| settled_parallelism(d) == Some(START))
    });
    let count = vertex(&details, "count").expect("a count vertex")["id"]
        .as_str()
        .expect("vertex id")
        .to_string();
    (job_id, count)
}

/// Each key group's share of the records, as the job's keys make it.
pub(super) fn key_group_shares() -> Vec<f64> {
    let mut shares = vec![(1.0 - HOT_SHARE) / f64::from(KEY_GROUPS); KEY_GROUPS as usize];
    for g in HOT_GROUPS {
        shares[g as usize] += HOT_SHARE / HOT_GROUPS.len() as f64;
    }
    shares
}

/// The first key group of subtask `i` of `p` in Flink's range assignment: `ceil(i * K / p)`.
fn range_start(i: u32, p: u32) -> usize {
    (u64::from(i) * u64::from(KEY_GROUPS)).div_ceil(u64::from(p)) as usize
}

/// Sums `per_group` over each subtask's key-group range at parallelism `p`.
pub(super) fn per_subtask(per_group: &[f64], p: u32) -> Vec<f64> {
    (0..p)
        .map(|i| {
            per_group[range_start(i, p)..range_start(i + 1, p)]
                .iter()
                .sum()
        })
        .collect()
}

/// `load-align`'s estimate of the busiest subtask's share at `p` from the shares `loads` at the
/// current parallelism: each subtask's load spread evenly over its key groups.
fn estimated_busiest_share(loads: &[f64], p: u32) -> f64 {
    let c = u32::try_from(loads.len()).expect("a few subtasks");
    let mut per_group = vec![0.0; KEY_GROUPS as usize];
    for (i, load) in (0..c).zip(loads) {
        let (a, b) = (range_start(i, c), range_start(i + 1, c));
        per_group[a..b].fill(load / (b - a) as f64);
    }
    let total: f64 = loads.iter().sum();
    per_subtask(&per_group, p).into_iter().fold(0.0, f64::max) / total
}

/// Whether `p` is certainly never heavier than BALANCED's `b`, knowing only the subtask shares
/// `loads` at the current parallelism: each range of `p` lies inside one range of `b`, or the
/// observed subtasks it touches carry at most what `b`'s busiest subtask certainly carries (an
/// observed subtask whose groups spread over `m` ranges of `b` puts `1/m` of its load on one).
fn never_heavier(loads: &[f64], p: u32, b: u32) -> bool {
    let c = u32::try_from(loads.len()).expect("a few subtasks");
    let total: f64 = loads.iter().sum();
    let owner = |g: usize, q: u32| (g as u64 * u64::from(q) / u64::from(KEY_GROUPS)) as usize;
    let spread = |i: u32, of: u32, at: u32| -> Vec<usize> {
        let mut owners: Vec<usize> = (range_start(i, of)..range_start(i + 1, of))
            .map(|g| owner(g, at))
            .collect();
        owners.dedup();
        owners
    };
    let lower = (0..c)
        .map(|o| loads[o as usize] / total / spread(o, c, b).len().max(1) as f64)
        .fold(0.0, f64::max);
    (0..p).all(|i| {
        let upper: f64 = spread(i, p, c).iter().map(|&o| loads[o] / total).sum();
        spread(i, p, b).len() <= 1 || upper <= lower + 1e-9
    })
}

/// What `load-align` (default parameters) answers from the subtask shares `loads` at the
/// current parallelism: BALANCED's `b`, unless a `p` from `t` up to
/// `min(cap, max(ceil(1.5 t), 2b))` that is never heavier than `b` and (above `b`) takes at
/// least 3 points of the load per added subtask off the estimated busiest one has an estimated
/// busiest share within `1/t` (the first such), else the first within 2 % of the lowest such.
fn load_align_answer(loads: &[f64], t: u32, cap: u32) -> u32 {
    let busiest = |p: u32| estimated_busiest_share(loads, p);
    let b = balanced(t, cap);
    let last = cap
        .min(((f64::from(t) * 1.5).ceil() as u32).max(2 * b))
        .max(t);
    let candidates: Vec<u32> = (t..=last)
        .filter(|&p| p <= b || busiest(b) - busiest(p) >= 0.03 * f64::from(p - b) - 1e-9)
        .filter(|&p| never_heavier(loads, p, b))
        .collect();
    if let Some(&p) = candidates
        .iter()
        .find(|&&p| busiest(p) <= 1.0 / f64::from(t) + 1e-9)
    {
        return p;
    }
    let lowest = candidates
        .iter()
        .map(|&p| busiest(p))
        .fold(f64::INFINITY, f64::min);
    candidates
        .into_iter()
        .find(|&p| busiest(p) <= lowest * 1.02 + 1e-9)
        .unwrap_or(b)
}

/// BALANCED scaling up to `t`: the first `p` from `t` to the cap that divides the key groups or
/// gives fewer key groups per subtask than `t` does.
fn balanced(t: u32, cap: u32) -> u32 {
    (t..=cap)
        .find(|p| KEY_GROUPS.is_multiple_of(*p) || KEY_GROUPS / p < KEY_GROUPS / t)
        .unwrap_or(t.min(cap))
}

/// The per-subtask metrics of `count` once every subtask reports both figures with some
/// records in (the per-second rates start from zero after a (re)start).
pub(super) fn subtask_loads(
    collector: &mut FlinkCollector,
    count: &str,
    p: usize,
) -> Vec<SubtaskMetrics> {
    wait_for("per-subtask load of count", Duration::from_secs(40), || {
        let observation = collector.observe(0).ok()?;
        if observation.status != JobStatus::Running {
            return None;
        }
        let subtasks = observation.metrics.get(count)?.subtasks.clone();
        let complete = subtasks.len() == p
            && subtasks.iter().all(|s| {
                s.busy_time_ms_per_second.is_some()
                    && s.num_records_in_per_second.is_some_and(|r| r > 5.0)
            });
        complete.then_some(subtasks)
    })
}

/// Each subtask's share of the records in.
fn records_in_shares(subtasks: &[SubtaskMetrics]) -> Vec<f64> {
    let rates: Vec<f64> = subtasks
        .iter()
        .map(|s| s.num_records_in_per_second.unwrap_or(0.0))
        .collect();
    let total: f64 = rates.iter().sum();
    rates.iter().map(|r| r / total).collect()
}

fn assert_shares_near(measured: &[f64], expected: &[f64], what: &str) {
    assert_eq!(measured.len(), expected.len(), "{what}");
    for (i, (m, e)) in measured.iter().zip(expected).enumerate() {
        assert!(
            (m - e).abs() <= SHARE_TOLERANCE,
            "{what}: subtask {i} takes {m:.3} of the records, the keys make it {e:.3} \
             (measured {measured:.3?}, expected {expected:.3?})"
        );
    }
}

/// The run log's `load-align` explanation for `count`: (from, to, share at `to` in %, share at
/// the target in %, target).
fn explanation(stderr: &str) -> Option<(u32, u32, f64, f64, u32)> {
    let line = stderr
        .lines()
        .find(|l| l.contains("load-align: vertex `count`:") && l.contains("predicted busiest"))?;
    let rest = line.split("load-align: vertex `count`: ").nth(1)?;
    let (from, rest) = rest.split_once(" -> ")?;
    let (to, rest) = rest.split_once(": predicted busiest subtask ")?;
    let (at_p, rest) = rest.split_once("% of the load at ")?;
    let (_, rest) = rest.split_once(" and ")?;
    let (at_t, rest) = rest.split_once("% at the target ")?;
    let t = rest.split_whitespace().next()?;
    Some((
        from.trim().parse().ok()?,
        to.trim().parse().ok()?,
        at_p.trim().parse().ok()?,
        at_t.trim().parse().ok()?,
        t.trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .ok()?,
    ))
}

fn fleet_file(dir: &Path, url: &str, plugins: &Path, job_id: &str) -> PathBuf {
    let text = format!(
        r#"[host]
plugins = "{plugins}"
interval = "5s"

# Short windows so that the first decision comes about 45 s after the run starts; the AVG
# busy-time aggregator reads busy time and input rate from counter differences, right at once.
[defaults]
"metrics.window" = "30s"
"metrics.busy-time.aggregator" = "AVG"
# count takes 1000 records/s at about 50 % busy on average over its two subtasks (a true
# processing rate of about 2000/s). With a 30 % utilization target the capacity to provide is
# 1000 x (1 / 0.3 + restart 2 s / catch-up 30 s) = 3400/s, a factor of 1.7 and a target of 4,
# where load-align and BALANCED answer differently for a 70/30 split (3: 8 vs 4, 4: 8 vs 4;
# at 5 both answer 6: 12 would not pay for its added subtasks). utilization.max 0.35 puts that load outside the band, so a decision is made.
"utilization.target" = 0.3
"utilization.max" = 0.35
"stabilization.interval" = "10s"
"scaling-cooldown-period" = "0s"
"catch-up.duration" = "30s"
"restart.time" = "2s"
"vertex.max-parallelism" = {VERTEX_MAX}

[[jobs]]
name = "skewed"
engine = "flink"
rest = "{url}"
job-id = "{job_id}"
[jobs.config]
"scaling.alignment.mode" = "load"
"scaling.alignment.mode.load.class" = "load-align"
"#,
        plugins = plugins.display(),
    );
    let path = dir.join("fleet.toml");
    std::fs::write(&path, text).expect("write the fleet file");
    path
}

#[test]
#[ignore = "needs FLOWSCALE_FLINK_E2E=1 and a local Flink (see flink/README.md)"]
fn load_align_rescales_a_skewed_real_flink_job_from_its_per_subtask_load() {
    flink::require_enabled();
    let t0 = Instant::now();
    run_script("setup.sh", &[], &[]);
    run_script("job.sh", &["build"], &[]);
    let profile = flowscale_tests::build(&["load-align"]);
    let plugin = flowscale_tests::plugin_file(&profile, "load-align");
    let plugins = flowscale_tests::plugins_dir(&[(&plugin, "libload_align.so")]);

    let cluster = Cluster::start(16);
    let started = Instant::now();
    let (job_id, count) = submit_skewed_job(&cluster);

    // 1. The collector's per-subtask load at parallelism 2 is what the keys make it.
    let shares = key_group_shares();
    let expected_at_start = per_subtask(&shares, START);
    assert!(
        (expected_at_start[0] - 0.7).abs() < 1e-9,
        "{expected_at_start:?}"
    );
    let client = FlinkClient::new(FlinkOptions::new(cluster.url.clone()));
    let mut collector = FlinkCollector::new(client, job_id.clone());
    let at_start = subtask_loads(&mut collector, &count, START as usize);
    let measured_at_start = records_in_shares(&at_start);
    assert_shares_near(&measured_at_start, &expected_at_start, "at parallelism 2");
    let busy: Vec<f64> = at_start
        .iter()
        .map(|s| s.busy_time_ms_per_second.unwrap_or(f64::NAN))
        .collect();
    assert!(
        busy[0] > busy[1] * 1.3,
        "the hot subtask 0 is not the busier one: busy ms/s {busy:?}"
    );
    assert!(
        busy.iter().all(|b| (0.0..=1000.0).contains(b)),
        "busy ms/s out of range: {busy:?}"
    );

    // 2. flowscale with load-align: run until Flink runs the parallelism it asked for.
    let dir = tempfile::tempdir().expect("temp dir");
    let fleet = fleet_file(dir.path(), &cluster.url, plugins.path(), &job_id);
    let mut asked: Option<u32> = None;
    let out = run_flowscale_with(
        &fleet,
        &[("FLOWSCALE_LOG", "flowscale::plugin=info")],
        |lines| {
            if asked.is_none() {
                asked = lines
                    .iter()
                    .filter(|(_, l)| l["type"] == "cycle" && l["data"]["job"] == "skewed")
                    .find_map(|(_, l)| l["data"]["operation"][&count].as_u64())
                    .and_then(|p| u32::try_from(p).ok());
            }
            let Some(asked) = asked else { return false };
            cluster
                .get(&format!("/jobs/{job_id}"))
                .as_ref()
                .and_then(settled_parallelism)
                == Some(asked)
        },
    );
    assert_eq!(
        out.code,
        Some(0),
        "flowscale run failed; stderr:\n{}",
        out.stderr
    );
    let (_, cycle, aligned) = out.operations("skewed", &count).next().unwrap_or_else(|| {
        let last = out
            .cycles("skewed")
            .last()
            .map(|(_, c)| c["vertices"].clone());
        panic!(
            "count was never rescaled; the last cycle's decisions: {last:?}; stderr:\n{}",
            out.stderr
        )
    });
    let aligned = aligned.unwrap_or_else(|| panic!("an operation without count: {cycle}"));
    let decision = cycle["vertices"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["vertex"] == count.as_str()))
        .unwrap_or_else(|| panic!("no decision for count in {cycle}"));
    assert_eq!(decision["mode"], "load-align", "{decision}");
    assert_eq!(decision["current"], START, "{decision}");
    assert_eq!(decision["aligned"], aligned, "{decision}");
    let target = decision["target"]
        .as_u64()
        .and_then(|t| u32::try_from(t).ok())
        .unwrap_or_else(|| panic!("no target in {decision}"));
    assert!(target > START, "count was not scaled up: {decision}");
    // What load-align answers for the job's 70/30 split, and for splits a measurement error
    // away: the decision must be one of them (they agree for the targets this job reaches).
    let answers: Vec<u32> = [-SHARE_TOLERANCE, 0.0, SHARE_TOLERANCE]
        .iter()
        .map(|d| {
            let hot = expected_at_start[0] + d;
            load_align_answer(&[hot, 1.0 - hot], target, VERTEX_MAX)
        })
        .collect();
    assert!(
        answers.contains(&aligned),
        "load-align rescaled count to {aligned} for target {target}; from the per-subtask \
         load it answers {answers:?}; {decision}"
    );
    let balanced_answer = balanced(target, VERTEX_MAX);
    assert_ne!(
        aligned, balanced_answer,
        "the skew did not matter: BALANCED answers {balanced_answer} as well for target {target}"
    );
    let (from, to, at_p, at_t, t) = explanation(&out.stderr).unwrap_or_else(|| {
        panic!(
            "no load-align explanation naming the predicted shares in the run log:\n{}",
            out.stderr
        )
    });
    assert_eq!((from, to, t), (START, aligned, target), "explanation");
    let share_at_p_expected = estimated_busiest_share(&expected_at_start, aligned);
    let share_at_t_expected = estimated_busiest_share(&expected_at_start, target);
    assert!(
        (at_p / 100.0 - share_at_p_expected).abs() <= SHARE_TOLERANCE,
        "explained busiest share at {aligned}: {at_p}%, expected about {:.1}%",
        share_at_p_expected * 100.0
    );
    assert!(
        (at_t / 100.0 - share_at_t_expected).abs() <= SHARE_TOLERANCE,
        "explained busiest share at the target {target}: {at_t}%, expected about {:.1}%",
        share_at_t_expected * 100.0
    );
    assert!(
        share_at_t_expected > 1.0 / f64::from(target),
        "at the target the hot subtask would carry more than an even share"
    );

    // 3. Flink runs count at that parallelism, and the collector's per-subtask load there
    // follows Flink's key-group ranges over the job's key shares.
    let at_new = subtask_loads(&mut collector, &count, aligned as usize);
    let measured_at_new = records_in_shares(&at_new);
    assert_shares_near(
        &measured_at_new,
        &per_subtask(&shares, aligned),
        &format!("at parallelism {aligned}"),
    );
    let elapsed = started.elapsed();
    drop(cluster);
    eprintln!(
        "flink load-align e2e: {} -> target {target} -> aligned {aligned} (BALANCED: \
         {balanced_answer}); shares at 2 {measured_at_start:.3?}, busy ms/s {busy:?}; \
         shares at {aligned} {measured_at_new:.3?}; cluster to checked {elapsed:.1?}, total {:.1?}",
        START,
        t0.elapsed()
    );
}
