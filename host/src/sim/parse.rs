//! Reading a job file (TOML) into a validated [`SimulatedJobSpec`], with every error naming the file, the
//! line, the key and what would be valid.
//!
//! Two passes: serde turns the text into raw tables that remember where each value came from
//! (`toml::Spanned`), then validation resolves ids, checks ranges and the graph, and builds the
//! typed spec. The schema is strict (unknown keys are errors): a job file is a test fixture, and
//! a silently ignored typo would make a simulated result mean something other than intended.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use flowscale_sdk::ShipStrategy;
use serde::Deserialize;
use toml::Spanned;

use super::error::{JobFileProblem, SimError};
use super::spec::{
    EdgeSpec, FeedbackSpec, RestartSpec, SimulatedJobSpec, SourceWorkload, VertexKind, VertexSpec,
};
use super::workload::{Distribution, RateProfile};
use crate::config::parse_duration;

/// A duration written either in Flink's syntax (`"30s"`, `"5 min"`) or as a number of
/// milliseconds.
#[derive(Debug, Clone, Copy)]
struct RawDuration(Result<i64, ()>, f64);

impl<'de> Deserialize<'de> for RawDuration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = RawDuration;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "a duration such as \"30s\", \"5 min\", \"1h\", or a number of milliseconds",
                )
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RawDuration, E> {
                if v < 0 {
                    return Err(E::custom("a duration cannot be negative"));
                }
                Ok(RawDuration(Ok(v), v as f64 / 1000.0))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawDuration, E> {
                let d = parse_duration(v).map_err(E::custom)?;
                Ok(RawDuration(
                    i64::try_from(d.as_millis()).map_err(|_| ()),
                    d.as_secs_f64(),
                ))
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl RawDuration {
    fn secs(&self) -> f64 {
        self.1
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawJob {
    #[serde(default)]
    job: RawHeader,
    keys: Option<Spanned<RawDist>>,
    #[serde(default)]
    vertices: Vec<Spanned<RawVertex>>,
    #[serde(default)]
    edges: Vec<Spanned<RawEdge>>,
    #[serde(default)]
    feedback: Vec<Spanned<RawFeedback>>,
    #[serde(default)]
    workload: BTreeMap<String, Spanned<RawWorkload>>,
    restart: Option<RawRestart>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawHeader {
    name: Option<String>,
    seed: Option<u64>,
    tick: Option<Spanned<RawDuration>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVertex {
    id: Spanned<String>,
    name: Option<String>,
    kind: Spanned<String>,
    parallelism: Spanned<i64>,
    max_parallelism: Option<Spanned<i64>>,
    capacity: Option<Spanned<f64>>,
    cost_per_record: Option<Spanned<RawDuration>>,
    selectivity: Option<Spanned<f64>>,
    partitions: Option<Spanned<i64>>,
    buffer: Option<Spanned<i64>>,
    state_bytes: Option<Spanned<f64>>,
    state_bytes_per_record: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEdge {
    from: Spanned<String>,
    to: Spanned<String>,
    ship: Spanned<String>,
    buckets: Option<Spanned<i64>>,
    keys: Option<Spanned<RawDist>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFeedback {
    from: Spanned<String>,
    to: Spanned<String>,
    fraction: Spanned<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkload {
    #[serde(default)]
    rate: Vec<Spanned<RawRate>>,
    partition_skew: Option<Spanned<RawDist>>,
    total_records: Option<Spanned<i64>>,
    noise: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRate {
    kind: Spanned<String>,
    rate: Option<f64>,
    from: Option<f64>,
    to: Option<f64>,
    at: Option<RawDuration>,
    start: Option<RawDuration>,
    end: Option<RawDuration>,
    mean: Option<f64>,
    amplitude: Option<f64>,
    period: Option<RawDuration>,
    phase: Option<RawDuration>,
    low: Option<f64>,
    high: Option<f64>,
    peak_at: Option<RawDuration>,
    extra: Option<f64>,
    duration: Option<RawDuration>,
    path: Option<String>,
    interpolate: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDist {
    kind: Spanned<String>,
    exponent: Option<f64>,
    weights: Option<Vec<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRestart {
    downtime: Option<Spanned<RawDuration>>,
    per_gib: Option<Spanned<RawDuration>>,
}

/// Where errors point: the file name and its text.
struct Ctx<'a> {
    file: &'a str,
    src: &'a str,
}

impl Ctx<'_> {
    fn problem(&self, span: Range<usize>, key: &str, message: &str, valid: &str) -> SimError {
        let (line, column) = line_col(self.src, span.start);
        SimError::Invalid(Box::new(JobFileProblem {
            file: self.file.to_string(),
            line,
            column,
            key: key.to_string(),
            message: message.to_string(),
            valid: valid.to_string(),
        }))
    }

    /// Turns a TOML/serde error into a located problem; the key is read from the line the error
    /// points at, since the parser's key path is not public.
    fn toml_problem(&self, e: &toml::de::Error) -> SimError {
        let span = e.span().unwrap_or(0..0);
        let line_text = self.src[..span.start.min(self.src.len())]
            .rsplit('\n')
            .next()
            .unwrap_or("")
            .to_string()
            + self.src[span.start.min(self.src.len())..]
                .split('\n')
                .next()
                .unwrap_or("");
        let mut key = match line_text.split_once('=') {
            Some((k, _)) => k.trim().to_string(),
            None => line_text.trim().to_string(),
        };
        let message = e.message().trim().to_string();
        let (message, valid) = match message.split_once(", expected ") {
            Some((m, v)) => (m.to_string(), readable_type(v)),
            None => (
                message,
                "see the job files in examples/jobs/ and the `flowscale::sim` docs".to_string(),
            ),
        };
        // A missing field points at its table's header: name the field under that table.
        if let Some(field) = message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.strip_suffix('`'))
        {
            let table = key.trim_matches(|c| c == '[' || c == ']').trim();
            key = if table.is_empty() || line_text.contains('=') {
                field.to_string()
            } else {
                format!("{table}.{field}")
            };
        }
        self.problem(span, &key, &message, &valid)
    }
}

/// serde's names for expected types, as a reader of a TOML file would say them.
fn readable_type(expected: &str) -> String {
    match expected {
        "i64" | "u64" | "u32" | "i32" => "an integer".to_string(),
        "f64" => "a number".to_string(),
        "a string" | "string" => "a string".to_string(),
        "a boolean" | "bool" => "true or false".to_string(),
        other => other.to_string(),
    }
}

fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let before = &src[..offset.min(src.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

const SHIP_VALID: &str = "HASH, REBALANCE, RESCALE, FORWARD, BROADCAST, GLOBAL, SHUFFLE, CUSTOM (with `buckets`) or CUSTOM:<buckets>";

/// Parses and validates a job file's text. `file` names it in errors; `base_dir` resolves trace
/// paths.
pub(crate) fn parse_job(
    src: &str,
    file: &str,
    base_dir: &Path,
) -> Result<SimulatedJobSpec, SimError> {
    let ctx = Ctx { file, src };
    let raw: RawJob = toml::from_str(src).map_err(|e| ctx.toml_problem(&e))?;
    if raw.vertices.is_empty() {
        return Err(ctx.problem(
            0..0,
            "vertices",
            "the job has no vertices",
            "at least one `[[vertices]]` table",
        ));
    }
    let default_keys = match &raw.keys {
        Some(d) => dist(&ctx, d, "keys")?,
        None => Distribution::Uniform,
    };
    let tick_ms = match &raw.job.tick {
        Some(t) => match t.get_ref().0 {
            Ok(ms) if ms > 0 => ms,
            _ => {
                return Err(ctx.problem(
                    t.span(),
                    "job.tick",
                    "the tick must be at least 1 ms",
                    "a duration such as \"1s\" or \"500ms\"",
                ));
            }
        },
        None => 1000,
    };

    let mut vertices = Vec::with_capacity(raw.vertices.len());
    for (i, v) in raw.vertices.iter().enumerate() {
        vertices.push(vertex(&ctx, i, v.get_ref())?);
    }
    for (i, v) in raw.vertices.iter().enumerate() {
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
    let known_ids = || {
        vertices
            .iter()
            .map(|v| v.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let find = |s: &Spanned<String>, key: &str| -> Result<usize, SimError> {
        vertices
            .iter()
            .position(|v| &v.id == s.get_ref())
            .ok_or_else(|| {
                ctx.problem(
                    s.span(),
                    key,
                    &format!("unknown vertex `{}`", s.get_ref()),
                    &known_ids(),
                )
            })
    };

    let mut edges = Vec::new();
    for (i, e) in raw.edges.iter().enumerate() {
        let e = e.get_ref();
        let from = find(&e.from, &format!("edges[{i}].from"))?;
        let to = find(&e.to, &format!("edges[{i}].to"))?;
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
        let keys = match &e.keys {
            Some(d) => dist(&ctx, d, &format!("edges[{i}].keys"))?,
            None => default_keys.clone(),
        };
        edges.push(EdgeSpec {
            from,
            to,
            ship,
            keys,
        });
    }

    for (i, v) in vertices.iter().enumerate() {
        let has_input = edges.iter().any(|e| e.to == i);
        let has_output = edges.iter().any(|e| e.from == i);
        let span = raw.vertices[i].get_ref().kind.span();
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

    let mut feedback = Vec::new();
    for (i, f) in raw.feedback.iter().enumerate() {
        let f = f.get_ref();
        let from = find(&f.from, &format!("feedback[{i}].from"))?;
        let to = find(&f.to, &format!("feedback[{i}].to"))?;
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

    let order = topological_order(vertices.len(), &edges).ok_or_else(|| {
        ctx.problem(
            raw.edges.first().map_or(0..0, |e| e.span()),
            "edges",
            "the edges form a cycle",
            "an acyclic graph; close loops with `[[feedback]]` edges",
        )
    })?;
    for (i, f) in feedback.iter().enumerate() {
        if !reaches(&edges, f.to, f.from) {
            return Err(ctx.problem(
                raw.feedback[i].get_ref().from.span(),
                &format!("feedback[{i}].from"),
                &format!(
                    "the tail `{}` is not downstream of the head `{}`",
                    vertices[f.from].id, vertices[f.to].id
                ),
                "a tail reachable from the head through edges",
            ));
        }
    }
    let bodies: Vec<(usize, Vec<bool>)> = heads(&feedback)
        .into_iter()
        .map(|h| (h, loop_body(vertices.len(), &edges, &feedback, h)))
        .collect();
    for (a, (ha, ba)) in bodies.iter().enumerate() {
        for (hb, bb) in &bodies[a + 1..] {
            if ba.iter().zip(bb).any(|(x, y)| *x && *y) {
                let i = feedback.iter().position(|f| f.to == *hb).unwrap_or(0);
                return Err(ctx.problem(
                    raw.feedback[i].get_ref().to.span(),
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

    let mut workloads: BTreeMap<usize, SourceWorkload> = BTreeMap::new();
    for (id, w) in &raw.workload {
        let key = format!("workload.{id}");
        let Some(vi) = vertices.iter().position(|v| &v.id == id) else {
            return Err(ctx.problem(
                w.span(),
                &key,
                &format!("unknown vertex `{id}`"),
                &known_ids(),
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
        workloads.insert(vi, workload(&ctx, w, &key, base_dir)?);
    }
    for (i, v) in vertices.iter_mut().enumerate() {
        if v.kind == VertexKind::Source {
            match workloads.remove(&i) {
                Some(w) => v.workload = Some(w),
                None => {
                    return Err(ctx.problem(
                        raw.vertices[i].span(),
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

    let restart = match &raw.restart {
        Some(r) => RestartSpec {
            downtime_ms: duration_ms(&ctx, r.downtime.as_ref(), "restart.downtime", 0)?,
            per_gib_ms: duration_ms(&ctx, r.per_gib.as_ref(), "restart.per_gib", 0)?,
        },
        None => RestartSpec {
            downtime_ms: 30_000,
            per_gib_ms: 0,
        },
    };

    // Reorder topologically, remapping edge endpoints.
    let mut new_index = vec![0; vertices.len()];
    for (new, old) in order.iter().enumerate() {
        new_index[*old] = new;
    }
    let vertices: Vec<VertexSpec> = order.iter().map(|&o| vertices[o].clone()).collect();
    let edges = edges
        .into_iter()
        .map(|e| EdgeSpec {
            from: new_index[e.from],
            to: new_index[e.to],
            ..e
        })
        .collect();
    let feedback = feedback
        .into_iter()
        .map(|f| FeedbackSpec {
            from: new_index[f.from],
            to: new_index[f.to],
            ..f
        })
        .collect();
    Ok(SimulatedJobSpec {
        name: raw.job.name.clone().unwrap_or_else(|| "job".to_string()),
        seed: raw.job.seed.unwrap_or(0),
        tick_ms,
        vertices,
        edges,
        feedback,
        restart,
    })
}

fn duration_ms(
    ctx: &Ctx<'_>,
    d: Option<&Spanned<RawDuration>>,
    key: &str,
    default: i64,
) -> Result<i64, SimError> {
    match d {
        None => Ok(default),
        Some(d) => d.get_ref().0.map_err(|()| {
            ctx.problem(
                d.span(),
                key,
                "the duration is too large",
                "a duration below 292 million years",
            )
        }),
    }
}

fn vertex(ctx: &Ctx<'_>, i: usize, v: &RawVertex) -> Result<VertexSpec, SimError> {
    let key = |k: &str| format!("vertices[{i}].{k}");
    let id = v.id.get_ref().trim().to_string();
    if id.is_empty() {
        return Err(ctx.problem(
            v.id.span(),
            &key("id"),
            "the id is empty",
            "a non-empty unique id",
        ));
    }
    let kind = match v.kind.get_ref().to_ascii_lowercase().as_str() {
        "source" => VertexKind::Source,
        "operator" => VertexKind::Operator,
        "sink" => VertexKind::Sink,
        other => {
            return Err(ctx.problem(
                v.kind.span(),
                &key("kind"),
                &format!("unknown kind `{other}`"),
                "source, operator, sink",
            ));
        }
    };
    let max_parallelism = match &v.max_parallelism {
        Some(m) if (1..=32_768).contains(m.get_ref()) => *m.get_ref() as u32,
        Some(m) => {
            return Err(ctx.problem(
                m.span(),
                &key("max_parallelism"),
                &format!("{} is out of range", m.get_ref()),
                "an integer in 1..=32768 (Flink's limit)",
            ));
        }
        None => 128,
    };
    let parallelism = *v.parallelism.get_ref();
    if parallelism < 1 || parallelism > i64::from(max_parallelism) {
        return Err(ctx.problem(
            v.parallelism.span(),
            &key("parallelism"),
            &format!("{parallelism} is out of range"),
            &format!("an integer in 1..={max_parallelism} (the max parallelism)"),
        ));
    }
    let capacity = match (&v.capacity, &v.cost_per_record) {
        (Some(c), None) if c.get_ref().is_finite() && *c.get_ref() > 0.0 => *c.get_ref(),
        (Some(c), None) => {
            return Err(ctx.problem(
                c.span(),
                &key("capacity"),
                &format!("{} is not a positive rate", c.get_ref()),
                "records/s of one subtask at 100% busy, > 0",
            ));
        }
        (None, Some(c)) if c.get_ref().secs() > 0.0 => 1.0 / c.get_ref().secs(),
        (None, Some(c)) => {
            return Err(ctx.problem(
                c.span(),
                &key("cost_per_record"),
                "the cost must be positive",
                "a duration such as \"20us\"",
            ));
        }
        (Some(c), Some(_)) => {
            return Err(ctx.problem(
                c.span(),
                &key("capacity"),
                "both `capacity` and `cost_per_record` are set",
                "one of them",
            ));
        }
        (None, None) => {
            return Err(ctx.problem(
                v.id.span(),
                &key("capacity"),
                "missing",
                "`capacity` (records/s per subtask) or `cost_per_record` (a duration)",
            ));
        }
    };
    let selectivity = match &v.selectivity {
        Some(s) if s.get_ref().is_finite() && *s.get_ref() >= 0.0 => *s.get_ref(),
        Some(s) => {
            return Err(ctx.problem(
                s.span(),
                &key("selectivity"),
                &format!("{} is not a valid selectivity", s.get_ref()),
                "records out per record in, >= 0",
            ));
        }
        None => 1.0,
    };
    let partitions = match (&v.partitions, kind) {
        (Some(p), VertexKind::Source) if (1..=1 << 20).contains(p.get_ref()) => *p.get_ref() as u32,
        (Some(p), VertexKind::Source) => {
            return Err(ctx.problem(
                p.span(),
                &key("partitions"),
                &format!("{} is out of range", p.get_ref()),
                "an integer in 1..=1048576",
            ));
        }
        (Some(p), _) => {
            return Err(ctx.problem(
                p.span(),
                &key("partitions"),
                "only sources have partitions",
                "remove it",
            ));
        }
        (None, VertexKind::Source) => {
            return Err(ctx.problem(
                v.id.span(),
                &key("partitions"),
                "missing for a source",
                "the number of source partitions, e.g. `partitions = 12`",
            ));
        }
        (None, _) => 0,
    };
    let buffer = match &v.buffer {
        Some(b) if *b.get_ref() >= 1 => *b.get_ref() as u64,
        Some(b) => {
            return Err(ctx.problem(
                b.span(),
                &key("buffer"),
                "the buffer must hold at least one record",
                "an integer >= 1 (records per input channel)",
            ));
        }
        None => (capacity.ceil() as u64).max(100),
    };
    let non_negative = |s: &Option<Spanned<f64>>, k: &str| -> Result<f64, SimError> {
        match s {
            Some(x) if x.get_ref().is_finite() && *x.get_ref() >= 0.0 => Ok(*x.get_ref()),
            Some(x) => Err(ctx.problem(
                x.span(),
                &key(k),
                &format!("{} is not valid", x.get_ref()),
                "a number >= 0",
            )),
            None => Ok(0.0),
        }
    };
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
        state_bytes: non_negative(&v.state_bytes, "state_bytes")?,
        state_bytes_per_record: non_negative(&v.state_bytes_per_record, "state_bytes_per_record")?,
        workload: None,
    })
}

fn dist(ctx: &Ctx<'_>, d: &Spanned<RawDist>, key: &str) -> Result<Distribution, SimError> {
    let raw = d.get_ref();
    match raw.kind.get_ref().to_ascii_lowercase().as_str() {
        "uniform" => Ok(Distribution::Uniform),
        "zipf" => match raw.exponent {
            Some(e) if e.is_finite() && e >= 0.0 => Ok(Distribution::Zipf { exponent: e }),
            _ => Err(ctx.problem(
                d.span(),
                &format!("{key}.exponent"),
                "zipf needs a non-negative exponent",
                "e.g. `exponent = 1.1`",
            )),
        },
        "weights" => match &raw.weights {
            Some(w)
                if !w.is_empty()
                    && w.iter().all(|x| x.is_finite() && *x >= 0.0)
                    && w.iter().sum::<f64>() > 0.0 =>
            {
                Ok(Distribution::Weights { weights: w.clone() })
            }
            _ => Err(ctx.problem(
                d.span(),
                &format!("{key}.weights"),
                "weights need a non-empty list of non-negative numbers with a positive sum",
                "e.g. `weights = [3, 1, 1]`",
            )),
        },
        other => Err(ctx.problem(
            raw.kind.span(),
            &format!("{key}.kind"),
            &format!("unknown distribution `{other}`"),
            "uniform, zipf (with `exponent`), weights (with `weights`)",
        )),
    }
}

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
        Some(d) => dist(ctx, d, &format!("{key}.partition_skew"))?,
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

fn rate_profile(
    ctx: &Ctx<'_>,
    r: &Spanned<RawRate>,
    key: &str,
    base_dir: &Path,
) -> Result<RateProfile, SimError> {
    let raw = r.get_ref();
    let kind = raw.kind.get_ref().to_ascii_lowercase();
    let missing = |field: &str, valid: &str| {
        ctx.problem(
            r.span(),
            &format!("{key}.{field}"),
            &format!("missing for kind `{kind}`"),
            valid,
        )
    };
    let num = |v: Option<f64>, field: &str, valid: &str| -> Result<f64, SimError> {
        match v {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(x),
            Some(x) => Err(ctx.problem(
                r.span(),
                &format!("{key}.{field}"),
                &format!("{x} is not a valid rate"),
                "a number >= 0",
            )),
            None => Err(missing(field, valid)),
        }
    };
    let secs = |v: Option<RawDuration>, field: &str, valid: &str| -> Result<f64, SimError> {
        v.map(|d| d.secs()).ok_or_else(|| missing(field, valid))
    };
    let positive_period = |period_s: f64| -> Result<f64, SimError> {
        if period_s > 0.0 {
            Ok(period_s)
        } else {
            Err(ctx.problem(
                r.span(),
                &format!("{key}.period"),
                "the period is zero",
                "a positive duration",
            ))
        }
    };
    let profile = match kind.as_str() {
        "constant" => RateProfile::Constant {
            rate: num(raw.rate, "rate", "rate = <records/s>")?,
        },
        "step" => {
            let v = "from, to (records/s) and at (a duration)";
            RateProfile::Step {
                from: num(raw.from, "from", v)?,
                to: num(raw.to, "to", v)?,
                at_s: secs(raw.at, "at", v)?,
            }
        }
        "ramp" => {
            let v = "from, to (records/s), start and end (durations)";
            let (start_s, end_s) = (secs(raw.start, "start", v)?, secs(raw.end, "end", v)?);
            if end_s <= start_s {
                return Err(ctx.problem(
                    r.span(),
                    &format!("{key}.end"),
                    "the ramp ends before it starts",
                    "end > start",
                ));
            }
            RateProfile::Ramp {
                from: num(raw.from, "from", v)?,
                to: num(raw.to, "to", v)?,
                start_s,
                end_s,
            }
        }
        "sine" => {
            let v = "mean, amplitude (records/s), period (a duration), optional phase";
            let period_s = positive_period(secs(raw.period, "period", v)?)?;
            RateProfile::Sine {
                mean: num(raw.mean, "mean", v)?,
                amplitude: num(raw.amplitude, "amplitude", v)?,
                period_s,
                phase_s: raw.phase.map_or(0.0, |p| p.secs()),
            }
        }
        "diurnal" => {
            let v = "low, high (records/s), optional peak_at (default 14h) and period (default 1d)";
            let period_s = positive_period(raw.period.map_or(86_400.0, |p| p.secs()))?;
            RateProfile::Diurnal {
                low: num(raw.low, "low", v)?,
                high: num(raw.high, "high", v)?,
                peak_s: raw.peak_at.map_or(50_400.0, |p| p.secs()),
                period_s,
            }
        }
        "spike" => {
            let v = "extra (records/s added), at and duration (durations)";
            RateProfile::Spike {
                extra: num(raw.extra, "extra", v)?,
                at_s: secs(raw.at, "at", v)?,
                duration_s: secs(raw.duration, "duration", v)?,
            }
        }
        "trace" => {
            let Some(path) = &raw.path else {
                return Err(missing(
                    "path",
                    "path = \"trace.csv\" (lines `seconds,rate`, relative to the job file)",
                ));
            };
            let full = base_dir.join(path);
            let text = std::fs::read_to_string(&full).map_err(|source| SimError::Read {
                path: full.clone(),
                source,
            })?;
            let points = parse_trace(&text).map_err(|(line, msg)| {
                SimError::Invalid(Box::new(JobFileProblem {
                    file: full.display().to_string(),
                    line,
                    column: 1,
                    key: format!("{key}.path"),
                    message: msg,
                    valid: "lines `seconds,rate` with non-decreasing seconds and rates >= 0 (a header line is allowed)".to_string(),
                }))
            })?;
            RateProfile::Trace {
                points,
                interpolate: raw.interpolate.unwrap_or(false),
            }
        }
        other => {
            return Err(ctx.problem(
                raw.kind.span(),
                &format!("{key}.kind"),
                &format!("unknown rate kind `{other}`"),
                "constant, step, ramp, sine, diurnal, spike, trace",
            ));
        }
    };
    Ok(profile)
}

/// Parses a `seconds,rate` CSV; errors carry the 1-based line.
fn parse_trace(text: &str) -> Result<Vec<(f64, f64)>, (usize, String)> {
    let mut points: Vec<(f64, f64)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut cols = line.split(',').map(str::trim);
        let (Some(a), Some(b)) = (cols.next(), cols.next()) else {
            return Err((n + 1, format!("`{line}` has fewer than two columns")));
        };
        let (Ok(t), Ok(r)) = (a.parse::<f64>(), b.parse::<f64>()) else {
            if points.is_empty() && n == 0 {
                continue; // a header
            }
            return Err((n + 1, format!("`{line}` is not two numbers")));
        };
        if !t.is_finite()
            || !r.is_finite()
            || r < 0.0
            || points.last().is_some_and(|(pt, _)| *pt > t)
        {
            return Err((n + 1, format!("`{line}` is out of order or negative")));
        }
        points.push((t, r));
    }
    if points.is_empty() {
        return Err((1, "the trace has no points".to_string()));
    }
    Ok(points)
}

/// Kahn's algorithm; `None` on a cycle. Ties go to the lower index, so the order is stable.
fn topological_order(n: usize, edges: &[EdgeSpec]) -> Option<Vec<usize>> {
    let mut indegree = vec![0usize; n];
    for e in edges {
        indegree[e.to] += 1;
    }
    let mut order = Vec::with_capacity(n);
    let mut ready: std::collections::BTreeSet<usize> =
        (0..n).filter(|&i| indegree[i] == 0).collect();
    while let Some(v) = ready.pop_first() {
        order.push(v);
        for e in edges.iter().filter(|e| e.from == v) {
            indegree[e.to] -= 1;
            if indegree[e.to] == 0 {
                ready.insert(e.to);
            }
        }
    }
    (order.len() == n).then_some(order)
}

fn reaches(edges: &[EdgeSpec], from: usize, to: usize) -> bool {
    let mut stack = vec![from];
    let mut seen = vec![from];
    while let Some(v) = stack.pop() {
        if v == to {
            return true;
        }
        for e in edges.iter().filter(|e| e.from == v) {
            if !seen.contains(&e.to) {
                seen.push(e.to);
                stack.push(e.to);
            }
        }
    }
    false
}

fn heads(feedback: &[FeedbackSpec]) -> Vec<usize> {
    let mut heads: Vec<usize> = feedback.iter().map(|f| f.to).collect();
    heads.sort_unstable();
    heads.dedup();
    heads
}

/// Vertices on a path from `head` to one of its tails.
pub(crate) fn loop_body(
    n: usize,
    edges: &[EdgeSpec],
    feedback: &[FeedbackSpec],
    head: usize,
) -> Vec<bool> {
    let tails: Vec<usize> = feedback
        .iter()
        .filter(|f| f.to == head)
        .map(|f| f.from)
        .collect();
    (0..n)
        .map(|v| reaches(edges, head, v) && tails.iter().any(|&t| reaches(edges, v, t)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[job]
name = "t"
seed = 3

[[vertices]]
id = "src"
kind = "source"
parallelism = 2
capacity = 1000
partitions = 4

[[vertices]]
id = "agg"
kind = "sink"
parallelism = 3
max_parallelism = 128
cost_per_record = "1ms"

[[edges]]
from = "src"
to = "agg"
ship = "CUSTOM:48"

[workload.src]
[[workload.src.rate]]
kind = "step"
from = 10
to = 20
at = "1 min"
"#;

    fn problem(src: &str) -> JobFileProblem {
        match parse_job(src, "job.toml", Path::new(".")) {
            Err(SimError::Invalid(p)) => *p,
            other => panic!("expected a job-file problem, got {other:?}"),
        }
    }

    #[test]
    fn parses_a_valid_job() {
        let job = parse_job(GOOD, "job.toml", Path::new(".")).expect("valid");
        assert_eq!(job.vertices.len(), 2);
        assert_eq!(job.vertices[1].capacity, 1000.0);
        assert_eq!(job.edges[0].ship, ShipStrategy::Custom { buckets: 48 });
        let w = job.vertices[0].workload.as_ref().expect("workload");
        assert_eq!(w.rate_at(59.0), 10.0);
        assert_eq!(w.rate_at(60.0), 20.0);
        assert_eq!(job.restart.downtime_ms, 30_000);
    }

    #[test]
    fn errors_name_file_line_key_and_valid_values() {
        let p = problem(&GOOD.replace("ship = \"CUSTOM:48\"", "ship = \"HASHED\""));
        assert_eq!(
            (p.file.as_str(), p.line, p.key.as_str()),
            ("job.toml", 23, "edges[0].ship")
        );
        assert!(p.valid.contains("REBALANCE"), "{p}");

        let p = problem(&GOOD.replace("parallelism = 3", "parallelism = 300"));
        assert_eq!((p.line, p.key.as_str()), (16, "vertices[1].parallelism"));
        assert!(p.valid.contains("1..=128"));

        let p = problem(&GOOD.replace("to = \"agg\"", "to = \"nope\""));
        assert_eq!(p.key, "edges[0].to");
        assert!(p.valid.contains("src, agg"));

        let p = problem(&GOOD.replace("kind = \"step\"", "kind = \"stairs\""));
        assert_eq!(p.key, "workload.src.rate[0].kind");
        assert!(p.valid.contains("diurnal"));

        let p = problem(&GOOD.replace("to = 20", "too = 20"));
        assert_eq!((p.line, p.key.as_str()), (29, "too"));
        assert!(p.message.contains("unknown field"), "{p}");
        assert!(p.valid.contains("`to`"), "{p}");

        let p = problem(&GOOD.replace("kind = \"sink\"\n", ""));
        assert_eq!((p.line, p.key.as_str()), (13, "vertices.kind"));
        assert!(p.message.contains("missing field"), "{p}");

        let p = problem(&GOOD.replace("parallelism = 3", "parallelism = \"ten\""));
        assert_eq!(
            (p.line, p.key.as_str(), p.valid.as_str()),
            (16, "parallelism", "an integer")
        );

        let p = problem(&GOOD.replace("at = \"1 min\"", "at = \"1 fortnight\""));
        assert_eq!(p.line, 30);
        assert!(p.message.contains("unknown time unit"), "{p}");
    }

    #[test]
    fn graph_errors_are_caught() {
        let cyclic = GOOD.replace("kind = \"sink\"", "kind = \"operator\"")
            + "\n[[edges]]\nfrom = \"agg\"\nto = \"src\"\nship = \"FORWARD\"\n";
        assert!(problem(&cyclic).message.contains("source"));
        let no_workload = GOOD
            .split("[workload.src]")
            .next()
            .unwrap_or_default()
            .to_string();
        assert_eq!(problem(&no_workload).key, "workload.src");
    }

    #[test]
    fn trace_lines_are_checked() {
        assert_eq!(
            parse_trace("seconds,rate\n0,5\n10,7\n"),
            Ok(vec![(0.0, 5.0), (10.0, 7.0)])
        );
        assert_eq!(parse_trace("0,5\n10,x\n").map_err(|e| e.0), Err(2));
        assert_eq!(parse_trace("10,5\n0,1\n").map_err(|e| e.0), Err(2));
    }
}
