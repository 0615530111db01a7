//! The logger a plugin gets: its `tracing` records come back through this `extern "C"`
//! callback and are re-emitted in the host's `tracing` under target `flowscale::plugin`.

use std::panic::{AssertUnwindSafe, catch_unwind};

use abi_stable::std_types::RStr;
use flowscale_sdk::abi::{HostLogger, LogLevel};
use tracing::level_filters::LevelFilter;

extern "C" fn forward(level: u8, target: RStr<'_>, message: RStr<'_>) {
    // Nothing may unwind back into the plugin.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        emit(level, target.as_str(), message.as_str())
    }));
}

/// Re-emits one plugin record (level 1 error ... 5 trace) in the host's `tracing`: what the
/// callback does in-process, and what the supervisor does with a worker's log frames.
pub(super) fn emit(level: u8, target: &str, message: &str) {
    match level {
        1 => tracing::error!(target: "flowscale::plugin", plugin_target = target, "{message}"),
        2 => tracing::warn!(target: "flowscale::plugin", plugin_target = target, "{message}"),
        3 => tracing::info!(target: "flowscale::plugin", plugin_target = target, "{message}"),
        4 => tracing::debug!(target: "flowscale::plugin", plugin_target = target, "{message}"),
        _ => tracing::trace!(target: "flowscale::plugin", plugin_target = target, "{message}"),
    }
}

/// The callback handed to every plugin.
pub(super) fn host_logger() -> HostLogger {
    HostLogger { log: forward }
}

/// The most verbose level the host currently records, as the plugin-side code.
pub(super) fn max_level() -> LogLevel {
    match LevelFilter::current() {
        LevelFilter::OFF => 0,
        LevelFilter::ERROR => 1,
        LevelFilter::WARN => 2,
        LevelFilter::INFO => 3,
        LevelFilter::DEBUG => 4,
        _ => 5,
    }
}
