//! Reading the `[[edges]]` tables: endpoints, ship strategies (with CUSTOM's bucket count) and
//! key distributions, and checking that every vertex is connected as its kind requires.

use flowscale_sdk::ShipStrategy;
use toml::Spanned;

use super::distribution::distribution;
use super::problem::Ctx;
use super::raw::{RawEdge, RawVertex};
use super::vertex::resolve;
use crate::sim::error::SimError;
use crate::sim::spec::{EdgeSpec, VertexKind, VertexSpec};
use crate::sim::workload::Distribution;

const SHIP_VALID: &str = "HASH, REBALANCE, RESCALE, FORWARD, BROADCAST, GLOBAL, SHUFFLE, CUSTOM (with `buckets`) or CUSTOM:<buckets>";

/// Every edge, in file order; `default_keys` is the distribution of an edge without `keys`.
pub(super) fn edges(
    ctx: &Ctx<'_>,
    raw: &[Spanned<RawEdge>],
    vertices: &[VertexSpec],
    default_keys: &Distribution,
) -> Result<Vec<EdgeSpec>, SimError> {
    let mut edges = Vec::new();
    for (i, e) in raw.iter().enumerate() {
        let e = e.get_ref();
        let (from, to) = endpoints(ctx, i, e, vertices)?;
        let ship = ship_strategy(ctx, i, e)?;
        let keys = match &e.keys {
            Some(d) => distribution(ctx, d, &format!("edges[{i}].keys"))?,
            None => default_keys.clone(),
        };
        let drift_ms = match &e.drift {
            None => None,
            Some(d) => match d.get_ref().millis() {
                Ok(ms) if ms > 0 => Some(ms),
                _ => {
                    return Err(ctx.problem(
                        d.span(),
                        &format!("edges[{i}].drift"),
                        "the drift period must be a positive duration",
                        "e.g. `drift = \"20 min\"`",
                    ));
                }
            },
        };
        edges.push(EdgeSpec {
            from,
            to,
            ship,
            keys,
            drift_ms,
        });
    }
    Ok(edges)
}

/// The vertex indices an edge connects: no loop on one vertex, nothing into a source, nothing
/// out of a sink.
fn endpoints(
    ctx: &Ctx<'_>,
    i: usize,
    e: &RawEdge,
    vertices: &[VertexSpec],
) -> Result<(usize, usize), SimError> {
    let from = resolve(ctx, vertices, &e.from, &format!("edges[{i}].from"))?;
    let to = resolve(ctx, vertices, &e.to, &format!("edges[{i}].to"))?;
    if from == to {
        return Err(ctx.problem(
            e.to.span(),
            &format!("edges[{i}].to"),
            "an edge cannot loop on one vertex",
            "use `[[feedback]]` for iterations",
        ));
    }
    if vertices[to].kind == VertexKind::Source {
        return Err(ctx.problem(
            e.to.span(),
            &format!("edges[{i}].to"),
            &format!("`{}` is a source and cannot have inputs", vertices[to].id),
            "an operator or sink",
        ));
    }
    if vertices[from].kind == VertexKind::Sink {
        return Err(ctx.problem(
            e.from.span(),
            &format!("edges[{i}].from"),
            &format!("`{}` is a sink and cannot have outputs", vertices[from].id),
            "a source or operator",
        ));
    }
    Ok((from, to))
}

/// The ship strategy; a CUSTOM edge takes its bucket count from `CUSTOM:<buckets>` or from
/// `buckets`, which no other strategy accepts.
fn ship_strategy(ctx: &Ctx<'_>, i: usize, e: &RawEdge) -> Result<ShipStrategy, SimError> {
    let mut ship = ShipStrategy::parse(e.ship.get_ref());
    if ship == ShipStrategy::Unknown {
        return Err(ctx.problem(
            e.ship.span(),
            &format!("edges[{i}].ship"),
            &format!("unknown ship strategy `{}`", e.ship.get_ref()),
            SHIP_VALID,
        ));
    }
    if let ShipStrategy::Custom { buckets } = &mut ship {
        if let Some(b) = &e.buckets {
            if *b.get_ref() < 1 || *b.get_ref() > 1 << 20 {
                return Err(ctx.problem(
                    b.span(),
                    &format!("edges[{i}].buckets"),
                    "the bucket count must be positive",
                    "an integer in 1..=1048576",
                ));
            }
            *buckets = *b.get_ref() as u32;
        }
        if *buckets == 0 {
            return Err(ctx.problem(
                e.ship.span(),
                &format!("edges[{i}].ship"),
                "a CUSTOM edge needs a bucket count",
                "`buckets = 48` or `ship = \"CUSTOM:48\"`",
            ));
        }
    } else if let Some(b) = &e.buckets {
        return Err(ctx.problem(
            b.span(),
            &format!("edges[{i}].buckets"),
            "`buckets` only applies to CUSTOM edges",
            "remove it, or set `ship = \"CUSTOM\"`",
        ));
    }
    Ok(ship)
}

/// Every operator and sink has an input edge, and every source an output edge.
pub(super) fn check_connected(
    ctx: &Ctx<'_>,
    raw: &[Spanned<RawVertex>],
    vertices: &[VertexSpec],
    edges: &[EdgeSpec],
) -> Result<(), SimError> {
    for (i, v) in vertices.iter().enumerate() {
        let has_input = edges.iter().any(|e| e.to == i);
        let has_output = edges.iter().any(|e| e.from == i);
        let span = raw[i].get_ref().kind.span();
        if v.kind != VertexKind::Source && !has_input {
            return Err(ctx.problem(
                span,
                &format!("vertices[{i}].kind"),
                &format!("`{}` has no input edge", v.id),
                "kind = \"source\" for a vertex without inputs, or add an edge into it",
            ));
        }
        if v.kind == VertexKind::Source && !has_output {
            return Err(ctx.problem(
                span,
                &format!("vertices[{i}].kind"),
                &format!("source `{}` has no output edge", v.id),
                "an edge from every source",
            ));
        }
    }
    Ok(())
}
