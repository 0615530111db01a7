//! Flink's duration syntax, as the host's configuration reads it: a whole number and an optional
//! unit (`30 s`, `5 min`, `1h`, `2 d`, `250ms`); a plain number is milliseconds. Kept here
//! rather than shared with the host so that a plugin depends on the SDK alone.

use std::time::Duration;

/// Why a text is not a duration; each message quotes the text and says what would be valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// No whole number at the start, or one too large.
    #[error(
        "`{0}` is not a duration (expected a whole number and a unit: 30 s, 5 min, 1 h, 2 d; a plain number is milliseconds)"
    )]
    Malformed(String),
    /// A unit Flink does not know.
    #[error("`{0}`: unknown time unit (valid: ms, s, min, h, d, and their long forms)")]
    UnknownUnit(String),
}

/// Milliseconds per unit, by every spelling Flink accepts for the units a drain time uses.
const UNITS: &[(&[&str], u64)] = &[
    (
        &["", "ms", "milli", "millis", "millisecond", "milliseconds"],
        1,
    ),
    (&["s", "sec", "secs", "second", "seconds"], 1_000),
    (&["m", "min", "mins", "minute", "minutes"], 60_000),
    (&["h", "hour", "hours"], 3_600_000),
    (&["d", "day", "days"], 86_400_000),
];

/// Parses `text` (case-insensitive unit, blanks allowed around and between the parts).
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let malformed = || DurationError::Malformed(text.to_string());
    let trimmed = text.trim();
    let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
    let amount: u64 = trimmed[..digits].parse().map_err(|_| malformed())?;
    let unit = trimmed[digits..].trim().to_ascii_lowercase();
    let per_unit = UNITS
        .iter()
        .find(|(names, _)| names.contains(&unit.as_str()))
        .map(|(_, ms)| *ms)
        .ok_or_else(|| DurationError::UnknownUnit(text.to_string()))?;
    let ms = amount.checked_mul(per_unit).ok_or_else(malformed)?;
    Ok(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_flink_spellings() {
        let secs = Duration::from_secs;
        assert_eq!(parse_duration("30 s"), Ok(secs(30)));
        assert_eq!(parse_duration("5 min"), Ok(secs(300)));
        assert_eq!(parse_duration("5m"), Ok(secs(300)));
        assert_eq!(parse_duration(" 1 H "), Ok(secs(3600)));
        assert_eq!(parse_duration("2 days"), Ok(secs(2 * 86_400)));
        assert_eq!(parse_duration("1500"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    }

    #[test]
    fn refuses_what_flink_refuses() {
        for bad in ["", "s", "-5 s", "99999999999999999999 ms"] {
            assert_eq!(
                parse_duration(bad),
                Err(DurationError::Malformed(bad.to_string())),
                "{bad}"
            );
        }
        let err = parse_duration("5 weeks").expect_err("unknown unit");
        assert!(err.to_string().contains("unknown time unit"), "{err}");
        assert!(parse_duration("1.5 s").is_err(), "whole numbers only");
        // 2^64 ms overflows once multiplied by the unit.
        assert!(parse_duration("18446744073709551 d").is_err());
    }
}
