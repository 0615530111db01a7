//! The `flowscale` command line; everything is in the library (`flowscale::cli`).

#![warn(missing_docs, unreachable_pub)]

fn main() -> std::process::ExitCode {
    flowscale::cli::main_impl()
}
