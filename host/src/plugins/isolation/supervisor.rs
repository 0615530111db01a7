//! The host side of one plugin file in `process` isolation: starts its worker, makes each call
//! under a deadline, and deals with what goes wrong.
//!
//! * One worker per file serves every mode of the file, one call at a time (the lock is held
//!   for the call; a job waiting for it does not spend its own deadline meanwhile). From
//!   protocol 4 on, the vertices of a job are one call ([`Supervisor::call_many`]): the
//!   deadline applies to the batch's round trip, and a fault of it is one fault of the mode.
//! * A worker that dies during a call, misses the deadline or breaks the protocol is killed
//!   and reaped; the call fails with a [`Fault`] that says what happened (the signal's name,
//!   "timed out after 1s"...). The next call starts a new worker, no sooner than the restart
//!   backoff (doubling from [`IsolationOptions::backoff_min`] up to `backoff_max`, reset by a
//!   successful call), so a worker that crashes at start-up cannot make the host spin.
//! * A mode with [`IsolationOptions::quarantine_after`] faults within `quarantine_window` is
//!   quarantined for `quarantine_for`: it is not called at all meanwhile
//!   ([`Supervisor::quarantined`]), and the jobs that use it align with BALANCED.
//! * `RLIMIT_CPU` counts CPU time over a worker's whole life, so a healthy worker would hit it
//!   eventually: once the calls it served add up to half the limit, the worker is retired
//!   (stdin closed) and the next call starts a fresh one. That is not a fault.
//! * A worker leads a process group of its own, and whatever its plugin starts (a helper
//!   program, a forked copy of itself) is in it: a worker is always ended with its whole group,
//!   whether it is killed after a fault, retired or ended with its supervisor, and the groups
//!   still running when the host exits are ended then ([`end_worker_groups`]).
//! * The what-if calls of the HTTP API are served by supervisors of their own
//!   ([`Serves::WhatIf`], see `what_if`): never the fleet's workers, never counted towards the
//!   fleet's quarantine.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, kill_process_group, waitid};

use flowscale_sdk::{AlignmentContext, EvaluatorContext, ExecutorContext, ModeParams};

use super::compact::{ContextCall, decode_worker_message};
use super::protocol::{
    BATCH_PROTOCOL, Call, FrameBuffer, FrameError, KINDS_PROTOCOL, OLDEST_PROTOCOL, Outcome,
    PROTOCOL_VERSION, Request, WireContext, WireEvaluatorContext, WireExecutor,
    WireExecutorContext, WireMode, WireParams, WorkerMessage, encode,
};
use super::slots::SentJobs;
use super::stderr::StderrWatch;
use super::worker::WorkerLimits;
use crate::config::format_duration;
use crate::plugins::logger;

/// How plugin workers are started, limited, restarted and quarantined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsolationOptions {
    /// The deadline of one call.
    pub(crate) call_timeout: Duration,
    /// The deadline of a worker's start: loading the plugin and saying hello.
    pub(crate) start_timeout: Duration,
    /// The executable that serves `plugin-worker FILE` (this binary, unless a test or bench
    /// runs from another one).
    pub worker_exe: PathBuf,
    /// The limits each worker applies to itself.
    pub(crate) limits: WorkerLimits,
    /// The newest protocol version the host offers (a bench compares it with older ones).
    pub protocol: u32,
    /// The first restart delay after a fault.
    pub(crate) backoff_min: Duration,
    /// The longest restart delay.
    pub(crate) backoff_max: Duration,
    /// Faults of one mode within `quarantine_window` that quarantine it.
    pub(crate) quarantine_after: usize,
    /// See `quarantine_after`.
    pub(crate) quarantine_window: Duration,
    /// How long a quarantined mode is not called.
    pub(crate) quarantine_for: Duration,
    /// Whose calls the workers serve.
    pub(crate) serves: Serves,
}

/// Whose calls a supervisor serves: the fleet's, or the what-if calls of the HTTP API
/// (`POST /api/v1/align`). The two never share a worker or a quarantine, and say which they are
/// in their messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Serves {
    /// The jobs of the fleet (and the command line's own calls).
    #[default]
    Fleet,
    /// What-if calls of the HTTP API.
    WhatIf,
}

/// Default `RLIMIT_AS` of a worker: generous for a mode (the worker itself needs a few
/// megabytes), small enough to stop a runaway allocation long before the machine swaps.
pub(crate) const DEFAULT_ADDRESS_SPACE: u64 = 2 << 30;
/// Default `RLIMIT_CPU` of a worker, in seconds.
pub(crate) const DEFAULT_CPU_SECONDS: u64 = 600;

impl IsolationOptions {
    /// The defaults with `call_timeout`, served by this very executable.
    pub fn new(call_timeout: Duration) -> IsolationOptions {
        IsolationOptions {
            call_timeout,
            start_timeout: call_timeout.max(Duration::from_secs(10)),
            worker_exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("flowscale")),
            limits: WorkerLimits {
                address_space: Some(DEFAULT_ADDRESS_SPACE),
                cpu_seconds: Some(DEFAULT_CPU_SECONDS),
            },
            protocol: PROTOCOL_VERSION,
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            quarantine_after: 3,
            quarantine_window: Duration::from_secs(60),
            quarantine_for: Duration::from_secs(300),
            serves: Serves::Fleet,
        }
    }
}

/// What went wrong with a call into a worker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Fault {
    /// The worker died.
    #[error("the plugin worker died during {call}: {how}")]
    Died {
        /// The call.
        call: &'static str,
        /// "killed by SIGSEGV (segmentation fault)", "exited with status 3", "stack overflow:
        /// ..."...
        how: String,
    },
    /// The call missed its deadline.
    #[error("{call} timed out after {}: the plugin worker was killed", format_duration(*.after))]
    TimedOut {
        /// The call.
        call: &'static str,
        /// The deadline.
        after: Duration,
    },
    /// The worker sent something else than the protocol says.
    #[error("the plugin worker broke the protocol during {call} ({detail}) and was killed")]
    Protocol {
        /// The call.
        call: &'static str,
        /// What it sent.
        detail: String,
    },
    /// No worker could be started.
    #[error("the plugin worker could not be started: {0}")]
    Start(String),
    /// The worker refused the file (it changed since discovery, or cannot be loaded any more).
    #[error("the plugin worker refused the file: {0}")]
    Refused(String),
    /// The mode is quarantined.
    #[error("{0}")]
    Quarantined(String),
}

