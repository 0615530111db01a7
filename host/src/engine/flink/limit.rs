//! How many requests reach one Flink cluster at once (`[host] max-requests-per-cluster`).
//!
//! Every job of a cluster talks to the same JobManager, which answers REST calls on a small
//! thread pool of its own. A fleet of hundreds of jobs on one cluster, all due at the same
//! moment, would otherwise send hundreds of requests at once; with a limit they queue in the
//! host instead, and a slow cluster slows only its own jobs.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// A counting semaphore: at most `limit` holders at once.
#[derive(Debug)]
pub(crate) struct RequestLimit {
    limit: usize,
    in_flight: Mutex<usize>,
    freed: Condvar,
}

impl RequestLimit {
    /// At most `limit` (at least 1) requests at once.
    pub(crate) fn new(limit: usize) -> RequestLimit {
        RequestLimit {
            limit: limit.max(1),
            in_flight: Mutex::new(0),
            freed: Condvar::new(),
        }
    }

    /// Waits for a free place; it is given back when the permit is dropped.
    pub(crate) fn acquire(&self) -> Permit<'_> {
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while *in_flight >= self.limit {
            in_flight = self
                .freed
                .wait(in_flight)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *in_flight += 1;
        Permit(self)
    }

    /// Requests in flight now.
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        *self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A place taken in a [`RequestLimit`].
#[derive(Debug)]
pub(crate) struct Permit<'a>(&'a RequestLimit);

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut in_flight = self
            .0
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *in_flight = in_flight.saturating_sub(1);
        drop(in_flight);
        self.0.freed.notify_one();
    }
}

/// One [`RequestLimit`] per cluster, by REST URL, shared by every client of that cluster.
#[derive(Debug)]
pub(crate) struct ClusterLimits {
    per_cluster: usize,
    clusters: Mutex<HashMap<String, Arc<RequestLimit>>>,
}

impl ClusterLimits {
    /// At most `per_cluster` requests in flight to each cluster.
    pub(crate) fn new(per_cluster: usize) -> ClusterLimits {
        ClusterLimits {
            per_cluster,
            clusters: Mutex::new(HashMap::new()),
        }
    }

    /// The limit of the cluster at `rest_url` (the same object for every caller).
    pub(crate) fn for_cluster(&self, rest_url: &str) -> Arc<RequestLimit> {
        let key = rest_url.trim_end_matches('/').to_string();
        let mut clusters = self.clusters.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(
            clusters
                .entry(key)
                .or_insert_with(|| Arc::new(RequestLimit::new(self.per_cluster))),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[test]
    fn no_more_than_the_limit_hold_a_place_at_once() {
        let limit = RequestLimit::new(3);
        let peak = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..12 {
                scope.spawn(|| {
                    let _permit = limit.acquire();
                    peak.fetch_max(limit.in_flight(), Ordering::AcqRel);
                    std::thread::sleep(Duration::from_millis(20));
                });
            }
        });
        assert_eq!(peak.into_inner(), 3, "twelve callers, three at a time");
        assert_eq!(limit.in_flight(), 0, "every place given back");
    }

    #[test]
    fn one_limit_per_cluster() {
        let limits = ClusterLimits::new(2);
        let a = limits.for_cluster("http://a:8081");
        assert!(Arc::ptr_eq(&a, &limits.for_cluster("http://a:8081/")));
        assert!(!Arc::ptr_eq(&a, &limits.for_cluster("http://b:8081")));
        let _one = a.acquire();
        let _two = a.acquire();
        assert_eq!(a.in_flight(), 2);
        // Another cluster is not held up by a full one.
        let other = limits.for_cluster("http://b:8081");
        let _place = other.acquire();
        assert_eq!(other.in_flight(), 1);
    }
}
