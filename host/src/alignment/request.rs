//! What a caller tells alignment about one vertex's decision, in plain terms.

use std::cell::RefCell;
use std::sync::{Arc, LazyLock};

use flowscale_sdk::{
    AlignmentContext, ContextParts, EvaluatedMetric, JobTopology, MetricList, ModeParams,
    ShipStrategy, SubtaskLoad,
};

/// One vertex's decision as the scaling pipeline (or `flowscale align`) describes it: the
/// vertex, where it stands, the target computed for it and the limits it was computed within.
///
/// Alignment turns it into the SDK's [`AlignmentContext`], adding the parameters of the job's
/// mode, which it resolved itself: callers never build contexts and never see the parameters.
#[derive(Debug, Clone)]
pub struct AlignmentRequest {
    /// The job's name. The identity texts are shared: the requests of every cycle hand over
    /// the texts the job and its graph keep, and the contexts lend them on, instead of a copy
    /// each.
    pub job: Arc<str>,
    /// The engine-assigned vertex id (Flink: the hex job-vertex id).
    pub vertex_id: Arc<str>,
    /// The vertex's human-readable name.
    pub vertex_name: Arc<str>,
    /// The parallelism the vertex runs at now.
    pub current: u32,
    /// The computed target: after scale factor, rounding and clamping to the limits.
    pub target: u32,
    /// The vertex's max parallelism, i.e. its number of key groups.
    pub max_parallelism: u32,
    /// The partition count of a source that reports one, else 0.
    pub source_partitions: u32,
    /// The lower parallelism limit.
    pub lower_limit: u32,
    /// The upper parallelism limit.
    pub upper_limit: u32,
    /// The ship strategies of the vertex's input edges: shared, so that the requests of every
    /// cycle hand over the strategies the job's graph keeps instead of a copy each.
    pub input_ship_strategies: Arc<[ShipStrategy]>,
    /// The vertex's evaluated metrics, by name: a list of an earlier context refilled with
    /// the same names keeps their number, and the context takes it without checking them
    /// again (see [`MetricList`]).
    pub metrics: MetricList,
    /// The job graph; the requests of one cycle share one graph instead of a copy each.
    pub topology: Arc<JobTopology>,
    /// The load of each subtask at the current parallelism, subtask `i` at index `i`; empty
    /// when the engine reported none (modes then read `None`).
    pub subtask_loads: Vec<SubtaskLoad>,
}

/// How many spare metric lists a thread keeps: more than the aligned vertices of one job's
/// cycle (whose requests are all built before any of them is aligned), so that every job
/// finds the lists the previous one gave back; bounded, so that one huge job cannot make the
/// spares grow without end.
const SPARE_LISTS: usize = 256;

thread_local! {
    /// The metric lists of contexts this thread decided on, names and all, for the next
    /// requests to fill in place (see [`metric_list`]).
    static SPARE_METRICS: RefCell<Vec<MetricList>> =
        const { RefCell::new(Vec::new()) };
    /// The job name this thread's last requests shared (see [`shared_job`]).
    static LAST_JOB: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

/// The empty text of a request's identity: one for the process, so that a request without
/// one (to an aligner that does not read it) allocates none.
pub(crate) fn no_text() -> Arc<str> {
    static EMPTY: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from(""));
    Arc::clone(&EMPTY)
}

/// `job` as a request's shared text: the one this thread's last requests shared when it is
/// the same name (a cycle builds the requests of a job's vertices one after the other), else
/// a new one, shared by the next requests.
pub(crate) fn shared_job(job: &str) -> Arc<str> {
    LAST_JOB.with(|last| {
        let mut last = last.borrow_mut();
        match &*last {
            Some(kept) if **kept == *job => Arc::clone(kept),
            _ => Arc::clone(last.insert(Arc::from(job))),
        }
    })
}

/// How many (key, number) pairs a thread keeps (see [`metric_list`]): the vertices of a job
/// have a few distinct sets of metrics (sources report more than the operators after them).
const KEPT_NUMBERS: usize = 4;

thread_local! {
    /// The numbers of the names recent metric lists were made from, by key (see
    /// [`metric_list`]), the most recent first.
    static NUMBERS: RefCell<Vec<(u32, u64)>> = const { RefCell::new(Vec::new()) };
}

