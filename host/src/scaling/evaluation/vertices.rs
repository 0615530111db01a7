//! The evaluated metrics of every vertex of one topology: held by the topology's index, read and
//! reported by vertex id.
//!
//! Every cycle of every job evaluates every vertex, and the outcome reports the metrics by vertex
//! id. A map keyed by `String` would copy each id and move each vertex's metrics into its nodes
//! every cycle; this set keeps the metrics where the evaluation wrote them and looks ids up in the
//! kept topology's index, which already lists them in id order. It reads, iterates, compares,
//! prints and serializes as a `BTreeMap<String, VertexEvaluation>` of the same entries does.

use std::fmt;
use std::sync::Arc;

use serde::ser::{Serialize, Serializer};

use crate::scaling::metrics::VertexEvaluation;
use crate::scaling::topology::VertexIds;

/// A vertex's metrics as `(metric, current, average)`, for [`EvaluatedVertices::of`].
#[cfg(any(test, feature = "test-support"))]
pub type MetricTriples = Vec<(crate::scaling::ScalingMetric, f64, f64)>;

/// The evaluated metrics of a topology's vertices, by vertex id.
#[derive(Clone, Default)]
pub struct EvaluatedVertices {
    /// The topology's vertex ids with their indices; `None` when nothing was evaluated (an empty
    /// set, built without allocating).
    ids: Option<Arc<VertexIds>>,
    /// The metrics of the topology's vertex `i` at place `i`.
    pub(crate) values: Vec<VertexEvaluation>,
}

impl EvaluatedVertices {
    /// The metrics `values` of the vertices of `ids`, by index.
    pub(crate) fn new(ids: Arc<VertexIds>, values: Vec<VertexEvaluation>) -> EvaluatedVertices {
        EvaluatedVertices {
            ids: Some(ids),
            values,
        }
    }

    /// Vertices with their metrics, each `(metric, current, average)`, as a cycle reports
    /// them: for tests and benchmarks that feed what a cycle evaluated to its readers.
    #[cfg(any(test, feature = "test-support"))]
    pub fn of(vertices: Vec<(Arc<str>, MetricTriples)>) -> EvaluatedVertices {
        let (ids, values): (Vec<Arc<str>>, Vec<VertexEvaluation>) = vertices
            .into_iter()
            .map(|(id, metrics)| {
                let mut m = VertexEvaluation::new();
                for (metric, current, average) in metrics {
                    m.insert(
                        metric,
                        crate::scaling::metrics::EvaluatedScalingMetric { current, average },
                    );
                }
                (id, m)
            })
            .unzip();
        EvaluatedVertices::new(Arc::new(VertexIds::new(ids)), values)
    }

    /// The metrics of vertex `id`.
    pub fn get(&self, id: &str) -> Option<&VertexEvaluation> {
        self.values.get(*self.ids.as_ref()?.get(id)?)
    }

    /// The metrics of vertex `id`, looked for first at place `hint` (its place in the
    /// topology, which a reader that lists the vertices in the same order knows): no lookup by
    /// id when the vertex is where the hint says.
    pub(crate) fn get_hinted(&self, hint: usize, id: &Arc<str>) -> Option<&VertexEvaluation> {
        let ids = self.ids.as_ref()?;
        match ids.ids().get(hint) {
            Some(at) if Arc::ptr_eq(at, id) || **at == **id => self.values.get(hint),
            _ => self.values.get(*ids.get(id)?),
        }
    }

    /// The vertices with their metrics, in the order of their ids.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&str, &VertexEvaluation)> {
        let (ids, order): (&[Arc<str>], &[usize]) = match &self.ids {
            Some(ids) => (ids.ids(), ids.in_id_order()),
            None => (&[], &[]),
        };
        order
            .iter()
            .filter_map(move |&i| Some((&**ids.get(i)?, self.values.get(i)?)))
    }

    /// How many vertices were evaluated.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// True when no vertex was evaluated.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }
}

impl std::ops::Index<&str> for EvaluatedVertices {
    type Output = VertexEvaluation;

    /// The metrics of a vertex that must be present.
    ///
    /// # Panics
    /// When the vertex is absent, as indexing a `BTreeMap` does.
    fn index(&self, id: &str) -> &VertexEvaluation {
        match self.get(id) {
            Some(metrics) => metrics,
            None => panic!("vertex {id} was not evaluated"),
        }
    }
}

impl PartialEq for EvaluatedVertices {
    /// Equal when the same vertex ids have equal metrics, whatever the order of the topologies
    /// they were evaluated on (as for a `BTreeMap`, a NaN value is not equal to itself).
    fn eq(&self, other: &EvaluatedVertices) -> bool {
        self.iter().eq(other.iter())
    }
}

impl fmt::Debug for EvaluatedVertices {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for EvaluatedVertices {
    /// As a map from vertex id to metrics, in id order, like a `BTreeMap<String, _>`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::scaling::metrics::{EvaluatedScalingMetric, ScalingMetric};

    #[test]
    fn behaves_as_a_btree_map_by_id() {
        let ids: Vec<Arc<str>> = ["sink", "a-source", "mid"]
            .into_iter()
            .map(Arc::from)
            .collect();
        let values: Vec<VertexEvaluation> = (0..3)
            .map(|i| {
                let mut m = VertexEvaluation::new();
                m.insert(
                    ScalingMetric::Load,
                    EvaluatedScalingMetric::avg(f64::from(i)),
                );
                m
            })
            .collect();
        let tree: BTreeMap<String, VertexEvaluation> = ids
            .iter()
            .map(|id| id.to_string())
            .zip(values.iter().cloned())
            .collect();
        let set = EvaluatedVertices::new(Arc::new(VertexIds::new(ids)), values);
        assert_eq!(set.len(), 3);
        assert!(!set.is_empty());
        // NaN halves make PartialEq useless on metrics; compare what they print.
        assert_eq!(format!("{:?}", set["mid"]), format!("{:?}", tree["mid"]));
        assert!(set.get("other").is_none());
        let listed: Vec<&str> = set.iter().map(|(id, _)| id).collect();
        assert_eq!(listed, vec!["a-source", "mid", "sink"]);
        assert_eq!(format!("{set:?}"), format!("{tree:?}"));
        assert_eq!(
            serde_json::to_string(&set).unwrap(),
            serde_json::to_string(&tree).unwrap()
        );
        let empty = EvaluatedVertices::default();
        assert!(empty.is_empty());
        assert_eq!(
            serde_json::to_string(&empty).unwrap(),
            serde_json::to_string(&BTreeMap::<String, VertexEvaluation>::new()).unwrap()
        );
        assert_ne!(empty, set);
        assert_eq!(empty, EvaluatedVertices::default());
    }
}
