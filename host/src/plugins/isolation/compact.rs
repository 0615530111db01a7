//! The compact encoding of protocol 3: the calls alignment makes for every vertex, and their
//! replies, in a binary form, carrying only what the worker does not already hold.
//!
//! JSON costs microseconds per call for a context with a job graph, about as much as the pipe
//! round trip itself, and most of it is the same graph and parameters sent again for every
//! vertex of every job. In protocol 3 the host gives each job a *slot* and the worker keeps the
//! job's name, graph, parameters and metric names there; a request carries them only when they
//! changed (see [`super::slots`]), and the vertex itself as its index in the graph. What is left
//! is a few dozen numbers, written and read without a parser.
//!
//! A compact frame never starts with `{`, a JSON one always does: both sides tell them apart by
//! the first byte, so JSON frames (the handshake, `validate`, the plugin's log records) keep
//! travelling as in protocol 2 next to compact ones. The worker answers a compact request with a
//! compact reply and a JSON request with a JSON reply.
//!
//! Protocol 4 adds batches: one request carrying the context calls of several vertices, each
//! entry what a protocol-3 call carries after its header (see [`super::slots`]), and one reply
//! with an outcome per entry.
//!
//! All integers are little-endian; a string is a `u32` length and that many bytes of UTF-8; a
//! float is its IEEE-754 bits, so NaN and infinities cross unchanged.

use flowscale_sdk::{
    AlignmentContext, EvaluatedMetric, JobTopology, ShipStrategy, SubtaskLoad, TopologyEdge,
    TopologyVertex,
};

use super::protocol::{FrameError, Outcome, WorkerMessage, is_json};

/// First byte of a compact call carrying a context.
pub const TAG_CONTEXT_CALL: u8 = 1;
/// First byte of a compact reply.
pub const TAG_REPLY: u8 = 2;
/// First byte of a batch of context calls (protocol 4).
pub const TAG_BATCH_CALL: u8 = 3;
/// First byte of the reply to a batch (protocol 4).
pub const TAG_BATCH_REPLY: u8 = 4;

/// Which context call a compact request makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextCall {
    /// `is_applicable(ctx)`.
    IsApplicable,
    /// `align(ctx)`.
    Align,
    /// The gate, then `align` (see [`super::protocol::Call::AlignIfApplicable`]).
    AlignIfApplicable,
}

impl ContextCall {
    /// The method's name, for messages (as [`super::protocol::Call::name`]).
    pub(crate) fn name(self) -> &'static str {
        match self {
            ContextCall::IsApplicable => "is_applicable",
            ContextCall::Align | ContextCall::AlignIfApplicable => "align",
        }
    }

    pub(super) fn code(self) -> u8 {
        match self {
            ContextCall::IsApplicable => 0,
            ContextCall::Align => 1,
            ContextCall::AlignIfApplicable => 2,
        }
    }

    pub(super) fn from_code(code: u8) -> Result<ContextCall, DecodeError> {
        match code {
            0 => Ok(ContextCall::IsApplicable),
            1 => Ok(ContextCall::Align),
            2 => Ok(ContextCall::AlignIfApplicable),
            other => Err(DecodeError(format!("unknown call {other}"))),
        }
    }
}

/// A compact frame that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

impl From<DecodeError> for FrameError {
    fn from(err: DecodeError) -> FrameError {
        FrameError::Compact(err.0)
    }
}

/// Appends values to a frame body.
#[derive(Debug, Default)]
pub struct Writer {
    bytes: Vec<u8>,
}

impl Writer {
    /// A writer whose first four bytes are left for the frame's length.
    pub(crate) fn frame() -> Writer {
        Writer {
            bytes: vec![0u8; 4],
        }
    }

    /// The bytes written, the length prefix filled in.
    pub(crate) fn finish(mut self) -> Result<Vec<u8>, FrameError> {
        let len = self.bytes.len() - 4;
        if len > super::protocol::MAX_FRAME {
            return Err(FrameError::TooLarge(len));
        }
        self.bytes[..4].copy_from_slice(&(len as u32).to_le_bytes());
        Ok(self.bytes)
    }

    /// One byte.
    pub(crate) fn u8(&mut self, value: u8) {
        self.bytes.push(value);
    }

