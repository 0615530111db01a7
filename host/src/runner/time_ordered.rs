//! The readable log of jobs on virtual clocks, printed in engine-time order across jobs once
//! they are done, in bounded memory.
//!
//! Simulated jobs run far faster than real time, each on its own, so their lines arrive
//! interleaved in whatever order the jobs happen to run; a person reads them by simulated time.
//! Holding every line until the end costs memory in proportion to the simulated time, so the
//! log is an external merge sort: lines are held up to a budget, then sorted and spilled to an
//! anonymous temporary file (a sorted run), and at the end the runs and what is still held are
//! merged. Lines of the same instant are ordered by job, then by arrival.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};

/// How much text the log holds in memory before it spills a sorted run to disk.
pub(crate) const DEFAULT_HOLD_BYTES: usize = 4 << 20;

/// One job's output for one instant.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    at_ms: i64,
    job: String,
    /// Arrival order: keeps the lines of one job at one instant in the order they came.
    seq: u64,
    text: Vec<u8>,
}

impl Entry {
    fn size(&self) -> usize {
        self.job.len() + self.text.len() + 32
    }

    fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(&self.at_ms.to_le_bytes())?;
        out.write_all(&self.seq.to_le_bytes())?;
        write_bytes(out, self.job.as_bytes())?;
        write_bytes(out, &self.text)
    }

    /// The next entry of a run, `None` at its end.
    fn read_from(input: &mut impl Read) -> io::Result<Option<Entry>> {
        let mut at = [0u8; 8];
        match input.read_exact(&mut at) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let mut seq = [0u8; 8];
        input.read_exact(&mut seq)?;
        let job = String::from_utf8(read_bytes(input)?)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok(Some(Entry {
            at_ms: i64::from_le_bytes(at),
            job,
            seq: u64::from_le_bytes(seq),
            text: read_bytes(input)?,
        }))
    }
}

fn write_bytes(out: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    out.write_all(&len.to_le_bytes())?;
    out.write_all(bytes)
}

fn read_bytes(input: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 8];
    input.read_exact(&mut len)?;
    let len = usize::try_from(u64::from_le_bytes(len))
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut bytes = vec![0u8; len];
    input.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// Lines of jobs on virtual clocks, written out in engine-time order by [`TimeOrderedLog::finish`].
#[derive(Debug)]
pub(crate) struct TimeOrderedLog {
    hold_bytes: usize,
    held: Vec<Entry>,
    held_size: usize,
    runs: Vec<File>,
    next_seq: u64,
    /// Spilling failed once (no temporary directory, disk full): hold everything from then on.
    spill_failed: bool,
}

impl TimeOrderedLog {
    /// A log holding up to about `hold_bytes` of text in memory at a time.
    pub(crate) fn new(hold_bytes: usize) -> TimeOrderedLog {
        TimeOrderedLog {
            hold_bytes,
            held: Vec::new(),
            held_size: 0,
            runs: Vec::new(),
            next_seq: 0,
            spill_failed: false,
        }
    }

    /// Adds `text` (whole lines) that `job` wrote at `at_ms`; nothing for empty text.
    pub(crate) fn push(&mut self, at_ms: i64, job: &str, text: Vec<u8>) {
        if text.is_empty() {
            return;
        }
        let entry = Entry {
            at_ms,
            job: job.to_string(),
            seq: self.next_seq,
            text,
        };
        self.next_seq += 1;
        self.held_size += entry.size();
        self.held.push(entry);
        if self.held_size > self.hold_bytes && !self.spill_failed {
            if let Err(err) = self.spill() {
                // The log still comes out whole, only from memory.
                tracing::warn!("cannot spill the simulated jobs' log to a temporary file: {err}");
                self.spill_failed = true;
            }
        }
    }

    /// Sorted runs spilled to disk so far.
    #[cfg(test)]
    pub(crate) fn spilled_runs(&self) -> usize {
        self.runs.len()
    }

    /// Sorts what is held and writes it to a new anonymous temporary file.
    fn spill(&mut self) -> io::Result<()> {
        self.held.sort_unstable();
        let mut file = BufWriter::new(tempfile::tempfile()?);
        for entry in &self.held {
            entry.write_to(&mut file)?;
        }
        let mut file = file.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.rewind()?;
        self.runs.push(file);
        self.held.clear();
        self.held_size = 0;
        Ok(())
    }

    /// Writes every line, in order of time, then job, then arrival, to `out`.
    pub(crate) fn finish(mut self, out: &mut impl Write) -> io::Result<()> {
        self.held.sort_unstable();
        let mut sources: Vec<Box<dyn Iterator<Item = io::Result<Entry>>>> = Vec::new();
        for file in self.runs {
            let mut reader = BufReader::new(file);
            sources.push(Box::new(std::iter::from_fn(move || {
                Entry::read_from(&mut reader).transpose()
            })));
        }
        sources.push(Box::new(self.held.into_iter().map(Ok)));
        // A min-heap of the next entry of every source.
        let mut heads = BinaryHeap::new();
        for (i, source) in sources.iter_mut().enumerate() {
            if let Some(entry) = source.next().transpose()? {
                heads.push(Reverse((entry, i)));
            }
        }
        while let Some(Reverse((entry, i))) = heads.pop() {
            out.write_all(&entry.text)?;
            if let Some(next) = sources[i].next().transpose()? {
                heads.push(Reverse((next, i)));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines of three jobs arriving out of order, with ties on time and on (time, job).
    fn arrivals() -> Vec<(i64, &'static str, String)> {
        let mut lines = Vec::new();
        for step in 0..200i64 {
            // Job c runs ahead, job a behind: arrival order is not time order.
            lines.push(((step * 7) % 50 * 1000, "c", format!("c{step}\n")));
            lines.push(((step * 3) % 50 * 1000, "a", format!("a{step}\n")));
            lines.push(((step * 3) % 50 * 1000, "a", format!("a{step}-second\n")));
            lines.push((step % 50 * 1000, "b", format!("b{step}\n")));
        }
        lines
    }

    /// The order `finish` must produce, by a stable sort on (time, job) of the arrivals.
    fn expected(lines: &[(i64, &str, String)]) -> String {
        let mut sorted = lines.to_vec();
        sorted.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        sorted.into_iter().map(|(_, _, text)| text).collect()
    }

    fn written(log: TimeOrderedLog) -> String {
        let mut out = Vec::new();
        log.finish(&mut out).expect("writes to memory");
        String::from_utf8(out).expect("the lines were UTF-8")
    }

    #[test]
    fn lines_come_out_by_time_then_job_then_arrival_without_spilling() {
        let lines = arrivals();
        let mut log = TimeOrderedLog::new(usize::MAX);
        for (at, job, text) in &lines {
            log.push(*at, job, text.clone().into_bytes());
        }
        assert_eq!(log.spilled_runs(), 0);
        assert_eq!(written(log), expected(&lines));
    }

    #[test]
    fn spilled_runs_merge_into_the_same_order() {
        let lines = arrivals();
        // Each entry costs over 32 bytes: a run every ten entries or so.
        let mut log = TimeOrderedLog::new(400);
        for (at, job, text) in &lines {
            log.push(*at, job, text.clone().into_bytes());
        }
        assert!(log.spilled_runs() > 20, "{} runs", log.spilled_runs());
        assert_eq!(written(log), expected(&lines));
    }

    #[test]
    fn empty_text_is_not_an_entry() {
        let mut log = TimeOrderedLog::new(0);
        log.push(5, "a", Vec::new());
        assert_eq!(log.spilled_runs(), 0);
        assert_eq!(written(log), "");
    }
}