/// A fault, with what it did to the mode's standing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{fault}{}", .quarantine.as_deref().map(|q| format!("; {q}")).unwrap_or_default())]
pub(crate) struct CallError {
    /// What happened.
    pub(crate) fault: Fault,
    /// Set when this fault put the mode in quarantine.
    pub(crate) quarantine: Option<String>,
}

/// What a worker said when it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hello {
    /// The plugin's name.
    pub(crate) plugin: String,
    /// The plugin's version.
    pub(crate) version: String,
    /// Its modes.
    pub(crate) modes: Vec<WireMode>,
    /// Its metric evaluators (protocol 5).
    pub(crate) evaluators: Vec<WireMode>,
    /// Its scaling executors, with their priorities (protocol 5).
    pub(crate) executors: Vec<WireExecutor>,
}

/// Why reading a message failed.
enum ReadError {
    TimedOut,
    Closed,
    Frame(FrameError),
}

/// Why a round trip failed once its request was sent.
enum Failure {
    /// The reply could not be read.
    Read(ReadError),
    /// Something else than the reply came.
    Unexpected(String),
}

/// One call of the host-side mode interface, as the supervisor sends it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ask<'a> {
    /// `is_applicable`, `align` or both, on a context.
    Context(ContextCall, &'a AlignmentContext),
    /// `validate(params)`.
    Validate(&'a ModeParams),
    /// An evaluator's `evaluate(ctx)` (protocol 5).
    Evaluate(&'a EvaluatorContext),
    /// An executor's `apply(ctx)` (protocol 5).
    Apply(&'a ExecutorContext),
    /// An evaluator's `validate(params)` (protocol 5).
    ValidateEvaluator(&'a ModeParams),
    /// An executor's `validate(params)` (protocol 5).
    ValidateExecutor(&'a ModeParams),
}

impl Ask<'_> {
    /// The method's name, for messages.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Ask::Context(call, _) => call.name(),
            Ask::Validate(_) | Ask::ValidateEvaluator(_) | Ask::ValidateExecutor(_) => "validate",
            Ask::Evaluate(_) => "evaluate",
            Ask::Apply(_) => "apply",
        }
    }

    /// Whether the call is one of an evaluator or an executor (protocol 5).
    fn is_kind(&self) -> bool {
        !matches!(self, Ask::Context(..) | Ask::Validate(_))
    }

    /// The request in protocol 2: JSON, the whole context.
    fn to_json(self, id: u64, mode: &str) -> Result<Vec<u8>, FrameError> {
        let call = match self {
            Ask::Context(ContextCall::IsApplicable, ctx) => {
                Call::IsApplicable(WireContext::from(ctx))
            }
            Ask::Context(ContextCall::Align, ctx) => Call::Align(WireContext::from(ctx)),
            Ask::Context(ContextCall::AlignIfApplicable, ctx) => {
                Call::AlignIfApplicable(WireContext::from(ctx))
            }
            Ask::Validate(params) => Call::Validate(WireParams::from(params)),
            Ask::Evaluate(ctx) => Call::Evaluate(WireEvaluatorContext::from(ctx)),
            Ask::Apply(ctx) => Call::Apply(WireExecutorContext::from(ctx)),
            Ask::ValidateEvaluator(params) => Call::ValidateEvaluator(WireParams::from(params)),
            Ask::ValidateExecutor(params) => Call::ValidateExecutor(WireParams::from(params)),
        };
        encode(&Request {
            id,
            mode: mode.to_string(),
            call,
        })
    }
}

/// The key under which the faults and quarantine of a file's evaluator or executor are kept:
/// "evaluator `id`" or "executor `id`" (a mode's is its bare id, which has no backquote).
pub(crate) fn standing_key(kind: &'static str, id: &str) -> String {
    format!("{kind} `{id}`")
}

/// The kind of object a standing key is of: `None` for a mode.
fn standing_kind(key: &str) -> Option<&'static str> {
    ["evaluator", "executor"].into_iter().find(|kind| {
        key.strip_prefix(kind)
            .is_some_and(|rest| rest.starts_with(" `"))
    })
}

/// The process groups of the workers started and not yet reaped: [`end_worker_groups`] ends
/// them when the host exits (a call still running then, on a thread the exit does not wait
/// for, would otherwise leave its worker and the worker's children behind).
static LIVE_GROUPS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

fn live_groups() -> MutexGuard<'static, BTreeSet<i32>> {
    LIVE_GROUPS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Kills (`SIGKILL`) the process group of every worker still running: what the host does last,
/// as it exits, so that no worker and nothing a plugin started outlives it.
pub(crate) fn end_worker_groups() {
    for group in std::mem::take(&mut *live_groups()) {
        if let Some(pgid) = Pid::from_raw(group) {
            let _ = kill_process_group(pgid, Signal::KILL);
        }
    }
}

/// A running worker and its pipes. It leads its own process group (whose id is its process
/// id): ending it ends the group, so that nothing its plugin started outlives it.
struct Worker {
    child: Child,
    /// Set once the worker was reaped: its process id (and its group's) may be reused.
    reaped: bool,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    buffer: FrameBuffer,
    stderr: StderrWatch,
    /// The protocol version agreed on in the handshake.
    protocol: u32,
    /// What this worker holds of each job (protocol 3).
    sent: SentJobs,
}

impl Worker {
    /// The request for `ask` in the agreed protocol.
    fn encode(&mut self, id: u64, mode: &str, ask: Ask<'_>) -> Result<Vec<u8>, FrameError> {
        match ask {
            Ask::Context(call, ctx) if self.protocol >= 3 => self.sent.encode(id, mode, call, ctx),
            // A worker started later from a replaced, older binary: nothing is sent, and the
            // call fails without counting as a fault of the object.
            _ if ask.is_kind() && self.protocol < KINDS_PROTOCOL => {
                Err(FrameError::Compact(format!(
                    "the worker speaks protocol {}, evaluators and executors need \
                     {KINDS_PROTOCOL}",
                    self.protocol
                )))
            }
            _ => ask.to_json(id, mode),
        }
    }

    /// The next message other than a log record (those are re-emitted in the host's log).
    fn read(&mut self, deadline: Instant) -> Result<WorkerMessage, ReadError> {
        let mut chunk = [0u8; 8192];
        loop {
            match self.buffer.take_body(decode_worker_message) {
                Ok(Some(WorkerMessage::Log {
                    level,
                    target,
                    message,
                })) => {
                    logger::emit(level, &target, &message);
                    continue;
                }
                Ok(Some(message)) => return Ok(message),
                Ok(None) => {}
                Err(err) => return Err(ReadError::Frame(err)),
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ReadError::TimedOut);
            }
            let timeout = Timespec::try_from(left).unwrap_or(Timespec {
                tv_sec: i64::MAX,
                tv_nsec: 0,
            });
            let mut fds = [PollFd::new(&self.stdout, PollFlags::IN)];
            match poll(&mut fds, Some(&timeout)) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(err) => return Err(ReadError::Frame(FrameError::Io(err.into()))),
            }
            match self.stdout.read(&mut chunk) {
                Ok(0) if self.buffer.is_empty() => return Err(ReadError::Closed),
                Ok(0) => return Err(ReadError::Frame(FrameError::Truncated)),
                Ok(n) => self.buffer.extend(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::Frame(FrameError::Io(e))),
            }
        }
    }

    fn write(&mut self, frame: &[u8]) -> io::Result<()> {
        match self.stdin.as_mut() {
            Some(stdin) => stdin.write_all(frame),
            None => Err(io::ErrorKind::BrokenPipe.into()),
        }
    }

    /// Closes the worker's stdin, waits up to `grace` for it to exit by itself, then ends its
    /// group; its exit status.
    fn end(mut self, grace: Duration) -> Option<ExitStatus> {
        self.stdin = None;
        self.reap(grace)
    }

    /// Like [`Worker::end`], and says how the worker ended: its exit status, or a stack
    /// overflow when the Rust runtime reported one on its stderr before the SIGABRT.
    fn end_and_describe(mut self, grace: Duration) -> String {
        self.stdin = None;
        let status = self.reap(grace);
        let aborted = status.and_then(|s| s.signal()) == Some(SIGABRT);
        if aborted && self.stderr.stack_overflowed(Duration::from_millis(200)) {
            STACK_OVERFLOW.to_string()
        } else {
            describe_exit(status)
        }
    }

    /// Kills the worker and its group at once.
    fn kill(mut self) {
        self.reap(Duration::ZERO);
    }

    /// Waits up to `grace` for the worker to exit by itself, then kills its process group
    /// (the worker, if still running, and whatever its plugin started) and reaps the worker;
    /// its exit status. The group is killed before the worker is reaped: until then, no other
    /// process can be given its id.
    fn reap(&mut self, grace: Duration) -> Option<ExitStatus> {
        if self.reaped {
            return None;
        }
        let until = Instant::now() + grace;
        if let Some(pid) = Pid::from_raw(self.group()) {
            // Exited, but left as it is (NOWAIT): still a zombie holding its id.
            let exited = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
            while !grace.is_zero() {
                match waitid(WaitId::Pid(pid), exited) {
                    Ok(None) if Instant::now() < until => {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    _ => break,
                }
            }
            let _ = kill_process_group(pid, Signal::KILL);
        } else {
            let _ = self.child.kill();
        }
        let status = self.child.wait().ok();
        self.reaped = true;
        live_groups().remove(&self.group());
        status
    }

    /// The worker's process group id: its own process id.
    fn group(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap_or(0)
    }
}