    /// A `u32`.
    pub(crate) fn u32(&mut self, value: u32) {
        self.bytes.extend_from_slice(&value.to_le_bytes());
    }

    /// A `u64`.
    pub(crate) fn u64(&mut self, value: u64) {
        self.bytes.extend_from_slice(&value.to_le_bytes());
    }

    /// An `f64`, bit for bit.
    pub(crate) fn f64(&mut self, value: f64) {
        self.u64(value.to_bits());
    }

    /// A length or count (refused above `u32::MAX` by [`Writer::finish`]'s frame limit long
    /// before it wraps).
    pub(crate) fn len(&mut self, len: usize) {
        self.u32(u32::try_from(len).unwrap_or(u32::MAX));
    }

    /// A string.
    pub(crate) fn str(&mut self, value: &str) {
        self.len(value.len());
        self.bytes.extend_from_slice(value.as_bytes());
    }

    /// A ship strategy: its variant, and the bucket count of a custom one.
    pub(crate) fn ship(&mut self, ship: ShipStrategy) {
        let code = match ship {
            ShipStrategy::Hash => 0,
            ShipStrategy::Rebalance => 1,
            ShipStrategy::Rescale => 2,
            ShipStrategy::Forward => 3,
            ShipStrategy::Custom { buckets } => {
                self.u8(4);
                self.u32(buckets);
                return;
            }
            ShipStrategy::Broadcast => 5,
            ShipStrategy::Global => 6,
            ShipStrategy::Shuffle => 7,
            ShipStrategy::Unknown => 8,
        };
        self.u8(code);
    }

    /// An optional float: a presence byte, then the value.
    pub(crate) fn opt_f64(&mut self, value: Option<f64>) {
        match value {
            Some(v) => {
                self.u8(1);
                self.f64(v);
            }
            None => self.u8(0),
        }
    }

    /// A job graph.
    pub(crate) fn topology(&mut self, topology: &JobTopology) {
        self.len(topology.vertices.len());
        for v in &topology.vertices {
            self.str(&v.id);
            self.str(&v.name);
            self.u32(v.parallelism);
            self.u32(v.max_parallelism);
            self.u32(v.source_partitions);
        }
        self.len(topology.edges.len());
        for e in &topology.edges {
            self.str(&e.from);
            self.str(&e.to);
            self.ship(e.ship_strategy);
        }
    }
}

