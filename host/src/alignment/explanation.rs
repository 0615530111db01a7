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
    lines: Lines,
    text: OnceLock<Vec<String>>,
}

/// The lines, held without a heap allocation in the shapes most vertices get: one line (nothing
/// to align, not applicable, a custom mode's answer) or a built-in mode's search. Every aligned
/// vertex of every cycle has an explanation, and a list of lines was an allocation each; the
/// variants are kept small since every vertex's record holds one.
#[derive(Debug, Clone, Default)]
enum Lines {
    /// No line yet (a record alignment has not reached).
    #[default]
    Empty,
    /// One line of text ([`Line::Text`]).
    Text(Cow<'static, str>),
    /// One shared line ([`Line::Shared`]).
    Shared(Arc<str>),
    /// A custom mode's answer alone ([`Line::Answered`]).
    Answered { mode: Arc<str>, answer: u32 },
    /// A built-in mode's search.
    Search(Search),
    /// Any other list of lines.
    Many(Vec<Line>),
}

/// A built-in mode's search of its single region, rendered as the lines it stands for: the
/// starting point (once put first), the region it scanned ([`Line::SingleRegion`]), then the
/// accepted value ([`Line::Accepted`]) or, when nothing was accepted, the kept target
/// ([`Line::KeptCapped`]). The inputs come from `u32` parallelisms and limits, and are kept so.
#[derive(Debug, Clone, Copy)]
struct Search {
    /// `c, t, n, k, lower, upper, cap` of the [`Inputs`].
    numbers: [u32; 7],
    up: bool,
    /// The scanned region's ends ([`Scan::from`], [`Scan::to`]) and direction.
    scan: [u32; 2],
    upward: bool,
    rule: Rule,
    /// The source partitions of the starting point's line ([`Line::Inputs`]), once put first.
    source_partitions: Option<u32>,
    /// The accepted value; None when nothing was accepted.
    accepted: Option<u32>,
}

impl Search {
    /// The search, when every number fits (always, for inputs made from a request or context).
    fn of(inputs: &Inputs, scan: Scan, rule: Rule, accepted: Option<u64>) -> Option<Search> {
        let narrow = |x: u64| u32::try_from(x).ok();
        let accepted = match accepted {
            Some(p) => Some(narrow(p)?),
            None => None,
        };
        Some(Search {
            numbers: [
                narrow(inputs.c)?,
                narrow(inputs.t)?,
                narrow(inputs.n)?,
                narrow(inputs.k)?,
                narrow(inputs.lower)?,
                narrow(inputs.upper)?,
                narrow(inputs.cap)?,
            ],
            up: inputs.up,
            scan: [narrow(scan.from)?, narrow(scan.to)?],
            upward: scan.upward,
            rule,
            source_partitions: None,
            accepted,
        })
    }

    fn inputs(&self) -> Inputs {
        let [c, t, n, k, lower, upper, cap] = self.numbers.map(u64::from);
        Inputs {
            c,
            t,
            n,
            k,
            lower,
            upper,
            cap,
            up: self.up,
        }
    }

    /// The lines this search stands for, in order.
    fn lines(&self) -> impl Iterator<Item = Line> {
        let inputs = self.inputs();
        let rule = self.rule;
        let start = self
            .source_partitions
            .map(|source_partitions| Line::Inputs {
                inputs,
                source_partitions,
            });
        let end = match self.accepted {
            Some(p) => Line::Accepted {
                inputs,
                rule,
                p: u64::from(p),
            },
            None => Line::KeptCapped { inputs },
        };
        let [from, to] = self.scan.map(u64::from);
        let region = Line::SingleRegion {
            inputs,
            scan: Scan {
                from,
                to,
                upward: self.upward,
            },
            rule,
        };
        start.into_iter().chain([region, end])
    }
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
        Explanation::with(Lines::Many(lines))
    }

    /// An explanation of one line.
    pub(super) fn line(line: Line) -> Explanation {
        Explanation::with(match line {
            Line::Text(text) => Lines::Text(text),
            Line::Shared(text) => Lines::Shared(text),
            Line::Answered { mode, answer } => Lines::Answered { mode, answer },
            line => Lines::Many(vec![line]),
        })
    }

    /// An explanation of one line of text.
    pub(crate) fn text(line: impl Into<Cow<'static, str>>) -> Explanation {
        Explanation::with(Lines::Text(line.into()))
    }

