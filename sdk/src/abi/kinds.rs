//! The table of the kinds a plugin exports beside alignment modes (SDK 0.1.3): custom metric
//! evaluators and custom scaling executors.
//!
//! Why a second plain-C symbol rather than more entries in [`super::PluginRoot`]: abi_stable
//! refuses a library whose copy of a prefix type has fewer fields than the host's, so a root
//! module that grew would orphan every plugin built before (0.1.0 to 0.1.2). The kinds table is
//! instead a `#[no_mangle]` static of its own, [`KINDS_SYMBOL`], read with `dlsym` like the
//! manifest and outside abi_stable's check:
//!
//! * it starts with a magic and a format number, then its own size in bytes as the plugin
//!   built it: the host reads a field only when it lies inside that size, so the table grows by
//!   appending fields (never reordering or changing one), and a plugin built before a field
//!   existed reads as not having it;
//! * its first fields list the evaluators' and executors' ids and descriptions, static data
//!   read without running plugin code (the probe lists them as it lists modes);
//! * the rest are `extern "C"` entry points over opaque objects; each catches panics inside
//!   the plugin. Contexts cross as append-only accessor tables (see `lend.rs`) and answers
//!   come back through a table of host callbacks ([`ReplyVTable`]), so no allocation crosses
//!   the boundary in either direction.
//!
//! A plugin without the symbol (every plugin built before 0.1.3) exports no evaluator and no
//! executor; an older host never looks the symbol up and loads the plugin's modes as before.

use std::mem::{offset_of, size_of};

use super::context::FfiStr;
use super::lend::{EvaluatorRef, ExecutorRef, SharedRef};
use super::manifest::{ManifestError, ManifestMode, read_entries};
use super::reply::{Collected, Object, ReplyRef, Status};
use super::root::{FfiError, FfiErrorKind};
use crate::evaluator::{EvaluatorContext, VertexMetrics};
use crate::executor::{ExecutorContext, ExecutorVerdict};
use crate::params::ModeParams;

/// The bytes every kinds table starts with.
pub const KINDS_MAGIC: [u8; 16] = *b"FLOWSCALE-KINDS1";

/// The layout version of [`KindsTable`]'s fixed head (magic, format, size). Fields appended
/// behind the size do not change it.
pub const KINDS_FORMAT: u32 = 1;

/// The exported name of the kinds table (without the trailing NUL).
pub const KINDS_SYMBOL: &str = "FLOWSCALE_PLUGIN_KINDS";

/// The largest size a table may claim: far more than any release will append, small enough
/// that a corrupt size cannot make the host read far past the static.
const MAX_TABLE_SIZE: usize = 4096;

/// The kinds table. Built by [`crate::export_plugin!`]; plugin authors never write it.
#[repr(C)]
pub struct KindsTable {
    magic: [u8; 16],
    format: u32,
    /// `size_of::<KindsTable>()` in the SDK the plugin was built with.
    size: usize,
    evaluators: *const ManifestMode,
    evaluator_count: usize,
    executors: *const ManifestMode,
    executor_count: usize,
    new_evaluator: unsafe extern "C" fn(FfiStr, ReplyRef) -> Object,
    evaluate: unsafe extern "C" fn(Object, EvaluatorRef, ReplyRef) -> Status,
    validate_evaluator: unsafe extern "C" fn(Object, SharedRef, ReplyRef) -> Status,
    drop_evaluator: unsafe extern "C" fn(Object),
    new_executor: unsafe extern "C" fn(FfiStr, ReplyRef) -> Object,
    priority: unsafe extern "C" fn(Object, ReplyRef) -> Status,
    apply: unsafe extern "C" fn(Object, ExecutorRef, ReplyRef) -> Status,
    validate_executor: unsafe extern "C" fn(Object, SharedRef, ReplyRef) -> Status,
    drop_executor: unsafe extern "C" fn(Object),
    // Fields added in later SDK releases go here, each read only when `size` covers it.
}

// SAFETY: the table only holds pointers to immutable `'static` data and functions.
unsafe impl Sync for KindsTable {}

