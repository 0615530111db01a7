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
    Call, FrameError, OLDEST_PROTOCOL, Outcome, PROTOCOL_VERSION, Request, WireMode, WorkerMessage,
    encode, is_json, read_body,
};
use super::slots::HeldJobs;
use crate::alignment::{CustomMode, GatedAnswer, HostMode, gate_then_align};
use crate::plugins::Refusal;

/// How the worker loads its file: discovery's own probe-and-load of one file (passed in by the
/// command line, so that this module does not depend on discovery, which depends on it).
pub(crate) type Loader =
    fn(&Path, HostLogger, LogLevel) -> Result<(ManifestInfo, Vec<CustomMode>), Refusal>;

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
    let modes: HashMap<String, Arc<dyn HostMode>> = match load_file(file, logger, log_level) {
        Ok((info, modes)) => {
            send(&WorkerMessage::Hello {
                protocol: OLDEST_PROTOCOL,
                protocols: (OLDEST_PROTOCOL..=PROTOCOL_VERSION).collect(),
                plugin: info.plugin_name.clone(),
                version: info.plugin_version.clone(),
                modes: modes
                    .iter()
                    .map(|m| WireMode {
                        id: m.id.clone(),
                        description: m.description.clone(),
                    })
                    .collect(),
            })?;
            modes.into_iter().map(|m| (m.id, m.mode)).collect()
        }
        Err(refusal) => {
            send(&WorkerMessage::Refused {
                reason: refusal.to_string(),
                details: refusal.details().map(str::to_string),
            })?;
            return Ok(());
        }
    };
    answer_requests(&modes)
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

impl From<Call> for Asked {
    fn from(call: Call) -> Asked {
        match call {
            Call::IsApplicable(ctx) => {
                Asked::Context(ContextCall::IsApplicable, ctx.into_context())
            }
            Call::Align(ctx) => Asked::Context(ContextCall::Align, ctx.into_context()),
            Call::AlignIfApplicable(ctx) => {
                Asked::Context(ContextCall::AlignIfApplicable, ctx.into_context())
            }
            Call::Validate(params) => Asked::Validate(params.into()),
        }
    }
}

/// Answers requests until the host closes stdin, each in the encoding it came in.
fn answer_requests(modes: &HashMap<String, Arc<dyn HostMode>>) -> Result<(), WorkerError> {
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
            let outcome = dispatch(modes, &request.mode, request.call.into());
            send(&WorkerMessage::Reply {
                id: request.id,
                outcome,
            })?;
        } else if body.first() == Some(&TAG_BATCH_CALL) {
            // A batch is answered whole, in one frame: one round trip for all its entries. One
            // that cannot be read ends the worker, as a single request below does.
            let batch = held.decode_batch(&body).map_err(FrameError::from)?;
            let outcomes: Vec<Outcome> = batch
                .ctxs
                .into_iter()
                .map(|ctx| dispatch(modes, &batch.mode, Asked::Context(batch.call, ctx)))
                .collect();
            send_frame(&encode_replies(batch.id, &outcomes)?)?;
        } else {
            // A request that cannot be read leaves the slots in doubt: the worker ends, and
            // the host starts a new one with nothing held.
            let request = held.decode(&body).map_err(FrameError::from)?;
            let outcome = dispatch(
                modes,
                &request.mode,
                Asked::Context(request.call, request.ctx),
            );
            send_frame(&encode_reply(request.id, &outcome)?)?;
        }
    }
}

/// Runs `asked` on the mode of that id.
fn dispatch(modes: &HashMap<String, Arc<dyn HostMode>>, mode: &str, asked: Asked) -> Outcome {
    match modes.get(mode) {
        Some(found) => answer(found.as_ref(), asked),
        None => Outcome::Error(format!(
            "no mode `{mode}` in this plugin file (it exports: {})",
            modes.keys().cloned().collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Runs one call on the loaded mode (which already contains the plugin's panics).
fn answer(mode: &dyn HostMode, asked: Asked) -> Outcome {
    match asked {
        Asked::Context(ContextCall::IsApplicable, ctx) => match mode.is_applicable(&ctx) {
            Ok(applicable) => Outcome::Applicable(applicable),
            Err(err) => Outcome::Error(err.message().to_string()),
        },
        Asked::Context(ContextCall::Align, ctx) => match mode.align(&ctx) {
            Ok(p) => Outcome::Aligned(p),
            Err(err) => Outcome::Error(err.message().to_string()),
        },
        Asked::Context(ContextCall::AlignIfApplicable, ctx) => {
            let answered = gate_then_align::<Infallible>(
                &ctx,
                || Ok(mode.is_applicable(&ctx)),
                || Ok(mode.align(&ctx)),
            );
            match answered {
                Ok(Ok(GatedAnswer::NotApplicable)) => Outcome::Applicable(false),
                Ok(Ok(GatedAnswer::NothingToAlign)) => Outcome::Applicable(true),
                Ok(Ok(GatedAnswer::Aligned(p))) => Outcome::Aligned(p),
                Ok(Err(err)) => Outcome::Error(err.message().to_string()),
            }
        }
        Asked::Validate(params) => match mode.validate(&params) {
            Ok(()) => Outcome::Valid,
            Err(err) => Outcome::Error(err.message().to_string()),
        },
    }
}
