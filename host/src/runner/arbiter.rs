//! The slot arbiter's core: how a cluster's free slots are shared among the rescales due in one
//! round, as a pure function of the free slots and the requests.
//!
//! A job of one slot-sharing group holds as many slots as its widest vertex. In a round:
//! - every scale-down (a job wanting no more slots than it holds) goes through, whatever else
//!   is asked: blocking one would only keep slots from the others; the slots it gives back are
//!   free for the scale-ups of the same round;
//! - the scale-ups are served one after the other, a higher `scaling.priority` first, then, at
//!   equal priority, the job whose lag grows fastest per missing slot (the most lag each slot
//!   removes), then by name (so that the grants never depend on the order the requests came
//!   in). Each takes what it is missing, or what is left: the first that cannot be served in
//!   full is cut to what remains and the ones after it get nothing this round (queued).
//!
//! Nothing here knows where the free slots come from (a simulated cluster, Flink's REST API,
//! a table several hosts share): the caller reads them and realizes the grants.

/// One job's request in a round.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SlotRequest {
    /// The job.
    pub(crate) job: String,
    /// The slots it holds now (its widest running vertex).
    pub(crate) held: u32,
    /// The slots its decision needs (its widest decided vertex).
    pub(crate) wanted: u32,
    /// `scaling.priority`: higher is served first.
    pub(crate) priority: i64,
    /// How fast its lag grows, in records per second (negative when it shrinks); what decides
    /// between jobs of equal priority.
    pub(crate) lag_growth: f64,
    /// The fewest slots a scale-up of a higher priority may leave it (0: it may take all).
    pub(crate) floor: u32,
}

impl SlotRequest {
    /// True when the request needs no free slot.
    pub(crate) fn is_scale_down(&self) -> bool {
        self.wanted <= self.held
    }

    /// The slots a scale-up is missing.
    fn missing(&self) -> u32 {
        self.wanted.saturating_sub(self.held)
    }

    /// Lag growth per missing slot: a non-finite or negative growth counts as none.
    fn urgency(&self) -> f64 {
        let growth = if self.lag_growth.is_finite() {
            self.lag_growth.max(0.0)
        } else {
            0.0
        };
        growth / f64::from(self.missing().max(1))
    }
}

/// What a request was granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlotGrant {
    /// The job.
    pub(crate) job: String,
    /// The slots it held before the round.
    pub(crate) held: u32,
    /// The slots it may hold after the round (between `held` and `wanted` for a scale-up,
    /// `wanted` for a scale-down).
    pub(crate) granted: u32,
    /// What it asked for.
    pub(crate) wanted: u32,
    /// The free slots left when its turn came (after the scale-downs of the round): what an
    /// `InsufficientSlots` event reports.
    pub(crate) free_at_turn: u32,
}

impl SlotGrant {
    /// True when the job got less than it asked for.
    pub(crate) fn is_short(&self) -> bool {
        self.granted < self.wanted
    }

    /// True for a grant that frees slots the round's scale-ups may be waiting for: a
    /// scale-down, or slots taken back.
    pub(crate) fn is_scale_down(&self) -> bool {
        self.granted <= self.held
    }
}

/// Shares `free` slots (held by no job) among `requests`: one grant per request, in the order
/// of `requests`.
pub(crate) fn arbitrate(free: u32, requests: &[SlotRequest]) -> Vec<SlotGrant> {
    let mut free = u64::from(free);
    for request in requests.iter().filter(|r| r.is_scale_down()) {
        free += u64::from(request.held - request.wanted);
    }
    let mut grants: Vec<Option<SlotGrant>> = vec![None; requests.len()];
    let mut ups: Vec<usize> = Vec::with_capacity(requests.len());
    for (index, request) in requests.iter().enumerate() {
        if request.is_scale_down() {
            grants[index] = Some(SlotGrant {
                job: request.job.clone(),
                held: request.held,
                granted: request.wanted,
                wanted: request.wanted,
                free_at_turn: u32::try_from(free).unwrap_or(u32::MAX),
            });
        } else {
            ups.push(index);
        }
    }
    ups.sort_by(|&a, &b| {
        let (a, b) = (&requests[a], &requests[b]);
        b.priority
            .cmp(&a.priority)
            .then_with(|| b.urgency().total_cmp(&a.urgency()))
            .then_with(|| a.job.cmp(&b.job))
            .then_with(|| a.missing().cmp(&b.missing()))
    });
    for index in ups {
        let request = &requests[index];
        let extra = u64::from(request.missing()).min(free);
        let free_at_turn = u32::try_from(free).unwrap_or(u32::MAX);
        free -= extra;
        grants[index] = Some(SlotGrant {
            job: request.job.clone(),
            held: request.held,
            granted: request.held + u32::try_from(extra).unwrap_or(0),
            wanted: request.wanted,
            free_at_turn,
        });
    }
    let mut grants: Vec<SlotGrant> = grants.into_iter().flatten().collect();
    reclaim(requests, &mut grants);
    grants
}

