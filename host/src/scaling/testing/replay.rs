//! Drives a recorded job (see [`crate::engine::replay`]) through the decision pipeline, one
//! cycle per recorded instant, for tests that check the pipeline against recorded scenarios.
//!
//! Decisions are realized right away, without cooldown: the replay checks the decision
//! pipeline, not the executor that paces operations.

use std::path::Path;

use serde::Serialize;

use crate::alignment::Aligner;
use crate::engine::replay::{ReplayError, RescalePolicy, open};
use crate::engine::{Collector, Realizer};

use crate::scaling::{AutoscalerOptions, CycleOutcome, JobScalingState, run_cycle};

/// One replayed cycle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayedCycle {
    /// The recorded instant the cycle ran at.
    pub at_ms: i64,
    /// What the pipeline decided.
    pub outcome: CycleOutcome,
    /// Why the recorded job could not be observed or rescaled, if so.
    pub engine_error: Option<String>,
}

/// Replays the file at `path` through [`run_cycle`], starting from `state`.
pub fn run_replay(
    path: &Path,
    policy: RescalePolicy,
    job: &str,
    opts: &AutoscalerOptions,
    aligner: &dyn Aligner,
    state: &mut JobScalingState,
) -> Result<Vec<ReplayedCycle>, ReplayError> {
    let (mut collector, mut realizer) = open(path, policy)?;
    let mut cycles = Vec::new();
    let mut times = collector.times();
    times.dedup();
    for at_ms in times {
        let observation = match collector.observe(at_ms) {
            Ok(o) => o,
            Err(e) => {
                cycles.push(ReplayedCycle {
                    at_ms,
                    outcome: CycleOutcome::not_observed(),
                    engine_error: Some(e.to_string()),
                });
                continue;
            }
        };
        let outcome = run_cycle(job, opts, &observation, at_ms, aligner, state);
        let engine_error = outcome
            .decision
            .as_ref()
            .and_then(|d| realizer.rescale(d).err())
            .map(|e| e.to_string());
        cycles.push(ReplayedCycle {
            at_ms,
            outcome,
            engine_error,
        });
    }
    Ok(cycles)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::scaling::CycleStage;
    use crate::scaling::testing::BalancedAligner;

    #[test]
    fn replays_the_fixture() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/replay/backlog_then_scale_down.jsonl");
        let opts = AutoscalerOptions {
            scale_down_interval: Duration::from_secs(2),
            ..super::super::backlog_opts()
        };
        let mut state = JobScalingState::default();
        let cycles = run_replay(
            &path,
            RescalePolicy::Apply,
            "orders",
            &opts,
            &BalancedAligner,
            &mut state,
        )
        .unwrap();
        let stages: Vec<&CycleStage> = cycles.iter().map(|c| &c.outcome.stage).collect();
        assert_eq!(cycles.len(), 7);
        assert_eq!(stages[1], &CycleStage::Scaled);
        assert_eq!(stages[5], &CycleStage::Scaled);
        assert!(cycles.iter().all(|c| c.engine_error.is_none()));
        assert!(
            run_replay(
                Path::new("/nonexistent/replay.jsonl"),
                RescalePolicy::Record,
                "x",
                &opts,
                &BalancedAligner,
                &mut state
            )
            .is_err()
        );
    }
}
