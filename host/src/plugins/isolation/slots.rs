//! What a worker keeps of each job between calls from protocol 3 on, seen from both sides.
//!
//! Alignment calls a mode for the vertices of a job one after the other, cycle after cycle,
//! with the same job name, graph, parameters and metric names: only the vertex and its numbers
//! change. The host gives each job a slot; [`SentJobs`] (host side) remembers what it last
//! sent for each slot and puts into a request only what differs, [`HeldJobs`] (worker side)
//! keeps it and fills it in. A batch (protocol 4) is a sequence of such calls in one request:
//! each entry names its job's slot and brings what changed since the entry before it. Both change only by the same requests, in the same order (one
//! request at a time, on one pipe), so they agree as long as the worker lives; a new worker
//! starts with both empty.
//!
//! A job whose loop ended (a reload removed it) is forgotten ([`SentJobs::forget`]): its slot
//! goes to the next new job, whose first call fills it anew on the worker, so both tables hold
//! about as many jobs as the host runs at once. The number of slots is bounded as well
//! ([`MAX_SLOTS`]): past it the host starts over from an empty table, and sends everything
//! again, so that jobs that come and go cannot make either side grow without end.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use flowscale_sdk::{AlignmentContext, JobTopology, MetricList, ModeParams};

use super::compact::{
    ContextCall, DecodeError, Reader, TAG_BATCH_CALL, TAG_CONTEXT_CALL, Writer, read_vertex,
    write_vertex,
};
use super::protocol::FrameError;

/// The most jobs a worker keeps.
pub const MAX_SLOTS: u32 = 16_384;

/// The job name follows.
const JOB: u8 = 1;
/// The job graph follows.
const GRAPH: u8 = 2;
/// The mode parameters follow.
const PARAMS: u8 = 4;
/// The metric names follow.
const NAMES: u8 = 8;

/// What the host last sent for one job.
struct Sent {
    slot: u32,
    topology: JobTopology,
    params: ModeParams,
    metric_names: Vec<String>,
}

/// Host side: what the worker holds for each job, as far as the host sent it.
#[derive(Default)]
pub struct SentJobs {
    jobs: HashMap<String, Sent>,
    next_slot: u32,
    /// The slots of forgotten jobs, below `next_slot`: taken by the next new jobs first.
    free: Vec<u32>,
}

impl SentJobs {
    /// A compact request for `call` on `ctx`, carrying what the worker does not hold yet; from
    /// now on the host counts on the worker holding it.
    pub fn encode(
        &mut self,
        id: u64,
        mode: &str,
        call: ContextCall,
        ctx: &AlignmentContext,
    ) -> Result<Vec<u8>, FrameError> {
        let mut out = Writer::frame();
        header(&mut out, TAG_CONTEXT_CALL, id, mode, call);
        self.entry(&mut out, ctx, None);
        self.finish(out)
    }

    /// A batch (protocol 4): one request for `call` on each of `ctxs`, each entry what
    /// [`SentJobs::encode`] writes after the header. The entries of one job share its slot:
    /// the first carries what the worker does not hold yet, the others usually nothing but
    /// their vertex.
    pub fn encode_batch(
        &mut self,
        id: u64,
        mode: &str,
        call: ContextCall,
        ctxs: &[&AlignmentContext],
    ) -> Result<Vec<u8>, FrameError> {
        let mut out = Writer::frame();
        header(&mut out, TAG_BATCH_CALL, id, mode, call);
        out.len(ctxs.len());
        let mut before: Option<&AlignmentContext> = None;
        for ctx in ctxs {
            self.entry(&mut out, ctx, before);
            before = Some(ctx);
        }
        self.finish(out)
    }

    /// Forgets what was sent for `job`, whose loop ended: its slot goes to the next new job
    /// (whose first call fills it anew on the worker), and the table gives its room back once
    /// most of its jobs are gone.
    pub fn forget(&mut self, job: &str) {
        if let Some(sent) = self.jobs.remove(job) {
            self.free.push(sent.slot);
        }
        if self.jobs.capacity() > 2 * self.jobs.len() + 64 {
            self.jobs.shrink_to_fit();
        }
    }

    /// Starts over from an empty table.
    fn clear(&mut self) {
        self.jobs.clear();
        self.free.clear();
        self.next_slot = 0;
    }

