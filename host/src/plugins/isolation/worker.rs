//! The worker side: `flowscale plugin-worker FILE` loads one plugin file exactly as the host
//! does in-process and answers the supervisor's calls, one at a time, until its stdin closes.
//!
//! Before anything of the plugin runs, the worker
//! * keeps its original stdout for the protocol only and points file descriptor 1 at stderr, so
//!   that a stray `println!` in a plugin lands in the log instead of corrupting a frame;
//! * applies its resource limits to itself (`setrlimit`, inherited by what its plugin starts),
//!   so that a plugin that allocates without end or spins in a background thread
//!   is stopped by the kernel even if the supervisor is not looking.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use abi_stable::std_types::RStr;
use flowscale_sdk::abi::{HostLogger, LogLevel, ManifestInfo};
use flowscale_sdk::{AlignmentContext, ModeParams};

use super::compact::{ContextCall, TAG_BATCH_CALL, encode_replies, encode_reply};
use super::protocol::{
    Call, FrameError, OLDEST_PROTOCOL, Outcome, PROTOCOL_VERSION, Request, WireExecutor, WireMode,
    WireVerdict, WorkerMessage, encode, is_json, read_body, wire_metrics,
};
use super::slots::HeldJobs;
use crate::alignment::{GatedAnswer, HostMode, gate_then_align};
use crate::plugins::{Exports, Refusal};
use crate::scaling::{HostEvaluator, HostExecutor};

/// How the worker loads its file: discovery's own probe-and-load of one file (passed in by the
/// command line, so that this module does not depend on discovery, which depends on it).
pub(crate) type Loader =
    fn(&Path, HostLogger, LogLevel) -> Result<(ManifestInfo, Exports), Refusal>;

/// The limits a worker applies to itself; `None` leaves the inherited limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WorkerLimits {
    /// `RLIMIT_AS`: bytes of address space.
    pub(crate) address_space: Option<u64>,
    /// `RLIMIT_CPU`: seconds of CPU time over the worker's life (SIGXCPU at the limit, SIGKILL
    /// a few seconds later).
    pub(crate) cpu_seconds: Option<u64>,
}

/// Why a worker stopped before serving.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkerError {
    /// The protocol pipe could not be set up.
    #[error("cannot set up the protocol pipe: {0}")]
    Pipe(io::Error),
    /// A limit could not be applied.
    #[error("cannot apply {what}: {source}")]
    Limit {
        /// Which limit.
        what: &'static str,
        /// The system's error.
        source: io::Error,
    },
    /// The host went away or wrote garbage.
    #[error("{0}")]
    Frame(#[from] FrameError),
}

/// The protocol writer, shared by the replies and the plugin's log callback (which may be
/// called from any thread of the plugin): one lock per frame keeps frames whole.
static OUT: Mutex<Option<File>> = Mutex::new(None);

fn send(message: &WorkerMessage) -> Result<(), FrameError> {
    send_frame(&encode(message)?)
}

/// Writes one whole frame with one write.
fn send_frame(frame: &[u8]) -> Result<(), FrameError> {
    let mut out = OUT.lock().unwrap_or_else(|e| e.into_inner());
    match out.as_mut() {
        Some(file) => {
            file.write_all(frame)?;
            Ok(())
        }
        None => Err(FrameError::Closed),
    }
}

/// The logger the plugin gets in a worker: each record becomes a log frame, re-emitted by the
/// supervisor in the host's log.
extern "C" fn log_frame(level: u8, target: RStr<'_>, message: RStr<'_>) {
    let _ = std::panic::catch_unwind(|| {
        let _ = send(&WorkerMessage::Log {
            level,
            target: target.as_str().to_string(),
            message: message.as_str().to_string(),
        });
    });
}

fn apply_limits(limits: WorkerLimits) -> Result<(), WorkerError> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    if let Some(bytes) = limits.address_space {
        let limit = Rlimit {
            current: Some(bytes),
            maximum: Some(bytes),
        };
        setrlimit(Resource::As, limit).map_err(|e| WorkerError::Limit {
            what: "RLIMIT_AS",
            source: e.into(),
        })?;
    }
    if let Some(seconds) = limits.cpu_seconds {
        let limit = Rlimit {
            current: Some(seconds),
            maximum: Some(seconds.saturating_add(5)),
        };
        setrlimit(Resource::Cpu, limit).map_err(|e| WorkerError::Limit {
            what: "RLIMIT_CPU",
            source: e.into(),
        })?;
    }
    Ok(())
}

