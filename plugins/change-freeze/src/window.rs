//! Weekly windows: `<day> <HH:MM>-<day> <HH:MM>`, as seconds of the week from Monday 00:00.

use std::fmt;

/// Seconds in a week.
const WEEK: i64 = 7 * 86_400;

/// Day names, Monday first: the three-letter form and the full one.
const DAYS: [(&str, &str); 7] = [
    ("mon", "monday"),
    ("tue", "tuesday"),
    ("wed", "wednesday"),
    ("thu", "thursday"),
    ("fri", "friday"),
    ("sat", "saturday"),
    ("sun", "sunday"),
];

/// Why a `windows` value does not parse; each message says what would be valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// An entry is not two instants separated by `-`.
    #[error(
        "`{0}` is not a window (expected `<day> <HH:MM>-<day> <HH:MM>`, e.g. `Sat 00:00-Mon 06:00`)"
    )]
    Shape(String),
    /// A day name that is not one.
    #[error("`{0}`: unknown day (valid: Mon, Tue, Wed, Thu, Fri, Sat, Sun or their full names)")]
    Day(String),
    /// A time that is not `HH:MM` within a day.
    #[error("`{0}`: not a time of day (valid: 00:00 to 23:59)")]
    Time(String),
    /// Start and end at the same instant: empty, or a whole week; neither is meant.
    #[error(
        "`{0}`: starts where it ends (for a freeze until further notice, use flag-file instead)"
    )]
    Empty(String),
    /// Nothing between two commas, or no window at all.
    #[error("empty entry in `{0}` (expected comma-separated windows)")]
    Missing(String),
}

/// One weekly window: from `start` (included) to `end` (excluded), in seconds from Monday
/// 00:00; `end < start` wraps over the week's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    text: String,
    start: i64,
    end: i64,
}

impl Window {
    /// Whether the second of the week `s` (0 to one week) lies inside the window.
    pub fn contains(&self, s: i64) -> bool {
        let s = s.rem_euclid(WEEK);
        if self.start < self.end {
            self.start <= s && s < self.end
        } else {
            s >= self.start || s < self.end
        }
    }
}

/// The window as written.
impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Parses a comma-separated list of windows.
pub fn parse_windows(text: &str) -> Result<Vec<Window>, WindowError> {
    text.split(',')
        .map(|entry| window(entry.trim(), text))
        .collect()
}

fn window(entry: &str, whole: &str) -> Result<Window, WindowError> {
    if entry.is_empty() {
        return Err(WindowError::Missing(whole.to_string()));
    }
    let (from, to) = entry
        .split_once('-')
        .ok_or_else(|| WindowError::Shape(entry.to_string()))?;
    let (start, end) = (instant(from, entry)?, instant(to, entry)?);
    if start == end {
        return Err(WindowError::Empty(entry.to_string()));
    }
    Ok(Window {
        text: entry.to_string(),
        start,
        end,
    })
}

/// `<day> <HH:MM>` as seconds from Monday 00:00.
fn instant(text: &str, entry: &str) -> Result<i64, WindowError> {
    let mut parts = text.split_whitespace();
    let (Some(day), Some(time), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(WindowError::Shape(entry.to_string()));
    };
    let lower = day.to_ascii_lowercase();
    let day_index = DAYS
        .iter()
        .position(|(short, long)| lower == *short || lower == *long)
        .ok_or_else(|| WindowError::Day(day.to_string()))?;
    let bad_time = || WindowError::Time(time.to_string());
    let (hh, mm) = time.split_once(':').ok_or_else(bad_time)?;
    let field = |s: &str, below: i64| {
        let ok = s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit());
        s.parse::<i64>()
            .ok()
            .filter(|v| ok && *v < below)
            .ok_or_else(bad_time)
    };
    let (hour, minute) = (field(hh, 24)?, field(mm, 60)?);
    Ok(day_index as i64 * 86_400 + hour * 3600 + minute * 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400;

    #[test]
    fn windows_cover_their_start_but_not_their_end() {
        let w = parse_windows("Wed 12:00-Wed 13:00").expect("valid");
        let w = &w[0];
        let noon = 2 * DAY + 12 * 3600;
        assert!(!w.contains(noon - 1));
        assert!(w.contains(noon));
        assert!(w.contains(noon + 3599));
        assert!(!w.contains(noon + 3600));
        assert_eq!(w.to_string(), "Wed 12:00-Wed 13:00");
    }

    #[test]
    fn a_window_may_wrap_over_the_week_end() {
        let w = parse_windows(" sat 00:00 - Monday 06:00 ,Wed 12:00-Wed 13:00").expect("valid");
        assert_eq!(w.len(), 2);
        let sat = 5 * DAY;
        assert!(!w[0].contains(sat - 1), "Friday 23:59:59");
        assert!(w[0].contains(sat));
        assert!(w[0].contains(WEEK - 1), "Sunday 23:59:59");
        assert!(w[0].contains(0), "Monday 00:00");
        assert!(w[0].contains(6 * 3600 - 1));
        assert!(!w[0].contains(6 * 3600), "Monday 06:00");
        assert!(!w[0].contains(2 * DAY), "Wednesday");
    }

    #[test]
    fn bad_windows_say_what_is_valid() {
        let err = |text: &str| parse_windows(text).expect_err(text);
        assert_eq!(
            err("Sat 00:00"),
            WindowError::Shape("Sat 00:00".to_string())
        );
        assert_eq!(
            err("Sab 00:00-Mon 06:00"),
            WindowError::Day("Sab".to_string())
        );
        for time in ["24:00", "12:60", "9:00", "ab:cd", "1200"] {
            let text = format!("Mon {time}-Tue 00:00");
            assert_eq!(err(&text), WindowError::Time(time.to_string()), "{text}");
        }
        assert_eq!(
            err("Mon 10:00-monday 10:00"),
            WindowError::Empty("Mon 10:00-monday 10:00".to_string())
        );
        assert!(matches!(
            err("Mon 10:00-Mon 11:00,"),
            WindowError::Missing(_)
        ));
        assert!(matches!(err(""), WindowError::Missing(_)));
        assert!(matches!(
            err("Mon 10:00 x-Mon 11:00"),
            WindowError::Shape(_)
        ));
        let msg = err("Sab 00:00-Mon 06:00").to_string();
        assert!(msg.contains("valid: Mon, Tue"), "{msg}");
    }
}
