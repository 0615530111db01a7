//! Excluded periods (`excluded.periods`, see docs/decision-pipeline.md#excluded-periods): times
//! during which scaling decisions are computed and reported but not executed.
//!
//! The Flink autoscaler's forms: a `;`-separated list of expressions, each one sub-expression or
//! two joined by `&&` (a daily range and a cron, both of which must match). A sub-expression is
//! first read as a daily range `HH:mm[:ss[:SSS]]-HH:mm[:ss[:SSS]]` (Quartz's `DailyCalendar`,
//! inclusive at both ends), otherwise as a Quartz cron expression (see `quartz_cron`). Both are
//! evaluated in the zone of `excluded.periods.time-zone` (UTC by default; the Flink autoscaler
//! uses the JVM's default zone, which a host should not silently depend on).

use std::fmt;

use jiff::Timestamp;
use jiff::civil::{DateTime, Time};
use jiff::tz::TimeZone;

use super::quartz_cron::QuartzCron;

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

    /// True when `now` lies between the range's start and end on the day (in `zone`) of `now`.
    ///
    /// As Quartz's `DailyCalendar`, the ends are the instants at which the wall clock of that
    /// day shows them: an end in a daylight-saving gap is read with the offset before the gap
    /// (02:30 on a spring-forward night in Berlin is 03:30 summer time), an end that occurs twice
    /// is its later occurrence (standard time), as `java.util.Calendar` resolves both.
    fn contains(&self, now: Timestamp, local: DateTime, zone: &TimeZone) -> bool {
        let at = |ms: i64| {
            let time = Time::MIN
                .checked_add(jiff::SignedDuration::from_millis(ms))
                .ok()?;
            let wall = local.date().to_datetime(time);
            zone.to_ambiguous_timestamp(wall).later().ok()
        };
        match (at(self.start_ms), at(self.end_ms)) {
            (Some(start), Some(end)) => start <= now && now <= end,
            _ => false,
        }
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
    #[error("`{0}` joins more than two sub-expressions with && (at most a daily range && a cron)")]
    TooManyJoined(String),
    /// Neither a daily range nor a cron expression.
    #[error(
        "`{sub}` is neither a daily range HH:mm[:ss[:SSS]]-HH:mm[:ss[:SSS]] with start before end nor a Quartz cron expression ({cron})"
    )]
    Invalid {
        /// The sub-expression.
        sub: String,
        /// Why it is not a cron expression.
        cron: String,
    },
    /// Two daily ranges, or two crons, joined with `&&`.
    #[error(
        "`{0}` joins two sub-expressions of the same type; && joins a daily range and a cron expression"
    )]
    SameTypeJoined(String),
}

/// One expression: every part present must match.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Period {
    daily: Option<DailyRange>,
    cron: Option<QuartzCron>,
}

/// The parsed `excluded.periods` list: the instant is excluded iff any expression matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExcludedPeriods {
    expressions: Vec<String>,
    periods: Vec<Period>,
    zone: TimeZone,
}

impl Default for ExcludedPeriods {
    fn default() -> Self {
        ExcludedPeriods {
            expressions: Vec::new(),
            periods: Vec::new(),
            zone: TimeZone::UTC,
        }
    }
}

impl ExcludedPeriods {
    /// Parses a `;`-separated list whose times are read in `zone`. Errors say which expression
    /// is wrong and why.
    pub(crate) fn parse(raw: &str, zone: TimeZone) -> Result<ExcludedPeriods, PeriodError> {
        let mut periods = Vec::new();
        let mut expressions = Vec::new();
        for expression in raw.split(';').map(str::trim).filter(|e| !e.is_empty()) {
            let subs: Vec<&str> = expression.split("&&").map(str::trim).collect();
            if subs.len() > 2 {
                return Err(PeriodError::TooManyJoined(expression.to_string()));
            }
            let mut period = Period {
                daily: None,
                cron: None,
            };
            for sub in &subs {
                let same_type = if let Some(r) = DailyRange::parse(sub) {
                    period.daily.replace(r).is_some()
                } else {
                    let cron = QuartzCron::parse(sub).map_err(|e| PeriodError::Invalid {
                        sub: sub.to_string(),
                        cron: e.to_string(),
                    })?;
                    period.cron.replace(cron).is_some()
                };
                if same_type {
                    return Err(PeriodError::SameTypeJoined(expression.to_string()));
                }
            }
            periods.push(period);
            expressions.push(expression.to_string());
        }
        Ok(ExcludedPeriods {
            expressions,
            periods,
            zone,
        })
    }

    /// True when `now_ms` (ms since the epoch) falls in any period.
    pub(crate) fn is_excluded(&self, now_ms: i64) -> bool {
        if self.periods.is_empty() {
            return false;
        }
        let Ok(now) = Timestamp::from_millisecond(now_ms) else {
            return false;
        };
        let local = self.zone.to_datetime(now);
        self.periods.iter().any(|p| {
            p.daily.is_none_or(|r| r.contains(now, local, &self.zone))
                && p.cron.as_ref().is_none_or(|c| c.matches(local))
        })
    }