/// The plugin-side entry points of the table (what the macro cannot write itself: everything
/// but the two constructors, which need the plugin's own list).
pub struct GuestEntries {
    /// Creates an evaluator by id.
    pub new_evaluator: unsafe extern "C" fn(FfiStr, ReplyRef) -> Object,
    /// Creates an executor by id.
    pub new_executor: unsafe extern "C" fn(FfiStr, ReplyRef) -> Object,
}

impl KindsTable {
    /// The table of a plugin built against this SDK.
    pub const fn new(
        evaluators: &'static [ManifestMode],
        executors: &'static [ManifestMode],
        entries: GuestEntries,
    ) -> KindsTable {
        use super::guest_kinds as g;
        KindsTable {
            magic: KINDS_MAGIC,
            format: KINDS_FORMAT,
            size: size_of::<KindsTable>(),
            evaluators: evaluators.as_ptr(),
            evaluator_count: evaluators.len(),
            executors: executors.as_ptr(),
            executor_count: executors.len(),
            new_evaluator: entries.new_evaluator,
            evaluate: g::evaluate,
            validate_evaluator: g::validate_evaluator,
            drop_evaluator: g::drop_evaluator,
            new_executor: entries.new_executor,
            priority: g::priority,
            apply: g::apply,
            validate_executor: g::validate_executor,
            drop_executor: g::drop_executor,
        }
    }

    /// Copies the listing of the table at `ptr` (ids and descriptions) and its entry points,
    /// checking magic, format, size and bounds.
    ///
    /// # Safety
    /// `ptr` must be the address of the [`KINDS_SYMBOL`] static of a library that is still
    /// loaded (and stays loaded while the returned entry points are used). A foreign symbol of
    /// that name is caught by the magic check as long as it is at least 16 readable bytes.
    pub unsafe fn read(ptr: *const KindsTable) -> Result<(KindsInfo, KindsCalls), ManifestError> {
        if ptr.is_null() {
            return Err(ManifestError::Corrupt("the kinds table is null".into()));
        }
        // SAFETY: the magic is read first, from the symbol's first 16 bytes.
        let magic = unsafe { std::ptr::read_unaligned(ptr.cast::<[u8; 16]>()) };
        if magic != KINDS_MAGIC {
            return Err(ManifestError::BadMagic);
        }
        // SAFETY: the magic matched: the head is ours.
        let (format, size) = unsafe {
            (
                std::ptr::read_unaligned(std::ptr::addr_of!((*ptr).format)),
                std::ptr::read_unaligned(std::ptr::addr_of!((*ptr).size)),
            )
        };
        if format != KINDS_FORMAT {
            return Err(ManifestError::UnknownFormat(format));
        }
        // Every field of format 1 must be there: the table was born with all of them.
        let needed = offset_of!(KindsTable, drop_executor) + size_of::<usize>();
        if !(needed..=MAX_TABLE_SIZE).contains(&size) {
            return Err(ManifestError::Corrupt(format!(
                "the kinds table claims {size} bytes (expected {needed} to {MAX_TABLE_SIZE})"
            )));
        }
        // SAFETY: format 1 with every field of ours present; the library stays loaded.
        let t: &'static KindsTable = unsafe { &*ptr };
        // SAFETY: the entries are `'static` slices of the loaded library (bounds checked).
        let evaluators = unsafe { read_entries(t.evaluators, t.evaluator_count, "evaluator") }?;
        // SAFETY: as above.
        let executors = unsafe { read_entries(t.executors, t.executor_count, "executor") }?;
        Ok((
            KindsInfo {
                evaluators,
                executors,
            },
            KindsCalls { table: t },
        ))
    }
}

/// The listing of a kinds table: `(implementation id, description)` of each evaluator and
/// executor, in declaration order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KindsInfo {
    /// The metric evaluators.
    pub evaluators: Vec<(String, String)>,
    /// The scaling executors.
    pub executors: Vec<(String, String)>,
}

/// The entry points of a loaded plugin's kinds table, as the host calls them: the table
/// itself, whose library is never unloaded (see [`KindsTable::read`]).
#[derive(Clone, Copy)]
pub struct KindsCalls {
    table: &'static KindsTable,
}

impl std::fmt::Debug for KindsCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindsCalls").finish_non_exhaustive()
    }
}

