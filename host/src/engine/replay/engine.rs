//! A replay as the control loop runs it: the recording's collector and realizer, on a clock that
//! runs from the first record to the last.

use std::collections::BTreeMap;
use std::path::Path;

use super::recording::{ReplayCollector, ReplayError, ReplayRealizer, RescalePolicy};
use crate::engine::{Clock, Collector, Engine, EngineError, JobObservation, Realizer, WriteFence};

/// A recorded job replayed from a file.
pub struct ReplayEngine {
    collector: ReplayCollector,
    realizer: ReplayRealizer,
    start_ms: i64,
    end_ms: i64,
}

impl ReplayEngine {
    /// Opens the replay file at `path`, treating the rescales it is asked for by `policy`.
    pub fn open(path: &Path, policy: RescalePolicy) -> Result<ReplayEngine, ReplayError> {
        let collector = ReplayCollector::from_path(path, policy)?;
        let times = collector.times();
        // A replay without records is refused when it is read; this only keeps that promise
        // out of the clock.
        let (Some(&start_ms), Some(&end_ms)) = (times.first(), times.last()) else {
            return Err(ReplayError::Empty);
        };
        let realizer = collector.realizer();
        Ok(ReplayEngine {
            collector,
            realizer,
            start_ms,
            end_ms,
        })
    }
}

impl Collector for ReplayEngine {
    fn observe(&mut self, now_ms: i64) -> Result<JobObservation, EngineError> {
        self.collector.observe(now_ms)
    }
}

impl Realizer for ReplayEngine {
    fn rescale_fenced(
        &mut self,
        parallelism: &BTreeMap<String, u32>,
        fence: &dyn WriteFence,
    ) -> Result<(), EngineError> {
        self.realizer.rescale_fenced(parallelism, fence)
    }
    fn set_rate_limit(&mut self, vertex: &str, rate: Option<f64>) -> Result<(), EngineError> {
        self.realizer.set_rate_limit(vertex, rate)
    }
}

impl Engine for ReplayEngine {
    fn clock(&self) -> Clock {
        Clock::Virtual {
            start_ms: self.start_ms,
            end_ms: Some(self.end_ms),
        }
    }
}
