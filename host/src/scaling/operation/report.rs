//! The scaling report: the event that lists every vertex of a decided operation with its
//! parallelism, processing capacity and target data rate.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use crate::events::{Event, EventReason, Severity};
use crate::scaling::metrics::{ScalingMetric, evaluated_or_nan};
use crate::scaling::numeric::{push_java_format_fixed, push_u32};
use crate::scaling::state::ScalingSummary;

/// Header of an executed operation's scaling report.
pub(crate) const REPORT_HEADER_ENABLED: &str = "Scaling execution enabled, begin scaling vertices:";
/// Header of a report when scaling is disabled or in an excluded period.
pub(crate) const REPORT_HEADER_DISABLED: &str = "Scaling execution disabled by config ";

/// The Flink autoscaler's scaling report: the header followed by one entry per vertex (no separator).
pub(crate) fn scaling_report<K: Borrow<str>>(
    job: &str,
    header: &str,
    summaries: &BTreeMap<K, ScalingSummary>,
) -> Event {
    // One buffer for the whole message; each entry reads
    // "{ Vertex ID v | Parallelism c -> n | Processing capacity a -> b | Target data rate r}".
    // An entry is its id and about 110 characters of text and numbers: one allocation. Built
    // as bytes (every piece is text) and made a `String` once: checking every number's few
    // bytes for UTF-8 on its own cost as much as writing them.
    let entries: usize = summaries.keys().map(|v| v.borrow().len() + 128).sum();
    let mut message: Vec<u8> = Vec::with_capacity(header.len() + entries);
    message.extend_from_slice(header.as_bytes());
    let get = |s: &ScalingSummary, m: ScalingMetric| evaluated_or_nan(&s.metrics, m);
    for (vertex, s) in summaries {
        let vertex: &str = vertex.borrow();
        // Piece by piece: the formatting machinery was most of the report's cost.
        message.extend_from_slice(b"{ Vertex ID ");
        message.extend_from_slice(vertex.as_bytes());
        message.extend_from_slice(b" | Parallelism ");
        push_u32(&mut message, s.current_parallelism);
        message.extend_from_slice(b" -> ");
        push_u32(&mut message, s.new_parallelism);
        message.extend_from_slice(b" | Processing capacity ");
        push_java_format_fixed(
            &mut message,
            get(s, ScalingMetric::TrueProcessingRate).average,
            2,
        );
        message.extend_from_slice(b" -> ");
        push_java_format_fixed(
            &mut message,
            get(s, ScalingMetric::ExpectedProcessingRate).current,
            2,
        );
        message.extend_from_slice(b" | Target data rate ");
        push_java_format_fixed(
            &mut message,
            get(s, ScalingMetric::TargetDataRate).average,
            2,
        );
        message.push(b'}');
    }
    // Only text was appended.
    let message = String::from_utf8(message)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    Event::new(EventReason::ScalingReport, Severity::Normal, message).job(job)
}