/// A worker dropped without being ended (a supervisor's state dropped whole, a panic) is ended
/// all the same.
impl Drop for Worker {
    fn drop(&mut self) {
        self.stdin = None;
        self.reap(Duration::ZERO);
    }
}

/// The signal the Rust runtime raises after reporting a stack overflow.
const SIGABRT: i32 = 6;

/// How a worker that overflowed its stack ended.
const STACK_OVERFLOW: &str =
    "stack overflow: the plugin overflowed its stack and the worker was killed by SIGABRT";

/// The name and meaning of the signals a plugin worker typically dies of.
pub(crate) fn signal_name(signal: i32) -> String {
    let known = match signal {
        1 => "SIGHUP (hangup)",
        2 => "SIGINT (interrupt)",
        3 => "SIGQUIT (quit)",
        4 => "SIGILL (illegal instruction)",
        5 => "SIGTRAP (trace trap)",
        SIGABRT => "SIGABRT (abort: abort() or a failed assertion in C)",
        7 => "SIGBUS (bus error)",
        8 => "SIGFPE (arithmetic error)",
        9 => "SIGKILL (killed)",
        11 => "SIGSEGV (segmentation fault)",
        13 => "SIGPIPE (broken pipe)",
        15 => "SIGTERM (terminated)",
        24 => "SIGXCPU (CPU-time limit exceeded)",
        25 => "SIGXFSZ (file-size limit exceeded)",
        31 => "SIGSYS (bad system call)",
        _ => return format!("signal {signal}"),
    };
    known.to_string()
}

