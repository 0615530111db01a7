//! What a run amounts to: throughput, lag, cost, rescales, convergence and skew, and a
//! side-by-side table of several runs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write as _;

use serde::Serialize;

#[cfg(test)]
use super::timeline::Timeline;
use super::timeline::TimelineRow;

/// A load change is a move of the source rate by more than this fraction from the level at the
/// previous change.
const LOAD_CHANGE: f64 = 0.2;
/// A run has converged after a load change once it stops rescaling and its lag stays under this.
pub(crate) const SETTLED_LAG_S: f64 = 10.0;

/// One run, summarised.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Summary {
    /// Simulated seconds.
    pub(crate) duration_s: f64,
    /// Records read by the sources.
    pub(crate) records_processed: u64,
    /// Largest number of records pending in the source system.
    pub(crate) max_pending: u64,
    /// 99th percentile of pending records over ticks.
    pub(crate) p99_pending: u64,
    /// Largest lag (pending / arrival rate), seconds.
    pub(crate) max_lag_s: f64,
    /// 99th percentile lag, seconds.
    pub(crate) p99_lag_s: f64,
    /// Sum over ticks of the parallelism of every vertex times the tick: the cost.
    pub(crate) subtask_seconds: f64,
    /// Rescales requested.
    pub(crate) rescales: u32,
    /// Time spent restarting, seconds.
    pub(crate) restarting_s: f64,
    /// Load changes: (time in s, seconds until converged, or `None` if it did not settle before
    /// the next change or the end).
    pub(crate) convergence: Vec<(f64, Option<f64>)>,
    /// Max over mean per-subtask load, averaged over busy ticks, of the most skewed vertex.
    pub(crate) skew: f64,
    /// When the job finished (bounded jobs), seconds.
    pub(crate) finished_at_s: Option<f64>,
}

impl Summary {
    /// Summarises a timeline.
    #[cfg(test)]
    pub(crate) fn from_timeline(timeline: &Timeline) -> Summary {
        let mut builder = SummaryBuilder::new(timeline.vertex_ids.len(), timeline.tick_ms, None);
        for row in &timeline.rows {
            builder.add(row);
        }
        builder.summary()
    }
}

/// A [`Summary`] built tick by tick, so that a run need not keep its timeline to be summarised.
/// It holds a few numbers per vertex, one entry per load change, and for the two 99th
/// percentiles the largest 1% of the values (the rest can never be the 99th percentile); the
/// result is the same as [`Summary::from_timeline`] of the whole timeline.
#[derive(Debug, Clone)]
pub(crate) struct SummaryBuilder {
    tick_s: f64,
    rows: u64,
    records_processed: u64,
    max_pending: f64,
    max_lag_s: f64,
    pending: Largest,
    lags: Largest,
    subtask_seconds: f64,
    rescales: u32,
    restarting_rows: u64,
    finished_at_ms: Option<i64>,
    /// Per vertex: the sum and the number of its busy ticks' skews.
    skews: Vec<(f64, u64)>,
    /// The source rate at the last load change (the first row's at the start).
    level: f64,
    /// The load change being watched: its row, its time, and its last row that had not settled.
    open_change: Option<OpenChange>,
    convergence: Vec<(f64, Option<f64>)>,
    /// The previous row's parallelism per vertex (a change of it is a rescale).
    previous: Option<Vec<u32>>,
}

/// A load change whose convergence is still being watched.
#[derive(Debug, Clone, Copy)]
struct OpenChange {
    row: u64,
    t_ms: i64,
    last_unsettled: Option<u64>,
}

impl OpenChange {
    /// The change's entry in [`Summary::convergence`], the next change (or the end) being at
    /// row `end`.
    fn converged(&self, end: u64, tick_s: f64) -> (f64, Option<f64>) {
        let converged = match self.last_unsettled {
            None => Some(0.0),
            Some(k) if k + 1 < end => Some((k + 1 - self.row) as f64 * tick_s),
            Some(_) => None,
        };
        (self.t_ms as f64 / 1000.0, converged)
    }
}

