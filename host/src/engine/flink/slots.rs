//! The free task slots of a Flink cluster, for the slot arbiter that shares them among the
//! cluster's jobs (docs/flink.md#free-slots): `GET /overview`'s `slots-total` and
//! `slots-available`, bounded by `slotmanager.number-of-slots.max` of `GET /jobmanager/config`
//! where it is set, less what the arbiter's own jobs asked for and do not run yet.
//!
//! A standalone session cluster cannot grow: its free slots are those available now, and the
//! cap only lowers them (slots above the cap are not handed out). A cluster that starts
//! TaskManagers on demand (`deployment.target` a Kubernetes or YARN deployment) can: with the
//! cap set its free slots are the cap less the slots in use, and without one they have no
//! bound (nothing is cut; the cluster has the last word).

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use serde::Deserialize;

use super::client::FlinkClient;
use super::rest::{ConfigEntry, JobDetails, ResourceRequirements};
use crate::engine::{EngineError, slots_needed};

/// The key that caps a cluster's slots.
pub(crate) const MAX_SLOTS_KEY: &str = "slotmanager.number-of-slots.max";

/// `GET /overview` (only the slots).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ClusterOverview {
    #[serde(default, rename = "slots-total")]
    pub(crate) slots_total: Option<i64>,
    #[serde(default, rename = "slots-available")]
    pub(crate) slots_available: Option<i64>,
}

/// A cluster's slots as the arbiter counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClusterSlots {
    /// The slots the cluster may have: the registered ones, within the cap.
    pub(crate) total: u32,
    /// The slots a scale-up may take now.
    pub(crate) free: u32,
}

/// Whether the cluster starts TaskManagers when its jobs need more slots (an active resource
/// manager: native Kubernetes or YARN), from its `deployment.target`.
fn can_grow(config: &[ConfigEntry]) -> bool {
    config
        .iter()
        .find(|e| e.key == "deployment.target")
        .is_some_and(|e| {
            let target = e.value.trim().to_ascii_lowercase();
            target.starts_with("kubernetes") || target.starts_with("yarn")
        })
}

/// `slotmanager.number-of-slots.max` when set to a bound (Flink's default, `Integer.MAX_VALUE`,
/// is none).
fn max_slots(config: &[ConfigEntry]) -> Option<u32> {
    config
        .iter()
        .find(|e| e.key == MAX_SLOTS_KEY)
        .and_then(|e| e.value.trim().parse::<u32>().ok())
        .filter(|&max| max < i32::MAX as u32)
}

/// The cluster's slots from its overview and configuration; `None` when the overview does not
/// report them, or when the cluster can grow without a cap (no bound to share).
pub(crate) fn cluster_slots(
    overview: &ClusterOverview,
    config: &[ConfigEntry],
) -> Option<ClusterSlots> {
    let count = |n: Option<i64>| n.and_then(|n| u32::try_from(n.max(0)).ok());
    let registered = count(overview.slots_total)?;
    let available = count(overview.slots_available)?.min(registered);
    let in_use = registered - available;
    match (max_slots(config), can_grow(config)) {
        (None, false) => Some(ClusterSlots {
            total: registered,
            free: available,
        }),
        (Some(max), false) => Some(ClusterSlots {
            total: max.min(registered),
            free: available.min(max.saturating_sub(in_use)),
        }),
        // New TaskManagers come for any slot within the cap.
        (Some(max), true) => Some(ClusterSlots {
            total: max,
            free: max.saturating_sub(in_use),
        }),
        (None, true) => None,
    }
}

/// What one job of the arbiter asks of the cluster and what it runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JobSlots {
    /// The slots of its resource requirements' upper bounds: what the scheduler will take for
    /// it as soon as they are free.
    pub(crate) declared: u32,
    /// The slots of the parallelism it runs at now.
    pub(crate) running: u32,
}

impl JobSlots {
    /// Declared and not yet running: slots that look free but that the job takes first.
    pub(crate) fn pending(&self) -> u32 {
        self.declared.saturating_sub(self.running)
    }
}