/// An object created by a plugin, destroyed through the plugin when dropped.
struct Owned {
    object: Object,
    destroy: unsafe extern "C" fn(Object),
}

// SAFETY: the objects are `MetricEvaluator`s and `ScalingExecutor`s, which are `Send + Sync`.
unsafe impl Send for Owned {}
// SAFETY: as above.
unsafe impl Sync for Owned {}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: the object came from the constructor of the same table and is dropped once.
        unsafe { (self.destroy)(self.object) }
    }
}

/// A plugin's metric evaluator, host side.
pub struct EvaluatorHandle {
    owned: Owned,
    calls: KindsCalls,
}

/// A plugin's scaling executor, host side.
pub struct ExecutorHandle {
    owned: Owned,
    calls: KindsCalls,
}

impl Owned {
    /// The object `construct` makes for `id`, destroyed by `destroy` when dropped.
    fn create(
        construct: unsafe extern "C" fn(FfiStr, ReplyRef) -> Object,
        destroy: unsafe extern "C" fn(Object),
        id: &str,
    ) -> Result<Owned, FfiError> {
        let mut out = Collected::default();
        // SAFETY: the table's library is loaded (the contract of `KindsTable::read`).
        let object = unsafe { construct(FfiStr::new(id), out.reply()) };
        if object.is_null() {
            out.check(FfiErrorKind::PANIC.0)?;
        }
        Ok(Owned { object, destroy })
    }
}

impl KindsCalls {
    /// Creates the plugin's evaluator `id`.
    pub fn new_evaluator(&self, id: &str) -> Result<EvaluatorHandle, FfiError> {
        Ok(EvaluatorHandle {
            owned: Owned::create(self.table.new_evaluator, self.table.drop_evaluator, id)?,
            calls: *self,
        })
    }

    /// Creates the plugin's executor `id`.
    pub fn new_executor(&self, id: &str) -> Result<ExecutorHandle, FfiError> {
        Ok(ExecutorHandle {
            owned: Owned::create(self.table.new_executor, self.table.drop_executor, id)?,
            calls: *self,
        })
    }
}

impl EvaluatorHandle {
    /// [`crate::MetricEvaluator::evaluate`] in the plugin.
    pub fn evaluate(&self, ctx: &EvaluatorContext) -> Result<VertexMetrics, FfiError> {
        let mut out = Collected::default();
        let lent = super::lend::LentEvaluator::new(ctx);
        // SAFETY: the object is live and `lent` outlives the call.
        let status =
            unsafe { (self.calls.table.evaluate)(self.owned.object, lent.lend(), out.reply()) };
        out.check(status)?;
        Ok(out.metrics)
    }

    /// [`crate::MetricEvaluator::validate`] in the plugin.
    pub fn validate(&self, params: &ModeParams) -> Result<(), FfiError> {
        let mut out = Collected::default();
        let lent = super::lend::LentShared::params(params);
        // SAFETY: as above.
        let status = unsafe {
            (self.calls.table.validate_evaluator)(self.owned.object, lent.lend(), out.reply())
        };
        out.check(status)
    }
}

impl ExecutorHandle {
    /// [`crate::ScalingExecutor::priority`] in the plugin.
    pub fn priority(&self) -> Result<i32, FfiError> {
        let mut out = Collected::default();
        // SAFETY: the object is live.
        let status = unsafe { (self.calls.table.priority)(self.owned.object, out.reply()) };
        out.check(status)?;
        Ok(out.priority)
    }

    /// [`crate::ScalingExecutor::apply`] in the plugin.
    pub fn apply(&self, ctx: &ExecutorContext) -> Result<ExecutorVerdict, FfiError> {
        let mut out = Collected::default();
        let lent = super::lend::LentExecutor::new(ctx);
        // SAFETY: the object is live and `lent` outlives the call.
        let status =
            unsafe { (self.calls.table.apply)(self.owned.object, lent.lend(), out.reply()) };
        out.check(status)?;
        Ok(match out.veto {
            Some(why) => ExecutorVerdict::Veto(why),
            None => ExecutorVerdict::Apply(out.summaries),
        })
    }

