//! A job's custom metric evaluator and scaling executors resolved from its configuration, for
//! benches and integration tests that drive the pipeline (`run_cycle_custom`) without a runner
//! (the runner resolves and holds them itself).

use std::collections::BTreeMap;

use crate::scaling::{JobCustom, KindCatalog, Strictness};

/// Resolves the `metrics.custom-evaluator*` and `scaling.custom-executor*` keys of `config`
/// against `catalog` as the start of `flowscale run` does (strictly): the errors' texts, with
/// their keys, when an instance cannot be used.
pub fn resolve_custom(
    config: &BTreeMap<String, String>,
    catalog: &dyn KindCatalog,
) -> Result<JobCustom, Vec<String>> {
    let resolution = JobCustom::resolve(config, catalog, Strictness::Strict);
    if resolution.errors.is_empty() {
        Ok(resolution.custom)
    } else {
        Err(resolution.errors.iter().map(ToString::to_string).collect())
    }
}
