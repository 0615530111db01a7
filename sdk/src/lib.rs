//! The flowscale SDK: everything an alignment mode, a custom metric evaluator and a custom
//! scaling executor see and implement.
//!
//! # Brief overview
//!
//! * [`AlignmentMode`] is the trait a mode implements: `is_applicable` (default: a source that
//!   reports partitions, or a `keyBy` input) and `align`.
//! * [`AlignmentContext`] is the immutable input of one decision: current and target
//!   parallelism, partitions, key groups, limits, input ship strategies, the vertex's evaluated
//!   metrics, the job graph, the mode's [`ModeParams`] and, since 0.1.1, the per-subtask load
//!   ([`SubtaskLoad`]).
//! * [`ShipStrategy`] is the fixed set of input ship strategies.
//! * Since 0.1.3, [`MetricEvaluator`] (with [`EvaluatorContext`]) adds to or overrides the
//!   metrics evaluated for a vertex, and [`ScalingExecutor`] (with [`ExecutorContext`]) sees a
//!   job's decided scaling before it is applied and may change or veto it.
//! * [`export_plugin!`] turns a crate into a plugin `cdylib` the host can load; [`abi`] is what
//!   it expands to and what the host probes.
//!
//! The README (`sdk/README.md`) walks through one plugin of each kind; its examples are compiled
//! and run with this crate's doctests.
//!
//! # Writing a plugin
//!
//! Implement [`AlignmentMode`] as usual and export it once, at the crate root of a
//! `crate-type = ["cdylib"]` crate that depends on this one (no `abi_stable` dependency needed):
//!
//! ```ignore
//! flowscale_sdk::export_plugin! {
//!     name: "my-plugin",
//!     version: env!("CARGO_PKG_VERSION"),
//!     modes: [("my-mode", "what it does, in one line", MyMode::default)],
//!     // Optional, since 0.1.3 (each of the three lists is optional, in this order):
//!     evaluators: [("my-rate", "target rate from the SLO service", MyRate::default)],
//!     executors: [("my-freeze", "vetoes scaling during change freezes", MyFreeze::default)],
//! }
//! ```
//!
//! Every call into the plugin is wrapped in `catch_unwind`: a panic becomes an error the host
//! reports, not a crash. That needs `panic = "unwind"` (the default); a plugin built with
//! `panic = "abort"` is refused when it is loaded. Log with [`tracing`] (re-exported here):
//! once loaded, the plugin's records are forwarded to the host's log, and so are its panics.
//!
//! # Compatibility
//!
//! A plugin is loaded only by a host built against the same SDK series: the same `0.y` while
//! the major version is 0 (the same major version from 1.0 on). The host checks this from the
//! plugin's manifest before anything else, and abi_stable checks the layout of every type that
//! crosses the boundary on top of that. Within a series, releases follow these rules so that
//! built plugins keep loading:
//!
//! * The context only grows. It crosses the boundary as an append-only table of accessors that
//!   starts with its own size ([`abi::ContextVTable`]); a new piece of context is a new
//!   accessor appended at the end, and plugin-side code reads it only when the host's table is
//!   long enough (defaulting otherwise). So a newer host lends its context to older plugins,
//!   and a newer plugin runs in an older host with defaults for what that host cannot tell.
//!   Existing accessors and the records they return never change.
//! * Ship strategies cross as a tag and a bucket count; a tag unknown to the reader reads as
//!   [`ShipStrategy::Unknown`].
//! * What the plugin implements (the mode object [`abi::FfiMode`] and the root module
//!   [`abi::PluginRoot`]) is layout-checked by abi_stable, which refuses a plugin whose copy has
//!   FEWER methods or fields than the host's. It therefore never changes within a series: a
//!   new capability a plugin must provide starts a new series (`0.y+1`), and the host refuses
//!   older plugins with a message saying to rebuild them.
//! * Error kinds are integers ([`abi::FfiErrorKind`]), so new kinds are additions, not layout
//!   changes.
//! * New kinds of plugin objects are not added to the root module (that would be a new
//!   capability abi_stable's check refuses older plugins for). They are exported through the
//!   kinds table ([`abi::KindsTable`]), a second plain-C symbol read with `dlsym` like the
//!   manifest: a magic, a format number and the table's own size come first, then the listing
//!   (ids and descriptions, static data readable without running plugin code) and `extern "C"`
//!   entry points. The table only grows at its end, and the host uses a field only when the
//!   plugin's size covers it; a plugin without the symbol exports no such object. Their
//!   contexts cross as append-only accessor tables like the alignment context
//!   ([`abi::EvaluatorVTable`], [`abi::ExecutorVTable`], [`abi::SharedVTable`]), and answers
//!   come back through a table of host callbacks ([`abi::ReplyVTable`]), under the same rule.
//!
//! # Releases
//!
//! * **0.1.0**: the first release, the source tree of commit
//!   `2d6c3bf3d8aa6af5e56e288b8b6f5ad4adc9f2d6` of the flowscale repository (recorded by hash
//!   because tags do not always travel with a clone). A test builds a plugin from that tree and
//!   runs it in the current host, and runs a current plugin in a host built from it.
//! * **0.1.1**: the context gains the per-subtask load of the vertex at its current parallelism,
//!   [`AlignmentContext::subtask_loads`] (each subtask's busy ratio and records-in rate, where
//!   the engine reports them), appended to the accessor table. A patch release: plugins built
//!   against 0.1.0 load unchanged into a 0.1.1 host and give the same answers (they never see
//!   the new accessor); plugins built against 0.1.1 load into a 0.1.0 host and read `None`
//!   there, as they do whenever the engine reports no per-subtask load. Nothing else changed.
//! * **0.1.2**: nothing a mode sees changes; the accessor table gains two accessors at its end
//!   that name what is lent, so that the plugin side copies less. `topology_generation`: a
//!   number the host gives each distinct shared job graph it lends, the same number for the
//!   same graph again for as long as it lives, never the same number for two graphs (one
//!   process-wide counter; the host holds a weak reference to each graph it numbered, so its
//!   address cannot be reused meanwhile). `context_serial`: the same for the context itself
//!   (a number given when it is built; the context never changes afterwards). The plugin side
//!   keeps a copy of each job's graph and reuses it without reading the lent one when the
//!   generations are equal (it compares field by field, once, when they are not: a graph the
//!   host built anew, which it does when a job's graph changes or the job is new), and
//!   answers `align` after `is_applicable` on one context from the copy it made for the gate.
//!   Plugins built against 0.1.0 or 0.1.1 never call the new accessors and load unchanged;
//!   plugins built against 0.1.2 in an older host find the table too short, get no numbers and
//!   compare as before. [`ModeParams`] is shared inside (cloning it copies no strings), and
//!   [`AlignmentContext::into_metrics`] gives a context's metric list back to whoever built it,
//!   for the next context's names.
//! * **0.1.3**: plugins export custom metric evaluators ([`MetricEvaluator`]) and custom
//!   scaling executors ([`ScalingExecutor`]) beside their modes: [`export_plugin!`] takes
//!   optional `evaluators:` and `executors:` lists (and `modes:` became optional: a plugin may
//!   export only an executor). They cross the boundary through the kinds table, a new symbol
//!   ([`abi::KINDS_SYMBOL`], see "Compatibility"); the root module, the mode object and the
//!   manifest are unchanged. Every entry point catches panics inside the plugin, as a mode's
//!   methods do. Plugins built against 0.1.0 to 0.1.2 have no kinds table: they load unchanged
//!   into a 0.1.3 host and export no evaluator or executor. Plugins built against 0.1.3 load
//!   into an older host, which never looks the table up: their modes work there, their
//!   evaluators and executors are not seen (a plugin exporting no mode is refused there as
//!   exporting nothing). Also in 0.1.3, for modes: nothing a mode sees changes; a host can build contexts that share
//!   the input ship strategies its job graph keeps
//!   ([`AlignmentContextBuilder::shared_input_ship_strategies`]) instead of a list each, and
//!   the identity texts it keeps ([`AlignmentContextBuilder::shared_identity`]) instead of
//!   copies, and take a context apart for its metric list
//!   ([`AlignmentContext::into_metric_list`]). The
//!   accessor table gains one accessor at its end, `metric_names`: a number the builder gives
//!   each context's list of metric names, the same number for the same names (equal numbers
//!   mean equal names in the same order; one process-wide counter, each number given to one
//!   list only). The builder already checked every context's names for order; it now checks
//!   them against the few lists it numbered last instead, at the same cost. The plugin side
//!   then takes only the values when the lent number is that of its kept names, instead of
//!   comparing every name. Plugins built against 0.1.0 to 0.1.2 never call the new accessor
//!   and load unchanged; plugins built against 0.1.3 in an older host find the table too
//!   short, get no number and compare as before. A host that keeps a context's metric list
//!   for the next one ([`MetricList`], which [`AlignmentContext::into_metric_list`] gives back)
//!   and refills it with the same names keeps their number
//!   ([`AlignmentContextBuilder::metric_list`]), so the names are checked once per context,
//!   not twice; a host that knows the names are those of the list's number refills the values
//!   alone ([`MetricList::refill_values`], [`MetricList::names_number`]). On the plugin side,
//!   the kept context reads the lent identity, metrics, job graph and per-subtask load only
//!   when the mode first reads one of them (once per lent context; a clone of the context is
//!   complete), not on every call: modes that look at the numbers, ship strategies and
//!   parameters alone have nothing else copied. What a mode reads is unchanged, and so is the
//!   table. A host that builds many contexts from parts it keeps makes each in one step
//!   ([`AlignmentContext::from_parts`] with [`ContextParts`]) instead of through the builder,
//!   whose chain of calls moves the whole builder from call to call.
//! * **0.1.4**: nothing an evaluator or an executor sees changes; their contexts cross the
//!   boundary as the alignment context does, copying only what the plugin reads and what
//!   changed since its last call. The evaluator's accessor table gains `metric_names` (the
//!   number of the vertex's list of metric names, as for modes) and `evaluated_serial` (a
//!   number for the list of vertices evaluated before, kept while the list only grows at its
//!   end); the table of what both kinds share gains `topology_generation` (the job graph's
//!   generation, as for modes). The plugin side keeps each kind's context of its last call and
//!   brings it up to date in place: the identity, metrics and parameters compared rather than
//!   copied (only the values when the names' number is the kept one), the job graph and the
//!   vertices evaluated before only when the plugin first reads them, the graph taken from
//!   its copies by generation and only the vertices added since its last call copied. A host
//!   keeps one evaluator context for a job's cycle and moves it on from vertex to vertex
//!   ([`EvaluatorContext::next_vertex`], [`EvaluatorContext::push_evaluated`]) instead of
//!   building one per vertex with a copy of every vertex before it, and may keep it across
//!   cycles ([`EvaluatorContext::next_cycle`], [`EvaluatorContext::push_evaluated_from`]), so
//!   that the list of vertices evaluated before reuses the strings of earlier cycles (host
//!   side only: nothing crosses the boundary differently). Plugins built against
//!   0.1.3 never call the new accessors and load unchanged; plugins built against 0.1.4 in a
//!   0.1.3 host find the tables too short, get no numbers and compare or copy as before.
//! * **0.1.5**: nothing an evaluator or an executor sees changes; less is read per call. The
//!   table both kinds share gains `params_number` (a number for the instance's parameters:
//!   each set built gets one, its clones share it, equal numbers are equal parameters), so the
//!   plugin side reads parameters again only when the number changes; the evaluator's table
//!   gains `metric_values` (the values of the vertex's metrics in one call, for names the
//!   plugin side holds). The plugin side reads the job and vertex names only when the evaluator
//!   asks for them, and keeps a few lists of metric names by number (a job's vertices take
//!   turns with a few). Host side only: [`EvaluatorContext::next_vertex_values`] (values
//!   alone, for names the context holds), [`EvaluatorContext::push_evaluated_current`] (the
//!   vertex the context is at, as the next entry of the vertices evaluated before) and
//!   [`EvaluatorContext::swap_metric_list`]. Plugins built against 0.1.4 or older never call
//!   the new accessors and load unchanged; plugins built against 0.1.5 in an older host find
//!   the tables too short and compare or read one by one as before.
//!
//! The manifest ([`abi::PluginManifest`]) has its own format number behind a fixed magic, so a
//! host can always tell "not a plugin" from "a plugin of another format".
//!
//! ```
//! use flowscale_sdk::{AlignmentContext, AlignmentMode, ModeError};
//!
//! /// Rounds the target up to an even number, within the alignment cap.
//! struct Even;
//!
//! impl AlignmentMode for Even {
//!     fn align(&self, ctx: &AlignmentContext) -> Result<u32, ModeError> {
//!         let t = ctx.target_parallelism();
//!         Ok((t + t % 2).min(ctx.alignment_cap()))
//!     }
//! }
//!
//! let ctx = AlignmentContext::builder(4, 7, 128).build();
//! assert_eq!(Even.align(&ctx)?, 8);
//! # Ok::<(), ModeError>(())
//! ```
#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod abi;
mod bytes;
mod context;
mod evaluator;
mod executor;
mod lent;
mod mode;
mod names;
mod params;
mod shared;
mod ship;

pub use crate::context::{
    AlignmentContext, AlignmentContextBuilder, ContextParts, EvaluatedMetric, JobTopology,
    MetricList, SubtaskLoad, TopologyEdge, TopologyVertex,
};
pub use crate::evaluator::{EvaluatedVertex, EvaluatorContext, MetricEvaluator, VertexMetrics};
pub use crate::executor::{ExecutorContext, ExecutorVerdict, ScalingExecutor, ScalingSummary};
pub use crate::mode::{AlignmentMode, ModeError};
pub use crate::params::{EVALUATOR_KEY, EXECUTOR_KEY, MODE_KEY, ModeParams, ParamError};
pub use crate::ship::ShipStrategy;

/// The examples of the SDK's README (sdk/README.md), compiled and run as doctests so that the
/// code a plugin author copies from it builds.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The version of this SDK, as recorded in every plugin's manifest.
pub const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Re-exported so that [`export_plugin!`] works without a direct `abi_stable` dependency.
#[doc(hidden)]
pub use abi_stable;

/// Re-exported so that plugins can log with the same `tracing` the SDK forwards to the host.
pub use tracing;
