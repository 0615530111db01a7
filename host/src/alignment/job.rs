//! One job's alignment: the resolved mode, applied to each vertex through the guard.

use std::sync::{Arc, OnceLock};

use flowscale_sdk::{AlignmentContext, ModeError};

use super::builtin::BuiltIn;
use super::catalog::ModeCatalog;
use super::custom::{CustomMode, GatedAnswer, gate_then_align};
use super::decision::Decision;
use super::explanation::{Explanation, Line};
use super::guard::{Panicked, contain, refuse_answer};
use super::inputs::{Inputs, default_applicable, narrow};
use super::outcome::{AlignOutcome, Aligner};
use super::request::{AlignmentRequest, recycle};
use super::resolve::{Resolved, Selection, UncheckedParams, mode_params, refused_params, resolve};
use crate::config::{ConfigLookup, KeyError};
use crate::events::{Event, EventReason, Severity};

/// The alignment of one job: what [`Aligner::align`] runs for each of its vertices.
#[derive(Debug, Clone)]
pub struct JobAlignment {
    job: String,
    resolved: Resolved,
    /// The id of the selected mode ([`Selection::id`]), formatted once: every aligned vertex's
    /// outcome names it, and they share it instead of each copying it.
    mode_id: Arc<str>,
    /// "mode `name` (id from origin) answered ", the start of a custom mode's explanation,
    /// formatted on first use instead of for every vertex.
    answered: OnceLock<Arc<str>>,
    /// The explanation of a vertex the custom mode declined ("does not apply"), the same for
    /// every such vertex of the job: formatted on first use, then shared.
    declined: OnceLock<Arc<str>>,
}

impl JobAlignment {
    /// Resolves a job's mode strictly: any problem is an error (loading, `validate`).
    pub fn resolve(
        job: &str,
        config: &impl ConfigLookup,
        catalog: &dyn ModeCatalog,
    ) -> Result<JobAlignment, Vec<KeyError>> {
        resolve(config, catalog).map(|resolved| JobAlignment::new(job.to_string(), resolved))
    }

    fn new(job: String, resolved: Resolved) -> JobAlignment {
        JobAlignment {
            job,
            mode_id: resolved.selection.id().into(),
            resolved,
            answered: OnceLock::new(),
            declined: OnceLock::new(),
        }
    }

    /// Resolves a job's mode at run time: a mode that cannot be resolved (a plugin that went
    /// missing since validation) falls back to BALANCED, and the returned events say so.
    pub(crate) fn resolve_or_balanced(
        job: &str,
        config: &impl ConfigLookup,
        catalog: &dyn ModeCatalog,
    ) -> (JobAlignment, Vec<Event>) {
        match JobAlignment::resolve(job, config, catalog) {
            Ok(alignment) => (alignment, Vec::new()),
            Err(errors) => {
                let reasons: Vec<String> = errors.iter().map(ToString::to_string).collect();
                let event = Event::new(
                    EventReason::ModeFallback,
                    Severity::Warning,
                    format!(
                        "alignment mode could not be resolved, using BALANCED: {}",
                        reasons.join("; ")
                    ),
                )
                .job(job);
                let alignment = JobAlignment::new(
                    job.to_string(),
                    Resolved {
                        selection: Selection::BuiltIn(BuiltIn::Balanced),
                        params: mode_params(config, "BALANCED"),
                    },
                );
                (alignment, vec![event])
            }
        }
    }

    /// The id of the selected mode.
    pub(crate) fn mode_id(&self) -> String {
        self.mode_id.to_string()
    }

    /// True when `other` decides with the same implementation: the same mode and, for a custom
    /// mode, the very same object (a new version of a plugin, loaded while the host runs, is
    /// another object even under the same id). Parameters are the configuration's to compare.
    /// Tells the job's custom mode, if it has one, that the loop of `job` ended
    /// ([`super::HostMode::forget_job`]).
    pub(crate) fn forget_job(&self, job: &str) {
        if let Selection::Custom { mode, .. } = &self.resolved.selection {
            mode.mode.forget_job(job);
        }
    }

