//! A Flink job as the control loop runs it: the collector and the realizer of one job, on the
//! wall clock.

use std::collections::BTreeMap;

use super::client::FlinkClient;
use super::collector::FlinkCollector;
use super::realizer::FlinkRealizer;
use crate::engine::{Clock, Collector, Engine, EngineError, JobObservation, Realizer, WriteFence};
use crate::events::Event;

/// A job on a real Flink cluster.
pub(crate) struct FlinkEngine {
    /// The cluster's client, for the credential reloads it has to report.
    client: FlinkClient,
    collector: FlinkCollector,
    realizer: FlinkRealizer,
}

impl FlinkEngine {
    /// The job `job_id` of the cluster behind `client`.
    pub(crate) fn new(client: FlinkClient, job_id: &str) -> FlinkEngine {
        FlinkEngine {
            collector: FlinkCollector::new(client.clone(), job_id),
            realizer: FlinkRealizer::new(client.clone(), job_id),
            client,
        }
    }
}

impl Collector for FlinkEngine {
    fn observe(&mut self, now_ms: i64) -> Result<JobObservation, EngineError> {
        self.collector.observe(now_ms)
    }
}

impl Realizer for FlinkEngine {
    fn rescale_fenced(
        &mut self,
        parallelism: &BTreeMap<String, u32>,
        fence: &dyn WriteFence,
    ) -> Result<(), EngineError> {
        self.realizer.rescale_fenced(parallelism, fence)
    }
    fn forget_writes(&mut self) {
        self.realizer.forget_writes()
    }
    fn set_rate_limit(&mut self, vertex: &str, rate: Option<f64>) -> Result<(), EngineError> {
        self.realizer.set_rate_limit(vertex, rate)
    }
}

impl Engine for FlinkEngine {
    fn clock(&self) -> Clock {
        Clock::Wall
    }
    fn take_events(&mut self) -> Vec<Event> {
        self.client.take_events()
    }
}
