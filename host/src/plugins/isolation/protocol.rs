//! The protocol between the host and a plugin worker, over the worker's stdin (requests) and
//! stdout (everything else).
//!
//! # Frames
//!
//! Every message is one frame: a 4-byte little-endian length, then that many bytes of body. A
//! length above [`MAX_FRAME`] is a protocol error (a worker whose stdout was corrupted must
//! not make the host allocate gigabytes). A body is JSON (it starts with `{`) or, from
//! protocol 3 on, the compact binary form of the calls alignment makes for every vertex and of
//! their replies (it starts with a tag byte; see [`super::compact`]). JSON serves everything
//! that is rare or must stay readable in a dump: the handshake, `validate`, log records.
//!
//! # Conversation
//!
//! 1. The worker loads its plugin file, then sends [`WorkerMessage::Hello`] (the versions it
//!    speaks, plugin, modes) or [`WorkerMessage::Refused`] (why the file cannot be loaded) and
//!    exits.
//! 2. The host picks the highest version both speak and sends one request at a time; the
//!    worker answers it with a reply carrying the same id, in the encoding of the request.
//!    Any number of [`WorkerMessage::Log`] frames (the plugin's log records) may come before a
//!    reply. From protocol 4 on, alignment sends the vertices of a job that need aligning in a
//!    cycle as one batch (one request, one reply listing an answer per vertex): one round trip
//!    per job and cycle. Before, it sent one `align_if_applicable` call per vertex.
//!    From protocol 5 on, the hello also lists the file's metric evaluators and scaling
//!    executors (an executor with its priority, asked once when the worker created it), and
//!    the host calls them as it calls modes: one JSON request per call ([`Call::Evaluate`] for
//!    one vertex, [`Call::Apply`] for one job's proposed scaling), under the same deadline.
//! 3. The host closes the worker's stdin to end it.
//!
//! # Versions
//!
//! * 2: every request is JSON ([`Request`]) and carries the whole context.
//! * 3: context calls are compact, and carry the job's name, graph, parameters and metric
//!   names only when they changed since the job's last call (see [`super::slots`]).
//! * 4: a batch of context calls in one compact request, each entry as a protocol-3 call
//!   without the request's header, answered by one compact reply with an outcome per entry, in
//!   order. The deadline of the call (`[host] plugin-call-timeout`) applies to the batch's
//!   round trip as a whole.
//! * 5: the worker serves the file's evaluators and executors too ([`Call::Evaluate`],
//!   [`Call::Apply`], [`Call::ValidateEvaluator`], [`Call::ValidateExecutor`], in JSON: there
//!   is one evaluator call per vertex and one executor call per job and cycle, each carrying
//!   what the object sees, which is rarely more than a few kilobytes). A host talking to a
//!   worker of protocol 4 or older lists the evaluators and executors as unavailable.
//!
//! A worker's hello says `protocol: 2`, the version every host since 2 accepts, and lists all
//! it speaks in `protocols`; a host of protocol 2 ignores the list and talks JSON, which the
//! worker still answers; a host of protocol 3 picks 3 and never sends a batch. A hello without
//! the list comes from a worker of protocol 2, one that lists 2 and 3 from a worker of
//! protocol 3: the host then aligns vertex by vertex.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::sync::Arc;

use flowscale_sdk::{
    AlignmentContext, EvaluatedMetric, EvaluatedVertex, EvaluatorContext, ExecutorContext,
    ExecutorVerdict, JobTopology, ModeParams, ScalingSummary, ShipStrategy, SubtaskLoad,
    TopologyEdge, TopologyVertex, VertexMetrics,
};
use serde::{Deserialize, Serialize};

/// The newest protocol version. Version 2 added [`Call::AlignIfApplicable`], version 3 the
/// compact context calls, version 4 the batches of them, version 5 the evaluators and
/// executors.
pub const PROTOCOL_VERSION: u32 = 5;

/// The first version whose workers serve evaluators and executors.
pub const KINDS_PROTOCOL: u32 = 5;

/// The first version with batches of context calls.
pub const BATCH_PROTOCOL: u32 = 4;

/// The oldest version this side still speaks; a worker of no common version is refused (a
/// binary replaced under a running host).
pub(crate) const OLDEST_PROTOCOL: u32 = 2;