    /// The frame; if it cannot be sent (above the frame limit), the table starts over, since
    /// the worker never gets what its entries recorded.
    fn finish(&mut self, out: Writer) -> Result<Vec<u8>, FrameError> {
        out.finish().inspect_err(|_| self.clear())
    }

    /// Writes one call's job slot, what it brings for the slot and its vertex, and records what
    /// the worker will hold once it has read the frame. A frame that is written but not read
    /// whole means a dead or killed worker, and a new worker comes with a new, empty table.
    ///
    /// `before` is the entry written just before in the same frame, if any: when it is of the
    /// same job and lends the very same graph (one object, both alive now, so necessarily
    /// equal), the graph the worker holds is that one and is not compared again. A job's
    /// vertices share one graph, so a batch compares it once instead of once per vertex.
    fn entry(
        &mut self,
        out: &mut Writer,
        ctx: &AlignmentContext,
        before: Option<&AlignmentContext>,
    ) {
        let job = ctx.job_name();
        if !self.jobs.contains_key(job) && self.free.is_empty() && self.next_slot >= MAX_SLOTS {
            self.clear();
        }
        let sent = self.jobs.get(job);
        let slot = sent.map_or_else(
            || self.free.last().copied().unwrap_or(self.next_slot),
            |s| s.slot,
        );
        let mut flags = 0;
        match sent {
            None => flags |= JOB | GRAPH | PARAMS | NAMES,
            Some(sent) => {
                // Compared by value: the context does not show whether its graph is the very
                // one of the last call, and comparing costs far less than sending it.
                let same_graph = before.is_some_and(|b| {
                    std::ptr::eq(b.topology(), ctx.topology()) && b.job_name() == job
                });
                if !same_graph && sent.topology != *ctx.topology() {
                    flags |= GRAPH;
                }
                if sent.params != *ctx.params() {
                    flags |= PARAMS;
                }
                let names = ctx.metrics().iter().map(|(n, _)| n);
                if !names.eq(sent.metric_names.iter()) {
                    flags |= NAMES;
                }
            }
        }
        out.u32(slot);
        out.u8(flags);
        if flags & JOB != 0 {
            out.str(job);
        }
        if flags & GRAPH != 0 {
            out.topology(ctx.topology());
        }
        if flags & PARAMS != 0 {
            out.str(ctx.params().mode_name());
            out.len(ctx.params().len());
            for (k, v) in ctx.params().iter() {
                out.str(k);
                out.str(v);
            }
        }
        if flags & NAMES != 0 {
            out.len(ctx.metrics().len());
            for (name, _) in ctx.metrics() {
                out.str(name);
            }
        }
        write_vertex(out, ctx);
        self.record(slot, flags, ctx);
    }

    /// Remembers what an entry with `flags` brought for `slot`.
    fn record(&mut self, slot: u32, flags: u8, ctx: &AlignmentContext) {
        let job = ctx.job_name();
        if flags & JOB != 0 {
            // The slot `entry` took: a forgotten job's, else the next one.
            if self.free.last() == Some(&slot) {
                self.free.pop();
            } else {
                self.next_slot += 1;
            }
            self.jobs.insert(
                job.to_string(),
                Sent {
                    slot,
                    topology: ctx.topology().clone(),
                    params: ctx.params().clone(),
                    metric_names: metric_names(ctx),
                },
            );
        } else if let Some(entry) = self.jobs.get_mut(job) {
            if flags & GRAPH != 0 {
                entry.topology = ctx.topology().clone();
            }
            if flags & PARAMS != 0 {
                entry.params = ctx.params().clone();
            }
            if flags & NAMES != 0 {
                entry.metric_names = metric_names(ctx);
            }
        }
    }
}

/// What starts every compact request: its tag, id, mode and call.
fn header(out: &mut Writer, tag: u8, id: u64, mode: &str, call: ContextCall) {
    out.u8(tag);
    out.u64(id);
    out.str(mode);
    out.u8(call.code());
}

fn metric_names(ctx: &AlignmentContext) -> Vec<String> {
    ctx.metrics().iter().map(|(n, _)| n.clone()).collect()
}

