//! `load-align`: load-aware parallelism alignment for skewed keys.
//!
//! The built-in modes assume every key group (or partition) carries the same load and count
//! groups per subtask. With hot keys that is wrong: the busiest subtask bounds the vertex, and
//! which parallelism spreads the hot groups best depends on where they sit in Flink's
//! key-group ranges. This mode estimates each unit's load from the per-subtask load the
//! engine reports at the current parallelism, predicts the busiest subtask for every
//! candidate parallelism, and picks the cheapest one that carries the load as the target
//! assumed.
//!
//! * Units: the source partitions when the vertex reports them (`N = S`, subtask `i` of `p`
//!   reads partitions `j` with `j mod p == i`), else the key groups (`N = K`, subtask `i` of
//!   `p` owns `[ceil(i*K/p), ceil((i+1)*K/p))`).
//! * Estimate: each subtask's load (records in per second, or its busy ratio, see `signal`)
//!   is spread evenly over the units it owns now. That gives a load per unit.
//! * Prediction: for a parallelism `p`, the busiest subtask's share of the vertex's load,
//!   `share(p)`. With an even spread it is `1/p`; the computed target `t` assumed exactly that,
//!   i.e. `1/t`.
//! * Never heavier than BALANCED. The per-subtask load says how much each observed subtask's
//!   units carry together, never where inside them: all of it may sit on one unit. So a
//!   parallelism `p` is only taken when it is certainly no heavier than BALANCED's answer `b`
//!   whatever the load inside the observed subtasks ([`Knowledge`]): each subtask of `p` lies
//!   inside one subtask of `b` (it refines `b` there, so carries at most what that one
//!   carries), or the observed subtasks it touches carry at most what `b`'s busiest subtask
//!   certainly carries. `b` itself always qualifies, and so does `2b` (its ranges split each
//!   of `b`'s in two). Loads seen at earlier parallelisms ([`decide_with`]) narrow both bounds;
//!   the host does not pass them to a mode yet, so [`LoadAlign`] uses the current load alone.
//! * Choice, over the direction's region (scale-up `[t, cap]`, scale-down `[t, min(c, cap)]`,
//!   scanned upward, `cap = min(N, K, upper)`) up to `max(ceil(t * (1 + reach)), 2b)`, among
//!   the parallelisms never heavier than `b` whose cost pays (any `p <= b`; above `b`, at least
//!   `min-gain` of the load taken off the predicted busiest subtask per added subtask): the
//!   lowest `p` with `share(p) <= tolerance / t`. If none, the lowest `p` whose share is
//!   within `slack` of the lowest share there (`b` when nothing else qualifies). An empty
//!   region answers `min(t, cap)`.
//! * A load that is nearly even (its hottest unit at most `min-skew` above the mean unit)
//!   answers as BALANCED: measurement noise must not move the parallelism.
//! * Without per-subtask load (the engine reports none, the list does not match the current
//!   parallelism, or the chosen signal is missing anywhere) it answers exactly as BALANCED.
//!   With a load that is even per unit it also answers as BALANCED (`ceil(N/p) <= N/t` holds
//!   exactly when BALANCED accepts `p`).
//! * Explanation: one `info` log line per decision (shown by `flowscale align` and in the run
//!   log) names the chosen `p`, the predicted busiest share there and at `t`, `1/t`, and
//!   BALANCED's answer it is never heavier than.
//!
//! Parameters (`scaling.alignment.mode.<name>.*`):
//!
//! * `signal`: `RECORDS_IN` (each subtask's `numRecordsInPerSecond`), `BUSY` (its busy ratio)
//!   or `AUTO` (records in when every subtask reports it, else busy). Default `AUTO`.
//! * `tolerance`: a number in `[1, 2]`, default `1`: accept `p` when its predicted busiest
//!   share is at most `tolerance / t`. Above 1 trades a little headroom for fewer subtasks.
//! * `slack`: a number in `[0, 1]`, default `0.02`: when no `p` is accepted, take the lowest
//!   `p` whose share is within `(1 + slack)` of the lowest share the fallback considers,
//!   instead of paying for more subtasks for a marginally lighter busiest one.
//! * `reach`: a number in `[0, 100]`, default `0.5`: only `p <= ceil(t * (1 + reach))` (or
//!   up to `2b`) are considered, for acceptance and fallback alike. The estimate spreads a
//!   subtask's load evenly over its units, so it cannot tell one hot key group from many warm
//!   ones and
//!   predicts a lighter busiest subtask for ever more subtasks; without a reach a key group
//!   nearly as hot as `1/t` would send the answer towards the cap. `100` is practically
//!   unbounded.
//! * `min-skew`: a number in `[0, 10]`, default `0.1`: the estimated hottest unit must carry
//!   more than `(1 + min-skew)` times the mean unit's load for the load to count as skewed;
//!   otherwise the answer is BALANCED's.
//! * `min-gain`: a number in `[0, 1]`, default `0.03`: a parallelism above BALANCED's `b`
//!   must take at least this share of the load off the predicted busiest subtask per subtask
//!   it adds (`share(b) - share(p) >= min-gain * (p - b)`). Refining `b` doubles its cost, and
//!   the prediction may be optimistic; `0` takes any refinement that meets the target. With
//!   `0.03`, two hot key groups observed at 2 of 128 groups get 8 for BALANCED's 4 (4.4 points
//!   per added subtask) but not 12 for its 6 (2.0) nor 14 for its 7 (1.4): on the 8,064 cases
//!   of `examples/load-align-vs-balanced.py` that is 1.5x BALANCED's subtasks per case for a
//!   mean gain of 6.3 points (the table in `docs/simulate.md`).
//! * `never-heavier`: `true` (default) or `false`: `false` drops the guarantee above (and
//!   `min-gain`) and lets the even-spread prediction alone decide within `reach`, as in
//!   `load-align` 0.1.0: cheaper and lighter when the load inside a subtask really is even,
//!   heavier than BALANCED where it is not.