/// The largest frame either side accepts.
pub(crate) const MAX_FRAME: usize = 16 << 20;

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The pipe closed at a frame boundary.
    #[error("the pipe was closed")]
    Closed,
    /// The pipe closed inside a frame.
    #[error("the pipe was closed in the middle of a frame")]
    Truncated,
    /// A length above [`MAX_FRAME`].
    #[error("a frame of {0} bytes, above the limit of {MAX_FRAME}")]
    TooLarge(usize),
    /// A body that is not the expected JSON.
    #[error("an undecodable frame: {0}")]
    Decode(#[from] serde_json::Error),
    /// A compact body that cannot be read (see [`super::compact`]).
    #[error("an undecodable compact frame: {0}")]
    Compact(String),
    /// The pipe failed.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Encodes `message` as one frame (length prefix included).
pub fn encode<T: Serialize>(message: &T) -> Result<Vec<u8>, FrameError> {
    let mut frame = vec![0u8; 4];
    serde_json::to_writer(&mut frame, message)?;
    let len = frame.len() - 4;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    frame[..4].copy_from_slice(&(len as u32).to_le_bytes());
    Ok(frame)
}

/// Reads one frame, blocking (the worker's side: it has nothing else to do).
#[cfg(test)]
pub(crate) fn read_frame<T: for<'de> Deserialize<'de>>(
    input: &mut impl Read,
) -> Result<T, FrameError> {
    let mut body = Vec::new();
    read_body(input, &mut body)?;
    Ok(serde_json::from_slice(&body)?)
}

/// Reads the body of one frame into `body` (whose buffer is reused), blocking.
pub(crate) fn read_body(input: &mut impl Read, body: &mut Vec<u8>) -> Result<(), FrameError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match input.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Err(FrameError::Closed),
            Ok(0) => return Err(FrameError::Truncated),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    body.clear();
    body.resize(len, 0);
    input.read_exact(body).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => FrameError::Truncated,
        _ => FrameError::Io(e),
    })
}

/// True for a JSON body, false for a compact one.
pub fn is_json(body: &[u8]) -> bool {
    body.first() == Some(&b'{')
}

/// Bytes received but not yet decoded: the host reads the worker's stdout in whatever pieces
/// the pipe delivers (under a deadline) and takes whole frames out of this buffer.
#[derive(Debug, Default)]
pub(crate) struct FrameBuffer {
    bytes: Vec<u8>,
}

impl FrameBuffer {
    /// Appends what was read.
    pub(crate) fn extend(&mut self, data: &[u8]) {
        self.bytes.extend_from_slice(data);
    }

    /// True when nothing is buffered (a close now is at a frame boundary).
    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The next whole frame, decoded as JSON, if one is buffered.
    #[cfg(test)]
    pub(crate) fn take_frame<T: for<'de> Deserialize<'de>>(
        &mut self,
    ) -> Result<Option<T>, FrameError> {
        self.take_body(|body| Ok(serde_json::from_slice(body)?))
    }

    /// The next whole frame, decoded by `decode` from its body, if one is buffered.
    pub(crate) fn take_body<T>(
        &mut self,
        decode: impl FnOnce(&[u8]) -> Result<T, FrameError>,
    ) -> Result<Option<T>, FrameError> {
        let Some(len) = self.bytes.get(..4) else {
            return Ok(None);
        };
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
        if len > MAX_FRAME {
            return Err(FrameError::TooLarge(len));
        }
        if self.bytes.len() < 4 + len {
            return Ok(None);
        }
        let decoded = decode(&self.bytes[4..4 + len]);
        self.bytes.drain(..4 + len);
        decoded.map(Some)
    }
}

/// One mode a plugin file exports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WireMode {
    /// The implementation id.
    pub(crate) id: String,
    /// The one-line description.
    pub(crate) description: String,
}

/// One scaling executor a plugin file exports, with its priority (asked once, when the
/// worker created it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WireExecutor {
    /// The implementation id.
    pub(crate) id: String,
    /// The one-line description.
    pub(crate) description: String,
    /// Where it runs in a chain.
    pub(crate) priority: i32,
}

/// What a worker sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum WorkerMessage {
    /// The plugin is loaded and its modes are ready.
    Hello {
        /// [`OLDEST_PROTOCOL`]: what a host that knows a single version checks.
        protocol: u32,
        /// Every version the worker speaks; empty from a worker of protocol 2.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        protocols: Vec<u32>,
        /// The plugin's name.
        plugin: String,
        /// The plugin's version.
        version: String,
        /// The modes it exports.
        modes: Vec<WireMode>,
        /// The metric evaluators it exports (protocol 5; none from an older worker).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        evaluators: Vec<WireMode>,
        /// The scaling executors it exports (protocol 5; none from an older worker).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        executors: Vec<WireExecutor>,
    },
    /// The file cannot be loaded; the worker exits after this.
    Refused {
        /// The one-line reason, as discovery in the host would give it.
        reason: String,
        /// The full text behind a condensed reason (abi_stable's layout report).
        details: Option<String>,
    },
    /// A log record of the plugin.
    Log {
        /// 1 error, 2 warn, 3 info, 4 debug, 5 trace.
        level: u8,
        /// The plugin-side target.
        target: String,
        /// The message.
        message: String,
    },
    /// The answer to the request with the same id.
    Reply {
        /// The request's id.
        id: u64,
        /// The answer.
        outcome: Outcome,
    },
    /// The answers to the batch with the same id (protocol 4; only ever sent compact).
    Replies {
        /// The batch's id.
        id: u64,
        /// One answer per entry of the batch, in order.
        outcomes: Vec<Outcome>,
    },
}

