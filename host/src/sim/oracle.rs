//! The clairvoyant single rescale (docs/oracle.md): a yardstick for the autoscaler. Knowing the
//! whole workload in advance, it makes at most one rescale per load change, each at the earliest
//! moment the decision pipeline could have decided, and picks by simulation the cheapest
//! parallelism that keeps the job within its lag target.
//!
//! It drives the same [`Simulation`] as the autoscaler (same job, seed and duration): every
//! candidate is a clone of the simulation at the decision, run to the next decision, so lag and
//! state carry over from one choice to the next exactly as they would in one run. The search is
//! greedy per segment (decision to next decision) and bounded: "keep", then a ladder of
//! parallelism vectors sized from the segment's peak load, then a per-vertex descent from the
//! first feasible rung.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::Simulation;
use super::summary::{SETTLED_LAG_S, Summary};
use crate::engine::JobStatus;
use crate::scaling::AutoscalerOptions;

/// Multiples of the peak-load parallelism tried in order; the first that keeps the target is
/// refined per vertex. They leave room for key skew and for catching up a backlog; the last
/// rung is every vertex at its maximum.
const LADDER: [f64; 7] = [1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0];

/// What the oracle reads of the pipeline's configuration, and how long it simulates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OracleSettings {
    /// `metrics.window`: a decision needs one full window of metrics after a change.
    pub(crate) window_ms: i64,
    /// `stabilization.interval`: after a (re)start, no metrics are collected this long.
    pub(crate) stabilization_ms: i64,
    /// `catch-up.duration`: the time a backlog may take to be caught up after a decision.
    pub(crate) catch_up_ms: i64,
    /// `vertex.max-parallelism`, the pipeline's ceiling for every vertex.
    pub(crate) vertex_max_parallelism: u32,
    /// Simulated time, the autoscaler's run's.
    pub(crate) duration_ms: i64,
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl OracleSettings {
    /// The settings the autoscaler runs with (`options`), for a run of `duration`.
    pub(crate) fn new(options: &AutoscalerOptions, duration: Duration) -> OracleSettings {
        OracleSettings {
            window_ms: millis(options.metrics_window),
            stabilization_ms: millis(options.stabilization_interval),
            catch_up_ms: millis(options.catch_up_duration),
            vertex_max_parallelism: u32::try_from(options.vertex_max_parallelism.max(1))
                .unwrap_or(u32::MAX),
            duration_ms: millis(duration),
        }
    }
}

/// One decision of the oracle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct OracleDecision {
    /// When the load changed (s): the first tick of the change's window.
    pub(crate) change_at_s: f64,
    /// When the pipeline could first have decided (s).
    pub(crate) decided_at_s: f64,
    /// The parallelism per vertex from then on.
    pub(crate) parallelism: BTreeMap<String, u32>,
    /// True if this decision is a rescale (else the job keeps its parallelism).
    pub(crate) rescale: bool,
    /// False if no candidate kept the lag target in this segment (the one with the least lag at
    /// the segment's end was taken).
    pub(crate) within_target: bool,
}

/// The oracle's run: its schedule and the summary of the simulation that followed it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Oracle {
    /// Load changes found (the start counts as one).
    pub(crate) load_changes: usize,
    /// One entry per decision taken (changes the pipeline could not see apart are merged).
    pub(crate) schedule: Vec<OracleDecision>,
    /// Segments in which no candidate kept the target.
    pub(crate) missed: usize,
    /// Ticks simulated by the search, candidates included: how much work it was.
    pub(crate) simulated_ticks: u64,
    /// The run, summarised like the autoscaler's.
    pub(crate) summary: Summary,
}

/// The highest parallelism the oracle gives each vertex: its max parallelism (key groups), the
/// pipeline's `vertex.max-parallelism`, and for a source its partitions (more subtasks would
/// read nothing).
fn ceilings(sim: &Simulation, settings: &OracleSettings) -> Vec<u32> {
    sim.spec()
        .vertices
        .iter()
        .map(|v| {
            let mut cap = v.max_parallelism.min(settings.vertex_max_parallelism);
            if v.partitions > 0 {
                cap = cap.min(v.partitions);
            }
            cap.max(1)
        })
        .collect()
}