#![warn(missing_docs, unreachable_pub)]

use flowscale_sdk::{AlignmentContext, AlignmentMode, ModeError, ModeParams, SubtaskLoad};

/// The implementation id (`scaling.alignment.mode.<name>.class = "load-align"`).
pub const ID: &str = "load-align";

const PARAMS: &[&str] = &[
    "class",
    "signal",
    "tolerance",
    "slack",
    "reach",
    "min-skew",
    "min-gain",
    "never-heavier",
];
const SIGNALS: &[&str] = &["AUTO", "RECORDS_IN", "BUSY"];
/// Relative slack for float comparisons: shares that are equal in exact arithmetic compare
/// equal.
const EPS: f64 = 1e-9;

/// Which per-subtask figure is taken as its load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Records in when every subtask reports them, else busy ratios.
    Auto,
    /// `numRecordsInPerSecond`.
    RecordsIn,
    /// The busy ratio.
    Busy,
}

/// The parameters, parsed and checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// The load signal.
    pub signal: Signal,
    /// Accept `share(p) <= tolerance / t`.
    pub tolerance: f64,
    /// Fallback: within `(1 + slack)` of the lowest share.
    pub slack: f64,
    /// Only `p <= ceil(t * (1 + reach))` are considered.
    pub reach: f64,
    /// Below this skew (hottest unit over the mean unit, minus 1) the load counts as even.
    pub min_skew: f64,
    /// A parallelism above BALANCED's choice `b` must take at least this share of the load
    /// off the predicted busiest subtask per added subtask.
    pub min_gain: f64,
    /// Only parallelisms certainly no heavier than BALANCED's answer (false: the even-spread
    /// prediction alone decides, as before).
    pub never_heavier: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            signal: Signal::Auto,
            tolerance: 1.0,
            slack: 0.02,
            reach: 0.5,
            min_skew: 0.1,
            min_gain: 0.03,
            never_heavier: true,
        }
    }
}

