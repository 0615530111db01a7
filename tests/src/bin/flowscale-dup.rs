//! The `flowscale` binary, built a second time from this test package: like `host/src/main.rs`,
//! its `main` only calls `flowscale::cli::main_impl()`, so it is the real command line.
//!
//! It exists for the end-to-end tests in `tests/e2e`. Cargo tells an integration test where a
//! binary is (`CARGO_BIN_EXE_<name>`) only for the binaries of the test's own package, so the
//! tests cannot name the host's `flowscale`; they run this one instead, through
//! `CARGO_BIN_EXE_flowscale-dup` (see `harness::flowscale_bin`). It is not called `flowscale`
//! because two binaries of one name in a workspace would be written to the same file in
//! `target/`. The package is not published (`publish = false`): users get the host's binary.

#![warn(missing_docs, unreachable_pub)]

fn main() -> std::process::ExitCode {
    flowscale::cli::main_impl()
}
