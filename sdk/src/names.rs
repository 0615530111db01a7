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
use std::sync::atomic::{AtomicU64, Ordering};

use crate::bytes::{before, same};

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

    #[test]
    fn numbers_are_distinct_across_threads() {
        let here = sort_and_number(&mut list(&["X"]));
        let there = std::thread::spawn(|| sort_and_number(&mut list(&["X"])))
            .join()
            .expect("the thread runs");
        assert_ne!(here, there);
    }
}
