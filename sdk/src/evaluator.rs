//! The trait a custom metric evaluator implements, and what it sees.
//!
//! An evaluator adds to or overrides the metrics the pipeline evaluated for a vertex: a target
//! rate from an external SLO, a backlog the engine cannot see. The host calls it for every
//! vertex, in topological order, after the vertex's own evaluation (rates, utilization band);
//! what it returns is merged into the vertex's metrics before the next vertex is evaluated, so
//! downstream vertices see the merged target and catch-up rates. The band's thresholds are not
//! recomputed after the merge.

use std::sync::Arc;

use crate::context::{EvaluatedMetric, JobTopology};
use crate::mode::ModeError;
use crate::params::ModeParams;

/// The evaluated metrics of one vertex, by metric name (`TARGET_DATA_RATE`, `LAG`, ...), sorted
/// by name.
pub type VertexMetrics = Vec<(String, EvaluatedMetric)>;

/// A vertex evaluated before the one an evaluator is called for, with its metrics as merged.
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluatedVertex {
    /// The vertex id.
    pub vertex_id: String,
    /// Its evaluated metrics, after the evaluator's own answer for it was merged.
    pub metrics: VertexMetrics,
}

/// What an evaluator sees for one vertex of one cycle. Immutable: the answer is the only way to
/// change the vertex's metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluatorContext {
    job: String,
    vertex_id: String,
    vertex_name: String,
    metrics: VertexMetrics,
    evaluated: Vec<EvaluatedVertex>,
    backlog: bool,
    topology: Arc<JobTopology>,
    params: ModeParams,
}

impl EvaluatorContext {
    /// A context for vertex `vertex_id` of `job` with its evaluated `metrics` (sorted here by
    /// name); the rest starts empty (see the `with_*` methods).
    pub fn new(
        job: impl Into<String>,
        vertex_id: impl Into<String>,
        mut metrics: VertexMetrics,
    ) -> EvaluatorContext {
        metrics.sort_by(|a, b| a.0.cmp(&b.0));
        EvaluatorContext {
            job: job.into(),
            vertex_id: vertex_id.into(),
            vertex_name: String::new(),
            metrics,
            evaluated: Vec::new(),
            backlog: false,
            topology: Arc::default(),
            params: ModeParams::default(),
        }
    }

    /// Sets the vertex's name.
    pub fn with_vertex_name(mut self, name: impl Into<String>) -> Self {
        self.vertex_name = name.into();
        self
    }

    /// Sets the vertices evaluated before this one, in topological order.
    pub fn with_evaluated(mut self, evaluated: Vec<EvaluatedVertex>) -> Self {
        self.evaluated = evaluated;
        self
    }

    /// Sets whether some source of the job is processing a backlog.
    pub fn with_backlog(mut self, backlog: bool) -> Self {
        self.backlog = backlog;
        self
    }

    /// Sets the job graph.
    pub fn with_topology(mut self, topology: Arc<JobTopology>) -> Self {
        self.topology = topology;
        self
    }

    /// Sets the evaluator instance's parameters.
    pub fn with_params(mut self, params: ModeParams) -> Self {
        self.params = params;
        self
    }

    /// The job's name.
    pub fn job_name(&self) -> &str {
        &self.job
    }

    /// The vertex's id.
    pub fn vertex_id(&self) -> &str {
        &self.vertex_id
    }

    /// The vertex's name (empty when the engine gives none).
    pub fn vertex_name(&self) -> &str {
        &self.vertex_name
    }

    /// The vertex's evaluated metrics, sorted by name.
    pub fn metrics(&self) -> &[(String, EvaluatedMetric)] {
        &self.metrics
    }

    /// One evaluated metric of the vertex by name.
    pub fn metric(&self, name: &str) -> Option<EvaluatedMetric> {
        self.metrics
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| self.metrics[i].1)
    }

    /// The vertices evaluated before this one, in topological order, with their merged metrics.
    pub fn evaluated(&self) -> &[EvaluatedVertex] {
        &self.evaluated
    }

    /// Whether some source of the job is processing a backlog (its lag exceeds
    /// `backlog-processing.lag-threshold`).
    pub fn is_processing_backlog(&self) -> bool {
        self.backlog
    }

    /// The job graph.
    pub fn topology(&self) -> &JobTopology {
        &self.topology
    }

    /// The instance's prefix-stripped `metrics.custom-evaluator.<name>.*` parameters.
    pub fn params(&self) -> &ModeParams {
        &self.params
    }
}

/// A custom metric evaluator.
pub trait MetricEvaluator: Send + Sync {
    /// The metrics to merge into the vertex's: for a metric the vertex has, the current and
    /// the average value each replace the evaluated one unless NaN; a metric it does not have
    /// is added. Return an empty list to change nothing.
    fn evaluate(&self, ctx: &EvaluatorContext) -> Result<VertexMetrics, ModeError>;

    /// Checks the instance's parameters when a configuration is loaded, so that bad values are
    /// reported by `flowscale validate` rather than at the first cycle.
    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        let _ = params;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_sorted_and_found_by_name() {
        let m = |v| EvaluatedMetric {
            current: v,
            average: v,
        };
        let ctx = EvaluatorContext::new(
            "job",
            "v1",
            vec![
                ("LAG".into(), m(3.0)),
                ("CATCH_UP_DATA_RATE".into(), m(1.0)),
            ],
        );
        assert_eq!(ctx.metrics()[0].0, "CATCH_UP_DATA_RATE");
        assert_eq!(ctx.metric("LAG"), Some(m(3.0)));
        assert_eq!(ctx.metric("TARGET_DATA_RATE"), None);
    }
}