/// Records per second each vertex takes in at `t_s` at the top of the noise band: the sources'
/// noiseless rates times `1 + noise`, carried downstream through the selectivities. Feedback
/// and broadcast fan-out are left out: this only sizes the ladder's first rung, the simulation
/// decides what keeps the target.
fn inputs_at(sim: &Simulation, t_s: f64, out: &mut [f64]) {
    let spec = sim.spec();
    out.iter_mut().for_each(|x| *x = 0.0);
    for (v, vertex) in spec.vertices.iter().enumerate() {
        if let Some(w) = &vertex.workload {
            out[v] = w.rate_at(t_s).max(0.0) * (1.0 + w.noise);
        }
        let emitted = out[v] * vertex.selectivity;
        for e in spec.edges.iter().filter(|e| e.from == v) {
            out[e.to] += emitted;
        }
    }
}

/// The parallelism that processes `inputs` at 100% busy: `ceil(input / capacity)` per vertex,
/// within 1 and the vertex's ceiling.
fn needed(sim: &Simulation, inputs: &[f64], ceilings: &[u32], out: &mut Vec<u32>) {
    out.clear();
    out.extend(
        sim.spec()
            .vertices
            .iter()
            .zip(inputs)
            .zip(ceilings)
            .map(|((v, &input), &cap)| {
                let p = (input / v.capacity.max(f64::MIN_POSITIVE)).ceil();
                (p.clamp(1.0, f64::from(cap))) as u32
            }),
    );
}

/// The load changes: the start, then each tick at which the needed parallelism differs from
/// that of the previous change, at most one per metric window (a change within a window of the
/// previous one is seen at the window's end, if it still holds).
fn load_changes(sim: &Simulation, settings: &OracleSettings, ceilings: &[u32]) -> Vec<i64> {
    let tick = sim.spec().tick_ms.max(1);
    let n = sim.spec().vertices.len();
    let mut inputs = vec![0.0; n];
    let mut need = Vec::with_capacity(n);
    let mut level = Vec::with_capacity(n);
    inputs_at(sim, 0.0, &mut inputs);
    needed(sim, &inputs, ceilings, &mut level);
    let mut changes = vec![0];
    let mut t = settings.window_ms.max(tick);
    while t < settings.duration_ms {
        inputs_at(sim, t as f64 / 1000.0, &mut inputs);
        needed(sim, &inputs, ceilings, &mut need);
        if need != level {
            changes.push(t);
            std::mem::swap(&mut need, &mut level);
            t += settings.window_ms.max(tick);
        } else {
            t += tick;
        }
    }
    changes
}

/// The peak of [`needed`] over `[from_ms, to_ms)`, vertex by vertex.
fn peak_need(sim: &Simulation, from_ms: i64, to_ms: i64, ceilings: &[u32]) -> Vec<u32> {
    let tick = sim.spec().tick_ms.max(1);
    let n = sim.spec().vertices.len();
    let mut inputs = vec![0.0; n];
    let mut need = Vec::with_capacity(n);
    let mut peak = vec![1; n];
    let mut t = from_ms;
    while t < to_ms.max(from_ms + tick) {
        inputs_at(sim, t as f64 / 1000.0, &mut inputs);
        needed(sim, &inputs, ceilings, &mut need);
        for (p, q) in peak.iter_mut().zip(&need) {
            *p = (*p).max(*q);
        }
        t += tick;
    }
    peak
}

/// One candidate run over a segment.
struct Trial {
    sim: Simulation,
    /// Subtask-seconds spent in the segment (the summary's cost).
    cost: f64,
    /// True if the lag stayed within target (see [`run_segment`]).
    within: bool,
    /// The lag at the segment's end.
    end_lag_s: f64,
    /// When the job ran again after this candidate's rescale (ms), if it rescaled.
    restarted_at_ms: Option<i64>,
}

