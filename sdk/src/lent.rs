//! A part of a context that the plugin side reads from the host's lent context only when the
//! plugin first asks for it: the kept alignment context's details, an evaluator's job graph and
//! vertices evaluated before, an executor's job graph.
//!
//! Most plugins read little of what they are lent (a mode's gate looks at numbers, an evaluator
//! at its vertex's metrics): copying the rest on every call is most of a call's cost. A
//! [`Lent`] value is either complete (every context a host or a builder makes) or still to be
//! brought up to date from the context the host lends for the running call, which happens once
//! per call, when the plugin first reads it, into the buffers the value already holds.
//!
//! A kept context is only ever reached by a plugin during a lent call, with the lent context
//! alive; a clone is complete (it may outlive the call).

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::sync::OnceLock;

/// A value complete, or to bring up to date from the context lent for the running call.
pub(crate) struct Lent<T> {
    /// With a source: set once `value` is up to date with it. Without one, unused (the value
    /// is complete), so that building a context writes no once-cell.
    ready: OnceLock<()>,
    /// With a source, written only by the one initialisation of `ready` (or through `&mut
    /// self`) and read only once `ready` is set.
    value: UnsafeCell<T>,
    /// Where the value comes from (`None`: it is complete).
    source: Option<LentSource<T>>,
}

/// Where a [`Lent`] value comes from: a context lent for the running call, and the function of
/// the boundary that reads it (see `abi`), which knows what the two pointers are.
pub(crate) struct LentSource<T> {
    pub(crate) lent: *const c_void,
    pub(crate) table: *const c_void,
    pub(crate) fill: unsafe fn(&mut T, *const c_void, *const c_void),
}

impl<T> Clone for LentSource<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for LentSource<T> {}

// SAFETY: a lent context is the host's, which is `Sync`, read through accessors that only read
// it; the table is a static.
unsafe impl<T> Send for LentSource<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for LentSource<T> {}

// SAFETY: through `&self`, `value` is written only inside `ready`'s initialisation (with a
// source), which runs once at a time, and read only after it completed (with the
// happens-before `OnceLock` gives) or when there is no source (then nothing writes it); the
// source is a lent context, which is itself shared across threads (see `LentSource`).
unsafe impl<T: Send + Sync> Sync for Lent<T> {}

/// A panic while the value is brought up to date leaves `ready` unset, and the next read
/// brings it up to date from the start (every fill compares or rewrites its part whole), so a
/// context seen again after a caught panic is never half of one and half of another.
impl<T> std::panic::RefUnwindSafe for Lent<T> {}

impl<T> Lent<T> {
    /// A complete value.
    pub(crate) fn ready_with(value: T) -> Lent<T> {
        Lent {
            ready: OnceLock::new(),
            value: UnsafeCell::new(value),
            source: None,
        }
    }

    /// The value, brought up to date from the source first if it is not yet.
    #[inline]
    pub(crate) fn get(&self) -> &T {
        if self.source.is_some() && self.ready.get().is_none() {
            self.bring_up_to_date();
        }
        // SAFETY: without a source nothing writes `value` but `&mut self`; with one, `ready`
        // is set, and nothing writes it until `&mut self` is taken again.
        unsafe { &*self.value.get() }
    }

    #[cold]
    fn bring_up_to_date(&self) {
        self.ready.get_or_init(|| {
            if let Some(source) = self.source {
                // SAFETY: this initialisation is the only writer while `ready` is not set, and
                // nothing reads `value` before it completes; the source is lent for the running
                // call, the only time a plugin can reach this context (see the module docs).
                unsafe { (source.fill)(&mut *self.value.get(), source.lent, source.table) }
            }
        });
    }

    /// The value, up to date, to change in place.
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.get();
        self.value.get_mut()
    }

    /// The value, up to date, taken out.
    pub(crate) fn into_inner(self) -> T {
        self.get();
        self.value.into_inner()
    }

    /// The value is that of `source` from now on (read when first needed); the kept one stays
    /// as the buffers to bring up to date.
    pub(crate) fn lend(&mut self, source: LentSource<T>) {
        let _ = self.ready.take();
        self.source = Some(source);
    }

    /// The same value (`source` lends the very context it came from, or an equal one): still
    /// read from it if it is not yet.
    pub(crate) fn lend_again(&mut self, source: LentSource<T>) {
        self.source = Some(source);
    }
}

/// A clone is complete: it may outlive the lent call.
impl<T: Clone> Clone for Lent<T> {
    fn clone(&self) -> Lent<T> {
        Lent::ready_with(self.get().clone())
    }
}

impl<T: Default> Default for Lent<T> {
    fn default() -> Lent<T> {
        Lent::ready_with(T::default())
    }
}

/// As the value, wherever it comes from.
impl<T: std::fmt::Debug> std::fmt::Debug for Lent<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.get(), f)
    }
}

/// Compared as the values, wherever they come from.
impl<T: PartialEq> PartialEq for Lent<T> {
    fn eq(&self, other: &Lent<T>) -> bool {
        self.get() == other.get()
    }
}
