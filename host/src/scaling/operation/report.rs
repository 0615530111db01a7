//! The scaling report: the event that lists every vertex of a decided operation with its
//! parallelism, processing capacity and target data rate.

use std::collections::BTreeMap;

use crate::events::{Event, EventReason, Severity};
use crate::scaling::metrics::{ScalingMetric, evaluated_or_nan};
use crate::scaling::numeric::java_format_fixed;
use crate::scaling::state::ScalingSummary;

/// Header of an executed operation's scaling report.
pub const REPORT_HEADER_ENABLED: &str = "Scaling execution enabled, begin scaling vertices:";
/// Header of a report when scaling is disabled or in an excluded period.
pub const REPORT_HEADER_DISABLED: &str = "Scaling execution disabled by config ";

/// The anchor's scaling report: the header followed by one entry per vertex (no separator).
pub(crate) fn scaling_report(
    job: &str,
    header: &str,
    summaries: &BTreeMap<String, ScalingSummary>,
) -> Event {
    let mut message = header.to_string();
    let get = |s: &ScalingSummary, m: ScalingMetric| evaluated_or_nan(&s.metrics, m);
    for (vertex, s) in summaries {
        message.push_str(&format!(
            "{{ Vertex ID {} | Parallelism {} -> {} | Processing capacity {} -> {} | Target data rate {}}}",
            vertex,
            s.current_parallelism,
            s.new_parallelism,
            java_format_fixed(get(s, ScalingMetric::TrueProcessingRate).average, 2),
            java_format_fixed(get(s, ScalingMetric::ExpectedProcessingRate).current, 2),
            java_format_fixed(get(s, ScalingMetric::TargetDataRate).average, 2),
        ));
    }
    Event::new(EventReason::ScalingReport, Severity::Normal, message).job(job)
}