/// A request's metric list holding `metrics()` (name and value, in that order), built in the
/// buffers of a context this thread decided on (see [`recycle`]): a cycle aligns vertices
/// with the same metric names job after job, so a name is usually already in place, nothing
/// is allocated, and the list keeps the number of its names for the next context.
///
/// `key` determines the names (equal keys, equal names in the same order: the caller's set of
/// present metrics). Once a list with a number was made from a key, a spare list with that
/// number gets the values of the next list of that key alone, without its names compared.
pub(crate) fn metric_list<'a, I: Iterator<Item = (&'a str, EvaluatedMetric)>>(
    key: u32,
    metrics: impl Fn() -> I,
) -> MetricList {
    // The vertices of a job take turns with a few sets of names (a source's list must not go
    // to the operator after it): a spare list of the key's names when the key has a number,
    // else one whose names no key claims yet (refilled with the same names, it teaches the
    // key its number), else the last one given back.
    let (wanted, mut list) = NUMBERS.with(|numbers| {
        let numbers = numbers.borrow();
        let wanted = numbers
            .iter()
            .find(|(kept, _)| *kept == key)
            .map(|&(_, n)| n);
        let list = SPARE_METRICS.with(|spare| {
            let mut spare = spare.borrow_mut();
            let at = match wanted {
                Some(w) => spare.iter().rposition(|l| l.names_number() == w),
                None => spare.iter().rposition(|l| {
                    let n = l.names_number();
                    n != 0 && numbers.iter().all(|&(_, claimed)| claimed != n)
                }),
            };
            match at {
                Some(at) => Some(spare.swap_remove(at)),
                None => spare.pop(),
            }
        });
        (wanted, list.unwrap_or_default())
    });
    let known = wanted.is_some_and(|w| w != 0 && w == list.names_number());
    if known && list.refill_values(metrics().map(|(_, value)| value)) {
        return list;
    }
    list.refill(metrics());
    let number = list.names_number();
    if number != 0 {
        NUMBERS.with(|numbers| {
            let mut numbers = numbers.borrow_mut();
            numbers.retain(|(kept, _)| *kept != key);
            numbers.insert(0, (key, number));
            numbers.truncate(KEPT_NUMBERS);
        });
    }
    list
}

/// Gives the metric list of a context that was decided on back for the next requests'
/// metrics.
pub(crate) fn recycle(ctx: AlignmentContext) {
    let metrics = ctx.into_metric_list();
    if metrics.is_empty() {
        return;
    }
    SPARE_METRICS.with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < SPARE_LISTS {
            spare.push(metrics);
        }
    });
}

impl AlignmentRequest {
    /// A request for a vertex scaling from `current` to `target` over `max_parallelism` key
    /// groups, with the limits `[1, u32::MAX]` and everything else empty.
    pub fn new(current: u32, target: u32, max_parallelism: u32) -> AlignmentRequest {
        AlignmentRequest {
            job: no_text(),
            vertex_id: no_text(),
            vertex_name: no_text(),
            current,
            target,
            max_parallelism,
            source_partitions: 0,
            lower_limit: 1,
            upper_limit: u32::MAX,
            input_ship_strategies: Arc::default(),
            metrics: MetricList::new(),
            topology: Arc::default(),
            subtask_loads: Vec::new(),
        }
    }