/// Reads values from a frame body, refusing anything short or malformed.
#[derive(Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Reads `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes }
    }

    /// Fails unless everything was read.
    pub(crate) fn end(&self) -> Result<(), DecodeError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(DecodeError(format!(
                "{} bytes after the end",
                self.bytes.len()
            )))
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.bytes.len() < n {
            return Err(DecodeError("the frame ends too early".to_string()));
        }
        let (taken, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(taken)
    }

    /// One byte.
    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    /// A `u32`.
    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A `u64`.
    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// An `f64`.
    pub(crate) fn f64(&mut self) -> Result<f64, DecodeError> {
        Ok(f64::from_bits(self.u64()?))
    }

    /// A count of items that each take at least `min_size` bytes: a count the rest of the frame
    /// cannot hold is refused before anything is allocated for it.
    pub(crate) fn count(&mut self, min_size: usize) -> Result<usize, DecodeError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_size.max(1)) > self.bytes.len() {
            return Err(DecodeError(format!(
                "a count of {n} that the frame cannot hold"
            )));
        }
        Ok(n)
    }

    /// A count (see [`Reader::count`]) and that many items read by `item`, in a list allocated
    /// once: collecting fallible reads would grow the list step by step, several times per
    /// vertex on the worker's every call. The count was checked against what the frame holds.
    pub(crate) fn list<T>(
        &mut self,
        min_size: usize,
        mut item: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        let n = self.count(min_size)?;
        let mut list = Vec::with_capacity(n);
        for _ in 0..n {
            list.push(item(self)?);
        }
        Ok(list)
    }

    /// A string, borrowed from the frame.
    pub(crate) fn str(&mut self) -> Result<&'a str, DecodeError> {
        let n = self.u32()? as usize;
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes)
            .map_err(|e| DecodeError(format!("a string that is not UTF-8: {e}")))
    }

    /// An owned string.
    pub(crate) fn string(&mut self) -> Result<String, DecodeError> {
        self.str().map(str::to_string)
    }

    /// A ship strategy.
    pub(crate) fn ship(&mut self) -> Result<ShipStrategy, DecodeError> {
        Ok(match self.u8()? {
            0 => ShipStrategy::Hash,
            1 => ShipStrategy::Rebalance,
            2 => ShipStrategy::Rescale,
            3 => ShipStrategy::Forward,
            4 => ShipStrategy::Custom {
                buckets: self.u32()?,
            },
            5 => ShipStrategy::Broadcast,
            6 => ShipStrategy::Global,
            7 => ShipStrategy::Shuffle,
            8 => ShipStrategy::Unknown,
            other => return Err(DecodeError(format!("unknown ship strategy {other}"))),
        })
    }

    /// An optional float.
    pub(crate) fn opt_f64(&mut self) -> Result<Option<f64>, DecodeError> {
        match self.u8()? {
            0 => Ok(None),
            1 => self.f64().map(Some),
            other => Err(DecodeError(format!("a presence byte of {other}"))),
        }
    }

    /// A job graph.
    pub(crate) fn topology(&mut self) -> Result<JobTopology, DecodeError> {
        let vertices = (0..self.count(20)?)
            .map(|_| {
                Ok(TopologyVertex {
                    id: self.string()?,
                    name: self.string()?,
                    parallelism: self.u32()?,
                    max_parallelism: self.u32()?,
                    source_partitions: self.u32()?,
                })
            })
            .collect::<Result<Vec<_>, DecodeError>>()?;
        let edges = (0..self.count(9)?)
            .map(|_| {
                Ok(TopologyEdge {
                    from: self.string()?,
                    to: self.string()?,
                    ship_strategy: self.ship()?,
                })
            })
            .collect::<Result<Vec<_>, DecodeError>>()?;
        Ok(JobTopology { vertices, edges })
    }
}

/// The per-vertex part of a context: everything but what the job's slot holds.
pub fn write_vertex(out: &mut Writer, ctx: &AlignmentContext) {
    // The vertex as its index in the graph when the graph has it, else by its strings.
    let index = ctx
        .topology()
        .vertices
        .iter()
        .position(|v| v.id == ctx.vertex_id() && v.name == ctx.vertex_name());
    match index {
        Some(i) => {
            out.u8(0);
            out.len(i);
        }
        None => {
            out.u8(1);
            out.str(ctx.vertex_id());
            out.str(ctx.vertex_name());
        }
    }
    for n in [
        ctx.current_parallelism(),
        ctx.target_parallelism(),
        ctx.source_partitions(),
        ctx.max_parallelism(),
        ctx.lower_limit(),
        ctx.upper_limit(),
    ] {
        out.u32(n);
    }
    out.len(ctx.input_ship_strategies().len());
    for &ship in ctx.input_ship_strategies() {
        out.ship(ship);
    }
    out.len(ctx.metrics().len());
    for (_, metric) in ctx.metrics() {
        out.f64(metric.current);
        out.f64(metric.average);
    }
    let loads = ctx.subtask_loads().unwrap_or_default();
    out.len(loads.len());
    for load in loads {
        out.opt_f64(load.busy_ratio);
        out.opt_f64(load.records_in_per_second);
    }
}

/// What [`write_vertex`] wrote: the rest comes from the job's slot (the metrics' names too).
#[derive(Debug, Clone, PartialEq)]
pub struct VertexPart {
    /// The vertex's index in the job graph, or its id and name.
    pub(crate) vertex: Result<usize, (String, String)>,
    /// current, target, source partitions, max parallelism, lower, upper.
    pub(crate) numbers: [u32; 6],
    /// Input ship strategies.
    pub(crate) inputs: Vec<ShipStrategy>,
    /// Metric values, in the order of the slot's names.
    pub(crate) metrics: Vec<EvaluatedMetric>,
    /// Per-subtask loads.
    pub(crate) loads: Vec<SubtaskLoad>,
}

