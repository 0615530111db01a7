//! Reading a distribution table: how records spread over key groups, buckets or partitions.

use toml::Spanned;

use super::problem::Ctx;
use super::raw::RawDist;
use crate::sim::error::SimError;
use crate::sim::workload::Distribution;

/// A key or partition distribution (`[keys]`, an edge's `keys`, a workload's `partition_skew`).
pub(super) fn distribution(
    ctx: &Ctx<'_>,
    d: &Spanned<RawDist>,
    key: &str,
) -> Result<Distribution, SimError> {
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
