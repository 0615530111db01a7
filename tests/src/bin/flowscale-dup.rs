//! The `flowscale` binary, built a second time from this test package: like `host/src/main.rs`,
//! its `main` only calls `flowscale::cli::main_impl()`, and it installs the same allocator, so
//! it is the real command line, down to how it uses and gives back memory (which the memory
//! checks of `tests/e2e` measure).
//!
//! It exists for the end-to-end tests in `tests/e2e`. Cargo tells an integration test where a
//! binary is (`CARGO_BIN_EXE_<name>`) only for the binaries of the test's own package, so the
//! tests cannot name the host's `flowscale`; they run this one instead, through
//! `CARGO_BIN_EXE_flowscale-dup` (see `harness::flowscale_bin`). It is not called `flowscale`
//! because two binaries of one name in a workspace would be written to the same file in
//! `target/`. The package is not published (`publish = false`): users get the host's binary.

#![warn(missing_docs, unreachable_pub)]

#[global_allocator]
static ALLOCATOR: flowscale::allocator::HostAllocator = flowscale::allocator::HOST_ALLOCATOR;

fn main() -> std::process::ExitCode {
    flowscale::cli::main_impl()
}
