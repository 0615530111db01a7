//! What a run amounts to: throughput, lag, cost, rescales, convergence and skew, and a
//! side-by-side table of several runs.

use std::fmt::Write as _;

use serde::Serialize;

use super::timeline::{Timeline, TimelineRow};

/// A load change is a move of the source rate by more than this fraction from the level at the
/// previous change.
const LOAD_CHANGE: f64 = 0.2;
/// A run has converged after a load change once it stops rescaling and its lag stays under this.
const SETTLED_LAG_S: f64 = 10.0;

/// One run, summarised.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Simulated seconds.
    pub duration_s: f64,
    /// Records read by the sources.
    pub records_processed: u64,
    /// Largest number of records pending in the source system.
    pub max_pending: u64,
    /// 99th percentile of pending records over ticks.
    pub p99_pending: u64,
    /// Largest lag (pending / arrival rate), seconds.
    pub max_lag_s: f64,
    /// 99th percentile lag, seconds.
    pub p99_lag_s: f64,
    /// Sum over ticks of the parallelism of every vertex times the tick: the cost.
    pub subtask_seconds: f64,
    /// Rescales requested.
    pub rescales: u32,
    /// Time spent restarting, seconds.
    pub restarting_s: f64,
    /// Load changes: (time in s, seconds until converged, or `None` if it did not settle before
    /// the next change or the end).
    pub convergence: Vec<(f64, Option<f64>)>,
    /// Max over mean per-subtask load, averaged over busy ticks, of the most skewed vertex.
    pub skew: f64,
    /// When the job finished (bounded jobs), seconds.
    pub finished_at_s: Option<f64>,
}

