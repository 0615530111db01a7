//! Running the binary: a small builder over `std::process::Command`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The `flowscale` command line under test.
pub(crate) fn flowscale_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_flowscale-dup"))
}

/// A plugins directory holding the fixture plugin whose modes crash, spin or misbehave
/// otherwise (built first), as `libmisbehaving.so`.
pub(crate) fn misbehaving_plugins() -> tempfile::TempDir {
    let profile = flowscale_tests::build(&["fixture-misbehaving"]);
    flowscale_tests::plugins_dir(&[(
        &flowscale_tests::plugin_file(&profile, "fixture-misbehaving"),
        "libmisbehaving.so",
    )])
}

/// The repository root (for example configs and plugins).
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf()
}

/// One invocation.
#[derive(Debug, Default)]
pub(crate) struct Cli {
    args: Vec<String>,
    stdin: Option<Vec<u8>>,
    cwd: Option<PathBuf>,
}

/// What an invocation produced.
#[derive(Debug)]
pub(crate) struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// The stdout lines parsed as JSON.
    pub(crate) fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
            .collect()
    }
    /// The whole stdout parsed as one JSON value.
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON: {e}\n{}", self.stdout))
    }
}

impl Cli {
    pub(crate) fn new<I: IntoIterator<Item = S>, S: AsRef<str>>(args: I) -> Cli {
        Cli {
            args: args.into_iter().map(|s| s.as_ref().to_string()).collect(),
            ..Cli::default()
        }
    }
    /// Bytes for stdin: text, or bytes that are not UTF-8 for the tests of unreadable input.
    pub(crate) fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Cli {
        self.stdin = Some(bytes.into());
        self
    }
    pub(crate) fn cwd(mut self, dir: impl Into<PathBuf>) -> Cli {
        self.cwd = Some(dir.into());
        self
    }
    pub(crate) fn run(self) -> Output {
        let mut command = Command::new(flowscale_bin());
        command
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env_remove("FLOWSCALE_PLUGINS_DIR")
            .env_remove("FLOWSCALE_LOG");
        if let Some(dir) = &self.cwd {
            command.current_dir(dir);
        }
        let mut child = command.spawn().expect("run flowscale");
        {
            let mut stdin = child.stdin.take().expect("stdin");
            if let Some(bytes) = &self.stdin {
                // A command that exits without reading stdin (a refused command line) closes
                // the pipe early; that is its answer to check, not a failure of the harness.
                match stdin.write_all(bytes) {
                    Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
                        panic!("write stdin: {err}")
                    }
                    _ => {}
                }
            }
        }
        let out = child.wait_with_output().expect("wait for flowscale");
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}
