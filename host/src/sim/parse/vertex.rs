//! Reading the `[[vertices]]` tables: ids, kinds, parallelism, capacity and the optional
//! per-vertex settings, and resolving the ids that edges, feedback edges and workloads name.

use toml::Spanned;

use super::problem::Ctx;
use super::raw::RawVertex;
use crate::sim::error::SimError;
use crate::sim::spec::{VertexKind, VertexSpec};

/// Flink's default slot-sharing group, of every vertex that names none.
const DEFAULT_SLOT_SHARING_GROUP: &str = "default";

/// Every vertex, in file order; ids are unique.
pub(super) fn vertices(
    ctx: &Ctx<'_>,
    raw: &[Spanned<RawVertex>],
) -> Result<Vec<VertexSpec>, SimError> {
    let mut vertices = Vec::with_capacity(raw.len());
    for (i, v) in raw.iter().enumerate() {
        vertices.push(vertex(ctx, i, v.get_ref())?);
    }
    for (i, v) in raw.iter().enumerate() {
        let id = v.get_ref().id.get_ref();
        if vertices[..i].iter().any(|o: &VertexSpec| &o.id == id) {
            return Err(ctx.problem(
                v.get_ref().id.span(),
                &format!("vertices[{i}].id"),
                &format!("duplicate vertex id `{id}`"),
                "a unique id per vertex",
            ));
        }
    }
    Ok(vertices)
}

/// The index of the vertex `id` names; `key` is where the name stands.
pub(super) fn resolve(
    ctx: &Ctx<'_>,
    vertices: &[VertexSpec],
    id: &Spanned<String>,
    key: &str,
) -> Result<usize, SimError> {
    vertices
        .iter()
        .position(|v| &v.id == id.get_ref())
        .ok_or_else(|| {
            ctx.problem(
                id.span(),
                key,
                &format!("unknown vertex `{}`", id.get_ref()),
                &known_ids(vertices),
            )
        })
}

