//! The rates of one vertex: the data rate it must sustain and the extra rate to catch up its
//! lag (from its sources' input along the graph), and its true processing rate.

use super::flow::{distinct_inputs, output_ratio};
use crate::scaling::error::CycleError;
use crate::scaling::metrics::{
    ScalingMetric, Series, VertexEvaluation, WindowSeries, series_means, series_rate,
};
use crate::scaling::numeric::java_max;
use crate::scaling::options::{AutoscalerOptions, BusyTimeAggregator, whole_seconds};
use crate::scaling::topology::{Topology, VertexInfo};

/// The input a vertex must sustain: the target data rate (an average) and the catch-up data
/// rate (a current value).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DataRates {
    pub(crate) target: f64,
    pub(crate) catch_up: f64,
}

/// A source's rates: what comes in plus the growth of its lag, and its latest lag spread over
/// `catch-up.duration` (none when that is zero).
pub(crate) fn source_rates(
    vertex: &VertexInfo,
    own: &Series<'_>,
    in_rate: f64,
    latest_lag: Option<f64>,
    opts: &AutoscalerOptions,
) -> Result<DataRates, CycleError> {
    let target = java_max(0.0, in_rate + series_rate(own, ScalingMetric::Lag));
    if target.is_nan() {
        return Err(CycleError::NoIngestionRate {
            vertex: String::from(&*vertex.id),
        });
    }
    let catch_up_secs = whole_seconds(opts.catch_up_duration);
    let lag = latest_lag.unwrap_or(0.0);
    let catch_up = if catch_up_secs == 0.0 {
        0.0
    } else {
        lag / catch_up_secs
    };
    Ok(DataRates { target, catch_up })
}

/// A non-source's rates: the share of each upstream vertex's rates that reaches it, summed over
/// its distinct inputs (evaluated before it, in topological order).
/// `in_rates` holds every vertex's records-in rate.
pub(crate) fn downstream_rates(
    window: &WindowSeries<'_>,
    topology: &Topology,
    in_rates: &[f64],
    evaluated: &[VertexEvaluation],
    index: usize,
) -> DataRates {
    let mut rates = DataRates {
        target: 0.0,
        catch_up: 0.0,
    };
    for u in distinct_inputs(&topology.vertices[index]) {
        let ratio = output_ratio(window, topology, in_rates, u, index);
        let upstream = &evaluated[u];
        let up_target = upstream
            .get(&ScalingMetric::TargetDataRate)
            .map_or(f64::NAN, |x| x.average);
        let up_catch_up = upstream
            .get(&ScalingMetric::CatchUpDataRate)
            .map_or(f64::NAN, |x| x.current);
        rates.target += up_target * ratio;
        rates.catch_up += up_catch_up * ratio;
    }
    rates
}

/// How busy a vertex is and how fast it could process when fully busy.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Processing {
    /// Busy milliseconds per second.
    pub(crate) busy_ms: f64,
    /// The true processing rate: input rate over busy ratio, or the observed rate of a source
    /// when the busy-time rate is not finite or much higher than it.
    pub(crate) true_processing_rate: f64,
}

impl Processing {
    /// `in_rate` is the rate of the vertex's records-in counter over the window.
    pub(crate) fn of(
        vertex: &VertexInfo,
        own: &Series<'_>,
        in_rate: f64,
        opts: &AutoscalerOptions,
    ) -> Processing {
        // One walk over the window for the three averages.
        let [load, in_per_sec, observed] = series_means(
            own,
            [
                ScalingMetric::Load,
                ScalingMetric::NumRecordsInPerSecond,
                ScalingMetric::ObservedTpr,
            ],
        );
        let (busy_ms, input_rate) = match opts.busy_time_aggregator {
            BusyTimeAggregator::Avg => (
                series_rate(own, ScalingMetric::AccumulatedBusyTime)
                    / f64::from(vertex.parallelism),
                in_rate,
            ),
            BusyTimeAggregator::Max | BusyTimeAggregator::Min => {
                // The average records-in rate unless it is NaN or infinite, then the rate of
                // the records-in counter: `in_rate`.
                let in_per_sec = in_per_sec.value(1);
                (
                    load.value(1) * 1000.0,
                    if in_per_sec.is_finite() {
                        in_per_sec
                    } else {
                        in_rate
                    },
                )
            }
        };
        let busy_tpr = if input_rate == 0.0 {
            f64::INFINITY
        } else {
            input_rate / (busy_ms / 1000.0)
        };
        let observed = observed.value(opts.observed_tpr_min_observations);
        let true_processing_rate = if !observed.is_nan()
            && (!busy_tpr.is_finite()
                || busy_tpr > observed * (1.0 + opts.observed_tpr_switch_threshold))
        {
            observed
        } else {
            busy_tpr
        };
        Processing {
            busy_ms,
            true_processing_rate,
        }
    }
}
