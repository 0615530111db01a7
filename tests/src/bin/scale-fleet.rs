//! Writes a fleet file of N simulated jobs (the example jobs, built-in modes) to stdout, for
//! measuring a large fleet by hand:
//!
//! ```console
//! cargo run --release -p flowscale-tests --bin scale-fleet -- 1000 2h > /tmp/fleet-1000.toml
//! /usr/bin/time -v target/release/flowscale run /tmp/fleet-1000.toml > /dev/null
//! ```

#![warn(missing_docs, unreachable_pub)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(Ok(n)) = args.next().map(|a| a.parse::<usize>()) else {
        eprintln!("usage: scale-fleet <jobs> [duration, default 2h]");
        return ExitCode::from(2);
    };
    let duration = args.next().unwrap_or_else(|| "2h".to_string());
    match flowscale_tests::scale_fleet::example_jobs(&flowscale_tests::workspace_root()) {
        Ok(jobs) => {
            print!(
                "{}",
                flowscale_tests::scale_fleet::scale_fleet(n, &jobs, &duration)
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: cannot list the example jobs: {err}");
            ExitCode::FAILURE
        }
    }
}
