//! Reading the `[workload.<source>]` tables: what arrives at each source, attached to its
//! vertex. Every source has exactly one; nothing else has any.

use std::collections::BTreeMap;
use std::path::Path;

use toml::Spanned;

use super::distribution::distribution;
use super::problem::Ctx;
use super::rate::rate_profile;
use super::raw::{RawVertex, RawWorkload};
use super::vertex::known_ids;
use crate::sim::error::SimError;
use crate::sim::spec::{SourceWorkload, VertexKind, VertexSpec};
use crate::sim::workload::Distribution;

/// Sets the workload of every source from `raw` (keyed by vertex id); `raw_vertices` locates a
/// source that has none. Trace paths are relative to `base_dir`.
pub(super) fn attach_workloads(
    ctx: &Ctx<'_>,
    raw: &BTreeMap<String, Spanned<RawWorkload>>,
    raw_vertices: &[Spanned<RawVertex>],
    vertices: &mut [VertexSpec],
    base_dir: &Path,
) -> Result<(), SimError> {
    let mut workloads: BTreeMap<usize, SourceWorkload> = BTreeMap::new();
    for (id, w) in raw {
        let key = format!("workload.{id}");
        let Some(vi) = vertices.iter().position(|v| &v.id == id) else {
            return Err(ctx.problem(
                w.span(),
                &key,
                &format!("unknown vertex `{id}`"),
                &known_ids(vertices),
            ));
        };
        if vertices[vi].kind != VertexKind::Source {
            return Err(ctx.problem(
                w.span(),
                &key,
                &format!("`{id}` is not a source"),
                "a workload per source vertex",
            ));
        }
        workloads.insert(vi, workload(ctx, w, &key, base_dir)?);
    }
    for (i, v) in vertices.iter_mut().enumerate() {
        if v.kind == VertexKind::Source {
            match workloads.remove(&i) {
                Some(w) => v.workload = Some(w),
                None => {
                    return Err(ctx.problem(
                        raw_vertices[i].span(),
                        &format!("workload.{}", v.id),
                        &format!("source `{}` has no workload", v.id),
                        &format!(
                            "a `[workload.{}]` table with at least one `[[workload.{}.rate]]`",
                            v.id, v.id
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// One `[workload.<source>]` table; `key` is `workload.<source>`.
fn workload(
    ctx: &Ctx<'_>,
    w: &Spanned<RawWorkload>,
    key: &str,
    base_dir: &Path,
) -> Result<SourceWorkload, SimError> {
    let raw = w.get_ref();
    if raw.rate.is_empty() {
        return Err(ctx.problem(
            w.span(),
            &format!("{key}.rate"),
            "no rate given",
            &format!("at least one `[[{key}.rate]]` table"),
        ));
    }
    let mut rate = Vec::new();
    for (i, r) in raw.rate.iter().enumerate() {
        rate.push(rate_profile(ctx, r, &format!("{key}.rate[{i}]"), base_dir)?);
    }
    let partition_skew = match &raw.partition_skew {
        Some(d) => distribution(ctx, d, &format!("{key}.partition_skew"))?,
        None => Distribution::Uniform,
    };
    let total_records = match &raw.total_records {
        Some(t) if *t.get_ref() >= 0 => Some(*t.get_ref() as u64),
        Some(t) => {
            return Err(ctx.problem(
                t.span(),
                &format!("{key}.total_records"),
                "negative",
                "an integer >= 0 (omit for an unbounded source)",
            ));
        }
        None => None,
    };
    let noise = match &raw.noise {
        Some(n) if (0.0..1.0).contains(n.get_ref()) => *n.get_ref(),
        Some(n) => {
            return Err(ctx.problem(
                n.span(),
                &format!("{key}.noise"),
                &format!("{} is out of range", n.get_ref()),
                "a relative amplitude in [0, 1)",
            ));
        }
        None => 0.0,
    };
    Ok(SourceWorkload {
        rate,
        partition_skew,
        total_records,
        noise,
    })
}
