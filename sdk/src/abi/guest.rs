//! The plugin side of the boundary: what [`crate::export_plugin!`] expands to calls into here.
//! Every entry point catches panics, so a fault in a mode never unwinds into the host.

use std::any::Any;
use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RResult, RStr};
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

use super::context::{ContextRef, with_lent};
use super::root::{
    FfiError, FfiErrorKind, FfiMode, FfiMode_TO, FfiModeBox, HostLogFn, HostLogger, LogLevel,
    ParamsRef, PluginRoot, PluginRootRef,
};
use crate::mode::AlignmentMode;
use crate::params::ModeParams;

/// One mode a plugin exports: its implementation id, description and constructor.
pub struct ModeFactory {
    /// The implementation id (`scaling.alignment.mode.<name>.class`).
    pub id: &'static str,
    /// A one-line description for `flowscale plugins`.
    pub description: &'static str,
    /// Creates the mode.
    pub make: fn() -> Box<dyn AlignmentMode>,
}

/// The text of a panic payload.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-text payload".to_string()
    }
}

/// Runs `f`, turning a panic into a [`FfiErrorKind::PANIC`] error; `what` names the entry
/// point in the message (only formatted when there was a panic).
pub(super) fn guarded<T>(
    what: impl FnOnce() -> String,
    f: impl FnOnce() -> RResult<T, FfiError>,
) -> RResult<T, FfiError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => RResult::RErr(FfiError::new(
            FfiErrorKind::PANIC,
            format!(
                "panicked in {}: {}",
                what(),
                panic_message(payload.as_ref())
            ),
        )),
    }
}

/// Wraps the author's mode as the boundary's mode object.
struct ModeAdapter {
    id: &'static str,
    inner: Box<dyn AlignmentMode>,
}

impl FfiMode for ModeAdapter {
    fn is_applicable(&self, ctx: ContextRef<'_>) -> RResult<bool, FfiError> {
        guarded(
            || format!("`{}` is_applicable", self.id),
            || {
                // SAFETY: the host lends `ctx` for the duration of this call.
                let applicable = unsafe { with_lent(ctx, |ctx| self.inner.is_applicable(ctx)) };
                RResult::ROk(applicable)
            },
        )
    }

    fn align(&self, ctx: ContextRef<'_>) -> RResult<u32, FfiError> {
        guarded(
            || format!("`{}` align", self.id),
            || {
                // SAFETY: the host lends `ctx` for the duration of this call.
                match unsafe { with_lent(ctx, |ctx| self.inner.align(ctx)) } {
                    Ok(p) => RResult::ROk(p),
                    Err(e) => RResult::RErr(FfiError::new(FfiErrorKind::MODE, e.message())),
                }
            },
        )
    }

    fn validate(&self, params: ParamsRef<'_>) -> RResult<(), FfiError> {
        guarded(
            || format!("`{}` validate", self.id),
            || {
                let entries = params
                    .entries
                    .iter()
                    .map(|p| (p.0.as_str().to_string(), p.1.as_str().to_string()))
                    .collect();
                let params = ModeParams::new(params.mode_name.as_str(), entries);
                match self.inner.validate(&params) {
                    Ok(()) => RResult::ROk(()),
                    Err(e) => RResult::RErr(FfiError::new(FfiErrorKind::MODE, e.message())),
                }
            },
        )
    }
}

/// `new_mode` of a plugin exporting `modes`.
pub fn new_mode(modes: &'static [ModeFactory], id: RStr<'_>) -> RResult<FfiModeBox, FfiError> {
    let id = id.as_str();
    let Some(factory) = modes.iter().find(|m| m.id == id) else {
        let known: Vec<&str> = modes.iter().map(|m| m.id).collect();
        return RResult::RErr(FfiError::new(
            FfiErrorKind::UNKNOWN_MODE,
            format!(
                "this plugin exports no mode `{id}` (it exports: {})",
                known.join(", ")
            ),
        ));
    };
    guarded(
        || format!("the constructor of `{id}`"),
        || {
            let adapter = ModeAdapter {
                id: factory.id,
                inner: (factory.make)(),
            };
            RResult::ROk(FfiMode_TO::from_value(adapter, TD_Opaque))
        },
    )
}

/// The root module of a plugin whose macro-generated entry points are `install_logger` and
/// `new_mode`.
pub fn root_module(
    install_logger: extern "C" fn(HostLogger, LogLevel),
    new_mode: extern "C" fn(RStr<'_>) -> RResult<FfiModeBox, FfiError>,
) -> PluginRootRef {
    use abi_stable::prefix_type::PrefixTypeTrait;
    PluginRoot {
        install_logger,
        new_mode,
    }
    .leak_into_prefix()
}

struct InstalledLogger {
    log: HostLogFn,
    max: LevelFilter,
}

static LOGGER: OnceLock<InstalledLogger> = OnceLock::new();

fn level_code(level: &Level) -> LogLevel {
    match *level {
        Level::ERROR => 1,
        Level::WARN => 2,
        Level::INFO => 3,
        Level::DEBUG => 4,
        Level::TRACE => 5,
    }
}

fn level_filter(code: LogLevel) -> LevelFilter {
    match code {
        0 => LevelFilter::OFF,
        1 => LevelFilter::ERROR,
        2 => LevelFilter::WARN,
        3 => LevelFilter::INFO,
        4 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    }
}

/// Sends one record to the host, if it handed over a logger.
fn forward(level: LogLevel, target: &str, message: &str) {
    if let Some(logger) = LOGGER.get() {
        (logger.log)(level, RStr::from_str(target), RStr::from_str(message));
    }
}

/// `install_logger` of every plugin (`plugin` is its name, the target of panic records): stores the host's callback, makes it this library's global
/// `tracing` subscriber (each cdylib has its own `tracing` registry) and reports panics through
/// it. Only the first call has an effect.
pub fn install_logger(log: HostLogger, max_level: LogLevel, plugin: &'static str) {
    let log: HostLogFn = log.log;
    let _ = catch_unwind(|| {
        if LOGGER
            .set(InstalledLogger {
                log,
                max: level_filter(max_level),
            })
            .is_err()
        {
            return;
        }
        let _ = tracing::subscriber::set_global_default(Forwarder);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if LOGGER.get().is_some() {
                let location = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                forward(
                    1,
                    plugin,
                    &format!("{}{location}", panic_message(info.payload())),
                );
            } else {
                previous(info);
            }
        }));
    });
}

/// A `tracing` subscriber that formats each event and forwards it to the host; spans are not
/// forwarded (the host's own span around the call gives the context).
struct Forwarder;

struct MessageVisitor(String);

impl Visit for MessageVisitor {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let sep = if self.0.is_empty() { "" } else { " " };
            let _ = write!(self.0, "{sep}{}={value:?}", field.name());
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            let sep = if self.0.is_empty() { "" } else { " " };
            let _ = write!(self.0, "{sep}{}={value}", field.name());
        }
    }
}

impl Subscriber for Forwarder {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        LOGGER.get().is_some_and(|l| *metadata.level() <= l.max)
    }
    fn max_level_hint(&self) -> Option<LevelFilter> {
        LOGGER.get().map(|l| l.max)
    }
    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _span: &Id, _values: &Record<'_>) {}
    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut visitor = MessageVisitor(String::new());
        event.record(&mut visitor);
        let meta = event.metadata();
        forward(level_code(meta.level()), meta.target(), &visitor.0);
    }
    fn enter(&self, _span: &Id) {}
    fn exit(&self, _span: &Id) {}
}
