//! The plugin side of the kinds table (`kinds.rs`): the evaluators and executors a plugin
//! exports, behind `extern "C"` entry points that each catch panics inside the plugin, like
//! the mode object's methods (`guest.rs`).

use abi_stable::std_types::RResult;

use super::context::FfiStr;
use super::guest::guarded;
use super::lend::{
    EvaluatorRef, ExecutorRef, SharedRef, rebuild_params, with_lent_evaluator, with_lent_executor,
};
use super::reply::{Object, Reply, ReplyRef, Status};
use super::root::{FfiError, FfiErrorKind};
use crate::evaluator::MetricEvaluator;
use crate::executor::{ExecutorVerdict, ScalingExecutor};
use crate::params::{EVALUATOR_KEY, EXECUTOR_KEY};

/// One metric evaluator a plugin exports: its implementation id, description and constructor.
pub struct EvaluatorFactory {
    /// The implementation id (`metrics.custom-evaluator.<name>.class`).
    pub id: &'static str,
    /// A one-line description for `flowscale plugins`.
    pub description: &'static str,
    /// Creates the evaluator.
    pub make: fn() -> Box<dyn MetricEvaluator>,
}

/// One scaling executor a plugin exports: its implementation id, description and constructor.
pub struct ExecutorFactory {
    /// The implementation id (`scaling.custom-executor.<name>.class`).
    pub id: &'static str,
    /// A one-line description for `flowscale plugins`.
    pub description: &'static str,
    /// Creates the executor.
    pub make: fn() -> Box<dyn ScalingExecutor>,
}

/// An evaluator as the table's objects hold it (the id names it in panic messages).
struct EvaluatorObject {
    id: &'static str,
    inner: Box<dyn MetricEvaluator>,
}

/// An executor as the table's objects hold it.
struct ExecutorObject {
    id: &'static str,
    inner: Box<dyn ScalingExecutor>,
}

/// Runs `f` under the panic guard and reports its error through `reply`: the status of the
/// entry point.
fn answer(
    reply: ReplyRef,
    what: impl FnOnce() -> String,
    f: impl FnOnce(&Reply) -> Result<(), FfiError>,
) -> Status {
    // SAFETY: `reply` is the one the host handed to the running call.
    let reply = unsafe { Reply::new(reply) };
    match guarded(what, || match f(&reply) {
        Ok(()) => RResult::ROk(()),
        Err(e) => RResult::RErr(e),
    }) {
        RResult::ROk(()) => 0,
        RResult::RErr(err) => reply.error(&err),
    }
}

fn mode_error(e: crate::ModeError) -> FfiError {
    FfiError::new(FfiErrorKind::MODE, e.message())
}