fn describe_exit(status: Option<ExitStatus>) -> String {
    match status {
        Some(status) => match (status.signal(), status.code()) {
            (Some(signal), _) => format!("killed by {}", signal_name(signal)),
            (None, Some(code)) => format!("exited with status {code}"),
            (None, None) => "ended".to_string(),
        },
        None => "ended, its status is unknown".to_string(),
    }
}

#[derive(Default)]
struct State {
    worker: Option<Worker>,
    next_id: u64,
    /// Faults since the last successful call: sets the restart delay.
    consecutive: u32,
    /// No worker is started before this instant.
    not_before: Option<Instant>,
    /// Time spent in calls by the current worker.
    busy: Duration,
    /// The protocol version agreed with the last worker started.
    agreed: u32,
}

/// The standing of the modes of one plugin file: their recent faults and their quarantines. A
/// fleet's supervisor has one of its own; the supervisors of a what-if pool share one, so that
/// a mode's faults count whichever of them served the call.
#[derive(Debug, Default)]
pub(crate) struct Standing {
    /// Recent faults of each mode.
    faults: HashMap<String, VecDeque<Instant>>,
    /// Quarantined modes and until when.
    quarantined: HashMap<String, Instant>,
}

/// The supervisor of one plugin file's worker.
pub(crate) struct Supervisor {
    file: PathBuf,
    options: IsolationOptions,
    /// Locked first when both are.
    state: Mutex<State>,
    standing: Arc<Mutex<Standing>>,
}

impl Supervisor {
    /// Starts the first worker for `file` and returns what it exports.
    pub(crate) fn start(
        file: &Path,
        options: IsolationOptions,
    ) -> Result<(Supervisor, Hello), Fault> {
        let supervisor = Supervisor::idle(file, options, Arc::default());
        let (worker, hello) = supervisor.spawn()?;
        let mut state = supervisor.lock();
        state.agreed = worker.protocol;
        state.worker = Some(worker);
        drop(state);
        Ok((supervisor, hello))
    }

    /// A supervisor of `file` with no worker yet (the first call starts one), whose modes'
    /// faults and quarantines are kept in `standing`.
    pub(crate) fn idle(
        file: &Path,
        options: IsolationOptions,
        standing: Arc<Mutex<Standing>>,
    ) -> Supervisor {
        Supervisor {
            file: file.to_path_buf(),
            options,
            state: Mutex::new(State::default()),
            standing,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state inconsistent in a way that
        // matters more than stopping all calls to the plugin would.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn standing(&self) -> MutexGuard<'_, Standing> {
        self.standing.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn spawn(&self) -> Result<(Worker, Hello), Fault> {
        let mut command = Command::new(&self.options.worker_exe);
        command
            .arg("plugin-worker")
            .arg(&self.file)
            .arg("--log-level")
            .arg(logger::max_level().to_string());
        if let Some(bytes) = self.options.limits.address_space {
            command.arg("--max-address-space").arg(bytes.to_string());
        }
        if let Some(seconds) = self.options.limits.cpu_seconds {
            command.arg("--max-cpu-seconds").arg(seconds.to_string());
        }
        // Its own process group: Ctrl-C in a terminal reaches the host, which then ends its
        // workers, instead of killing them mid-call (which would read as crashes). Its stderr
        // is piped through the host's (see `StderrWatch`).
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = command
            .spawn()
            .map_err(|e| Fault::Start(format!("{}: {e}", self.options.worker_exe.display())))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Fault::Start("its pipes are missing".to_string()));
        };
        live_groups().insert(i32::try_from(child.id()).unwrap_or(0));
        let mut worker = Worker {
            child,
            reaped: false,
            stdin: Some(stdin),
            stdout,
            buffer: FrameBuffer::default(),
            stderr: StderrWatch::start(stderr),
            protocol: OLDEST_PROTOCOL,
            sent: SentJobs::default(),
        };
        let deadline = Instant::now() + self.options.start_timeout;
        let fail = |worker: Worker, what: String| {
            worker.kill();
            Err(Fault::Start(what))
        };
        match worker.read(deadline) {
            Ok(WorkerMessage::Hello {
                protocol,
                protocols,
                plugin,
                version,
                modes,
                evaluators,
                executors,
            }) => {
                let spoken = if protocols.is_empty() {
                    vec![protocol]
                } else {
                    protocols
                };
                let offered = OLDEST_PROTOCOL..=self.options.protocol;
                let Some(agreed) = spoken.iter().copied().filter(|v| offered.contains(v)).max()
                else {
                    return fail(
                        worker,
                        format!(
                            "it speaks protocol {}, this host {} to {} (was the binary replaced \
                             while the host runs?)",
                            spoken
                                .iter()
                                .map(u32::to_string)
                                .collect::<Vec<_>>()
                                .join(", "),
                            offered.start(),
                            offered.end()
                        ),
                    );
                };
                worker.protocol = agreed;
                Ok((
                    worker,
                    Hello {
                        plugin,
                        version,
                        modes,
                        evaluators,
                        executors,
                    },
                ))
            }
            Ok(WorkerMessage::Refused { reason, .. }) => {
                let _ = worker.end(Duration::from_millis(100));
                Err(Fault::Refused(reason))
            }
            Ok(other) => fail(worker, format!("it did not say hello first: {other:?}")),
            Err(ReadError::TimedOut) => fail(
                worker,
                format!(
                    "it did not say hello within {}",
                    format_duration(self.options.start_timeout)
                ),
            ),
            Err(ReadError::Closed) => {
                let how = worker.end_and_describe(Duration::from_millis(200));
                Err(Fault::Start(format!("it ended before saying hello: {how}")))
            }
            Err(ReadError::Frame(err)) => fail(worker, format!("it sent {err}")),
        }
    }

    /// Why `mode` is not called at the moment, if it is quarantined.
    pub(crate) fn quarantined(&self, mode: &str) -> Option<String> {
        let mut standing = self.standing();
        let until = *standing.quarantined.get(mode)?;
        if Instant::now() >= until {
            standing.quarantined.remove(mode);
            standing.faults.remove(mode);
            tracing::info!(file = %self.file.display(), mode, serves = ?self.options.serves, "plugin mode leaves quarantine");
            return None;
        }
        Some(self.quarantine_text(mode))
    }

