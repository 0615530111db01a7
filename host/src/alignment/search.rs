//! The region searches behind every mode, in two implementations with the same answers.
//!
//! The Flink autoscaler scans a region value by value. With `N` up to 32768 and a target far from any
//! accepted value that costs tens of thousands of divisions per vertex, so the modes use the
//! closed forms below; the plain scans stay as the reference the property tests compare against.
//!
//! * The first divisor of `N` at or above a bound comes from `N`'s sorted divisors (found in
//!   `O(√N)` and cached per `N`), the last one at or below a bound likewise.
//! * With `q = N / t > 0`, the first `p` with `N / p < q` is `N / q + 1`: `⌊N/p⌋ < q` holds exactly
//!   when `p > N/q`.
//! * The relaxed downward fallback's first `p ≤ t` with `N / p > N / t` is `N / (q + 1)`.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

/// Which values a step accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// `N % p == 0`: no skew at all.
    Divisor,
    /// A divisor, or `N / p < N / t`: the first value that lowers the busiest subtask's load.
    LoadReducing,
}

impl Rule {
    /// The name used in configuration.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Rule::Divisor => "DIVISOR",
            Rule::LoadReducing => "LOAD_REDUCING",
        }
    }

    /// Whether `p` is accepted for a target `t` over `n` units (the scan's test).
    pub(crate) fn accepts(&self, n: u64, t: u64, p: u64) -> bool {
        n % p == 0 || (*self == Rule::LoadReducing && n / p < n / t)
    }
}

/// An inclusive range of candidate parallelisms scanned from `from` towards `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scan {
    /// First candidate (always the target itself, or the target clipped to the cap).
    pub(crate) from: u64,
    /// Last candidate.
    pub(crate) to: u64,
    /// Scan direction: upward (`from, from+1, ..., to`) or downward (`from, from-1, ..., to`).
    pub(crate) upward: bool,
}

impl Scan {
    /// `from, from+1, ..., to` (empty when `from > to`).
    pub fn up(from: u64, to: u64) -> Scan {
        Scan {
            from,
            to,
            upward: true,
        }
    }
    /// `from, from-1, ..., to` (empty when `from < to`).
    pub(crate) fn down(from: u64, to: u64) -> Scan {
        Scan {
            from,
            to,
            upward: false,
        }
    }
    /// True when the scan visits no value (or only values below 1).
    pub(crate) fn is_empty(&self) -> bool {
        if self.upward {
            self.from > self.to || self.to == 0
        } else {
            self.from < self.to || self.from == 0
        }
    }
}

/// The reference: visit every candidate in order and return the first one `rule` accepts.
pub fn first_accepted_scan(n: u64, t: u64, scan: Scan, rule: Rule) -> Option<u64> {
    if scan.is_empty() || n == 0 || t == 0 {
        return None;
    }
    if scan.upward {
        (scan.from.max(1)..=scan.to).find(|&p| rule.accepts(n, t, p))
    } else {
        (scan.to.max(1)..=scan.from)
            .rev()
            .find(|&p| rule.accepts(n, t, p))
    }
}

/// How many candidates are tried one by one before the closed forms take over: most answers sit
/// within a few values of the target, where a handful of divisions beats the divisor lookup.
const SHORT_SCAN: u64 = 16;

/// The same answer as [`first_accepted_scan`] without visiting the whole region.
pub fn first_accepted(n: u64, t: u64, scan: Scan, rule: Rule) -> Option<u64> {
    if scan.is_empty() || n == 0 || t == 0 {
        return None;
    }
    let short = if scan.upward {
        let from = scan.from.max(1);
        Scan::up(from, scan.to.min(from.saturating_add(SHORT_SCAN - 1)))
    } else {
        let to = scan.to.max(1);
        Scan::down(scan.from, to.max(scan.from.saturating_sub(SHORT_SCAN - 1)))
    };
    if let Some(found) = first_accepted_scan(n, t, short, rule) {
        return Some(found);
    }
    let covered = if scan.upward {
        short.to >= scan.to
    } else {
        short.to <= scan.to.max(1)
    };
    if covered {
        return None;
    }
    first_accepted_closed_form(n, t, scan, rule)
}

