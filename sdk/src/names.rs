//! A number that names a context's list of metric names, so that the plugin side can tell "the
//! names I already hold" without comparing them (SDK 0.1.3).
//!
//! A host aligns vertex after vertex with the same evaluated metrics: the names of one context
//! are nearly always those of the one before. The builder sorts every context's names anyway
//! (it checks that they are sorted); checking instead that they equal a list it built recently
//! costs the same, and gives the list a number. The promise a plugin relies on is one way only:
//! **equal numbers mean equal name lists** (same names, same order). It holds because a number
//! is taken from one process-wide counter that never repeats, for one list whose names never
//! change while it holds that number. Equal lists may still get different numbers (from
//! different threads, or once a list was pushed out of the few kept): the plugin side then
//! compares, as it does with 0 ("not known").

use std::cell::RefCell;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::bytes::{before, same};
use crate::context::EvaluatedMetric;

/// The last number handed out; 0 is never one.
static LAST_NUMBER: AtomicU64 = AtomicU64::new(0);

/// How many recent lists a thread keeps numbered: the vertices of a job may alternate between
/// a few lists (sources report more metrics than the operators after them).
const KEPT_LISTS: usize = 4;

thread_local! {
    /// The name lists this thread numbered last, the most recently used first.
    static RECENT: RefCell<Vec<(Vec<String>, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Sorts `metrics` by name (keeping the first of equal names, as the builder always did) and
/// returns the number of their name list; 0 for an empty list.
pub(crate) fn sort_and_number<T>(metrics: &mut Vec<(String, T)>) -> u64 {
    if metrics.is_empty() {
        return 0;
    }
    let numbered = RECENT.try_with(|recent| {
        let Ok(mut recent) = recent.try_borrow_mut() else {
            return None;
        };
        // A recent list is sorted and distinct: equal to one, the metrics are too. The last
        // one used is nearly always it.
        match recent.first() {
            Some((names, number)) if same_names(names, metrics) => return Some(*number),
            _ => {}
        }
        if let Some(at) = recent
            .iter()
            .position(|(names, _)| same_names(names, metrics))
        {
            recent[..=at].rotate_right(1);
            return Some(recent[0].1);
        }
        sort_metrics(metrics);
        // Sorting may have made them a recent list (names lent unsorted, or twice).
        if let Some(at) = recent
            .iter()
            .position(|(names, _)| same_names(names, metrics))
        {
            recent[..=at].rotate_right(1);
            return Some(recent[0].1);
        }
        let number = LAST_NUMBER.fetch_add(1, Ordering::Relaxed) + 1;
        // The oldest list's buffers hold the new names, so a thread that alternates between
        // more lists than it keeps does not allocate for each.
        let (mut names, _) = if recent.len() < KEPT_LISTS {
            (Vec::new(), 0)
        } else {
            recent.pop().unwrap_or_default()
        };
        names.truncate(metrics.len());
        for (i, (name, _)) in metrics.iter().enumerate() {
            match names.get_mut(i) {
                Some(kept) => {
                    kept.clear();
                    kept.push_str(name);
                }
                None => names.push(name.clone()),
            }
        }
        recent.insert(0, (names, number));
        Some(number)
    });
    match numbered {
        Ok(Some(number)) => number,
        // The thread is being torn down (or this is a call from inside one): no number.
        _ => {
            sort_metrics(metrics);
            0
        }
    }
}

/// Sorts metrics by name and keeps the first of equal names.
pub(crate) fn sort_metrics<T>(metrics: &mut Vec<(String, T)>) {
    // The host hands them over sorted and distinct: one pass says so.
    if metrics.is_sorted_by(|a, b| before(a.0.as_bytes(), b.0.as_bytes())) {
        return;
    }
    metrics.sort_by(|a, b| a.0.cmp(&b.0));
    metrics.dedup_by(|a, b| a.0 == b.0);
}

/// True when `metrics` has exactly `names`, in order.
#[inline]
fn same_names<T>(names: &[String], metrics: &[(String, T)]) -> bool {
    names.len() == metrics.len()
        && names
            .iter()
            .zip(metrics)
            .all(|(a, (b, _))| same(a.as_bytes(), b.as_bytes()))
}

/// A list of evaluated metrics, by name, as a host keeps it from one context to the next: the
/// list of a context it decided on ([`crate::AlignmentContext::into_parts`]), with the number
/// of its names, refilled in place for the next context ([`MetricList::refill`]).
///
/// A host builds contexts vertex after vertex with the same metric names: refilling the list
/// compares each name with the one in its place anyway (to reuse its buffer), and when they
/// are all the same the list keeps its number, so that the builder takes it
/// ([`crate::AlignmentContextBuilder::metric_list`]) without checking the names a second time.
/// Any other name, or another count, drops the number: the builder then sorts and numbers the
/// list as it does a plain one. The names are never reachable mutably from outside, so a
/// number always names exactly the names it came with (SDK 0.1.3).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricList {
    metrics: Vec<(String, EvaluatedMetric)>,
    /// The number of the names (see the module docs); 0 when not known.
    names: u64,
}

impl MetricList {
    /// An empty list.
    pub fn new() -> MetricList {
        MetricList::default()
    }

    /// Makes the list hold `metrics` (name and value, in that order), in place: a name equal
    /// to the one kept in its place reuses it, and the list keeps its number only when every
    /// name is the one kept in its place and there are as many.
    pub fn refill<'a>(&mut self, metrics: impl IntoIterator<Item = (&'a str, EvaluatedMetric)>) {
        let mut filled = 0;
        for (name, value) in metrics {
            match self.metrics.get_mut(filled) {
                Some((kept, kept_value)) => {
                    if !same(kept.as_bytes(), name.as_bytes()) {
                        kept.clear();
                        kept.push_str(name);
                        self.names = 0;
                    }
                    *kept_value = value;
                }
                None => {
                    self.metrics.push((name.to_owned(), value));
                    self.names = 0;
                }
            }
            filled += 1;
        }
        if filled != self.metrics.len() {
            self.metrics.truncate(filled);
            self.names = 0;
        }
    }

    /// The list of a context whose names the builder numbered `names`.
    pub(crate) fn numbered(metrics: Vec<(String, EvaluatedMetric)>, names: u64) -> MetricList {
        MetricList { metrics, names }
    }

    /// The metrics and the number of their names (0: not known), for the builder.
    pub(crate) fn into_numbered(self) -> (Vec<(String, EvaluatedMetric)>, u64) {
        (self.metrics, self.names)
    }

    /// The metrics, as a plain list.
    pub fn into_vec(self) -> Vec<(String, EvaluatedMetric)> {
        self.metrics
    }
}

