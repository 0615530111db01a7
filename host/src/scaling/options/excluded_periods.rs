//! Excluded periods (`excluded.periods`, see docs/decision-pipeline.md#excluded-periods): times of day during which scaling
//! decisions are computed and reported but not executed.
//!
//! Supported: the Flink autoscaler's daily ranges `HH:mm[:ss[:SSS]]-HH:mm[:ss[:SSS]]`, inclusive at both
//! ends, evaluated in UTC (the Flink autoscaler uses the JVM's default time zone). Quartz cron expressions
//! are not supported and are refused as a configuration error; since two sub-expressions of the
//! same type may not be joined with `&&`, a valid expression is therefore a single daily range.

use std::fmt;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// One daily range, in milliseconds since midnight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DailyRange {
    /// Start of the range (inclusive).
    pub(crate) start_ms: i64,
    /// End of the range (inclusive).
    pub(crate) end_ms: i64,
}

impl DailyRange {
    /// Parses `start-end`; `start` must be before `end`.
    pub(crate) fn parse(text: &str) -> Option<DailyRange> {
        let (start, end) = text.trim().split_once('-')?;
        let start_ms = parse_time_of_day(start)?;
        let end_ms = parse_time_of_day(end)?;
        (start_ms < end_ms).then_some(DailyRange { start_ms, end_ms })
    }

    /// True when the time of day of `now_ms` (UTC) lies in the range.
    pub(crate) fn contains(&self, now_ms: i64) -> bool {
        let tod = now_ms.rem_euclid(DAY_MS);
        self.start_ms <= tod && tod <= self.end_ms
    }
}

/// `HH:mm[:ss[:SSS]]` as Quartz's `DailyCalendar` reads it.
fn parse_time_of_day(text: &str) -> Option<i64> {
    let parts: Vec<&str> = text.trim().split(':').collect();
    if !(2..=4).contains(&parts.len()) {
        return None;
    }
    let limits = [23, 59, 59, 999];
    let scale = [3_600_000, 60_000, 1_000, 1];
    let mut ms = 0i64;
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) || part.len() > 3 {
            return None;
        }
        let v: i64 = part.parse().ok()?;
        if v > limits[i] {
            return None;
        }
        ms += v * scale[i];
    }
    Some(ms)
}

/// Why an `excluded.periods` expression is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PeriodError {
    /// More than two sub-expressions joined with `&&`.
    #[error("`{0}` joins more than two sub-expressions with &&")]
    TooManyJoined(String),
    /// A Quartz cron expression, which is not supported.
    #[error(
        "`{0}` looks like a cron expression; cron expressions are not supported, use daily ranges HH:mm-HH:mm"
    )]
    Cron(String),
    /// Neither a daily range nor a cron expression.
    #[error(
        "`{0}` is not a daily range HH:mm[:ss[:SSS]]-HH:mm[:ss[:SSS]] with start before end (cron expressions are not supported)"
    )]
    NotADailyRange(String),
    /// Two daily ranges joined with `&&`.
    #[error("`{0}` joins two sub-expressions of the same type (daily ranges)")]
    SameTypeJoined(String),
}

/// The parsed `excluded.periods` list: the instant is excluded iff any range matches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExcludedPeriods {
    expressions: Vec<String>,
    ranges: Vec<DailyRange>,
}

impl ExcludedPeriods {
    /// Parses a `;`-separated list. Errors say which expression is wrong and why.
    pub(crate) fn parse(raw: &str) -> Result<ExcludedPeriods, PeriodError> {
        let mut ranges = Vec::new();
        let mut expressions = Vec::new();
        for expression in raw.split(';').map(str::trim).filter(|e| !e.is_empty()) {
            let subs: Vec<&str> = expression.split("&&").map(str::trim).collect();
            if subs.len() > 2 {
                return Err(PeriodError::TooManyJoined(expression.to_string()));
            }
            let mut parsed = Vec::new();
            for sub in &subs {
                match DailyRange::parse(sub) {
                    Some(r) => parsed.push(r),
                    None if looks_like_cron(sub) => return Err(PeriodError::Cron(sub.to_string())),
                    None => return Err(PeriodError::NotADailyRange(sub.to_string())),
                }
            }
            if parsed.len() == 2 {
                return Err(PeriodError::SameTypeJoined(expression.to_string()));
            }
            ranges.extend(parsed);
            expressions.push(expression.to_string());
        }
        Ok(ExcludedPeriods {
            expressions,
            ranges,
        })
    }

    /// True when `now_ms` (UTC) falls in any period.
    pub(crate) fn is_excluded(&self, now_ms: i64) -> bool {
        self.ranges.iter().any(|r| r.contains(now_ms))
    }

    #[cfg(test)]
    /// True when no period is configured.
    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

impl fmt::Display for ExcludedPeriods {
    /// The configured list as the Flink autoscaler's scaling report quotes it (Java's `List.toString`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}]", self.expressions.join(", "))
    }
}

fn looks_like_cron(text: &str) -> bool {
    let fields = text.split_whitespace().count();
    (5..=7).contains(&fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;

    #[test]
    fn daily_ranges_are_inclusive() {
        let p = ExcludedPeriods::parse("09:00-17:00").unwrap();
        assert!(!p.is_excluded(9 * H - 1));
        assert!(p.is_excluded(9 * H));
        assert!(p.is_excluded(17 * H));
        assert!(!p.is_excluded(17 * H + 1));
        // The next day at 10:00.
        assert!(p.is_excluded(DAY_MS + 10 * H));
        let p = ExcludedPeriods::parse("01:00:30:500-01:00:31; 22:00-23:59:59:999").unwrap();
        assert!(p.is_excluded(H + 30_500));
        assert!(!p.is_excluded(H + 30_499));
        assert!(p.is_excluded(23 * H));
    }

    #[test]
    fn invalid_expressions() {
        for bad in [
            "17:00-09:00",
            "09:00-09:00",
            "25:00-26:00",
            "9-10",
            "09:00-10:00 && 11:00-12:00",
            "a && b && c",
        ] {
            assert!(ExcludedPeriods::parse(bad).is_err(), "{bad}");
        }
        let err = ExcludedPeriods::parse("* * 9-17 ? * MON-FRI").unwrap_err();
        assert!(
            err.to_string()
                .contains("cron expressions are not supported")
        );
        assert!(ExcludedPeriods::parse("").unwrap().is_empty());
        let p = ExcludedPeriods::parse("09:00-10:00; 11:00-12:00").unwrap();
        assert_eq!(p.to_string(), "[09:00-10:00, 11:00-12:00]");
    }
}