    /// [`crate::ScalingExecutor::validate`] in the plugin.
    pub fn validate(&self, params: &ModeParams) -> Result<(), FfiError> {
        let mut out = Collected::default();
        let lent = super::lend::LentShared::params(params);
        // SAFETY: as above.
        let status = unsafe {
            (self.calls.table.validate_executor)(self.owned.object, lent.lend(), out.reply())
        };
        out.check(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" fn no_object(_: FfiStr, _: ReplyRef) -> Object {
        std::ptr::null_mut()
    }

    static EVALUATORS: [ManifestMode; 1] = [ManifestMode::new("rate", "adds a target rate")];
    static EXECUTORS: [ManifestMode; 2] = [
        ManifestMode::new("freeze", "vetoes at night"),
        ManifestMode::new("cap", "caps steps"),
    ];
    static TABLE: KindsTable = KindsTable::new(
        &EVALUATORS,
        &EXECUTORS,
        GuestEntries {
            new_evaluator: no_object,
            new_executor: no_object,
        },
    );

    /// A writable copy of [`TABLE`]'s bytes, to corrupt.
    fn raw() -> Vec<u8> {
        let bytes: &[u8] = unsafe {
            std::slice::from_raw_parts(
                (&TABLE as *const KindsTable).cast(),
                size_of::<KindsTable>(),
            )
        };
        // Room behind the table, so that a larger claimed size reads only zeroes.
        let mut copy = bytes.to_vec();
        copy.resize(MAX_TABLE_SIZE + 64, 0);
        copy
    }

    fn read_raw(bytes: &[u8]) -> Result<KindsInfo, ManifestError> {
        // `Vec<u8>` is only byte-aligned; the table needs the alignment of a pointer.
        let mut aligned = vec![0usize; bytes.len().div_ceil(size_of::<usize>())];
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                aligned.as_mut_ptr().cast::<u8>(),
                bytes.len(),
            );
            KindsTable::read(aligned.as_ptr().cast()).map(|(info, _)| info)
        }
    }

    fn set_usize(bytes: &mut [u8], at: usize, value: usize) {
        bytes[at..at + size_of::<usize>()].copy_from_slice(&value.to_ne_bytes());
    }

    #[test]
    fn the_listing_round_trips_through_the_table() {
        let (info, _) = unsafe { KindsTable::read(&TABLE) }.expect("read");
        assert_eq!(
            info.evaluators,
            vec![("rate".to_string(), "adds a target rate".to_string())]
        );
        let ids: Vec<&str> = info.executors.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["freeze", "cap"]);
    }

    #[test]
    fn a_corrupt_table_is_refused_not_read_past() {
        assert_eq!(read_raw(&[0u8; 64]), Err(ManifestError::BadMagic));

        let mut bad_format = raw();
        bad_format[16..20].copy_from_slice(&7u32.to_ne_bytes());
        assert_eq!(read_raw(&bad_format), Err(ManifestError::UnknownFormat(7)));

        let size_at = offset_of!(KindsTable, size);
        for size in [0, offset_of!(KindsTable, drop_executor), MAX_TABLE_SIZE + 1] {
            let mut bytes = raw();
            set_usize(&mut bytes, size_at, size);
            let err = read_raw(&bytes).expect_err("a size out of bounds");
            assert!(
                matches!(&err, ManifestError::Corrupt(m) if m.contains(&format!("claims {size} bytes"))),
                "{err}"
            );
        }
        // A larger size (a newer SDK's table) is fine: only the known fields are read.
        let mut newer = raw();
        set_usize(&mut newer, size_at, size_of::<KindsTable>() + 16);
        assert!(read_raw(&newer).is_ok());

        let mut too_many = raw();
        set_usize(
            &mut too_many,
            offset_of!(KindsTable, executor_count),
            100_000,
        );
        let err = read_raw(&too_many).expect_err("too many executors");
        assert!(err.to_string().contains("100000 executors listed"), "{err}");

        let mut null_list = raw();
        set_usize(&mut null_list, offset_of!(KindsTable, evaluators), 0);
        let err = read_raw(&null_list).expect_err("a null list with entries");
        assert!(matches!(err, ManifestError::Corrupt(_)), "{err}");
    }

    #[test]
    fn a_constructor_that_returns_nothing_is_an_error_not_an_object() {
        let (_, calls) = unsafe { KindsTable::read(&TABLE) }.expect("read");
        let err = calls.new_evaluator("rate").err().expect("no object");
        assert_eq!(err.kind, FfiErrorKind::PANIC);
    }
}