/// The vertex ids, comma-separated: what a reference to an unknown vertex could have said.
pub(super) fn known_ids(vertices: &[VertexSpec]) -> String {
    vertices
        .iter()
        .map(|v| v.id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The key of field `field` of the `i`-th vertex.
fn key(i: usize, field: &str) -> String {
    format!("vertices[{i}].{field}")
}

/// One vertex, without its workload (attached later, from the `[workload.*]` tables).
fn vertex(ctx: &Ctx<'_>, i: usize, v: &RawVertex) -> Result<VertexSpec, SimError> {
    let id = v.id.get_ref().trim().to_string();
    if id.is_empty() {
        return Err(ctx.problem(
            v.id.span(),
            &key(i, "id"),
            "the id is empty",
            "a non-empty unique id",
        ));
    }
    let kind = kind(ctx, i, v)?;
    let max_parallelism = max_parallelism(ctx, i, v)?;
    let parallelism = *v.parallelism.get_ref();
    if parallelism < 1 || parallelism > i64::from(max_parallelism) {
        return Err(ctx.problem(
            v.parallelism.span(),
            &key(i, "parallelism"),
            &format!("{parallelism} is out of range"),
            &format!("an integer in 1..={max_parallelism} (the max parallelism)"),
        ));
    }
    let capacity = capacity(ctx, i, v)?;
    let selectivity = selectivity(ctx, i, v)?;
    let partitions = partitions(ctx, i, v, kind)?;
    let buffer = buffer(ctx, i, v, capacity)?;
    Ok(VertexSpec {
        name: v.name.clone().unwrap_or_else(|| id.clone()),
        id,
        kind,
        parallelism: parallelism as u32,
        max_parallelism,
        capacity,
        selectivity,
        partitions,
        buffer,
        state_bytes: non_negative(ctx, i, v.state_bytes.as_ref(), "state_bytes")?,
        state_bytes_per_record: non_negative(
            ctx,
            i,
            v.state_bytes_per_record.as_ref(),
            "state_bytes_per_record",
        )?,
        workload: None,
        slot_sharing_group: slot_sharing_group(ctx, i, v)?,
    })
}

/// The vertex's slot-sharing group: Flink's `default` unless named.
fn slot_sharing_group(ctx: &Ctx<'_>, i: usize, v: &RawVertex) -> Result<String, SimError> {
    match &v.slot_sharing_group {
        Some(g) if g.get_ref().trim().is_empty() => Err(ctx.problem(
            g.span(),
            &key(i, "slot_sharing_group"),
            "the group name is empty",
            "a non-empty name; vertices with the same name share slots (default `default`)",
        )),
        Some(g) => Ok(g.get_ref().trim().to_string()),
        None => Ok(DEFAULT_SLOT_SHARING_GROUP.to_string()),
    }
}

fn kind(ctx: &Ctx<'_>, i: usize, v: &RawVertex) -> Result<VertexKind, SimError> {
    match v.kind.get_ref().to_ascii_lowercase().as_str() {
        "source" => Ok(VertexKind::Source),
        "operator" => Ok(VertexKind::Operator),
        "sink" => Ok(VertexKind::Sink),
        other => Err(ctx.problem(
            v.kind.span(),
            &key(i, "kind"),
            &format!("unknown kind `{other}`"),
            "source, operator, sink",
        )),
    }
}

/// The number of key groups (default 128).
fn max_parallelism(ctx: &Ctx<'_>, i: usize, v: &RawVertex) -> Result<u32, SimError> {
    match &v.max_parallelism {
        Some(m) if (1..=32_768).contains(m.get_ref()) => Ok(*m.get_ref() as u32),
        Some(m) => Err(ctx.problem(
            m.span(),
            &key(i, "max_parallelism"),
            &format!("{} is out of range", m.get_ref()),
            "an integer in 1..=32768 (Flink's limit)",
        )),
        None => Ok(128),
    }
}

/// Records per second of one subtask at 100% busy, given directly (`capacity`) or as the time
/// one record takes (`cost_per_record`): exactly one of the two.
fn capacity(ctx: &Ctx<'_>, i: usize, v: &RawVertex) -> Result<f64, SimError> {
    match (&v.capacity, &v.cost_per_record) {
        (Some(c), None) if c.get_ref().is_finite() && *c.get_ref() > 0.0 => Ok(*c.get_ref()),
        (Some(c), None) => Err(ctx.problem(
            c.span(),
            &key(i, "capacity"),
            &format!("{} is not a positive rate", c.get_ref()),
            "records/s of one subtask at 100% busy, > 0",
        )),
        (None, Some(c)) if c.get_ref().secs() > 0.0 => Ok(1.0 / c.get_ref().secs()),
        (None, Some(c)) => Err(ctx.problem(
            c.span(),
            &key(i, "cost_per_record"),
            "the cost must be positive",
            "a duration such as \"20us\"",
        )),
        (Some(c), Some(_)) => Err(ctx.problem(
            c.span(),
            &key(i, "capacity"),
            "both `capacity` and `cost_per_record` are set",
            "one of them",
        )),
        (None, None) => Err(ctx.problem(
            v.id.span(),
            &key(i, "capacity"),
            "missing",
            "`capacity` (records/s per subtask) or `cost_per_record` (a duration)",
        )),
    }
}

/// Records out per record in (default 1).
fn selectivity(ctx: &Ctx<'_>, i: usize, v: &RawVertex) -> Result<f64, SimError> {
    match &v.selectivity {
        Some(s) if s.get_ref().is_finite() && *s.get_ref() >= 0.0 => Ok(*s.get_ref()),
        Some(s) => Err(ctx.problem(
            s.span(),
            &key(i, "selectivity"),
            &format!("{} is not a valid selectivity", s.get_ref()),
            "records out per record in, >= 0",
        )),
        None => Ok(1.0),
    }
}

/// Source partitions: required for a source, refused for anything else (0 there).
fn partitions(ctx: &Ctx<'_>, i: usize, v: &RawVertex, kind: VertexKind) -> Result<u32, SimError> {
    match (&v.partitions, kind) {
        (Some(p), VertexKind::Source) if (1..=1 << 20).contains(p.get_ref()) => {
            Ok(*p.get_ref() as u32)
        }
        (Some(p), VertexKind::Source) => Err(ctx.problem(
            p.span(),
            &key(i, "partitions"),
            &format!("{} is out of range", p.get_ref()),
            "an integer in 1..=1048576",
        )),
        (Some(p), _) => Err(ctx.problem(
            p.span(),
            &key(i, "partitions"),
            "only sources have partitions",
            "remove it",
        )),
        (None, VertexKind::Source) => Err(ctx.problem(
            v.id.span(),
            &key(i, "partitions"),
            "missing for a source",
            "the number of source partitions, e.g. `partitions = 12`",
        )),
        (None, _) => Ok(0),
    }
}

/// Records per input channel of a subtask (default: a second of capacity, at least 100).
fn buffer(ctx: &Ctx<'_>, i: usize, v: &RawVertex, capacity: f64) -> Result<u64, SimError> {
    match &v.buffer {
        Some(b) if *b.get_ref() >= 1 => Ok(*b.get_ref() as u64),
        Some(b) => Err(ctx.problem(
            b.span(),
            &key(i, "buffer"),
            "the buffer must hold at least one record",
            "an integer >= 1 (records per input channel)",
        )),
        None => Ok((capacity.ceil() as u64).max(100)),
    }
}

/// An optional non-negative number (default 0), such as a state size.
fn non_negative(
    ctx: &Ctx<'_>,
    i: usize,
    s: Option<&Spanned<f64>>,
    field: &str,
) -> Result<f64, SimError> {
    match s {
        Some(x) if x.get_ref().is_finite() && *x.get_ref() >= 0.0 => Ok(*x.get_ref()),
        Some(x) => Err(ctx.problem(
            x.span(),
            &key(i, field),
            &format!("{} is not valid", x.get_ref()),
            "a number >= 0",
        )),
        None => Ok(0.0),
    }
}