/// The slots of a job from its details (parallelism and slot-sharing groups) and its resource
/// requirements. A bound Flink reports as `-1` (none) or not positive counts at the running
/// parallelism, and a vertex without a requirement too.
pub(crate) fn job_slots(details: &JobDetails, requirements: &ResourceRequirements) -> JobSlots {
    let groups: BTreeMap<&str, &str> = details
        .vertices
        .iter()
        .filter_map(|v| Some((v.id.as_str(), v.slot_sharing_group_id.as_deref()?)))
        .collect();
    let running: BTreeMap<String, u32> = details
        .vertices
        .iter()
        .map(|v| {
            let p = v
                .parallelism
                .and_then(|p| u32::try_from(p).ok())
                .unwrap_or(0);
            (v.id.clone(), p)
        })
        .collect();
    let declared: BTreeMap<String, u32> = running
        .iter()
        .map(|(vertex, &p)| {
            let upper = requirements
                .get(vertex)
                .and_then(|r| u32::try_from(r.parallelism.upper_bound).ok())
                .filter(|&u| u > 0)
                .unwrap_or(p);
            (vertex.clone(), upper)
        })
        .collect();
    let group_of = |v: &str| groups.get(v).copied();
    JobSlots {
        declared: slots_needed(&declared, group_of),
        running: slots_needed(&running, group_of),
    }
}

/// The slots of one Flink cluster and of the jobs flowscale scales on it, read over its REST
/// API when the arbiter asks.
#[derive(Debug)]
pub(crate) struct FlinkSlots {
    client: FlinkClient,
    /// The jobs on it: name -> Flink job id.
    jobs: Mutex<BTreeMap<String, String>>,
}

impl FlinkSlots {
    /// The cluster behind `client`, no job yet.
    pub(crate) fn new(client: FlinkClient) -> FlinkSlots {
        FlinkSlots {
            client,
            jobs: Mutex::new(BTreeMap::new()),
        }
    }

