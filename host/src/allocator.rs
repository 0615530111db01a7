//! The heap allocator of the `flowscale` binary and of the benchmarks that measure it.
//!
//! A decision cycle allocates and frees many small, short-lived blocks per vertex (requests,
//! explanations, maps of a job's state), thousands of jobs in turn, for months. With glibc's
//! allocator one cycle of 10,000 jobs x 20 vertices took 1.6 to 2.1 times as long as with
//! mimalloc in the same session (`cargo bench --bench decision_cycle`, README "Performance"),
//! which keeps per-thread free lists of each size class and so touches less memory per
//! allocation. The library does not install it: a program that links the library keeps its
//! own allocator; the binary and the benchmarks install this one, so that what the benchmarks
//! time is what the binary runs:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: flowscale::allocator::HostAllocator = flowscale::allocator::HOST_ALLOCATOR;
//! ```

/// The allocator type the binary installs as its global allocator.
pub type HostAllocator = mimalloc::MiMalloc;

/// The allocator value to install (`#[global_allocator]` needs a `static` of a concrete value).
pub const HOST_ALLOCATOR: HostAllocator = mimalloc::MiMalloc;