/// Creates the object of `id` among `list` (found by `id_of`), or reports why not.
fn create<F, T>(
    list: &'static [F],
    id: FfiStr,
    reply: ReplyRef,
    kind: &str,
    id_of: fn(&F) -> &'static str,
    make: impl FnOnce(&'static F) -> T,
) -> Object {
    let mut object: Object = std::ptr::null_mut();
    // SAFETY: the host lends the id for the call.
    let id = unsafe { id.to_owned_string() };
    let status = answer(
        reply,
        || format!("the constructor of {kind} `{id}`"),
        |_| {
            let Some(factory) = list.iter().find(|f| id_of(f) == id) else {
                let known: Vec<&str> = list.iter().map(id_of).collect();
                return Err(FfiError::new(
                    FfiErrorKind::UNKNOWN_MODE,
                    format!(
                        "this plugin exports no {kind} `{id}` (it exports: {})",
                        known.join(", ")
                    ),
                ));
            };
            object = Box::into_raw(Box::new(make(factory))).cast();
            Ok(())
        },
    );
    if status != 0 {
        return std::ptr::null_mut();
    }
    object
}

/// `new_evaluator` of a plugin exporting `evaluators`.
pub fn new_evaluator(
    evaluators: &'static [EvaluatorFactory],
    id: FfiStr,
    reply: ReplyRef,
) -> Object {
    create(
        evaluators,
        id,
        reply,
        "evaluator",
        |f| f.id,
        |f| EvaluatorObject {
            id: f.id,
            inner: (f.make)(),
        },
    )
}

/// `new_executor` of a plugin exporting `executors`.
pub fn new_executor(executors: &'static [ExecutorFactory], id: FfiStr, reply: ReplyRef) -> Object {
    create(
        executors,
        id,
        reply,
        "executor",
        |f| f.id,
        |f| ExecutorObject {
            id: f.id,
            inner: (f.make)(),
        },
    )
}

fn evaluator<'a>(object: Object) -> &'a EvaluatorObject {
    // SAFETY: the host only passes objects `new_evaluator` created and has not dropped.
    unsafe { &*object.cast::<EvaluatorObject>() }
}

fn executor<'a>(object: Object) -> &'a ExecutorObject {
    // SAFETY: as above, for `new_executor`.
    unsafe { &*object.cast::<ExecutorObject>() }
}

pub(super) unsafe extern "C" fn evaluate(
    object: Object,
    ctx: EvaluatorRef,
    reply: ReplyRef,
) -> Status {
    let e = evaluator(object);
    answer(
        reply,
        || format!("evaluator `{}` evaluate", e.id),
        |reply| {
            // SAFETY: the host lends `ctx` for the call.
            let metrics = unsafe { with_lent_evaluator(ctx, |ctx| e.inner.evaluate(ctx)) }
                .map_err(mode_error)?;
            for (name, m) in &metrics {
                reply.metric(name, m);
            }
            Ok(())
        },
    )
}

pub(super) unsafe extern "C" fn validate_evaluator(
    object: Object,
    params: SharedRef,
    reply: ReplyRef,
) -> Status {
    let e = evaluator(object);
    answer(
        reply,
        || format!("evaluator `{}` validate", e.id),
        |_| {
            // SAFETY: the host lends `params` for the call.
            let params = unsafe { rebuild_params(params, EVALUATOR_KEY) };
            e.inner.validate(&params).map_err(mode_error)
        },
    )
}

pub(super) unsafe extern "C" fn drop_evaluator(object: Object) {
    if object.is_null() {
        return;
    }
    // A panic in a destructor must not unwind into the host either.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: created by `new_evaluator` with `Box::into_raw`, dropped once by the host.
        drop(unsafe { Box::from_raw(object.cast::<EvaluatorObject>()) });
    }));
}

pub(super) unsafe extern "C" fn priority(object: Object, reply: ReplyRef) -> Status {
    let x = executor(object);
    answer(
        reply,
        || format!("executor `{}` priority", x.id),
        |reply| {
            reply.priority(x.inner.priority());
            Ok(())
        },
    )
}

pub(super) unsafe extern "C" fn apply(object: Object, ctx: ExecutorRef, reply: ReplyRef) -> Status {
    let x = executor(object);
    answer(
        reply,
        || format!("executor `{}` apply", x.id),
        |reply| {
            // SAFETY: the host lends `ctx` for the call.
            let verdict = unsafe { with_lent_executor(ctx, |ctx| x.inner.apply(ctx)) };
            match verdict.map_err(mode_error)? {
                ExecutorVerdict::Veto(why) => reply.veto(&why),
                ExecutorVerdict::Apply(summaries) => {
                    for s in &summaries {
                        reply.summary(s);
                    }
                }
            }
            Ok(())
        },
    )
}

pub(super) unsafe extern "C" fn validate_executor(
    object: Object,
    params: SharedRef,
    reply: ReplyRef,
) -> Status {
    let x = executor(object);
    answer(
        reply,
        || format!("executor `{}` validate", x.id),
        |_| {
            // SAFETY: the host lends `params` for the call.
            let params = unsafe { rebuild_params(params, EXECUTOR_KEY) };
            x.inner.validate(&params).map_err(mode_error)
        },
    )
}

pub(super) unsafe extern "C" fn drop_executor(object: Object) {
    if object.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: created by `new_executor` with `Box::into_raw`, dropped once by the host.
        drop(unsafe { Box::from_raw(object.cast::<ExecutorObject>()) });
    }));
}