/// The whole boundary in one process: a plugin's export (the macro, as a plugin expands it) and
/// the host's calls through the table it exports, contexts lent and answers collected.
#[cfg(test)]
#[allow(unreachable_pub)] // the statics `export_plugin!` makes public for the loader
mod round_trip {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::context::{EvaluatedMetric, JobTopology, TopologyEdge, TopologyVertex};
    use crate::evaluator::{EvaluatedVertex, MetricEvaluator};
    use crate::executor::{ScalingExecutor, ScalingSummary};
    use crate::mode::ModeError;
    use crate::params::{EVALUATOR_KEY, EXECUTOR_KEY};
    use crate::ship::ShipStrategy;

    /// Echoes what it sees as metrics, so that the test can check every accessor.
    struct Echo;

    fn m(v: f64) -> EvaluatedMetric {
        EvaluatedMetric {
            current: v,
            average: v + 0.5,
        }
    }

    impl MetricEvaluator for Echo {
        fn evaluate(&self, ctx: &EvaluatorContext) -> Result<VertexMetrics, ModeError> {
            if ctx.vertex_id() == "panic" {
                panic!("echo cannot evaluate `panic`");
            }
            if ctx.vertex_id() == "error" {
                return Err(ModeError::new("echo refuses `error`"));
            }
            let text = format!(
                "{}|{}|{}|{}|{}|{}",
                ctx.job_name(),
                ctx.vertex_name(),
                ctx.params().full_key("k"),
                ctx.params().get("k").unwrap_or("-"),
                ctx.evaluated()
                    .iter()
                    .map(|v| format!("{}:{}", v.vertex_id, v.metrics.len()))
                    .collect::<Vec<_>>()
                    .join(","),
                ctx.topology().edges.len(),
            );
            Ok(vec![
                (text, m(f64::from(u8::from(ctx.is_processing_backlog())))),
                ("LAG".into(), ctx.metric("LAG").unwrap_or(m(-1.0))),
            ])
        }
        fn validate(&self, params: &ModeParams) -> Result<(), ModeError> {
            match params.get("bad") {
                Some(v) => Err(ModeError::new(format!("{} = {v}", params.full_key("bad")))),
                None => Ok(()),
            }
        }
    }

    /// Halves every step and names what it saw in a veto when asked to.
    struct Halve;

    impl ScalingExecutor for Halve {
        fn priority(&self) -> i32 {
            -3
        }
        fn apply(&self, ctx: &ExecutorContext) -> Result<ExecutorVerdict, ModeError> {
            if ctx.params().get("veto").is_some() {
                return Ok(ExecutorVerdict::Veto(format!(
                    "{}@{}+{} {} {}",
                    ctx.job_name(),
                    ctx.now_ms(),
                    ctx.restart_time_ms(),
                    ctx.topology().vertices[0].name,
                    ctx.params().full_key("veto")
                )));
            }
            Ok(ExecutorVerdict::Apply(
                ctx.summaries()
                    .iter()
                    .cloned()
                    .map(|mut s| {
                        s.new_parallelism /= 2;
                        s
                    })
                    .collect(),
            ))
        }
    }

    crate::export_plugin! {
        name: "round-trip",
        version: "1.0.0",
        evaluators: [("echo", "echoes", || Echo)],
        executors: [("halve", "halves", || Halve), ("halve-too", "halves too", || Halve)],
    }

    unsafe extern "C" {
        static FLOWSCALE_PLUGIN_KINDS: KindsTable;
    }

    fn calls() -> (KindsInfo, KindsCalls) {
        // SAFETY: the static the macro above exported, in this very binary.
        unsafe { KindsTable::read(&raw const FLOWSCALE_PLUGIN_KINDS) }.expect("read")
    }

    fn params(family: &'static str, pairs: &[(&str, &str)]) -> ModeParams {
        let entries: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ModeParams::under(family, "inst", entries)
    }

