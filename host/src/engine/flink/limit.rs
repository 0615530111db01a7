//! How many requests reach one Flink cluster at once (`[host] max-requests-per-cluster`).
//!
//! Every job of a cluster talks to the same JobManager, which answers REST calls on a small
//! thread pool of its own. A fleet of hundreds of jobs on one cluster, all due at the same
//! moment, would otherwise send hundreds of requests at once; with a limit they queue in the
//! host instead, and a slow cluster slows only its own jobs.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use super::access::{ClusterAccess, Endpoint};
use crate::config::ClusterSpec;
use crate::credentials::CredentialError;

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

/// One [`RequestLimit`] per cluster, shared by every client of that cluster: by name for a
/// `[clusters.<name>]` (with its own `max-requests` when it sets one), else by REST URL.
///
/// It also keeps each named cluster's [`ClusterAccess`] (its TLS setup and credentials), so
/// that its entries share one connection pool and one reload of its files.
#[derive(Debug)]
pub(crate) struct ClusterLimits {
    per_cluster: usize,
    clusters: Mutex<HashMap<String, Arc<RequestLimit>>>,
    /// By cluster name, with what it was opened from: a reload that changes the cluster's
    /// table opens it anew.
    accesses: Mutex<HashMap<String, NamedAccess>>,
}

/// A named cluster's access, and the definition it was opened from.
type NamedAccess = (ClusterSpec, Endpoint, Arc<ClusterAccess>);

impl ClusterLimits {
    /// At most `per_cluster` requests in flight to each cluster.
    pub(crate) fn new(per_cluster: usize) -> ClusterLimits {
        ClusterLimits {
            per_cluster,
            clusters: Mutex::new(HashMap::new()),
            accesses: Mutex::new(HashMap::new()),
        }
    }

    /// The limit of the cluster at `rest_url` (the same object for every caller).
    pub(crate) fn for_cluster(&self, rest_url: &str) -> Arc<RequestLimit> {
        self.limit(cluster_key(rest_url, None), self.per_cluster)
    }

    /// The limit of the named cluster `cluster` (the same object for every caller that names
    /// it): its own `max-requests`, else the host's.
    pub(crate) fn for_named(&self, cluster: &ClusterSpec) -> Arc<RequestLimit> {
        let limit = cluster.max_requests.unwrap_or(self.per_cluster);
        self.limit(cluster_key(&cluster.rest, Some(cluster)), limit)
    }

    /// The access of the named cluster `cluster` at `endpoint`, opened on first use (the
    /// same object for every caller that names it with the same definition).
    pub(crate) fn access(
        &self,
        endpoint: &Endpoint,
        cluster: &ClusterSpec,
    ) -> Result<Arc<ClusterAccess>, CredentialError> {
        let mut accesses = self.accesses.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((spec, at, access)) = accesses.get(&cluster.name)
            && spec == cluster
            && at == endpoint
        {
            return Ok(Arc::clone(access));
        }
        let access = Arc::new(ClusterAccess::open(endpoint, cluster)?);
        accesses.insert(
            cluster.name.clone(),
            (cluster.clone(), endpoint.clone(), Arc::clone(&access)),
        );
        Ok(access)
    }

    fn limit(&self, key: String, limit: usize) -> Arc<RequestLimit> {
        let mut clusters = self.clusters.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(
            clusters
                .entry(key)
                .or_insert_with(|| Arc::new(RequestLimit::new(limit))),
        )
    }
}

/// What tells one cluster's requests from another's: its name when it has one (two named
/// clusters may share an address through a proxy, each with its own limit), else its URL. The
/// two never collide: a URL has a scheme, a name is prefixed with `cluster:` here.
pub(crate) fn cluster_key(rest_url: &str, cluster: Option<&ClusterSpec>) -> String {
    match cluster {
        Some(cluster) => format!("cluster:{}", cluster.name),
        None => rest_url.trim_end_matches('/').to_string(),
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

    #[test]
    fn a_named_cluster_has_its_own_limit_even_at_a_shared_address() {
        let limits = ClusterLimits::new(2);
        let named = |name: &str, max_requests| ClusterSpec {
            name: name.to_string(),
            rest: "https://a:8443".to_string(),
            ca_file: None,
            client_cert: None,
            auth: None,
            max_requests,
        };
        let prod = limits.for_named(&named("prod", Some(5)));
        assert!(Arc::ptr_eq(
            &prod,
            &limits.for_named(&named("prod", Some(5)))
        ));
        let batch = limits.for_named(&named("batch", None));
        assert!(!Arc::ptr_eq(&prod, &batch), "one limit per name");
        assert!(!Arc::ptr_eq(&prod, &limits.for_cluster("https://a:8443")));
        // `max-requests = 5` lets five in; the unnamed default of 2 holds for `batch`.
        let held: Vec<_> = (0..5).map(|_| prod.acquire()).collect();
        assert_eq!(prod.in_flight(), held.len());
        assert_eq!(prod.limit, 5);
        assert_eq!(batch.limit, 2);
    }
}