    #[cfg(test)]
    /// True when no period is configured.
    pub(crate) fn is_empty(&self) -> bool {
        self.periods.is_empty()
    }
}

impl fmt::Display for ExcludedPeriods {
    /// The configured list as the Flink autoscaler's scaling report quotes it (Java's `List.toString`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}]", self.expressions.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;
    const DAY_MS: i64 = 24 * H;

    fn utc(raw: &str) -> ExcludedPeriods {
        ExcludedPeriods::parse(raw, TimeZone::UTC).unwrap()
    }

    /// The instant at which the wall clock of `zone` shows the given time (none of the tests
    /// asks for a time that a daylight-saving change skips or repeats).
    fn wall(zone: &str, (y, mo, d): (i16, i8, i8), (h, mi, s): (i8, i8, i8)) -> i64 {
        jiff::civil::date(y, mo, d)
            .at(h, mi, s, 0)
            .in_tz(zone)
            .unwrap()
            .timestamp()
            .as_millisecond()
    }

    #[test]
    fn daily_ranges_are_inclusive() {
        let p = utc("09:00-17:00");
        assert!(!p.is_excluded(9 * H - 1));
        assert!(p.is_excluded(9 * H));
        assert!(p.is_excluded(17 * H));
        assert!(!p.is_excluded(17 * H + 1));
        // The next day at 10:00.
        assert!(p.is_excluded(DAY_MS + 10 * H));
        let p = utc("01:00:30:500-01:00:31; 22:00-23:59:59:999");
        assert!(p.is_excluded(H + 30_500));
        assert!(!p.is_excluded(H + 30_499));
        assert!(p.is_excluded(23 * H));
    }

    /// The Flink autoscaler's validation cases (its CalendarUtils test), each list as one
    /// `;`-separated value.
    #[test]
    fn validation_follows_the_flink_autoscaler() {
        for bad in [
            "09:13:17-08:15:18",
            "09:13:17-25:15:18",
            "09:13:17-11:15:18; 18:01:20-16:00:00",
            "09:13:17-11:15:18 && 12:01:20-16:00:00",
            "* * * ? * 2,5555",
            "* * * ? * 2,5 && 18:01:20-16:00:00",
            "* * * ? * 2,5 && * * 11-13 * * ?",
        ] {
            assert!(ExcludedPeriods::parse(bad, TimeZone::UTC).is_err(), "{bad}");
        }
        for good in [
            "09:13:17-11:15:18; 14:01:20-16:00:00",
            "* * * ? * 2,5 && 14:01:20-16:00:00",
        ] {
            assert!(
                ExcludedPeriods::parse(good, TimeZone::UTC).is_ok(),
                "{good}"
            );
        }
    }

    #[test]
    fn each_refusal_says_why() {
        let e = |raw: &str| ExcludedPeriods::parse(raw, TimeZone::UTC).unwrap_err();
        assert!(matches!(
            e("09:00-10:00 && * * * ? * 2 && 11:00-12:00"),
            PeriodError::TooManyJoined(_)
        ));
        assert!(matches!(
            e("09:00-10:00 && 11:00-12:00"),
            PeriodError::SameTypeJoined(_)
        ));
        assert!(matches!(
            e("* * 9 ? * 2 && 0 0 * ? * 3"),
            PeriodError::SameTypeJoined(_)
        ));
        // A cron refused for its own reason names the sub-expression and the reason.
        let msg = e("09:00-10:00 && 0 0 25 * * ?").to_string();
        assert!(
            msg.contains("`0 0 25 * * ?`") && msg.contains("hours"),
            "{msg}"
        );
        let msg = e("9-10").to_string();
        assert!(msg.contains("6 or 7 fields"), "{msg}");
        assert!(utc("").is_empty());
        assert_eq!(
            utc("09:00-10:00; * * 9 ? * MON && 11:00-12:00").to_string(),
            "[09:00-10:00, * * 9 ? * MON && 11:00-12:00]"
        );
    }

    /// The Flink autoscaler's period cases: 2023-12-14 14:01:30, a Thursday.
    #[test]
    fn periods_follow_the_flink_autoscaler() {
        let now = wall("UTC", (2023, 12, 14), (14, 1, 30));
        let p = utc("09:13:17-11:15:18; 14:01:20-16:00:00");
        assert!(p.is_excluded(now));
        assert!(!p.is_excluded(now - 20_000));
        assert!(p.is_excluded(now - 4 * H));

        let p = utc("* * 14-16 * * ?");
        assert!(p.is_excluded(now));
        assert!(!p.is_excluded(now - 100_000));

        // 14:01:20-16:00:00 on Mondays (2) and Thursdays (5).
        let p = utc("* * * ? * 2,5 && 14:01:20-16:00:00");
        assert!(p.is_excluded(now));
        assert!(!p.is_excluded(now - DAY_MS), "Wednesday");
        assert!(p.is_excluded(now - 3 * DAY_MS), "Monday");
        assert!(
            !p.is_excluded(now - 3 * DAY_MS - 20_000),
            "Monday before the range"
        );
    }

