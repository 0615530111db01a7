//! The size of one TaskManager of a Flink cluster, for the resource quota
//! (docs/decision-pipeline.md#resource-quota), from `GET /jobmanager/config` and
//! `GET /taskmanagers`.
//!
//! The Flink autoscaler takes the TaskManager's CPU and total process memory from the
//! deployment's spec (`kubernetes.taskmanager.cpu`, `taskmanager.memory.process.size`) and the
//! slots from `taskmanager.numberOfTaskSlots`. The cluster's configuration is the spec here,
//! read first; what the registered TaskManagers report stands in for a key the configuration
//! does not set (a standalone cluster often sets no CPU, and its TaskManagers may have their own
//! configuration files):
//!
//! - CPU: `kubernetes.taskmanager.cpu` (the pod's CPU on native Kubernetes), else
//!   `taskmanager.cpu.cores`, else the largest `totalResource.cpuCores` of the TaskManagers (the
//!   CPU Flink gave them: `taskmanager.cpu.cores`, else their slot count). The machine's own
//!   cores (`hardware.cpuCores`) are not the TaskManager's size and are not used.
//! - Memory: `taskmanager.memory.process.size`, else the largest
//!   `memoryConfiguration.totalProcessMemory`.
//! - Slots: `taskmanager.numberOfTaskSlots`, else the largest `slotsNumber`.
//!
//! A value that is missing, unreadable or not positive is unknown (`None`).

use super::rest::{ConfigEntry, TaskManagerInfo};
use crate::config::parse_memory_size;
use crate::engine::TaskManagerResources;

/// The TaskManager size from the cluster's configuration and its TaskManagers (either may be
/// empty when it could not be read); `None` when nothing at all is known.
pub(crate) fn task_manager_resources(
    config: &[ConfigEntry],
    task_managers: &[TaskManagerInfo],
) -> Option<TaskManagerResources> {
    let get = |key: &str| config.iter().find(|e| e.key == key).map(|e| e.value.trim());
    let positive = |x: f64| (x.is_finite() && x > 0.0).then_some(x);
    let cpu_cores = ["kubernetes.taskmanager.cpu", "taskmanager.cpu.cores"]
        .into_iter()
        .find_map(|key| {
            get(key)
                .and_then(|v| v.parse::<f64>().ok())
                .and_then(positive)
        })
        .or_else(|| {
            largest(task_managers.iter().filter_map(|tm| {
                tm.total_resource
                    .as_ref()
                    .and_then(|r| r.cpu_cores)
                    .and_then(positive)
            }))
        });
    let memory_bytes = get("taskmanager.memory.process.size")
        .and_then(|v| parse_memory_size(v).ok())
        .filter(|&b| b > 0)
        .or_else(|| {
            task_managers
                .iter()
                .filter_map(|tm| {
                    tm.memory_configuration
                        .as_ref()
                        .and_then(|m| m.total_process_memory)
                })
                .filter(|&b| b > 0)
                .max()
        });
    let slots = get("taskmanager.numberOfTaskSlots")
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|&n| n > 0)
        .or_else(|| {
            task_managers
                .iter()
                .filter_map(|tm| tm.slots_number.and_then(|n| u32::try_from(n).ok()))
                .filter(|&n| n > 0)
                .max()
        });
    let resources = TaskManagerResources {
        cpu_cores,
        memory_bytes,
        slots,
    };
    (resources != TaskManagerResources::default()).then_some(resources)
}