/// A plain list: its names are numbered when a context is built from it.
impl From<Vec<(String, EvaluatedMetric)>> for MetricList {
    fn from(metrics: Vec<(String, EvaluatedMetric)>) -> MetricList {
        MetricList { metrics, names: 0 }
    }
}

/// The metrics, read only (so that the number keeps naming the names).
impl Deref for MetricList {
    type Target = [(String, EvaluatedMetric)];
    fn deref(&self) -> &Self::Target {
        &self.metrics
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A metric list: the names, each with a value (any value: only names are numbered).
    fn list(names: &[&str]) -> Vec<(String, f64)> {
        names.iter().map(|n| (n.to_string(), 1.0)).collect()
    }

    #[test]
    fn the_same_names_get_the_same_number_and_others_another() {
        let a = sort_and_number(&mut list(&["LAG", "LOAD"]));
        assert_ne!(a, 0);
        assert_eq!(sort_and_number(&mut list(&["LAG", "LOAD"])), a);
        let b = sort_and_number(&mut list(&["LAG", "LOAD", "RATE"]));
        assert_ne!(b, a);
        // Alternating between a few lists keeps both numbers.
        assert_eq!(sort_and_number(&mut list(&["LAG", "LOAD"])), a);
        assert_eq!(sort_and_number(&mut list(&["LAG", "LOAD", "RATE"])), b);
        assert_eq!(sort_and_number(&mut list(&[])), 0);
    }

    #[test]
    fn unsorted_names_are_sorted_and_numbered_as_the_sorted_list() {
        let sorted = sort_and_number(&mut list(&["A", "B", "C"]));
        let mut unsorted = list(&["C", "A", "B", "A"]);
        assert_eq!(sort_and_number(&mut unsorted), sorted);
        assert_eq!(unsorted, list(&["A", "B", "C"]));
    }

    #[test]
    fn a_list_pushed_out_gets_a_new_number_never_an_old_one() {
        let mut seen = Vec::new();
        for round in 0..3 {
            for i in 0..2 * KEPT_LISTS {
                let name = format!("M{i}");
                let number = sort_and_number(&mut list(&[&name]));
                assert!(
                    !seen.iter().any(|(n, other)| *n == number && *other != name),
                    "round {round}: {number} named two lists"
                );
                seen.push((number, name));
            }
        }
    }

    fn value(x: f64) -> EvaluatedMetric {
        EvaluatedMetric {
            current: x,
            average: x,
        }
    }

    #[test]
    fn a_refilled_list_keeps_its_number_only_with_the_same_names() {
        let mut metrics = vec![
            ("LAG".to_string(), value(1.0)),
            ("LOAD".to_string(), value(2.0)),
        ];
        let number = sort_and_number(&mut metrics);
        let mut list = MetricList::numbered(metrics, number);
        list.refill([("LAG", value(3.0)), ("LOAD", value(4.0))]);
        assert_eq!(list.names, number);
        assert_eq!(list[1].1, value(4.0));
        for other in [
            vec![("LAG", value(1.0))],
            vec![
                ("LAG", value(1.0)),
                ("LOAD", value(1.0)),
                ("RATE", value(1.0)),
            ],
            vec![("LAG", value(1.0)), ("LOADS", value(1.0))],
        ] {
            let mut list = MetricList::numbered(list.to_vec(), number);
            list.refill(other.iter().copied());
            assert_eq!(list.names, 0, "{other:?}");
            let names: Vec<&str> = list.iter().map(|(n, _)| n.as_str()).collect();
            let wanted: Vec<&str> = other.iter().map(|(n, _)| *n).collect();
            assert_eq!(names, wanted);
        }
        assert_eq!(MetricList::from(list.to_vec()).names, 0);
    }

    #[test]
    fn numbers_are_distinct_across_threads() {
        let here = sort_and_number(&mut list(&["X"]));
        let there = std::thread::spawn(|| sort_and_number(&mut list(&["X"])))
            .join()
            .expect("the thread runs");
        assert_ne!(here, there);
    }
}
