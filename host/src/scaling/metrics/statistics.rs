//! Statistics over the metric window, per vertex and metric: the rate between the first and the
//! last sample, and the average of the finite values.

use super::metric_map::SampleMetrics;
use super::names::ScalingMetric;
use super::window::MetricHistory;
use crate::scaling::topology::Topology;

/// The samples of one vertex in time order, taken once and shared by every rate and average
/// of the vertex: the instant of every sample of the window, and the vertex's metrics in it
/// (None where the vertex is missing from the sample).
#[derive(Clone, Copy)]
pub(crate) struct Series<'a> {
    ats: &'a [i64],
    metrics: &'a [Option<&'a SampleMetrics>],
}

impl<'a> Series<'a> {
    /// The present values of `metric` with their instants, oldest first.
    #[inline]
    fn values(&self, metric: ScalingMetric) -> impl Iterator<Item = (i64, f64)> + 'a {
        self.ats
            .iter()
            .zip(self.metrics)
            .filter_map(move |(&at, metrics)| Some((at, *metrics.as_ref()?.get(&metric)?)))
    }
}

/// The instants and metrics of vertex `vertex`, found by its id in every sample.
#[cfg(test)]
fn by_id<'a>(
    history: &'a MetricHistory,
    vertex: &str,
) -> (Vec<i64>, Vec<Option<&'a SampleMetrics>>) {
    history
        .samples
        .iter()
        .map(|(&at, sample)| (at, sample.vertices.get(vertex)))
        .unzip()
}

/// The series of every vertex of `topology` over the window, kept in two buffers: two small
/// allocations per cycle rather than one per vertex, and every sample's metrics of a vertex
/// next to each other.
pub(crate) struct WindowSeries<'a> {
    /// The instants of the window's samples, oldest first.
    ats: Vec<i64>,
    /// The metrics of vertex `v` in sample `k` at `v * ats.len() + k`.
    metrics: Vec<Option<&'a SampleMetrics>>,
}

impl<'a> WindowSeries<'a> {
    /// The metrics of each vertex of `topology` in every sample: by index in the samples
    /// collected on the same graph, by id in the others.
    pub(crate) fn of(history: &'a MetricHistory, topology: &Topology) -> WindowSeries<'a> {
        let ids = &topology.index;
        let n = topology.vertices.len();
        let len = history.samples.len();
        let mut ats = Vec::with_capacity(len);
        let mut metrics = vec![None; n * len];
        for (k, (&at, sample)) in history.samples.iter().enumerate() {
            ats.push(at);
            // Vertex `i`'s metrics of sample `k` go to place `i * len + k`; indexed directly, as
            // a skipping, stepping iterator over the places cost more than the placing.
            match sample.vertices.values_on(ids) {
                Some(values) => {
                    for (i, vertex_metrics) in values.iter().enumerate().take(n) {
                        if let Some(place) = metrics.get_mut(i * len + k) {
                            *place = Some(vertex_metrics);
                        }
                    }
                }
                None => {
                    for (i, vertex) in topology.vertices.iter().enumerate() {
                        if let Some(place) = metrics.get_mut(i * len + k) {
                            *place = sample.vertices.get(&vertex.id);
                        }
                    }
                }
            }
        }
        WindowSeries { ats, metrics }
    }

    /// The series of vertex `index` of the topology.
    #[inline]
    pub(crate) fn series(&self, index: usize) -> Series<'_> {
        let len = self.ats.len();
        Series {
            ats: &self.ats,
            metrics: self
                .metrics
                .get(index * len..(index + 1) * len)
                .unwrap_or_default(),
        }
    }
}

/// The average of `metric` of vertex `index` of `topology` over the window (see
/// [`average_of`]), without building the vertex's series.
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
        history
            .samples
            .values()
            .filter_map(|sample| sample.vertices.of(ids, index, id)?.get(&metric).copied()),
        min_observations,
    )
}

/// `1000 · (last − first) / max(Δt_ms, 1)` between the first and the last sample where the
/// metric is present and not NaN (infinities count); NaN with fewer than two such samples.
#[cfg(test)]
pub(crate) fn rate(history: &MetricHistory, vertex: &str, metric: ScalingMetric) -> f64 {
    let (ats, metrics) = by_id(history, vertex);
    series_rate(
        &Series {
            ats: &ats,
            metrics: &metrics,
        },
        metric,
    )
}

