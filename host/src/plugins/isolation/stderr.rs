//! A worker's standard error: passed on to the host's, line by line, and watched for what
//! the exit status cannot tell.
//!
//! A Rust plugin that overflows its stack dies of SIGABRT, like one that calls `abort()`; the
//! only difference is the line the Rust runtime prints just before aborting
//! (`thread '...' has overflowed its stack`). The host reads the worker's stderr through a pipe
//! so that a fault can say "stack overflow" instead of a bare SIGABRT. Everything read is
//! written to the host's stderr unchanged, as when the worker inherited it.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the Rust runtime prints on a stack overflow, before it aborts.
const STACK_OVERFLOW_MARKER: &[u8] = b"has overflowed its stack";

/// The thread that forwards one worker's stderr, and what it saw.
pub(super) struct StderrWatch {
    overflowed: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StderrWatch {
    /// Starts forwarding `pipe` (the worker's stderr) to the host's stderr. If no thread can be
    /// started, the pipe is dropped: the worker then writes into a closed pipe, which it
    /// ignores (it never writes to stderr what the host needs to see to serve calls).
    pub(super) fn start(pipe: impl Read + Send + 'static) -> StderrWatch {
        StderrWatch::start_into(pipe, std::io::stderr())
    }

    /// [`StderrWatch::start`] writing into `sink` instead of the host's stderr.
    fn start_into(
        pipe: impl Read + Send + 'static,
        mut sink: impl Write + Send + 'static,
    ) -> StderrWatch {
        let overflowed = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&overflowed);
        let thread = std::thread::Builder::new()
            .name("plugin-worker-stderr".to_string())
            .spawn(move || forward(pipe, &mut sink, &seen))
            .map_err(|err| tracing::warn!(%err, "the plugin worker's stderr is not forwarded"))
            .ok();
        StderrWatch { overflowed, thread }
    }

    /// Whether the worker reported a stack overflow. Call after the worker exited: waits up to
    /// `grace` for the rest of its output (the end of the pipe) first.
    pub(super) fn stack_overflowed(&mut self, grace: Duration) -> bool {
        if let Some(thread) = self.thread.take() {
            let until = Instant::now() + grace;
            while !thread.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(2));
            }
            if thread.is_finished() {
                let _ = thread.join();
            } else {
                // Something else holds the pipe open; what was read so far has to do.
                self.thread = Some(thread);
            }
        }
        self.overflowed.load(Ordering::Relaxed)
    }
}

/// Copies `from` to `to` line by line until the end of `from`, setting `overflowed` when a line
/// carries the stack-overflow marker.
fn forward(from: impl Read, to: &mut impl Write, overflowed: &AtomicBool) {
    let mut reader = BufReader::new(from);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) => {
                if line
                    .windows(STACK_OVERFLOW_MARKER.len())
                    .any(|w| w == STACK_OVERFLOW_MARKER)
                {
                    overflowed.store(true, Ordering::Relaxed);
                }
                // The host's stderr failing is no reason to stop draining the worker's.
                let _ = to.write_all(&line);
                let _ = to.flush();
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_passed_on_unchanged_and_the_overflow_is_recognized() {
        let text: &[u8] = b"a log line\n\nthread '<unnamed>' has overflowed its stack\nfatal runtime error: stack overflow\nno newline at the end";
        let (mut out, seen) = (Vec::new(), AtomicBool::new(false));
        forward(text, &mut out, &seen);
        assert_eq!(out, text);
        assert!(seen.load(Ordering::Relaxed));
    }

    #[test]
    fn other_output_is_not_an_overflow() {
        let text: &[u8] = b"has overflowed\nits stack\n\xff\xfe not UTF-8\n";
        let (mut out, seen) = (Vec::new(), AtomicBool::new(false));
        forward(text, &mut out, &seen);
        assert_eq!(out, text);
        assert!(!seen.load(Ordering::Relaxed));
    }

    #[test]
    fn the_watch_reports_after_the_pipe_ends() {
        let overflow = &b"thread 'main' has overflowed its stack\n"[..];
        let mut watch = StderrWatch::start_into(overflow, std::io::sink());
        assert!(watch.stack_overflowed(Duration::from_secs(5)));
        let mut quiet = StderrWatch::start_into(&b"fine\n"[..], std::io::sink());
        assert!(!quiet.stack_overflowed(Duration::from_secs(5)));
    }
}
