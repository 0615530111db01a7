//! The engines a fleet's jobs run on, built from their `[[jobs]]` entries.

use std::collections::BTreeMap;

use crate::config::EngineSpec;
use crate::engine::flink::{
    FlinkClient, FlinkCollector, FlinkOptions, FlinkRealizer, discover_jobs,
};
use crate::engine::replay::{ReplayCollector, ReplayRealizer, RescalePolicy};
use crate::engine::{Clock, Collector, Engine, EngineError, JobObservation, Realizer};
use crate::sim::Simulation;

impl Engine for Simulation {
    fn clock(&self) -> Clock {
        Clock::Virtual {
            start_ms: self.now_ms(),
            end_ms: None,
        }
    }
    fn is_finished(&self) -> bool {
        Simulation::is_finished(self)
    }
}

/// A job on a real Flink cluster.
pub struct FlinkEngine {
    collector: FlinkCollector,
    realizer: FlinkRealizer,
}

impl FlinkEngine {
    /// The job `job_id` of the cluster behind `client`.
    pub fn new(client: FlinkClient, job_id: &str) -> FlinkEngine {
        FlinkEngine {
            collector: FlinkCollector::new(client.clone(), job_id),
            realizer: FlinkRealizer::new(client, job_id),
        }
    }
}

impl Collector for FlinkEngine {
    fn observe(&mut self, now_ms: i64) -> Result<JobObservation, EngineError> {
        self.collector.observe(now_ms)
    }
}

impl Realizer for FlinkEngine {
    fn rescale(&mut self, parallelism: &BTreeMap<String, u32>) -> Result<(), EngineError> {
        self.realizer.rescale(parallelism)
    }
    fn set_rate_limit(&mut self, vertex: &str, rate: Option<f64>) -> Result<(), EngineError> {
        self.realizer.set_rate_limit(vertex, rate)
    }
}

impl Engine for FlinkEngine {
    fn clock(&self) -> Clock {
        Clock::Wall
    }
}

/// A recorded job replayed from a file; rescales are applied to later observations.
pub struct ReplayEngine {
    collector: ReplayCollector,
    realizer: ReplayRealizer,
    start_ms: i64,
    end_ms: i64,
}

impl Collector for ReplayEngine {
    fn observe(&mut self, now_ms: i64) -> Result<JobObservation, EngineError> {
        self.collector.observe(now_ms)
    }
}

impl Realizer for ReplayEngine {
    fn rescale(&mut self, parallelism: &BTreeMap<String, u32>) -> Result<(), EngineError> {
        self.realizer.rescale(parallelism)
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

/// A named engine: one job of a fleet entry.
pub type NamedEngine = (String, Box<dyn Engine>);

/// One engine instance per job it covers: a Flink entry without `job-id` covers every RUNNING
/// job of the cluster, named `<entry>/<flink job name>`.
pub fn open_engines(
    name: &str,
    spec: &EngineSpec,
) -> Result<Vec<NamedEngine>, String> {
    match spec {
        EngineSpec::Sim { job, .. } => {
            let mut sim = Simulation::from_file(job).map_err(|e| e.to_string())?;
            sim.record_timeline(true);
            Ok(vec![(name.to_string(), Box::new(sim))])
        }
        EngineSpec::Flink { rest, job_id } => {
            let client = FlinkClient::new(FlinkOptions::new(rest.clone()));
            match job_id {
                Some(id) => Ok(vec![(
                    name.to_string(),
                    Box::new(FlinkEngine::new(client, id)),
                )]),
                None => {
                    let jobs = discover_jobs(&client, None).map_err(|e| e.to_string())?;
                    if jobs.is_empty() {
                        return Err(format!("no RUNNING job on the Flink cluster at {rest}"));
                    }
                    let single = jobs.len() == 1;
                    Ok(jobs
                        .into_iter()
                        .map(|job| {
                            let label = if single {
                                name.to_string()
                            } else {
                                format!("{name}/{}", job.name)
                            };
                            let engine: Box<dyn Engine> =
                                Box::new(FlinkEngine::new(client.clone(), &job.id));
                            (label, engine)
                        })
                        .collect())
                }
            }
        }
        EngineSpec::Replay { trace } => {
            let collector = ReplayCollector::from_path(trace, RescalePolicy::Apply)
                .map_err(|e| e.to_string())?;
            let times = collector.times();
            let (Some(&start_ms), Some(&end_ms)) = (times.first(), times.last()) else {
                return Err(format!("{} holds no observation", trace.display()));
            };
            let realizer = collector.realizer();
            Ok(vec![(
                name.to_string(),
                Box::new(ReplayEngine {
                    collector,
                    realizer,
                    start_ms,
                    end_ms,
                }),
            )])
        }
    }
}
