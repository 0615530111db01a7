//! Why a vertex got its target, in words with the numbers.
//!
//! Every vertex of every decided cycle has a reason, but people read few of them (the report
//! prints changed vertices, or all of them when verbose). Formatting half a dozen doubles per
//! vertex was a fifth of a cycle, so a [`Reason`] keeps the numbers and renders the words on
//! first read; the text is the same as if it had been formatted eagerly.

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::ops::Deref;
use std::sync::OnceLock;

use serde::{Serialize, Serializer};

/// The reason of a vertex's decision: reads as a `str` (`Deref`, `Display`), compares, prints and
/// serializes as its text.
#[derive(Clone)]
pub struct Reason {
    why: Why,
    text: OnceLock<String>,
}

#[derive(Debug, Clone)]
enum Why {
    Text(Cow<'static, str>),
    Target {
        scale: ScaleNote,
        band: Option<BandNote>,
        step: Step,
    },
}

/// How the clamped target was computed from the scale factor.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScaleNote {
    pub(crate) capacity: f64,
    pub(crate) tpr: f64,
    /// The observed scalability coefficient, when enabled.
    pub(crate) coefficient: Option<f64>,
    pub(crate) factor: f64,
    pub(crate) current: u32,
    pub(crate) raw: i32,
    pub(crate) lower: i64,
    pub(crate) upper_bound: i64,
    pub(crate) target: u32,
}

/// Where the true processing rate stands against the utilization band.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BandNote {
    pub(crate) tpr: f64,
    pub(crate) outside: bool,
    pub(crate) up_threshold: f64,
    pub(crate) down_threshold: f64,
}

/// What was decided after the target was aligned.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Step {
    /// The aligner answered 0: the current parallelism is kept.
    AlignedZero,
    /// The aligned target is the current parallelism.
    NoChange,
    /// The previous scale-up was ineffective and blocking is enabled.
    Ineffective,
    ScaleUp(u32),
    ScaleDown(u32),
    /// A scale-down that waits for `scale-down.interval`.
    Delayed(u32),
    /// The delayed maximum equals the current parallelism.
    DelayedAtCurrent,
    /// The maximum recommended within `scale-down.interval`.
    DelayedMax(u32),
}

impl Reason {
    /// A reason given as text.
    pub(crate) fn text(text: impl Into<Cow<'static, str>>) -> Reason {
        Reason {
            why: Why::Text(text.into()),
            text: OnceLock::new(),
        }
    }

    /// The reason of a computed target: how it was computed, the band (once the aligned target
    /// changes the parallelism) and what was decided.
    pub(crate) fn target(scale: ScaleNote, band: Option<BandNote>, step: Step) -> Reason {
        Reason {
            why: Why::Target { scale, band, step },
            text: OnceLock::new(),
        }
    }

    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        match &self.why {
            Why::Text(text) => text,
            Why::Target { scale, band, step } => self
                .text
                .get_or_init(|| render(scale, band.as_ref(), *step)),
        }
    }
}

fn render(scale: &ScaleNote, band: Option<&BandNote>, step: Step) -> String {
    let mut s = String::with_capacity(160);
    // Writing to a String cannot fail.
    let _ = write!(s, "capacity {} / TPR {}", scale.capacity, scale.tpr);
    if let Some(c) = scale.coefficient {
        let _ = write!(s, " / coefficient {c}");
    }
    let cur = scale.current;
    let _ = write!(
        s,
        " -> factor {}, ceil(factor * {cur}) = {}, limits [{}, {}] -> {}",
        scale.factor, scale.raw, scale.lower, scale.upper_bound, scale.target
    );
    if let Some(b) = band {
        let _ = write!(
            s,
            "; TPR {} {} band [{}, {}]",
            b.tpr,
            if b.outside { "outside" } else { "inside" },
            b.up_threshold,
            b.down_threshold
        );
    }
    let _ = match step {
        Step::AlignedZero => write!(s, "; alignment answered 0, kept {cur}"),
        Step::NoChange => write!(s, "; no change"),
        Step::Ineffective => write!(s, "; blocked: previous scale-up was ineffective"),
        Step::ScaleUp(new) => write!(s, "; scale up {cur} -> {new}"),
        Step::ScaleDown(new) => write!(s, "; scale down {cur} -> {new}"),
        Step::Delayed(new) => write!(
            s,
            "; scale down to {new} delayed (scale-down.interval not yet elapsed)"
        ),
        Step::DelayedAtCurrent => write!(s, "; delayed maximum equals current"),
        Step::DelayedMax(new) => write!(
            s,
            "; scale down {cur} -> {new} (maximum recommended within scale-down.interval)"
        ),
    };
    s
}

impl Default for Reason {
    fn default() -> Reason {
        Reason::text("")
    }
}

impl Deref for Reason {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl fmt::Debug for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq for Reason {
    fn eq(&self, other: &Reason) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<str> for Reason {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Reason {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl From<&'static str> for Reason {
    fn from(text: &'static str) -> Reason {
        Reason::text(text)
    }
}

impl From<String> for Reason {
    fn from(text: String) -> Reason {
        Reason::text(text)
    }
}

impl From<Reason> for String {
    fn from(reason: Reason) -> String {
        reason.as_str().to_string()
    }
}

impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scale() -> ScaleNote {
        ScaleNote {
            capacity: 1167.0,
            tpr: 1000.5,
            coefficient: None,
            factor: 1.2,
            current: 10,
            raw: 12,
            lower: 1,
            upper_bound: 720,
            target: 12,
        }
    }

    #[test]
    fn renders_the_words_of_an_eager_format() {
        let band = BandNote {
            tpr: 1000.5,
            outside: true,
            up_threshold: 1167.0,
            down_threshold: f64::INFINITY,
        };
        let r = Reason::target(scale(), Some(band), Step::ScaleUp(12));
        assert_eq!(
            r.as_str(),
            "capacity 1167 / TPR 1000.5 -> factor 1.2, ceil(factor * 10) = 12, limits [1, 720] -> 12; \
             TPR 1000.5 outside band [1167, inf]; scale up 10 -> 12"
        );
        let with_coefficient = ScaleNote {
            coefficient: Some(0.5),
            ..scale()
        };
        let r = Reason::target(with_coefficient, None, Step::NoChange);
        assert!(r.contains(" / coefficient 0.5 -> factor"));
        assert!(r.ends_with("; no change"));
        assert_eq!(format!("{r:?}"), format!("{:?}", r.as_str()));
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            serde_json::to_string(r.as_str()).unwrap()
        );
        assert_eq!(Reason::text("finished; not scaled"), "finished; not scaled");
    }
}