/// Reads what [`write_vertex`] wrote.
pub fn read_vertex(input: &mut Reader<'_>) -> Result<VertexPart, DecodeError> {
    let vertex = match input.u8()? {
        0 => Ok(input.u32()? as usize),
        1 => Err((input.string()?, input.string()?)),
        other => return Err(DecodeError(format!("unknown vertex reference {other}"))),
    };
    let mut numbers = [0u32; 6];
    for n in &mut numbers {
        *n = input.u32()?;
    }
    let inputs = input.list(1, Reader::ship)?;
    let metrics = input.list(16, |input| {
        Ok(EvaluatedMetric {
            current: input.f64()?,
            average: input.f64()?,
        })
    })?;
    let loads = input.list(2, |input| {
        Ok(SubtaskLoad {
            busy_ratio: input.opt_f64()?,
            records_in_per_second: input.opt_f64()?,
        })
    })?;
    Ok(VertexPart {
        vertex,
        numbers,
        inputs,
        metrics,
        loads,
    })
}

/// A compact reply frame.
pub(crate) fn encode_reply(id: u64, outcome: &Outcome) -> Result<Vec<u8>, FrameError> {
    let mut out = Writer::frame();
    out.u8(TAG_REPLY);
    out.u64(id);
    write_outcome(&mut out, outcome);
    out.finish()
}

/// The compact reply to a batch: an outcome per entry, in order.
pub(crate) fn encode_replies(id: u64, outcomes: &[Outcome]) -> Result<Vec<u8>, FrameError> {
    let mut out = Writer::frame();
    out.u8(TAG_BATCH_REPLY);
    out.u64(id);
    out.len(outcomes.len());
    for outcome in outcomes {
        write_outcome(&mut out, outcome);
    }
    out.finish()
}

fn write_outcome(out: &mut Writer, outcome: &Outcome) {
    match outcome {
        Outcome::Applicable(false) => out.u8(0),
        Outcome::Applicable(true) => out.u8(1),
        Outcome::Aligned(p) => {
            out.u8(2);
            out.u32(*p);
        }
        Outcome::Valid => out.u8(3),
        Outcome::Error(message) => {
            out.u8(4);
            out.str(message);
        }
        // Evaluators and executors are called in JSON and answered in JSON: a compact reply
        // never carries their answers, and one that would says so instead.
        Outcome::Evaluated(_) | Outcome::Verdict(_) => {
            out.u8(4);
            out.str("an evaluator's or executor's answer has no compact form");
        }
    }
}

fn read_outcome(input: &mut Reader<'_>) -> Result<Outcome, DecodeError> {
    Ok(match input.u8()? {
        0 => Outcome::Applicable(false),
        1 => Outcome::Applicable(true),
        2 => Outcome::Aligned(input.u32()?),
        3 => Outcome::Valid,
        4 => Outcome::Error(input.string()?),
        other => return Err(DecodeError(format!("unknown outcome {other}"))),
    })
}

/// Reads a compact reply (its tag already read).
pub(crate) fn decode_reply(input: &mut Reader<'_>) -> Result<(u64, Outcome), DecodeError> {
    let id = input.u64()?;
    let outcome = read_outcome(input)?;
    input.end()?;
    Ok((id, outcome))
}

/// Reads the reply to a batch (its tag already read).
pub(crate) fn decode_replies(input: &mut Reader<'_>) -> Result<(u64, Vec<Outcome>), DecodeError> {
    let id = input.u64()?;
    let outcomes = (0..input.count(1)?)
        .map(|_| read_outcome(input))
        .collect::<Result<Vec<_>, _>>()?;
    input.end()?;
    Ok((id, outcomes))
}

/// A frame body from a worker, JSON or a compact reply (to one call or to a batch).
pub(crate) fn decode_worker_message(body: &[u8]) -> Result<WorkerMessage, FrameError> {
    if is_json(body) {
        return Ok(serde_json::from_slice(body)?);
    }
    let mut input = Reader::new(body);
    match input.u8()? {
        TAG_REPLY => {
            let (id, outcome) = decode_reply(&mut input)?;
            Ok(WorkerMessage::Reply { id, outcome })
        }
        TAG_BATCH_REPLY => {
            let (id, outcomes) = decode_replies(&mut input)?;
            Ok(WorkerMessage::Replies { id, outcomes })
        }
        other => Err(DecodeError(format!("unknown frame tag {other}")).into()),
    }
}