    /// The SDK's context of this decision, carrying the selected mode's parameters.
    pub(crate) fn into_context(self, params: ModeParams) -> AlignmentContext {
        AlignmentContext::from_parts(ContextParts {
            job: self.job,
            vertex_id: self.vertex_id,
            vertex_name: self.vertex_name,
            current: self.current,
            target: self.target,
            max_parallelism: self.max_parallelism,
            source_partitions: self.source_partitions,
            lower_limit: self.lower_limit,
            upper_limit: self.upper_limit,
            input_ship_strategies: self.input_ship_strategies,
            metrics: self.metrics,
            topology: self.topology,
            params,
            subtask_loads: self.subtask_loads,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(x: f64) -> EvaluatedMetric {
        EvaluatedMetric {
            current: x,
            average: x,
        }
    }

    #[test]
    fn a_metric_list_reuses_the_names_of_the_last_context() {
        let first = metric_list(1, || {
            [("LAG", value(1.0)), ("LOAD", value(0.5))].into_iter()
        });
        let lag_buffer = first[0].0.as_ptr();
        let mut request = AlignmentRequest::new(2, 3, 8);
        request.metrics = first;
        recycle(request.into_context(ModeParams::default()));
        // The same names again: the same buffers, the new values.
        let second = metric_list(1, || {
            [("LAG", value(2.0)), ("LOAD", value(0.7))].into_iter()
        });
        assert_eq!(second[0].0.as_ptr(), lag_buffer);
        assert_eq!(
            second.to_vec(),
            vec![
                ("LAG".to_string(), value(2.0)),
                ("LOAD".to_string(), value(0.7))
            ]
        );
    }

    #[test]
    fn the_lists_of_a_whole_batch_come_back_for_the_next_one() {
        // A job's requests are all built before any is aligned: each takes a list of its own.
        let batch = |x: f64| -> Vec<MetricList> {
            (0..3)
                .map(|_| metric_list(1, || [("LAG", value(x)), ("LOAD", value(x))].into_iter()))
                .collect()
        };
        let first = batch(1.0);
        let mut buffers: Vec<*const u8> = first.iter().map(|l| l[1].0.as_ptr()).collect();
        let distinct = {
            let mut b = buffers.clone();
            b.sort_unstable();
            b.dedup();
            b.len()
        };
        assert_eq!(distinct, 3, "three requests, three lists");
        for list in first {
            let mut request = AlignmentRequest::new(2, 3, 8);
            request.metrics = list;
            recycle(request.into_context(ModeParams::default()));
        }
        // The next job's three requests fill the same three lists.
        let second = batch(2.0);
        let mut reused: Vec<*const u8> = second.iter().map(|l| l[1].0.as_ptr()).collect();
        buffers.sort_unstable();
        reused.sort_unstable();
        assert_eq!(reused, buffers);
        assert!(second.iter().all(|l| l[0].1 == value(2.0)));
    }

    #[test]
    fn a_list_of_the_wanted_names_is_found_under_others_given_back_later() {
        let source = || [("LAG", value(1.0)), ("RATE", value(2.0))].into_iter();
        let operator = || [("BUSY", value(3.0))].into_iter();
        let give_back = |list: MetricList| {
            let mut request = AlignmentRequest::new(2, 3, 8);
            request.metrics = list;
            recycle(request.into_context(ModeParams::default()));
        };
        // Each key learns the number of its names once a spare of those names is refilled
        // with them.
        give_back(metric_list(11, source));
        let first_source = metric_list(11, source);
        give_back(metric_list(12, operator));
        let first_operator = metric_list(12, operator);
        let source_buffer = first_source[0].0.as_ptr();
        let operator_buffer = first_operator[0].0.as_ptr();
        give_back(first_source);
        give_back(first_operator);
        // The operator's list was given back last; the source still gets its own.
        let again = metric_list(11, || {
            [("LAG", value(5.0)), ("RATE", value(6.0))].into_iter()
        });
        assert_eq!(again[0].0.as_ptr(), source_buffer);
        assert_eq!(
            again.to_vec(),
            vec![
                ("LAG".to_string(), value(5.0)),
                ("RATE".to_string(), value(6.0))
            ]
        );
        let again = metric_list(12, || [("BUSY", value(7.0))].into_iter());
        assert_eq!(again[0].0.as_ptr(), operator_buffer);
        assert_eq!(again.to_vec(), vec![("BUSY".to_string(), value(7.0))]);
    }

    #[test]
    fn a_metric_list_holds_exactly_what_it_was_given() {
        let mut request = AlignmentRequest::new(2, 3, 8);
        request.metrics = metric_list(2, || {
            [("A", value(1.0)), ("B", value(2.0)), ("C", value(3.0))].into_iter()
        });
        recycle(request.into_context(ModeParams::default()));
        // Fewer, and other names, than the spare holds.
        let list = metric_list(3, || [("B", value(5.0)), ("D", value(6.0))].into_iter());
        assert_eq!(
            list.to_vec(),
            vec![("B".to_string(), value(5.0)), ("D".to_string(), value(6.0))]
        );
        // No spare left (nothing was recycled since).
        let list = metric_list(4, || [("A", value(1.0)), ("B", value(2.0))].into_iter());
        assert_eq!(list.len(), 2);
        assert!(metric_list(0, std::iter::empty).is_empty());
    }
}
