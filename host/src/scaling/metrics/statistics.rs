//! Statistics over the metric window, per vertex and metric: the rate between the first and the
//! last sample, and the average of the finite values.

use super::metric_map::MetricMap;
use super::names::ScalingMetric;
use super::window::{CollectedMetrics, MetricHistory};
use crate::scaling::topology::Topology;

/// One sample of a vertex.
#[derive(Clone, Copy)]
struct Row<'a> {
    at: i64,
    metrics: &'a MetricMap<f64>,
}

impl Row<'_> {
    fn get(&self, metric: ScalingMetric) -> Option<f64> {
        self.metrics.get(&metric).copied()
    }
}

/// The samples of one vertex in time order, found once and shared by every rate and average
/// of the vertex.
#[derive(Clone, Copy)]
pub(crate) struct Series<'a> {
    rows: &'a [Row<'a>],
}

/// The rows of vertex `id`, found by its id in every sample.
#[cfg(test)]
fn rows_by_id<'a>(history: &'a MetricHistory, vertex: &str) -> Vec<Row<'a>> {
    rows(history, |sample| sample.vertices.get(vertex)).collect()
}

/// The series of every vertex of `topology` over the window, kept in one buffer: one
/// allocation per cycle rather than one per vertex.
pub(crate) struct WindowSeries<'a> {
    rows: Vec<Row<'a>>,
    /// Where each vertex's rows end in `rows` (they start where the previous vertex's end).
    ends: Vec<usize>,
}

impl<'a> WindowSeries<'a> {
    /// The rows of each vertex of `topology`: an index into the samples collected on the same
    /// graph, a search by id in the others.
    pub(crate) fn of(history: &'a MetricHistory, topology: &Topology) -> WindowSeries<'a> {
        let ids = &topology.index;
        let n = topology.vertices.len();
        let mut rows = Vec::with_capacity(history.samples.len() * n);
        let mut ends = Vec::with_capacity(n);
        for (index, vertex) in topology.vertices.iter().enumerate() {
            let id = &*vertex.id;
            rows.extend(self::rows(history, |sample| {
                sample.vertices.of(ids, index, id)
            }));
            ends.push(rows.len());
        }
        WindowSeries { rows, ends }
    }

    /// The series of every vertex, in topological order.
    pub(crate) fn all(&self) -> Vec<Series<'_>> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&end| {
                let series = Series {
                    rows: &self.rows[start..end],
                };
                start = end;
                series
            })
            .collect()
    }
}

/// The average of `metric` of vertex `index` of `topology` over the window (see
/// [`series_average`]), without building the vertex's series.
pub(crate) fn vertex_average(
    history: &MetricHistory,
    topology: &Topology,
    index: usize,
    metric: ScalingMetric,
    min_observations: i64,
) -> f64 {
    let ids = &topology.index;
    let id = &*topology.vertices[index].id;
    average_of(
        rows(history, |sample| sample.vertices.of(ids, index, id))
            .filter_map(|row| row.get(metric)),
        min_observations,
    )
}

fn rows<'a>(
    history: &'a MetricHistory,
    find: impl Fn(&'a CollectedMetrics) -> Option<&'a MetricMap<f64>>,
) -> impl Iterator<Item = Row<'a>> {
    history.samples.iter().filter_map(move |(&at, sample)| {
        let metrics = find(sample)?;
        Some(Row { at, metrics })
    })
}

/// `1000 · (last − first) / max(Δt_ms, 1)` between the first and the last sample where the
/// metric is present and not NaN (infinities count); NaN with fewer than two such samples.
#[cfg(test)]
pub(crate) fn rate(history: &MetricHistory, vertex: &str, metric: ScalingMetric) -> f64 {
    series_rate(
        &Series {
            rows: &rows_by_id(history, vertex),
        },
        metric,
    )
}

pub(crate) fn series_rate(series: &Series<'_>, metric: ScalingMetric) -> f64 {
    let mut first: Option<(i64, f64)> = None;
    let mut last: Option<(i64, f64)> = None;
    for row in series.rows {
        let at = row.at;
        if let Some(v) = row.get(metric) {
            if v.is_nan() {
                continue;
            }
            if first.is_none() {
                first = Some((at, v));
            } else {
                last = Some((at, v));
            }
        }
    }
    match (first, last) {
        (Some((t0, v0)), Some((t1, v1))) => 1000.0 * (v1 - v0) / ((t1 - t0).max(1) as f64),
        _ => f64::NAN,
    }
}

/// Mean of the finite values of a metric over the window. No finite value: +∞ if an infinite
/// one was seen, else NaN; fewer than `min_observations` finite values: NaN.
#[cfg(test)]
pub(crate) fn average(
    history: &MetricHistory,
    vertex: &str,
    metric: ScalingMetric,
    min_observations: i64,
) -> f64 {
    series_average(
        &Series {
            rows: &rows_by_id(history, vertex),
        },
        metric,
        min_observations,
    )
}

pub(crate) fn series_average(
    series: &Series<'_>,
    metric: ScalingMetric,
    min_observations: i64,
) -> f64 {
    average_of(
        series.rows.iter().filter_map(|row| row.get(metric)),
        min_observations,
    )
}

pub(crate) fn average_of(values: impl Iterator<Item = f64>, min_observations: i64) -> f64 {
    let mut sum = 0.0;
    let mut n: i64 = 0;
    let mut infinite = false;
    for v in values {
        if v.is_nan() {
            continue;
        }
        if v.is_infinite() {
            infinite = true;
            continue;
        }
        sum += v;
        n += 1;
    }
    if n == 0 {
        return if infinite { f64::INFINITY } else { f64::NAN };
    }
    if n < min_observations {
        return f64::NAN;
    }
    sum / n as f64
}