    pub(crate) fn same_implementation(&self, other: &JobAlignment) -> bool {
        match (&self.resolved.selection, &other.resolved.selection) {
            (Selection::Custom { mode: a, .. }, Selection::Custom { mode: b, .. }) => {
                a.id == b.id && std::ptr::addr_eq(Arc::as_ptr(&a.mode), Arc::as_ptr(&b.mode))
            }
            _ => self.mode_id == other.mode_id,
        }
    }

    fn outcome(&self, decision: Decision, applicable: bool) -> AlignOutcome {
        AlignOutcome {
            parallelism: narrow(decision.parallelism),
            mode: Arc::clone(&self.mode_id),
            applicable,
            events: decision.events,
            explanation: decision.explanation,
        }
    }

    fn fault(&self, ctx: &AlignmentContext, name: &str, mode: &CustomMode, reason: &str) -> Event {
        let vertex = if ctx.vertex_id().is_empty() {
            ctx.vertex_name()
        } else {
            ctx.vertex_id()
        };
        Event::new(
            EventReason::PluginFault,
            Severity::Warning,
            format!(
                "mode `{name}` ({} from {}) {reason}; using the computed target {}",
                mode.id,
                mode.origin,
                ctx.target_parallelism()
            ),
        )
        .job(&self.job)
        .vertex(vertex)
        .parallelism(ctx.target_parallelism(), ctx.target_parallelism())
    }

    /// Aligns with BALANCED because the custom mode cannot be called now (`why`).
    fn align_balanced_instead(
        &self,
        ctx: &AlignmentContext,
        name: &str,
        why: String,
    ) -> AlignOutcome {
        let balanced = JobAlignment::new(
            self.job.clone(),
            Resolved {
                selection: Selection::BuiltIn(BuiltIn::Balanced),
                params: self.resolved.params.clone(),
            },
        );
        let mut outcome = balanced.decide(ctx);
        let event = Event::new(
            EventReason::ModeFallback,
            Severity::Warning,
            format!("mode `{name}` cannot be used, using BALANCED: {why}"),
        )
        .job(&self.job);
        outcome.events.insert(0, event);
        outcome.explanation.insert_first(Line::Text(
            format!("mode `{name}` cannot be used ({why}): BALANCED instead").into(),
        ));
        outcome
    }

    /// Why the custom mode cannot be called now, if so: it is quarantined, or it has not
    /// accepted parameters it could not check when it was resolved (asked now, until it does).
    fn cannot_call(
        &self,
        name: &str,
        mode: &CustomMode,
        unchecked: Option<&UncheckedParams>,
    ) -> Option<String> {
        if let Some(why) = mode.mode.unavailable() {
            return Some(why);
        }
        let unchecked = unchecked.filter(|u| !u.accepted())?;
        match contain(|| mode.mode.validate(&self.resolved.params)) {
            Ok(Ok(())) => {
                unchecked.accept();
                None
            }
            Ok(Err(err)) => Some(refused_params(name, mode, &err)),
            Err(panic) => Some(refused_params(name, mode, &panic)),
        }
    }

    fn align_custom(
        &self,
        ctx: &AlignmentContext,
        name: &str,
        mode: &CustomMode,
        unchecked: Option<&UncheckedParams>,
    ) -> AlignOutcome {
        if let Some(why) = self.cannot_call(name, mode, unchecked) {
            return self.align_balanced_instead(ctx, name, why);
        }
        self.custom_outcome(ctx, name, mode, call_mode(mode, ctx))
    }