/// The largest of some finite numbers.
fn largest(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.reduce(f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::flink::rest::TaskManagersAnswer;

    /// `GET /taskmanagers` and `GET /jobmanager/config` of a Flink 2.3.0 standalone cluster
    /// started by `flink/cluster.sh` (8 slots, `taskmanager.memory.process.size: 1536m`, no
    /// CPU configured).
    const TASKMANAGERS: &str = include_str!("testdata/taskmanagers.json");
    const JM_CONFIG: &str = include_str!("testdata/jobmanager_config.json");

    fn flink_2_3() -> (Vec<ConfigEntry>, Vec<TaskManagerInfo>) {
        let config: Vec<ConfigEntry> = serde_json::from_str(JM_CONFIG).expect("config JSON");
        let tms: TaskManagersAnswer = serde_json::from_str(TASKMANAGERS).expect("TMs JSON");
        (config, tms.taskmanagers)
    }

    fn entry(key: &str, value: &str) -> ConfigEntry {
        ConfigEntry {
            key: key.into(),
            value: value.into(),
        }
    }

    #[test]
    fn a_real_flink_2_3_cluster_reads_as_its_spec() {
        let (config, tms) = flink_2_3();
        assert_eq!(tms.len(), 1);
        let got = task_manager_resources(&config, &tms).expect("known");
        // No CPU key in the configuration: the TaskManager's totalResource.cpuCores, 8.0 (its
        // slot count), not the machine's 2 hardware cores.
        assert_eq!(got.cpu_cores, Some(8.0));
        // `1536m` from the configuration = 1536 · 2^20, which is also the TaskManager's
        // memoryConfiguration.totalProcessMemory (1 610 612 736).
        assert_eq!(got.memory_bytes, Some(1_610_612_736));
        assert_eq!(got.slots, Some(8));
    }

    #[test]
    fn the_configuration_wins_over_what_the_task_managers_report() {
        let (mut config, tms) = flink_2_3();
        config.retain(|e| {
            e.key != "taskmanager.memory.process.size" && e.key != "taskmanager.numberOfTaskSlots"
        });
        // Without the keys: the TaskManagers' own numbers.
        let got = task_manager_resources(&config, &tms).expect("known");
        assert_eq!(got.memory_bytes, Some(1_610_612_736));
        assert_eq!(got.slots, Some(8));
        // With them: the configuration's, the Kubernetes CPU first.
        config.extend([
            entry("taskmanager.cpu.cores", "3.0"),
            entry("kubernetes.taskmanager.cpu", "2.5"),
            entry("taskmanager.memory.process.size", "4 gb"),
            entry("taskmanager.numberOfTaskSlots", "4"),
        ]);
        let got = task_manager_resources(&config, &tms).expect("known");
        assert_eq!(got.cpu_cores, Some(2.5));
        assert_eq!(got.memory_bytes, Some(4 << 30));
        assert_eq!(got.slots, Some(4));
        config.retain(|e| e.key != "kubernetes.taskmanager.cpu");
        let got = task_manager_resources(&config, &tms).expect("known");
        assert_eq!(got.cpu_cores, Some(3.0));
    }

    #[test]
    fn unreadable_or_non_positive_values_fall_back_or_are_unknown() {
        let (_, tms) = flink_2_3();
        let config = [
            entry("kubernetes.taskmanager.cpu", "-1"),
            entry("taskmanager.cpu.cores", "lots"),
            entry("taskmanager.memory.process.size", "1.5g"),
            entry("taskmanager.numberOfTaskSlots", "0"),
        ];
        let got = task_manager_resources(&config, &tms).expect("known");
        assert_eq!(
            got,
            TaskManagerResources {
                cpu_cores: Some(8.0),
                memory_bytes: Some(1_610_612_736),
                slots: Some(8),
            }
        );
        // Neither source: nothing known.
        assert_eq!(task_manager_resources(&config, &[]), None);
        assert_eq!(task_manager_resources(&[], &[]), None);
        // A TaskManager without the optional objects (an older Flink) reads as unknown.
        let bare: TaskManagersAnswer =
            serde_json::from_str(r#"{"taskmanagers":[{"id":"tm"}]}"#).expect("JSON");
        assert_eq!(task_manager_resources(&[], &bare.taskmanagers), None);
    }

    #[test]
    fn several_task_managers_count_the_largest() {
        let tms: TaskManagersAnswer = serde_json::from_str(
            r#"{"taskmanagers":[
                {"slotsNumber":2,"totalResource":{"cpuCores":1.0},"memoryConfiguration":{"totalProcessMemory":1000}},
                {"slotsNumber":4,"totalResource":{"cpuCores":2.0},"memoryConfiguration":{"totalProcessMemory":3000}},
                {"slotsNumber":3,"totalResource":{"cpuCores":1.5},"memoryConfiguration":{"totalProcessMemory":2000}}
            ]}"#,
        )
        .expect("JSON");
        let got = task_manager_resources(&[], &tms.taskmanagers).expect("known");
        assert_eq!(
            got,
            TaskManagerResources {
                cpu_cores: Some(2.0),
                memory_bytes: Some(3000),
                slots: Some(4),
            }
        );
    }
}
