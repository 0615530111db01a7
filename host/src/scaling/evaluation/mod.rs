//! Evaluation of the metric window: rates along the job graph, the true processing rate and the
//! utilization band of every vertex, and the job-wide metrics.

mod capacity;
mod evaluate;
mod flow;
mod global;
mod rates;
mod vertices;

pub(crate) use capacity::capacity;
pub(crate) use evaluate::Evaluation;
pub(crate) use evaluate::evaluate;
pub use vertices::EvaluatedVertices;
#[cfg(any(test, feature = "test-support"))]
pub use vertices::MetricTriples;
