//! Flink's duration syntax: `300s`, `30 s`, `5 min`, `1h`, `2 d`, `250ms`; a plain number is
//! milliseconds.

use std::time::Duration;

/// Why a text is not a duration. Each message quotes the text and says what would be valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DurationError {
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
pub(crate) fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let (number, unit) =
        number_and_unit(text).ok_or_else(|| DurationError::NotADuration(text.to_string()))?;
    let value: u64 = number
        .parse()
        .map_err(|_| DurationError::NumberTooLarge(text.to_string()))?;
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

/// The leading digits of `text` (trimmed) and the unit after them, trimmed and lower-cased,
/// as Flink's duration and memory size parsers split a value; `None` without leading digits.
pub(crate) fn number_and_unit(text: &str) -> Option<(&str, String)> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    (!number.is_empty()).then(|| (number, unit.trim().to_ascii_lowercase()))
}

/// The longest duration any option accepts: a year. Nothing flowscale waits for is meant to be
/// longer, and a value like `3000 d` is a typo (or a unit mix-up) that would otherwise silently
/// stop a job from ever deciding.
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// The valid range of a duration option: `min..=max`, so that a value that would stall the
/// autoscaler (a zero window, a busy loop, an interval of centuries) is refused with the range
/// in the message instead of being accepted silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DurationRange {
    /// The shortest valid value.
    pub(crate) min: Duration,
    /// The longest valid value.
    pub(crate) max: Duration,
    /// What zero means, when zero is valid and has a meaning of its own (e.g. "disables the
    /// delay"), so that the message says so.
    pub(crate) zero_means: Option<&'static str>,
}

impl DurationRange {
    /// Strictly positive, at most [`MAX_DURATION`].
    pub(crate) const POSITIVE: DurationRange = DurationRange {
        min: Duration::from_millis(1),
        max: MAX_DURATION,
        zero_means: None,
    };

    /// Zero (with its meaning) up to [`MAX_DURATION`].
    pub(crate) const fn zero_or_up_to_a_year(zero_means: &'static str) -> DurationRange {
        DurationRange {
            min: Duration::ZERO,
            max: MAX_DURATION,
            zero_means: Some(zero_means),
        }
    }

    /// `Ok` when `d` lies in the range, else what would be valid.
    pub(crate) fn check(&self, d: Duration) -> Result<(), String> {
        if (self.min..=self.max).contains(&d) {
            Ok(())
        } else {
            Err(format!("out of range (valid: {self})"))
        }
    }
}

impl std::fmt::Display for DurationRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.min.is_zero() {
            write!(f, "0 to {}", describe(self.max))?;
        } else if self.min == Duration::from_millis(1) {
            write!(f, "greater than 0 and at most {}", describe(self.max))?;
        } else {
            write!(f, "{} to {}", describe(self.min), describe(self.max))?;
        }
        if let Some(zero) = self.zero_means {
            write!(f, "; 0 {zero}")?;
        }
        Ok(())
    }
}

/// A bound in the largest whole unit that expresses it (`365d`, `100ms`), for messages.
pub(crate) fn describe(d: Duration) -> String {
    const DAY: u64 = 24 * 60 * 60;
    let secs = d.as_secs();
    if d.subsec_nanos() != 0 || secs == 0 {
        format!("{}ms", d.as_millis())
    } else if secs % DAY == 0 {
        format!("{}d", secs / DAY)
    } else if secs % 3600 == 0 {
        format!("{}h", secs / 3600)
    } else if secs % 60 == 0 {
        format!("{}min", secs / 60)
    } else {
        format!("{secs}s")
    }
}

/// Formats a duration compactly (`300s`, `1500ms`, `5min` style is not attempted).
pub(crate) fn format_duration(d: Duration) -> String {
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
    fn ranges_name_their_bounds() {
        assert_eq!(
            DurationRange::POSITIVE.check(Duration::from_millis(1)),
            Ok(())
        );
        assert_eq!(DurationRange::POSITIVE.check(MAX_DURATION), Ok(()));
        let zero = DurationRange::POSITIVE.check(Duration::ZERO).unwrap_err();
        assert_eq!(
            zero,
            "out of range (valid: greater than 0 and at most 365d)"
        );
        // 3,000 years, the kind of value a unit mix-up produces.
        let ages = Duration::from_secs(3000 * 365 * 24 * 3600);
        assert!(DurationRange::POSITIVE.check(ages).is_err());
        let off = DurationRange::zero_or_up_to_a_year("disables it");
        assert_eq!(off.check(Duration::ZERO), Ok(()));
        assert_eq!(
            off.check(MAX_DURATION + Duration::from_millis(1))
                .unwrap_err(),
            "out of range (valid: 0 to 365d; 0 disables it)"
        );
        let host = DurationRange {
            min: Duration::from_millis(100),
            max: MAX_DURATION,
            zero_means: None,
        };
        assert_eq!(host.to_string(), "100ms to 365d");
    }

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