impl Settings {
    /// Parses and checks the parameters; errors name the full key.
    pub fn parse(params: &ModeParams) -> Result<Settings, ModeError> {
        if let Some((unknown, _)) = params.iter().find(|(k, _)| !PARAMS.contains(k)) {
            return Err(params
                .error(
                    unknown,
                    &format!(
                        "is not a parameter of {ID} (known: signal, tolerance, slack, \
                         reach, min-skew, min-gain, never-heavier)"
                    ),
                )
                .into());
        }
        let mut settings = Settings {
            signal: match params.get_choice("signal", SIGNALS)? {
                Some("RECORDS_IN") => Signal::RecordsIn,
                Some("BUSY") => Signal::Busy,
                _ => Signal::Auto,
            },
            ..Settings::default()
        };
        let ranged = |name: &str, lo: f64, hi: f64| -> Result<Option<f64>, ModeError> {
            match params.get_f64(name)? {
                Some(v) if !(lo..=hi).contains(&v) => Err(params
                    .error(name, &format!("must be a number in [{lo}, {hi}], got {v}"))
                    .into()),
                other => Ok(other),
            }
        };
        if let Some(v) = ranged("tolerance", 1.0, 2.0)? {
            settings.tolerance = v;
        }
        if let Some(v) = ranged("slack", 0.0, 1.0)? {
            settings.slack = v;
        }
        if let Some(v) = ranged("reach", 0.0, 100.0)? {
            settings.reach = v;
        }
        if let Some(v) = ranged("min-skew", 0.0, 10.0)? {
            settings.min_skew = v;
        }
        if let Some(v) = ranged("min-gain", 0.0, 1.0)? {
            settings.min_gain = v;
        }
        if let Some(v) = params.get_bool("never-heavier")? {
            settings.never_heavier = v;
        }
        Ok(settings)
    }
}

/// The per-subtask loads as one non-negative number each, or `None` when the signal is not
/// known for every subtask or the loads sum to nothing.
pub fn load_vector(loads: &[SubtaskLoad], signal: Signal) -> Option<Vec<f64>> {
    let pick = |f: fn(&SubtaskLoad) -> Option<f64>| -> Option<Vec<f64>> {
        let v: Option<Vec<f64>> = loads
            .iter()
            .map(|l| f(l).filter(|x| x.is_finite() && *x >= 0.0))
            .collect();
        v.filter(|v| v.iter().sum::<f64>() > 0.0)
    };
    let records = |l: &SubtaskLoad| l.records_in_per_second;
    let busy = |l: &SubtaskLoad| l.busy_ratio;
    match signal {
        Signal::RecordsIn => pick(records),
        Signal::Busy => pick(busy),
        Signal::Auto => pick(records).or_else(|| pick(busy)),
    }
}

/// How units are assigned to subtasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignment {
    /// Flink's key-group ranges: subtask `i` of `p` owns `[ceil(i*n/p), ceil((i+1)*n/p))`.
    KeyGroupRanges,
    /// Partition `j` is read by subtask `j mod p`.
    Modulo,
}

/// The first key group of subtask `i` of `p` over `n` groups: `ceil(i*n/p)`.
fn range_start(i: u64, n: u64, p: u64) -> usize {
    ((i * n).div_ceil(p)) as usize
}

/// The estimated load of each of `n` units, from the loads of the `c = loads.len()` subtasks
/// that run now: each subtask's load spread evenly over the units it owns.
pub fn unit_loads(loads: &[f64], n: u32, assignment: Assignment) -> Vec<f64> {
    let (n64, c) = (u64::from(n), loads.len() as u64);
    let mut units = vec![0.0; n as usize];
    if c == 0 {
        return units;
    }
    match assignment {
        Assignment::KeyGroupRanges => {
            for (i, load) in loads.iter().enumerate() {
                let (a, b) = (
                    range_start(i as u64, n64, c),
                    range_start(i as u64 + 1, n64, c),
                );
                if b > a {
                    let each = load / (b - a) as f64;
                    units[a..b].iter_mut().for_each(|u| *u = each);
                }
            }
        }
        Assignment::Modulo => {
            let mut counts = vec![0usize; c as usize];
            for j in 0..n as usize {
                counts[j % c as usize] += 1;
            }
            for (j, u) in units.iter_mut().enumerate() {
                let i = j % c as usize;
                *u = loads[i] / counts[i] as f64;
            }
        }
    }
    units
}

/// Predicts the busiest subtask's share of the total load at parallelism `p`.
#[derive(Debug, Clone)]
pub struct Predictor {
    assignment: Assignment,
    units: Vec<f64>,
    /// Prefix sums of `units` (key-group ranges).
    prefix: Vec<f64>,
    total: f64,
}