    /// Aligns several vertices of this job with a custom mode: in one call when the mode
    /// answers them together ([`super::HostMode::align_many`]), else vertex by vertex as
    /// [`JobAlignment::align_custom`]. Either way each vertex gets the outcome, events and
    /// explanation its own call would give; a call that fails as a whole (a worker that died or
    /// missed its deadline) is each vertex's fault, with its own event.
    fn align_custom_all(
        &self,
        ctxs: &[AlignmentContext],
        name: &str,
        mode: &CustomMode,
        unchecked: Option<&UncheckedParams>,
    ) -> Vec<AlignOutcome> {
        if let Some(why) = self.cannot_call(name, mode, unchecked) {
            return ctxs
                .iter()
                .map(|ctx| self.align_balanced_instead(ctx, name, why.clone()))
                .collect();
        }
        let refs: Vec<&AlignmentContext> = ctxs.iter().collect();
        let answers: Vec<Result<Result<GatedAnswer, ModeError>, ModePanic>> =
            match contain(|| mode.mode.align_many(&refs)) {
                Ok(None) => {
                    return ctxs
                        .iter()
                        .map(|ctx| self.custom_outcome(ctx, name, mode, call_mode(mode, ctx)))
                        .collect();
                }
                Ok(Some(answers)) => answers.into_iter().map(Ok).collect(),
                Err(panic) => vec![Err(ModePanic::InAlign(panic)); ctxs.len()],
            };
        let mut answers = answers.into_iter();
        ctxs.iter()
            .map(|ctx| {
                let answer = answers.next().unwrap_or_else(|| {
                    Ok(Err(ModeError::new(
                        "the mode gave no answer for this vertex in its batch",
                    )))
                });
                self.custom_outcome(ctx, name, mode, answer)
            })
            .collect()
    }

    /// The outcome of a custom mode's answer for one vertex: the aligned parallelism, or the
    /// kept target with a `PluginFault` event that says what went wrong.
    fn custom_outcome(
        &self,
        ctx: &AlignmentContext,
        name: &str,
        mode: &CustomMode,
        answer: Result<Result<GatedAnswer, ModeError>, ModePanic>,
    ) -> AlignOutcome {
        let t = u64::from(ctx.target_parallelism());
        let keep_target = |event: Event, applicable: bool, why: String| AlignOutcome {
            parallelism: ctx.target_parallelism(),
            mode: Arc::clone(&self.mode_id),
            applicable,
            events: vec![event],
            explanation: Explanation::text(why),
        };
        let answer = match answer {
            Ok(Ok(GatedAnswer::Aligned(answer))) => answer,
            Ok(Ok(GatedAnswer::NotApplicable)) => {
                return self.outcome(
                    Decision::quiet(
                        t,
                        Explanation::line(Line::Shared(Arc::clone(
                            self.declined.get_or_init(|| {
                                format!(
                                    "mode `{name}` ({}) does not apply to this vertex: keeping the target",
                                    mode.id
                                )
                                .into()
                            }),
                        ))),
                    ),
                    false,
                );
            }
            Ok(Ok(GatedAnswer::NothingToAlign)) => {
                return self.outcome(
                    Decision::quiet(
                        t,
                        Explanation::text("target equals current parallelism: nothing to align"),
                    ),
                    true,
                );
            }
            Ok(Err(err)) => {
                let reason = format!("failed: {err}");
                return keep_target(self.fault(ctx, name, mode, &reason), true, reason);
            }
            Err(ModePanic::InGate(panic)) => {
                let reason = format!("is_applicable {panic}");
                return keep_target(self.fault(ctx, name, mode, &reason), false, reason);
            }
            Err(ModePanic::InAlign(panic)) => {
                let reason = panic.to_string();
                return keep_target(self.fault(ctx, name, mode, &reason), true, reason);
            }
        };
        if let Some(reason) = refuse_answer(ctx, answer) {
            let reason = format!("{reason}: refused");
            return keep_target(self.fault(ctx, name, mode, &reason), true, reason);
        }
        self.outcome(
            Decision::quiet(
                u64::from(answer),
                Explanation::line(Line::Answered {
                    mode: Arc::clone(self.answered.get_or_init(|| {
                        format!("mode `{name}` ({} from {}) answered ", mode.id, mode.origin).into()
                    })),
                    answer,
                }),
            ),
            true,
        )
    }
}

/// A panic out of a custom mode's call, by the call it came from.
#[derive(Clone)]
enum ModePanic {
    /// Out of `is_applicable`.
    InGate(Panicked),
    /// Out of `align` (or the combined call).
    InAlign(Panicked),
}

/// The gate and the alignment of one vertex: in one call when the mode offers it (a plugin in a
/// worker process, for which every call is a round trip), else as two calls, each guarded.
fn call_mode(
    mode: &CustomMode,
    ctx: &AlignmentContext,
) -> Result<Result<GatedAnswer, ModeError>, ModePanic> {
    if let Some(answer) =
        contain(|| mode.mode.align_if_applicable(ctx)).map_err(ModePanic::InAlign)?
    {
        return Ok(answer);
    }
    gate_then_align(
        ctx,
        || contain(|| mode.mode.is_applicable(ctx)).map_err(ModePanic::InGate),
        || contain(|| mode.mode.align(ctx)).map_err(ModePanic::InAlign),
    )
}