    /// A built-in mode's search of its single region `scan` with `rule`: the region, then the
    /// `accepted` value or, when None, the target bounded by the cap.
    pub(super) fn search(
        inputs: Inputs,
        scan: Scan,
        rule: Rule,
        accepted: Option<u64>,
    ) -> Explanation {
        match Search::of(&inputs, scan, rule, accepted) {
            Some(search) => Explanation::with(Lines::Search(search)),
            None => {
                let region = Line::SingleRegion { inputs, scan, rule };
                let end = match accepted {
                    Some(p) => Line::Accepted { inputs, rule, p },
                    None => Line::KeptCapped { inputs },
                };
                Explanation::of(vec![region, end])
            }
        }
    }

    fn with(lines: Lines) -> Explanation {
        Explanation {
            lines,
            text: OnceLock::new(),
        }
    }

    /// The lines, in order.
    fn each(&self) -> Vec<Line> {
        match &self.lines {
            Lines::Empty => Vec::new(),
            Lines::Text(text) => vec![Line::Text(text.clone())],
            Lines::Shared(text) => vec![Line::Shared(Arc::clone(text))],
            Lines::Answered { mode, answer } => vec![Line::Answered {
                mode: Arc::clone(mode),
                answer: *answer,
            }],
            Lines::Search(search) => search.lines().collect(),
            Lines::Many(lines) => lines.clone(),
        }
    }

    /// Puts `line` first.
    pub(super) fn insert_first(&mut self, line: Line) {
        self.text = OnceLock::new();
        if let (
            Lines::Search(search),
            Line::Inputs {
                inputs,
                source_partitions,
            },
        ) = (&mut self.lines, &line)
        {
            // A search's own starting point is kept in place.
            if search.source_partitions.is_none() && *inputs == search.inputs() {
                search.source_partitions = Some(*source_partitions);
                return;
            }
        }
        if let Lines::Many(lines) = &mut self.lines {
            lines.insert(0, line);
            return;
        }
        if let Lines::Empty = self.lines {
            *self = Explanation::line(line);
            return;
        }
        let mut lines = Vec::with_capacity(4);
        lines.push(line);
        lines.extend(self.each());
        self.lines = Lines::Many(lines);
    }

    /// The lines, rendered on first read.
    pub(crate) fn lines(&self) -> &[String] {
        self.text.get_or_init(|| match &self.lines {
            Lines::Empty => Vec::new(),
            Lines::Text(text) => vec![text.to_string()],
            Lines::Shared(text) => vec![text.to_string()],
            Lines::Search(search) => search.lines().map(|line| line.render()).collect(),
            Lines::Many(lines) => lines.iter().map(Line::render).collect(),
            Lines::Answered { .. } => self.each().iter().map(Line::render).collect(),
        })
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
    fn a_search_renders_as_its_lines() {
        let scan = Scan::up(24, 128);
        for accepted in [Some(26), Some(32), None] {
            let end = match accepted {
                Some(p) => Line::Accepted {
                    inputs: inputs(),
                    rule: Rule::LoadReducing,
                    p,
                },
                None => Line::KeptCapped { inputs: inputs() },
            };
            let lines = vec![
                Line::SingleRegion {
                    inputs: inputs(),
                    scan,
                    rule: Rule::LoadReducing,
                },
                end,
            ];
            let start = Line::Inputs {
                inputs: inputs(),
                source_partitions: 0,
            };
            let mut listed = Explanation::of(lines);
            let mut search = Explanation::search(inputs(), scan, Rule::LoadReducing, accepted);
            assert_eq!(search.lines(), listed.lines());
            listed.insert_first(start.clone());
            search.insert_first(start);
            assert_eq!(search.lines(), listed.lines());
            assert_eq!(search.len(), 3);
            // Any other first line keeps the search's lines after it.
            listed.insert_first(Line::Text("first".into()));
            search.insert_first(Line::Text("first".into()));
            assert_eq!(search.lines(), listed.lines());
            assert_eq!(search.len(), 4);
        }
    }

    #[test]
    fn one_line_and_no_line() {
        assert!(Explanation::default().is_empty());
        let mut e = Explanation::default();
        e.insert_first(Line::Text("only".into()));
        assert_eq!(e.lines(), ["only".to_string()]);
        assert_eq!(Explanation::text("only"), e);
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