/// The closed forms over the whole region.
fn first_accepted_closed_form(n: u64, t: u64, scan: Scan, rule: Rule) -> Option<u64> {
    if scan.upward {
        let from = scan.from.max(1);
        let divisor = first_divisor_at_or_above(n, from);
        let load_reducing = match rule {
            Rule::Divisor => None,
            Rule::LoadReducing => {
                let q = n / t;
                // q == 0: N / p < 0 is impossible; only divisors can be accepted.
                (q > 0).then(|| (n / q + 1).max(from))
            }
        };
        let first = match (divisor, load_reducing) {
            (Some(d), Some(l)) => Some(d.min(l)),
            (d, l) => d.or(l),
        };
        first.filter(|&p| p <= scan.to)
    } else {
        // The load-reducing values form an upward-closed set (`p > N/q`), so a downward scan
        // meets one only at its first candidate; after that only divisors can be accepted.
        let from = scan.from;
        if rule == Rule::LoadReducing {
            let q = n / t;
            if q > 0 && from > n / q {
                return Some(from);
            }
        }
        last_divisor_at_or_below(n, from).filter(|&d| d >= scan.to.max(1))
    }
}

/// The Flink autoscaler's relaxed downward fallback, scanned: walk `p` down from `t` to the first `p` with
/// `N/p > N/t`; if `p` does not divide `N`, step back up by one; 0 if no such `p`. The caller
/// applies `max(p, lower)`.
#[cfg(test)]
pub(crate) fn relaxed_downward_scan(n: u64, t: u64) -> u64 {
    if n == 0 || t == 0 {
        return 0;
    }
    let base = n / t;
    match (1..=t).rev().find(|&p| n / p > base) {
        Some(p) if n % p != 0 => p + 1,
        Some(p) => p,
        None => 0,
    }
}

/// The Flink autoscaler's relaxed downward fallback in closed form (`relaxed_downward_scan`
/// walks it).
pub(crate) fn relaxed_downward(n: u64, t: u64) -> u64 {
    if n == 0 || t == 0 {
        return 0;
    }
    let q = n / t;
    // N/p > q  <=>  N/p >= q+1  <=>  p <= N/(q+1); and N/(q+1) < t because N < (q+1)·t.
    let p = n / (q + 1);
    if p == 0 {
        0
    } else if n % p != 0 {
        p + 1
    } else {
        p
    }
}

/// The smallest divisor of `n` that is `>= bound`.
pub(crate) fn first_divisor_at_or_above(n: u64, bound: u64) -> Option<u64> {
    if bound > n {
        return None;
    }
    let divisors = divisors(n);
    let at = divisors.partition_point(|&d| d < bound);
    divisors.get(at).copied()
}

/// The largest divisor of `n` that is `<= bound`.
pub(crate) fn last_divisor_at_or_below(n: u64, bound: u64) -> Option<u64> {
    if bound == 0 {
        return None;
    }
    let divisors = divisors(n);
    let at = divisors.partition_point(|&d| d <= bound);
    at.checked_sub(1).map(|i| divisors[i])
}

/// Most jobs use a handful of distinct `N`; beyond this many, the cache starts over.
const DIVISOR_CACHE_LIMIT: usize = 4096;

fn divisor_cache() -> &'static RwLock<HashMap<u64, Arc<[u64]>>> {
    static CACHE: OnceLock<RwLock<HashMap<u64, Arc<[u64]>>>> = OnceLock::new();
    CACHE.get_or_init(|| RwLock::new(HashMap::new()))
}

