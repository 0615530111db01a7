//! Reading one `[[workload.<source>.rate]]` table into a rate component. Which fields a
//! component needs depends on its `kind`; a missing one is named together with the whole set
//! that kind takes.

use std::ops::Range;
use std::path::Path;

use toml::Spanned;

use super::problem::Ctx;
use super::raw::{RawDuration, RawRate};
use super::trace::parse_trace;
use crate::sim::error::{JobFileProblem, SimError};
use crate::sim::workload::RateProfile;

/// One rate component; `key` is `workload.<source>.rate[<i>]`, `base_dir` resolves a trace's
/// path.
pub(super) fn rate_profile(
    ctx: &Ctx<'_>,
    r: &Spanned<RawRate>,
    key: &str,
    base_dir: &Path,
) -> Result<RateProfile, SimError> {
    let raw = r.get_ref();
    let table = RateTable {
        ctx,
        raw,
        span: r.span(),
        key,
        kind: raw.kind.get_ref().to_ascii_lowercase(),
    };
    match table.kind.as_str() {
        "constant" => Ok(RateProfile::Constant {
            rate: table.rate(raw.rate, "rate", "rate = <records/s>")?,
        }),
        "step" => table.step(),
        "ramp" => table.ramp(),
        "sine" => table.sine(),
        "diurnal" => table.diurnal(),
        "spike" => table.spike(),
        "trace" => table.trace(base_dir),
        other => Err(ctx.problem(
            raw.kind.span(),
            &format!("{key}.kind"),
            &format!("unknown rate kind `{other}`"),
            "constant, step, ramp, sine, diurnal, spike, trace",
        )),
    }
}

/// The rate table being read, and where its problems point: the whole table, since its fields
/// are not located one by one.
struct RateTable<'a> {
    ctx: &'a Ctx<'a>,
    raw: &'a RawRate,
    span: Range<usize>,
    key: &'a str,
    /// The kind, lowercased.
    kind: String,
}

impl RateTable<'_> {
    /// A field this kind needs is missing; `valid` lists the fields it takes.
    fn missing(&self, field: &str, valid: &str) -> SimError {
        self.ctx.problem(
            self.span.clone(),
            &format!("{}.{field}", self.key),
            &format!("missing for kind `{}`", self.kind),
            valid,
        )
    }

    /// A required rate (records/s, finite, >= 0).
    fn rate(&self, v: Option<f64>, field: &str, valid: &str) -> Result<f64, SimError> {
        match v {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(x),
            Some(x) => Err(self.ctx.problem(
                self.span.clone(),
                &format!("{}.{field}", self.key),
                &format!("{x} is not a valid rate"),
                "a number >= 0",
            )),
            None => Err(self.missing(field, valid)),
        }
    }

    /// A required duration, in seconds.
    fn secs(&self, v: Option<RawDuration>, field: &str, valid: &str) -> Result<f64, SimError> {
        v.map(|d| d.secs())
            .ok_or_else(|| self.missing(field, valid))
    }

    /// A period must be positive: the periodic profiles divide by it.
    fn positive_period(&self, period_s: f64) -> Result<f64, SimError> {
        if period_s > 0.0 {
            Ok(period_s)
        } else {
            Err(self.ctx.problem(
                self.span.clone(),
                &format!("{}.period", self.key),
                "the period is zero",
                "a positive duration",
            ))
        }
    }

    fn step(&self) -> Result<RateProfile, SimError> {
        let (raw, v) = (self.raw, "from, to (records/s) and at (a duration)");
        Ok(RateProfile::Step {
            from: self.rate(raw.from, "from", v)?,
            to: self.rate(raw.to, "to", v)?,
            at_s: self.secs(raw.at, "at", v)?,
        })
    }

    fn ramp(&self) -> Result<RateProfile, SimError> {
        let (raw, v) = (self.raw, "from, to (records/s), start and end (durations)");
        let (start_s, end_s) = (
            self.secs(raw.start, "start", v)?,
            self.secs(raw.end, "end", v)?,
        );
        if end_s <= start_s {
            return Err(self.ctx.problem(
                self.span.clone(),
                &format!("{}.end", self.key),
                "the ramp ends before it starts",
                "end > start",
            ));
        }
        Ok(RateProfile::Ramp {
            from: self.rate(raw.from, "from", v)?,
            to: self.rate(raw.to, "to", v)?,
            start_s,
            end_s,
        })
    }

    fn sine(&self) -> Result<RateProfile, SimError> {
        let (raw, v) = (
            self.raw,
            "mean, amplitude (records/s), period (a duration), optional phase",
        );
        let period_s = self.positive_period(self.secs(raw.period, "period", v)?)?;
        Ok(RateProfile::Sine {
            mean: self.rate(raw.mean, "mean", v)?,
            amplitude: self.rate(raw.amplitude, "amplitude", v)?,
            period_s,
            phase_s: raw.phase.map_or(0.0, |p| p.secs()),
        })
    }

    fn diurnal(&self) -> Result<RateProfile, SimError> {
        let (raw, v) = (
            self.raw,
            "low, high (records/s), optional peak_at (default 14h) and period (default 1d)",
        );
        let period_s = self.positive_period(raw.period.map_or(86_400.0, |p| p.secs()))?;
        Ok(RateProfile::Diurnal {
            low: self.rate(raw.low, "low", v)?,
            high: self.rate(raw.high, "high", v)?,
            peak_s: raw.peak_at.map_or(50_400.0, |p| p.secs()),
            period_s,
        })
    }

    fn spike(&self) -> Result<RateProfile, SimError> {
        let (raw, v) = (
            self.raw,
            "extra (records/s added), at and duration (durations)",
        );
        Ok(RateProfile::Spike {
            extra: self.rate(raw.extra, "extra", v)?,
            at_s: self.secs(raw.at, "at", v)?,
            duration_s: self.secs(raw.duration, "duration", v)?,
        })
    }

    /// Reads the trace file; its problems point into that file, not the job file.
    fn trace(&self, base_dir: &Path) -> Result<RateProfile, SimError> {
        let Some(path) = &self.raw.path else {
            return Err(self.missing(
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
                key: format!("{}.path", self.key),
                message: msg,
                valid: "lines `seconds,rate` with non-decreasing seconds and rates >= 0 (a header line is allowed)".to_string(),
            }))
        })?;
        Ok(RateProfile::Trace {
            points,
            interpolate: self.raw.interpolate.unwrap_or(false),
        })
    }
}