/// `average(metric)` unless it is NaN or infinite, then `rate(fallback)`.
#[cfg(test)]
pub(crate) fn average_or_rate(
    history: &MetricHistory,
    vertex: &str,
    metric: ScalingMetric,
    fallback: ScalingMetric,
) -> f64 {
    series_average_or_rate(
        &Series {
            rows: &rows_by_id(history, vertex),
        },
        metric,
        fallback,
    )
}

pub(crate) fn series_average_or_rate(
    series: &Series<'_>,
    metric: ScalingMetric,
    fallback: ScalingMetric,
) -> f64 {
    let avg = series_average(series, metric, 1);
    if avg.is_finite() {
        avg
    } else {
        series_rate(series, fallback)
    }
}

/// The metric's value in the newest sample of the window, from a vertex's series (the newest
/// sample is its last entry unless the vertex is missing from it).
pub(crate) fn series_latest(
    history: &MetricHistory,
    series: &Series<'_>,
    metric: ScalingMetric,
) -> Option<f64> {
    let (newest, _) = history.samples.last_key_value()?;
    let row = series.rows.last()?;
    if row.at != *newest {
        return None;
    }
    row.get(metric)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(points: &[(i64, Option<f64>)], metric: ScalingMetric) -> MetricHistory {
        let mut h = MetricHistory::default();
        for &(at, v) in points {
            let mut m = CollectedMetrics::default();
            let vm = m.vertices.entry_or_default("v");
            if let Some(v) = v {
                vm.insert(metric, v);
            }
            h.samples.insert(at, m);
        }
        h
    }

    #[test]
    fn rate_uses_first_and_last_present_values() {
        let m = ScalingMetric::NumRecordsIn;
        let h = history(
            &[
                (0, Some(0.0)),
                (500, Some(f64::NAN)),
                (1000, Some(500.0)),
                (2000, None),
            ],
            m,
        );
        assert_eq!(rate(&h, "v", m), 500.0);
        // Fewer than two values.
        let h = history(&[(0, Some(1.0)), (1000, None)], m);
        assert!(rate(&h, "v", m).is_nan());
        // Same instant twice is impossible in a map; one ms apart still divides by 1.
        let h = history(&[(0, Some(1.0)), (1, Some(3.0))], m);
        assert_eq!(rate(&h, "v", m), 2000.0);
        // Infinities count.
        let h = history(&[(0, Some(1.0)), (10, Some(f64::INFINITY))], m);
        assert_eq!(rate(&h, "v", m), f64::INFINITY);
        assert!(rate(&h, "other", m).is_nan());
    }

    #[test]
    fn latest_tells_a_missing_metric_from_a_nan_one() {
        let m = ScalingMetric::Lag;
        let h = history(&[(0, Some(3.0)), (1000, Some(f64::NAN))], m);
        let rows = rows_by_id(&h, "v");
        let latest = series_latest(&h, &Series { rows: &rows }, m);
        assert!(latest.is_some_and(f64::is_nan), "{latest:?}");
        // Missing from the newest sample: None, not the older value.
        let h = history(&[(0, Some(3.0)), (1000, None)], m);
        let rows = rows_by_id(&h, "v");
        assert_eq!(series_latest(&h, &Series { rows: &rows }, m), None);
        // Every metric has its own place in a row.
        let mut h = history(&[(0, Some(2.0)), (1000, Some(5.0))], m);
        for (at, s) in h.samples.iter_mut() {
            let v = s.vertices.get_mut("v").unwrap();
            v.insert(ScalingMetric::MetaspaceMemoryUsed, 1.0 + *at as f64);
            v.insert(ScalingMetric::Load, f64::NAN);
        }
        let rows = rows_by_id(&h, "v");
        let s = Series { rows: &rows };
        assert_eq!(series_latest(&h, &s, m), Some(5.0));
        assert_eq!(series_rate(&s, m), 3.0);
        assert_eq!(series_rate(&s, ScalingMetric::MetaspaceMemoryUsed), 1000.0);
        assert!(series_average(&s, ScalingMetric::Load, 1).is_nan());
        assert!(series_rate(&s, ScalingMetric::NumRecordsIn).is_nan());
    }

    #[test]
    fn average_skips_nan_and_infinity() {
        let m = ScalingMetric::Load;
        let h = history(
            &[
                (0, Some(0.5)),
                (1, Some(f64::NAN)),
                (2, Some(f64::INFINITY)),
                (3, Some(0.7)),
            ],
            m,
        );
        assert!((average(&h, "v", m, 1) - 0.6).abs() < 1e-12);
        assert!(average(&h, "v", m, 3).is_nan());
        let h = history(&[(0, Some(f64::INFINITY)), (1, Some(f64::NAN))], m);
        assert_eq!(average(&h, "v", m, 1), f64::INFINITY);
        let h = history(&[(0, None)], m);
        assert!(average(&h, "v", m, 1).is_nan());
        // avgOrRate falls back to the rate when the average is not finite.
        let mut h = history(&[(0, Some(f64::INFINITY)), (1000, Some(f64::INFINITY))], m);
        for (i, (_, s)) in h.samples.iter_mut().enumerate() {
            s.vertices
                .get_mut("v")
                .unwrap()
                .insert(ScalingMetric::NumRecordsIn, 100.0 * i as f64);
        }
        assert_eq!(
            average_or_rate(&h, "v", m, ScalingMetric::NumRecordsIn),
            100.0
        );
    }
}