/// Moves the protocol off file descriptor 1: the protocol keeps a duplicate of the original
/// stdout, and 1 becomes a copy of stderr. The duplicate is closed on exec: a program the
/// plugin starts does not hold the protocol pipe open, so the host sees the worker's end when
/// the worker dies, whatever its children do.
fn take_stdout() -> Result<File, WorkerError> {
    let protocol = rustix::io::fcntl_dupfd_cloexec(io::stdout(), 3)
        .map_err(|e| WorkerError::Pipe(e.into()))?;
    rustix::stdio::dup2_stdout(io::stderr()).map_err(|e| WorkerError::Pipe(e.into()))?;
    Ok(File::from(protocol))
}

/// Serves `file` until the host closes stdin. `log_level` is the most verbose level the host
/// records (1 error ... 5 trace), handed to the plugin so that it does not format records
/// nobody reads.
pub(crate) fn serve(
    file: &Path,
    limits: WorkerLimits,
    log_level: u8,
    load_file: Loader,
) -> Result<(), WorkerError> {
    let out = take_stdout()?;
    *OUT.lock().unwrap_or_else(|e| e.into_inner()) = Some(out);
    apply_limits(limits)?;
    let logger = HostLogger { log: log_frame };
    let served = match load_file(file, logger, log_level) {
        Ok((info, exports)) => {
            let wire = |id: &String, description: &String| WireMode {
                id: id.clone(),
                description: description.clone(),
            };
            send(&WorkerMessage::Hello {
                protocol: OLDEST_PROTOCOL,
                protocols: (OLDEST_PROTOCOL..=PROTOCOL_VERSION).collect(),
                plugin: info.plugin_name.clone(),
                version: info.plugin_version.clone(),
                modes: exports
                    .modes
                    .iter()
                    .map(|m| wire(&m.id, &m.description))
                    .collect(),
                evaluators: exports
                    .evaluators
                    .iter()
                    .map(|e| wire(&e.id, &e.description))
                    .collect(),
                // The priority was asked when the executor was created: this does not call
                // the plugin again.
                executors: exports
                    .executors
                    .iter()
                    .map(|x| WireExecutor {
                        id: x.id.clone(),
                        description: x.description.clone(),
                        priority: x.executor.priority(),
                    })
                    .collect(),
            })?;
            Served::from(exports)
        }
        Err(refusal) => {
            send(&WorkerMessage::Refused {
                reason: refusal.to_string(),
                details: refusal.details().map(str::to_string),
            })?;
            return Ok(());
        }
    };
    answer_requests(&served)
}

/// What a worker serves: the objects of its file, by id.
pub(crate) struct Served {
    modes: HashMap<String, Arc<dyn HostMode>>,
    evaluators: HashMap<String, Arc<dyn HostEvaluator>>,
    executors: HashMap<String, Arc<dyn HostExecutor>>,
}

/// The object `id` of a kind, or the error that lists what the file has of that kind.
fn find<'m, T: ?Sized>(
    objects: &'m HashMap<String, Arc<T>>,
    kind: &str,
    id: &str,
) -> Result<&'m T, Outcome> {
    objects.get(id).map(|found| found.as_ref()).ok_or_else(|| {
        let mut ids: Vec<&str> = objects.keys().map(String::as_str).collect();
        ids.sort_unstable();
        Outcome::Error(format!(
            "no {kind} `{id}` in this plugin file (it exports: {})",
            ids.join(", ")
        ))
    })
}

/// The outcome of a call that returns nothing but may fail.
fn checked(answer: Result<(), flowscale_sdk::ModeError>) -> Outcome {
    match answer {
        Ok(()) => Outcome::Valid,
        Err(err) => Outcome::Error(err.message().to_string()),
    }
}