/// Where a segment ends (the next decision at the earliest) and up to when its choice answers
/// for the lag (the next load change: after it, the next decision does).
#[derive(Debug, Clone, Copy)]
struct Segment {
    end_ms: i64,
    check_until_ms: i64,
}

/// Runs `start` to the segment's end with `target` (a rescale if it differs from the running
/// parallelism). Within target means: at every tick before `check_until_ms` from `catch_up_ms`
/// after the job runs again (the decision itself when it does not rescale), and at the last tick
/// before `check_until_ms` in any case, the lag is at most [`SETTLED_LAG_S`], the lag under
/// which the summary counts a run as settled.
fn run_segment(
    start: &Simulation,
    target: &[u32],
    segment: Segment,
    catch_up_ms: i64,
    ticks: &mut u64,
) -> Trial {
    let Segment {
        end_ms,
        check_until_ms,
    } = segment;
    let mut sim = start.clone();
    let before = sim.summary().subtask_seconds;
    let current: Vec<u32> = sim.vertices.iter().map(|v| v.parallelism).collect();
    let rescale = current != target;
    if rescale {
        let request: BTreeMap<String, u32> = sim
            .spec()
            .vertices
            .iter()
            .zip(target)
            .map(|(v, &p)| (v.id.clone(), p))
            .collect();
        // Targets are within 1..=max parallelism by construction; a refusal keeps the
        // parallelism, which the trial then measures as it is.
        let _ = sim.request_rescale(&request);
    }
    let tick = sim.spec().tick_ms.max(1);
    let mut running_from = (!rescale).then_some(sim.now_ms());
    let mut restarted_at_ms = None;
    let mut within = true;
    while sim.now_ms() < end_ms && !sim.is_finished() {
        sim.step();
        *ticks += 1;
        if running_from.is_none() && sim.status() != JobStatus::Restarting {
            running_from = Some(sim.now_ms() - tick);
            restarted_at_ms = running_from;
        }
        let at = sim.now_ms() - tick;
        if at >= check_until_ms {
            continue;
        }
        let last = sim.now_ms() >= check_until_ms;
        let checked = running_from.is_some_and(|r| at >= r + catch_up_ms);
        if (last || checked) && sim.last_lag_s() > SETTLED_LAG_S {
            within = false;
        }
    }
    Trial {
        cost: sim.summary().subtask_seconds - before,
        end_lag_s: sim.last_lag_s(),
        within,
        restarted_at_ms,
        sim,
    }
}

/// The ladder's rungs for a segment whose peak needs `base`: `base` times each factor of
/// [`LADDER`] (rounded up, within the ceilings), then every vertex at its ceiling; duplicates
/// dropped.
fn rungs(base: &[u32], ceilings: &[u32]) -> Vec<Vec<u32>> {
    let mut out: Vec<Vec<u32>> = Vec::new();
    let scaled = LADDER.iter().map(|f| {
        base.iter()
            .zip(ceilings)
            .map(|(&b, &cap)| ((f64::from(b) * f).ceil() as u32).clamp(1, cap))
            .collect::<Vec<u32>>()
    });
    for rung in scaled.chain(std::iter::once(ceilings.to_vec())) {
        if !out.contains(&rung) {
            out.push(rung);
        }
    }
    out
}

/// Whether `trial` beats `best`: within target first, then cheaper (a tie keeps `best`, tried
/// first: fewer rescales or fewer subtasks); between two misses, the lower lag at the end.
fn better(trial: &Trial, best: &Trial) -> bool {
    match (trial.within, best.within) {
        (true, false) => true,
        (false, true) => false,
        (true, true) => trial.cost < best.cost,
        (false, false) => trial.end_lag_s < best.end_lag_s,
    }
}

