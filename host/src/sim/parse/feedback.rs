//! Reading the `[[feedback]]` tables and checking the iterations they close: each tail is
//! downstream of its head, and no two iterations share a vertex (nesting is not modelled).

use toml::Spanned;

use super::graph::{heads, loop_body, reaches};
use super::problem::Ctx;
use super::raw::RawFeedback;
use super::vertex::resolve;
use crate::sim::error::SimError;
use crate::sim::spec::{EdgeSpec, FeedbackSpec, VertexKind, VertexSpec};

/// Every feedback edge, in file order: between operators, with a fraction in `[0, 1)`.
pub(super) fn feedback_edges(
    ctx: &Ctx<'_>,
    raw: &[Spanned<RawFeedback>],
    vertices: &[VertexSpec],
) -> Result<Vec<FeedbackSpec>, SimError> {
    let mut feedback = Vec::new();
    for (i, f) in raw.iter().enumerate() {
        let f = f.get_ref();
        let from = resolve(ctx, vertices, &f.from, &format!("feedback[{i}].from"))?;
        let to = resolve(ctx, vertices, &f.to, &format!("feedback[{i}].to"))?;
        let fraction = *f.fraction.get_ref();
        if !(0.0..1.0).contains(&fraction) {
            return Err(ctx.problem(
                f.fraction.span(),
                &format!("feedback[{i}].fraction"),
                &format!("{fraction} is not a fraction below 1"),
                "a number in [0, 1)",
            ));
        }
        if vertices[to].kind != VertexKind::Operator || vertices[from].kind != VertexKind::Operator
        {
            return Err(ctx.problem(
                f.to.span(),
                &format!("feedback[{i}]"),
                "feedback edges connect operators",
                "an operator tail (`from`) and an operator head (`to`)",
            ));
        }
        feedback.push(FeedbackSpec { from, to, fraction });
    }
    Ok(feedback)
}

/// Every tail is reachable from its head through edges, and the loop bodies of different heads
/// are disjoint.
pub(super) fn check_iterations(
    ctx: &Ctx<'_>,
    raw: &[Spanned<RawFeedback>],
    vertices: &[VertexSpec],
    edges: &[EdgeSpec],
    feedback: &[FeedbackSpec],
) -> Result<(), SimError> {
    for (i, f) in feedback.iter().enumerate() {
        if !reaches(edges, f.to, f.from) {
            return Err(ctx.problem(
                raw[i].get_ref().from.span(),
                &format!("feedback[{i}].from"),
                &format!(
                    "the tail `{}` is not downstream of the head `{}`",
                    vertices[f.from].id, vertices[f.to].id
                ),
                "a tail reachable from the head through edges",
            ));
        }
    }
    let bodies: Vec<(usize, Vec<bool>)> = heads(feedback)
        .into_iter()
        .map(|h| (h, loop_body(vertices.len(), edges, feedback, h)))
        .collect();
    for (a, (ha, ba)) in bodies.iter().enumerate() {
        for (hb, bb) in &bodies[a + 1..] {
            if ba.iter().zip(bb).any(|(x, y)| *x && *y) {
                let i = feedback.iter().position(|f| f.to == *hb).unwrap_or(0);
                return Err(ctx.problem(
                    raw[i].get_ref().to.span(),
                    &format!("feedback[{i}].to"),
                    &format!(
                        "the loops of `{}` and `{}` share vertices",
                        vertices[*ha].id, vertices[*hb].id
                    ),
                    "disjoint iterations (nested iterations are not supported)",
                ));
            }
        }
    }
    Ok(())
}
