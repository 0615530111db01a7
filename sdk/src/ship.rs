//! How records travel along an edge into a vertex: the input ship strategies an alignment mode sees.

use std::fmt;

/// The ship strategy of one input edge of a vertex, as Flink's job plan names it.
///
/// The set is fixed on purpose: adding a variant later would change the layout that every built
/// plugin was checked against, so every strategy the Flink autoscaler knows is here from the start, and
/// anything unrecognised reads as [`ShipStrategy::Unknown`].
#[repr(C, u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShipStrategy {
    /// `keyBy`: records are routed by key group.
    Hash,
    /// Round-robin over all downstream subtasks.
    Rebalance,
    /// Round-robin over a local subset of downstream subtasks.
    Rescale,
    /// One-to-one to the subtask with the same index.
    Forward,
    /// A user partitioner. `buckets` is the number of buckets it spreads records over
    /// (bucket `b` goes to subtask `b % p`), or 0 when the engine does not know it.
    Custom {
        /// Number of buckets of the custom partitioner; 0 means unknown.
        buckets: u32,
    },
    /// Every record to every downstream subtask.
    Broadcast,
    /// Everything to subtask 0.
    Global,
    /// Random.
    Shuffle,
    /// A strategy this version does not recognise.
    Unknown,
}

impl ShipStrategy {
    /// Parses a ship-strategy name case-insensitively, as the Flink autoscaler does; anything unrecognised
    /// is [`ShipStrategy::Unknown`]. `CUSTOM:48` (or `CUSTOM(48)`) carries a bucket count.
    pub fn parse(text: &str) -> ShipStrategy {
        let text = text.trim();
        let (name, arg) = match text.find([':', '(']) {
            Some(at) => (
                &text[..at],
                Some(text[at + 1..].trim_end_matches(')').trim()),
            ),
            None => (text, None),
        };
        // Compared in place rather than upper-cased into a new string: the host parses every
        // edge of every job in every cycle.
        let name = name.trim();
        let is = |known: &str| name.eq_ignore_ascii_case(known);
        if is("HASH") {
            ShipStrategy::Hash
        } else if is("REBALANCE") {
            ShipStrategy::Rebalance
        } else if is("RESCALE") {
            ShipStrategy::Rescale
        } else if is("FORWARD") {
            ShipStrategy::Forward
        } else if is("CUSTOM") {
            ShipStrategy::Custom {
                buckets: arg.and_then(|a| a.parse().ok()).unwrap_or(0),
            }
        } else if is("BROADCAST") {
            ShipStrategy::Broadcast
        } else if is("GLOBAL") {
            ShipStrategy::Global
        } else if is("SHUFFLE") {
            ShipStrategy::Shuffle
        } else {
            ShipStrategy::Unknown
        }
    }

    /// The upper-case name Flink uses for this strategy (without a bucket count).
    pub fn name(&self) -> &'static str {
        match self {
            ShipStrategy::Hash => "HASH",
            ShipStrategy::Rebalance => "REBALANCE",
            ShipStrategy::Rescale => "RESCALE",
            ShipStrategy::Forward => "FORWARD",
            ShipStrategy::Custom { .. } => "CUSTOM",
            ShipStrategy::Broadcast => "BROADCAST",
            ShipStrategy::Global => "GLOBAL",
            ShipStrategy::Shuffle => "SHUFFLE",
            ShipStrategy::Unknown => "UNKNOWN",
        }
    }

    /// The bucket count of a custom partitioner, when known.
    pub fn custom_buckets(&self) -> Option<u32> {
        match self {
            ShipStrategy::Custom { buckets } if *buckets > 0 => Some(*buckets),
            _ => None,
        }
    }
}

impl fmt::Display for ShipStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShipStrategy::Custom { buckets } if *buckets > 0 => write!(f, "CUSTOM:{buckets}"),
            other => f.write_str(other.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_case_insensitively_and_keeps_unknowns() {
        assert_eq!(ShipStrategy::parse("hash"), ShipStrategy::Hash);
        assert_eq!(ShipStrategy::parse(" Rebalance "), ShipStrategy::Rebalance);
        assert_eq!(ShipStrategy::parse("PARTIAL_HASH"), ShipStrategy::Unknown);
        assert_eq!(
            ShipStrategy::parse("custom:48"),
            ShipStrategy::Custom { buckets: 48 }
        );
        assert_eq!(
            ShipStrategy::parse("CUSTOM(7)"),
            ShipStrategy::Custom { buckets: 7 }
        );
        assert_eq!(
            ShipStrategy::parse("CUSTOM"),
            ShipStrategy::Custom { buckets: 0 }
        );
    }

    #[test]
    fn display_round_trips() {
        for s in [
            ShipStrategy::Hash,
            ShipStrategy::Custom { buckets: 48 },
            ShipStrategy::Custom { buckets: 0 },
            ShipStrategy::Global,
            ShipStrategy::Unknown,
        ] {
            assert_eq!(ShipStrategy::parse(&s.to_string()), s);
        }
    }
}