/// Reads what [`header`] wrote, refusing another tag.
fn read_header(input: &mut Reader<'_>, tag: u8) -> Result<(u64, String, ContextCall), DecodeError> {
    if input.u8()? != tag {
        return Err(DecodeError(if tag == TAG_BATCH_CALL {
            "not a batch of context calls".to_string()
        } else {
            "not a context call".to_string()
        }));
    }
    let id = input.u64()?;
    let mode = input.string()?;
    let call = ContextCall::from_code(input.u8()?)?;
    Ok((id, mode, call))
}

/// What the worker keeps of one job.
struct Held {
    /// Shared by every context of the job, instead of a copy per vertex.
    job: Arc<str>,
    topology: Arc<JobTopology>,
    /// Each vertex's id and name, in the graph's order, shared by the vertex's contexts.
    vertex_texts: Vec<(Arc<str>, Arc<str>)>,
    params: ModeParams,
    metric_names: Vec<String>,
}

/// Worker side: what the host sent for each job.
#[derive(Default)]
pub struct HeldJobs {
    slots: Vec<Option<Held>>,
    /// The metric lists of contexts answered, refilled for the next ones: their names are
    /// nearly always the same, so a context's list then costs no allocation.
    spare: Vec<MetricList>,
}

/// The most metric lists kept for reuse: a batch is one job's vertices.
const SPARE_LISTS: usize = 64;

/// A compact request, read.
pub struct ContextRequest {
    /// Echoed in the reply.
    pub(crate) id: u64,
    /// The mode's implementation id.
    pub(crate) mode: String,
    /// The call.
    pub(crate) call: ContextCall,
    /// Its context, filled in from the job's slot.
    pub ctx: AlignmentContext,
}

/// A batch of compact requests (protocol 4), read.
pub struct BatchRequest {
    /// Echoed in the reply.
    pub(crate) id: u64,
    /// The mode's implementation id.
    pub(crate) mode: String,
    /// The call, the same for every entry.
    pub(crate) call: ContextCall,
    /// Each entry's context, filled in from its job's slot, in order.
    pub ctxs: Vec<AlignmentContext>,
}

/// The smallest entry a batch can hold: a slot, flags, a vertex index, six numbers and three
/// counts.
const MIN_ENTRY: usize = 4 + 1 + 1 + 4 + 6 * 4 + 3 * 4;

impl HeldJobs {
    /// Reads a compact request (tag included), keeping what it brings for its job.
    pub fn decode(&mut self, body: &[u8]) -> Result<ContextRequest, DecodeError> {
        let mut input = Reader::new(body);
        let (id, mode, call) = read_header(&mut input, TAG_CONTEXT_CALL)?;
        let ctx = self.entry(&mut input)?;
        input.end()?;
        Ok(ContextRequest {
            id,
            mode,
            call,
            ctx,
        })
    }

    /// Reads a batch (tag included), keeping what its entries bring for their jobs, in order.
    pub fn decode_batch(&mut self, body: &[u8]) -> Result<BatchRequest, DecodeError> {
        let mut input = Reader::new(body);
        let (id, mode, call) = read_header(&mut input, TAG_BATCH_CALL)?;
        let ctxs = input.list(MIN_ENTRY, |input| self.entry(input))?;
        input.end()?;
        Ok(BatchRequest {
            id,
            mode,
            call,
            ctxs,
        })
    }

    /// Reads one call's slot, what it brings for the slot and its vertex: its whole context.
    fn entry(&mut self, input: &mut Reader<'_>) -> Result<AlignmentContext, DecodeError> {
        let mut list = self.spare.pop().unwrap_or_default();
        let slot = input.u32()?;
        if slot >= MAX_SLOTS {
            return Err(DecodeError(format!("slot {slot} above the limit")));
        }
        let flags = input.u8()?;
        let held = self.update(slot as usize, flags, input)?;
        let part = read_vertex(input)?;
        let (vertex_id, vertex_name) = match part.vertex {
            Ok(i) => match held.vertex_texts.get(i) {
                Some((id, name)) => (Arc::clone(id), Arc::clone(name)),
                None => return Err(DecodeError(format!("vertex {i} is not in the graph"))),
            },
            Err((id, name)) => (Arc::from(id), Arc::from(name)),
        };
        if part.metrics.len() != held.metric_names.len() {
            return Err(DecodeError(format!(
                "{} metric values for {} names",
                part.metrics.len(),
                held.metric_names.len()
            )));
        }
        list.refill(
            held.metric_names
                .iter()
                .map(String::as_str)
                .zip(part.metrics),
        );
        let [
            current,
            target,
            source_partitions,
            max_parallelism,
            lower,
            upper,
        ] = part.numbers;
        Ok(AlignmentContext::builder(current, target, max_parallelism)
            .shared_identity(Arc::clone(&held.job), vertex_id, vertex_name)
            .source_partitions(source_partitions)
            .limits(lower, upper)
            .input_ship_strategies(part.inputs)
            .metric_list(list)
            .shared_topology(Arc::clone(&held.topology))
            .params(held.params.clone())
            .subtask_loads(part.loads)
            .build())
    }

