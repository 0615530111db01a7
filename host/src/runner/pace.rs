//! Paced virtual clocks (`--pace X`): a simulated job advances X simulated seconds per wall
//! second instead of as fast as it can, so that a person or a test can change plugins and the
//! configuration while it runs.

use std::str::FromStr;
use std::time::{Duration, Instant};

/// How long a paced clock that never reaches its next step (a tiny pace) waits before it looks
/// again; the stop wakes it sooner.
pub(super) const STOP_POLL: Duration = Duration::from_millis(100);

/// Simulated seconds per wall second: a positive, finite number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace(f64);

/// Why a pace was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PaceError {
    /// Not a number at all.
    #[error("`{0}` is not a number; give simulated seconds per wall second, e.g. 60")]
    NotANumber(String),
    /// Zero, negative, infinite or NaN.
    #[error(
        "`{0}` is not a positive finite number; give simulated seconds per wall second, e.g. 60 \
         (or leave --pace out to run as fast as possible)"
    )]
    NotPositive(String),
}

impl Pace {
    /// `per_second` simulated seconds per wall second.
    pub fn new(per_second: f64) -> Result<Pace, PaceError> {
        if per_second.is_finite() && per_second > 0.0 {
            Ok(Pace(per_second))
        } else {
            Err(PaceError::NotPositive(per_second.to_string()))
        }
    }

    /// Simulated seconds per wall second.
    pub(crate) fn per_second(self) -> f64 {
        self.0
    }

    /// The wall time `simulated` takes at this pace; `None` when it is too long to represent
    /// (a tiny pace over a long run), which means "never" to the caller.
    pub(crate) fn wall_time(self, simulated: Duration) -> Option<Duration> {
        Duration::try_from_secs_f64(simulated.as_secs_f64() / self.0).ok()
    }
}

impl FromStr for Pace {
    type Err = PaceError;

    fn from_str(text: &str) -> Result<Pace, PaceError> {
        let value: f64 = text
            .trim()
            .parse()
            .map_err(|_| PaceError::NotANumber(text.to_string()))?;
        Pace::new(value).map_err(|_| PaceError::NotPositive(text.to_string()))
    }
}

/// The wall instant by which a clock paced at `pace` and started at `started` reaches
/// `simulated` elapsed time. It is computed from the start each time, so the waits do not
/// accumulate the time the steps themselves take. `None`: never.
pub(super) fn deadline(pace: Pace, started: Instant, simulated: Duration) -> Option<Instant> {
    pace.wall_time(simulated)
        .and_then(|wall| started.checked_add(wall))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pace_is_a_positive_finite_number() {
        assert_eq!("4".parse::<Pace>().map(Pace::per_second), Ok(4.0));
        assert_eq!(" 0.5 ".parse::<Pace>().map(Pace::per_second), Ok(0.5));
        assert_eq!("1e3".parse::<Pace>().map(Pace::per_second), Ok(1000.0));
        for bad in ["0", "-1", "-0.5", "NaN", "inf", "-inf", "0.0"] {
            assert_eq!(
                bad.parse::<Pace>(),
                Err(PaceError::NotPositive(bad.to_string())),
                "{bad}"
            );
        }
        assert_eq!(
            "fast".parse::<Pace>(),
            Err(PaceError::NotANumber("fast".into()))
        );
        let text = "0".parse::<Pace>().unwrap_err().to_string();
        assert!(text.contains("not a positive finite number"), "{text}");
    }

    #[test]
    fn wall_time_is_simulated_time_over_the_pace() {
        let pace = Pace::new(4.0).unwrap();
        assert_eq!(
            pace.wall_time(Duration::from_secs(2)),
            Some(Duration::from_millis(500))
        );
        let slow = Pace::new(0.5).unwrap();
        assert_eq!(
            slow.wall_time(Duration::from_secs(3)),
            Some(Duration::from_secs(6))
        );
        // Too long to represent: never, not a panic.
        let tiny = Pace::new(f64::MIN_POSITIVE).unwrap();
        assert_eq!(tiny.wall_time(Duration::from_secs(3600)), None);
        assert_eq!(deadline(tiny, Instant::now(), Duration::from_secs(1)), None);
    }
}
