//! The `flowscale` command line; everything is in the library (`flowscale::cli`).

#![warn(missing_docs, unreachable_pub)]

/// See `flowscale::allocator` for why the binary does not use the system allocator.
#[global_allocator]
static ALLOCATOR: flowscale::allocator::HostAllocator = flowscale::allocator::HOST_ALLOCATOR;

fn main() -> std::process::ExitCode {
    flowscale::cli::main_impl()
}