    /// Takes back the metric list of a context that was answered, for the next context.
    pub fn give_back(&mut self, ctx: AlignmentContext) {
        let list = ctx.into_metric_list();
        if !list.is_empty() && self.spare.len() < SPARE_LISTS {
            self.spare.push(list);
        }
    }

    /// Applies what the request brings for `slot` and returns the slot.
    fn update(
        &mut self,
        slot: usize,
        flags: u8,
        input: &mut Reader<'_>,
    ) -> Result<&Held, DecodeError> {
        if flags & JOB != 0 {
            let job = input.string()?;
            if self.slots.len() <= slot {
                self.slots.resize_with(slot + 1, || None);
            }
            self.slots[slot] = Some(Held {
                job: Arc::from(job),
                topology: Arc::default(),
                vertex_texts: Vec::new(),
                params: ModeParams::default(),
                metric_names: Vec::new(),
            });
        }
        let Some(Some(held)) = self.slots.get_mut(slot) else {
            return Err(DecodeError(format!("slot {slot} was never filled")));
        };
        if flags & GRAPH != 0 {
            held.topology = Arc::new(input.topology()?);
            held.vertex_texts = held
                .topology
                .vertices
                .iter()
                .map(|v| (Arc::from(v.id.as_str()), Arc::from(v.name.as_str())))
                .collect();
        }
        if flags & PARAMS != 0 {
            let mode_name = input.string()?;
            let entries = (0..input.count(8)?)
                .map(|_| Ok((input.string()?, input.string()?)))
                .collect::<Result<BTreeMap<_, _>, DecodeError>>()?;
            held.params = ModeParams::new(mode_name, entries);
        }
        if flags & NAMES != 0 {
            held.metric_names = (0..input.count(4)?)
                .map(|_| input.string())
                .collect::<Result<_, _>>()?;
        }
        Ok(held)
    }
}

#[cfg(test)]
mod tests {
    use flowscale_sdk::{EvaluatedMetric, ShipStrategy, SubtaskLoad, TopologyEdge, TopologyVertex};

    use super::*;
    use crate::plugins::isolation::compact::{decode_worker_message, encode_replies, encode_reply};
    use crate::plugins::isolation::protocol::{Outcome, WorkerMessage};

    fn graph(parallelism: u32) -> JobTopology {
        JobTopology {
            vertices: (0..3)
                .map(|i| TopologyVertex {
                    id: format!("v{i}"),
                    name: format!("operator {i}"),
                    parallelism,
                    max_parallelism: 128,
                    source_partitions: if i == 0 { 6 } else { 0 },
                })
                .collect(),
            edges: vec![
                TopologyEdge {
                    from: "v0".into(),
                    to: "v1".into(),
                    ship_strategy: ShipStrategy::Custom { buckets: 48 },
                },
                TopologyEdge {
                    from: "v1".into(),
                    to: "v2".into(),
                    ship_strategy: ShipStrategy::Hash,
                },
            ],
        }
    }

    fn metric(current: f64, average: f64) -> EvaluatedMetric {
        EvaluatedMetric { current, average }
    }