    #[test]
    fn a_daily_range_follows_the_wall_clock_of_its_zone_across_daylight_saving() {
        let berlin = TimeZone::get("Europe/Berlin").unwrap();
        let p = ExcludedPeriods::parse("08:00-09:00", berlin).unwrap();
        // Winter: Berlin is UTC+1, the range is 07:00-08:00 UTC.
        let jan = |h, m, s| wall("UTC", (2024, 1, 15), (h, m, s));
        assert!(!p.is_excluded(jan(6, 59, 59)));
        assert!(p.is_excluded(jan(7, 0, 0)));
        assert!(p.is_excluded(jan(8, 0, 0)));
        assert!(!p.is_excluded(jan(8, 0, 0) + 1));
        // Summer: UTC+2, the range is 06:00-07:00 UTC.
        let jul = |h, m, s| wall("UTC", (2024, 7, 15), (h, m, s));
        assert!(!p.is_excluded(jul(5, 59, 59)));
        assert!(p.is_excluded(jul(6, 0, 0)));
        assert!(p.is_excluded(jul(7, 0, 0)));
        assert!(!p.is_excluded(jul(7, 30, 0)));
        // The same range in UTC is an hour (winter) or two (summer) later.
        assert!(utc("08:00-09:00").is_excluded(jan(8, 30, 0)));
        assert!(!utc("08:00-09:00").is_excluded(jul(7, 0, 0)));
    }

    #[test]
    fn an_end_in_a_daylight_saving_change_is_read_as_java_reads_it() {
        let berlin = || TimeZone::get("Europe/Berlin").unwrap();
        // 2024-03-31: 02:00 CET jumps to 03:00 CEST (01:00 UTC). 02:30 does not exist and is
        // read with the offset before the jump, +01:00: 01:30 UTC, i.e. 03:30 CEST.
        let p = ExcludedPeriods::parse("02:30-04:00", berlin()).unwrap();
        let day = |h, m| wall("UTC", (2024, 3, 31), (h, m, 0));
        assert!(
            !p.is_excluded(day(1, 15)),
            "03:15 CEST is before 02:30 +01:00"
        );
        assert!(p.is_excluded(day(1, 30)));
        assert!(p.is_excluded(day(2, 0)), "04:00 CEST");
        assert!(!p.is_excluded(day(2, 0) + 1));
        // 2024-10-27: 03:00 CEST falls back to 02:00 CET (01:00 UTC); 02:30 happens twice
        // (00:30 and 01:30 UTC) and is read as its later, standard-time occurrence.
        let p = ExcludedPeriods::parse("02:30-05:00", berlin()).unwrap();
        let day = |h, m| wall("UTC", (2024, 10, 27), (h, m, 0));
        assert!(!p.is_excluded(day(0, 45)), "02:45 CEST");
        assert!(p.is_excluded(day(1, 30)));
        assert!(p.is_excluded(day(4, 0)), "05:00 CET");
        assert!(!p.is_excluded(day(4, 0) + 1));
    }

    #[test]
    fn a_cron_is_read_in_the_zone_too() {
        let new_york = TimeZone::get("America/New_York").unwrap();
        let p = ExcludedPeriods::parse("* * 9 ? * MON-FRI", new_york).unwrap();
        // Monday 2024-01-15 14:30 UTC is 09:30 EST.
        let monday = wall("UTC", (2024, 1, 15), (14, 30, 0));
        assert!(p.is_excluded(monday));
        assert!(!utc("* * 9 ? * MON-FRI").is_excluded(monday));
        // Sunday 2024-01-14 at 09:30 EST.
        assert!(!p.is_excluded(monday - DAY_MS));
        // In summer (EDT, UTC-4) 09:30 is 13:30 UTC.
        assert!(p.is_excluded(wall("UTC", (2024, 7, 15), (13, 30, 0))));
        assert!(!p.is_excluded(wall("UTC", (2024, 7, 15), (14, 30, 0))));
    }

    /// A cron matches the instant truncated to the second.
    #[test]
    fn a_cron_matches_the_whole_second() {
        let p = utc("30 15 10 * * ?");
        let at = wall("UTC", (2024, 5, 2), (10, 15, 30));
        assert!(p.is_excluded(at));
        assert!(p.is_excluded(at + 999));
        assert!(!p.is_excluded(at + 1000));
        assert!(!p.is_excluded(at - 1));
    }
}