impl Predictor {
    /// A predictor over per-unit loads.
    pub fn new(units: Vec<f64>, assignment: Assignment) -> Predictor {
        let mut prefix = Vec::with_capacity(units.len() + 1);
        let mut acc = 0.0;
        prefix.push(0.0);
        for u in &units {
            acc += u;
            prefix.push(acc);
        }
        Predictor {
            assignment,
            units,
            prefix,
            total: acc,
        }
    }

    /// The busiest subtask's share of the load at parallelism `p` (0 for `p == 0` or no load).
    pub fn busiest_share(&self, p: u32) -> f64 {
        let n = self.units.len() as u64;
        if p == 0 || self.total <= 0.0 {
            return 0.0;
        }
        let p64 = u64::from(p);
        let busiest = match self.assignment {
            Assignment::KeyGroupRanges => (0..p64)
                .map(|i| {
                    let a = range_start(i, n, p64).min(n as usize);
                    let b = range_start(i + 1, n, p64).min(n as usize);
                    self.prefix[b] - self.prefix[a]
                })
                .fold(0.0, f64::max),
            Assignment::Modulo => {
                let mut sums = vec![0.0; p as usize];
                for (j, u) in self.units.iter().enumerate() {
                    sums[j % p as usize] += u;
                }
                sums.into_iter().fold(0.0, f64::max)
            }
        };
        busiest / self.total
    }

    /// The largest single unit's share: no parallelism predicts a busiest subtask below it.
    pub fn hottest_unit_share(&self) -> f64 {
        if self.total <= 0.0 {
            return 0.0;
        }
        self.units.iter().copied().fold(0.0, f64::max) / self.total
    }
}

/// The subtask of `p` that owns unit `u` of `n`: Flink's `u * p / n` for key-group ranges,
/// `u mod p` for partitions.
fn owner(u: usize, n: usize, p: usize, assignment: Assignment) -> usize {
    match assignment {
        Assignment::KeyGroupRanges => ((u as u64 * p as u64) / n as u64) as usize,
        Assignment::Modulo => u % p,
    }
}

/// The units subtask `i` of `p` owns, of `n`.
fn units_of(
    i: usize,
    n: usize,
    p: usize,
    assignment: Assignment,
) -> Box<dyn Iterator<Item = usize>> {
    match assignment {
        Assignment::KeyGroupRanges => {
            let (a, b) = (
                range_start(i as u64, n as u64, p as u64).min(n),
                range_start(i as u64 + 1, n as u64, p as u64).min(n),
            );
            Box::new(a..b)
        }
        Assignment::Modulo => Box::new((i..n).step_by(p.max(1))),
    }
}

/// What observed per-subtask loads say for certain about where the load sits.
///
/// Each observation is the load of every subtask at one parallelism, as shares of the total.
/// It pins down the load of each observed subtask's units as a whole, never how it is spread
/// inside them: all of it may sit on one unit. So the load of a set of units is at most the
/// load of the observed subtasks it touches, under every observation (the minimum of those
/// sums), and a parallelism's busiest subtask carries at least what any observation forces on
/// it. Several observations at different parallelisms narrow both bounds: their knowledge
/// intersects.
#[derive(Debug, Clone)]
pub struct Knowledge {
    n: usize,
    assignment: Assignment,
    observations: Vec<Vec<f64>>,
    /// Prefix sums of each observation (key-group ranges: a range touches a run of subtasks).
    prefixes: Vec<Vec<f64>>,
}

impl Knowledge {
    /// Knowledge over `n` units from observed loads (one list per observed parallelism, index
    /// = subtask). Lists with no load or more subtasks than units are ignored; each kept list
    /// is scaled to shares of its total.
    pub fn new(n: u32, assignment: Assignment, observations: Vec<Vec<f64>>) -> Knowledge {
        let n = n as usize;
        let observations: Vec<Vec<f64>> = observations
            .into_iter()
            .filter(|o| !o.is_empty() && o.len() <= n)
            .filter_map(|o| {
                let total: f64 = o.iter().sum();
                (total.is_finite() && total > 0.0).then(|| o.iter().map(|x| x / total).collect())
            })
            .collect();
        let prefixes = observations
            .iter()
            .map(|o| {
                std::iter::once(0.0)
                    .chain(o.iter().scan(0.0, |acc, x| {
                        *acc += x;
                        Some(*acc)
                    }))
                    .collect()
            })
            .collect();
        Knowledge {
            n,
            assignment,
            observations,
            prefixes,
        }
    }

