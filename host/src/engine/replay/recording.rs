//! The recorded observations of a replay file, and the rescales asked of them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::engine::{Collector, EngineError, JobObservation, Realizer, WriteFence};

/// One line of a replay file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayRecord {
    /// When the observation was taken (ms).
    pub(crate) at_ms: i64,
    /// The observation.
    pub(crate) observation: JobObservation,
}

/// What a replay does with the rescales it is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RescalePolicy {
    /// Record them only; observations are returned as recorded.
    #[default]
    Record,
    /// Record them and apply them to later observations (parallelism and restart time).
    Apply,
}

/// A rescale the realizer was asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RescaleCall {
    /// Time of the last observation before the call, if any.
    pub(crate) after_observation_ms: Option<i64>,
    /// The requested parallelism per vertex.
    pub parallelism: BTreeMap<String, u32>,
}

/// Why a replay file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The file could not be read.
    #[error("cannot read replay file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line is not a replay record.
    #[error("replay line {line}: {message}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A record is older than the one before it.
    #[error("replay line {line}: at_ms {at_ms} is before the previous record's {previous}")]
    OutOfOrder {
        /// 1-based line number.
        line: usize,
        /// Its time.
        at_ms: i64,
        /// The previous record's time.
        previous: i64,
    },
    /// No record at all.
    #[error("the replay contains no record")]
    Empty,
}

#[derive(Debug)]
struct Shared {
    records: Vec<ReplayRecord>,
    policy: RescalePolicy,
    last_observed_ms: Option<i64>,
    last_parallelism: BTreeMap<String, u32>,
    pending: Option<(Option<i64>, BTreeMap<String, u32>)>,
    applied: BTreeMap<String, u32>,
    restarted_at_ms: Option<i64>,
    calls: Vec<RescaleCall>,
    rate_limits: BTreeMap<String, Option<f64>>,
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // A panic while holding the lock leaves consistent data (every update is a single step).
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Reads recorded observations; see the [module docs](super).
#[derive(Debug, Clone)]
pub struct ReplayCollector {
    shared: Arc<Mutex<Shared>>,
}

/// Records (and with [`RescalePolicy::Apply`] applies) rescales of a replayed job.
#[derive(Debug, Clone)]
pub struct ReplayRealizer {
    shared: Arc<Mutex<Shared>>,
}

/// Opens a replay file: its collector and the realizer bound to it.
pub fn open(
    path: &Path,
    policy: RescalePolicy,
) -> Result<(ReplayCollector, ReplayRealizer), ReplayError> {
    let collector = ReplayCollector::from_path(path, policy)?;
    let realizer = collector.realizer();
    Ok((collector, realizer))
}

impl ReplayCollector {
    /// Reads a replay file.
    pub(crate) fn from_path(
        path: &Path,
        policy: RescalePolicy,
    ) -> Result<ReplayCollector, ReplayError> {
        let text = std::fs::read_to_string(path).map_err(|source| ReplayError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        ReplayCollector::parse(&text, policy)
    }

    /// Parses the JSON Lines text of a replay.
    pub fn parse(text: &str, policy: RescalePolicy) -> Result<ReplayCollector, ReplayError> {
        let mut records: Vec<ReplayRecord> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line_no = i + 1;
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let record: ReplayRecord =
                serde_json::from_str(trimmed).map_err(|e| ReplayError::Parse {
                    line: line_no,
                    message: e.to_string(),
                })?;
            if let Some(previous) = records.last().map(|r| r.at_ms) {
                if record.at_ms < previous {
                    return Err(ReplayError::OutOfOrder {
                        line: line_no,
                        at_ms: record.at_ms,
                        previous,
                    });
                }
            }
            records.push(record);
        }
        if records.is_empty() {
            return Err(ReplayError::Empty);
        }
        Ok(ReplayCollector {
            shared: Arc::new(Mutex::new(Shared {
                records,
                policy,
                last_observed_ms: None,
                last_parallelism: BTreeMap::new(),
                pending: None,
                applied: BTreeMap::new(),
                restarted_at_ms: None,
                calls: Vec::new(),
                rate_limits: BTreeMap::new(),
            })),
        })
    }