/// The answer to one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    /// `is_applicable` answered.
    Applicable(bool),
    /// `align` answered.
    Aligned(u32),
    /// `validate` accepted the parameters.
    Valid,
    /// The call returned an error (a mode's error, or a panic the SDK caught).
    Error(String),
    /// `evaluate` answered the metrics to merge (protocol 5).
    Evaluated(Vec<WireMetric>),
    /// `apply` answered (protocol 5).
    Verdict(WireVerdict),
}

/// An executor's answer on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum WireVerdict {
    /// Apply these summaries.
    Apply(Vec<WireSummary>),
    /// Veto the operation, saying why.
    Veto(String),
}

impl From<&ExecutorVerdict> for WireVerdict {
    fn from(verdict: &ExecutorVerdict) -> WireVerdict {
        match verdict {
            ExecutorVerdict::Apply(summaries) => {
                WireVerdict::Apply(summaries.iter().map(WireSummary::from).collect())
            }
            ExecutorVerdict::Veto(why) => WireVerdict::Veto(why.clone()),
        }
    }
}

impl From<WireVerdict> for ExecutorVerdict {
    fn from(verdict: WireVerdict) -> ExecutorVerdict {
        match verdict {
            WireVerdict::Apply(summaries) => {
                ExecutorVerdict::Apply(summaries.into_iter().map(ScalingSummary::from).collect())
            }
            WireVerdict::Veto(why) => ExecutorVerdict::Veto(why),
        }
    }
}

/// What the host sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Request {
    /// Echoed in the reply.
    pub(crate) id: u64,
    /// The implementation id of the mode to call.
    pub(crate) mode: String,
    /// The call.
    pub(crate) call: Call,
}

/// One call of the host-side mode interface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Call {
    /// `is_applicable(ctx)`.
    IsApplicable(WireContext),
    /// `align(ctx)`.
    Align(WireContext),
    /// `is_applicable(ctx)`, then `align(ctx)` if the mode applies and the target differs
    /// from the current parallelism: what alignment asks of every vertex, in one round trip
    /// instead of two. The worker answers [`Outcome::Applicable`] `false` (the mode does not
    /// apply), `true` (it applies, nothing to align), [`Outcome::Aligned`] or
    /// [`Outcome::Error`] (the gate's error when the gate failed, else `align`'s).
    AlignIfApplicable(WireContext),
    /// `validate(params)`.
    Validate(WireParams),
    /// An evaluator's `evaluate(ctx)` for one vertex (protocol 5); the request names the
    /// evaluator.
    Evaluate(WireEvaluatorContext),
    /// An executor's `apply(ctx)` for one job (protocol 5); the request names the executor.
    Apply(WireExecutorContext),
    /// An evaluator's `validate(params)` (protocol 5).
    ValidateEvaluator(WireParams),
    /// An executor's `validate(params)` (protocol 5).
    ValidateExecutor(WireParams),
}

impl Call {
    /// The method's name, for messages.
    #[cfg(test)]
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Call::IsApplicable(_) => "is_applicable",
            // Named after the call a fault most likely interrupted: the gate is cheap.
            Call::Align(_) | Call::AlignIfApplicable(_) => "align",
            Call::Validate(_) | Call::ValidateEvaluator(_) | Call::ValidateExecutor(_) => {
                "validate"
            }
            Call::Evaluate(_) => "evaluate",
            Call::Apply(_) => "apply",
        }
    }
}

/// A mode's parameters on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireParams {
    /// The mode name they were selected under.
    pub(crate) mode_name: String,
    /// The prefix-stripped entries.
    pub(crate) entries: BTreeMap<String, String>,
}

impl From<&ModeParams> for WireParams {
    fn from(params: &ModeParams) -> WireParams {
        WireParams {
            mode_name: params.mode_name().to_string(),
            entries: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }
}

impl From<WireParams> for ModeParams {
    fn from(params: WireParams) -> ModeParams {
        ModeParams::new(params.mode_name, params.entries)
    }
}

/// One metric on the wire; JSON has no NaN, so a missing half is `null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireMetric {
    /// The metric's name.
    pub(crate) name: String,
    /// The latest value (None for NaN).
    pub(crate) current: Option<f64>,
    /// The window average (None for NaN).
    pub(crate) average: Option<f64>,
}

/// A vertex of the job graph on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireVertex {
    /// Engine id.
    pub(crate) id: String,
    /// Name.
    pub(crate) name: String,
    /// Current parallelism.
    pub(crate) parallelism: u32,
    /// Key groups.
    pub(crate) max_parallelism: u32,
    /// Source partitions (0: none).
    pub(crate) source_partitions: u32,
}