impl Aligner for JobAlignment {
    fn align(&self, request: AlignmentRequest) -> AlignOutcome {
        if let Selection::BuiltIn(builtin) = &self.resolved.selection {
            // BALANCED, EVENLY_SPREAD and OFF read the request's numbers and ship strategies
            // alone: they decide from the request, and no context is built for them.
            return self.decide_with(
                Inputs::of_request(&request),
                request.source_partitions,
                default_applicable(&request),
                |inputs| builtin.decide(inputs),
            );
        }
        let ctx = request.into_context(self.resolved.params.clone());
        let outcome = self.decide(&ctx);
        recycle(ctx);
        outcome
    }

    /// A custom mode gets the job's vertices together (one round trip to a plugin worker
    /// instead of one per vertex); the other modes decide vertex by vertex, as in `align`.
    fn align_all(&self, requests: Vec<AlignmentRequest>) -> Vec<AlignOutcome> {
        let Selection::Custom {
            name,
            mode,
            unchecked,
        } = &self.resolved.selection
        else {
            return requests.into_iter().map(|r| self.align(r)).collect();
        };
        if !mode.mode.aligns_many() {
            return requests.into_iter().map(|r| self.align(r)).collect();
        }
        let ctxs: Vec<AlignmentContext> = requests
            .into_iter()
            .map(|r| r.into_context(self.resolved.params.clone()))
            .collect();
        let outcomes = self.align_custom_all(&ctxs, name, mode, unchecked.as_ref());
        ctxs.into_iter().for_each(recycle);
        outcomes
    }

    /// The built-in modes decide from the numbers (and ship strategies) alone and emit no
    /// events: they never read the identity, the metrics or the graph.
    fn reads_details(&self) -> bool {
        !matches!(self.resolved.selection, Selection::BuiltIn(_))
    }
}

impl JobAlignment {
    /// Aligns one vertex whose context carries this job's mode parameters.
    pub(super) fn decide(&self, ctx: &AlignmentContext) -> AlignOutcome {
        let selection = &self.resolved.selection;
        if let Selection::Custom {
            name,
            mode,
            unchecked,
        } = selection
        {
            return self.align_custom(ctx, name, mode, unchecked.as_ref());
        }
        self.decide_with(
            Inputs::of(ctx),
            ctx.source_partitions(),
            ctx.default_applicable(),
            |inputs| match selection {
                Selection::BuiltIn(builtin) => builtin.decide(inputs),
                Selection::Advanced(spec) => spec.decide(ctx, inputs),
                Selection::Legacy(legacy) => legacy.decide(ctx, inputs),
                Selection::Custom { .. } => unreachable!("handled above"),
            },
        )
    }

    /// The decision of a built-in, legacy or ADVANCED mode (`mode`) on a vertex with these
    /// `inputs`, after the checks they share (nothing to align, not applicable), with the
    /// starting point as the explanation's first line and the job on every event.
    fn decide_with(
        &self,
        inputs: Inputs,
        source_partitions: u32,
        applicable: bool,
        mode: impl FnOnce(&Inputs) -> Decision,
    ) -> AlignOutcome {
        if inputs.t == inputs.c {
            return self.outcome(
                Decision::quiet(
                    inputs.t,
                    Explanation::text("target equals current parallelism: nothing to align"),
                ),
                applicable,
            );
        }
        if !applicable {
            return self.outcome(
                Decision::quiet(
                    inputs.t,
                    Explanation::text("not applicable (neither a source with known partitions nor a keyBy input): keeping the target"),
                ),
                false,
            );
        }
        let mut decision = mode(&inputs);
        decision.explanation.insert_first(Line::Inputs {
            inputs,
            source_partitions,
        });
        for event in &mut decision.events {
            if event.job.is_none() && !self.job.is_empty() {
                event.job = Some(self.job.clone());
            }
        }
        self.outcome(decision, true)
    }
}
