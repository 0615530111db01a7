//! What a worker keeps of each job between calls in protocol 3, seen from both sides.
//!
//! Alignment calls a mode for the vertices of a job one after the other, cycle after cycle,
//! with the same job name, graph, parameters and metric names: only the vertex and its numbers
//! change. The host gives each job a slot; [`SentJobs`] (host side) remembers what it last
//! sent for each slot and puts into a request only what differs, [`HeldJobs`] (worker side)
//! keeps it and fills it in. Both change only by the same requests, in the same order (one
//! request at a time, on one pipe), so they agree as long as the worker lives; a new worker
//! starts with both empty.
//!
//! The number of slots is bounded ([`MAX_SLOTS`]): past it the host starts over from an empty
//! table, and sends everything again, so that jobs that come and go (a fleet file edited while
//! the host runs) cannot make either side grow without end.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use flowscale_sdk::{AlignmentContext, EvaluatedMetric, JobTopology, ModeParams};

use super::compact::{
    ContextCall, DecodeError, Reader, TAG_CONTEXT_CALL, Writer, read_vertex, write_vertex,
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
        let job = ctx.job_name();
        if !self.jobs.contains_key(job) && self.next_slot >= MAX_SLOTS {
            self.jobs.clear();
            self.next_slot = 0;
        }
        let sent = self.jobs.get(job);
        let slot = sent.map_or(self.next_slot, |s| s.slot);
        let mut flags = 0;
        match sent {
            None => flags |= JOB | GRAPH | PARAMS | NAMES,
            Some(sent) => {
                // Compared by value: the context does not show whether its graph is the very
                // one of the last call, and comparing costs far less than sending it.
                if sent.topology != *ctx.topology() {
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
        let mut out = Writer::frame();
        out.u8(TAG_CONTEXT_CALL);
        out.u64(id);
        out.str(mode);
        out.u8(call.code());
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
        write_vertex(&mut out, ctx);
        let frame = out.finish()?;
        // Recorded once the frame exists: a frame that is written but not read whole means a
        // dead or killed worker, and a new worker comes with a new, empty `SentJobs`.
        if flags & JOB != 0 {
            self.next_slot += 1;
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
        Ok(frame)
    }
}

fn metric_names(ctx: &AlignmentContext) -> Vec<String> {
    ctx.metrics().iter().map(|(n, _)| n.clone()).collect()
}

/// What the worker keeps of one job.
struct Held {
    job: String,
    topology: Arc<JobTopology>,
    params: ModeParams,
    metric_names: Vec<String>,
}

/// Worker side: what the host sent for each job.
#[derive(Default)]
pub struct HeldJobs {
    slots: Vec<Option<Held>>,
}

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

impl HeldJobs {
    /// Reads a compact request (tag included), keeping what it brings for its job.
    pub fn decode(&mut self, body: &[u8]) -> Result<ContextRequest, DecodeError> {
        let mut input = Reader::new(body);
        if input.u8()? != TAG_CONTEXT_CALL {
            return Err(DecodeError("not a context call".to_string()));
        }
        let id = input.u64()?;
        let mode = input.string()?;
        let call = ContextCall::from_code(input.u8()?)?;
        let slot = input.u32()?;
        if slot >= MAX_SLOTS {
            return Err(DecodeError(format!("slot {slot} above the limit")));
        }
        let flags = input.u8()?;
        let held = self.update(slot as usize, flags, &mut input)?;
        let part = read_vertex(&mut input)?;
        input.end()?;
        let (vertex_id, vertex_name) = match part.vertex {
            Ok(i) => match held.topology.vertices.get(i) {
                Some(v) => (v.id.clone(), v.name.clone()),
                None => return Err(DecodeError(format!("vertex {i} is not in the graph"))),
            },
            Err(strings) => strings,
        };
        if part.metrics.len() != held.metric_names.len() {
            return Err(DecodeError(format!(
                "{} metric values for {} names",
                part.metrics.len(),
                held.metric_names.len()
            )));
        }
        let metrics: Vec<(String, EvaluatedMetric)> = held
            .metric_names
            .iter()
            .cloned()
            .zip(part.metrics)
            .collect();
        let [
            current,
            target,
            source_partitions,
            max_parallelism,
            lower,
            upper,
        ] = part.numbers;
        let ctx = AlignmentContext::builder(current, target, max_parallelism)
            .identity(held.job.clone(), vertex_id, vertex_name)
            .source_partitions(source_partitions)
            .limits(lower, upper)
            .input_ship_strategies(part.inputs)
            .metrics(metrics)
            .shared_topology(Arc::clone(&held.topology))
            .params(held.params.clone())
            .subtask_loads(part.loads)
            .build();
        Ok(ContextRequest {
            id,
            mode,
            call,
            ctx,
        })
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
                job,
                topology: Arc::default(),
                params: ModeParams::default(),
                metric_names: Vec::new(),
            });
        }
        let Some(Some(held)) = self.slots.get_mut(slot) else {
            return Err(DecodeError(format!("slot {slot} was never filled")));
        };
        if flags & GRAPH != 0 {
            held.topology = Arc::new(input.topology()?);
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
    use flowscale_sdk::{ShipStrategy, SubtaskLoad, TopologyEdge, TopologyVertex};

    use super::*;
    use crate::plugins::isolation::compact::{decode_worker_message, encode_reply};
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

    #[test]
    fn past_the_slot_limit_both_sides_start_over() {
        let (mut sent, mut held) = (SentJobs::default(), HeldJobs::default());
        let small = |job: String| {
            AlignmentContext::builder(2, 3, 8)
                .identity(job, "v", "v")
                .build()
        };
        for i in 0..=MAX_SLOTS {
            deliver(&mut sent, &mut held, &small(format!("job-{i}")));
        }
        assert_eq!(sent.jobs.len(), 1, "the table started over");
        assert!(held.slots.len() <= MAX_SLOTS as usize);
        deliver(&mut sent, &mut held, &small(format!("job-{MAX_SLOTS}")));
        deliver(&mut sent, &mut held, &small("job-0".to_string()));
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
}