impl SummaryBuilder {
    /// A builder for a job of `vertices` vertices with ticks of `tick_ms`. With `max_rows`, the
    /// run promises to summarise at most that many running ticks, and the percentiles keep only
    /// the largest 1% of them (plus two); without it they keep every value.
    pub(crate) fn new(vertices: usize, tick_ms: i64, max_rows: Option<u64>) -> SummaryBuilder {
        let mut builder = SummaryBuilder {
            tick_s: tick_ms as f64 / 1000.0,
            rows: 0,
            records_processed: 0,
            max_pending: 0.0,
            max_lag_s: 0.0,
            pending: Largest::new(usize::MAX),
            lags: Largest::new(usize::MAX),
            // The sum of no terms, as `Iterator::sum` has it (the timeline's summary sums).
            subtask_seconds: std::iter::empty::<f64>().sum(),
            rescales: 0,
            restarting_rows: 0,
            finished_at_ms: None,
            skews: vec![(-0.0, 0); vertices],
            level: 0.0,
            open_change: None,
            convergence: Vec::new(),
            previous: None,
        };
        if let Some(rows) = max_rows {
            builder.expect_at_most(rows);
        }
        builder
    }

    /// Promises at most `max_rows` running ticks from now on (in all): the percentiles keep only
    /// the largest 1% of them (plus two). Exact as long as the promise holds.
    pub(crate) fn expect_at_most(&mut self, max_rows: u64) {
        let keep = usize::try_from(max_rows / 100 + 2).unwrap_or(usize::MAX);
        self.pending.shrink(keep);
        self.lags.shrink(keep);
    }

    /// Takes one tick's row into account.
    pub(crate) fn add(&mut self, row: &TimelineRow) {
        let index = self.rows;
        self.rows += 1;
        self.records_processed += (row.read_per_s * self.tick_s).round() as u64;
        self.rescales += row
            .events
            .iter()
            .filter(|e| e.starts_with("rescale"))
            .count() as u32;
        if row.restarting {
            self.restarting_rows += 1;
        }
        if row.finished && self.finished_at_ms.is_none() {
            self.finished_at_ms = Some(row.t_ms);
        }
        if !row.finished {
            let pending = row.pending as f64;
            let lag = row.lag_s();
            self.max_pending = f64::max(self.max_pending, pending);
            self.max_lag_s = f64::max(self.max_lag_s, lag);
            self.pending.push(pending);
            self.lags.push(lag);
            self.subtask_seconds += row
                .vertices
                .iter()
                .map(|v| f64::from(v.parallelism))
                .sum::<f64>()
                * self.tick_s;
            if !row.restarting {
                for (acc, v) in self.skews.iter_mut().zip(&row.vertices) {
                    if v.records_in_per_s > 0.0 {
                        acc.0 += v.skew;
                        acc.1 += 1;
                    }
                }
            }
        }
        self.watch_load(index, row);
        match &mut self.previous {
            Some(previous) => {
                previous.clear();
                previous.extend(row.vertices.iter().map(|v| v.parallelism));
            }
            None => self.previous = Some(row.vertices.iter().map(|v| v.parallelism).collect()),
        }
    }

    /// Notes a load change at row `index` (the source rate moved by more than [`LOAD_CHANGE`]
    /// from its level at the previous change), and whether the run had settled in that row.
    fn watch_load(&mut self, index: u64, row: &TimelineRow) {
        if index == 0 {
            self.level = row.source_rate;
        } else if (row.source_rate - self.level).abs() > LOAD_CHANGE * self.level.max(1.0) {
            if let Some(open) = self.open_change.take() {
                self.convergence.push(open.converged(index, self.tick_s));
            }
            self.open_change = Some(OpenChange {
                row: index,
                t_ms: row.t_ms,
                last_unsettled: None,
            });
            self.level = row.source_rate;
        }
        if let Some(open) = &mut self.open_change {
            if !settled(self.previous.as_deref(), row) {
                open.last_unsettled = Some(index);
            }
        }
    }

    /// The summary of the rows so far.
    pub(crate) fn summary(&self) -> Summary {
        let mut convergence = self.convergence.clone();
        if let Some(open) = &self.open_change {
            convergence.push(open.converged(self.rows, self.tick_s));
        }
        Summary {
            duration_s: self.rows as f64 * self.tick_s,
            records_processed: self.records_processed,
            max_pending: self.max_pending as u64,
            p99_pending: self.pending.percentile(0.99) as u64,
            max_lag_s: self.max_lag_s,
            p99_lag_s: self.lags.percentile(0.99),
            subtask_seconds: self.subtask_seconds,
            rescales: self.rescales,
            restarting_s: self.restarting_rows as f64 * self.tick_s,
            convergence,
            skew: self
                .skews
                .iter()
                .map(|&(sum, n)| if n == 0 { 1.0 } else { sum / n as f64 })
                .fold(1.0, f64::max),
            finished_at_s: self.finished_at_ms.map(|t| t as f64 / 1000.0),
        }
    }
}

