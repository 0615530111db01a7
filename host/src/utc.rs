//! Calendar time in UTC from milliseconds since the Unix epoch: for people (RFC 3339 in the
//! readable log) and for file names (the quarantine's stamps).
//!
//! The host needs this one conversion and no time zones, so it does it itself rather than take
//! a date-time crate: the proleptic Gregorian calendar, without leap seconds (Unix time counts
//! none).

/// A moment in UTC, split into calendar fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UtcTime {
    /// The year (astronomical: 0 is 1 BC).
    pub(crate) year: i64,
    /// 1 to 12.
    pub(crate) month: i64,
    /// 1 to 31.
    pub(crate) day: i64,
    /// 0 to 23.
    pub(crate) hour: i64,
    /// 0 to 59.
    pub(crate) minute: i64,
    /// 0 to 59.
    pub(crate) second: i64,
    /// 0 to 999.
    pub(crate) millisecond: i64,
}

impl UtcTime {
    /// The moment `ms` milliseconds after 1970-01-01T00:00:00Z (before it when negative).
    pub(crate) fn from_ms(ms: i64) -> UtcTime {
        let secs = ms.div_euclid(1000);
        let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (year, month, day) = civil_from_days(days);
        UtcTime {
            year,
            month,
            day,
            hour: rest / 3600,
            minute: (rest / 60) % 60,
            second: rest % 60,
            millisecond: ms.rem_euclid(1000),
        }
    }

    /// RFC 3339 (`2026-12-02T16:31:13Z`), with the milliseconds (`.250`) when there are any.
    /// Years outside 0 to 9999 have more or fewer digits, which RFC 3339 cannot express.
    pub(crate) fn rfc3339(&self) -> String {
        let UtcTime {
            year,
            month,
            day,
            hour,
            minute,
            second,
            millisecond,
        } = *self;
        let fraction = if millisecond == 0 {
            String::new()
        } else {
            format!(".{millisecond:03}")
        };
        format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}{fraction}Z")
    }
}

/// The proleptic Gregorian date (year, month, day) of a day number (days since 1970-01-01),
/// after Howard Hinnant's `civil_from_days`.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> String {
        UtcTime::from_ms(ms).rfc3339()
    }

    // The expected dates are counted by hand: 365 days a year, plus one for each leap year in
    // between (every fourth year, but 2100, a century not divisible by 400).
    #[test]
    fn known_moments_are_their_calendar_times() {
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        // 30 years to 2000 (7 leap days): 10,957 days, then 31 + 28 more to 2000-02-29.
        assert_eq!(at(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(at(951_782_400_000 - 1_000), "2000-02-28T23:59:59Z");
        // 56 years to 2026 (14 leap days): 20,454 days; day 20,789 is the 336th of 2026,
        // December 2 (334 days before December); 59,473 s into it is 16:31:13.
        assert_eq!(at(1_796_229_073_000), "2026-12-02T16:31:13Z");
        // 130 years to 2100 (32 leap days): 47,482 days, then 31 + 28: 2100 has no February 29.
        assert_eq!(at(4_107_542_400_000), "2100-03-01T00:00:00Z");
        assert_eq!(at(4_107_542_400_000 - 1_000), "2100-02-28T23:59:59Z");
    }

    #[test]
    fn milliseconds_are_shown_when_there_are_some_and_times_before_1970_count_back() {
        assert_eq!(at(951_782_400_250), "2000-02-29T00:00:00.250Z");
        assert_eq!(at(1_796_229_073_007), "2026-12-02T16:31:13.007Z");
        assert_eq!(at(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(at(-86_400_000), "1969-12-31T00:00:00Z");
    }
}