/// The clairvoyant single rescale for `sim` (fresh, as the autoscaler's run starts) under
/// `settings`.
pub(crate) fn clairvoyant(mut sim: Simulation, settings: &OracleSettings) -> Oracle {
    sim.record_timeline(false);
    let tick = sim.spec().tick_ms.max(1);
    let duration_ticks = u64::try_from(settings.duration_ms / tick).unwrap_or(0);
    sim.summarise_at_most(duration_ticks.saturating_add(2));
    let ceilings = ceilings(&sim, settings);
    let changes = load_changes(&sim, settings, &ceilings);
    let window = settings.window_ms.max(tick);
    let ids: Vec<String> = sim.spec().vertices.iter().map(|v| v.id.clone()).collect();
    let mut schedule = Vec::new();
    let mut missed = 0;
    let mut ticks = 0u64;
    // When the job last (re)started: the pipeline collects metrics only a stabilization
    // interval later, and decides a full window after that.
    let mut running_since = 0i64;
    let mut i = 0;
    while i < changes.len() {
        let mut decided =
            (changes[i] + window).max(running_since + settings.stabilization_ms + window);
        // Changes the pipeline sees within the same window are one decision.
        while i + 1 < changes.len() && changes[i + 1] + window <= decided {
            i += 1;
            decided = decided.max(changes[i] + window);
        }
        if decided >= settings.duration_ms {
            break;
        }
        let end = changes.get(i + 1).map_or(settings.duration_ms, |c| {
            (c + window).min(settings.duration_ms)
        });
        let next_change = changes.get(i + 1).map_or(settings.duration_ms, |&c| c);
        let segment = Segment {
            end_ms: end,
            check_until_ms: next_change.min(end).max(decided + tick),
        };
        while sim.now_ms() < decided && !sim.is_finished() {
            sim.step();
            ticks += 1;
        }
        let current: Vec<u32> = sim.vertices.iter().map(|v| v.parallelism).collect();
        let mut best = run_segment(&sim, &current, segment, settings.catch_up_ms, &mut ticks);
        let mut best_target = current.clone();
        let base = peak_need(&sim, decided, segment.check_until_ms, &ceilings);
        let ladder = rungs(&base, &ceilings);
        let mut lower = base.clone();
        for rung in &ladder {
            if *rung == current {
                lower = rung.clone();
                if best.within {
                    break;
                }
                continue;
            }
            let trial = run_segment(&sim, rung, segment, settings.catch_up_ms, &mut ticks);
            let within = trial.within;
            if better(&trial, &best) {
                best = trial;
                best_target = rung.clone();
            }
            if within {
                break;
            }
            lower = rung.clone();
        }
        // Per vertex, the rung below may do where the first feasible rung was only needed for
        // another vertex (a hot key group, a slow operator).
        if best.within && best_target != current {
            for v in 0..best_target.len() {
                if lower[v] >= best_target[v] {
                    continue;
                }
                let mut target = best_target.clone();
                target[v] = lower[v];
                if target == current {
                    continue;
                }
                let trial = run_segment(&sim, &target, segment, settings.catch_up_ms, &mut ticks);
                if trial.within && trial.cost < best.cost {
                    best = trial;
                    best_target = target;
                }
            }
        }
        let rescale = best_target != current;
        if let Some(at) = best.restarted_at_ms {
            running_since = at;
        }
        if !best.within {
            missed += 1;
        }
        schedule.push(OracleDecision {
            change_at_s: changes[i] as f64 / 1000.0,
            decided_at_s: decided as f64 / 1000.0,
            parallelism: ids
                .iter()
                .cloned()
                .zip(best_target.iter().copied())
                .collect(),
            rescale,
            within_target: best.within,
        });
        sim = best.sim;
        i += 1;
    }
    while sim.now_ms() < settings.duration_ms && !sim.is_finished() {
        sim.step();
        ticks += 1;
    }
    Oracle {
        load_changes: changes.len(),
        schedule,
        missed,
        simulated_ticks: ticks,
        summary: sim.summary(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source (one subtask, 100k records/s: never the bottleneck), an operator `work` of 1000
    /// records/s per subtask behind a REBALANCE edge (an even spread: no skew) and a sink. The
    /// load steps from 1500 to 3500 records/s at 20 min; no noise, no state (10 s downtime).
    const STEP_JOB: &str = r#"
[job]
name = "step"
seed = 1
[[vertices]]
id = "src"
kind = "source"
parallelism = 1
capacity = 100000
partitions = 8
[[vertices]]
id = "work"
kind = "operator"
parallelism = 2
max_parallelism = 16
capacity = 1000
[[vertices]]
id = "sink"
kind = "sink"
parallelism = 1
capacity = 100000
[[edges]]
from = "src"
to = "work"
ship = "REBALANCE"
[[edges]]
from = "work"
to = "sink"
ship = "REBALANCE"
[workload.src]
[[workload.src.rate]]
kind = "step"
from = 1500
to = 3500
at = "20 min"
[restart]
downtime = "10s"
"#;

    fn settings() -> OracleSettings {
        OracleSettings {
            window_ms: 300_000,
            stabilization_ms: 60_000,
            catch_up_ms: 1_800_000,
            vertex_max_parallelism: 200,
            duration_ms: 3_600_000,
        }
    }

    fn parallelism(src: u32, work: u32, sink: u32) -> BTreeMap<String, u32> {
        [("src", src), ("work", work), ("sink", sink)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    #[test]
    fn a_step_is_one_change_decided_a_window_later_with_the_parallelism_it_needs() {
        let sim = Simulation::from_toml_str(STEP_JOB).expect("the job parses");
        let oracle = clairvoyant(sim, &settings());
        // Load changes: the start and the step at 1200 s.
        assert_eq!(oracle.load_changes, 2);
        // The start is decided after stabilization + a window (60 + 300 s). The source and sink
        // need ceil(1500 / 100000) = 1, `work` ceil(1500 / 1000) = 2: what runs, so it keeps.
        // The step is decided a window after it, at 1200 + 300 = 1500 s. `work` needs
        // ceil(3500 / 1000) = 4 (3 subtasks drain 3000 < 3500/s: the lag grows for ever). By
        // 1500 s the backlog is (3500 - 2000) * 300 = 450000 records, plus 35000 over the 10 s
        // restart; 4 subtasks drain it at 500/s in 970 s, by about 2480 s, well within the
        // 30 min catch-up: 4 is within target and the cheapest that is.
        let expected = vec![
            OracleDecision {
                change_at_s: 0.0,
                decided_at_s: 360.0,
                parallelism: parallelism(1, 2, 1),
                rescale: false,
                within_target: true,
            },
            OracleDecision {
                change_at_s: 1200.0,
                decided_at_s: 1500.0,
                parallelism: parallelism(1, 4, 1),
                rescale: true,
                within_target: true,
            },
        ];
        assert_eq!(oracle.schedule, expected);
        assert_eq!(oracle.summary.rescales, 1);
        assert_eq!(oracle.missed, 0);
        // The cost: 4 subtasks for 1500 s and the 10 s restart, 6 after it, over 3600 s.
        assert_eq!(
            oracle.summary.subtask_seconds,
            4.0 * 1510.0 + 6.0 * (3600.0 - 1510.0)
        );
    }

    #[test]
    fn changes_within_a_window_of_the_previous_one_are_seen_at_its_end() {
        // A second step (+1000/s) 2 min after the first: the change at 1200 s needs 4 subtasks
        // of `work`, and the one window later, at 1500 s, ceil(4500 / 1000) = 5.
        let job = STEP_JOB.replace(
            "[restart]",
            "[[workload.src.rate]]\nkind = \"step\"\nfrom = 0\nto = 1000\nat = \"22 min\"\n[restart]",
        );
        let sim = Simulation::from_toml_str(&job).expect("the job parses");
        let s = settings();
        let changes = load_changes(&sim, &s, &ceilings(&sim, &s));
        assert_eq!(changes, vec![0, 1_200_000, 1_500_000]);
    }
}