    /// A context of `job` for vertex `vertex` (in the graph unless it is "elsewhere").
    fn ctx(
        job: &str,
        vertex: &str,
        target: u32,
        graph: JobTopology,
        rule: &str,
    ) -> AlignmentContext {
        AlignmentContext::builder(4, target, 128)
            .identity(job, vertex, format!("operator {}", &vertex[1..]))
            .source_partitions(6)
            .limits(1, 64)
            .input_ship_strategies(vec![
                ShipStrategy::Custom { buckets: 48 },
                ShipStrategy::Hash,
            ])
            .metrics(vec![
                ("LOAD".into(), metric(0.5, f64::NAN)),
                ("LAG".into(), metric(f64::INFINITY, 2.5)),
            ])
            .topology(graph)
            .params(ModeParams::new(
                "buckets",
                BTreeMap::from([("rule".to_string(), rule.to_string())]),
            ))
            .subtask_loads(vec![
                SubtaskLoad {
                    busy_ratio: Some(0.9),
                    records_in_per_second: None,
                },
                SubtaskLoad {
                    busy_ratio: None,
                    records_in_per_second: Some(300.0),
                },
            ])
            .build()
    }

    /// Every accessor's value, floats by their bits (NaN included).
    fn seen(ctx: &AlignmentContext) -> String {
        let bits = |m: &EvaluatedMetric| (m.current.to_bits(), m.average.to_bits());
        format!(
            "{} {} {} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
            ctx.job_name(),
            ctx.vertex_id(),
            ctx.vertex_name(),
            [
                ctx.current_parallelism(),
                ctx.target_parallelism(),
                ctx.source_partitions(),
                ctx.max_parallelism(),
                ctx.lower_limit(),
                ctx.upper_limit()
            ],
            ctx.input_ship_strategies(),
            ctx.metrics()
                .iter()
                .map(|(n, m)| (n, bits(m)))
                .collect::<Vec<_>>(),
            ctx.topology(),
            ctx.params(),
            ctx.subtask_loads(),
            ctx.alignment_cap(),
        )
    }

    /// Sends `ctx` from `sent` to `held`: the frame's length, and checks the worker sees it all.
    fn deliver(sent: &mut SentJobs, held: &mut HeldJobs, ctx: &AlignmentContext) -> usize {
        let frame = sent
            .encode(9, "bucket-align", ContextCall::AlignIfApplicable, ctx)
            .unwrap();
        let len = u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
        assert_eq!(len, frame.len() - 4);
        let request = held.decode(&frame[4..]).unwrap();
        assert_eq!(
            (request.id, request.mode.as_str(), request.call),
            (9, "bucket-align", ContextCall::AlignIfApplicable)
        );
        assert_eq!(seen(&request.ctx), seen(ctx));
        len
    }

    #[test]
    fn the_worker_sees_every_call_whole_while_only_changes_travel() {
        let (mut sent, mut held) = (SentJobs::default(), HeldJobs::default());
        let first = deliver(
            &mut sent,
            &mut held,
            &ctx("a", "v1", 8, graph(4), "DIVISOR"),
        );
        // The next vertex of the same job: no name, graph, parameters or metric names.
        let next = deliver(
            &mut sent,
            &mut held,
            &ctx("a", "v2", 6, graph(4), "DIVISOR"),
        );
        // What the first call carried besides: the job's name; the graph (a count, 3 vertices
        // of two strings and three numbers, a count, 2 edges of two strings and a ship
        // strategy, the custom one with its buckets); the parameters; the metric names.
        let job = 4 + 1;
        let graph_bytes = 4 + 3 * ((4 + 2) + (4 + 10) + 12) + 4 + (6 + 6 + 5) + (6 + 6 + 1);
        let params = (4 + 7) + 4 + (4 + 4) + (4 + 7);
        let names = 4 + (4 + 3) + (4 + 4);
        assert_eq!(first - next, job + graph_bytes + params + names);
        // Another job gets its own slot, and the first job's is kept meanwhile.
        assert_eq!(
            deliver(
                &mut sent,
                &mut held,
                &ctx("b", "v1", 8, graph(4), "DIVISOR")
            ),
            first
        );
        assert_eq!(
            deliver(
                &mut sent,
                &mut held,
                &ctx("a", "v0", 2, graph(4), "DIVISOR")
            ),
            next
        );
        // A rescaled graph, new parameters, other metric names: sent again, and seen.
        let rescaled = deliver(
            &mut sent,
            &mut held,
            &ctx("a", "v1", 8, graph(8), "DIVISOR"),
        );
        assert_eq!(rescaled, next + graph_bytes);
        let reruled = deliver(
            &mut sent,
            &mut held,
            &ctx("a", "v1", 8, graph(8), "LOAD_REDUCING"),
        );
        assert_eq!(
            reruled,
            next + params + ("LOAD_REDUCING".len() - "DIVISOR".len())
        );
        let mut renamed = ctx("a", "v1", 8, graph(8), "LOAD_REDUCING");
        renamed = AlignmentContext::builder(4, 8, 128)
            .identity("a", "v1", "operator 1")
            .metrics(vec![("OTHER".into(), metric(1.0, 1.0))])
            .topology(renamed.topology().clone())
            .params(renamed.params().clone())
            .build();
        deliver(&mut sent, &mut held, &renamed);
        // A vertex the graph does not have travels by its strings.
        deliver(
            &mut sent,
            &mut held,
            &ctx("a", "v9", 3, graph(8), "DIVISOR"),
        );
        deliver(
            &mut sent,
            &mut held,
            &ctx("", "v1", 3, JobTopology::default(), "DIVISOR"),
        );
    }