    /// Stable (it is the text of an event deduplicated by message).
    fn quarantine_text(&self, mode: &str) -> String {
        let (quarantined, called) = match self.options.serves {
            Serves::Fleet => ("quarantined", "called"),
            Serves::WhatIf => ("quarantined for what-if calls", "called by them"),
        };
        let object = match standing_kind(mode) {
            Some(_) => mode.to_string(),
            None => format!("mode `{mode}`"),
        };
        format!(
            "plugin {object} is {quarantined} after {} faults within {}: it is not {called} \
             for {}",
            self.options.quarantine_after,
            format_duration(self.options.quarantine_window),
            format_duration(self.options.quarantine_for)
        )
    }

    /// Calls `mode` in the worker, starting one if needed.
    pub(crate) fn call(&self, mode: &str, ask: Ask<'_>) -> Result<Outcome, CallError> {
        self.call_as(mode, mode, ask)
    }

    /// Calls the object `id` of the file in the worker, its faults and quarantine kept under
    /// `standing` (a mode's id, or [`standing_key`] of an evaluator or executor: the file's
    /// evaluator, executor and mode of one id are three objects).
    pub(crate) fn call_as(
        &self,
        standing: &str,
        id: &str,
        ask: Ask<'_>,
    ) -> Result<Outcome, CallError> {
        self.round_trip(
            standing,
            ask.name(),
            |worker, n| worker.encode(n, id, ask),
            |id, message| match message {
                WorkerMessage::Reply { id: got, outcome } if got == id => Ok(outcome),
                other => Err(Box::new(other)),
            },
        )
    }

    /// Forgets what the worker was sent for `job`, whose loop ended: its slot goes to the
    /// next new job. Waits for a call in progress.
    pub(crate) fn forget_job(&self, job: &str) {
        if let Some(worker) = self.lock().worker.as_mut() {
            worker.sent.forget(job);
        }
    }

    /// Whether the worker serves evaluators and executors (protocol 5), as told by the last
    /// worker started.
    pub(crate) fn serves_kinds(&self) -> bool {
        self.lock().agreed >= KINDS_PROTOCOL
    }

    /// Whether the worker speaks batches (protocol 4): [`Supervisor::call_many`] then makes one
    /// round trip for all its calls. Told by the last worker started (a worker started later
    /// from a replaced, older binary refuses a batch with a fault that does not count).
    pub(crate) fn batches(&self) -> bool {
        self.lock().agreed >= BATCH_PROTOCOL
    }

    /// Makes `call` on each of `ctxs` in one round trip (protocol 4): one outcome per context,
    /// in order. The deadline applies to the round trip as a whole; a fault of the round trip
    /// (a worker that died, missed the deadline or broke the protocol) is the fault of every
    /// call of the batch, and counts once towards the mode's quarantine.
    pub(crate) fn call_many(
        &self,
        mode: &str,
        call: ContextCall,
        ctxs: &[&AlignmentContext],
    ) -> Vec<Result<Outcome, CallError>> {
        if ctxs.is_empty() {
            return Vec::new();
        }
        let answered = self.round_trip(
            mode,
            call.name(),
            |worker, id| {
                if worker.protocol < BATCH_PROTOCOL {
                    return Err(FrameError::Compact(format!(
                        "the worker speaks protocol {}, batches need {BATCH_PROTOCOL}",
                        worker.protocol
                    )));
                }
                worker.sent.encode_batch(id, mode, call, ctxs)
            },
            |id, message| match message {
                WorkerMessage::Replies { id: got, outcomes }
                    if got == id && outcomes.len() == ctxs.len() =>
                {
                    Ok(outcomes)
                }
                other => Err(Box::new(other)),
            },
        );
        match answered {
            Ok(outcomes) => outcomes.into_iter().map(Ok).collect(),
            Err(err) => vec![Err(err); ctxs.len()],
        }
    }

    /// One request and its reply: refuses a quarantined mode, starts a worker if there is none
    /// (no sooner than the restart backoff), sends what `encode` makes of the request's id,
    /// and waits up to the call deadline for a message that `accept` takes as the reply (it
    /// hands back anything else, which breaks the protocol). Log frames on the way go to the
    /// host's log.
    fn round_trip<T>(
        &self,
        mode: &str,
        name: &'static str,
        encode: impl FnOnce(&mut Worker, u64) -> Result<Vec<u8>, FrameError>,
        accept: impl FnOnce(u64, WorkerMessage) -> Result<T, Box<WorkerMessage>>,
    ) -> Result<T, CallError> {
        let mut state = self.lock();
        if self
            .standing()
            .quarantined
            .get(mode)
            .is_some_and(|until| Instant::now() < *until)
        {
            return Err(CallError {
                fault: Fault::Quarantined(self.quarantine_text(mode)),
                quarantine: None,
            });
        }
        state.next_id += 1;
        let id = state.next_id;
        let worker = self.ensure_worker(&mut state, mode)?;
        let frame = match encode(worker, id) {
            Ok(frame) => frame,
            // Nothing was sent: the worker is fine, the request is not.
            Err(err) => {
                return Err(CallError {
                    fault: Fault::Protocol {
                        call: name,
                        detail: format!("the request cannot be encoded: {err}"),
                    },
                    quarantine: None,
                });
            }
        };
        let started = Instant::now();
        let answer = match worker.write(&frame) {
            Ok(()) => worker.read(started + self.options.call_timeout),
            // The worker is gone: its exit status says why.
            Err(_) => Err(ReadError::Closed),
        };
        let failure = match answer.map(|message| accept(id, message)) {
            Ok(Ok(reply)) => {
                state.consecutive = 0;
                state.busy += started.elapsed();
                self.retire_if_worn(&mut state);
                return Ok(reply);
            }
            Ok(Err(other)) => {
                Failure::Unexpected(format!("expected the reply to request {id}, got {other:?}"))
            }
            Err(err) => Failure::Read(err),
        };
        let fault = self.end_failed(&mut state, name, failure);
        Err(self.fault(&mut state, mode, fault))
    }

