//! How records flow along the job graph: which share of an upstream vertex's input reaches a
//! downstream vertex, from the records-in and records-out rates of the window.

use crate::scaling::metrics::{ScalingMetric, WindowSeries, series_rate};
use crate::scaling::topology::{Topology, VertexInfo};

/// Inputs of a vertex without repetitions (an upstream vertex counts once, as in the Flink autoscaler's
/// keyed maps), in edge order. A vertex has a handful of inputs: a scan of the ones before
/// beats building a set for every rate.
pub(crate) fn distinct_inputs<'v>(vertex: &'v VertexInfo) -> impl Iterator<Item = usize> + 'v {
    let inputs = &vertex.inputs;
    inputs
        .iter()
        .enumerate()
        .filter(|&(i, &(u, _))| !inputs[..i].iter().any(|&(w, _)| w == u))
        .map(|(_, &(u, _))| u)
}

fn distinct_output_count(topology: &Topology, w: usize) -> usize {
    let outputs = &topology.vertices[w].outputs;
    outputs
        .iter()
        .enumerate()
        .filter(|&(i, o)| !outputs[..i].contains(o))
        .count()
}

/// `ratio(u, v)`: the share of `u`'s input that reaches `v` (docs/decision-pipeline.md#output-ratios);
/// `in_rates` holds every vertex's records-in rate.
pub(crate) fn output_ratio(
    window: &WindowSeries<'_>,
    topology: &Topology,
    in_rates: &[f64],
    u: usize,
    v: usize,
) -> f64 {
    let input_rate = in_rates[u];
    if input_rate > 0.0 {
        let edge = edge_rate(window, topology, in_rates, u, v);
        if edge > 0.0 {
            return edge / input_rate;
        }
    }
    0.0
}

/// The records per second flowing along `u -> v`.
fn edge_rate(
    window: &WindowSeries<'_>,
    topology: &Topology,
    in_rates: &[f64],
    u: usize,
    v: usize,
) -> f64 {
    if distinct_inputs(&topology.vertices[v]).nth(1).is_none() {
        return in_rates[v];
    }
    let mut other = 0.0;
    let mut usable = true;
    for w in distinct_inputs(&topology.vertices[v]).filter(|&w| w != u) {
        if distinct_output_count(topology, w) > 1 {
            usable = false;
            break;
        }
        other += series_rate(&window.series(w), ScalingMetric::NumRecordsOut);
        if other.is_nan() {
            usable = false;
            break;
        }
    }
    if usable {
        return in_rates[v] - other;
    }
    series_rate(&window.series(u), ScalingMetric::NumRecordsOut)
}
