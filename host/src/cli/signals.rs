//! The signals a running host answers: Ctrl-C (SIGINT) and SIGTERM stop every job at its next
//! step; SIGHUP asks for the fleet configuration to be read again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Flags the signal handlers set; the loops look at them between steps.
#[derive(Debug, Clone)]
pub(super) struct Signals {
    /// Set by SIGINT and SIGTERM.
    pub(crate) stop: Arc<AtomicBool>,
    /// Set by SIGHUP; cleared by whoever acts on it.
    pub(crate) reload: Arc<AtomicBool>,
}

impl Signals {
    /// Installs the handlers. A handler that cannot be installed is a warning: the host runs,
    /// but that signal does not reach it cleanly.
    pub(super) fn install() -> Signals {
        let signals = Signals {
            stop: Arc::new(AtomicBool::new(false)),
            reload: Arc::new(AtomicBool::new(false)),
        };
        for (signal, flag, what) in [
            (signal_hook::consts::SIGINT, &signals.stop, "Ctrl-C"),
            (signal_hook::consts::SIGTERM, &signals.stop, "SIGTERM"),
            #[cfg(unix)]
            (signal_hook::consts::SIGHUP, &signals.reload, "SIGHUP"),
        ] {
            if let Err(err) = signal_hook::flag::register(signal, Arc::clone(flag)) {
                eprintln!("warning: {what} will not reach the loop cleanly: {err}");
            }
        }
        signals
    }

    /// True once, for each SIGHUP (or several in a row) since the last call.
    pub(super) fn take_reload(&self) -> bool {
        self.reload.swap(false, Ordering::AcqRel)
    }
}
