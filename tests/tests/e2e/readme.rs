//! What the README and the docs pages show is true: the plugin template they print is the real
//! template crate (what a user copies is what CI builds and loads), their test commands are what
//! CI runs, their fleet files validate, and every relative link leads to a file and heading that
//! exist.

use crate::harness::repo_root;

/// The text of the repository file `path` (`README.md`, `docs/...`).
fn repo_file(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The fenced block of `lang` that follows the line `marker` in a Markdown text.
fn block_after(readme: &str, marker: &str, lang: &str) -> String {
    let start = readme
        .find(marker)
        .unwrap_or_else(|| panic!("the page has `{marker}`"));
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
    // The README's plugin section points to docs/writing-modes.md, which prints the crate.
    assert!(repo_file("README.md").contains("(docs/writing-modes.md)"));
    let readme = repo_file("docs/writing-modes.md");
    let lib = std::fs::read_to_string(repo_root().join("examples/plugin-template/src/lib.rs"))
        .expect("template");
    let snippet = block_after(&readme, "`src/lib.rs`:", "rust");
    assert!(
        lib.contains(snippet.trim()),
        "docs/writing-modes.md's src/lib.rs differs from examples/plugin-template/src/lib.rs"
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
            "docs/writing-modes.md's Cargo.toml line `{line}` is not in the template's manifest"
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
    let readme = repo_file("README.md");
    let page = repo_file("docs/development.md");
    let ci = one_line(&repo_file(".ci/run"));
    let section = &page[page.find("## Running the tests").expect("the section")..];
    let plain = block_after(section, "## Running the tests", "sh");
    let flink = block_after(section, "lists as ignored:", "sh");
    // The README's own test command (its quick start and "Building and testing") is the same.
    let building = block_after(&readme, "## Building and testing", "sh");
    assert_eq!(one_line(&building), one_line(&plain));
    assert!(
        readme.contains(&format!("\n{}\n", plain.trim())),
        "the README's quick start runs `{}`",
        plain.trim()
    );
    for command in [one_line(&plain), one_line(&flink)] {
        assert!(!command.is_empty());
        assert!(
            ci.contains(&command),
            "docs/development.md's `{command}` is not what .ci/run runs"
        );
    }
    assert!(
        one_line(&flink).contains("-- --ignored"),
        "the Flink tests are #[ignore]d: {flink}"
    );
}

/// The README's production fleet file is one `flowscale validate` accepts once the files it
/// names exist as a user would make them: every key in it is a real key, every value valid, and
/// its secret files private.
#[test]
fn the_readme_production_fleet_file_is_valid() {
    use flowscale_tests::certs::{TestCa, write_private};

    let readme = repo_file("README.md");
    let fleet = block_after(&readme, "### A production fleet file", "toml");
    let dir = tempfile::tempdir().expect("tempdir");
    let etc = dir.path().join("etc");
    for sub in ["tls", "secrets"] {
        std::fs::create_dir_all(etc.join(sub)).expect("mkdir");
    }
    // Each CA writes `<name>-ca.pem` where it is made; the README names them as below.
    let pg = TestCa::new(&etc, "pg");
    let (pg_cert, pg_key) = pg.issue("pg-client", &["flowscale"]);
    let flink = TestCa::new(&etc.join("tls"), "prod");
    let (flink_cert, flink_key) = flink.issue("flowscale", &["flowscale"]);
    let (server_cert, server_key) = flink.issue("server", &["flowscale.internal"]);
    assert_eq!(pg_cert, etc.join("pg-client.pem"));
    assert_eq!(pg_key, etc.join("pg-client.key"));
    assert_eq!(flink_cert, etc.join("tls/flowscale.pem"));
    assert_eq!(flink_key, etc.join("tls/flowscale.key"));
    assert_eq!(server_cert, etc.join("tls/server.pem"));
    assert_eq!(server_key, etc.join("tls/server.key"));
    write_private(&etc.join("api.token"), "a-token-of-32-characters-or-more\n");

    let file = dir.path().join("fleet.toml");
    let text = fleet.replace("/etc/flowscale/", &format!("{}/", etc.display()));
    assert_ne!(
        text, fleet,
        "the README's file names files under /etc/flowscale"
    );
    std::fs::write(&file, &text).expect("write the fleet file");
    let file = file.to_string_lossy().to_string();
    validates_cleanly(&["validate", &file], "the README's production fleet file");

    // And it reads the files: a token others may read is an error of this very file.
    std::fs::set_permissions(
        etc.join("api.token"),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .expect("chmod");
    let out = crate::harness::Cli::new(["validate", &file]).run();
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("chmod 600"), "{}", out.stdout);
}

/// The entry using all three plugin kinds (docs/writing-modes.md) is one `flowscale validate` accepts with the
/// example plugins it names: every key a real key, every class an id they export, every
/// parameter one they take.
#[test]
fn the_readme_entry_with_all_three_kinds_is_valid() {
    let readme = repo_file("docs/writing-modes.md");
    let entry = block_after(
        &readme,
        "## Metric evaluators and scaling executors",
        "toml",
    );
    for key in [
        "scaling.alignment.mode.buckets.class",
        "metrics.custom-evaluator.slo.class",
        "scaling.custom-executor.freeze.class",
        "scaling.custom-executor.steps.class",
    ] {
        assert!(entry.contains(key), "the entry sets {key}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(repo_root().join("examples/jobs"), dir.path().join("jobs"))
        .expect("link the jobs");
    let file = dir.path().join("fleet.toml");
    std::fs::write(&file, &entry).expect("write the fleet file");
    let plugins = crate::kinds::kinds_plugins();
    validates_cleanly(
        &[
            "validate",
            &file.to_string_lossy(),
            "--plugins",
            &plugins.path().to_string_lossy(),
        ],
        "the entry with all three kinds",
    );
}

/// `flowscale <args>` (a `validate`) accepts `what` without a warning.
fn validates_cleanly(args: &[&str], what: &str) {
    let out = crate::harness::Cli::new(args).run();
    assert_eq!(
        out.code, 0,
        "validate refuses {what}:\n{}{}",
        out.stdout, out.stderr
    );
    assert!(
        !format!("{}{}", out.stdout, out.stderr).contains("warning"),
        "validate warns about {what}:\n{}{}",
        out.stdout,
        out.stderr
    );
}

/// The anchor GitHub gives a heading: lower case, letters, digits, `-` and `_` kept, every other
/// character (punctuation, backticks) dropped, and each space made a `-`.
fn github_anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Whether `line` opens or closes a fenced code block.
fn is_fence(line: &str) -> bool {
    line.trim_start().starts_with("```")
}

/// The anchors of every heading of a Markdown text outside code blocks; a repeated heading gets
/// `-1`, `-2`, ... as on GitHub.
fn heading_anchors(text: &str) -> std::collections::HashSet<String> {
    let mut seen = std::collections::HashMap::<String, usize>::new();
    let mut anchors = std::collections::HashSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if is_fence(line) {
            fenced = !fenced;
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if fenced || !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let title = line[hashes..].trim().trim_end_matches('#').trim_end();
        let anchor = github_anchor(title);
        let n = seen.entry(anchor.clone()).or_insert(0);
        anchors.insert(if *n == 0 {
            anchor
        } else {
            format!("{anchor}-{n}")
        });
        *n += 1;
    }
    anchors
}

/// `line` without its inline code spans (a `[x](y)` inside backticks is not a link).
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('`') {
        let Some(close) = rest[open + 1..].find('`') else {
            break;
        };
        out.push_str(&rest[..open]);
        rest = &rest[open + 1 + close + 1..];
    }
    out.push_str(rest);
    out
}

/// The link targets of a Markdown text outside code, with their line numbers.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut links = Vec::new();
    let mut fenced = false;
    for (number, line) in text.lines().enumerate() {
        if is_fence(line) {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let line = without_code_spans(line);
        for (at, _) in line.match_indices("](") {
            let target: String = line[at + 2..]
                .chars()
                .take_while(|c| *c != ')' && !c.is_whitespace())
                .collect();
            if !target.is_empty() {
                links.push((number + 1, target));
            }
        }
    }
    links
}

/// Every relative link of `files` that leads nowhere: to a file that does not exist, or to an
/// `#anchor` that no heading of its Markdown file has. Returns the number of relative links
/// checked and one line per dead link.
fn dead_links(files: &[std::path::PathBuf]) -> (usize, Vec<String>) {
    let mut checked = 0;
    let mut dead = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        for (line, target) in link_targets(&text) {
            let scheme = target
                .split_once(':')
                .is_some_and(|(s, _)| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphabetic()));
            if scheme {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((target.as_str(), ""));
            let linked = if path.is_empty() {
                file.clone()
            } else {
                file.parent().expect("a file's directory").join(path)
            };
            let place = format!("{}:{line}: `{target}`", file.display());
            if !linked.exists() {
                dead.push(format!("{place}: no file {}", linked.display()));
                continue;
            }
            if anchor.is_empty() || linked.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let page = std::fs::read_to_string(&linked).expect("the linked page");
            if !heading_anchors(&page).contains(anchor) {
                dead.push(format!(
                    "{place}: no heading #{anchor} in {}",
                    linked.display()
                ));
            }
        }
    }
    (checked, dead)
}

/// Sections move between the README and the docs pages; no link of README.md, docs/*.md or the
/// READMEs of flink/ and sdk/ may be left pointing at a file or a heading that is no longer there.
#[test]
fn readme_and_docs_links_resolve() {
    let root = repo_root();
    // The READMEs of flink/ and sdk/ link into the docs too.
    let mut files = vec![
        root.join("README.md"),
        root.join("flink/README.md"),
        root.join("sdk/README.md"),
    ];
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("a docs entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    assert!(docs.len() >= 10, "the docs pages: {docs:?}");
    files.extend(docs);
    let (checked, dead) = dead_links(&files);
    // The README alone links to every docs page it summarizes: a parser that finds no links
    // would pass vacuously.
    assert!(checked > 100, "only {checked} relative links found");
    assert!(dead.is_empty(), "dead links:\n{}", dead.join("\n"));
}

/// The checker itself: on pages made for it, it reports exactly the links that lead nowhere
/// by the rules above (code is not linked, a repeated heading is `-1`).
#[test]
fn dead_links_are_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dir.path().join("a.md");
    std::fs::write(
        &a,
        "# Title One\n\
         ## Sub `code` part: x\n\
         ## Twice\n\
         ## Twice\n\
         [ok](#title-one) [ok](b.md#b-heading) [ok](#sub-code-part-x) [ok](#twice-1)\n\
         [ok](b.md) [web](https://example.com/c.md#nowhere) `[code](#in-code)`\n\
         [bad](#nope) [bad](c.md) [bad](b.md#missing) [bad](#twice-2)\n\
         ```\n\
         # Fenced\n\
         [fenced](#in-fence)\n\
         ```\n\
         [bad](#fenced)\n",
    )
    .expect("write a.md");
    std::fs::write(dir.path().join("b.md"), "# B heading\n").expect("write b.md");
    let (checked, dead) = dead_links(&[a]);
    assert_eq!(checked, 10, "{dead:?}");
    let targets: Vec<&str> = dead
        .iter()
        .map(|d| d.split('`').nth(1).expect("the target in backticks"))
        .collect();
    assert_eq!(
        targets,
        ["#nope", "c.md", "b.md#missing", "#twice-2", "#fenced"],
        "{dead:#?}"
    );
}