fn percentile(mut values: Vec<f64>, q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

fn settled(prev: Option<&TimelineRow>, row: &TimelineRow) -> bool {
    let rescaled = prev.is_some_and(|p| {
        p.vertices
            .iter()
            .zip(&row.vertices)
            .any(|(a, b)| a.parallelism != b.parallelism)
    });
    !row.restarting && !rescaled && row.lag_s() <= SETTLED_LAG_S
}

impl Summary {
    /// Summarises a timeline.
    pub fn from_timeline(timeline: &Timeline) -> Summary {
        let tick_s = timeline.tick_ms as f64 / 1000.0;
        let rows = &timeline.rows;
        let running: Vec<&TimelineRow> = rows.iter().filter(|r| !r.finished).collect();
        let pending: Vec<f64> = running.iter().map(|r| r.pending as f64).collect();
        let lags: Vec<f64> = running.iter().map(|r| r.lag_s()).collect();

        let convergence = convergence(rows, &load_changes(rows), tick_s);
        let skew = skew(timeline.vertex_ids.len(), &running);
        Summary {
            duration_s: rows.len() as f64 * tick_s,
            records_processed: rows
                .iter()
                .map(|r| (r.read_per_s * tick_s).round() as u64)
                .sum(),
            max_pending: pending.iter().copied().fold(0.0, f64::max) as u64,
            p99_pending: percentile(pending, 0.99) as u64,
            max_lag_s: lags.iter().copied().fold(0.0, f64::max),
            p99_lag_s: percentile(lags, 0.99),
            subtask_seconds: running
                .iter()
                .map(|r| {
                    r.vertices
                        .iter()
                        .map(|v| f64::from(v.parallelism))
                        .sum::<f64>()
                        * tick_s
                })
                .sum(),
            rescales: rows
                .iter()
                .flat_map(|r| &r.events)
                .filter(|e| e.starts_with("rescale"))
                .count() as u32,
            restarting_s: rows.iter().filter(|r| r.restarting).count() as f64 * tick_s,
            convergence,
            skew,
            finished_at_s: rows
                .iter()
                .find(|r| r.finished)
                .map(|r| r.t_ms as f64 / 1000.0),
        }
    }
}

/// The rows at which the load changed: the source rate moved by more than [`LOAD_CHANGE`] from
/// its level at the previous change.
fn load_changes(rows: &[TimelineRow]) -> Vec<usize> {
    let mut changes: Vec<usize> = Vec::new();
    let mut level = rows.first().map_or(0.0, |r| r.source_rate);
    for (i, r) in rows.iter().enumerate().skip(1) {
        if (r.source_rate - level).abs() > LOAD_CHANGE * level.max(1.0) {
            changes.push(i);
            level = r.source_rate;
        }
    }
    changes
}

/// For each load change (row index in `changes`): its time in seconds, and how long the run
/// took to settle after it, or `None` if it had not settled by the next change or the end.
fn convergence(rows: &[TimelineRow], changes: &[usize], tick_s: f64) -> Vec<(f64, Option<f64>)> {
    changes
        .iter()
        .enumerate()
        .map(|(n, &c)| {
            let end = changes.get(n + 1).copied().unwrap_or(rows.len());
            let last_unsettled = (c..end)
                .rev()
                .find(|&k| !settled(k.checked_sub(1).map(|p| &rows[p]), &rows[k]));
            let converged = match last_unsettled {
                None => Some(0.0),
                Some(k) if k + 1 < end => Some((k + 1 - c) as f64 * tick_s),
                Some(_) => None,
            };
            (rows[c].t_ms as f64 / 1000.0, converged)
        })
        .collect()
}

/// The skew of the most skewed of `vertices` vertices: per vertex, the mean of its per-tick skew
/// over the running ticks in which it took records (1 when it never did).
fn skew(vertices: usize, running: &[&TimelineRow]) -> f64 {
    (0..vertices)
        .map(|v| {
            let busy: Vec<f64> = running
                .iter()
                .filter(|r| !r.restarting && r.vertices[v].records_in_per_s > 0.0)
                .map(|r| r.vertices[v].skew)
                .collect();
            if busy.is_empty() {
                1.0
            } else {
                busy.iter().sum::<f64>() / busy.len() as f64
            }
        })
        .fold(1.0, f64::max)
}

/// Formats one metric of a summary for the comparison table.
type Cell = Box<dyn Fn(&Summary) -> String>;

/// The summaries of several runs (one per mode) side by side, one metric per line.
pub fn render_comparison_table(summaries: &[(String, Summary)]) -> String {
    let metrics = comparison_metrics();
    let cells: Vec<Vec<String>> = metrics
        .iter()
        .map(|(_, f)| summaries.iter().map(|(_, s)| f(s)).collect())
        .collect();
    let label_width = metrics
        .iter()
        .map(|(n, _)| n.len())
        .max()
        .unwrap_or(0)
        .max(6);
    let widths: Vec<usize> = summaries
        .iter()
        .enumerate()
        .map(|(i, (mode, _))| {
            cells
                .iter()
                .map(|row| row[i].len())
                .max()
                .unwrap_or(0)
                .max(mode.len())
        })
        .collect();
    let mut out = String::new();
    let _ = write!(out, "{:<label_width$}", "metric");
    for ((mode, _), w) in summaries.iter().zip(&widths) {
        let _ = write!(out, "  {mode:>w$}");
    }
    out.push('\n');
    let _ = write!(out, "{}", "-".repeat(label_width));
    for w in &widths {
        let _ = write!(out, "  {}", "-".repeat(*w));
    }
    out.push('\n');
    for ((name, _), row) in metrics.iter().zip(&cells) {
        let _ = write!(out, "{name:<label_width$}");
        for (cell, w) in row.iter().zip(&widths) {
            let _ = write!(out, "  {cell:>w$}");
        }
        out.push('\n');
    }
    out
}

/// The convergence line of the comparison table. A few load changes are listed one by one;
/// many (a diurnal day) are condensed so that the table stays readable: the median time to
/// converge and how often it never did.
fn convergence_cell(s: &Summary) -> String {
    if s.convergence.is_empty() {
        return "-".to_string();
    }
    if s.convergence.len() <= 4 {
        return s
            .convergence
            .iter()
            .map(|(_, c)| c.map_or("never".to_string(), |c| format!("{c:.0}s")))
            .collect::<Vec<_>>()
            .join(" ");
    }
    let mut settled: Vec<f64> = s.convergence.iter().filter_map(|(_, c)| *c).collect();
    settled.sort_by(f64::total_cmp);
    let never = s.convergence.len() - settled.len();
    let median = settled
        .get(settled.len() / 2)
        .map_or("-".to_string(), |m| format!("{m:.0}s"));
    format!(
        "{} changes, median {median}, {never} never",
        s.convergence.len()
    )
}

/// The rows of the comparison table: a label and how to format that metric of a run.
fn comparison_metrics() -> Vec<(&'static str, Cell)> {
    vec![
        (
            "records processed",
            Box::new(|s| s.records_processed.to_string()),
        ),
        (
            "max pending records",
            Box::new(|s| s.max_pending.to_string()),
        ),
        (
            "p99 pending records",
            Box::new(|s| s.p99_pending.to_string()),
        ),
        ("max lag (s)", Box::new(|s| format!("{:.1}", s.max_lag_s))),
        ("p99 lag (s)", Box::new(|s| format!("{:.1}", s.p99_lag_s))),
        (
            "subtask-seconds (cost)",
            // `+ 0.0` turns the -0 of an empty run into 0.
            Box::new(|s| format!("{:.0}", s.subtask_seconds + 0.0)),
        ),
        ("rescales", Box::new(|s| s.rescales.to_string())),
        (
            "time restarting (s)",
            Box::new(|s| format!("{:.0}", s.restarting_s)),
        ),
        ("convergence after load changes", Box::new(convergence_cell)),
        (
            "skew (max/mean load)",
            Box::new(|s| format!("{:.3}", s.skew)),
        ),
        (
            "finished at (s)",
            Box::new(|s| {
                s.finished_at_s
                    .map_or("-".to_string(), |t| format!("{t:.0}"))
            }),
        ),
    ]
}