impl From<Exports> for Served {
    fn from(exports: Exports) -> Served {
        Served {
            modes: exports.modes.into_iter().map(|m| (m.id, m.mode)).collect(),
            evaluators: exports
                .evaluators
                .into_iter()
                .map(|e| (e.id, e.evaluator))
                .collect(),
            executors: exports
                .executors
                .into_iter()
                .map(|x| (x.id, x.executor))
                .collect(),
        }
    }
}

impl Served {
    /// Answers a JSON request: a mode's call, or an evaluator's or executor's (protocol 5),
    /// which exist in JSON only.
    fn answer_json(&self, request: Request) -> Outcome {
        let id = request.mode.as_str();
        let found =
            match request.call {
                Call::Evaluate(ctx) => find(&self.evaluators, "evaluator", id).map(|evaluator| {
                    match evaluator.evaluate(&ctx.into_context()) {
                        Ok(metrics) => Outcome::Evaluated(wire_metrics(&metrics)),
                        Err(err) => Outcome::Error(err.message().to_string()),
                    }
                }),
                Call::Apply(ctx) => find(&self.executors, "executor", id).map(|executor| {
                    match executor.apply(&ctx.into_context()) {
                        Ok(verdict) => Outcome::Verdict(WireVerdict::from(&verdict)),
                        Err(err) => Outcome::Error(err.message().to_string()),
                    }
                }),
                Call::ValidateEvaluator(params) => find(&self.evaluators, "evaluator", id)
                    .map(|evaluator| checked(evaluator.validate(&params.into()))),
                Call::ValidateExecutor(params) => find(&self.executors, "executor", id)
                    .map(|executor| checked(executor.validate(&params.into()))),
                Call::IsApplicable(ctx) => Ok(self.mode_call(
                    id,
                    Asked::Context(ContextCall::IsApplicable, ctx.into_context()),
                )),
                Call::Align(ctx) => {
                    Ok(self.mode_call(id, Asked::Context(ContextCall::Align, ctx.into_context())))
                }
                Call::AlignIfApplicable(ctx) => Ok(self.mode_call(
                    id,
                    Asked::Context(ContextCall::AlignIfApplicable, ctx.into_context()),
                )),
                Call::Validate(params) => Ok(self.mode_call(id, Asked::Validate(params.into()))),
            };
        found.unwrap_or_else(|missing| missing)
    }

    /// Runs the context call `call` on the mode `id`; the context is left to the caller, who
    /// gives its metric list back for the next one.
    fn context_call(&self, id: &str, call: ContextCall, ctx: &AlignmentContext) -> Outcome {
        match find(&self.modes, "mode", id) {
            Ok(mode) => answer_context(mode, call, ctx),
            Err(missing) => missing,
        }
    }

    /// Runs `asked` on the mode `id`.
    fn mode_call(&self, id: &str, asked: Asked) -> Outcome {
        match find(&self.modes, "mode", id) {
            Ok(mode) => answer(mode, asked),
            Err(missing) => missing,
        }
    }
}

/// One call as the worker runs it, whichever encoding it came in.
///
/// Nearly every call is a context call, and one is asked at a time: boxing the context to
/// shrink the rare `Validate` would allocate for every call instead.
#[allow(clippy::large_enum_variant)]
enum Asked {
    Context(ContextCall, AlignmentContext),
    Validate(ModeParams),
}

/// Answers requests until the host closes stdin, each in the encoding it came in.
fn answer_requests(served: &Served) -> Result<(), WorkerError> {
    let mut stdin = io::stdin().lock();
    let mut body = Vec::new();
    let mut held = HeldJobs::default();
    loop {
        match read_body(&mut stdin, &mut body) {
            Ok(()) => {}
            Err(FrameError::Closed) => return Ok(()),
            Err(err) => return Err(err.into()),
        }
        if is_json(&body) {
            let request: Request = serde_json::from_slice(&body).map_err(FrameError::from)?;
            let id = request.id;
            let outcome = served.answer_json(request);
            send(&WorkerMessage::Reply { id, outcome })?;
        } else if body.first() == Some(&TAG_BATCH_CALL) {
            // A batch is answered whole, in one frame: one round trip for all its entries. One
            // that cannot be read ends the worker, as a single request below does.
            let batch = held.decode_batch(&body).map_err(FrameError::from)?;
            let mut outcomes = Vec::with_capacity(batch.ctxs.len());
            for ctx in batch.ctxs {
                outcomes.push(served.context_call(&batch.mode, batch.call, &ctx));
                held.give_back(ctx);
            }
            send_frame(&encode_replies(batch.id, &outcomes)?)?;
        } else {
            // A request that cannot be read leaves the slots in doubt: the worker ends, and
            // the host starts a new one with nothing held.
            let request = held.decode(&body).map_err(FrameError::from)?;
            let outcome = served.context_call(&request.mode, request.call, &request.ctx);
            held.give_back(request.ctx);
            send_frame(&encode_reply(request.id, &outcome)?)?;
        }
    }
}

