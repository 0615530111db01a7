//! How long the current thread has been inside a call into an in-process plugin, readable from
//! another thread.
//!
//! Nothing can interrupt a call into a library loaded in the host: a plugin in an endless loop
//! keeps its thread forever. What the host can do is notice it and carry on without that
//! thread. A thread that wants its calls watched installs a [`CallClock`]; every call of an
//! in-process plugin mode marks its start and end on the clock of the thread making it, and a
//! watchdog reads [`CallClock::running_for`] from elsewhere.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

thread_local! {
    static INSTALLED: RefCell<Option<Arc<CallClock>>> = const { RefCell::new(None) };
}

/// The start of the plugin call a thread is in, if any.
#[derive(Debug)]
pub(crate) struct CallClock {
    /// What `started_ns` counts from.
    base: Instant,
    /// Nanoseconds from `base` to the start of the current call, plus one; 0: no call.
    started_ns: AtomicU64,
    /// The current call was already reported.
    reported: AtomicBool,
}

impl Default for CallClock {
    fn default() -> CallClock {
        CallClock {
            base: Instant::now(),
            started_ns: AtomicU64::new(0),
            reported: AtomicBool::new(false),
        }
    }
}

impl CallClock {
    /// Makes this the clock of the current thread until the guard is dropped.
    pub(crate) fn install(self: &Arc<CallClock>) -> Installed {
        INSTALLED.with(|slot| *slot.borrow_mut() = Some(Arc::clone(self)));
        Installed(())
    }

    /// How long the current call has been running, unless there is none or it was reported.
    pub(crate) fn running_for(&self) -> Option<Duration> {
        let started = self.started_ns.load(Ordering::Acquire);
        if started == 0 || self.reported.load(Ordering::Acquire) {
            return None;
        }
        let now = self.nanos_since_base();
        Some(Duration::from_nanos(now.saturating_sub(started - 1)))
    }

    /// Marks the current call as reported: [`CallClock::running_for`] says nothing more of it.
    pub(crate) fn reported(&self) {
        self.reported.store(true, Ordering::Release);
    }

    fn nanos_since_base(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX - 1)
    }
}

/// Keeps a [`CallClock`] installed on its thread; uninstalls it when dropped.
#[derive(Debug)]
pub(crate) struct Installed(());

impl Drop for Installed {
    fn drop(&mut self) {
        INSTALLED.with(|slot| *slot.borrow_mut() = None);
    }
}

/// Marks the start of a plugin call on the current thread's clock (if one is installed) until
/// the guard is dropped.
pub(crate) fn plugin_call() -> InCall {
    let clock = INSTALLED.with(|slot| slot.borrow().clone());
    if let Some(clock) = &clock {
        clock.reported.store(false, Ordering::Release);
        let now = clock.nanos_since_base();
        clock.started_ns.store(now + 1, Ordering::Release);
    }
    InCall(clock)
}

/// A plugin call in progress; see [`plugin_call`].
#[derive(Debug)]
pub(crate) struct InCall(Option<Arc<CallClock>>);

impl Drop for InCall {
    fn drop(&mut self) {
        if let Some(clock) = &self.0 {
            clock.started_ns.store(0, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_timed_only_on_a_thread_with_a_clock_and_only_while_it_runs() {
        // No clock installed: marking a call is harmless.
        drop(plugin_call());

        let clock = Arc::new(CallClock::default());
        assert_eq!(clock.running_for(), None);
        let installed = clock.install();
        let call = plugin_call();
        std::thread::sleep(Duration::from_millis(20));
        let running = clock.running_for().expect("a call is running");
        assert!(running >= Duration::from_millis(20), "{running:?}");
        clock.reported();
        assert_eq!(clock.running_for(), None, "reported once");
        drop(call);
        assert_eq!(clock.running_for(), None);
        drop(installed);
        drop(plugin_call());
        assert_eq!(clock.running_for(), None, "uninstalled");
    }
}
