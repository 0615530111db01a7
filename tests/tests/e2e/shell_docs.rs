//! `flowscale completions` and `flowscale man`: generated from the command-line definition, so
//! every command and every long flag that `--help` shows must be in them. The expected names are
//! read from `--help` (clap's help writer), not from the generators under test.

use std::process::Command;

use crate::harness::{Cli, Output};

/// The visible commands `flowscale --help` lists (without clap's `help`).
fn commands() -> Vec<String> {
    let help = ok(Cli::new(["--help"]).run());
    let mut in_commands = false;
    let mut names = Vec::new();
    for line in help.stdout.lines() {
        if line.trim_end() == "Commands:" {
            in_commands = true;
            continue;
        }
        if in_commands {
            let Some(rest) = line.strip_prefix("  ") else {
                break;
            };
            let name = rest.split_whitespace().next().unwrap_or_default();
            if !name.is_empty() && name != "help" {
                names.push(name.to_string());
            }
        }
    }
    assert!(
        names.len() >= 8,
        "too few commands read from --help: {names:?}"
    );
    names
}

/// The long flags `flowscale <command> --help` shows (without `--help` and `--version`).
fn long_flags(command: &str) -> Vec<String> {
    let help = ok(Cli::new([command, "--help"]).run());
    let mut flags: Vec<String> = help
        .stdout
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .flat_map(|l| l.split([' ', ',', '=', '<']))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .filter(|w| *w != "--help" && *w != "--version")
        .map(str::to_string)
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

fn ok(out: Output) -> Output {
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    out
}

#[test]
fn completions_name_every_command_and_flag_and_bash_reads_them() {
    let commands = commands();
    // The reader of --help finds flags at all (else every check below would pass vacuously).
    assert!(long_flags("run").contains(&"--plugin-isolation".to_string()));
    // A nested command's flags are completed too (`config keys --markdown`).
    let nested = ok(Cli::new(["config", "keys", "--help"]).run()).stdout;
    assert!(nested.contains("--markdown"), "{nested}");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = ok(Cli::new(["completions", shell]).run()).stdout;
        assert!(
            script.contains("markdown"),
            "{shell}: no `config keys --markdown`"
        );
        for command in &commands {
            assert!(script.contains(command.as_str()), "{shell}: no `{command}`");
            for flag in long_flags(command) {
                // fish writes a long flag without its dashes (`-l flag`).
                let bare = flag.trim_start_matches('-');
                assert!(
                    script.contains(&flag) || (shell == "fish" && script.contains(bare)),
                    "{shell}: no `{flag}` of `{command}`"
                );
            }
        }
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("flowscale.bash");
    std::fs::write(&file, ok(Cli::new(["completions", "bash"]).run()).stdout).expect("write");
    let status = Command::new("bash")
        .arg("-n")
        .arg(&file)
        .status()
        .expect("bash");
    assert!(status.success(), "bash -n refuses the completion script");
    // Sourced, it registers the completion function for `flowscale`.
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && complete -p flowscale",
            file.display()
        ))
        .output()
        .expect("bash");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("flowscale"),
        "no completion registered: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "needs zsh and fish (.ci/run installs them and runs this test)"]
fn zsh_and_fish_read_their_completion_scripts() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (shell, file) in [("zsh", "_flowscale"), ("fish", "flowscale.fish")] {
        let path = dir.path().join(file);
        std::fs::write(&path, ok(Cli::new(["completions", shell]).run()).stdout).expect("write");
        let status = Command::new(shell)
            .arg("-n")
            .arg(&path)
            .status()
            .unwrap_or_else(|e| panic!("{shell}: {e}"));
        assert!(status.success(), "{shell} -n refuses its completion script");
    }
}

#[test]
fn man_pages_cover_every_command_and_flag() {
    let main_page = ok(Cli::new(["man"]).run()).stdout;
    assert!(main_page.starts_with(".ie") || main_page.contains(".TH flowscale 1"));
    let dir = tempfile::tempdir().expect("temp dir");
    let pages = dir.path().join("man1");
    ok(Cli::new(["man", "--dir", pages.to_str().expect("utf-8 path")]).run());
    assert!(pages.join("flowscale.1").is_file());
    for command in commands() {
        assert!(main_page.contains(&command), "main page: no `{command}`");
        let page = std::fs::read_to_string(pages.join(format!("flowscale-{command}.1")))
            .unwrap_or_else(|e| panic!("no page for `{command}`: {e}"));
        assert!(page.contains(&format!(".TH flowscale-{command} 1")));
        for flag in long_flags(&command) {
            // roff escapes each dash of a flag: `--plugins` is `\-\-plugins`.
            let escaped = flag.replace('-', "\\-");
            assert!(
                page.contains(&escaped),
                "flowscale-{command}.1: no `{flag}`"
            );
        }
    }
}

/// docs/configuration.md is what the binary prints, and the text form names the same keys.
#[test]
fn config_keys_markdown_is_docs_configuration_md() {
    let page = std::fs::read_to_string(crate::harness::repo_root().join("docs/configuration.md"))
        .expect("docs/configuration.md");
    let markdown = ok(Cli::new(["config", "keys", "--markdown"]).run()).stdout;
    assert!(
        markdown == page,
        "docs/configuration.md is out of date; regenerate it with \
         `cargo run -p flowscale -- config keys --markdown > docs/configuration.md`"
    );
    let text = ok(Cli::new(["config", "keys"]).run()).stdout;
    for key in ["utilization.target", "scaling-cooldown-period", "lease-ttl"] {
        assert!(page.contains(&format!("| `{key}`")), "{key}");
        assert!(text.contains(&format!("  {key} ")), "{key}");
    }
    assert!(!text.contains('|'), "the text form is not a Markdown table");
}
