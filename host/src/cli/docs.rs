//! `flowscale completions` and `flowscale man`: shell completions and man pages generated from
//! the command-line definition itself, so that they list exactly the commands and flags the
//! binary accepts.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, CommandFactory, ValueEnum};
use clap_complete::Shell;

use super::{App, exit_codes};

/// The shells completions are written for.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum CompletionShell {
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
}

impl CompletionShell {
    fn shell(self) -> Shell {
        match self {
            CompletionShell::Bash => Shell::Bash,
            CompletionShell::Zsh => Shell::Zsh,
            CompletionShell::Fish => Shell::Fish,
            CompletionShell::Elvish => Shell::Elvish,
            CompletionShell::Powershell => Shell::PowerShell,
        }
    }
}

/// `flowscale completions <shell>`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for. Install, e.g.: `flowscale completions bash >
    /// ~/.local/share/bash-completion/completions/flowscale`, `flowscale completions zsh >
    /// ~/.zfunc/_flowscale`, `flowscale completions fish > ~/.config/fish/completions/flowscale.fish`.
    #[arg(value_enum)]
    shell: CompletionShell,
}

/// `flowscale man`.
#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// Write one page per command (`flowscale.1`, `flowscale-run.1`, ...) into this directory
    /// instead of printing the main page to stdout. Install, e.g.: `flowscale man --dir
    /// ~/.local/share/man/man1`.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Prints the completion script of one shell.
pub(crate) fn exec_completions(args: CompletionsArgs) -> u8 {
    let mut command = App::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell.shell(), &mut command, "flowscale", &mut out);
    write_stdout(&out)
}

/// Prints the main man page, or writes every page into a directory.
pub(crate) fn exec_man(args: ManArgs) -> u8 {
    let command = App::command();
    match args.dir {
        None => {
            let mut out = Vec::new();
            match clap_mangen::Man::new(command).render(&mut out) {
                Ok(()) => write_stdout(&out),
                Err(e) => {
                    eprintln!("error: cannot render the man page: {e}");
                    exit_codes::FAILED
                }
            }
        }
        Some(dir) => match write_pages(command, &dir) {
            Ok(count) => {
                eprintln!("wrote {count} man pages into {}", dir.display());
                exit_codes::OK
            }
            Err(e) => {
                eprintln!("error: {}: {e}", dir.display());
                exit_codes::FAILED
            }
        },
    }
}

/// Every page: the main one and one per visible command, named `flowscale-<command>.1`.
fn write_pages(command: clap::Command, dir: &Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let command = command.disable_help_subcommand(true);
    let mut count = 0;
    let mut render = |cmd: clap::Command, file: String| -> std::io::Result<()> {
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut out)?;
        std::fs::write(dir.join(file), out)?;
        count += 1;
        Ok(())
    };
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("flowscale-{}", sub.get_name());
        render(sub.clone().name(name.clone()), format!("{name}.1"))?;
    }
    render(command, "flowscale.1".to_string())?;
    Ok(count)
}

/// Writes a command's whole answer to stdout; a closed pipe is not a failure.
pub(super) fn write_stdout(bytes: &[u8]) -> u8 {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => exit_codes::OK,
        // A closed pipe (`| head`) is the reader's choice, not a failure.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => exit_codes::OK,
        Err(e) => {
            eprintln!("error: cannot write to stdout: {e}");
            exit_codes::FAILED
        }
    }
}
