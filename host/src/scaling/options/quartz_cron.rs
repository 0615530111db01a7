//! Quartz cron expressions, the cron half of `excluded.periods`
//! (docs/decision-pipeline.md#excluded-periods).
//!
//! The Flink autoscaler hands these sub-expressions to Quartz's `CronExpression` and asks
//! `isSatisfiedBy` whether an instant, truncated to the second, matches. This module parses the
//! same syntax with Quartz's value ranges and refusals, and answers the same question on the
//! wall-clock fields of the instant. It is written here rather than taken from a general cron crate
//! because those read POSIX cron: no `L-3`, no `L` alone for Saturday, no wrapping ranges such as
//! `FRI-MON` or `22-2`, no Quartz bounds on increments, and `?` as a plain `*`.
//!
//! Fields: `seconds minutes hours day-of-month month day-of-week [year]`. Day-of-week runs from
//! 1 = Sunday to 7 = Saturday; exactly one of day-of-month and day-of-week must be `?`.
//!
//! Where Quartz lets a malformed item through by ignoring its tail (`MONDAY` read as `MON`,
//! `MON-FRI/2` read as `MON-FRI`, `2-6#2` read as `2-6`) or silently applies a modifier to only
//! the first item of a list (`15W,20`, `6#2,2`), the expression is refused here instead: what it
//! would do is not what it says.

use std::collections::BTreeSet;

use jiff::civil::DateTime;

/// Why a cron expression is refused, in Quartz's terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct CronError(String);

/// The seven fields, with Quartz's ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
    Year,
}

/// The last year an open year range (`*/5`, `2030/2`) runs to, as in Quartz's documentation.
const LAST_YEAR: u32 = 2099;
/// The first year of an open year range (`*/5`), as in Quartz.
const FIRST_YEAR: u32 = 1970;

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Second => "seconds",
            Kind::Minute => "minutes",
            Kind::Hour => "hours",
            Kind::DayOfMonth => "day-of-month",
            Kind::Month => "month",
            Kind::DayOfWeek => "day-of-week",
            Kind::Year => "year",
        }
    }

    /// The smallest and largest value of the field.
    fn bounds(self) -> (u32, u32) {
        match self {
            Kind::Second | Kind::Minute => (0, 59),
            Kind::Hour => (0, 23),
            Kind::DayOfMonth => (1, 31),
            Kind::Month => (1, 12),
            Kind::DayOfWeek => (1, 7),
            Kind::Year => (FIRST_YEAR, LAST_YEAR),
        }
    }

    /// The largest increment Quartz accepts after `*/` or `/`; none for years.
    fn max_increment(self) -> Option<u32> {
        match self {
            Kind::Year => None,
            Kind::DayOfWeek => Some(7),
            _ => Some(self.bounds().1),
        }
    }

    /// Month and day names, as Quartz reads them (three letters).
    fn name_value(self, text: &str) -> Option<u32> {
        const MONTHS: [&str; 12] = [
            "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
        ];
        const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
        let names: &[&str] = match self {
            Kind::Month => &MONTHS,
            Kind::DayOfWeek => &DAYS,
            _ => return None,
        };
        let at = names.iter().position(|n| *n == text)?;
        u32::try_from(at + 1).ok()
    }
}

/// The values of a field, one bit each (every field but the year fits in 0..=59).
type Bits = u64;

/// Day-of-month when day-of-week is `?`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DayOfMonth {
    /// Listed days.
    Days(Bits),
    /// `L`, `L-n`, `LW`, `L-nW`: `n` days before the last day, moved to the nearest weekday
    /// inside the month when `weekday`.
    Last { offset: u32, weekday: bool },
    /// `nW`: the weekday nearest to day `n`, inside the month.
    NearestWeekday(u32),
}

/// Day-of-week (1 = Sunday) when day-of-month is `?`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DayOfWeek {
    /// Listed days (`L` alone is 7, Saturday).
    Days(Bits),
    /// `dL`: the last day `d` of the month.
    Last(u32),
    /// `d#n`: the `n`-th day `d` of the month.
    Nth(u32, u32),
}

