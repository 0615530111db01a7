//! What one alignment decision produced, and the seam the scaling pipeline calls.

use std::sync::Arc;

use serde::{Serialize, Serializer};

use super::explanation::Explanation;
use super::request::AlignmentRequest;
use crate::events::Event;

/// The answer of the alignment step for one vertex.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlignOutcome {
    /// The parallelism to apply.
    pub parallelism: u32,
    /// The id of the mode that decided (e.g. `BALANCED`, `legacy:EVENLY_SPREAD`, a plugin id),
    /// shared by the outcomes of a job's vertices.
    #[serde(serialize_with = "serialize_str")]
    pub(crate) mode: Arc<str>,
    /// Whether the mode acted on the vertex (false: the target was kept as is).
    pub(crate) applicable: bool,
    /// Events the decision produced (SCALING_LIMITED, PluginFault, ModeFallback, ...).
    pub(crate) events: Vec<Event>,
    /// Why, step by step, for people (region scanned, rule that accepted, cap, fallback).
    /// Rendered when read.
    pub(crate) explanation: Explanation,
}

/// A shared string, serialized as a `String` is.
fn serialize_str<S: Serializer>(text: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(text)
}

/// Aligns computed targets for one job: what the scaling pipeline calls for its vertices.
pub trait Aligner {
    /// Aligns one vertex's target. Never fails: faults become events and the target is kept.
    fn align(&self, request: AlignmentRequest) -> AlignOutcome;

    /// Aligns the targets of a job's vertices in one go: one outcome per request, in the
    /// order of the requests, each what [`Aligner::align`] answers for it. The scaling
    /// pipeline calls this once per job and cycle, so that a mode whose every call is costly
    /// (a plugin in a worker process: a round trip each) can answer the whole job at once. The
    /// default aligns the requests one by one.
    fn align_all(&self, requests: Vec<AlignmentRequest>) -> Vec<AlignOutcome> {
        requests.into_iter().map(|r| self.align(r)).collect()
    }

    /// Whether [`Aligner::align`] reads the request's identity (job, vertex id and name), its
    /// metrics and the job graph. Modes that decide from the numbers alone answer false, and
    /// callers may then leave those empty instead of copying them for every vertex.
    fn reads_details(&self) -> bool {
        true
    }
}