    /// The smallest call of `job`: one vertex, no graph, no metrics.
    fn small_call(job: String) -> AlignmentContext {
        AlignmentContext::builder(2, 3, 8)
            .identity(job, "v", "v")
            .build()
    }

    #[test]
    fn a_forgotten_jobs_slot_goes_to_the_next_new_job() {
        let (mut sent, mut held) = (SentJobs::default(), HeldJobs::default());
        let call = |job: &str| ctx(job, "v1", 8, graph(4), "DIVISOR");
        let whole = deliver(&mut sent, &mut held, &call("a"));
        deliver(&mut sent, &mut held, &call("b"));
        sent.forget("a");
        sent.forget("never sent");
        assert!(!sent.jobs.contains_key("a"));
        // The new job takes `a`'s slot, sends everything, and the worker reads it whole (the
        // helper compares what the worker rebuilt with the call).
        assert_eq!(deliver(&mut sent, &mut held, &call("c")), whole);
        assert_eq!(sent.jobs["c"].slot, 0);
        assert_eq!(held.slots.len(), 2, "the worker's table did not grow");
        // `b` kept its slot and what the worker holds of it.
        assert!(deliver(&mut sent, &mut held, &call("b")) < whole);
        // `a` back: a new slot, everything sent again.
        assert_eq!(deliver(&mut sent, &mut held, &call("a")), whole);
        assert_eq!(sent.jobs["a"].slot, 2);
        assert!(sent.free.is_empty());
    }

    #[test]
    fn a_table_of_many_jobs_shrinks_once_they_are_forgotten() {
        let (mut sent, mut held) = (SentJobs::default(), HeldJobs::default());
        for i in 0..1000 {
            deliver(&mut sent, &mut held, &small_call(format!("job-{i}")));
        }
        let full = sent.jobs.capacity();
        for i in 3..1000 {
            sent.forget(&format!("job-{i}"));
        }
        assert_eq!(sent.jobs.len(), 3);
        assert!(
            sent.jobs.capacity() < full / 4,
            "{} of {full}",
            sent.jobs.capacity()
        );
    }

    #[test]
    fn past_the_slot_limit_both_sides_start_over() {
        let (mut sent, mut held) = (SentJobs::default(), HeldJobs::default());
        for i in 0..=MAX_SLOTS {
            deliver(&mut sent, &mut held, &small_call(format!("job-{i}")));
        }
        assert_eq!(sent.jobs.len(), 1, "the table started over");
        assert!(held.slots.len() <= MAX_SLOTS as usize);
        deliver(
            &mut sent,
            &mut held,
            &small_call(format!("job-{MAX_SLOTS}")),
        );
        deliver(&mut sent, &mut held, &small_call("job-0".to_string()));
    }

