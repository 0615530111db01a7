//! Filling the metric window (docs/decision-pipeline.md#metric-window): restart detection, stabilization, the sample stored
//! per cycle, and when the window counts as fully collected.

use std::collections::BTreeSet;

use super::samples::compute_sample;
use super::window::MetricHistory;
use crate::engine::JobObservation;
use crate::scaling::error::CycleError;
use crate::scaling::options::{AutoscalerOptions, millis};
use crate::scaling::topology::Topology;

/// What collection found out in this cycle.
#[derive(Debug, Clone, Default)]
pub(crate) struct Collection {
    /// The window covers `metrics.window` after stabilization: scaling may happen.
    pub(crate) fully_collected: bool,
    /// The stored history was dropped because the job (re)started after its first sample.
    pub(crate) restarted: bool,
    /// Vertices not to scale in this cycle (finished, or no finite busy time).
    pub(crate) excluded: BTreeSet<String>,
}

/// Collects this cycle's sample into `history` (steps 1–5 of docs/decision-pipeline.md#metric-window).
///
/// A required metric missing during stabilization ends the cycle as not ready, with nothing
/// stored; after stabilization it is an error.
pub(crate) fn collect(
    history: &mut MetricHistory,
    obs: &JobObservation,
    topology: &Topology,
    opts: &AutoscalerOptions,
    now_ms: i64,
) -> Result<Collection, CycleError> {
    let mut restarted = false;
    if let Some((&first, _)) = history.samples.first_key_value() {
        if obs.running_since_ms > first {
            history.samples.clear();
            restarted = true;
        }
    }
    let stable_time = obs
        .running_since_ms
        .saturating_add(millis(opts.stabilization_interval));
    let stabilizing = now_ms < stable_time;
    let window = millis(opts.metrics_window);
    let window_full_time = history
        .samples
        .range(stable_time..)
        .next()
        .map(|(&t, _)| t)
        .unwrap_or(now_ms)
        .saturating_add(window);

    let buffer = history.take_buffer();
    let sample = match compute_sample(obs, topology, opts, history, buffer) {
        Ok(s) => s,
        Err(CycleError::MetricNotFound { metric, vertex }) if stabilizing => {
            return Err(CycleError::NotReady(format!(
                "Could not find required metric {metric} for {vertex} (job is stabilizing)"
            )));
        }
        Err(e) => return Err(e),
    };
    history.samples.insert(now_ms, sample.metrics);

    let fully_collected = now_ms >= window_full_time;
    if fully_collected {
        // Drops the samples older than the window from the front: usually one, and without
        // the new map a `split_off` builds.
        let keep_from = now_ms.saturating_sub(window);
        while history
            .samples
            .first_key_value()
            .is_some_and(|(&at, _)| at < keep_from)
        {
            history.drop_oldest();
        }
    }
    Ok(Collection {
        fully_collected,
        restarted,
        excluded: sample.excluded,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::engine::{AggregatedMetric, JobStatus, ObservedVertex, VertexMetrics};

    fn observation(running_since_ms: i64, with_metrics: bool) -> JobObservation {
        let mut metrics = BTreeMap::new();
        if with_metrics {
            let one = AggregatedMetric {
                min: Some(1.0),
                max: Some(1.0),
                avg: Some(1.0),
                sum: Some(1.0),
            };
            let aggregated = [
                "busyTimeMsPerSecond",
                "backPressuredTimeMsPerSecond",
                "Source__s.numRecordsInPerSecond",
                "Source__s.numRecordsIn",
            ]
            .into_iter()
            .map(|n| (n.to_string(), one))
            .collect();
            metrics.insert(
                "v".to_string(),
                VertexMetrics {
                    aggregated,
                    io: Default::default(),
                    subtasks: Vec::new(),
                },
            );
        }
        JobObservation {
            status: JobStatus::Running,
            running_since_ms,
            vertices: vec![ObservedVertex {
                id: "v".into(),
                name: "v".into(),
                parallelism: 1,
                max_parallelism: 8,
                source_partitions: 0,
                finished: false,
                slot_sharing_group: None,
            }],
            edges: vec![],
            metrics,
            global: BTreeMap::new(),
            task_managers: None,
        }
    }

    fn opts(stab_s: u64, window_s: u64) -> AutoscalerOptions {
        AutoscalerOptions {
            stabilization_interval: Duration::from_secs(stab_s),
            metrics_window: Duration::from_secs(window_s),
            ..AutoscalerOptions::default()
        }
    }

    #[test]
    fn window_fills_after_stabilization_and_drops_old_samples() {
        let o = observation(0, true);
        let t = Topology::from_observation(&o).unwrap();
        let opts = opts(10, 20);
        let mut h = MetricHistory::default();
        // Samples during stabilization are stored too.
        for now in [0, 5_000] {
            let c = collect(&mut h, &o, &t, &opts, now).unwrap();
            assert!(!c.fully_collected);
        }
        // First sample at/after the stable time (10 s) starts the window: full at 30 s.
        for now in [10_000, 20_000, 29_999] {
            let c = collect(&mut h, &o, &t, &opts, now).unwrap();
            assert!(!c.fully_collected, "{now}");
        }
        assert_eq!(h.len(), 5);
        let c = collect(&mut h, &o, &t, &opts, 30_000).unwrap();
        assert!(c.fully_collected);
        // Samples before now - W = 10 s are dropped, including the stabilization ones.
        assert_eq!(
            h.samples.keys().copied().collect::<Vec<_>>(),
            vec![10_000, 20_000, 29_999, 30_000]
        );
    }

    #[test]
    fn restart_clears_history() {
        let opts = opts(0, 20);
        let o = observation(0, true);
        let t = Topology::from_observation(&o).unwrap();
        let mut h = MetricHistory::default();
        collect(&mut h, &o, &t, &opts, 1_000).unwrap();
        collect(&mut h, &o, &t, &opts, 2_000).unwrap();
        // Running since exactly the first key: not a restart.
        let o2 = observation(1_000, true);
        let c = collect(&mut h, &o2, &t, &opts, 3_000).unwrap();
        assert!(!c.restarted);
        assert_eq!(h.len(), 3);
        let o3 = observation(2_500, true);
        let c = collect(&mut h, &o3, &t, &opts, 4_000).unwrap();
        assert!(c.restarted);
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn missing_metrics_while_stabilizing_is_not_ready() {
        let opts = opts(10, 20);
        let o = observation(0, false);
        let t = Topology::from_observation(&o).unwrap();
        let mut h = MetricHistory::default();
        let err = collect(&mut h, &o, &t, &opts, 5_000).unwrap_err();
        assert!(matches!(err, CycleError::NotReady(_)));
        assert!(h.is_empty());
        let err = collect(&mut h, &o, &t, &opts, 10_000).unwrap_err();
        assert!(matches!(err, CycleError::MetricNotFound { .. }));
    }
}
