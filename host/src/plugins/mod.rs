//! Alignment modes from outside the host's own code: modes linked into the binary (collected
//! with `inventory`) and modes exported by plugin files in a plugins directory.
//!
//! # Discovery
//!
//! [`ModeRegistry::discover`] scans one directory (not recursively) in file-name order. Only
//! regular files with the platform's shared-library extension (`.so` on Linux) are considered;
//! anything else (a README, a `.so.1` versioned name, a sub-directory) is ignored, so the
//! directory may hold notes and backups. Every considered file gets one [`PluginFileReport`]:
//! loaded, or refused with one line saying why and what to do. A refused file never stops the
//! host or the other plugins.
//!
//! Checks, in order (the first failing one is reported):
//! 1. the directory and the file are not writable by group or others (anyone could inject
//!    code into the host);
//! 2. the probe: the file's header says it is a shared library for this platform (on Linux an
//!    ELF `ET_DYN` of the host's class, byte order and machine, checked on the bytes before
//!    anything is loaded: see [`precheck_file`]); then it opens as a shared library and carries
//!    a flowscale manifest with a compatible SDK version, unwinding panics, valid and
//!    non-reserved implementation ids (the library is closed again right after);
//! 3. no other file and no linked mode exports one of its implementation ids (otherwise every
//!    file claiming that id is refused: neither wins);
//! 4. abi_stable's version and layout check of the root module, then the creation of each mode.
//!
//! Libraries that reach step 4 stay mapped for the life of the process (abi_stable never
//! unloads), so there is no in-process hot reload: restart to pick up changed plugins.
//!
//! # Faults
//!
//! A plugin mode is wrapped so that nothing it does unwinds into the host: a panic inside it is
//! caught in the plugin (by the SDK) and comes back as `Err(ModeError)` naming the panic. What a
//! mode returns is checked by the alignment guard, not here.

mod load;
mod logger;
mod mode;
mod probe;
mod report;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use flowscale_sdk::AlignmentMode;

use crate::alignment::{CustomMode, ModeCatalog};

pub use report::{ModeSummary, PluginFileReport, PluginStatus, Refusal};

/// Where a registered mode comes from (the registry's entries are alignment's [`CustomMode`]s).
pub use crate::alignment::ModeOrigin;

/// The built-in names a plugin mode can never claim.
pub use crate::alignment::RESERVED_NAMES as RESERVED_MODE_NAMES;

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
    pub id: &'static str,
    /// A one-line description.
    pub description: &'static str,
    /// Creates the mode.
    pub make: fn() -> Box<dyn AlignmentMode>,
}

inventory::collect!(LinkedMode);

/// The checks discovery makes on a candidate plugin file before it opens it as a library: the
/// file is not writable by group or others, and its header is a shared library for this
/// platform (on Linux: ELF, this host's class, byte order and machine, type `ET_DYN`, program
/// headers within the file). `Ok` means discovery would go on to `dlopen` it; nothing is loaded
/// or run here, so any bytes are safe to check.
pub fn precheck_file(path: &Path) -> Result<(), Refusal> {
    probe::precheck(path)
}

/// The modes available by implementation id.
#[derive(Debug, Clone, Default)]
pub struct ModeRegistry {
    modes: BTreeMap<String, CustomMode>,
}

/// True when `id` is a built-in mode name (case-insensitively).
pub fn is_reserved(id: &str) -> bool {
    RESERVED_MODE_NAMES
        .iter()
        .any(|name| name.eq_ignore_ascii_case(id))
}

impl ModeRegistry {
    /// The modes linked into the binary. A linked mode with a reserved or duplicate id is
    /// skipped with a warning (it is a build mistake, not a user's).
    pub fn linked() -> ModeRegistry {
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
        registry
    }

    /// The linked modes plus every mode of every loadable plugin file in `dir`, and one report
    /// per plugin file (see the module docs for what is considered and checked). A directory
    /// that does not exist yields no reports; one that cannot be read yields a refused report
    /// for the directory itself.
    pub fn discover(dir: &Path) -> (ModeRegistry, Vec<PluginFileReport>) {
        let mut registry = ModeRegistry::linked();
        let reports = load::discover_into(&mut registry, dir);
        (registry, reports)
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
    pub fn modes(&self) -> impl Iterator<Item = &CustomMode> {
        self.modes.values()
    }

    fn contains(&self, id: &str) -> bool {
        self.modes.contains_key(id)
    }

    fn insert(&mut self, mode: CustomMode) {
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

#[cfg(test)]
mod tests {
    use flowscale_sdk::{AlignmentContext, ModeError};

    use super::*;

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