    /// The key groups `[a, e)` of subtask `i` of `p`, `None` when it owns none.
    fn range(&self, i: usize, p: usize) -> Option<(usize, usize)> {
        let (n, p) = (self.n as u64, p as u64);
        let a = range_start(i as u64, n, p).min(self.n);
        let e = range_start(i as u64 + 1, n, p).min(self.n);
        (e > a).then_some((a, e))
    }

    /// The most load subtask `i` of `p` can carry, as a share: under each observation the
    /// observed subtasks its units touch; the least of those sums.
    pub fn upper_bound(&self, i: u32, p: u32) -> f64 {
        let (i, p) = (i as usize, p as usize);
        let mut best = 1.0f64;
        if self.assignment == Assignment::KeyGroupRanges {
            // Contiguous: the observed subtasks touched are those of its first and last
            // group and every one between.
            let Some((a, e)) = self.range(i, p) else {
                return 0.0;
            };
            for (loads, prefix) in self.observations.iter().zip(&self.prefixes) {
                let c = loads.len();
                let (first, last) = (
                    owner(a, self.n, c, self.assignment),
                    owner(e - 1, self.n, c, self.assignment),
                );
                best = best.min(prefix[last + 1] - prefix[first]);
            }
            return best;
        }
        for loads in &self.observations {
            let c = loads.len();
            let mut touched = vec![false; c];
            let mut sum = 0.0;
            for u in units_of(i, self.n, p, self.assignment) {
                let o = owner(u, self.n, c, self.assignment);
                if !std::mem::replace(&mut touched[o], true) {
                    sum += loads[o];
                }
            }
            best = best.min(sum);
        }
        best
    }

    /// The least load the busiest subtask of `b` can carry, as a share. Under each
    /// observation: the observed subtasks that lie wholly inside one subtask of `b` add up
    /// there; and an observed subtask whose units spread over `m` subtasks of `b` puts at
    /// least `1/m` of its load on one of them.
    pub fn busiest_lower_bound(&self, b: u32) -> f64 {
        let b = b as usize;
        let mut best = 0.0f64;
        for loads in &self.observations {
            let c = loads.len();
            let mut inside = vec![0.0; b];
            let mut stamp = vec![usize::MAX; b];
            for (o, load) in loads.iter().enumerate() {
                let (mut m, mut first) = (0usize, 0usize);
                for u in units_of(o, self.n, c, self.assignment) {
                    let s = owner(u, self.n, b, self.assignment);
                    if stamp[s] != o {
                        stamp[s] = o;
                        m += 1;
                        first = s;
                    }
                }
                if m == 1 {
                    inside[first] += load;
                }
                if m > 0 {
                    best = best.max(load / m as f64);
                }
            }
            best = best.max(inside.into_iter().fold(0.0, f64::max));
        }
        best
    }

    /// Whether `p`'s busiest subtask is certainly no heavier than `b`'s, whatever the load
    /// inside the observed subtasks: every subtask of `p` either lies inside one subtask of
    /// `b` (so carries at most what that one carries), or can carry at most what `b`'s busiest
    /// subtask certainly carries. `lower` is [`Knowledge::busiest_lower_bound`] of `b`.
    pub fn never_heavier(&self, p: u32, b: u32, lower: f64) -> bool {
        if p == b {
            return true;
        }
        let (pu, bu) = (p as usize, b as usize);
        if self.assignment == Assignment::KeyGroupRanges {
            return (0..pu).all(|i| match self.range(i, pu) {
                None => true,
                Some((a, e)) => {
                    owner(a, self.n, bu, self.assignment)
                        == owner(e - 1, self.n, bu, self.assignment)
                        || self.upper_bound(i as u32, p) <= lower * (1.0 + EPS) + EPS
                }
            });
        }
        (0..pu).all(|i| {
            let mut units = units_of(i, self.n, pu, self.assignment);
            let inside = match units.next() {
                None => true,
                Some(first) => {
                    let s = owner(first, self.n, bu, self.assignment);
                    units.all(|u| owner(u, self.n, bu, self.assignment) == s)
                }
            };
            inside || self.upper_bound(i as u32, p) <= lower * (1.0 + EPS) + EPS
        })
    }
}

