//! The resource quota (`quota.cpu`, `quota.memory`): an operation that would need more
//! TaskManagers than the quota holds is blocked, as the Flink autoscaler's
//! `scalingWouldExceedResourceQuota` does (docs/decision-pipeline.md#resource-quota).
//!
//! The TaskManagers are counted from the operation alone: per slot-sharing group the widest
//! vertex among those that change (a group needs as many slots as its widest vertex), summed
//! over the groups and divided by the slots per TaskManager, rounding down. The count before
//! and after the operation are compared; only an operation that needs more TaskManagers is
//! checked against the quota, with the size of one TaskManager as the engine reports it.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use crate::engine::{ObservedVertex, TaskManagerResources};
use crate::events::{Event, EventReason, Severity};
use crate::scaling::options::AutoscalerOptions;
use crate::scaling::state::ScalingSummary;

/// The Flink autoscaler's message of a `ResourceQuotaReached` event.
pub(crate) const RESOURCE_QUOTA_REACHED_MESSAGE: &str = "Resource usage is above the allowed limit for scaling operations. Please adjust the resource quota manually.";

/// The TaskManagers an operation needs before and after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TaskManagerCount {
    /// At the vertices' current parallelism.
    pub(crate) current: u64,
    /// At the operation's new parallelism.
    pub(crate) new: u64,
}

/// The TaskManagers the changing vertices need, before and after the operation: per
/// slot-sharing group the largest current (new) parallelism among the group's vertices that
/// have a summary (0 for a group without one), summed over the groups, divided by
/// `slots_per_tm` rounding down (Java's integer division, as the Flink autoscaler computes
/// it). Vertices without a group count in none. `slots_per_tm` 0 is taken as 1.
pub(crate) fn task_managers_needed<K: Borrow<str> + Ord>(
    vertices: &[ObservedVertex],
    summaries: &BTreeMap<K, ScalingSummary>,
    slots_per_tm: u32,
) -> TaskManagerCount {
    // Group -> (widest current, widest new) over the group's summarized vertices.
    let mut groups: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for vertex in vertices {
        let Some(group) = vertex.slot_sharing_group.as_deref() else {
            continue;
        };
        let widest = groups.entry(group).or_insert((0, 0));
        if let Some(s) = summaries.get(vertex.id.as_str()) {
            widest.0 = widest.0.max(u64::from(s.current_parallelism));
            widest.1 = widest.1.max(u64::from(s.new_parallelism));
        }
    }
    let slots = u64::from(slots_per_tm.max(1));
    let (current, new) = groups
        .values()
        .fold((0, 0), |(c, n), &(gc, gn)| (c + gc, n + gn));
    TaskManagerCount {
        current: current / slots,
        new: new / slots,
    }
}

/// Whether the operation `summaries` exceeds the job's quota: the Flink autoscaler's rule.
///
/// Not checked (false) when no quota is set or no vertex has a slot-sharing group. An
/// operation that needs no more TaskManagers than now always passes. Otherwise it is blocked
/// when `cpu · new TaskManagers > quota.cpu` or `memory · new TaskManagers > quota.memory`;
/// a TaskManager size the engine does not report counts as 0 (as the Flink autoscaler reads
/// an unknown size), so that quota never blocks. Slots per TaskManager default to Flink's 1.
pub(crate) fn exceeds_quota<K: Borrow<str> + Ord>(
    quota_cpu: Option<f64>,
    quota_memory: Option<u64>,
    vertices: &[ObservedVertex],
    task_managers: Option<TaskManagerResources>,
    summaries: &BTreeMap<K, ScalingSummary>,
) -> bool {
    if quota_cpu.is_none() && quota_memory.is_none() {
        return false;
    }
    if vertices.iter().all(|v| v.slot_sharing_group.is_none()) {
        return false;
    }
    let tm = task_managers.unwrap_or_default();
    let count = task_managers_needed(vertices, summaries, tm.slots.unwrap_or(1));
    if count.new <= count.current {
        return false;
    }
    if let Some(quota) = quota_cpu {
        let total = tm.cpu_cores.unwrap_or(0.0) * count.new as f64;
        if total > quota {
            tracing::debug!(total, quota, "CPU resource quota reached");
            return true;
        }
    }
    if let Some(quota) = quota_memory {
        // In 128 bits: a product of two 64-bit numbers cannot overflow it.
        let total = u128::from(tm.memory_bytes.unwrap_or(0)) * u128::from(count.new);
        if total > u128::from(quota) {
            tracing::debug!(%total, quota, "memory resource quota reached");
            return true;
        }
    }
    false
}

