//! The README's plugin section is the real template crate: what a user copies is what CI builds
//! and loads.

use crate::harness::repo_root;

/// The fenced block of `lang` that follows the line `marker` in the README.
fn block_after(readme: &str, marker: &str, lang: &str) -> String {
    let start = readme
        .find(marker)
        .unwrap_or_else(|| panic!("README has `{marker}`"));
    let fence = format!("```{lang}\n");
    let body_start = readme[start..]
        .find(&fence)
        .expect("a fenced block follows")
        + start
        + fence.len();
    let body_end = readme[body_start..].find("```").expect("the block ends") + body_start;
    readme[body_start..body_end].to_string()
}

#[test]
fn readme_plugin_code_is_the_template_crate() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README");
    let lib = std::fs::read_to_string(repo_root().join("examples/plugin-template/src/lib.rs"))
        .expect("template");
    let snippet = block_after(&readme, "`src/lib.rs`:", "rust");
    assert!(
        lib.contains(snippet.trim()),
        "README's src/lib.rs differs from examples/plugin-template/src/lib.rs"
    );
    let manifest = std::fs::read_to_string(repo_root().join("examples/plugin-template/Cargo.toml"))
        .expect("manifest");
    let snippet = block_after(&readme, "`Cargo.toml`:", "toml");
    for line in snippet
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let found = manifest.lines().any(|m| m == line);
        assert!(
            found,
            "README's Cargo.toml line `{line}` is not in the template's manifest"
        );
    }
}

/// A shell text with its line continuations joined and its whitespace collapsed.
fn one_line(shell: &str) -> String {
    shell
        .replace("\\\n", " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn readme_test_commands_are_what_ci_runs() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README");
    let ci = one_line(&std::fs::read_to_string(repo_root().join(".ci/run")).expect(".ci/run"));
    let section = &readme[readme.find("## Running the tests").expect("the section")..];
    let plain = block_after(section, "## Running the tests", "sh");
    let flink = block_after(section, "lists as ignored:", "sh");
    for command in [one_line(&plain), one_line(&flink)] {
        assert!(!command.is_empty());
        assert!(
            ci.contains(&command),
            "the README's `{command}` is not what .ci/run runs"
        );
    }
    assert!(
        one_line(&flink).contains("-- --ignored"),
        "the Flink tests are #[ignore]d: {flink}"
    );
}