/// BALANCED (alignment.md): the region scanned upward from `t`, accepting a divisor of `n` or
/// the first `p` with `n / p < n / t`; nothing accepted: `min(t, cap)`.
pub fn balanced(c: u32, t: u32, n: u32, cap: u32) -> u32 {
    if t == c || t == 0 || n == 0 {
        return t.min(cap.max(1));
    }
    let end = if t > c { cap } else { c.min(cap) };
    (t..=end)
        .find(|&p| n % p == 0 || n / p < n / t)
        .unwrap_or(t.min(cap))
}

/// The decision and what it is based on.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The parallelism to apply.
    pub parallelism: u32,
    /// The predicted busiest share at the chosen parallelism (None: answered as BALANCED).
    pub share_at_choice: Option<f64>,
    /// The predicted busiest share at the target.
    pub share_at_target: Option<f64>,
    /// Whether a parallelism met `tolerance / t` (false: the lowest-share fallback).
    pub accepted: bool,
    /// The measured skew (hottest unit over the mean unit, minus 1), when there was load.
    pub skew: Option<f64>,
}

/// The decision for a context under `settings`, from the current per-subtask load alone.
pub fn decide(ctx: &AlignmentContext, settings: &Settings) -> Decision {
    decide_with(ctx, settings, &[])
}

/// The decision, with loads the vertex showed at earlier parallelisms (`history`: one list
/// per observed parallelism, index = subtask, same signal as the current one). They only
/// narrow what is known for certain (see [`Knowledge`]); the prediction uses the current
/// load.
pub fn decide_with(ctx: &AlignmentContext, settings: &Settings, history: &[Vec<f64>]) -> Decision {
    let (c, t) = (ctx.current_parallelism(), ctx.target_parallelism());
    let n = ctx.partitions_or_key_groups();
    let cap = ctx.alignment_cap();
    let as_balanced = Decision {
        parallelism: balanced(c, t, n, cap),
        share_at_choice: None,
        share_at_target: None,
        accepted: false,
        skew: None,
    };
    if t == c || t == 0 || n == 0 {
        return as_balanced;
    }
    let Some(loads) = ctx
        .subtask_loads()
        .filter(|l| l.len() == c as usize)
        .and_then(|l| load_vector(l, settings.signal))
    else {
        return as_balanced;
    };
    let assignment = if ctx.source_partitions() > 0 {
        Assignment::Modulo
    } else {
        Assignment::KeyGroupRanges
    };
    let predictor = Predictor::new(unit_loads(&loads, n, assignment), assignment);
    let skew = predictor.hottest_unit_share() * f64::from(n) - 1.0;
    if skew <= settings.min_skew {
        return Decision {
            skew: Some(skew),
            ..as_balanced
        };
    }
    let skew = Some(skew);
    let end = if t > c { cap } else { c.min(cap) };
    let share_at_target = Some(predictor.busiest_share(t));
    if t > end {
        return Decision {
            parallelism: t.min(cap),
            share_at_choice: Some(predictor.busiest_share(t.min(cap))),
            share_at_target,
            accepted: false,
            skew,
        };
    }
    let b = as_balanced.parallelism;
    let mut observations = vec![loads];
    observations.extend(history.iter().cloned());
    let knowledge = Knowledge::new(n, assignment, observations);
    let lower = knowledge.busiest_lower_bound(b);
    let at_b = predictor.busiest_share(b);
    let guard = settings.never_heavier;
    // Beyond the reach only to double BALANCED's choice: `2b` always refines it.
    let hi = if guard {
        search_end(t, end, settings.reach).max(b.saturating_mul(2).min(end))
    } else {
        search_end(t, end, settings.reach)
    };
    let safe = |p: u32| !guard || knowledge.never_heavier(p, b, lower);
    let pays = |p: u32, share: f64| {
        !guard || p <= b || at_b - share >= settings.min_gain * f64::from(p - b) * (1.0 - EPS)
    };
    let limit = settings.tolerance / f64::from(t) * (1.0 + EPS);
    let floor = predictor.hottest_unit_share();
    // Scanned upward: the first candidate within the limit wins; else the candidates seen.
    let mut seen: Vec<(u32, f64)> = Vec::new();
    for p in t..=hi {
        let share = predictor.busiest_share(p);
        if !pays(p, share) || !safe(p) {
            continue;
        }
        if share <= limit {
            return Decision {
                parallelism: p,
                share_at_choice: Some(share),
                share_at_target,
                accepted: true,
                skew,
            };
        }
        seen.push((p, share));
        // No later p can go below the hottest unit: stop once that is (nearly) reached.
        if share <= floor * (1.0 + EPS) {
            break;
        }
    }
    let lowest = seen.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
    let within = lowest * (1.0 + settings.slack) * (1.0 + EPS);
    // `seen` is never empty: with the guarantee `b` is among the candidates (unless one
    // before it ended the scan), without it every `p` is; the default keeps this total.
    let (parallelism, share) = seen
        .into_iter()
        .find(|&(_, share)| share <= within)
        .unwrap_or((b, at_b));
    Decision {
        parallelism,
        share_at_choice: Some(share),
        share_at_target,
        accepted: false,
        skew,
    }
}