/// Serves the scale-ups still short, the highest priority first, with slots taken back from
/// jobs of a strictly lower priority (the lowest first, then the one holding most above its
/// floor, then by name), never below a job's floor.
fn reclaim(requests: &[SlotRequest], grants: &mut [SlotGrant]) {
    let mut short: Vec<usize> = (0..requests.len())
        .filter(|&i| grants[i].is_short() && !requests[i].is_scale_down())
        .collect();
    short.sort_by(|&a, &b| {
        requests[b]
            .priority
            .cmp(&requests[a].priority)
            .then_with(|| requests[a].job.cmp(&requests[b].job))
    });
    for taker in short {
        let priority = requests[taker].priority;
        let mut donors: Vec<usize> = (0..requests.len())
            .filter(|&i| requests[i].priority < priority)
            .collect();
        donors.sort_by(|&a, &b| {
            let spare = |i: usize| grants[i].granted.saturating_sub(requests[i].floor);
            requests[a]
                .priority
                .cmp(&requests[b].priority)
                .then_with(|| spare(b).cmp(&spare(a)))
                .then_with(|| requests[a].job.cmp(&requests[b].job))
        });
        for donor in donors {
            let missing = grants[taker].wanted - grants[taker].granted;
            if missing == 0 {
                break;
            }
            let spare = grants[donor].granted.saturating_sub(requests[donor].floor);
            let taken = spare.min(missing);
            grants[donor].granted -= taken;
            grants[taker].granted += taken;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn request(job: &str, held: u32, wanted: u32, priority: i64, lag_growth: f64) -> SlotRequest {
        SlotRequest {
            job: job.to_string(),
            held,
            wanted,
            priority,
            lag_growth,
            floor: held,
        }
    }

    fn granted(grants: &[SlotGrant]) -> Vec<u32> {
        grants.iter().map(|g| g.granted).collect()
    }

    #[test]
    fn a_higher_priority_is_served_first_whatever_its_lag() {
        let requests = [
            request("low", 4, 12, 0, 1e6),
            request("high", 4, 10, 10, 0.0),
        ];
        // 8 free: high takes its 6, low gets the 2 left.
        let grants = arbitrate(8, &requests);
        assert_eq!(granted(&grants), vec![6, 10]);
        assert!(grants[0].is_short());
        assert_eq!(grants[0].free_at_turn, 2);
        assert!(!grants[1].is_short());
    }

    #[test]
    fn at_equal_priority_the_fastest_lag_growth_per_missing_slot_goes_first() {
        // a: 1000 rec/s over 10 missing slots = 100 per slot; b: 600 over 2 = 300 per slot.
        let requests = [request("a", 2, 12, 0, 1000.0), request("b", 2, 4, 0, 600.0)];
        let grants = arbitrate(5, &requests);
        assert_eq!(granted(&grants), vec![5, 4]);
    }

    #[test]
    fn a_scale_down_frees_slots_for_the_same_round() {
        let requests = [request("up", 2, 8, 0, 1.0), request("down", 10, 4, -5, 0.0)];
        // No slot free before the round; the scale-down gives 6 back.
        let grants = arbitrate(0, &requests);
        assert_eq!(granted(&grants), vec![8, 4]);
        assert_eq!(grants[0].free_at_turn, 6);
    }

    #[test]
    fn nothing_free_queues_every_scale_up_at_what_it_holds() {
        let requests = [request("a", 3, 5, 1, 1.0), request("b", 1, 2, 0, 1.0)];
        let grants = arbitrate(0, &requests);
        assert_eq!(granted(&grants), vec![3, 1]);
        assert!(grants.iter().all(SlotGrant::is_short));
    }

    #[test]
    fn a_short_higher_priority_takes_back_what_lower_ones_grew_into() {
        let mut low = request("low", 10, 10, 0, 0.0);
        low.floor = 4;
        let mut lowest = request("lowest", 6, 6, -1, 0.0);
        lowest.floor = 5;
        let requests = [low, lowest, request("high", 2, 12, 10, 1.0)];
        // 1 free; high misses 10: 1 free, then 1 from `lowest` (priority -1, down to its floor
        // of 5), then 6 from `low` (down to 4). It gets 10 of its 12.
        let grants = arbitrate(1, &requests);
        assert_eq!(granted(&grants), vec![4, 5, 10]);
        assert!(grants[0].is_scale_down() && grants[1].is_scale_down());
        assert!(grants[2].is_short());
    }

    #[test]
    fn equal_priorities_take_nothing_back() {
        let mut other = request("other", 10, 10, 10, 0.0);
        other.floor = 0;
        let grants = arbitrate(0, &[other, request("up", 2, 6, 10, 1.0)]);
        assert_eq!(granted(&grants), vec![10, 2]);
    }

    #[test]
    fn a_nan_lag_growth_counts_as_none() {
        let requests = [
            request("nan", 1, 3, 0, f64::NAN),
            request("slow", 1, 3, 0, 1.0),
        ];
        assert_eq!(granted(&arbitrate(2, &requests)), vec![1, 3]);
    }

    fn requests() -> impl Strategy<Value = Vec<SlotRequest>> {
        prop::collection::vec((0u32..40, 0u32..40, -3i64..3, prop::num::f64::ANY), 0..10).prop_map(
            |rows| {
                rows.into_iter()
                    .enumerate()
                    .map(|(i, (held, wanted, priority, growth))| {
                        request(&format!("job{i}"), held, wanted, priority, growth)
                    })
                    .collect()
            },
        )
    }

    /// The slots handed out beyond what the jobs hold.
    fn handed_out(requests: &[SlotRequest], grants: &[SlotGrant]) -> i64 {
        requests
            .iter()
            .zip(grants)
            .map(|(r, g)| i64::from(g.granted) - i64::from(r.held))
            .sum()
    }

    proptest! {
        /// The jobs never hold more after the round than they held plus the free slots, and
        /// the grants do not depend on the order of the requests.
        #[test]
        fn never_more_than_free_over_any_order(
            free in 0u32..60,
            requests in requests(),
            seed in any::<u64>(),
        ) {
            let grants = arbitrate(free, &requests);
            prop_assert_eq!(grants.len(), requests.len());
            prop_assert!(handed_out(&requests, &grants) <= i64::from(free));
            for (r, g) in requests.iter().zip(&grants) {
                prop_assert_eq!(&r.job, &g.job);
                prop_assert!(g.granted <= r.wanted.max(r.held));
                // Below what it asked and held only when taken back, never below its floor.
                if g.granted < r.wanted.min(r.held) {
                    prop_assert!(g.granted >= r.floor);
                }
            }
            // Another order: a rotation and a reversal chosen by the seed.
            let mut shuffled: Vec<SlotRequest> = requests.clone();
            if !shuffled.is_empty() {
                let len = shuffled.len();
                shuffled.rotate_left(usize::try_from(seed % len as u64).unwrap_or(0));
            }
            if seed % 2 == 1 {
                shuffled.reverse();
            }
            let again = arbitrate(free, &shuffled);
            prop_assert!(handed_out(&shuffled, &again) <= i64::from(free));
            for g in &again {
                let first = grants.iter().find(|x| x.job == g.job);
                prop_assert_eq!(first.map(|x| x.granted), Some(g.granted));
            }
        }

        /// A scale-up of a higher priority is never cut while one of a lower priority gets
        /// slots.
        #[test]
        fn a_higher_priority_is_never_cut_while_a_lower_one_gets_slots(
            free in 0u32..60,
            requests in requests(),
        ) {
            let grants = arbitrate(free, &requests);
            for (hi, hg) in requests.iter().zip(&grants) {
                for (lo, lg) in requests.iter().zip(&grants) {
                    let both_up = !hi.is_scale_down() && !lo.is_scale_down();
                    if both_up && hi.priority > lo.priority && lg.granted > lo.held {
                        prop_assert_eq!(hg.granted, hi.wanted, "{:?} cut while {:?} got slots", hi, lo);
                    }
                }
            }
        }

        /// A scale-down is granted in full, even with no slot free and every other request a
        /// higher priority (slots taken back can only make it smaller).
        #[test]
        fn a_scale_down_is_never_blocked(free in 0u32..60, requests in requests()) {
            let grants = arbitrate(free, &requests);
            for (r, g) in requests.iter().zip(&grants) {
                if r.is_scale_down() {
                    prop_assert!(g.granted <= r.wanted);
                    prop_assert!(g.granted == r.wanted || g.granted >= r.floor);
                }
            }
        }

        /// Slots are taken back from a job only for a scale-up of a strictly higher priority,
        /// and that one then got every slot it could: no lower job above its floor is left.
        #[test]
        fn slots_are_taken_back_only_for_a_higher_priority(
            free in 0u32..60,
            requests in requests(),
        ) {
            let grants = arbitrate(free, &requests);
            for (r, g) in requests.iter().zip(&grants) {
                if g.granted < r.wanted.min(r.held) {
                    let for_higher = requests.iter().zip(&grants).any(|(o, og)| {
                        o.priority > r.priority && !o.is_scale_down() && og.granted > o.held
                    });
                    prop_assert!(for_higher, "{:?} shrunk to {} for nobody", r, g.granted);
                }
            }
            for (hi, hg) in requests.iter().zip(&grants) {
                if hi.is_scale_down() || !hg.is_short() {
                    continue;
                }
                for (lo, lg) in requests.iter().zip(&grants) {
                    if lo.priority < hi.priority {
                        prop_assert!(lg.granted <= lo.floor,
                            "{:?} short while {:?} keeps {}", hi, lo, lg.granted);
                    }
                }
            }
        }
    }
}
