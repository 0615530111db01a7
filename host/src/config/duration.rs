//! Flink's duration syntax: `300s`, `30 s`, `5 min`, `1h`, `2 d`, `250ms`; a plain number is
//! milliseconds.

use std::time::Duration;

/// Why a text is not a duration. Each message quotes the text and says what would be valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// No number at the start.
    #[error(
        "`{0}` is not a duration (expected a number with an optional unit, e.g. 300s, 5 min, 1h; a plain number is milliseconds)"
    )]
    NotADuration(String),
    /// The number does not fit in 64 bits.
    #[error("`{0}`: the number is too large")]
    NumberTooLarge(String),
    /// A unit Flink does not know.
    #[error("`{text}`: unknown time unit `{unit}` (valid: ms, s, min, h, d, and their long forms)")]
    UnknownUnit {
        /// The whole text.
        text: String,
        /// The unit as written, lower-cased.
        unit: String,
    },
    /// More seconds than a `Duration` holds.
    #[error("`{0}`: the duration is too large")]
    TooLarge(String),
}

/// Parses a duration the way Flink's `TimeUtils.parseDuration` does.
///
/// Units (case-insensitive): `ns`, `us`/`µs`, `ms`, `s`/`sec`/`secs`/`second`/`seconds`,
/// `m`/`min`/`mins`/`minute`/`minutes`, `h`/`hour`/`hours`, `d`/`day`/`days`; no unit means ms.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    if number.is_empty() {
        return Err(DurationError::NotADuration(text.to_string()));
    }
    let value: u64 = number
        .parse()
        .map_err(|_| DurationError::NumberTooLarge(text.to_string()))?;
    let unit = unit.trim().to_ascii_lowercase();
    let nanos_per_unit: u128 = match unit.as_str() {
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => 1_000_000,
        "ns" | "nano" | "nanos" | "nanosecond" | "nanoseconds" => 1,
        "us" | "µs" | "micro" | "micros" | "microsecond" | "microseconds" => 1_000,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000_000_000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000_000_000,
        "h" | "hour" | "hours" => 3_600_000_000_000,
        "d" | "day" | "days" => 86_400_000_000_000,
        _ => {
            return Err(DurationError::UnknownUnit {
                text: text.to_string(),
                unit,
            });
        }
    };
    let nanos = u128::from(value) * nanos_per_unit;
    let secs = u64::try_from(nanos / 1_000_000_000)
        .map_err(|_| DurationError::TooLarge(text.to_string()))?;
    Ok(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}

/// Formats a duration compactly (`300s`, `1500ms`, `5min` style is not attempted).
pub fn format_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flink_spellings() {
        assert_eq!(parse_duration("300s"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("30 s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5 min"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("2 d"), Ok(Duration::from_secs(172_800)));
        assert_eq!(parse_duration("250"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("s").is_err());
        assert!(
            parse_duration("5 weeks")
                .unwrap_err()
                .to_string()
                .contains("unknown time unit")
        );
    }
}
