//! Why a mode answered what it did, line by line, for people.
//!
//! Every aligned vertex of every cycle gets an explanation, but people read few of them (the
//! API, the dashboard and `flowscale align` show them when asked). Formatting the lines of the
//! built-in modes was a large share of an aligned vertex's cost, so an [`Explanation`] keeps the
//! numbers of those lines and renders the words on first read; the text is the same as if it
//! had been formatted eagerly.

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use serde::{Serialize, Serializer};

use super::inputs::Inputs;
use super::search::{Rule, Scan};

/// The lines of an alignment's explanation: reads as a slice of lines (`Deref`), compares,
/// prints and serializes as its text.
#[derive(Clone, Default)]
pub struct Explanation {
    lines: Vec<Line>,
    text: OnceLock<Vec<String>>,
}

/// One line, as text or as the numbers it is rendered from.
#[derive(Debug, Clone)]
pub(super) enum Line {
    Text(Cow<'static, str>),
    /// A text shared by the explanations of many vertices (formatted once per job).
    Shared(Arc<str>),
    /// The decision's starting point ([`Inputs::describe`]).
    Inputs {
        inputs: Inputs,
        source_partitions: u32,
    },
    /// The region a built-in mode scans (its single region), and with which rule.
    SingleRegion {
        inputs: Inputs,
        scan: Scan,
        rule: Rule,
    },
    /// Why `p` was accepted.
    Accepted {
        inputs: Inputs,
        rule: Rule,
        p: u64,
    },
    /// Nothing accepted: the target bounded by the cap is kept.
    KeptCapped {
        inputs: Inputs,
    },
    /// A custom mode's answer: `mode` says which mode answered, up to the number.
    Answered {
        mode: Arc<str>,
        answer: u32,
    },
}

impl Line {
    fn render(&self) -> String {
        match self {
            Line::Text(text) => text.to_string(),
            Line::Shared(text) => text.to_string(),
            Line::Inputs {
                inputs,
                source_partitions,
            } => inputs.describe(*source_partitions),
            Line::SingleRegion { inputs, scan, rule } => {
                describe_single_region(inputs, *scan, *rule)
            }
            Line::Accepted { inputs, rule, p } => accepted_because(inputs, *rule, *p),
            Line::Answered { mode, answer } => format!("{mode}{answer}"),
            Line::KeptCapped { inputs } => format!(
                "no value accepted; keeping the target bounded by the cap: min({}, {}) = {}",
                inputs.t,
                inputs.cap,
                inputs.capped_target()
            ),
        }
    }
}

impl Explanation {
    /// An explanation of these lines.
    pub(super) fn of(lines: Vec<Line>) -> Explanation {
        Explanation {
            lines,
            text: OnceLock::new(),
        }
    }

    /// An explanation of one line of text.
    pub(crate) fn text(line: impl Into<Cow<'static, str>>) -> Explanation {
        Explanation::of(vec![Line::Text(line.into())])
    }

    /// Puts `line` first.
    pub(super) fn insert_first(&mut self, line: Line) {
        self.lines.insert(0, line);
        self.text = OnceLock::new();
    }

    /// The lines, rendered on first read.
    pub(crate) fn lines(&self) -> &[String] {
        self.text
            .get_or_init(|| self.lines.iter().map(Line::render).collect())
    }
}

impl From<Vec<String>> for Explanation {
    fn from(lines: Vec<String>) -> Explanation {
        Explanation::of(
            lines
                .into_iter()
                .map(|line| Line::Text(Cow::Owned(line)))
                .collect(),
        )
    }
}

impl Deref for Explanation {
    type Target = [String];
    fn deref(&self) -> &[String] {
        self.lines()
    }
}

impl<'a> IntoIterator for &'a Explanation {
    type Item = &'a String;
    type IntoIter = std::slice::Iter<'a, String>;
    fn into_iter(self) -> Self::IntoIter {
        self.lines().iter()
    }
}

impl PartialEq for Explanation {
    fn eq(&self, other: &Explanation) -> bool {
        self.lines() == other.lines()
    }
}

impl fmt::Debug for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.lines(), f)
    }
}

