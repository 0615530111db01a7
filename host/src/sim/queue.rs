//! Per-channel FIFO queues of record batches, termination markers and end-of-input.
//!
//! The simulator moves counts of records, but markers must stay in order with the records around
//! them (a marker overtaking a record would let termination detection fire early), so a channel
//! is a FIFO of tokens where adjacent record batches merge.

use std::collections::VecDeque;

/// One item in a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Token {
    /// A batch of records.
    Records(u64),
    /// An iteration-termination marker.
    Marker,
    /// The upstream vertex finished: nothing follows.
    End,
}

/// What one pop took out of a queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Popped {
    /// Records taken.
    pub(crate) records: u64,
    /// Markers passed.
    pub(crate) markers: u64,
    /// True when end-of-input was reached.
    pub(crate) end: bool,
}

/// A FIFO channel.
#[derive(Debug, Clone, Default)]
pub(crate) struct Queue {
    items: VecDeque<Token>,
    records: u64,
}

impl Queue {
    /// Records waiting in the queue.
    pub(crate) fn records(&self) -> u64 {
        self.records
    }

    /// True when nothing at all (records, markers, end) is waiting.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Appends `n` records (merged into a trailing batch).
    pub(crate) fn push_records(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        self.records += n;
        if let Some(Token::Records(last)) = self.items.back_mut() {
            *last += n;
        } else {
            self.items.push_back(Token::Records(n));
        }
    }

    /// Appends a marker.
    pub(crate) fn push_marker(&mut self) {
        self.items.push_back(Token::Marker);
    }

    /// Appends end-of-input.
    pub(crate) fn push_end(&mut self) {
        self.items.push_back(Token::End);
    }

    /// Takes up to `n` records in order, passing markers between them, and then any markers and
    /// end-of-input that are at the front (they cost nothing to process).
    pub(crate) fn pop(&mut self, n: u64) -> Popped {
        let mut popped = Popped::default();
        let mut budget = n;
        while let Some(front) = self.items.front_mut() {
            match front {
                Token::Records(batch) => {
                    if budget == 0 {
                        break;
                    }
                    let take = (*batch).min(budget);
                    *batch -= take;
                    budget -= take;
                    popped.records += take;
                    if *batch == 0 {
                        self.items.pop_front();
                    }
                }
                Token::Marker => {
                    popped.markers += 1;
                    self.items.pop_front();
                }
                Token::End => {
                    popped.end = true;
                    self.items.pop_front();
                    break;
                }
            }
        }
        self.records -= popped.records;
        popped
    }

    /// Drains the whole queue into a list of tokens, oldest first.
    pub(crate) fn drain(&mut self) -> Vec<Token> {
        self.records = 0;
        self.items.drain(..).collect()
    }

    /// Removes every marker, keeping records and end-of-input in order (a restart begins a fresh
    /// termination round).
    pub(crate) fn clear_markers(&mut self) {
        let tokens: Vec<Token> = self.drain();
        for token in tokens {
            match token {
                Token::Records(n) => self.push_records(n),
                Token::Marker => {}
                Token::End => self.push_end(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_merge_and_markers_keep_their_place() {
        let mut q = Queue::default();
        q.push_records(3);
        q.push_records(2);
        q.push_marker();
        q.push_records(4);
        assert_eq!(q.records(), 9);
        let p = q.pop(4);
        assert_eq!(
            p,
            Popped {
                records: 4,
                markers: 0,
                end: false
            }
        );
        let p = q.pop(1);
        // The marker sits right behind the fifth record and is passed for free.
        assert_eq!(
            p,
            Popped {
                records: 1,
                markers: 1,
                end: false
            }
        );
        let p = q.pop(10);
        assert_eq!(
            p,
            Popped {
                records: 4,
                markers: 0,
                end: false
            }
        );
        assert!(q.is_empty());
    }

    #[test]
    fn end_is_reached_only_after_all_records() {
        let mut q = Queue::default();
        q.push_records(2);
        q.push_end();
        assert!(!q.pop(1).end);
        let p = q.pop(0);
        assert_eq!(p.records, 0);
        assert!(!p.end, "a record is still in front of the end");
        let p = q.pop(5);
        assert_eq!((p.records, p.end), (1, true));
        assert_eq!(q.records(), 0);
    }

    #[test]
    fn clearing_markers_keeps_records_and_end() {
        let mut q = Queue::default();
        q.push_records(2);
        q.push_marker();
        q.push_records(1);
        q.push_end();
        q.clear_markers();
        assert_eq!(q.drain(), vec![Token::Records(3), Token::End]);
    }
}