    fn jobs(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        // A map of names, each update complete under the lock.
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `job` (Flink id `id`) runs on the cluster.
    pub(crate) fn join(&self, job: &str, id: &str) {
        self.jobs().insert(job.to_string(), id.to_string());
    }

    /// `job` left.
    pub(crate) fn leave(&self, job: &str) {
        self.jobs().remove(job);
    }

    /// The slots of the job `job`, read now.
    pub(crate) fn job(&self, job: &str) -> Result<JobSlots, EngineError> {
        let id = self
            .jobs()
            .get(job)
            .cloned()
            .ok_or_else(|| EngineError::Other(format!("{job} is not on the cluster")))?;
        let details: JobDetails = self.client.get(&format!("/jobs/{id}"))?;
        let requirements: ResourceRequirements = self
            .client
            .get(&format!("/jobs/{id}/resource-requirements"))?;
        Ok(job_slots(&details, &requirements))
    }

    /// The free slots, less those the cluster's jobs declared and do not run yet (they take
    /// them first).
    pub(crate) fn free(&self) -> Result<Option<u32>, EngineError> {
        let overview: ClusterOverview = self.client.get("/overview")?;
        // A cluster that hides its configuration has no cap that can be read.
        let config: Vec<ConfigEntry> = self.client.get("/jobmanager/config").unwrap_or_default();
        let Some(slots) = cluster_slots(&overview, &config) else {
            return Ok(None);
        };
        let names: Vec<String> = self.jobs().keys().cloned().collect();
        let mut pending = 0u32;
        for name in names {
            // A job that cannot be read now (restarting, gone) claims nothing more.
            if let Ok(job) = self.job(&name) {
                pending = pending.saturating_add(job.pending());
            }
        }
        Ok(Some(slots.free.saturating_sub(pending)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::flink::FlinkOptions;
    use crate::engine::flink::fake_server::FakeFlink;

    /// `GET /overview` of a Flink 2.3.0 session cluster started by `flink/cluster.sh` with
    /// `FLOWSCALE_FLINK_SLOTS=6`, running one job that holds 2 of its slots.
    const OVERVIEW: &str = include_str!("testdata/overview.json");

    fn overview(total: i64, available: i64) -> ClusterOverview {
        ClusterOverview {
            slots_total: Some(total),
            slots_available: Some(available),
        }
    }

    fn config(list: &[(&str, &str)]) -> Vec<ConfigEntry> {
        list.iter()
            .map(|(key, value)| ConfigEntry {
                key: key.to_string(),
                value: value.to_string(),
            })
            .collect()
    }

    #[test]
    fn a_real_overview_reads_as_its_slots() {
        let parsed: ClusterOverview = serde_json::from_str(OVERVIEW).expect("overview JSON");
        assert_eq!(parsed.slots_total, Some(6));
        assert_eq!(parsed.slots_available, Some(4));
        // A standalone cluster without a cap: the available slots are free.
        assert_eq!(
            cluster_slots(&parsed, &[]),
            Some(ClusterSlots { total: 6, free: 4 })
        );
        // An overview without slots (another version, a proxy's page): nothing known.
        let bare: ClusterOverview = serde_json::from_str(r#"{"taskmanagers":1}"#).expect("JSON");
        assert_eq!(cluster_slots(&bare, &[]), None);
    }

    #[test]
    fn the_cap_bounds_the_total_and_the_free_slots() {
        // 10 registered, 6 available: 4 in use. A cap of 7 leaves 7 - 4 = 3 of the 6 free.
        let capped = config(&[(MAX_SLOTS_KEY, "7")]);
        assert_eq!(
            cluster_slots(&overview(10, 6), &capped),
            Some(ClusterSlots { total: 7, free: 3 })
        );
        // A cap above what is registered changes nothing on a cluster that cannot grow.
        let loose = config(&[(MAX_SLOTS_KEY, "64")]);
        assert_eq!(
            cluster_slots(&overview(10, 6), &loose),
            Some(ClusterSlots { total: 10, free: 6 })
        );
        // In use beyond the cap (it was lowered): nothing is free.
        assert_eq!(
            cluster_slots(&overview(10, 2), &capped),
            Some(ClusterSlots { total: 7, free: 0 })
        );
        // Flink's default (Integer.MAX_VALUE) and an unreadable value are no cap.
        for value in ["2147483647", "lots", "-1"] {
            let c = config(&[(MAX_SLOTS_KEY, value)]);
            assert_eq!(
                cluster_slots(&overview(10, 6), &c),
                Some(ClusterSlots { total: 10, free: 6 }),
                "{value}"
            );
        }
        // Available above total (a racy answer) counts as all of them.
        assert_eq!(
            cluster_slots(&overview(4, 9), &[]),
            Some(ClusterSlots { total: 4, free: 4 })
        );
    }

    #[test]
    fn a_cluster_that_grows_counts_the_slots_new_task_managers_would_bring() {
        let k8s = |max: Option<&str>| {
            let mut c = config(&[("deployment.target", "kubernetes-session")]);
            c.extend(max.map(|m| ConfigEntry {
                key: MAX_SLOTS_KEY.to_string(),
                value: m.to_string(),
            }));
            c
        };
        // 4 registered, 1 available (3 in use), cap 12: new TaskManagers bring the rest, 12 - 3.
        assert_eq!(
            cluster_slots(&overview(4, 1), &k8s(Some("12"))),
            Some(ClusterSlots { total: 12, free: 9 })
        );
        // Without a cap there is no bound to share.
        assert_eq!(cluster_slots(&overview(4, 1), &k8s(None)), None);
        let yarn = config(&[("deployment.target", "yarn-session"), (MAX_SLOTS_KEY, "5")]);
        assert_eq!(
            cluster_slots(&overview(4, 1), &yarn),
            Some(ClusterSlots { total: 5, free: 2 })
        );
        // A standalone target (`remote`) does not grow.
        let remote = config(&[("deployment.target", "remote"), (MAX_SLOTS_KEY, "12")]);
        assert_eq!(
            cluster_slots(&overview(4, 1), &remote),
            Some(ClusterSlots { total: 4, free: 1 })
        );
    }

    fn details(vertices: &[(&str, i64, Option<&str>)]) -> JobDetails {
        let vertices: Vec<serde_json::Value> = vertices
            .iter()
            .map(|(id, p, group)| {
                serde_json::json!({"id": id, "parallelism": p, "slotSharingGroupId": group})
            })
            .collect();
        serde_json::from_value(serde_json::json!({"state": "RUNNING", "vertices": vertices}))
            .expect("details")
    }

    fn requirements(bounds: &[(&str, i64)]) -> ResourceRequirements {
        let map: serde_json::Map<String, serde_json::Value> = bounds
            .iter()
            .map(|(id, upper)| {
                (
                    id.to_string(),
                    serde_json::json!({"parallelism": {"lowerBound": 1, "upperBound": upper}}),
                )
            })
            .collect();
        serde_json::from_value(serde_json::Value::Object(map)).expect("requirements")
    }

    #[test]
    fn a_jobs_slots_count_its_slot_sharing_groups() {
        // Group g: src 2, map 2 -> 2; group h: sink 1 -> 1. Running: 3 slots.
        let d = details(&[
            ("src", 2, Some("g")),
            ("map", 2, Some("g")),
            ("sink", 1, Some("h")),
        ]);
        // Declared: g max(2, 5) = 5, h 3: 8 slots, 5 of them pending.
        let r = requirements(&[("src", 2), ("map", 5), ("sink", 3)]);
        let slots = job_slots(&d, &r);
        assert_eq!(
            slots,
            JobSlots {
                declared: 8,
                running: 3
            }
        );
        assert_eq!(slots.pending(), 5);
        // No group reported (Flink before 1.19): one default group, the widest vertex.
        let d = details(&[("src", 2, None), ("map", 2, None)]);
        // `-1` (no bound) and a missing vertex count at the running parallelism.
        let r = requirements(&[("src", -1)]);
        assert_eq!(
            job_slots(&d, &r),
            JobSlots {
                declared: 2,
                running: 2
            }
        );
    }

    #[test]
    fn free_slots_over_rest_subtract_what_the_jobs_declared_and_do_not_run() {
        let fake = FakeFlink::start();
        fake.json("GET /overview", OVERVIEW);
        fake.json(
            "GET /jobmanager/config",
            r#"[{"key":"slotmanager.number-of-slots.max","value":"5"}]"#,
        );
        let id = "00000000000000000000000000000001";
        fake.json(
            &format!("GET /jobs/{id}"),
            r#"{"state":"RUNNING","vertices":[{"id":"a","parallelism":1},{"id":"b","parallelism":1}]}"#,
        );
        fake.json(
            &format!("GET /jobs/{id}/resource-requirements"),
            r#"{"a":{"parallelism":{"lowerBound":1,"upperBound":3}},"b":{"parallelism":{"lowerBound":1,"upperBound":1}}}"#,
        );
        let slots = FlinkSlots::new(FlinkClient::new(FlinkOptions::new(fake.url())));
        // 6 registered, 4 available (2 in use), cap 5: 5 - 2 = 3 free before any job.
        assert_eq!(slots.free().expect("read"), Some(3));
        // The job declared 3 and runs on 1: 2 of those are its own.
        slots.join("j", id);
        assert_eq!(
            slots.job("j").expect("read"),
            JobSlots {
                declared: 3,
                running: 1
            }
        );
        assert_eq!(slots.free().expect("read"), Some(1));
        slots.leave("j");
        assert_eq!(slots.free().expect("read"), Some(3));
        assert!(slots.job("j").is_err());
    }

    #[test]
    fn an_unreadable_overview_is_an_error_and_a_hidden_configuration_no_cap() {
        let fake = FakeFlink::start();
        let slots = FlinkSlots::new(FlinkClient::new(FlinkOptions::new(fake.url())));
        assert!(slots.free().is_err());
        fake.json("GET /overview", OVERVIEW);
        assert_eq!(slots.free().expect("read"), Some(4));
    }
}
