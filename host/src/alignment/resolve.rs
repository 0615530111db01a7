//! Which mode a job uses: the new key, then the deprecated key, then BALANCED.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use flowscale_sdk::{MODE_KEY, ModeParams};

use super::advanced::AdvancedSpec;
use super::builtin::BuiltIn;
use super::catalog::ModeCatalog;
use super::custom::CustomMode;
use super::legacy::{LEGACY_VALUES, Legacy};
use crate::config::{ConfigLookup, ConfigLookupExt, KeyError, closest};

/// The deprecated key (canonical spelling, without `job.autoscaler.`).
pub(crate) const LEGACY_KEY: &str = crate::config::reference::LEGACY_ALIGNMENT_MODE.about.name;
/// Names a plugin can never claim.
pub(crate) const RESERVED_NAMES: &[&str] = &["BALANCED", "EVENLY_SPREAD", "OFF", "ADVANCED"];

/// The mode a job selected.
#[derive(Debug, Clone)]
pub(crate) enum Selection {
    /// BALANCED, EVENLY_SPREAD or OFF.
    BuiltIn(BuiltIn),
    /// ADVANCED with its validated steps.
    Advanced(AdvancedSpec),
    /// A deprecated blocking mode.
    Legacy(Legacy),
    /// A mode from a plugin or linked into the binary, under the configured name.
    Custom {
        /// The name the job configured (`scaling.alignment.mode = <name>`).
        name: String,
        /// The implementation.
        mode: CustomMode,
        /// Set when the mode could not check the parameters when it was resolved.
        unchecked: Option<UncheckedParams>,
    },
}

/// The parameters of a custom mode that could not be checked when the job's mode was resolved:
/// the mode was quarantined, and a quarantined mode is not called, not even to check them. A
/// reload must not wait for it (the job aligns with BALANCED while it is quarantined anyway), so
/// they are checked before the mode's first call instead; until the mode accepts them the job
/// keeps aligning with BALANCED and says why. Shared by the clones of one resolution, so that
/// they are checked once.
#[derive(Debug, Clone, Default)]
pub(crate) struct UncheckedParams(Arc<AtomicBool>);

impl UncheckedParams {
    /// Whether the mode accepted them since.
    pub(crate) fn accepted(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// The mode accepted them.
    pub(crate) fn accept(&self) {
        self.0.store(true, Ordering::Release);
    }
}

impl Selection {
    /// The id printed and reported as the resolved mode.
    pub(crate) fn id(&self) -> String {
        match self {
            Selection::BuiltIn(b) => b.name().to_string(),
            Selection::Advanced(_) => "ADVANCED".to_string(),
            Selection::Legacy(l) => format!("legacy:{}", l.name()),
            Selection::Custom { mode, .. } => mode.id.clone(),
        }
    }
}

/// The selected mode and its parameters.
#[derive(Debug, Clone)]
pub(super) struct Resolved {
    /// The mode.
    pub(crate) selection: Selection,
    /// The prefix-stripped `scaling.alignment.mode.<name>.*` parameters of the selected name.
    pub(crate) params: ModeParams,
}

/// The prefix-stripped parameters of mode `name`.
pub(crate) fn mode_params(config: &impl ConfigLookup, name: &str) -> ModeParams {
    config.instance_params(MODE_KEY, name)
}

/// The implementation id of the custom mode a job's configuration selects
/// (`scaling.alignment.mode.<name>.class`), when it selects one.
pub(crate) fn custom_class(config: &impl ConfigLookup) -> Option<String> {
    let name = config.get(MODE_KEY)?.trim();
    if name.is_empty() || name == "ADVANCED" || BuiltIn::from_name(name).is_some() {
        return None;
    }
    let class = mode_params(config, name).get("class")?.trim().to_string();
    Some(class)
}

/// Resolves a job's mode, reporting every problem (for loading and `validate`).
pub(super) fn resolve(
    config: &impl ConfigLookup,
    catalog: &dyn ModeCatalog,
) -> Result<Resolved, Vec<KeyError>> {
    if let Some(raw) = config.get(MODE_KEY) {
        let name = raw.trim();
        let params = mode_params(config, name);
        if let Some(builtin) = BuiltIn::from_name(name) {
            return Ok(Resolved {
                selection: Selection::BuiltIn(builtin),
                params,
            });
        }
        if name == "ADVANCED" {
            return AdvancedSpec::from_params(&params).map(|spec| Resolved {
                selection: Selection::Advanced(spec),
                params,
            });
        }
        return resolve_custom(name, params, catalog);
    }
    if let Some(value) = config.get(LEGACY_KEY) {
        return match Legacy::parse(value) {
            Some(legacy) => Ok(Resolved {
                selection: Selection::Legacy(legacy),
                params: mode_params(config, "BALANCED"),
            }),
            None => Err(vec![KeyError::new(
                LEGACY_KEY,
                format!(
                    "unknown value `{}` (valid: {}; this key is deprecated, prefer `{MODE_KEY}`)",
                    value.trim(),
                    LEGACY_VALUES.join(", ")
                ),
            )]),
        };
    }
    Ok(Resolved {
        selection: Selection::BuiltIn(BuiltIn::Balanced),
        params: mode_params(config, "BALANCED"),
    })
}

/// What is said of a custom mode that refused the parameters of the job that configured it
/// under `name`.
pub(super) fn refused_params(
    name: &str,
    mode: &CustomMode,
    why: &impl std::fmt::Display,
) -> String {
    format!("mode `{name}` ({}) refused its parameters: {why}", mode.id)
}

fn resolve_custom(
    name: &str,
    params: ModeParams,
    catalog: &dyn ModeCatalog,
) -> Result<Resolved, Vec<KeyError>> {
    let builtins = "built-in modes: BALANCED, EVENLY_SPREAD, OFF, ADVANCED (matched exactly)";
    if name.is_empty() {
        return Err(vec![KeyError::new(
            MODE_KEY,
            format!("empty mode name ({builtins}, or a custom mode name)"),
        )]);
    }
    let class_key = format!("{MODE_KEY}.{name}.class");
    let available = catalog.ids();
    let available_text = if available.is_empty() {
        "no custom modes are loaded: check the plugins directory with `flowscale plugins`"
            .to_string()
    } else {
        format!("available implementations: {}", available.join(", "))
    };
    let Some(class) = params.get("class").map(str::trim) else {
        let hint = match closest(name, RESERVED_NAMES.iter().copied()) {
            Some(builtin) => format!(" (did you mean the built-in `{builtin}`? {builtins})"),
            None => format!(" ({builtins})"),
        };
        return Err(vec![KeyError::new(
            MODE_KEY,
            format!(
                "`{name}` is not a built-in mode, so it names a custom mode whose implementation must be set with `{class_key}`{hint}; {available_text}"
            ),
        )]);
    };
    let Some(mode) = catalog.find(class) else {
        let suggestion = closest(class, available.iter().map(String::as_str))
            .map(|c| format!(" (did you mean `{c}`?)"))
            .unwrap_or_default();
        return Err(vec![KeyError::new(
            class_key,
            format!("no loaded mode has implementation id `{class}`{suggestion}; {available_text}"),
        )]);
    };
    let unchecked = if mode.mode.unavailable().is_some() {
        Some(UncheckedParams::default())
    } else {
        if let Err(err) = mode.mode.validate(&params) {
            return Err(vec![KeyError::new(
                class_key,
                refused_params(name, &mode, &err),
            )]);
        }
        None
    };
    Ok(Resolved {
        selection: Selection::Custom {
            name: name.to_string(),
            mode,
            unchecked,
        },
        params,
    })
}