impl Serialize for Explanation {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.lines().serialize(serializer)
    }
}

/// The region a built-in mode scans (`scan`, its single region) and with which rule.
fn describe_single_region(inputs: &Inputs, scan: Scan, rule: Rule) -> String {
    let region = if inputs.up {
        "ABOVE_TARGET"
    } else {
        "WITHIN_RANGE"
    };
    if scan.is_empty() {
        format!(
            "region {region} [{}, {}] is empty (N < t or the cap is below the target)",
            scan.from, scan.to
        )
    } else {
        format!(
            "scanned {region} [{}, {}] upward with {}",
            scan.from,
            scan.to,
            rule.name()
        )
    }
}

/// Why `p` was accepted, in numbers.
pub(super) fn accepted_because(inputs: &Inputs, rule: Rule, p: u64) -> String {
    if inputs.n % p == 0 {
        format!(
            "accepted {p}: it divides N = {} ({} per subtask, no skew)",
            inputs.n,
            inputs.n / p
        )
    } else {
        format!(
            "accepted {p} by {}: N/p = {} < N/t = {} (the busiest subtask gets lighter)",
            rule.name(),
            inputs.n / p,
            inputs.n / inputs.t.max(1)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> Inputs {
        Inputs {
            c: 16,
            t: 24,
            n: 128,
            k: 128,
            lower: 1,
            upper: 200,
            cap: 128,
            up: true,
        }
    }

    #[test]
    fn lines_render_as_their_eager_text() {
        let mut lazy = Explanation::of(vec![
            Line::SingleRegion {
                inputs: inputs(),
                scan: Scan::up(24, 128),
                rule: Rule::LoadReducing,
            },
            Line::Accepted {
                inputs: inputs(),
                rule: Rule::LoadReducing,
                p: 26,
            },
            Line::KeptCapped { inputs: inputs() },
        ]);
        lazy.insert_first(Line::Inputs {
            inputs: inputs(),
            source_partitions: 0,
        });
        // The texts written out by hand from the numbers above.
        let expected = vec![
            "scale-up from 16 to target 24; N = 128 (key groups), cap UA = min(N, K = 128, upper = 200) = 128".to_string(),
            "scanned ABOVE_TARGET [24, 128] upward with LOAD_REDUCING".to_string(),
            "accepted 26 by LOAD_REDUCING: N/p = 4 < N/t = 5 (the busiest subtask gets lighter)"
                .to_string(),
            "no value accepted; keeping the target bounded by the cap: min(24, 128) = 24".to_string(),
        ];
        assert_eq!(lazy.lines(), expected.as_slice());
        assert_eq!(lazy, Explanation::from(expected.clone()));
        assert_eq!(
            serde_json::to_value(&lazy).unwrap(),
            serde_json::to_value(&expected).unwrap()
        );
        assert_eq!(format!("{lazy:?}"), format!("{expected:?}"));
        assert_eq!((&lazy).into_iter().count(), 4);
    }

    #[test]
    fn a_custom_answer_ends_with_the_number() {
        let e = Explanation::of(vec![Line::Answered {
            mode: "mode `fixed` (fixed from linked into the binary) answered ".into(),
            answer: 7,
        }]);
        assert_eq!(
            e.lines(),
            ["mode `fixed` (fixed from linked into the binary) answered 7".to_string()]
        );
    }

    #[test]
    fn a_line_put_first_after_a_read_is_rendered_too() {
        let mut e = Explanation::text("second");
        assert_eq!(e.len(), 1);
        e.insert_first(Line::Text("first".into()));
        assert_eq!(e.lines(), ["first".to_string(), "second".to_string()]);
    }
}
