//! The modes, metric evaluators and scaling executors available by implementation id: those
//! linked into the binary and those of the loadable plugin files of a directory. Each kind has
//! its own ids: an evaluator may share an id with a mode.

use std::collections::BTreeMap;
use std::sync::Arc;

use flowscale_sdk::{AlignmentMode, MetricEvaluator, ScalingExecutor};

use crate::alignment::{CustomMode, ModeCatalog, RESERVED_NAMES};
use crate::scaling::{CustomEvaluator, CustomExecutor, KindCatalog};

/// A mode compiled into the binary, registered with `inventory::submit!`.
///
/// ```ignore
/// inventory::submit! {
///     flowscale::plugins::LinkedMode {
///         id: "my-mode",
///         description: "what it does",
///         make: || Box::new(MyMode),
///     }
/// }
/// ```
///
/// `inventory` drops items of a dependency crate that the binary never references: a crate that
/// submits linked modes must be named somewhere in the binary (`use that_crate as _;`).
pub struct LinkedMode {
    /// The implementation id.
    pub(crate) id: &'static str,
    /// A one-line description.
    pub(crate) description: &'static str,
    /// Creates the mode.
    pub(crate) make: fn() -> Box<dyn AlignmentMode>,
}

inventory::collect!(LinkedMode);

/// A metric evaluator compiled into the binary, registered with `inventory::submit!` like a
/// [`LinkedMode`].
pub struct LinkedEvaluator {
    /// The implementation id.
    pub(crate) id: &'static str,
    /// A one-line description.
    pub(crate) description: &'static str,
    /// Creates the evaluator.
    pub(crate) make: fn() -> Box<dyn MetricEvaluator>,
}

inventory::collect!(LinkedEvaluator);

/// A scaling executor compiled into the binary, registered with `inventory::submit!` like a
/// [`LinkedMode`].
pub struct LinkedExecutor {
    /// The implementation id.
    pub(crate) id: &'static str,
    /// A one-line description.
    pub(crate) description: &'static str,
    /// Creates the executor.
    pub(crate) make: fn() -> Box<dyn ScalingExecutor>,
}

inventory::collect!(LinkedExecutor);

/// The modes, evaluators and executors available by implementation id.
#[derive(Debug, Clone, Default)]
pub struct ModeRegistry {
    modes: BTreeMap<String, CustomMode>,
    evaluators: BTreeMap<String, CustomEvaluator>,
    executors: BTreeMap<String, CustomExecutor>,
}

/// True when `id` is a built-in mode name (case-insensitively).
pub(crate) fn is_reserved(id: &str) -> bool {
    RESERVED_NAMES
        .iter()
        .any(|name| name.eq_ignore_ascii_case(id))
}

impl ModeRegistry {
    /// The modes linked into the binary. A linked mode with a reserved or duplicate id is
    /// skipped with a warning (it is a build mistake, not a user's).
    pub(crate) fn linked() -> ModeRegistry {
        let mut registry = ModeRegistry::default();
        for linked in inventory::iter::<LinkedMode> {
            if is_reserved(linked.id) || registry.modes.contains_key(linked.id) {
                tracing::warn!(
                    id = linked.id,
                    "linked mode skipped: its implementation id is reserved or already taken"
                );
                continue;
            }
            registry.insert(CustomMode::linked(
                linked.id,
                linked.description,
                Arc::from((linked.make)()),
            ));
        }
        for linked in inventory::iter::<LinkedEvaluator> {
            if registry.evaluators.contains_key(linked.id) {
                tracing::warn!(
                    id = linked.id,
                    "linked evaluator skipped: its implementation id is already taken"
                );
                continue;
            }
            registry.insert_evaluator(CustomEvaluator::linked(
                linked.id,
                linked.description,
                Arc::from((linked.make)()),
            ));
        }
        for linked in inventory::iter::<LinkedExecutor> {
            if registry.executors.contains_key(linked.id) {
                tracing::warn!(
                    id = linked.id,
                    "linked executor skipped: its implementation id is already taken"
                );
                continue;
            }
            registry.insert_executor(CustomExecutor::linked(
                linked.id,
                linked.description,
                Arc::from((linked.make)()),
            ));
        }
        registry
    }