/// The last parallelism considered: `ceil(t * (1 + reach))`, within the region.
pub fn search_end(t: u32, end: u32, reach: f64) -> u32 {
    let far = (f64::from(t) * (1.0 + reach)).ceil();
    if far >= f64::from(end) {
        end
    } else {
        (far as u32).max(t)
    }
}

fn percent(share: f64) -> String {
    format!("{:.2}%", share * 100.0)
}

/// The `load-align` mode.
#[derive(Debug, Default)]
pub struct LoadAlign;

impl AlignmentMode for LoadAlign {
    fn align(&self, ctx: &AlignmentContext) -> Result<u32, ModeError> {
        let settings = Settings::parse(ctx.params())?;
        let d = decide(ctx, &settings);
        let t = ctx.target_parallelism();
        match (d.share_at_choice, d.share_at_target) {
            (Some(at_p), Some(at_t)) => flowscale_sdk::tracing::info!(
                "{ID}: vertex `{}`: {} -> {}: predicted busiest subtask {} of the load at {} \
                 and {} at the target {} (an even spread at {} assumes {}); {}{}",
                ctx.vertex_name(),
                ctx.current_parallelism(),
                d.parallelism,
                percent(at_p),
                d.parallelism,
                percent(at_t),
                t,
                t,
                percent(1.0 / f64::from(t.max(1))),
                if d.accepted {
                    "the lowest parallelism within it"
                } else {
                    "none within it; the lowest parallelism near the lightest busiest subtask"
                },
                if settings.never_heavier {
                    format!(
                        "; never heavier than BALANCED's {}",
                        balanced(
                            ctx.current_parallelism(),
                            t,
                            ctx.partitions_or_key_groups(),
                            ctx.alignment_cap()
                        )
                    )
                } else {
                    String::new()
                }
            ),
            _ => match d.skew {
                Some(skew) => flowscale_sdk::tracing::info!(
                    "{ID}: vertex `{}`: hottest unit {:.1}% above the mean, within min-skew \
                     {:.1}%; answered as BALANCED: {}",
                    ctx.vertex_name(),
                    skew * 100.0,
                    settings.min_skew * 100.0,
                    d.parallelism
                ),
                None => flowscale_sdk::tracing::info!(
                    "{ID}: vertex `{}`: no per-subtask load; answered as BALANCED: {}",
                    ctx.vertex_name(),
                    d.parallelism
                ),
            },
        }
        Ok(d.parallelism)
    }

    fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
        Settings::parse(params).map(|_| ())
    }
}

flowscale_sdk::export_plugin! {
    name: "load-align",
    version: env!("CARGO_PKG_VERSION"),
    modes: [
        (ID, "load-aware alignment: predicts the busiest subtask from per-subtask load (skewed keys)", LoadAlign::default),
    ],
}

#[cfg(test)]
mod tests;