/// An edge of the job graph on the wire; ship strategies travel by their Flink names, which
/// [`ShipStrategy::parse`] reads back (an unknown one reads as `Unknown`, as everywhere).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireEdge {
    /// Upstream vertex id.
    pub(crate) from: String,
    /// Downstream vertex id.
    pub(crate) to: String,
    /// Ship strategy.
    pub(crate) ship: String,
}

/// An [`AlignmentContext`] on the wire: every accessor's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireContext {
    /// Job name.
    pub(crate) job: String,
    /// Vertex id.
    pub(crate) vertex_id: String,
    /// Vertex name.
    pub(crate) vertex_name: String,
    /// Current parallelism.
    pub(crate) current: u32,
    /// Computed target.
    pub(crate) target: u32,
    /// Source partitions.
    pub(crate) source_partitions: u32,
    /// Key groups.
    pub(crate) max_parallelism: u32,
    /// Lower limit.
    pub(crate) lower: u32,
    /// Upper limit.
    pub(crate) upper: u32,
    /// Input ship strategies.
    pub(crate) inputs: Vec<String>,
    /// Evaluated metrics.
    pub(crate) metrics: Vec<WireMetric>,
    /// Job graph vertices.
    pub(crate) vertices: Vec<WireVertex>,
    /// Job graph edges.
    pub(crate) edges: Vec<WireEdge>,
    /// Mode parameters.
    pub(crate) params: WireParams,
    /// Per-subtask load at the current parallelism (SDK 0.1.1), empty when unknown. A worker
    /// of an older host sends none: the field defaults to empty.
    #[serde(default)]
    pub(crate) subtask_loads: Vec<WireSubtaskLoad>,
}

/// One subtask's load on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WireSubtaskLoad {
    /// Busy share in `[0, 1]`, when reported.
    pub(crate) busy_ratio: Option<f64>,
    /// Records in per second, when reported.
    pub(crate) records_in_per_second: Option<f64>,
}

fn finite(value: f64) -> Option<f64> {
    value.is_finite().then_some(value)
}

impl From<&AlignmentContext> for WireContext {
    fn from(ctx: &AlignmentContext) -> WireContext {
        let topology = ctx.topology();
        WireContext {
            job: ctx.job_name().to_string(),
            vertex_id: ctx.vertex_id().to_string(),
            vertex_name: ctx.vertex_name().to_string(),
            current: ctx.current_parallelism(),
            target: ctx.target_parallelism(),
            source_partitions: ctx.source_partitions(),
            max_parallelism: ctx.max_parallelism(),
            lower: ctx.lower_limit(),
            upper: ctx.upper_limit(),
            inputs: ctx
                .input_ship_strategies()
                .iter()
                .map(ToString::to_string)
                .collect(),
            metrics: wire_metrics(ctx.metrics()),
            vertices: wire_vertices(topology),
            edges: wire_edges(topology),
            params: WireParams::from(ctx.params()),
            subtask_loads: ctx
                .subtask_loads()
                .unwrap_or_default()
                .iter()
                .map(|l| WireSubtaskLoad {
                    busy_ratio: l.busy_ratio.and_then(finite),
                    records_in_per_second: l.records_in_per_second.and_then(finite),
                })
                .collect(),
        }
    }
}

impl WireContext {
    /// The context the plugin sees (infinite metric values travel as NaN: the evaluation does
    /// not produce them).
    pub fn into_context(self) -> AlignmentContext {
        let topology = topology_from_wire(self.vertices, self.edges);
        AlignmentContext::builder(self.current, self.target, self.max_parallelism)
            .identity(self.job, self.vertex_id, self.vertex_name)
            .source_partitions(self.source_partitions)
            .limits(self.lower, self.upper)
            .input_ship_strategies(self.inputs.iter().map(|s| ShipStrategy::parse(s)).collect())
            .metrics(metrics_from_wire(self.metrics))
            .shared_topology(Arc::new(topology))
            .params(self.params.into())
            .subtask_loads(
                self.subtask_loads
                    .into_iter()
                    .map(|l| SubtaskLoad {
                        busy_ratio: l.busy_ratio,
                        records_in_per_second: l.records_in_per_second,
                    })
                    .collect(),
            )
            .build()
    }
}

/// Metrics on the wire: a half that is not finite travels as `null` (JSON has no NaN).
pub(crate) fn wire_metrics(metrics: &[(String, EvaluatedMetric)]) -> Vec<WireMetric> {
    metrics
        .iter()
        .map(|(name, m)| WireMetric {
            name: name.clone(),
            current: finite(m.current),
            average: finite(m.average),
        })
        .collect()
}

/// Metrics from the wire: a missing half is NaN, as the evaluation leaves it.
pub(crate) fn metrics_from_wire(metrics: Vec<WireMetric>) -> VertexMetrics {
    metrics
        .into_iter()
        .map(|m| {
            (
                m.name,
                EvaluatedMetric {
                    current: m.current.unwrap_or(f64::NAN),
                    average: m.average.unwrap_or(f64::NAN),
                },
            )
        })
        .collect()
}

