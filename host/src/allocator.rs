//! The heap allocator of the `flowscale` binary and of the benchmarks that measure it.
//!
//! A decision cycle allocates and frees many small, short-lived blocks per vertex (requests,
//! explanations, maps of a job's state), thousands of jobs in turn, for months. With glibc's
//! allocator one cycle of 10,000 jobs x 20 vertices took 1.6 to 2.1 times as long as with
//! mimalloc in the same session (`cargo bench --bench decision_cycle`, docs/performance.md#the-decision-cycle),
//! which keeps per-thread free lists of each size class and so touches less memory per
//! allocation. The library does not install it: a program that links the library keeps its
//! own allocator; the binary and the benchmarks install this one, so that what the benchmarks
//! time is what the binary runs:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: flowscale::allocator::HostAllocator = flowscale::allocator::HOST_ALLOCATOR;
//! ```
//!
//! Memory freed in bulk (a reload that removed thousands of jobs) is given back to the system
//! by [`release_free_memory`], which every thread that allocates for the fleet runs once a
//! release was asked for ([`ask_release`], [`ReleaseWatch`]): mimalloc keeps a thread's free
//! pages, and those of its blocks that other threads freed, until that thread collects them.
//!
//! The blocks go through mimalloc's plain entry points whenever its natural alignment suffices
//! (see [`HostAllocator`]): `mimalloc::MiMalloc` asks for every block by its alignment, and
//! mimalloc serves a block above 1 KiB whose size is not a power of two (a job's metric sample,
//! its evaluated vertices, a history node) by over-allocating and aligning inside it, a slow
//! path that also marks its page as holding interior pointers.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

use libmimalloc_sys::{mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned};
use libmimalloc_sys::{mi_zalloc, mi_zalloc_aligned};

/// The alignment of every block `mi_malloc` returns of at least this size (`MI_MAX_ALIGN_SIZE`);
/// smaller blocks are aligned to their size rounded up to a word.
const NATURAL_ALIGN: usize = 16;

/// mimalloc, asked for blocks through its plain entry points when their alignment is one
/// mimalloc gives every block of their size, and through the aligned ones otherwise.
pub struct HostAllocator;

/// True when `mi_malloc` of `layout.size()` bytes is aligned for `layout` (as the system
/// allocator decides between `malloc` and `posix_memalign`).
#[inline]
fn natural(layout: &Layout) -> bool {
    layout.align() <= NATURAL_ALIGN && layout.align() <= layout.size()
}

// SAFETY: every block comes from mimalloc with at least the layout's size and alignment, and
// goes back to it through `mi_free`/`mi_realloc*`, which accept blocks of any of its entry
// points.
unsafe impl GlobalAlloc for HostAllocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: plain C allocation calls; a null result is passed on as failure.
        unsafe {
            if natural(&layout) {
                mi_malloc(layout.size()).cast()
            } else {
                mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        unsafe {
            if natural(&layout) {
                mi_zalloc(layout.size()).cast()
            } else {
                mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` was returned by this allocator (the caller's contract).
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` was returned by this allocator for `layout` (the caller's contract);
        // the new block keeps the alignment, naturally or asked for.
        unsafe {
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            if natural(&new_layout) {
                mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

/// The allocator value to install (`#[global_allocator]` needs a `static` of a concrete value).
pub const HOST_ALLOCATOR: HostAllocator = HostAllocator;

// mimalloc's own entry point, linked in through `libmimalloc-sys` (whose Rust declaration of it
// is behind its `extended` feature, which would add a crate for one function).
unsafe extern "C" {
    /// Collects the calling thread's free pages (those freed by other threads too, with
    /// `force`) and purges what is free in mimalloc's arenas, process wide.
    fn mi_collect(force: bool);
}

/// Gives what mimalloc holds free for the calling thread back to the system, and what is free
/// in its arenas. Costs a walk over the thread's pages: for after a bulk free, not for every
/// step. In a program that installs another allocator, it only collects mimalloc's own (empty)
/// heap.
pub(crate) fn release_free_memory() {
    // SAFETY: `mi_collect` takes no pointer and may be called from any thread at any time.
    unsafe { mi_collect(true) }
}

/// Releases asked for so far ([`ask_release`]).
static RELEASES: AtomicU64 = AtomicU64::new(0);

/// Asks every thread that holds a [`ReleaseWatch`] to release its free memory at its next
/// check: much was freed at once.
pub(crate) fn ask_release() {
    RELEASES.fetch_add(1, Ordering::AcqRel);
}

/// One thread's view of the releases asked for: [`ReleaseWatch::check`] releases the thread's
/// free memory once per request.
#[derive(Debug)]
pub(crate) struct ReleaseWatch {
    seen: u64,
}

impl ReleaseWatch {
    /// A watch that has seen the releases asked for until now.
    pub(crate) fn new() -> ReleaseWatch {
        ReleaseWatch {
            seen: RELEASES.load(Ordering::Acquire),
        }
    }

    /// Releases the calling thread's free memory if a release was asked for since the last
    /// check; true if it did. One atomic load otherwise.
    pub(crate) fn check(&mut self) -> bool {
        let now = RELEASES.load(Ordering::Acquire);
        if now == self.seen {
            return false;
        }
        self.seen = now;
        release_free_memory();
        true
    }
}