    /// The realizer bound to this replay.
    pub(crate) fn realizer(&self) -> ReplayRealizer {
        ReplayRealizer {
            shared: Arc::clone(&self.shared),
        }
    }

    /// The recorded instants, in order (duplicates kept).
    pub fn times(&self) -> Vec<i64> {
        lock(&self.shared).records.iter().map(|r| r.at_ms).collect()
    }
}

impl Collector for ReplayCollector {
    fn observe(&mut self, now_ms: i64) -> Result<JobObservation, EngineError> {
        let mut s = lock(&self.shared);
        let index = s.records.partition_point(|r| r.at_ms <= now_ms);
        if index == 0 {
            return Err(EngineError::NotReady(format!(
                "no recorded observation at or before {now_ms} ms"
            )));
        }
        let mut obs = s.records[index - 1].observation.clone();
        if s.policy == RescalePolicy::Apply {
            if let Some((requested_after, map)) = s.pending.take() {
                if requested_after.is_none_or(|t| now_ms > t) {
                    let changes = map
                        .iter()
                        .any(|(v, p)| s.last_parallelism.get(v).is_some_and(|cur| cur != p));
                    s.applied.extend(map);
                    if changes {
                        s.restarted_at_ms = Some(now_ms);
                    }
                } else {
                    s.pending = Some((requested_after, map));
                }
            }
            for v in &mut obs.vertices {
                if let Some(&p) = s.applied.get(&v.id) {
                    v.parallelism = p;
                }
            }
            if let Some(at) = s.restarted_at_ms {
                obs.running_since_ms = obs.running_since_ms.max(at);
            }
        }
        s.last_observed_ms = Some(now_ms);
        s.last_parallelism = obs
            .vertices
            .iter()
            .map(|v| (v.id.clone(), v.parallelism))
            .collect();
        Ok(obs)
    }
}

impl ReplayRealizer {
    /// Every rescale asked for, in order.
    pub fn calls(&self) -> Vec<RescaleCall> {
        lock(&self.shared).calls.clone()
    }

    /// The latest rate limit per source vertex (None: lifted).
    #[cfg(test)]
    pub(crate) fn rate_limits(&self) -> BTreeMap<String, Option<f64>> {
        lock(&self.shared).rate_limits.clone()
    }
}

impl Realizer for ReplayRealizer {
    fn rescale_fenced(
        &mut self,
        parallelism: &BTreeMap<String, u32>,
        fence: &dyn WriteFence,
    ) -> Result<(), EngineError> {
        fence.check().map_err(EngineError::Abandoned)?;
        let mut s = lock(&self.shared);
        if let Some((v, _)) = parallelism.iter().find(|(_, p)| **p == 0) {
            return Err(EngineError::InvalidRequest(format!(
                "parallelism 0 for vertex `{v}`"
            )));
        }
        if !s.last_parallelism.is_empty() {
            if let Some(v) = parallelism
                .keys()
                .find(|v| !s.last_parallelism.contains_key(*v))
            {
                return Err(EngineError::InvalidRequest(format!(
                    "vertex `{v}` is not part of the job"
                )));
            }
        }
        let after = s.last_observed_ms;
        s.calls.push(RescaleCall {
            after_observation_ms: after,
            parallelism: parallelism.clone(),
        });
        if s.policy == RescalePolicy::Apply {
            let mut merged = s.pending.take().map(|(_, m)| m).unwrap_or_default();
            merged.extend(parallelism.iter().map(|(k, v)| (k.clone(), *v)));
            s.pending = Some((after, merged));
        }
        Ok(())
    }