fn wire_vertices(topology: &JobTopology) -> Vec<WireVertex> {
    topology
        .vertices
        .iter()
        .map(|v| WireVertex {
            id: v.id.clone(),
            name: v.name.clone(),
            parallelism: v.parallelism,
            max_parallelism: v.max_parallelism,
            source_partitions: v.source_partitions,
        })
        .collect()
}

fn wire_edges(topology: &JobTopology) -> Vec<WireEdge> {
    topology
        .edges
        .iter()
        .map(|e| WireEdge {
            from: e.from.clone(),
            to: e.to.clone(),
            ship: e.ship_strategy.to_string(),
        })
        .collect()
}

fn topology_from_wire(vertices: Vec<WireVertex>, edges: Vec<WireEdge>) -> JobTopology {
    JobTopology {
        vertices: vertices
            .into_iter()
            .map(|v| TopologyVertex {
                id: v.id,
                name: v.name,
                parallelism: v.parallelism,
                max_parallelism: v.max_parallelism,
                source_partitions: v.source_partitions,
            })
            .collect(),
        edges: edges
            .into_iter()
            .map(|e| TopologyEdge {
                from: e.from,
                to: e.to,
                ship_strategy: ShipStrategy::parse(&e.ship),
            })
            .collect(),
    }
}

/// A vertex evaluated before the one an evaluator is called for, on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireEvaluated {
    /// The vertex id.
    pub(crate) vertex_id: String,
    /// Its merged metrics.
    pub(crate) metrics: Vec<WireMetric>,
}

/// An [`EvaluatorContext`] on the wire: every accessor's value. Empty lists are left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireEvaluatorContext {
    /// Job name.
    pub(crate) job: String,
    /// Vertex id.
    pub(crate) vertex_id: String,
    /// Vertex name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) vertex_name: String,
    /// The vertex's evaluated metrics.
    pub(crate) metrics: Vec<WireMetric>,
    /// The vertices evaluated before it, in topological order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) evaluated: Vec<WireEvaluated>,
    /// Whether a source processes a backlog.
    pub(crate) backlog: bool,
    /// Job graph vertices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) vertices: Vec<WireVertex>,
    /// Job graph edges.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) edges: Vec<WireEdge>,
    /// The instance's parameters.
    pub(crate) params: WireParams,
}

impl From<&EvaluatorContext> for WireEvaluatorContext {
    fn from(ctx: &EvaluatorContext) -> WireEvaluatorContext {
        WireEvaluatorContext {
            job: ctx.job_name().to_string(),
            vertex_id: ctx.vertex_id().to_string(),
            vertex_name: ctx.vertex_name().to_string(),
            metrics: wire_metrics(ctx.metrics()),
            evaluated: ctx
                .evaluated()
                .iter()
                .map(|v| WireEvaluated {
                    vertex_id: v.vertex_id.clone(),
                    metrics: wire_metrics(&v.metrics),
                })
                .collect(),
            backlog: ctx.is_processing_backlog(),
            vertices: wire_vertices(ctx.topology()),
            edges: wire_edges(ctx.topology()),
            params: WireParams::from(ctx.params()),
        }
    }
}

impl WireEvaluatorContext {
    /// The context the evaluator sees.
    pub fn into_context(self) -> EvaluatorContext {
        EvaluatorContext::new(self.job, self.vertex_id, metrics_from_wire(self.metrics))
            .with_vertex_name(self.vertex_name)
            .with_evaluated(
                self.evaluated
                    .into_iter()
                    .map(|v| EvaluatedVertex {
                        vertex_id: v.vertex_id,
                        metrics: metrics_from_wire(v.metrics),
                    })
                    .collect(),
            )
            .with_backlog(self.backlog)
            .with_topology(Arc::new(topology_from_wire(self.vertices, self.edges)))
            .with_params(self.params.into())
    }
}

/// The proposed scaling of one vertex on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireSummary {
    /// The vertex id.
    pub(crate) vertex_id: String,
    /// Its parallelism now.
    pub(crate) current: u32,
    /// The parallelism proposed.
    pub(crate) new: u32,
    /// Its evaluated metrics.
    pub(crate) metrics: Vec<WireMetric>,
}

impl From<&ScalingSummary> for WireSummary {
    fn from(s: &ScalingSummary) -> WireSummary {
        WireSummary {
            vertex_id: s.vertex_id.clone(),
            current: s.current_parallelism,
            new: s.new_parallelism,
            metrics: wire_metrics(&s.metrics),
        }
    }
}

impl From<WireSummary> for ScalingSummary {
    fn from(s: WireSummary) -> ScalingSummary {
        ScalingSummary {
            vertex_id: s.vertex_id,
            current_parallelism: s.current,
            new_parallelism: s.new,
            metrics: metrics_from_wire(s.metrics),
        }
    }
}

