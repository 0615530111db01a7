//! The `flowscale` command line, built inside this package so that the end-to-end tests can run
//! it through `CARGO_BIN_EXE_flowscale-dup`.

fn main() -> std::process::ExitCode {
    flowscale::cli::main_impl()
}