/// Which day field restricts the day; the other one is `?`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Days {
    OfMonth(DayOfMonth),
    OfWeek(DayOfWeek),
}

/// The year field: any year, or the listed ones.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Years {
    Any,
    Listed(BTreeSet<u32>),
}

/// A parsed Quartz cron expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QuartzCron {
    seconds: Bits,
    minutes: Bits,
    hours: Bits,
    months: Bits,
    days: Days,
    years: Years,
}

fn err(message: impl Into<String>) -> CronError {
    CronError(message.into())
}

/// Digits only, as a number (no sign, no overflow).
fn number(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A value of `kind`: digits, or a month/day name for those fields. `Some(true)` in the second
/// place says it was a name.
fn value(kind: Kind, text: &str) -> Result<(u32, bool), CronError> {
    if let Some(v) = number(text) {
        return Ok((v, false));
    }
    if let Some(v) = kind.name_value(text) {
        return Ok((v, true));
    }
    Err(err(format!(
        "`{text}` is not a value of the {} field",
        kind.name()
    )))
}

/// Quartz's `addToSet`: `start` (None = `*`) to `end` (None = the field's last value) by
/// `step`; a step of 0 keeps `start` alone (`*` for `*/0`). A range whose end is before its
/// start wraps around (`FRI-MON`, `22-2`), except for years.
fn expand(
    kind: Kind,
    start: Option<u32>,
    end: Option<u32>,
    step: u32,
) -> Result<Vec<u32>, CronError> {
    let (min, max) = kind.bounds();
    if kind != Kind::Year {
        let out_of_range =
            start.is_some_and(|v| v < min || v > max) || end.is_some_and(|e| e > max);
        if out_of_range {
            return Err(err(format!(
                "{} values must be between {min} and {max}",
                kind.name()
            )));
        }
    }
    let step = match (step, start) {
        (0, Some(v)) => return Ok(vec![v]),
        (0, None) => 1,
        (s, _) => s,
    };
    let first = start.unwrap_or(min);
    let mut last = end.unwrap_or(max);
    let mut wrap = None;
    if last < first {
        let span = match kind {
            Kind::Year => return Err(err("the start year must not be after the stop year")),
            Kind::Second | Kind::Minute => 60,
            Kind::Hour => 24,
            Kind::DayOfMonth => 31,
            Kind::Month => 12,
            Kind::DayOfWeek => 7,
        };
        last += span;
        wrap = Some(span);
    }
    let step = usize::try_from(step).unwrap_or(usize::MAX);
    Ok((first..=last)
        .step_by(step)
        .map(|i| match wrap {
            None => i,
            // One-based fields keep their last value instead of 0.
            Some(span) if i % span == 0 && min == 1 => span,
            Some(span) => i % span,
        })
        .collect())
}

/// One item of a list without the day modifiers: `*`, `*/n`, `/n`, `v`, `v-e`, `v/n`, `v-e/n`,
/// names for months and days (without increments, as Quartz ignores those).
fn item(kind: Kind, text: &str) -> Result<Vec<u32>, CronError> {
    if text == "*" {
        return expand(kind, None, None, 1);
    }
    if let Some(inc) = text.strip_prefix("*/").or_else(|| text.strip_prefix('/')) {
        let n = number(inc)
            .ok_or_else(|| err(format!("'/' must be followed by an integer in `{text}`")))?;
        if let Some(max) = kind.max_increment()
            && n > max
        {
            return Err(err(format!(
                "the increment of the {} field must be at most {max}, got {n}",
                kind.name()
            )));
        }
        return expand(kind, None, None, n);
    }
    let (base, step) = match text.split_once('/') {
        Some((base, s)) => {
            let n = number(s)
                .ok_or_else(|| err(format!("'/' must be followed by an integer in `{text}`")))?;
            (base, Some(n))
        }
        None => (text, None),
    };
    let (start, end, named) = match base.split_once('-') {
        Some((a, b)) => {
            let (a, a_name) = value(kind, a)?;
            let (b, b_name) = value(kind, b)?;
            if a_name != b_name {
                return Err(err(format!("`{text}` mixes a name and a number")));
            }
            (a, Some(b), a_name)
        }
        None => {
            let (v, named) = value(kind, base)?;
            (v, None, named)
        }
    };
    if named && step.is_some() {
        return Err(err(format!("`{text}`: names take no increment")));
    }
    match (end, step) {
        (None, None) => expand(kind, Some(start), None, 0),
        (None, Some(n)) => expand(kind, Some(start), None, n),
        (Some(e), n) => expand(kind, Some(start), Some(e), n.unwrap_or(1)),
    }
}

/// A comma-separated list of plain items, as one bit set.
fn bits(kind: Kind, field: &str) -> Result<Bits, CronError> {
    let mut set = 0;
    for part in field.split(',') {
        for v in item(kind, part)? {
            set |= 1 << v;
        }
    }
    Ok(set)
}

fn day_of_month(field: &str) -> Result<DayOfMonth, CronError> {
    let list = field.contains(',');
    if list && field.contains('L') {
        return Err(err(
            "'L' and 'LW' cannot be combined with other days of the month",
        ));
    }
    if list && field.contains('W') {
        return Err(err("'W' cannot be combined with other days of the month"));
    }
    if let Some(rest) = field.strip_prefix('L') {
        let (rest, weekday) = match rest.strip_suffix('W') {
            Some(r) => (r, true),
            None => (rest, false),
        };
        let offset = if rest.is_empty() {
            0
        } else {
            let digits = rest.strip_prefix('-').unwrap_or("x");
            number(digits).ok_or_else(|| err(format!("`{field}` is not L, LW, L-n or L-nW")))?
        };
        if offset > 30 {
            return Err(err("the offset from the last day must be at most 30"));
        }
        return Ok(DayOfMonth::Last { offset, weekday });
    }
    if let Some(day) = field.strip_suffix('W') {
        let day =
            number(day).ok_or_else(|| err(format!("`{field}`: 'W' follows a day of the month")))?;
        if !(1..=31).contains(&day) {
            return Err(err("the 'W' option needs a day between 1 and 31"));
        }
        return Ok(DayOfMonth::NearestWeekday(day));
    }
    bits(Kind::DayOfMonth, field).map(DayOfMonth::Days)
}

/// A single day of the week (number 1-7 or name) before `L` or `#`.
fn one_weekday(text: &str) -> Result<u32, CronError> {
    let (d, _) = value(Kind::DayOfWeek, text)?;
    if !(1..=7).contains(&d) {
        return Err(err("day-of-week values must be between 1 and 7"));
    }
    Ok(d)
}

fn day_of_week(field: &str) -> Result<DayOfWeek, CronError> {
    let list = field.contains(',');
    if list && field.contains('L') {
        return Err(err("'L' cannot be combined with other days of the week"));
    }
    if field.matches('#').count() > 1 {
        return Err(err("more than one \"nth\" day ('#') is not supported"));
    }
    if list && field.contains('#') {
        return Err(err("'#' cannot be combined with other days of the week"));
    }
    if field == "L" {
        return Ok(DayOfWeek::Days(1 << 7));
    }
    if let Some(day) = field.strip_suffix('L') {
        return Ok(DayOfWeek::Last(one_weekday(day)?));
    }
    if let Some((day, nth)) = field.split_once('#') {
        let day = one_weekday(day)?;
        let nth = number(nth)
            .filter(|n| (1..=5).contains(n))
            .ok_or_else(|| err("a number between 1 and 5 must follow the '#' option"))?;
        return Ok(DayOfWeek::Nth(day, nth));
    }
    bits(Kind::DayOfWeek, field).map(DayOfWeek::Days)
}

fn years(field: &str) -> Result<Years, CronError> {
    if field == "*" {
        return Ok(Years::Any);
    }
    let mut set = BTreeSet::new();
    for part in field.split(',') {
        set.extend(item(Kind::Year, part)?);
    }
    Ok(Years::Listed(set))
}

/// The day Quartz's `W` picks for `day`: the nearest weekday, without leaving the month
/// (a Saturday the 1st moves to Monday the 3rd, a Sunday on the last day to the Friday before).
fn nearest_weekday(day: u32, weekday_of_day: u32, last_day: u32) -> u32 {
    const SUNDAY: u32 = 1;
    const SATURDAY: u32 = 7;
    match weekday_of_day {
        SATURDAY if day == 1 => day + 2,
        SATURDAY => day - 1,
        SUNDAY if day == last_day => day - 2,
        SUNDAY => day + 1,
        _ => day,
    }
}

impl QuartzCron {
    /// Parses a Quartz cron expression (6 or 7 fields, case-insensitive).
    pub(crate) fn parse(text: &str) -> Result<QuartzCron, CronError> {
        let upper = text.to_ascii_uppercase();
        let fields: Vec<&str> = upper.split_whitespace().collect();
        let [s, mi, h, dom, mo, dow, rest @ ..] = fields.as_slice() else {
            return Err(err(format!(
                "a cron expression has 6 or 7 fields (seconds minutes hours day-of-month month day-of-week [year]), got {}",
                fields.len()
            )));
        };
        let year = match rest {
            [] => None,
            [y] => Some(*y),
            _ => {
                return Err(err(format!(
                    "a cron expression has 6 or 7 fields, got {}",
                    fields.len()
                )));
            }
        };
        let in_field = |kind: Kind, e: CronError| err(format!("{} field: {e}", kind.name()));
        for (kind, field) in [
            (Kind::Second, s),
            (Kind::Minute, mi),
            (Kind::Hour, h),
            (Kind::Month, mo),
        ] {
            if field.contains('?') {
                return Err(in_field(
                    kind,
                    err("'?' can only be specified for day-of-month or day-of-week"),
                ));
            }
        }
        let days = match (*dom == "?", *dow == "?") {
            (true, false) => {
                Days::OfWeek(day_of_week(dow).map_err(|e| in_field(Kind::DayOfWeek, e))?)
            }
            (false, true) => {
                Days::OfMonth(day_of_month(dom).map_err(|e| in_field(Kind::DayOfMonth, e))?)
            }
            _ => {
                return Err(err(
                    "exactly one of day-of-month and day-of-week must be '?' (e.g. `0 0 9 ? * MON-FRI` or `0 0 9 1 * ?`)",
                ));
            }
        };
        Ok(QuartzCron {
            seconds: bits(Kind::Second, s).map_err(|e| in_field(Kind::Second, e))?,
            minutes: bits(Kind::Minute, mi).map_err(|e| in_field(Kind::Minute, e))?,
            hours: bits(Kind::Hour, h).map_err(|e| in_field(Kind::Hour, e))?,
            months: bits(Kind::Month, mo).map_err(|e| in_field(Kind::Month, e))?,
            days,
            years: match year {
                None => Years::Any,
                Some(y) => years(y).map_err(|e| in_field(Kind::Year, e))?,
            },
        })
    }

    /// True when the wall-clock time `at` (its fraction of a second ignored) satisfies the
    /// expression, as Quartz's `isSatisfiedBy`.
    pub(crate) fn matches(&self, at: DateTime) -> bool {
        let has = |set: Bits, v: i8| u32::try_from(v).is_ok_and(|v| v < 64 && set & (1 << v) != 0);
        let year_ok = match &self.years {
            Years::Any => true,
            Years::Listed(set) => u32::try_from(at.year()).is_ok_and(|y| set.contains(&y)),
        };
        year_ok
            && has(self.seconds, at.second())
            && has(self.minutes, at.minute())
            && has(self.hours, at.hour())
            && has(self.months, at.month())
            && self.day_matches(at)
    }

    fn day_matches(&self, at: DateTime) -> bool {
        let date = at.date();
        let day = u32::try_from(date.day()).unwrap_or(0);
        let last_day = u32::try_from(date.days_in_month()).unwrap_or(0);
        let weekday = u32::try_from(date.weekday().to_sunday_one_offset()).unwrap_or(0);
        // The weekday of another day of the same month.
        let weekday_of = |d: u32| (weekday + 7 * 5 + d - day - 1) % 7 + 1;
        match &self.days {
            Days::OfMonth(DayOfMonth::Days(set)) => day < 64 && set & (1 << day) != 0,
            Days::OfMonth(DayOfMonth::Last { offset, weekday }) => {
                let Some(target) = last_day.checked_sub(*offset).filter(|t| *t >= 1) else {
                    return false;
                };
                let target = if *weekday {
                    nearest_weekday(target, weekday_of(target), last_day)
                } else {
                    target
                };
                day == target
            }
            Days::OfMonth(DayOfMonth::NearestWeekday(n)) => {
                *n <= last_day && day == nearest_weekday(*n, weekday_of(*n), last_day)
            }
            Days::OfWeek(DayOfWeek::Days(set)) => set & (1 << weekday) != 0,
            Days::OfWeek(DayOfWeek::Last(d)) => weekday == *d && day + 7 > last_day,
            Days::OfWeek(DayOfWeek::Nth(d, n)) => weekday == *d && (day - 1) / 7 + 1 == *n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cron(text: &str) -> QuartzCron {
        QuartzCron::parse(text).unwrap_or_else(|e| panic!("`{text}`: {e}"))
    }

    fn at(y: i16, mo: i8, d: i8, h: i8, mi: i8, s: i8) -> DateTime {
        jiff::civil::date(y, mo, d).at(h, mi, s, 0)
    }

    /// Midnight of a day.
    fn day(y: i16, mo: i8, d: i8) -> DateTime {
        at(y, mo, d, 0, 0, 0)
    }

    /// The days of `month` 2024 on which `text` matches at midnight.
    fn days_of(text: &str, month: i8) -> Vec<i8> {
        let c = cron(text);
        let last = jiff::civil::date(2024, month, 1).days_in_month();
        (1..=last)
            .filter(|d| c.matches(day(2024, month, *d)))
            .collect()
    }

    /// 2024-03-31 is a Sunday, so March 2024 starts on a Friday and has Fridays on 1, 8, 15, 22
    /// and 29; day-of-week 1 is Sunday, 7 Saturday.
    #[test]
    fn day_of_week_one_is_sunday() {
        assert_eq!(days_of("0 0 0 ? * 1", 3), [3, 10, 17, 24, 31]);
        assert_eq!(days_of("0 0 0 ? * SUN", 3), [3, 10, 17, 24, 31]);
        assert_eq!(days_of("0 0 0 ? * 7", 3), [2, 9, 16, 23, 30]);
        assert_eq!(days_of("0 0 0 ? * sat", 3), [2, 9, 16, 23, 30]);
        // `L` alone in day-of-week is 7, Saturday.
        assert_eq!(days_of("0 0 0 ? * L", 3), [2, 9, 16, 23, 30]);
        assert_eq!(
            days_of("0 0 0 ? * MON-FRI", 3),
            [
                1, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 18, 19, 20, 21, 22, 25, 26, 27, 28, 29
            ]
        );
        // A range whose end is before its start wraps around: Friday to Monday.
        assert_eq!(
            days_of("0 0 0 ? * FRI-MON", 3),
            [
                1, 2, 3, 4, 8, 9, 10, 11, 15, 16, 17, 18, 22, 23, 24, 25, 29, 30, 31
            ]
        );
        assert_eq!(days_of("0 0 0 ? * 6-2", 3), days_of("0 0 0 ? * FRI-MON", 3));
    }

    #[test]
    fn nth_and_last_weekdays() {
        assert_eq!(days_of("0 0 0 ? * 6#3", 3), [15]);
        assert_eq!(days_of("0 0 0 ? * FRI#1", 3), [1]);
        assert_eq!(days_of("0 0 0 ? * 6#5", 3), [29]);
        // April 2024 has four Fridays: no fifth.
        assert_eq!(days_of("0 0 0 ? * 6#5", 4), [] as [i8; 0]);
        assert_eq!(days_of("0 0 0 ? * 6L", 3), [29]);
        assert_eq!(days_of("0 0 0 ? * FRIL", 3), [29]);
        assert_eq!(days_of("0 0 0 ? * 1L", 3), [31]);
    }

    #[test]
    fn last_days_and_nearest_weekdays() {
        assert_eq!(days_of("0 0 0 L * ?", 3), [31]);
        // 2024 is a leap year.
        assert_eq!(days_of("0 0 0 L * ?", 2), [29]);
        assert_eq!(days_of("0 0 0 L-2 * ?", 3), [29]);
        // The 31st of March 2024 is a Sunday: its last weekday is Friday the 29th.
        assert_eq!(days_of("0 0 0 LW * ?", 3), [29]);
        // Three days before the 31st is Thursday the 28th, a weekday.
        assert_eq!(days_of("0 0 0 L-3W * ?", 3), [28]);
        // June 2024 starts on a Saturday: 1W is Monday the 3rd, not May 31st.
        assert_eq!(days_of("0 0 0 1W * ?", 6), [3]);
        assert_eq!(days_of("0 0 0 1W * ?", 5), [1]);
        // Saturday the 15th -> Friday 14th; Sunday the 16th -> Monday 17th.
        assert_eq!(days_of("0 0 0 15W * ?", 6), [14]);
        assert_eq!(days_of("0 0 0 16W * ?", 6), [17]);
        // Sunday the 30th is June's last day: back to Friday the 28th.
        assert_eq!(days_of("0 0 0 30W * ?", 6), [28]);
        // June has no 31st.
        assert_eq!(days_of("0 0 0 31W * ?", 6), [] as [i8; 0]);
        assert_eq!(days_of("0 0 0 1,15,31 * ?", 6), [1, 15]);
        assert_eq!(
            days_of("0 0 0 25-5 * ?", 3),
            [1, 2, 3, 4, 5, 25, 26, 27, 28, 29, 30, 31]
        );
    }

    #[test]
    fn times_ranges_and_increments() {
        let c = cron("0/15 * * * * ?");
        let secs: Vec<i8> = (0..60)
            .filter(|s| c.matches(at(2024, 1, 1, 0, 0, *s)))
            .collect();
        assert_eq!(secs, [0, 15, 30, 45]);
        let c = cron("0 3/20 * * * ?");
        let mins: Vec<i8> = (0..60)
            .filter(|m| c.matches(at(2024, 1, 1, 0, *m, 0)))
            .collect();
        assert_eq!(mins, [3, 23, 43]);
        let c = cron("0 0 */5 * * ?");
        let hours: Vec<i8> = (0..24)
            .filter(|h| c.matches(at(2024, 1, 1, *h, 0, 0)))
            .collect();
        assert_eq!(hours, [0, 5, 10, 15, 20]);
        // An hour range across midnight, with an increment.
        let c = cron("0 0 22-2/2 * * ?");
        let hours: Vec<i8> = (0..24)
            .filter(|h| c.matches(at(2024, 1, 1, *h, 0, 0)))
            .collect();
        assert_eq!(hours, [0, 2, 22]);
        let c = cron("0 0 9-17 * * ?");
        assert!(c.matches(at(2024, 1, 1, 17, 0, 0)));
        assert!(!c.matches(at(2024, 1, 1, 17, 0, 1)));
        assert!(!c.matches(at(2024, 1, 1, 8, 0, 0)));
        // `*/0` is `*`, and `5/0` is 5 alone.
        assert!(cron("*/0 0 0 * * ?").matches(at(2024, 1, 1, 0, 0, 7)));
        assert!(!cron("5/0 0 0 * * ?").matches(at(2024, 1, 1, 0, 0, 10)));
    }

    #[test]
    fn months_and_years() {
        let c = cron("0 0 0 1 NOV-FEB ?");
        let months: Vec<i8> = (1..=12).filter(|m| c.matches(day(2024, *m, 1))).collect();
        assert_eq!(months, [1, 2, 11, 12]);
        let c = cron("0 0 0 1 1,jul ?");
        let months: Vec<i8> = (1..=12).filter(|m| c.matches(day(2024, *m, 1))).collect();
        assert_eq!(months, [1, 7]);
        let c = cron("0 0 0 1 1 ? 2020-2030/5");
        let years: Vec<i16> = (2015..2036).filter(|y| c.matches(day(*y, 1, 1))).collect();
        assert_eq!(years, [2020, 2025, 2030]);
        assert!(cron("0 0 0 1 1 ? 2024").matches(day(2024, 1, 1)));
        assert!(!cron("0 0 0 1 1 ? 2024").matches(day(2025, 1, 1)));
        assert!(cron("0 0 0 1 1 ? *").matches(day(2025, 1, 1)));
    }

    /// What Quartz's `CronExpression` refuses, and a few forms it reads differently from what they
    /// say (see the module documentation).
    #[test]
    fn refusals() {
        for bad in [
            // Field count.
            "* * * * ?",
            "0 0 0 ? * * 2024 1",
            // '?' rules: exactly one of the day fields, nowhere else.
            "* * * * * *",
            "* * * 1 * 2",
            "* * * ? * ?",
            "? * * * * *",
            "* * * ? ? *",
            // Ranges.
            "60 * * * * ?",
            "* 60 * * * ?",
            "0 0 25 * * ?",
            "0 0 24 * * ?",
            "* * * 0 * ?",
            "* * * 32 * ?",
            "* * * 1-32 * ?",
            "* * * ? 13 *",
            "* * * ? 0 *",
            "* * * ? * 0",
            "* * * ? * 8",
            "* * * ? * 2,5555",
            // Increments after '*' or '/'.
            "*/60 * * * * ?",
            "0 0 */24 * * ?",
            "0 0 0 ? * */8",
            "0 0 0 * */13 ?",
            "*/ * * * * ?",
            "*/x * * * * ?",
            // L, W, #.
            "* * * L,5 * ?",
            "* * * L-31 * ?",
            "* * * L- * ?",
            "* * * 32W * ?",
            "* * * 0W * ?",
            "* * * 15W,20 * ?",
            "* * 5L * * ?",
            "* * * ? * 2L,3",
            "* * * ? * 8L",
            "* * * ? * 6#6",
            "* * * ? * 6#0",
            "* * * ? * 6#2,2#1",
            "* * * ? * 6#2,2",
            "* * * ? * 2-6#2",
            "* * * 5# * ?",
            // Names.
            "* * * ? * MOX",
            "* * * ? * MONDAY",
            "* * * ? * MON-FRI/2",
            "* * * ? * 1-FRI",
            "* * * ? JANUARY *",
            "* * * ? * JAN",
            "* * MON ? * *",
            // Years.
            "0 0 0 ? * * 2030-2020",
            "0 0 0 ? * * 20x0",
            // Garbage.
            "a b c d e f",
            "* * * ? * 2-",
            "1-2-3 * * ? * *",
        ] {
            assert!(QuartzCron::parse(bad).is_err(), "`{bad}` was accepted");
        }
        for good in [
            "* * * * * ?",
            "* * * ? * *",
            "*/59 * * * * ?",
            "/5 * * * * ?",
            "0 0 0 L-30 * ?",
            "0 0 0 ? * 7L",
            "0 0 0 ? * 1#5",
            "0 0 12 ? JAN-DEC MON-SUN",
            "0 0 12 ? * 1,2,3,4,5,6,7 2099",
            "  0  0  12  ?  *  MON  ",
            "0 0 12 lw * ?",
        ] {
            assert!(QuartzCron::parse(good).is_ok(), "`{good}` was refused");
        }
    }

    #[test]
    fn refusals_name_the_field() {
        let msg = QuartzCron::parse("0 0 25 * * ?").unwrap_err().to_string();
        assert!(
            msg.contains("hours") && msg.contains("between 0 and 23"),
            "{msg}"
        );
        let msg = QuartzCron::parse("0 0 9 * * MON").unwrap_err().to_string();
        assert!(msg.contains("'?'"), "{msg}");
        let msg = QuartzCron::parse("0 0 9 ? * 6#7").unwrap_err().to_string();
        assert!(
            msg.contains("day-of-week") && msg.contains("between 1 and 5"),
            "{msg}"
        );
    }
}