/// Runs one call on the loaded mode (which already contains the plugin's panics).
fn answer(mode: &dyn HostMode, asked: Asked) -> Outcome {
    match asked {
        Asked::Context(call, ctx) => answer_context(mode, call, &ctx),
        Asked::Validate(params) => checked(mode.validate(&params)),
    }
}

/// Runs one context call on the loaded mode.
fn answer_context(mode: &dyn HostMode, call: ContextCall, ctx: &AlignmentContext) -> Outcome {
    match call {
        ContextCall::IsApplicable => match mode.is_applicable(ctx) {
            Ok(applicable) => Outcome::Applicable(applicable),
            Err(err) => Outcome::Error(err.message().to_string()),
        },
        ContextCall::Align => match mode.align(ctx) {
            Ok(p) => Outcome::Aligned(p),
            Err(err) => Outcome::Error(err.message().to_string()),
        },
        ContextCall::AlignIfApplicable => {
            let answered = gate_then_align::<Infallible>(
                ctx,
                || Ok(mode.is_applicable(ctx)),
                || Ok(mode.align(ctx)),
            );
            match answered {
                Ok(Ok(GatedAnswer::NotApplicable)) => Outcome::Applicable(false),
                Ok(Ok(GatedAnswer::NothingToAlign)) => Outcome::Applicable(true),
                Ok(Ok(GatedAnswer::Aligned(p))) => Outcome::Aligned(p),
                Ok(Err(err)) => Outcome::Error(err.message().to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use flowscale_sdk::{
        EvaluatedMetric, EvaluatorContext, ExecutorContext, ExecutorVerdict, MetricEvaluator,
        ModeError, ModeParams, ScalingExecutor, ScalingSummary, VertexMetrics,
    };

    use super::super::protocol::{
        WireEvaluatorContext, WireExecutorContext, WireParams, metrics_from_wire,
    };
    use super::*;
    use crate::scaling::{CustomEvaluator, CustomExecutor};

    /// Answers `LAG` + the number of vertices before, and refuses a parameter `bad`.
    struct Plus;
    impl MetricEvaluator for Plus {
        fn evaluate(&self, ctx: &EvaluatorContext) -> Result<VertexMetrics, ModeError> {
            let lag = ctx.metric("LAG").ok_or_else(|| ModeError::new("no LAG"))?;
            let before = ctx.evaluated().len() as f64;
            Ok(vec![(
                "TARGET_DATA_RATE".into(),
                EvaluatedMetric {
                    current: lag.current + before,
                    average: f64::NAN,
                },
            )])
        }
        fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
            match params.get("bad") {
                Some(_) => Err(ModeError::new("bad is bad")),
                None => Ok(()),
            }
        }
    }

    /// Halves every step, vetoes a job named `frozen`.
    struct Halve;
    impl ScalingExecutor for Halve {
        fn apply(&self, ctx: &ExecutorContext) -> Result<ExecutorVerdict, ModeError> {
            if ctx.job_name() == "frozen" {
                return Ok(ExecutorVerdict::Veto(format!("frozen at {}", ctx.now_ms())));
            }
            Ok(ExecutorVerdict::Apply(
                ctx.summaries()
                    .iter()
                    .cloned()
                    .map(|mut s| {
                        s.new_parallelism = s.current_parallelism.max(s.new_parallelism / 2);
                        s
                    })
                    .collect(),
            ))
        }
    }

    fn served() -> Served {
        Served::from(Exports {
            modes: Vec::new(),
            evaluators: vec![CustomEvaluator::linked("plus", "", Arc::new(Plus))],
            executors: vec![CustomExecutor::linked("halve", "", Arc::new(Halve))],
        })
    }

    /// The worker's answer to `call` on `id`, after a trip through the wire both ways.
    fn asked(served: &Served, id: &str, call: Call) -> Outcome {
        let frame = encode(&Request {
            id: 1,
            mode: id.to_string(),
            call,
        })
        .unwrap();
        let request: Request = serde_json::from_slice(&frame[4..]).unwrap();
        let reply = encode(&WorkerMessage::Reply {
            id: 1,
            outcome: served.answer_json(request),
        })
        .unwrap();
        match serde_json::from_slice(&reply[4..]).unwrap() {
            WorkerMessage::Reply { outcome, .. } => outcome,
            other => panic!("a reply: {other:?}"),
        }
    }

    fn lag(value: f64) -> VertexMetrics {
        vec![(
            "LAG".into(),
            EvaluatedMetric {
                current: value,
                average: value,
            },
        )]
    }

    #[test]
    fn a_worker_answers_evaluate_apply_and_validate() {
        let served = served();
        let ctx = EvaluatorContext::new("job", "v2", lag(5.0)).with_evaluated(vec![
            flowscale_sdk::EvaluatedVertex {
                vertex_id: "v1".into(),
                metrics: lag(1.0),
            },
        ]);
        let Outcome::Evaluated(metrics) = asked(
            &served,
            "plus",
            Call::Evaluate(WireEvaluatorContext::from(&ctx)),
        ) else {
            panic!("evaluated")
        };
        let metrics = metrics_from_wire(metrics);
        assert_eq!(metrics.len(), 1);
        assert_eq!(metrics[0].0, "TARGET_DATA_RATE");
        assert_eq!(metrics[0].1.current, 6.0, "5 + one vertex before");
        assert!(metrics[0].1.average.is_nan(), "NaN survives the wire");

        let summary = |new| ScalingSummary {
            vertex_id: "v1".into(),
            current_parallelism: 2,
            new_parallelism: new,
            metrics: lag(3.0),
        };
        let job = ExecutorContext::new("job", vec![summary(8)], 9);
        assert_eq!(
            asked(
                &served,
                "halve",
                Call::Apply(WireExecutorContext::from(&job))
            ),
            Outcome::Verdict(WireVerdict::from(&ExecutorVerdict::Apply(vec![summary(4)])))
        );
        let frozen = ExecutorContext::new("frozen", vec![summary(8)], 9);
        assert_eq!(
            asked(
                &served,
                "halve",
                Call::Apply(WireExecutorContext::from(&frozen))
            ),
            Outcome::Verdict(WireVerdict::Veto("frozen at 9".into()))
        );

        let params = |pairs: &[(&str, &str)]| {
            WireParams::from(&ModeParams::new(
                "inst",
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ))
        };
        assert_eq!(
            asked(&served, "plus", Call::ValidateEvaluator(params(&[]))),
            Outcome::Valid
        );
        assert_eq!(
            asked(
                &served,
                "plus",
                Call::ValidateEvaluator(params(&[("bad", "1")]))
            ),
            Outcome::Error("bad is bad".into())
        );
        assert_eq!(
            asked(&served, "halve", Call::ValidateExecutor(params(&[]))),
            Outcome::Valid
        );
    }

    #[test]
    fn an_unknown_object_is_an_error_naming_the_kind_and_what_there_is() {
        let served = served();
        let ctx = EvaluatorContext::new("job", "v1", lag(1.0));
        // An executor's id is not an evaluator's: kinds are looked up apart.
        let Outcome::Error(message) = asked(
            &served,
            "halve",
            Call::Evaluate(WireEvaluatorContext::from(&ctx)),
        ) else {
            panic!("an error")
        };
        assert_eq!(
            message,
            "no evaluator `halve` in this plugin file (it exports: plus)"
        );
        let Outcome::Error(message) = asked(
            &served,
            "plus",
            Call::ValidateExecutor(WireParams::from(&ModeParams::default())),
        ) else {
            panic!("an error")
        };
        assert!(message.starts_with("no executor `plus`"), "{message}");
    }
}
