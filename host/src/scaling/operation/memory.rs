//! Memory pressure: GC time or heap usage above its threshold blocks every scaling operation,
//! since more parallelism would not help a job short of memory.

use crate::events::{Event, EventReason, Severity};
use crate::scaling::evaluation::Evaluation;
use crate::scaling::metrics::ScalingMetric;
use crate::scaling::numeric::java_double_to_string;
use crate::scaling::options::AutoscalerOptions;

/// GC or heap pressure above the thresholds blocks scaling (docs/decision-pipeline.md#memory-pressure).
pub(crate) fn memory_pressure(
    job: &str,
    opts: &AutoscalerOptions,
    evaluation: &Evaluation,
) -> Option<Event> {
    let get = |m: ScalingMetric| evaluation.global.get(&m).copied();
    let gc = get(ScalingMetric::GcPressure).map_or(f64::NAN, |m| m.current);
    let heap = get(ScalingMetric::HeapMaxUsageRatio).map_or(f64::NAN, |m| m.average);
    let (key, message) = if gc > opts.gc_pressure_threshold {
        (
            "gcPressure",
            format!(
                "GC Pressure {} is above the allowed limit for scaling operations. Please adjust the available memory manually.",
                java_double_to_string(gc)
            ),
        )
    } else if heap > opts.heap_usage_threshold {
        (
            "heapUsage",
            format!(
                "Heap Usage {} is above the allowed limit for scaling operations. Please adjust the available memory manually.",
                java_double_to_string(heap)
            ),
        )
    } else {
        return None;
    };
    Some(
        Event::new(EventReason::MemoryPressure, Severity::Normal, message)
            .job(job)
            .key(key),
    )
}