/// An [`ExecutorContext`] on the wire: every accessor's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireExecutorContext {
    /// Job name.
    pub(crate) job: String,
    /// The proposed scaling.
    pub(crate) summaries: Vec<WireSummary>,
    /// Job graph vertices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) vertices: Vec<WireVertex>,
    /// Job graph edges.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) edges: Vec<WireEdge>,
    /// The instance's parameters.
    pub(crate) params: WireParams,
    /// The decision's time, in milliseconds since the Unix epoch.
    pub(crate) now_ms: i64,
    /// The restart time the decision assumed, in milliseconds.
    pub(crate) restart_time_ms: u64,
}

impl From<&ExecutorContext> for WireExecutorContext {
    fn from(ctx: &ExecutorContext) -> WireExecutorContext {
        WireExecutorContext {
            job: ctx.job_name().to_string(),
            summaries: ctx.summaries().iter().map(WireSummary::from).collect(),
            vertices: wire_vertices(ctx.topology()),
            edges: wire_edges(ctx.topology()),
            params: WireParams::from(ctx.params()),
            now_ms: ctx.now_ms(),
            restart_time_ms: ctx.restart_time_ms(),
        }
    }
}

impl WireExecutorContext {
    /// The context the executor sees.
    pub fn into_context(self) -> ExecutorContext {
        ExecutorContext::new(
            self.job,
            self.summaries
                .into_iter()
                .map(ScalingSummary::from)
                .collect(),
            self.now_ms,
        )
        .with_topology(Arc::new(topology_from_wire(self.vertices, self.edges)))
        .with_params(self.params.into())
        .with_restart_time_ms(self.restart_time_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rich() -> AlignmentContext {
        AlignmentContext::builder(16, 24, 1024)
            .identity("orders", "v2", "operator 2")
            .source_partitions(0)
            .limits(2, 200)
            .input_ship_strategies(vec![
                ShipStrategy::Custom { buckets: 128 },
                ShipStrategy::Hash,
            ])
            .metrics(vec![
                (
                    "LOAD".into(),
                    EvaluatedMetric {
                        current: 0.5,
                        average: f64::NAN,
                    },
                ),
                (
                    "LAG".into(),
                    EvaluatedMetric {
                        current: 3.0,
                        average: 2.5,
                    },
                ),
            ])
            .topology(JobTopology {
                vertices: vec![TopologyVertex {
                    id: "v2".into(),
                    name: "operator 2".into(),
                    parallelism: 16,
                    max_parallelism: 1024,
                    source_partitions: 0,
                }],
                edges: vec![TopologyEdge {
                    from: "v1".into(),
                    to: "v2".into(),
                    ship_strategy: ShipStrategy::Custom { buckets: 48 },
                }],
            })
            .params(ModeParams::new(
                "buckets",
                BTreeMap::from([("rule".to_string(), "DIVISOR".to_string())]),
            ))
            .subtask_loads(vec![
                SubtaskLoad {
                    busy_ratio: Some(0.9),
                    records_in_per_second: Some(1200.0),
                },
                SubtaskLoad {
                    busy_ratio: None,
                    records_in_per_second: Some(300.0),
                },
            ])
            .build()
    }

    #[test]
    fn a_context_survives_the_wire_with_nan_metrics() {
        let ctx = rich();
        let frame = encode(&Call::Align(WireContext::from(&ctx))).unwrap();
        let mut buffer = FrameBuffer::default();
        buffer.extend(&frame);
        let Some(Call::Align(wire)) = buffer.take_frame::<Call>().unwrap() else {
            panic!("an align call")
        };
        assert!(buffer.is_empty());
        let back = wire.into_context();
        assert_eq!(back.job_name(), "orders");
        assert_eq!(back.vertex_id(), "v2");
        assert_eq!(back.limits_pair(), (2, 200));
        assert_eq!(back.input_ship_strategies(), ctx.input_ship_strategies());
        assert_eq!(back.metric("LAG"), ctx.metric("LAG"));
        assert!(back.metric("LOAD").unwrap().average.is_nan());
        assert_eq!(back.topology(), ctx.topology());
        assert_eq!(back.params(), ctx.params());
        assert_eq!(back.subtask_loads(), ctx.subtask_loads());
        assert_eq!(back.alignment_cap(), ctx.alignment_cap());
    }

    #[test]
    fn the_combined_call_travels_as_one_frame() {
        let ctx = rich();
        let frame = encode(&Request {
            id: 3,
            mode: "buckets".into(),
            call: Call::AlignIfApplicable(WireContext::from(&ctx)),
        })
        .unwrap();
        let mut input = &frame[..];
        let request: Request = read_frame(&mut input).unwrap();
        assert!(input.is_empty(), "one frame");
        assert_eq!(request.id, 3);
        assert_eq!(request.call.name(), "align");
        let Call::AlignIfApplicable(wire) = request.call else {
            panic!("the combined call")
        };
        let back = wire.into_context();
        assert_eq!(
            (back.current_parallelism(), back.target_parallelism()),
            (16, 24)
        );
    }

    trait Limits {
        fn limits_pair(&self) -> (u32, u32);
    }
    impl Limits for AlignmentContext {
        fn limits_pair(&self) -> (u32, u32) {
            (self.lower_limit(), self.upper_limit())
        }
    }

    /// `message` after a trip through a frame.
    fn through_a_frame<T: Serialize + for<'de> Deserialize<'de>>(message: &T) -> T {
        let frame = encode(message).unwrap();
        let mut input = &frame[..];
        let back = read_frame(&mut input).unwrap();
        assert!(input.is_empty(), "one frame");
        back
    }

    fn metric(current: f64, average: f64) -> EvaluatedMetric {
        EvaluatedMetric { current, average }
    }

    #[test]
    fn an_evaluator_context_survives_the_wire() {
        let topology = rich().topology().clone();
        let ctx = EvaluatorContext::new(
            "orders",
            "v2",
            vec![
                ("LAG".into(), metric(3.0, f64::NAN)),
                ("BUSY".into(), metric(0.5, 0.25)),
            ],
        )
        .with_vertex_name("operator 2")
        .with_evaluated(vec![EvaluatedVertex {
            vertex_id: "v1".into(),
            metrics: vec![("TARGET_DATA_RATE".into(), metric(10.0, 9.0))],
        }])
        .with_backlog(true)
        .with_topology(Arc::new(topology.clone()))
        .with_params(ModeParams::new(
            "slo",
            BTreeMap::from([("factor".to_string(), "3".to_string())]),
        ));
        let request = through_a_frame(&Request {
            id: 9,
            mode: "rate".into(),
            call: Call::Evaluate(WireEvaluatorContext::from(&ctx)),
        });
        assert_eq!((request.id, request.mode.as_str()), (9, "rate"));
        assert_eq!(request.call.name(), "evaluate");
        let Call::Evaluate(wire) = request.call else {
            panic!("an evaluate call")
        };
        let back = wire.into_context();
        assert_eq!(back.job_name(), "orders");
        assert_eq!(back.vertex_id(), "v2");
        assert_eq!(back.vertex_name(), "operator 2");
        assert_eq!(back.metric("BUSY"), Some(metric(0.5, 0.25)));
        assert!(back.metric("LAG").unwrap().average.is_nan());
        assert_eq!(back.evaluated(), ctx.evaluated());
        assert!(back.is_processing_backlog());
        assert_eq!(back.topology(), &topology);
        assert_eq!(back.params(), ctx.params());
    }

    #[test]
    fn an_executor_context_and_verdicts_survive_the_wire() {
        let summary = |vertex: &str, new| ScalingSummary {
            vertex_id: vertex.into(),
            current_parallelism: 4,
            new_parallelism: new,
            metrics: vec![("LAG".into(), metric(2.0, f64::NAN))],
        };
        let ctx = ExecutorContext::new("orders", vec![summary("b", 8), summary("a", 6)], -5)
            .with_topology(Arc::new(rich().topology().clone()))
            .with_params(ModeParams::new(
                "cap",
                BTreeMap::from([("cap".to_string(), "6".to_string())]),
            ))
            .with_restart_time_ms(60_000);
        let request = through_a_frame(&Request {
            id: 10,
            mode: "cap".into(),
            call: Call::Apply(WireExecutorContext::from(&ctx)),
        });
        assert_eq!(request.call.name(), "apply");
        let Call::Apply(wire) = request.call else {
            panic!("an apply call")
        };
        let back = wire.into_context();
        assert_eq!(back.job_name(), "orders");
        assert_eq!(back.now_ms(), -5);
        assert_eq!(back.restart_time_ms(), 60_000);
        assert_eq!(back.topology(), ctx.topology());
        assert_eq!(back.params(), ctx.params());
        assert_eq!(back.summaries().len(), 2);
        assert_eq!(back.summaries()[0].vertex_id, "a");
        assert_eq!(back.summaries()[1].new_parallelism, 8);
        assert!(back.summaries()[0].metrics[0].1.average.is_nan());

        for verdict in [
            ExecutorVerdict::Apply(vec![summary("a", 5)]),
            ExecutorVerdict::Apply(Vec::new()),
            ExecutorVerdict::Veto("frozen".into()),
        ] {
            let reply = through_a_frame(&WorkerMessage::Reply {
                id: 10,
                outcome: Outcome::Verdict(WireVerdict::from(&verdict)),
            });
            let WorkerMessage::Reply {
                outcome: Outcome::Verdict(wire),
                ..
            } = reply
            else {
                panic!("a verdict: {reply:?}")
            };
            let back = ExecutorVerdict::from(wire);
            match (&back, &verdict) {
                (ExecutorVerdict::Apply(got), ExecutorVerdict::Apply(sent)) => {
                    assert_eq!(got.len(), sent.len());
                    for (g, s) in got.iter().zip(sent) {
                        assert_eq!(
                            (&g.vertex_id, g.current_parallelism, g.new_parallelism),
                            (&s.vertex_id, s.current_parallelism, s.new_parallelism)
                        );
                    }
                }
                _ => assert_eq!(back, verdict),
            }
        }
    }

    #[test]
    fn validations_evaluations_and_the_kinds_hello_survive_the_wire() {
        let params = ModeParams::new(
            "inst",
            BTreeMap::from([("cap".to_string(), "x".to_string())]),
        );
        for call in [
            Call::ValidateEvaluator(WireParams::from(&params)),
            Call::ValidateExecutor(WireParams::from(&params)),
        ] {
            let back = through_a_frame(&call);
            assert_eq!(back.name(), "validate");
            assert_eq!(back, call);
        }
        let evaluated = Outcome::Evaluated(wire_metrics(&[(
            "TARGET_DATA_RATE".into(),
            metric(f64::INFINITY, 2.0),
        )]));
        let Outcome::Evaluated(back) = through_a_frame(&evaluated) else {
            panic!("evaluated")
        };
        let back = metrics_from_wire(back);
        assert!(back[0].1.current.is_nan(), "JSON has no infinity");
        assert_eq!(back[0].1.average, 2.0);

        let hello = WorkerMessage::Hello {
            protocol: OLDEST_PROTOCOL,
            protocols: vec![2, 3, 4, 5],
            plugin: "p".into(),
            version: "1.0.0".into(),
            modes: Vec::new(),
            evaluators: vec![WireMode {
                id: "rate".into(),
                description: "d".into(),
            }],
            executors: vec![WireExecutor {
                id: "cap".into(),
                description: "c".into(),
                priority: -3,
            }],
        };
        assert_eq!(through_a_frame(&hello), hello);
        // A worker of protocol 4 lists no evaluators nor executors: they read as none.
        let old: WorkerMessage = serde_json::from_str(
            r#"{"type":"hello","protocol":2,"protocols":[2,3,4],"plugin":"p","version":"1","modes":[]}"#,
        )
        .unwrap();
        let WorkerMessage::Hello {
            evaluators,
            executors,
            ..
        } = old
        else {
            panic!("a hello")
        };
        assert!(evaluators.is_empty() && executors.is_empty());
    }

    #[test]
    fn frames_arrive_in_pieces_and_several_at_once() {
        let a = encode(&WorkerMessage::Log {
            level: 2,
            target: "p".into(),
            message: "hi".into(),
        })
        .unwrap();
        let b = encode(&WorkerMessage::Reply {
            id: 7,
            outcome: Outcome::Aligned(12),
        })
        .unwrap();
        let all: Vec<u8> = a.iter().chain(&b).copied().collect();
        let mut buffer = FrameBuffer::default();
        buffer.extend(&all[..3]);
        assert_eq!(buffer.take_frame::<WorkerMessage>().unwrap(), None);
        buffer.extend(&all[3..a.len() + 2]);
        assert!(matches!(
            buffer.take_frame::<WorkerMessage>().unwrap(),
            Some(WorkerMessage::Log { level: 2, .. })
        ));
        assert_eq!(buffer.take_frame::<WorkerMessage>().unwrap(), None);
        buffer.extend(&all[a.len() + 2..]);
        assert_eq!(
            buffer.take_frame::<WorkerMessage>().unwrap(),
            Some(WorkerMessage::Reply {
                id: 7,
                outcome: Outcome::Aligned(12)
            })
        );
        // The blocking reader reads the same bytes.
        let mut input = &all[..];
        assert!(matches!(
            read_frame::<WorkerMessage>(&mut input).unwrap(),
            WorkerMessage::Log { .. }
        ));
        assert!(matches!(
            read_frame::<WorkerMessage>(&mut input).unwrap(),
            WorkerMessage::Reply { id: 7, .. }
        ));
        assert!(matches!(
            read_frame::<WorkerMessage>(&mut input),
            Err(FrameError::Closed)
        ));
    }

    #[test]
    fn garbage_is_an_error_never_a_panic() {
        let mut buffer = FrameBuffer::default();
        buffer.extend(&u32::MAX.to_le_bytes());
        assert!(matches!(
            buffer.take_frame::<WorkerMessage>(),
            Err(FrameError::TooLarge(_))
        ));
        let mut buffer = FrameBuffer::default();
        buffer.extend(&3u32.to_le_bytes());
        buffer.extend(b"{x}");
        assert!(matches!(
            buffer.take_frame::<WorkerMessage>(),
            Err(FrameError::Decode(_))
        ));
        let mut truncated: &[u8] = &[5, 0, 0, 0, b'{'];
        assert!(matches!(
            read_frame::<WorkerMessage>(&mut truncated),
            Err(FrameError::Truncated)
        ));
        let mut short_len: &[u8] = &[5, 0];
        assert!(matches!(
            read_frame::<WorkerMessage>(&mut short_len),
            Err(FrameError::Truncated)
        ));
    }
}
