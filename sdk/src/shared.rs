//! What the contexts of metric evaluators and scaling executors have alike: the job graph and
//! the instance's parameters, with the accessors and setters both contexts offer
//! ([`kind_accessors!`]).

use std::sync::Arc;

use crate::context::JobTopology;
use crate::lent::Lent;
use crate::params::ModeParams;

/// A job graph with the host's number for it (see `abi::generation`; 0: not known). On the
/// plugin side, read from the lent context only when the plugin first asks for the graph.
#[derive(Debug, Clone, Default)]
pub(crate) struct LentGraph {
    pub(crate) graph: Arc<JobTopology>,
    pub(crate) generation: u64,
}

/// Compared as the graphs: the number is the boundary's business.
impl PartialEq for LentGraph {
    fn eq(&self, other: &LentGraph) -> bool {
        self.graph == other.graph
    }
}

/// The job graph and the parameters of an evaluator's or an executor's context.
#[derive(Debug, Clone, Default)]
pub(crate) struct KindShared {
    pub(crate) topology: Lent<LentGraph>,
    pub(crate) params: ModeParams,
    /// On the plugin side: the host's number of the parameters `params` were last made equal
    /// to (0: not known), so that lent parameters with the same number are not compared again
    /// (SDK 0.1.5, see `abi::lend`).
    pub(crate) params_lent: u64,
}

/// Compared as the graph and the parameters: the host's number is the boundary's business.
impl PartialEq for KindShared {
    fn eq(&self, other: &KindShared) -> bool {
        self.topology == other.topology && self.params == other.params
    }
}

impl KindShared {
    /// The graph as it is shared (for the host side of the boundary, which numbers it).
    pub(crate) fn graph(&self) -> &Arc<JobTopology> {
        &self.topology.get().graph
    }
}

/// The setters and accessors of the job graph and the parameters, alike in
/// [`crate::EvaluatorContext`] and [`crate::ExecutorContext`] (a `shared: KindShared` field);
/// `$family` is the kind's key prefix, for the docs.
macro_rules! kind_accessors {
    ($family:literal) => {
        /// Sets the job graph.
        pub fn with_topology(
            mut self,
            topology: std::sync::Arc<crate::context::JobTopology>,
        ) -> Self {
            self.shared.topology = crate::lent::Lent::ready_with(crate::shared::LentGraph {
                graph: topology,
                generation: 0,
            });
            self
        }

        /// Sets the instance's parameters.
        pub fn with_params(mut self, params: crate::params::ModeParams) -> Self {
            self.shared.params = params;
            self
        }

        /// The job graph.
        pub fn topology(&self) -> &crate::context::JobTopology {
            self.shared.graph()
        }

        #[doc = concat!("The instance's prefix-stripped `", $family, ".<name>.*` parameters.")]
        pub fn params(&self) -> &crate::params::ModeParams {
            &self.shared.params
        }
    };
}

pub(crate) use kind_accessors;