#[inline]
pub(crate) fn series_rate(series: &Series<'_>, metric: ScalingMetric) -> f64 {
    let mut first: Option<(i64, f64)> = None;
    let mut last: Option<(i64, f64)> = None;
    for (at, v) in series.values(metric) {
        if v.is_nan() {
            continue;
        }
        if first.is_none() {
            first = Some((at, v));
        } else {
            last = Some((at, v));
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
    let (ats, metrics) = by_id(history, vertex);
    series_average(
        &Series {
            ats: &ats,
            metrics: &metrics,
        },
        metric,
        min_observations,
    )
}

/// The average of a metric of a series (see [`average_of`]).
#[cfg(test)]
pub(crate) fn series_average(
    series: &Series<'_>,
    metric: ScalingMetric,
    min_observations: i64,
) -> f64 {
    average_of(series.values(metric).map(|(_, v)| v), min_observations)
}

/// Mean of the finite values. No finite value: +∞ if an infinite one was seen, else NaN;
/// fewer than `min_observations` finite values: NaN.
#[inline]
pub(crate) fn average_of(values: impl Iterator<Item = f64>, min_observations: i64) -> f64 {
    let mut mean = Mean::default();
    values.for_each(|v| mean.add(v));
    mean.value(min_observations)
}

/// The running mean of [`average_of`]: the finite values' sum and count, and whether an
/// infinite value was seen.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Mean {
    sum: f64,
    n: i64,
    infinite: bool,
}

impl Mean {
    #[inline]
    fn add(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        if v.is_infinite() {
            self.infinite = true;
            return;
        }
        self.sum += v;
        self.n += 1;
    }

    /// The mean of the finite values; with none, +∞ if an infinite one was seen, else NaN;
    /// with fewer than `min_observations`, NaN.
    #[inline]
    pub(crate) fn value(&self, min_observations: i64) -> f64 {
        if self.n == 0 {
            return if self.infinite {
                f64::INFINITY
            } else {
                f64::NAN
            };
        }
        if self.n < min_observations {
            return f64::NAN;
        }
        self.sum / self.n as f64
    }
}

/// The running means of several metrics of a series, in one walk over its samples (each as
/// [`average_of`] computes it).
#[inline]
pub(crate) fn series_means<const K: usize>(
    series: &Series<'_>,
    metrics: [ScalingMetric; K],
) -> [Mean; K] {
    let mut means = [Mean::default(); K];
    for vertex_metrics in series.metrics.iter().flatten() {
        for (mean, metric) in means.iter_mut().zip(metrics) {
            if let Some(&v) = vertex_metrics.get(&metric) {
                mean.add(v);
            }
        }
    }
    means
}

/// `average(metric)` unless it is NaN or infinite, then `rate(fallback)`.
#[cfg(test)]
pub(crate) fn average_or_rate(
    history: &MetricHistory,
    vertex: &str,
    metric: ScalingMetric,
    fallback: ScalingMetric,
) -> f64 {
    let (ats, metrics) = by_id(history, vertex);
    series_average_or_rate(
        &Series {
            ats: &ats,
            metrics: &metrics,
        },
        metric,
        fallback,
    )
}

/// `average(metric)` of a series unless it is NaN or infinite, then `rate(fallback)`.
#[cfg(test)]
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

/// The metric's value in the newest sample of the window (None when the vertex or the metric
/// is missing from it).
#[inline]
pub(crate) fn series_latest(series: &Series<'_>, metric: ScalingMetric) -> Option<f64> {
    series.metrics.last()?.as_ref()?.get(&metric).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaling::metrics::window::CollectedMetrics;

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
        let (ats, metrics) = by_id(&h, "v");
        let latest = series_latest(
            &Series {
                ats: &ats,
                metrics: &metrics,
            },
            m,
        );
        assert!(latest.is_some_and(f64::is_nan), "{latest:?}");
        // Missing from the newest sample: None, not the older value.
        let h = history(&[(0, Some(3.0)), (1000, None)], m);
        let (ats, metrics) = by_id(&h, "v");
        let s = Series {
            ats: &ats,
            metrics: &metrics,
        };
        assert_eq!(series_latest(&s, m), None);
        // Every metric has its own place in a row.
        let mut h = history(&[(0, Some(2.0)), (1000, Some(5.0))], m);
        for (at, s) in h.samples.iter_mut() {
            let v = s.vertices.get_mut("v").unwrap();
            v.insert(ScalingMetric::ObservedTpr, 1.0 + *at as f64);
            v.insert(ScalingMetric::Load, f64::NAN);
        }
        let (ats, metrics) = by_id(&h, "v");
        let s = Series {
            ats: &ats,
            metrics: &metrics,
        };
        assert_eq!(series_latest(&s, m), Some(5.0));
        assert_eq!(series_rate(&s, m), 3.0);
        assert_eq!(series_rate(&s, ScalingMetric::ObservedTpr), 1000.0);
        assert!(series_average(&s, ScalingMetric::Load, 1).is_nan());
        assert!(series_rate(&s, ScalingMetric::NumRecordsIn).is_nan());
    }

    #[test]
    fn means_in_one_walk_are_the_averages() {
        let mut h = history(
            &[
                (0, Some(0.5)),
                (1, Some(f64::NAN)),
                (2, Some(f64::INFINITY)),
                (3, Some(0.7)),
            ],
            ScalingMetric::Load,
        );
        for (at, s) in h.samples.iter_mut() {
            let v = s.vertices.get_mut("v").unwrap();
            v.insert(ScalingMetric::ObservedTpr, f64::INFINITY);
            if *at > 1 {
                v.insert(ScalingMetric::Lag, *at as f64);
            }
        }
        let (ats, metrics) = by_id(&h, "v");
        let s = Series {
            ats: &ats,
            metrics: &metrics,
        };
        let metrics = [
            ScalingMetric::Load,
            ScalingMetric::ObservedTpr,
            ScalingMetric::Lag,
            ScalingMetric::NumRecordsIn,
        ];
        let means = series_means(&s, metrics);
        for min in [1, 2, 3] {
            for (mean, metric) in means.iter().zip(metrics) {
                let one = series_average(&s, metric, min);
                assert_eq!(mean.value(min).to_bits(), one.to_bits(), "{metric} {min}");
            }
        }
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