/// The sorted divisors of `n`, computed in `O(√n)` and cached per `n`.
pub(crate) fn divisors(n: u64) -> Arc<[u64]> {
    if let Ok(cache) = divisor_cache().read()
        && let Some(found) = cache.get(&n)
    {
        return Arc::clone(found);
    }
    let computed = compute_divisors(n);
    if let Ok(mut cache) = divisor_cache().write() {
        if cache.len() >= DIVISOR_CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(n, Arc::clone(&computed));
    }
    computed
}

fn compute_divisors(n: u64) -> Arc<[u64]> {
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut d = 1u64;
    while d * d <= n {
        if n % d == 0 {
            small.push(d);
            if d != n / d {
                large.push(n / d);
            }
        }
        d += 1;
    }
    small.extend(large.into_iter().rev());
    small.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn divisors_are_sorted_and_complete() {
        assert_eq!(&*divisors(12), &[1, 2, 3, 4, 6, 12]);
        assert_eq!(&*divisors(1), &[1]);
        assert_eq!(&*divisors(127), &[1, 127]);
        assert_eq!(divisors(5040).len(), 60);
        assert_eq!(first_divisor_at_or_above(128, 24), Some(32));
        assert_eq!(first_divisor_at_or_above(128, 129), None);
        assert_eq!(last_divisor_at_or_below(128, 24), Some(16));
        assert_eq!(last_divisor_at_or_below(128, 0), None);
    }

    #[test]
    fn closed_forms_on_known_values() {
        // K=128, t=24: the first load-reducing value is 26, the first divisor 32.
        let scan = Scan::up(24, 128);
        assert_eq!(first_accepted(128, 24, scan, Rule::LoadReducing), Some(26));
        assert_eq!(first_accepted(128, 24, scan, Rule::Divisor), Some(32));
        // S=12, t=7: relaxed fallback gives 6.
        assert_eq!(relaxed_downward(12, 7), 6);
        assert_eq!(relaxed_downward_scan(12, 7), 6);
        // t = 1 never finds a p: 0.
        assert_eq!(relaxed_downward(12, 1), 0);
    }

    fn any_scan() -> impl Strategy<Value = (u64, u64, Scan)> {
        (1u64..=5040, 1u64..=6000, 0u64..=6000, any::<bool>()).prop_map(|(n, t, end, up)| {
            let scan = if up {
                Scan::up(t, end)
            } else {
                Scan::down(t, end)
            };
            (n, t, scan)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn fast_search_equals_scan((n, t, scan) in any_scan(), load_reducing in any::<bool>()) {
            let rule = if load_reducing { Rule::LoadReducing } else { Rule::Divisor };
            prop_assert_eq!(first_accepted(n, t, scan, rule), first_accepted_scan(n, t, scan, rule));
        }

        #[test]
        fn fast_search_equals_scan_when_starting_off_target(
            n in 1u64..=2000, t in 1u64..=2000, from in 1u64..=2000, to in 0u64..=2000,
            up in any::<bool>(), load_reducing in any::<bool>()
        ) {
            let rule = if load_reducing { Rule::LoadReducing } else { Rule::Divisor };
            let scan = if up { Scan::up(from, to) } else { Scan::down(from, to) };
            prop_assert_eq!(first_accepted(n, t, scan, rule), first_accepted_scan(n, t, scan, rule));
        }

        #[test]
        fn closed_forms_alone_equal_scan((n, t, scan) in any_scan(), load_reducing in any::<bool>()) {
            let rule = if load_reducing { Rule::LoadReducing } else { Rule::Divisor };
            prop_assert_eq!(first_accepted_closed_form(n, t, scan, rule), first_accepted_scan(n, t, scan, rule));
        }

        #[test]
        fn relaxed_fallback_equals_scan(n in 1u64..=40000, t in 1u64..=40000) {
            prop_assert_eq!(relaxed_downward(n, t), relaxed_downward_scan(n, t));
        }
    }
}
