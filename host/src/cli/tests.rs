//! The command-line surface as tables: argv that parse, and argv that clap refuses.

use clap::Parser;
use clap::error::ErrorKind;

use super::App;

#[test]
fn valid_command_lines_parse() {
    for argv in [
        "flowscale align --current 16 --target 24 --max-parallelism 128",
        "flowscale align --current 16 --scale-factor 1.5 --max-parallelism 128 --ship HASH,REBALANCE",
        "flowscale align --batch",
        "flowscale align --current 1 --target 2 --max-parallelism 8 --set a=b --set c=d --json",
        "flowscale validate fleet.toml",
        "flowscale validate fleet.toml --json --plugins dir",
        "flowscale validate --strict fleet.toml",
        "flowscale run fleet.toml --strict --once",
    ] {
        let args: Vec<&str> = argv.split_whitespace().collect();
        if let Err(err) = App::try_parse_from(&args) {
            panic!("{argv}: {err}");
        }
    }
}

#[test]
fn invalid_command_lines_are_refused() {
    for (argv, kind) in [
        (
            "flowscale align --current 16",
            ErrorKind::MissingRequiredArgument,
        ),
        (
            "flowscale align --current 1 --target 2 --scale-factor 2 --max-parallelism 8",
            ErrorKind::ArgumentConflict,
        ),
        (
            "flowscale align --batch --current 3",
            ErrorKind::ArgumentConflict,
        ),
        (
            "flowscale align --current x --target 2 --max-parallelism 8",
            ErrorKind::ValueValidation,
        ),
        ("flowscale frobnicate", ErrorKind::InvalidSubcommand),
    ] {
        let args: Vec<&str> = argv.split_whitespace().collect();
        match App::try_parse_from(&args) {
            Ok(_) => panic!("{argv}: parsed"),
            Err(err) => assert_eq!(err.kind(), kind, "{argv}: {err}"),
        }
    }
}