    fn graph() -> Arc<JobTopology> {
        Arc::new(JobTopology {
            vertices: vec![TopologyVertex {
                id: "v1".into(),
                name: "source".into(),
                parallelism: 2,
                max_parallelism: 8,
                source_partitions: 4,
            }],
            edges: vec![TopologyEdge {
                from: "v1".into(),
                to: "v2".into(),
                ship_strategy: ShipStrategy::Hash,
            }],
        })
    }

    #[test]
    fn a_plugin_may_export_only_evaluators_and_executors() {
        let (info, _) = calls();
        assert_eq!(info.evaluators, vec![("echo".into(), "echoes".into())]);
        assert_eq!(info.executors.len(), 2);
    }

    #[test]
    fn an_evaluator_sees_its_whole_context_and_answers_through_the_table() {
        let (_, calls) = calls();
        let echo = calls.new_evaluator("echo").expect("created");
        let ctx = EvaluatorContext::new("job", "v2", vec![("LAG".into(), m(40.0))])
            .with_vertex_name("map")
            .with_evaluated(vec![EvaluatedVertex {
                vertex_id: "v1".into(),
                metrics: vec![("LAG".into(), m(1.0)), ("X".into(), m(2.0))],
            }])
            .with_backlog(true)
            .with_topology(graph())
            .with_params(params(EVALUATOR_KEY, &[("k", "v")]));
        let answer = echo.evaluate(&ctx).expect("answered");
        assert_eq!(
            answer,
            vec![
                (
                    "job|map|metrics.custom-evaluator.inst.k|v|v1:2|1".to_string(),
                    m(1.0)
                ),
                ("LAG".to_string(), m(40.0)),
            ]
        );
        let err = echo
            .validate(&params(EVALUATOR_KEY, &[("bad", "7")]))
            .expect_err("refused");
        assert_eq!(err.kind, FfiErrorKind::MODE);
        assert_eq!(
            err.message.as_str(),
            "metrics.custom-evaluator.inst.bad = 7"
        );
        assert!(echo.validate(&params(EVALUATOR_KEY, &[])).is_ok());
    }

    #[test]
    fn panics_and_errors_of_an_evaluator_come_back_as_errors() {
        let (_, calls) = calls();
        let echo = calls.new_evaluator("echo").expect("created");
        let panicked = echo
            .evaluate(&EvaluatorContext::new("job", "panic", Vec::new()))
            .expect_err("a panic");
        assert_eq!(panicked.kind, FfiErrorKind::PANIC);
        assert!(
            panicked.message.contains("evaluator `echo` evaluate")
                && panicked.message.contains("echo cannot evaluate `panic`"),
            "{}",
            panicked.message
        );
        let refused = echo
            .evaluate(&EvaluatorContext::new("job", "error", Vec::new()))
            .expect_err("an error");
        assert_eq!(refused.kind, FfiErrorKind::MODE);
        assert_eq!(refused.message.as_str(), "echo refuses `error`");
        let unknown = calls
            .new_evaluator("halve")
            .err()
            .expect("no such evaluator");
        assert_eq!(unknown.kind, FfiErrorKind::UNKNOWN_MODE);
        assert!(unknown.message.contains("exports no evaluator `halve`"));
    }

    #[test]
    fn an_executor_answers_its_priority_steps_and_vetoes() {
        let (_, calls) = calls();
        let halve = calls.new_executor("halve-too").expect("created");
        assert_eq!(halve.priority().expect("priority"), -3);
        let summary = |id: &str, new| ScalingSummary {
            vertex_id: id.into(),
            current_parallelism: 2,
            new_parallelism: new,
            metrics: vec![("LAG".into(), m(3.0))],
        };
        let ctx = ExecutorContext::new("job", vec![summary("b", 9), summary("a", 6)], 1_000)
            .with_topology(graph());
        assert_eq!(
            halve.apply(&ctx).expect("applied"),
            ExecutorVerdict::Apply(vec![summary("a", 3), summary("b", 4)])
        );
        let veto = ctx
            .with_restart_time_ms(250)
            .with_params(params(EXECUTOR_KEY, &[("veto", "1")]));
        assert_eq!(
            halve.apply(&veto).expect("answered"),
            ExecutorVerdict::Veto("job@1000+250 source scaling.custom-executor.inst.veto".into())
        );
    }
}