/// The `ResourceQuotaReached` warning when the operation exceeds the job's quota, else `None`.
/// Without a key: identical events are suppressed by reason and message for
/// `scaling.event.interval`, as the Flink autoscaler reports it.
pub(crate) fn resource_quota_reached<K: Borrow<str> + Ord>(
    job: &str,
    opts: &AutoscalerOptions,
    vertices: &[ObservedVertex],
    task_managers: Option<TaskManagerResources>,
    summaries: &BTreeMap<K, ScalingSummary>,
) -> Option<Event> {
    exceeds_quota(
        opts.quota_cpu,
        opts.quota_memory,
        vertices,
        task_managers,
        summaries,
    )
    .then(|| {
        Event::new(
            EventReason::ResourceQuotaReached,
            Severity::Warning,
            RESOURCE_QUOTA_REACHED_MESSAGE,
        )
        .job(job)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaling::metrics::VertexEvaluation;

    const GIB: u64 = 1 << 30;

    fn vertex(id: &str, group: Option<&str>) -> ObservedVertex {
        ObservedVertex {
            id: id.into(),
            name: id.into(),
            parallelism: 1,
            max_parallelism: 720,
            source_partitions: 0,
            finished: false,
            slot_sharing_group: group.map(str::to_string),
        }
    }

    fn summaries(changes: &[(&str, u32, u32)]) -> BTreeMap<String, ScalingSummary> {
        changes
            .iter()
            .map(|&(id, current, new)| {
                let summary = ScalingSummary {
                    current_parallelism: current,
                    new_parallelism: new,
                    metrics: VertexEvaluation::new(),
                };
                (id.to_string(), summary)
            })
            .collect()
    }

    /// The Flink autoscaler's quota test job: TaskManagers of 2 cores and 2 GiB with 2 slots,
    /// two vertices at parallelism 1 whose decisions are 1 -> 4 and 1 -> 3 (utilization 0.6,
    /// target rates 210 and 110 at a true processing rate of 100, 5 min restart over 30 min
    /// catch-up: 210/0.6 + 210·300/1800 = 385 -> factor 3.85 -> 4; 110/0.6 + 110·300/1800
    /// = 201.67 -> 2.02 -> 3; both divide 720 key groups).
    fn tm() -> Option<TaskManagerResources> {
        Some(TaskManagerResources {
            cpu_cores: Some(2.0),
            memory_bytes: Some(2 * GIB),
            slots: Some(2),
        })
    }

    fn job(same_group: bool) -> Vec<ObservedVertex> {
        let second = if same_group { "g1" } else { "g2" };
        vec![vertex("op1", Some("g1")), vertex("op2", Some(second))]
    }

    fn decided() -> BTreeMap<String, ScalingSummary> {
        summaries(&[("op1", 1, 4), ("op2", 1, 3)])
    }

    #[test]
    fn task_managers_count_the_widest_vertex_of_each_group_rounding_down() {
        // One group: max(1, 1) = 1 slot now -> 1/2 = 0 TMs; max(4, 3) = 4 slots -> 2 TMs.
        let one = task_managers_needed(&job(true), &decided(), 2);
        assert_eq!(one, TaskManagerCount { current: 0, new: 2 });
        // Two groups: 1 + 1 = 2 slots -> 1 TM; 4 + 3 = 7 slots -> 7/2 = 3 TMs (not 4).
        let two = task_managers_needed(&job(false), &decided(), 2);
        assert_eq!(two, TaskManagerCount { current: 1, new: 3 });
        // Only summarized vertices count: a third, unchanged vertex at parallelism 9 in its
        // own group adds nothing; a group without summaries counts 0.
        let mut vertices = job(false);
        vertices.push(vertex("wide", Some("g3")));
        let three = task_managers_needed(&vertices, &decided(), 2);
        assert_eq!(three, TaskManagerCount { current: 1, new: 3 });
        // A vertex without a group counts in none: only op1's group, 1 -> 4 slots.
        let ungrouped = vec![vertex("op1", Some("g1")), vertex("op2", None)];
        let count = task_managers_needed(&ungrouped, &decided(), 1);
        assert_eq!(count, TaskManagerCount { current: 1, new: 4 });
    }

    /// The Flink autoscaler's eight quota cases (`testQuota`), with the totals derived above:
    /// one group needs 2 TaskManagers (4 cores, 4 GiB), two groups need 3 (6 cores, 6 GiB).
    #[test]
    fn quota_cases_of_the_flink_autoscaler() {
        let cases: [(bool, Option<f64>, Option<u64>, bool); 8] = [
            // same group, cpu 4 <= 30: allowed
            (true, Some(30.0), None, false),
            // two groups, cpu 6 <= 50: allowed
            (false, Some(50.0), None, false),
            // same group, memory 4 GiB <= 30 GiB: allowed
            (true, None, Some(30 * GIB), false),
            // two groups, memory 6 GiB <= 50 GiB: allowed
            (false, None, Some(50 * GIB), false),
            // same group, cpu 4 > 3: blocked
            (true, Some(3.0), None, true),
            // two groups, cpu 6 > 5: blocked
            (false, Some(5.0), None, true),
            // same group, memory 4 GiB > 3 GiB: blocked
            (true, None, Some(3 * GIB), true),
            // two groups, memory 6 GiB > 5 GiB: blocked
            (false, None, Some(5 * GIB), true),
        ];
        for (same_group, cpu, memory, blocked) in cases {
            assert_eq!(
                exceeds_quota(cpu, memory, &job(same_group), tm(), &decided()),
                blocked,
                "same group {same_group}, cpu {cpu:?}, memory {memory:?}"
            );
        }
    }

    #[test]
    fn the_quota_is_exceeded_only_strictly_and_after_rounding_down() {
        // Two groups need 7 slots = 3 full TaskManagers (6 cores, 6 GiB): exactly the quota
        // passes; rounding up (4 TaskManagers, 8 cores) would have blocked.
        assert!(!exceeds_quota(
            Some(6.0),
            None,
            &job(false),
            tm(),
            &decided()
        ));
        assert!(!exceeds_quota(
            None,
            Some(6 * GIB),
            &job(false),
            tm(),
            &decided()
        ));
        assert!(exceeds_quota(
            Some(5.99),
            None,
            &job(false),
            tm(),
            &decided()
        ));
        assert!(exceeds_quota(
            None,
            Some(6 * GIB - 1),
            &job(false),
            tm(),
            &decided()
        ));
        // Either quota blocks on its own when both are set.
        assert!(exceeds_quota(
            Some(100.0),
            Some(GIB),
            &job(false),
            tm(),
            &decided()
        ));
        assert!(exceeds_quota(
            Some(1.0),
            Some(100 * GIB),
            &job(false),
            tm(),
            &decided()
        ));
    }

    #[test]
    fn an_operation_needing_no_more_task_managers_passes() {
        // With 4 slots per TM, 3 -> 4 in one group goes from 3/4 = 0 to 4/4 = 1 TM: checked,
        // and a zero quota blocks it; 4 -> 7 stays at 1 TM (4/4 = 7/4 = 1) and passes any
        // quota, even 0.
        let four_slots = Some(TaskManagerResources {
            slots: Some(4),
            ..tm().unwrap_or_default()
        });
        let vertices = vec![vertex("a", Some("g"))];
        let up = summaries(&[("a", 3, 4)]);
        assert!(exceeds_quota(Some(0.0), None, &vertices, four_slots, &up));
        let within = summaries(&[("a", 4, 7)]);
        assert!(!exceeds_quota(
            Some(0.0),
            Some(0),
            &vertices,
            four_slots,
            &within
        ));
        // A scale-down never needs more.
        let down = summaries(&[("a", 8, 2)]);
        assert!(!exceeds_quota(
            Some(0.0),
            Some(0),
            &vertices,
            four_slots,
            &down
        ));
    }

    #[test]
    fn no_quota_no_groups_or_an_unknown_size_never_block() {
        assert!(!exceeds_quota(None, None, &job(true), tm(), &decided()));
        let ungrouped = vec![vertex("op1", None), vertex("op2", None)];
        assert!(!exceeds_quota(
            Some(0.0),
            Some(0),
            &ungrouped,
            tm(),
            &decided()
        ));
        // Unknown cores and memory count as 0: 0 · n never exceeds a quota >= 0. Unknown
        // slots are Flink's default 1.
        let unknown = Some(TaskManagerResources::default());
        assert!(!exceeds_quota(
            Some(0.0),
            Some(0),
            &job(true),
            unknown,
            &decided()
        ));
        assert!(!exceeds_quota(
            Some(0.0),
            Some(0),
            &job(true),
            None,
            &decided()
        ));
        // Known cores only: the CPU quota applies, the memory quota cannot.
        let cores_only = Some(TaskManagerResources {
            cpu_cores: Some(1.0),
            ..TaskManagerResources::default()
        });
        // One slot per TM: 1 -> 4 slots = 4 TMs, 4 cores.
        assert!(exceeds_quota(
            Some(3.0),
            None,
            &job(true),
            cores_only,
            &decided()
        ));
        assert!(!exceeds_quota(
            None,
            Some(0),
            &job(true),
            cores_only,
            &decided()
        ));
    }

    #[test]
    fn the_event_is_a_keyless_warning_with_the_flink_message() {
        let opts = AutoscalerOptions {
            quota_cpu: Some(3.0),
            ..AutoscalerOptions::default()
        };
        let event =
            resource_quota_reached("j", &opts, &job(true), tm(), &decided()).expect("4 cores > 3");
        assert_eq!(event.reason, EventReason::ResourceQuotaReached);
        assert_eq!(event.severity, Severity::Warning);
        assert_eq!(event.job.as_deref(), Some("j"));
        assert_eq!(event.key, None);
        assert_eq!(
            event.message,
            "Resource usage is above the allowed limit for scaling operations. Please adjust the resource quota manually."
        );
        let roomy = AutoscalerOptions {
            quota_cpu: Some(4.0),
            ..AutoscalerOptions::default()
        };
        assert!(resource_quota_reached("j", &roomy, &job(true), tm(), &decided()).is_none());
    }
}