    /// The metric evaluator with implementation id `id`.
    pub fn evaluator(&self, id: &str) -> Option<&CustomEvaluator> {
        self.evaluators.get(id)
    }

    /// The scaling executor with implementation id `id`.
    pub fn executor(&self, id: &str) -> Option<&CustomExecutor> {
        self.executors.get(id)
    }

    /// Every evaluator, sorted by id.
    pub fn evaluators(&self) -> impl Iterator<Item = &CustomEvaluator> {
        self.evaluators.values()
    }

    /// Every executor, sorted by id.
    pub fn executors(&self) -> impl Iterator<Item = &CustomExecutor> {
        self.executors.values()
    }

    pub(crate) fn insert_evaluator(&mut self, evaluator: CustomEvaluator) {
        self.evaluators.insert(evaluator.id.clone(), evaluator);
    }

    pub(crate) fn insert_executor(&mut self, executor: CustomExecutor) {
        self.executors.insert(executor.id.clone(), executor);
    }

    /// The mode with implementation id `id`.
    pub fn get(&self, id: &str) -> Option<&CustomMode> {
        self.modes.get(id)
    }

    /// Every implementation id, sorted.
    pub fn ids(&self) -> Vec<&str> {
        self.modes.keys().map(String::as_str).collect()
    }

    /// Every registered mode, sorted by id.
    pub(crate) fn modes(&self) -> impl Iterator<Item = &CustomMode> {
        self.modes.values()
    }

    pub(super) fn contains(&self, id: &str) -> bool {
        self.modes.contains_key(id)
    }

    pub(super) fn insert(&mut self, mode: CustomMode) {
        self.modes.insert(mode.id.clone(), mode);
    }
}

impl ModeCatalog for ModeRegistry {
    fn find(&self, id: &str) -> Option<CustomMode> {
        self.get(id).cloned()
    }

    fn ids(&self) -> Vec<String> {
        ModeRegistry::ids(self)
            .into_iter()
            .map(str::to_string)
            .collect()
    }
}

/// The registry's evaluators and executors, for the resolution of a job's custom instances.
impl KindCatalog for ModeRegistry {
    fn evaluator(&self, id: &str) -> Option<CustomEvaluator> {
        ModeRegistry::evaluator(self, id).cloned()
    }
    fn executor(&self, id: &str) -> Option<CustomExecutor> {
        ModeRegistry::executor(self, id).cloned()
    }
    fn evaluator_ids(&self) -> Vec<String> {
        self.evaluators.keys().cloned().collect()
    }
    fn executor_ids(&self) -> Vec<String> {
        self.executors.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use flowscale_sdk::{AlignmentContext, ModeError};

    use std::path::Path;

    use super::*;
    use crate::plugins::ModeOrigin;

    struct Doubler;
    impl AlignmentMode for Doubler {
        fn align(&self, ctx: &AlignmentContext) -> Result<u32, ModeError> {
            Ok((ctx.target_parallelism() * 2).min(ctx.alignment_cap()))
        }
    }

    inventory::submit! {
        LinkedMode { id: "test-doubler", description: "doubles the target", make: || Box::new(Doubler) }
    }
    inventory::submit! {
        LinkedMode { id: "balanced", description: "claims a reserved name", make: || Box::new(Doubler) }
    }

    #[test]
    fn linked_modes_are_collected_and_reserved_names_skipped() {
        let registry = ModeRegistry::linked();
        assert_eq!(registry.ids(), vec!["test-doubler"]);
        let mode = registry.get("test-doubler").unwrap();
        assert_eq!(mode.origin, ModeOrigin::Linked);
        let ctx = AlignmentContext::builder(2, 5, 128).build();
        assert_eq!(mode.mode.align(&ctx), Ok(10));
        assert!(registry.get("balanced").is_none());
    }

    #[test]
    fn reserved_names_match_case_insensitively() {
        assert!(is_reserved("EVENLY_SPREAD"));
        assert!(is_reserved("off"));
        assert!(!is_reserved("bucket-align"));
    }

    #[test]
    fn a_missing_directory_is_no_plugins() {
        let (registry, reports) = ModeRegistry::discover(Path::new("/nonexistent/flowscale"));
        assert!(reports.is_empty());
        assert_eq!(registry.ids(), vec!["test-doubler"]);
    }
}
