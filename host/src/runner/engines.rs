//! The engines a fleet's jobs run on, opened from their `[[jobs]]` entries: the one place that
//! turns an [`EngineSpec`] into engines.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{EngineSpec, SimClusterSpec};
use crate::credentials::CredentialError;
use crate::engine::flink::{
    ClusterLimits, FlinkClient, FlinkEngine, FlinkOptions, cluster_key, discover_jobs,
};
use crate::engine::replay::{ReplayEngine, ReplayError, RescalePolicy};
use crate::engine::{Engine, EngineError};
use crate::sim::{SimError, Simulation};

/// A named engine: one job of a fleet entry.
pub(crate) type NamedEngine = (String, Box<dyn Engine>);

/// What a fleet entry's engine opens to.
pub(crate) enum OpenedEngines {
    /// A simulated job, kept a [`Simulation`] so that its timeline can be read after the run.
    Simulated {
        /// The simulation, recording its timeline.
        simulation: Box<Simulation>,
        /// The simulated time the entry asks for, if it does.
        duration: Option<Duration>,
        /// The simulated cluster it shares, if it names one.
        cluster: Option<Arc<SimClusterSpec>>,
    },
    /// One engine per job the entry covers.
    Jobs(Vec<NamedEngine>),
    /// One engine per job of a Flink cluster the entry covers, with what sharing the
    /// cluster's slots needs.
    Flink {
        /// The jobs.
        engines: Vec<NamedEngine>,
        /// The cluster.
        cluster: FlinkCluster,
    },
}

/// A Flink cluster whose slots its jobs share.
pub(crate) struct FlinkCluster {
    /// What tells it from other clusters (its name, else its REST address).
    pub(crate) key: String,
    /// Its client.
    pub(crate) client: FlinkClient,
    /// The Flink job id of each engine, in their order.
    pub(crate) ids: Vec<String>,
}

/// Why a fleet entry's engine could not be opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpenError {
    /// The simulated job's file.
    #[error(transparent)]
    Simulation(#[from] SimError),
    /// The Flink cluster could not list its jobs.
    #[error(transparent)]
    Flink(#[from] EngineError),
    /// The Flink cluster runs no job to scale.
    #[error("no RUNNING job on the Flink cluster at {rest}")]
    NoRunningJob {
        /// The cluster's REST endpoint.
        rest: String,
    },
    /// The replay file.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// A file of the named cluster (CA, client certificate, token) cannot be used.
    #[error("cluster `{cluster}`: {error}")]
    Credentials {
        /// The cluster's name.
        cluster: String,
        /// Which file and why.
        error: CredentialError,
    },
}

/// Opens the engine of the fleet entry `name`. A Flink entry without `job-id` covers every
/// RUNNING job of the cluster, each named `<entry>/<flink job name>` when there are several; a
/// Flink entry's requests stay within its cluster's place in `limits`.
pub(crate) fn open_engines_limited(
    name: &str,
    spec: &EngineSpec,
    limits: &ClusterLimits,
) -> Result<OpenedEngines, OpenError> {
    match spec {
        EngineSpec::Flink {
            rest,
            cluster,
            job_id,
        } => {
            let options = FlinkOptions::new(rest.as_str());
            let client = match cluster {
                Some(cluster) => {
                    let access = limits
                        .access(&options.endpoint(), cluster)
                        .map_err(|error| OpenError::Credentials {
                            cluster: cluster.name.clone(),
                            error,
                        })?;
                    FlinkClient::with_access(options, access).with_limit(limits.for_named(cluster))
                }
                None => FlinkClient::new(options).with_limit(limits.for_cluster(rest)),
            };
            let key = cluster_key(rest, cluster.as_deref());
            let (engines, ids) = open_flink(name, client.clone(), job_id.as_deref())?;
            Ok(OpenedEngines::Flink {
                engines,
                cluster: FlinkCluster { key, client, ids },
            })
        }
        EngineSpec::Sim {
            job,
            duration,
            cluster,
        } => {
            let mut simulation = Simulation::from_file(job)?;
            simulation.record_timeline(true);
            Ok(OpenedEngines::Simulated {
                simulation: Box::new(simulation),
                duration: *duration,
                cluster: cluster.clone(),
            })
        }
        EngineSpec::Replay { trace } => Ok(OpenedEngines::Jobs(vec![(
            name.to_string(),
            Box::new(open_replay(trace)?),
        )])),
    }
}

/// True when the fleet entry `entry` may open a job named `job` that restores its state from
/// the store: what [`open_engines_limited`] names the jobs of a Flink or replay entry (simulated jobs
/// keep no state).
pub(crate) fn may_restore(entry: &str, spec: &EngineSpec, job: &str) -> bool {
    match spec {
        EngineSpec::Sim { .. } => false,
        EngineSpec::Replay { .. }
        | EngineSpec::Flink {
            job_id: Some(_), ..
        } => job == entry,
        EngineSpec::Flink { job_id: None, .. } => {
            job == entry
                || job
                    .strip_prefix(entry)
                    .is_some_and(|rest| rest.starts_with('/'))
        }
    }
}

/// The engines of a Flink entry, and the job id of each.
fn open_flink(
    name: &str,
    client: FlinkClient,
    job_id: Option<&str>,
) -> Result<(Vec<NamedEngine>, Vec<String>), OpenError> {
    if let Some(id) = job_id {
        let engine: Box<dyn Engine> = Box::new(FlinkEngine::new(client, id));
        return Ok((vec![(name.to_string(), engine)], vec![id.to_string()]));
    }
    let jobs = discover_jobs(&client, None)?;
    if jobs.is_empty() {
        return Err(OpenError::NoRunningJob {
            rest: client.options().rest_url.clone(),
        });
    }
    let single = jobs.len() == 1;
    let ids = jobs.iter().map(|job| job.id.clone()).collect();
    let engines = jobs
        .into_iter()
        .map(|job| {
            let label = if single {
                name.to_string()
            } else {
                format!("{name}/{}", job.name)
            };
            let engine: Box<dyn Engine> = Box::new(FlinkEngine::new(client.clone(), &job.id));
            (label, engine)
        })
        .collect();
    Ok((engines, ids))
}

/// A replay's rescales change what it reports next: the loop sees the effect of its decisions.
fn open_replay(trace: &Path) -> Result<ReplayEngine, ReplayError> {
    ReplayEngine::open(trace, RescalePolicy::Apply)
}
