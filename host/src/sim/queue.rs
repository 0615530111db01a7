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
///
/// Almost every channel holds records only, and adjacent batches merge, so such a channel is
/// one number: `items` stays empty and `records` is its content. Only once a marker or an
/// end-of-input is in the channel does `items` hold the whole content as tokens, until the
/// channel is down to records again. A tick pops and pushes every channel of the job, so the
/// common case costs no token queue at all.
#[derive(Debug, Clone, Default)]
pub(crate) struct Queue {
    /// Empty: the channel is `records` records. Otherwise: the channel's tokens, in order.
    items: VecDeque<Token>,
    records: u64,
}

impl Queue {
    /// Records waiting in the queue.
    #[inline]
    pub(crate) fn records(&self) -> u64 {
        self.records
    }

    /// True when nothing at all (records, markers, end) is waiting.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty() && self.records == 0
    }

    /// Appends `n` records (merged into a trailing batch).
    #[inline]
    pub(crate) fn push_records(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        self.records += n;
        if self.items.is_empty() {
            return;
        }
        if let Some(Token::Records(last)) = self.items.back_mut() {
            *last += n;
        } else {
            self.items.push_back(Token::Records(n));
        }
    }

    /// Appends a marker.
    pub(crate) fn push_marker(&mut self) {
        self.push_token(Token::Marker);
    }

    /// Appends end-of-input.
    pub(crate) fn push_end(&mut self) {
        self.push_token(Token::End);
    }

    /// Appends a marker or an end, switching a records-only channel to tokens.
    fn push_token(&mut self, token: Token) {
        if self.items.is_empty() && self.records > 0 {
            self.items.push_back(Token::Records(self.records));
        }
        self.items.push_back(token);
    }

    /// Takes up to `n` records in order, passing markers between them, and then any markers and
    /// end-of-input that are at the front (they cost nothing to process).
    #[inline]
    pub(crate) fn pop(&mut self, n: u64) -> Popped {
        if self.items.is_empty() {
            let take = self.records.min(n);
            self.records -= take;
            return Popped {
                records: take,
                markers: 0,
                end: false,
            };
        }
        self.pop_tokens(n)
    }

    /// [`Queue::pop`] of a channel that holds markers or an end.
    fn pop_tokens(&mut self, n: u64) -> Popped {
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
        // Down to records only (one batch at most, as batches merge): back to a number.
        if self.items.len() == 1 && matches!(self.items.front(), Some(Token::Records(_))) {
            self.items.clear();
        }
        popped
    }

    /// Drains the whole queue into a list of tokens, oldest first.
    pub(crate) fn drain(&mut self) -> Vec<Token> {
        let records = std::mem::take(&mut self.records);
        if self.items.is_empty() {
            return if records > 0 {
                vec![Token::Records(records)]
            } else {
                Vec::new()
            };
        }
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
    fn a_channel_goes_from_records_to_tokens_and_back_without_losing_order() {
        let mut q = Queue::default();
        q.push_records(5);
        assert_eq!(q.pop(2).records, 2);
        q.push_marker();
        q.push_records(4);
        assert_eq!(q.records(), 7);
        // The 3 records before the marker, the marker, then 1 of the 4 after it.
        assert_eq!(
            q.pop(4),
            Popped {
                records: 4,
                markers: 1,
                end: false
            }
        );
        // Records only again: they merge with what comes next.
        q.push_records(2);
        assert_eq!(q.drain(), vec![Token::Records(5)]);
        assert!(q.is_empty());
        q.push_end();
        assert!(!q.is_empty());
        assert_eq!(
            q.pop(0),
            Popped {
                records: 0,
                markers: 0,
                end: true
            }
        );
        assert!(q.is_empty());
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