/// True when the run had settled in `row`: not restarting, not rescaled since the previous row
/// (whose parallelism per vertex is `previous`), and its lag under [`SETTLED_LAG_S`].
fn settled(previous: Option<&[u32]>, row: &TimelineRow) -> bool {
    let rescaled = previous.is_some_and(|p| {
        p.iter()
            .zip(&row.vertices)
            .any(|(a, b)| *a != b.parallelism)
    });
    !row.restarting && !rescaled && row.lag_s() <= SETTLED_LAG_S
}

/// The largest values of a series, up to `keep` of them, and how many values there were: enough
/// for an exact high percentile as long as fewer than `keep` values lie above it.
#[derive(Debug, Clone)]
struct Largest {
    keep: usize,
    count: u64,
    /// A min-heap: the smallest kept value is the first to go.
    heap: BinaryHeap<Reverse<TotalF64>>,
}

/// An `f64` ordered by [`f64::total_cmp`].
#[derive(Debug, Clone, Copy)]
struct TotalF64(f64);

impl PartialEq for TotalF64 {
    fn eq(&self, other: &Self) -> bool {
        self.0.total_cmp(&other.0).is_eq()
    }
}
impl Eq for TotalF64 {}
impl PartialOrd for TotalF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for TotalF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl Largest {
    fn new(keep: usize) -> Largest {
        Largest {
            keep,
            count: 0,
            heap: BinaryHeap::new(),
        }
    }

    /// Keeps at most `keep` values from now on (the largest of those kept so far).
    fn shrink(&mut self, keep: usize) {
        self.keep = self.keep.min(keep);
        while self.heap.len() > self.keep {
            self.heap.pop();
        }
    }

    fn push(&mut self, value: f64) {
        self.count += 1;
        if self.heap.len() < self.keep {
            self.heap.push(Reverse(TotalF64(value)));
        } else if self
            .heap
            .peek()
            .is_some_and(|Reverse(min)| value.total_cmp(&min.0).is_gt())
        {
            self.heap.pop();
            self.heap.push(Reverse(TotalF64(value)));
        }
    }

    /// The `q` quantile of the values (the value of rank `ceil(q * count)` in ascending order),
    /// 0 without values. Beyond what was kept (more values than promised), the smallest kept
    /// value: an upper bound.
    fn percentile(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        // 0 for the largest value.
        let from_top = usize::try_from(self.count - rank).unwrap_or(usize::MAX);
        let mut kept: Vec<f64> = self.heap.iter().map(|Reverse(v)| v.0).collect();
        kept.sort_by(|a, b| b.total_cmp(a));
        kept.get(from_top).or(kept.last()).copied().unwrap_or(0.0)
    }
}

/// Formats one metric of a summary for the comparison table.
type Cell = Box<dyn Fn(&Summary) -> String>;

/// The summaries of several runs (one per mode) side by side, one metric per line.
pub(crate) fn render_comparison_table(summaries: &[(String, Summary)]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::rng::SplitMix64;

    /// The `q` quantile as the timeline's summary defines it: the value of rank `ceil(q * n)`
    /// of the values sorted ascending.
    fn sorted_percentile(values: &[f64], q: f64) -> f64 {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    #[test]
    fn the_largest_one_percent_give_the_exact_99th_percentile_up_to_the_promised_count() {
        let mut rng = SplitMix64::derive(7, 0);
        for promised in [1u64, 50, 99, 100, 101, 250, 1000, 7202] {
            let keep = usize::try_from(promised / 100 + 2).expect("small");
            let mut largest = Largest::new(keep);
            let mut values = Vec::new();
            for n in 1..=promised {
                // Coarse values: many ties.
                let v = (rng.next_f64() * 50.0).floor();
                values.push(v);
                largest.push(v);
                if n % 7 == 0 || n == promised {
                    assert_eq!(
                        largest.percentile(0.99),
                        sorted_percentile(&values, 0.99),
                        "{n} of {promised} values"
                    );
                }
            }
            assert!(largest.heap.len() <= keep);
        }
        assert_eq!(Largest::new(3).percentile(0.99), 0.0, "no values");
    }

    #[test]
    fn shrinking_keeps_the_largest_values_seen() {
        let mut largest = Largest::new(usize::MAX);
        for v in [5.0, 1.0, 9.0, 3.0, 7.0] {
            largest.push(v);
        }
        largest.shrink(2);
        // Of 5 values, rank ceil(0.8 * 5) = 4 is the second largest: 7.
        assert_eq!(largest.percentile(0.8), 7.0);
        assert_eq!(largest.percentile(1.0), 9.0);
    }
}