    /// The running worker, or a new one (no sooner than the restart delay).
    fn ensure_worker<'s>(
        &self,
        state: &'s mut State,
        mode: &str,
    ) -> Result<&'s mut Worker, CallError> {
        if state.worker.is_none() {
            if let Some(at) = state.not_before {
                let wait = at.saturating_duration_since(Instant::now());
                if !wait.is_zero() {
                    std::thread::sleep(wait);
                }
            }
            match self.spawn() {
                Ok((worker, _)) => {
                    state.agreed = worker.protocol;
                    state.worker = Some(worker);
                }
                Err(fault) => return Err(self.fault(state, mode, fault)),
            }
        }
        match state.worker {
            Some(ref mut worker) => Ok(worker),
            None => Err(self.fault(state, mode, Fault::Start("no worker".into()))),
        }
    }

    /// Ends the worker of a failed round trip (killed, or reaped if it died) and says what
    /// happened.
    fn end_failed(&self, state: &mut State, name: &'static str, failure: Failure) -> Fault {
        let worker = state.worker.take();
        match failure {
            Failure::Read(ReadError::Closed) => Fault::Died {
                call: name,
                how: match worker {
                    Some(worker) => worker.end_and_describe(Duration::from_millis(500)),
                    None => describe_exit(None),
                },
            },
            Failure::Read(ReadError::TimedOut) => {
                if let Some(worker) = worker {
                    worker.kill();
                }
                Fault::TimedOut {
                    call: name,
                    after: self.options.call_timeout,
                }
            }
            Failure::Read(ReadError::Frame(err)) => {
                if let Some(worker) = worker {
                    worker.kill();
                }
                Fault::Protocol {
                    call: name,
                    detail: err.to_string(),
                }
            }
            Failure::Unexpected(detail) => {
                if let Some(worker) = worker {
                    worker.kill();
                }
                Fault::Protocol { call: name, detail }
            }
        }
    }

    /// Records a fault of `mode`: sets the restart delay and, past the threshold, quarantines
    /// the mode.
    fn fault(&self, state: &mut State, mode: &str, fault: Fault) -> CallError {
        let now = Instant::now();
        state.consecutive = state.consecutive.saturating_add(1);
        let delay = self
            .options
            .backoff_min
            .saturating_mul(1 << state.consecutive.saturating_sub(1).min(16))
            .min(self.options.backoff_max);
        state.not_before = Some(now + delay);
        let window = self.options.quarantine_window;
        let mut standing = self.standing();
        let recent = standing.faults.entry(mode.to_string()).or_default();
        recent.push_back(now);
        while recent
            .front()
            .is_some_and(|t| now.duration_since(*t) > window)
        {
            recent.pop_front();
        }
        let quarantine = if recent.len() >= self.options.quarantine_after {
            recent.clear();
            standing
                .quarantined
                .insert(mode.to_string(), now + self.options.quarantine_for);
            let meanwhile = match self.options.serves {
                Serves::Fleet => "the jobs that use it align with BALANCED meanwhile",
                Serves::WhatIf => {
                    "what-if requests naming it are answered without it meanwhile; the \
                     fleet's own calls of it are not affected"
                }
            };
            let meanwhile = match standing_kind(mode) {
                Some("evaluator") if self.options.serves == Serves::Fleet => {
                    "the jobs that use it are evaluated without it meanwhile"
                }
                Some(_) if self.options.serves == Serves::Fleet => {
                    "the jobs that use it do not scale meanwhile"
                }
                _ => meanwhile,
            };
            let text = format!("{}; {meanwhile}", self.quarantine_text(mode));
            tracing::warn!(file = %self.file.display(), mode, "{text}");
            Some(text)
        } else {
            None
        };
        let serves = match self.options.serves {
            Serves::Fleet => "plugin fault",
            Serves::WhatIf => "plugin fault in a what-if call",
        };
        tracing::warn!(file = %self.file.display(), mode, "{serves}: {fault}");
        CallError { fault, quarantine }
    }

    fn retire_if_worn(&self, state: &mut State) {
        let Some(seconds) = self.options.limits.cpu_seconds else {
            return;
        };
        if state.busy >= Duration::from_secs(seconds) / 2 {
            if let Some(worker) = state.worker.take() {
                tracing::info!(file = %self.file.display(), "plugin worker retired (CPU-time budget)");
                let _ = worker.end(Duration::from_secs(1));
            }
            state.busy = Duration::ZERO;
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        let worker = self.lock().worker.take();
        if let Some(worker) = worker {
            let _ = worker.end(Duration::from_millis(200));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idle(options: IsolationOptions) -> Supervisor {
        Supervisor::idle(Path::new("/p/libx.so"), options, Arc::default())
    }

    #[test]
    fn repeated_faults_back_off_then_quarantine_the_mode_only() {
        let mut options = IsolationOptions::new(Duration::from_secs(1));
        options.backoff_min = Duration::from_millis(100);
        options.backoff_max = Duration::from_millis(300);
        let supervisor = idle(options);
        let crash = || Fault::Died {
            call: "align",
            how: describe_exit(Some(ExitStatus::from_raw(11))),
        };
        let mut delays = Vec::new();
        for _ in 0..2 {
            let before = Instant::now();
            let mut state = supervisor.lock();
            let err = supervisor.fault(&mut state, "bad", crash());
            assert_eq!(err.quarantine, None);
            delays.push(state.not_before.unwrap().duration_since(before));
        }
        assert!(delays[0] >= Duration::from_millis(100) && delays[0] < Duration::from_millis(200));
        assert!(delays[1] >= Duration::from_millis(200) && delays[1] < Duration::from_millis(300));
        assert_eq!(supervisor.quarantined("bad"), None);

        let err = {
            let mut state = supervisor.lock();
            supervisor.fault(&mut state, "bad", crash())
        };
        assert!(
            supervisor.lock().not_before.unwrap() <= Instant::now() + Duration::from_millis(300),
            "the delay is capped"
        );
        let text = err.to_string();
        assert!(
            text.starts_with("the plugin worker died during align: killed by SIGSEGV"),
            "{text}"
        );
        assert!(
            text.contains("quarantined after 3 faults within 60s: it is not called for 300s; the jobs that use it align with BALANCED"),
            "{text}"
        );
        let why = supervisor.quarantined("bad").expect("quarantined");
        assert!(why.contains("`bad` is quarantined"), "{why}");
        assert_eq!(supervisor.quarantined("good"), None, "per mode");
        // A call to the quarantined mode is refused without starting a worker.
        let refused = supervisor
            .call(
                "bad",
                Ask::Validate(&ModeParams::new("m", Default::default())),
            )
            .unwrap_err();
        assert!(matches!(refused.fault, Fault::Quarantined(_)));
        assert!(supervisor.lock().worker.is_none());
    }

    #[test]
    fn a_quarantine_ends() {
        let mut options = IsolationOptions::new(Duration::from_secs(1));
        options.quarantine_after = 1;
        options.quarantine_for = Duration::from_millis(20);
        let supervisor = idle(options);
        {
            let mut state = supervisor.lock();
            let err = supervisor.fault(
                &mut state,
                "m",
                Fault::TimedOut {
                    call: "align",
                    after: Duration::from_secs(1),
                },
            );
            assert!(
                err.to_string().starts_with("align timed out after 1s"),
                "{err}"
            );
            assert!(err.quarantine.is_some());
        }
        assert!(supervisor.quarantined("m").is_some());
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(supervisor.quarantined("m"), None);
    }

    #[test]
    fn a_missing_worker_executable_is_a_start_fault() {
        let mut options = IsolationOptions::new(Duration::from_secs(1));
        options.worker_exe = PathBuf::from("/nonexistent/flowscale");
        let Err(fault) = Supervisor::start(Path::new("/p/libx.so"), options) else {
            panic!("no worker can start")
        };
        assert!(
            fault
                .to_string()
                .starts_with("the plugin worker could not be started: /nonexistent/flowscale"),
            "{fault}"
        );
    }

    /// Options whose worker is a stand-in shell script: it runs `first`, greets with
    /// `protocol` and `protocols`, then reads stdin until it closes, answering nothing.
    fn stand_in(
        protocol: u32,
        protocols: Vec<u32>,
        first: &str,
    ) -> (IsolationOptions, tempfile::TempDir) {
        use std::os::unix::fs::PermissionsExt;
        let hello = super::super::protocol::encode(&WorkerMessage::Hello {
            protocol,
            protocols,
            plugin: "old".into(),
            version: "1.0.0".into(),
            modes: Vec::new(),
            evaluators: Vec::new(),
            executors: Vec::new(),
        })
        .unwrap();
        let octal: String = hello.iter().map(|b| format!("\\{b:03o}")).collect();
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("stand-in-worker");
        std::fs::write(
            &exe,
            format!("#!/bin/sh\n{first}\nprintf '{octal}'\nexec cat >/dev/null\n"),
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut options = IsolationOptions::new(Duration::from_secs(1));
        options.worker_exe = exe;
        (options, dir)
    }

    /// Starts a stand-in worker that greets with `protocol` and `protocols`, then waits for
    /// stdin, under a host offering at most `offered`.
    fn greeted_by(
        protocol: u32,
        protocols: Vec<u32>,
        offered: u32,
    ) -> (Result<(Supervisor, Hello), Fault>, tempfile::TempDir) {
        let (mut options, dir) = stand_in(protocol, protocols, "");
        options.protocol = offered;
        (Supervisor::start(Path::new("/p/libx.so"), options), dir)
    }

    /// Whether `pid` runs (a zombie, reaped by nobody yet, does not).
    fn runs(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| rest.to_string()))
            .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
    }

    /// Waits up to 2 s for `pid` to stop running.
    fn ends(pid: i32) -> bool {
        let until = Instant::now() + Duration::from_secs(2);
        while runs(pid) {
            if Instant::now() > until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    #[test]
    fn what_a_worker_starts_ends_with_it() {
        // The stand-in starts a child, as a plugin running a helper program would, and never
        // answers a call. The child holds the worker's pipes too.
        let pids = tempfile::tempdir().unwrap();
        let file = pids.path().join("children");
        let (mut options, _dir) = stand_in(
            2,
            vec![2, 3, 4],
            &format!("sleep 600 & echo $! >> '{}'", file.display()),
        );
        options.call_timeout = Duration::from_millis(200);
        options.backoff_min = Duration::ZERO;
        let (supervisor, _) = Supervisor::start(Path::new("/p/libx.so"), options).unwrap();
        let children = || -> Vec<i32> {
            std::fs::read_to_string(&file)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect()
        };
        let first = children()[0];
        assert!(runs(first));
        assert!(live_groups().contains(&supervisor.lock().worker.as_ref().unwrap().group()));
        // A worker killed after a fault takes its child along.
        let err = supervisor
            .call(
                "m",
                Ask::Validate(&ModeParams::new("m", Default::default())),
            )
            .unwrap_err();
        assert!(matches!(err.fault, Fault::TimedOut { .. }), "{err}");
        assert!(ends(first), "the child of a killed worker lives on");
        // Another worker (and child), as the next call would start; the supervisor ends, and
        // so do they.
        let group = {
            let mut state = supervisor.lock();
            supervisor.ensure_worker(&mut state, "m").unwrap().group()
        };
        let second = children()[1];
        assert!(runs(second));
        drop(supervisor);
        assert!(ends(second), "the child outlived its supervisor");
        assert!(!live_groups().contains(&group));
    }

    #[test]
    fn a_worker_of_another_protocol_version_is_refused() {
        let (Err(fault), _dir) = greeted_by(OLDEST_PROTOCOL - 1, Vec::new(), PROTOCOL_VERSION)
        else {
            panic!("a worker of another version is refused")
        };
        let expected = format!(
            "it speaks protocol {}, this host {OLDEST_PROTOCOL} to {PROTOCOL_VERSION}",
            OLDEST_PROTOCOL - 1
        );
        assert!(fault.to_string().contains(&expected), "{fault}");
    }

    #[test]
    fn the_highest_protocol_both_sides_speak_is_used() {
        let agreed = |protocol, protocols, offered| {
            let (started, _dir) = greeted_by(protocol, protocols, offered);
            let (supervisor, _) = started.unwrap_or_else(|f| panic!("accepted: {f}"));
            supervisor.lock().worker.as_ref().map(|w| w.protocol)
        };
        // A worker of protocol 2 lists nothing: JSON it is.
        assert_eq!(agreed(2, Vec::new(), PROTOCOL_VERSION), Some(2));
        assert_eq!(agreed(2, vec![2, 3], PROTOCOL_VERSION), Some(3));
        // A host that offers 2 only (as one of protocol 2 would) talks JSON to a new worker.
        assert_eq!(agreed(2, vec![2, 3], 2), Some(2));
        // A version this host does not know is not picked.
        assert_eq!(agreed(2, vec![2, 3, 99], PROTOCOL_VERSION), Some(3));
        // Batches: a worker of protocol 4 under a host of 4; either side older, one by one.
        assert_eq!(agreed(2, vec![2, 3, 4], PROTOCOL_VERSION), Some(4));
        assert_eq!(agreed(2, vec![2, 3, 4], 3), Some(3));
        assert_eq!(agreed(2, vec![2, 3, 4, 99], PROTOCOL_VERSION), Some(4));
        let batches = |protocols, offered| {
            let (started, _dir) = greeted_by(2, protocols, offered);
            started.map(|(s, _)| s.batches()).ok()
        };
        assert_eq!(batches(vec![2, 3, 4], PROTOCOL_VERSION), Some(true));
        assert_eq!(batches(vec![2, 3], PROTOCOL_VERSION), Some(false));
        assert_eq!(batches(vec![2, 3, 4], 3), Some(false));
        // Evaluators and executors: protocol 5 on both sides.
        assert_eq!(PROTOCOL_VERSION, KINDS_PROTOCOL);
        assert_eq!(agreed(2, vec![2, 3, 4, 5], PROTOCOL_VERSION), Some(5));
        assert_eq!(agreed(2, vec![2, 3, 4, 5], 4), Some(4));
        let kinds = |protocols, offered| {
            let (started, _dir) = greeted_by(2, protocols, offered);
            started.map(|(s, _)| (s.serves_kinds(), s.batches())).ok()
        };
        assert_eq!(
            kinds(vec![2, 3, 4, 5], PROTOCOL_VERSION),
            Some((true, true))
        );
        assert_eq!(kinds(vec![2, 3, 4], PROTOCOL_VERSION), Some((false, true)));
        assert_eq!(kinds(vec![2, 3, 4, 5], 4), Some((false, true)));
    }

    #[test]
    fn an_old_worker_is_not_sent_an_evaluator_call_and_that_is_no_fault() {
        let (started, _dir) = greeted_by(2, vec![2, 3, 4], PROTOCOL_VERSION);
        let (supervisor, _) = started.expect("accepted");
        let key = standing_key("evaluator", "e");
        let ctx = EvaluatorContext::new("job", "v1", Vec::new());
        let err = supervisor
            .call_as(&key, "e", Ask::Evaluate(&ctx))
            .expect_err("refused");
        assert!(
            err.to_string().contains("evaluators and executors need 5"),
            "{err}"
        );
        assert!(supervisor.lock().worker.is_some(), "the worker lives on");
        assert_eq!(supervisor.standing().faults.get(&key), None, "no fault");
    }

    #[test]
    fn evaluators_and_executors_are_quarantined_apart_from_the_mode_of_the_same_id() {
        let mut options = IsolationOptions::new(Duration::from_secs(1));
        options.quarantine_after = 1;
        let supervisor = idle(options);
        let crash = || Fault::Died {
            call: "apply",
            how: describe_exit(Some(ExitStatus::from_raw(11))),
        };
        let key = standing_key("executor", "x");
        let err = {
            let mut state = supervisor.lock();
            supervisor.fault(&mut state, &key, crash())
        };
        let text = err.quarantine.expect("quarantined");
        assert!(
            text.starts_with("plugin executor `x` is quarantined after 1 faults"),
            "{text}"
        );
        assert!(
            text.ends_with("the jobs that use it do not scale meanwhile"),
            "{text}"
        );
        assert!(supervisor.quarantined(&key).is_some());
        assert_eq!(
            supervisor.quarantined("x"),
            None,
            "the mode `x` is another object"
        );
        assert_eq!(
            supervisor.quarantined(&standing_key("evaluator", "x")),
            None
        );
        assert_eq!(standing_kind("executor `x`"), Some("executor"));
        assert_eq!(standing_kind("evaluator `x`"), Some("evaluator"));
        assert_eq!(standing_kind("executor"), None);
        assert_eq!(standing_kind("x"), None);
    }

    #[test]
    fn exits_are_described_by_signal_name() {
        assert_eq!(
            describe_exit(Some(ExitStatus::from_raw(6))),
            "killed by SIGABRT (abort: abort() or a failed assertion in C)"
        );
        assert_eq!(
            describe_exit(Some(ExitStatus::from_raw(3 << 8))),
            "exited with status 3"
        );
        assert_eq!(signal_name(64), "signal 64");
    }
}
