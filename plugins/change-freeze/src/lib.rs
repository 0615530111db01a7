//! `change-freeze`: a scaling executor that vetoes every scaling operation during a change
//! freeze.
//!
//! Two rules, either or both:
//!
//! * `flag-file`: an absolute path; while a file (or anything else) exists there, every
//!   operation is vetoed. Operators freeze a fleet with `touch` and lift the freeze with `rm`,
//!   without touching the configuration. When the existence cannot be checked (a directory on
//!   the way that cannot be searched), the freeze is taken as in force: a freeze that cannot be
//!   checked must not be bypassed.
//! * `windows`: weekly windows, comma-separated, each `<day> <HH:MM>-<day> <HH:MM>` with days
//!   `Mon` to `Sun` (or their full names, any case), e.g. `Sat 00:00-Mon 06:00,Wed 12:00-Wed
//!   13:00`. A window starts at its first minute and ends before its last (`Wed 12:00-Wed
//!   13:00` covers 12:00:00 to 12:59:59); a window whose end comes before its start in the
//!   week (`Fri 18:00-Mon 06:00`) wraps over the week's end. Times are the wall-clock time of
//!   `time-zone` (an IANA name such as `Europe/Berlin`; default `UTC`), so a window follows the
//!   zone's daylight-saving shifts.
//!
//! The instant is [`ExecutorContext::now_ms`], the engine's clock: the simulated time in the
//! simulator, so simulated weeks freeze as real ones would. The time-zone database is bundled,
//! so a window means the same instant on every machine.
//!
//! The veto's reason names the rule that matched: the flag file's path, or the window as written
//! with the zone and the local time. Outside a freeze the proposed scaling is applied unchanged.
//!
//! Priority: [`PRIORITY`] (−100). Executors run in ascending priority, each on the previous
//! one's output; a gate runs first, so that a frozen cycle is vetoed with the freeze's reason
//! and no executor after it (a step limit, a budget) does work that cannot be applied.
//!
//! Parameters (`scaling.custom-executor.<name>.*`): `flag-file`, `windows`, `time-zone` (and
//! `class`, the implementation id); anything else is refused so that a misspelt key is reported.

#![warn(missing_docs, unreachable_pub)]

use std::path::PathBuf;

use flowscale_sdk::{ExecutorContext, ExecutorVerdict, ModeError, ModeParams, ScalingExecutor};
use jiff::Timestamp;
use jiff::tz::TimeZone;

mod window;

pub use crate::window::{Window, WindowError, parse_windows};

/// The implementation id (`scaling.custom-executor.<name>.class = "change-freeze"`).
pub const ID: &str = "change-freeze";

/// The one-line description `flowscale plugins` shows for the executor.
pub const DESCRIPTION: &str =
    "vetoes scaling while a flag file exists or inside weekly freeze windows";

/// Where the executor runs in a job's chain: early, as every gate (see the crate documentation).
pub const PRIORITY: i32 = -100;

const PARAMS: &[&str] = &["class", "flag-file", "windows", "time-zone"];

/// The parameters, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Freeze {
    /// The file whose existence freezes scaling.
    pub flag_file: Option<PathBuf>,
    /// The weekly windows.
    pub windows: Vec<Window>,
    /// The zone the windows' times are in.
    pub time_zone: TimeZone,
    /// The zone's name as configured, for reasons.
    pub time_zone_name: String,
}

impl Freeze {
    /// Parses and checks the parameters; errors name the full key and what would be valid.
    pub fn parse(params: &ModeParams) -> Result<Freeze, ModeError> {
        if let Some((unknown, _)) = params.iter().find(|(k, _)| !PARAMS.contains(k)) {
            let message =
                format!("is not a parameter of {ID} (known: flag-file, windows, time-zone)");
            return Err(params.error(unknown, &message).into());
        }
        let flag_file = match params.get("flag-file").map(str::trim) {
            None => None,
            Some(path) if path.starts_with('/') => Some(PathBuf::from(path)),
            Some(path) => {
                let message =
                    format!("must be an absolute path (e.g. /etc/flowscale/freeze), got `{path}`");
                return Err(params.error("flag-file", &message).into());
            }
        };
        let windows = match params.get("windows") {
            None => Vec::new(),
            Some(text) => {
                parse_windows(text).map_err(|e| params.error("windows", &e.to_string()))?
            }
        };
        if flag_file.is_none() && windows.is_empty() {
            let message = "is required unless windows is set (set either or both)";
            return Err(params.error("flag-file", message).into());
        }
        let time_zone_name = params.get("time-zone").map_or("UTC", str::trim);
        let time_zone = TimeZone::get(time_zone_name).map_err(|_| {
            let message = format!(
                "unknown time zone `{time_zone_name}` (valid: an IANA name such as UTC, \
                 Europe/Berlin or America/New_York)"
            );
            params.error("time-zone", &message)
        })?;
        Ok(Freeze {
            flag_file,
            windows,
            time_zone,
            time_zone_name: time_zone_name.to_string(),
        })
    }

    /// Why scaling is frozen at `now_ms` (milliseconds since the Unix epoch), if it is.
    pub fn reason(&self, now_ms: i64) -> Result<Option<String>, ModeError> {
        if let Some(path) = &self.flag_file {
            match path.try_exists() {
                Ok(false) => {}
                Ok(true) => {
                    return Ok(Some(format!("{ID}: flag file {} exists", path.display())));
                }
                Err(e) => {
                    return Ok(Some(format!(
                        "{ID}: flag file {} cannot be checked ({e}); frozen until it can",
                        path.display()
                    )));
                }
            }
        }
        if self.windows.is_empty() {
            return Ok(None);
        }
        let now = Timestamp::from_millisecond(now_ms)
            .map_err(|e| ModeError::new(format!("{ID}: the time {now_ms} ms is invalid: {e}")))?
            .to_zoned_datetime(self.time_zone.clone());
        let weekday = now.weekday().to_monday_zero_offset();
        let second_of_week = i64::from(weekday) * 86_400
            + i64::from(now.hour()) * 3600
            + i64::from(now.minute()) * 60
            + i64::from(now.second());
        let Some(window) = self.windows.iter().find(|w| w.contains(second_of_week)) else {
            return Ok(None);
        };
        Ok(Some(format!(
            "{ID}: inside the freeze window {window} ({}; it is {})",
            self.time_zone_name,
            now.strftime("%a %H:%M")
        )))
    }
}

/// The `change-freeze` executor.
#[derive(Debug, Default)]
pub struct ChangeFreeze;

impl ScalingExecutor for ChangeFreeze {
    fn priority(&self) -> i32 {
        PRIORITY
    }

    fn apply(&self, ctx: &ExecutorContext) -> Result<ExecutorVerdict, ModeError> {
        let freeze = Freeze::parse(ctx.params())?;
        Ok(match freeze.reason(ctx.now_ms())? {
            Some(reason) => ExecutorVerdict::Veto(reason),
            None => ExecutorVerdict::Apply(ctx.summaries().to_vec()),
        })
    }

    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        Freeze::parse(params).map(|_| ())
    }
}

flowscale_sdk::export_plugin! {
    name: ID,
    version: env!("CARGO_PKG_VERSION"),
    executors: [(ID, DESCRIPTION, ChangeFreeze::default)],
}

#[cfg(test)]
mod tests;