    #[test]
    fn a_broken_request_is_an_error_never_a_panic() {
        let mut sent = SentJobs::default();
        let frame = sent
            .encode(
                1,
                "m",
                ContextCall::Align,
                &ctx("a", "v1", 8, graph(4), "DIVISOR"),
            )
            .unwrap();
        let body = &frame[4..];
        for cut in 0..body.len() {
            assert!(
                HeldJobs::default().decode(&body[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let mut extra = body.to_vec();
        extra.push(0);
        assert!(HeldJobs::default().decode(&extra).is_err());
        // A later call of the job to a worker that never got the first one.
        let later = sent
            .encode(
                2,
                "m",
                ContextCall::Align,
                &ctx("a", "v2", 8, graph(4), "DIVISOR"),
            )
            .unwrap();
        let err = HeldJobs::default().decode(&later[4..]).err().unwrap();
        assert!(err.0.contains("never filled"), "{err}");
        // Counts the frame cannot hold are refused before anything is allocated.
        let mut huge = Reader::new(&[0xff, 0xff, 0xff, 0xff, 1, 2]);
        assert!(huge.count(1).is_err());
        // Replies: JSON and compact read the same; garbage is refused.
        let reply = encode_reply(7, &Outcome::Aligned(12)).unwrap();
        assert_eq!(
            decode_worker_message(&reply[4..]).unwrap(),
            WorkerMessage::Reply {
                id: 7,
                outcome: Outcome::Aligned(12)
            }
        );
        assert!(decode_worker_message(&[9, 1, 2]).is_err());
        assert!(decode_worker_message(&reply[4..reply.len() - 1]).is_err());
    }

    #[test]
    fn a_batch_carries_the_entries_of_the_calls_one_by_one_in_one_frame() {
        let calls = [
            ctx("a", "v0", 2, graph(4), "DIVISOR"),
            ctx("a", "v1", 8, graph(4), "DIVISOR"),
            ctx("b", "v1", 8, graph(8), "LOAD_REDUCING"),
            ctx("a", "v2", 6, graph(4), "DIVISOR"),
            ctx("a", "v9", 3, graph(4), "DIVISOR"),
            AlignmentContext::builder(4, 7, 128)
                .identity("a", "v1", "operator 1")
                .metrics(vec![("OTHER".into(), metric(1.0, 1.0))])
                .topology(graph(4))
                .params(ctx("a", "v1", 8, graph(4), "DIVISOR").params().clone())
                .build(),
        ];
        let refs: Vec<&AlignmentContext> = calls.iter().collect();
        let (mut sent, mut held) = (SentJobs::default(), HeldJobs::default());
        let frame = sent
            .encode_batch(5, "bucket-align", ContextCall::AlignIfApplicable, &refs)
            .unwrap();
        let batch = held.decode_batch(&frame[4..]).unwrap();
        assert_eq!(
            (batch.id, batch.mode.as_str(), batch.call),
            (5, "bucket-align", ContextCall::AlignIfApplicable)
        );
        let seen_all = |ctxs: &mut dyn Iterator<Item = &AlignmentContext>| -> Vec<String> {
            ctxs.map(seen).collect()
        };
        assert_eq!(
            seen_all(&mut batch.ctxs.iter()),
            seen_all(&mut calls.iter())
        );
        // The same calls one by one: each is a header (tag, id, mode, call) and the entry the
        // batch carries; the batch is one header, a count and the entries.
        let (mut sent1, mut held1) = (SentJobs::default(), HeldJobs::default());
        let singles: Vec<usize> = calls
            .iter()
            .map(|c| deliver(&mut sent1, &mut held1, c))
            .collect();
        let header = 1 + 8 + (4 + "bucket-align".len()) + 1;
        let entries: usize = singles.iter().map(|len| len - header).sum();
        assert_eq!(frame.len() - 4, header + 4 + entries);
        // Both sides go on from what the batch left: the next call of job a carries its vertex
        // and the metric names the last entry changed back, as after the calls one by one.
        let next = ctx("a", "v1", 8, graph(4), "DIVISOR");
        assert_eq!(
            deliver(&mut sent, &mut held, &next),
            deliver(&mut sent1, &mut held1, &next)
        );
    }

    #[test]
    fn a_batch_compares_a_shared_graph_once_and_its_contexts_share_their_texts() {
        let shared = Arc::new(graph(4));
        let on = |vertex: &str, graph: Arc<JobTopology>| {
            let c = ctx("a", vertex, 8, JobTopology::default(), "DIVISOR");
            AlignmentContext::builder(4, 8, 128)
                .identity("a", vertex, format!("operator {}", &vertex[1..]))
                .metrics(c.metrics().to_vec())
                .shared_topology(graph)
                .params(c.params().clone())
                .build()
        };
        // v0 and v1 (twice) lend the one graph; v2 lends another graph object, of other
        // parallelism: only the same object is taken as the graph already sent.
        let calls = [
            on("v0", Arc::clone(&shared)),
            on("v1", Arc::clone(&shared)),
            on("v1", Arc::clone(&shared)),
            on("v2", Arc::new(graph(8))),
        ];
        let refs: Vec<&AlignmentContext> = calls.iter().collect();
        let (mut sent, mut held) = (SentJobs::default(), HeldJobs::default());
        let frame = sent
            .encode_batch(1, "m", ContextCall::AlignIfApplicable, &refs)
            .unwrap();
        let batch = held.decode_batch(&frame[4..]).unwrap();
        let graphs: Vec<u32> = batch
            .ctxs
            .iter()
            .map(|c| c.topology().vertices[0].parallelism)
            .collect();
        assert_eq!(graphs, [4, 4, 4, 8]);
        // The worker lends every context of the job the one job name, and each vertex's
        // contexts its one id and name, instead of a copy each.
        let [first, second, third, _] = &batch.ctxs[..] else {
            panic!("four contexts");
        };
        assert!(std::ptr::eq(first.job_name(), second.job_name()));
        assert!(std::ptr::eq(second.vertex_id(), third.vertex_id()));
        assert!(std::ptr::eq(second.vertex_name(), third.vertex_name()));
        assert_eq!(
            (third.vertex_id(), third.vertex_name()),
            ("v1", "operator 1")
        );
    }

    #[test]
    fn a_context_given_back_lends_its_metric_list_to_the_next_one() {
        let first = ctx("a", "v0", 8, graph(4), "DIVISOR");
        let second = ctx("a", "v1", 6, graph(4), "DIVISOR");
        let (mut sent, mut held) = (SentJobs::default(), HeldJobs::default());
        let mut decode = |c: &AlignmentContext, held: &mut HeldJobs| {
            let frame = sent
                .encode_batch(1, "m", ContextCall::AlignIfApplicable, &[c])
                .unwrap();
            held.decode_batch(&frame[4..]).unwrap().ctxs.remove(0)
        };
        let answered = decode(&first, &mut held);
        let name = answered.metrics()[0].0.as_ptr();
        held.give_back(answered);
        // The next context of the job gets the list whole, the same names in the same
        // strings, with its own values.
        let next = decode(&second, &mut held);
        assert_eq!(next.metrics()[0].0.as_ptr(), name);
        assert_eq!(seen(&next), seen(&second));
    }

    #[test]
    fn a_broken_batch_is_an_error_never_a_panic() {
        let calls = [
            ctx("a", "v1", 8, graph(4), "DIVISOR"),
            ctx("a", "v2", 6, graph(4), "DIVISOR"),
        ];
        let refs: Vec<&AlignmentContext> = calls.iter().collect();
        let frame = SentJobs::default()
            .encode_batch(1, "m", ContextCall::AlignIfApplicable, &refs)
            .unwrap();
        let body = &frame[4..];
        for cut in 0..body.len() {
            assert!(
                HeldJobs::default().decode_batch(&body[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let mut extra = body.to_vec();
        extra.push(0);
        assert!(HeldJobs::default().decode_batch(&extra).is_err());
        // A batch is not a single call, nor the other way round.
        assert!(HeldJobs::default().decode(body).is_err());
        let single = SentJobs::default()
            .encode(1, "m", ContextCall::Align, &calls[0])
            .unwrap();
        assert!(HeldJobs::default().decode_batch(&single[4..]).is_err());
        // An empty batch is read as one.
        let empty = SentJobs::default()
            .encode_batch(2, "m", ContextCall::AlignIfApplicable, &[])
            .unwrap();
        assert!(
            HeldJobs::default()
                .decode_batch(&empty[4..])
                .unwrap()
                .ctxs
                .is_empty()
        );
        // Replies to a batch: every outcome, in order; a short frame is refused.
        let outcomes = vec![
            Outcome::Applicable(false),
            Outcome::Applicable(true),
            Outcome::Aligned(12),
            Outcome::Error("boom".into()),
        ];
        let reply = encode_replies(9, &outcomes).unwrap();
        assert_eq!(
            decode_worker_message(&reply[4..]).unwrap(),
            WorkerMessage::Replies { id: 9, outcomes }
        );
        for cut in 1..reply.len() - 4 {
            assert!(
                decode_worker_message(&reply[4..4 + cut]).is_err(),
                "cut at {cut}"
            );
        }
    }
}
