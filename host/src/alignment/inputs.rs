//! The numbers every mode works from, derived once from an [`AlignmentContext`].

use flowscale_sdk::{AlignmentContext, ShipStrategy};

use super::request::AlignmentRequest;
use crate::events::{Event, EventReason, Severity};

/// `c`, `t`, `N`, `K`, limits and the cap, widened to `u64` so no search step can overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Inputs {
    /// Current parallelism.
    pub(crate) c: u64,
    /// Computed target.
    pub(crate) t: u64,
    /// Partitions when the source reports them, else key groups.
    pub(crate) n: u64,
    /// Key groups (max parallelism).
    pub(crate) k: u64,
    /// Lower limit.
    pub(crate) lower: u64,
    /// Upper limit.
    pub(crate) upper: u64,
    /// `UA = min(N, K, upper)`.
    pub(crate) cap: u64,
    /// True for a scale-up (`t > c`).
    pub(crate) up: bool,
}

impl Inputs {
    /// Derives the inputs of a context.
    pub(crate) fn of(ctx: &AlignmentContext) -> Inputs {
        Inputs {
            c: u64::from(ctx.current_parallelism()),
            t: u64::from(ctx.target_parallelism()),
            n: u64::from(ctx.partitions_or_key_groups()),
            k: u64::from(ctx.max_parallelism()),
            lower: u64::from(ctx.lower_limit()),
            upper: u64::from(ctx.upper_limit()),
            cap: u64::from(ctx.alignment_cap()),
            up: ctx.target_parallelism() > ctx.current_parallelism(),
        }
    }

    /// The inputs of the context `request` turns into, read from the request itself: the
    /// built-in modes decide from these numbers alone, without a context being built. Each
    /// derived quantity follows the context's accessor of the same meaning
    /// (`partitions_or_key_groups`, `alignment_cap`, `is_scale_up`).
    pub(crate) fn of_request(request: &AlignmentRequest) -> Inputs {
        let n = if request.source_partitions > 0 {
            request.source_partitions
        } else {
            request.max_parallelism
        };
        Inputs {
            c: u64::from(request.current),
            t: u64::from(request.target),
            n: u64::from(n),
            k: u64::from(request.max_parallelism),
            lower: u64::from(request.lower_limit),
            upper: u64::from(request.upper_limit),
            cap: u64::from(n.min(request.max_parallelism).min(request.upper_limit)),
            up: request.target > request.current,
        }
    }

    /// The target bounded by the cap: what the never-blocking modes keep when nothing is found.
    pub(crate) fn capped_target(&self) -> u64 {
        self.t.min(self.cap)
    }

    /// `min(K, upper)`: the bound a SCALING_LIMITED event reports (not the cap).
    pub(crate) fn upper_bound_for_alignment(&self) -> u64 {
        self.k.min(self.upper)
    }

    /// One line describing the decision's starting point.
    pub(crate) fn describe(&self, source_partitions: u32) -> String {
        let what = if source_partitions > 0 {
            "source partitions"
        } else {
            "key groups"
        };
        format!(
            "{} from {} to target {}; N = {} ({what}), cap UA = min(N, K = {}, upper = {}) = {}",
            if self.up { "scale-up" } else { "scale-down" },
            self.c,
            self.t,
            self.n,
            self.k,
            self.upper,
            self.cap
        )
    }
}

/// The built-in modes' gate for a request, as the context's `default_applicable` answers it: a
/// source that reports partitions, or a vertex with a HASH (`keyBy`) input.
pub(super) fn default_applicable(request: &AlignmentRequest) -> bool {
    request.source_partitions > 0 || request.input_ship_strategies.contains(&ShipStrategy::Hash)
}

/// Narrows a value that is bounded by a `u32` input back to `u32`.
pub(super) fn narrow(value: u64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

/// The SCALING_LIMITED event of the Flink autoscaler, with every field it carries.
pub(super) fn scaling_limited(ctx: &AlignmentContext, inputs: &Inputs, actual: u64) -> Event {
    let vertex = if ctx.vertex_id().is_empty() {
        ctx.vertex_name()
    } else {
        ctx.vertex_id()
    };
    let message = format!(
        "Scaling limited detected for {vertex} (expected parallelism: {}, actual parallelism {actual}). \
         Scaling limited due to numKeyGroupsOrPartitions : {}\u{ff0c}upperBoundForAlignment(maxParallelism \
         or parallelismUpperLimit): {}, parallelismLowerLimit: {}.",
        inputs.t,
        inputs.n,
        inputs.upper_bound_for_alignment(),
        inputs.lower
    );
    let mut event = Event::new(EventReason::ScalingLimited, Severity::Warning, message)
        .key(format!("ScalingLimited{vertex}"))
        .vertex(vertex)
        .parallelism(narrow(inputs.t), narrow(actual))
        .detail("num_key_groups_or_partitions", inputs.n as i64)
        .detail(
            "upper_bound_for_alignment",
            inputs.upper_bound_for_alignment() as i64,
        )
        .detail("lower_limit", inputs.lower as i64);
    if !ctx.job_name().is_empty() {
        event = event.job(ctx.job_name());
    }
    event
}