    fn set_rate_limit(
        &mut self,
        source_vertex: &str,
        records_per_second: Option<f64>,
    ) -> Result<(), EngineError> {
        lock(&self.shared)
            .rate_limits
            .insert(source_vertex.to_string(), records_per_second);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = r#"
# a comment
{"at_ms": 0, "observation": {"status": "RUNNING", "running_since_ms": 0, "vertices": [{"id": "a", "name": "A", "parallelism": 2, "max_parallelism": 8}], "edges": []}}

{"at_ms": 1000, "observation": {"status": "RUNNING", "running_since_ms": 0, "vertices": [{"id": "a", "name": "A", "parallelism": 2, "max_parallelism": 8}], "edges": []}}
"#;

    #[test]
    fn observes_the_newest_record_and_applies_rescales() {
        let mut c = ReplayCollector::parse(TWO, RescalePolicy::Apply).unwrap();
        let mut r = c.realizer();
        assert_eq!(c.times(), vec![0, 1000]);
        assert!(matches!(c.observe(-1), Err(EngineError::NotReady(_))));
        assert_eq!(c.observe(500).unwrap().vertices[0].parallelism, 2);
        let map: BTreeMap<String, u32> = [("a".to_string(), 4)].into_iter().collect();
        r.rescale(&map).unwrap();
        // Not before a later observation.
        assert_eq!(c.observe(500).unwrap().vertices[0].parallelism, 2);
        let obs = c.observe(1000).unwrap();
        assert_eq!(obs.vertices[0].parallelism, 4);
        assert_eq!(obs.running_since_ms, 1000);
        assert_eq!(r.calls().len(), 1);
        assert_eq!(r.calls()[0].after_observation_ms, Some(500));
        let bad: BTreeMap<String, u32> = [("zz".to_string(), 4)].into_iter().collect();
        assert!(matches!(
            r.rescale(&bad),
            Err(EngineError::InvalidRequest(_))
        ));
        r.set_rate_limit("a", Some(10.0)).unwrap();
        assert_eq!(r.rate_limits()["a"], Some(10.0));
    }

    #[test]
    fn record_policy_keeps_observations() {
        let mut c = ReplayCollector::parse(TWO, RescalePolicy::Record).unwrap();
        let mut r = c.realizer();
        c.observe(0).unwrap();
        let map: BTreeMap<String, u32> = [("a".to_string(), 4)].into_iter().collect();
        r.rescale(&map).unwrap();
        assert_eq!(c.observe(1000).unwrap().vertices[0].parallelism, 2);
    }

    // Found by the replay_line fuzz target: without serde_json's float_roundtrip a long float
    // read from a replay (or state) file was off by one unit in the last place, so a record
    // written back did not read back as itself.
    #[test]
    fn floats_survive_a_round_trip() {
        let line = r#"{"at_ms": 0, "observation": {"status": "RUNNING", "running_since_ms": 0, "vertices": [], "edges": [], "global": {"x": 3400111111111111111111111111111111111111111111111111111111111111111111111111111.0}}}"#;
        let record: ReplayRecord = serde_json::from_str(line).unwrap();
        let written = serde_json::to_string(&record).unwrap();
        let back: ReplayRecord = serde_json::from_str(&written).unwrap();
        assert_eq!(back, record);
        assert_eq!(serde_json::to_string(&back).unwrap(), written);
    }

    #[test]
    fn bad_files() {
        assert!(matches!(
            ReplayCollector::parse("", RescalePolicy::Record),
            Err(ReplayError::Empty)
        ));
        let err = ReplayCollector::parse("{\"at_ms\": 1}", RescalePolicy::Record).unwrap_err();
        assert!(err.to_string().starts_with("replay line 1:"), "{err}");
        let lines: Vec<&str> = TWO.lines().filter(|l| l.starts_with('{')).collect();
        let reversed = format!("{}\n{}", lines[1], lines[0]);
        assert!(matches!(
            ReplayCollector::parse(&reversed, RescalePolicy::Record),
            Err(ReplayError::OutOfOrder { line: 2, .. })
        ));
    }
}
