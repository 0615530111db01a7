//! Alignment modes from outside the host's own code: modes linked into the binary (collected
//! with `inventory`) and modes exported by plugin files in a plugins directory.
//!
//! # Discovery
//!
//! [`ModeRegistry::discover`] scans one directory (not recursively) in file-name order. Only
//! regular files with the platform's shared-library extension (`.so` on Linux) are considered,
//! and symbolic links with that extension that lead nowhere (a missing target, a loop), which are
//! refused; anything else (a README, a `.so.1` versioned name, a sub-directory) is ignored, so the
//! directory may hold notes and backups. Every considered file gets one [`PluginFileReport`]:
//! loaded, or refused with one line saying why and what to do. A refused file never stops the
//! host or the other plugins.
//!
//! Checks, in order (the first failing one is reported):
//! 1. who may have planted it (`trust`, as sshd's `StrictModes`): the file after following its
//!    links, every directory on its canonical path up to `/`, and the directory holding each
//!    link must be owned by root or the host's effective user and not be writable by group or
//!    others (a root-owned sticky directory such as `/tmp` is fine); a plugin runs with the
//!    host's rights, so anyone who can change one of them could run code as the host. What is
//!    probed and loaded afterwards is the checked, resolved path;
//! 2. the probe: the file's header says it is a shared library for this platform (on Linux an
//!    ELF `ET_DYN` of the host's class, byte order and machine, checked on the bytes before
//!    anything is loaded: see [`precheck_file`]); then it opens as a shared library and carries
//!    a flowscale manifest with a
//!    compatible SDK version, unwinding panics, valid and non-reserved implementation ids
//!    (the library is closed again right after);
//! 3. no other file and no linked mode exports one of its implementation ids (otherwise every
//!    file claiming that id is refused: neither wins);
//! 4. abi_stable's version and layout check of the root module, then the creation of each mode.
//!
//! What is probed and loaded is a private copy of the checked file's content (`versions`):
//! the dynamic loader would hand back an old library for a path it knows, and a library
//! overwritten in place while mapped can crash the process. Libraries that reach step 4 stay
//! mapped for the life of the process (abi_stable never unloads), so each new version counts
//! against [`MAX_LOADED_VERSIONS`]. While `flowscale run` runs, [`LivePlugins`] watches the
//! directory and loads new and replaced files as new versions.
//!
//! In `process` isolation ([`isolation`]), step 4 happens in a worker process per file instead
//! (the same code, see [`isolation::serve`]): the host only probes the file, and a refusal of
//! the worker is reported like any other.
//!
//! # Faults
//!
//! A plugin mode is wrapped so that nothing it does unwinds into the host: a panic inside it is
//! caught in the plugin (by the SDK) and comes back as `Err(ModeError)` naming the panic. What a
//! mode returns is checked by the alignment guard, not here.

mod call_clock;
pub mod isolation;
mod kinds;
mod live;
mod load;
mod logger;
mod mode;
mod probe;
mod registry;
mod report;
mod trust;
mod versions;

pub(crate) use call_clock::CallClock;
#[cfg(test)]
pub(crate) use call_clock::plugin_call;
pub use isolation::Isolation;
pub(crate) use kinds::Exports;
pub(crate) use live::LivePlugins;
pub(crate) use load::load_file;
pub(crate) use registry::is_reserved;
pub use registry::{LinkedEvaluator, LinkedExecutor, LinkedMode, ModeRegistry};
pub use report::PluginListing;
pub use report::PluginStatus;
pub(crate) use report::{PluginFileReport, Refusal};
pub(crate) use versions::{MAX_LOADED_VERSIONS, PluginVersions};

/// Where a registered mode comes from (the registry's entries are alignment's [`CustomMode`]s).
pub use crate::alignment::ModeOrigin;

/// The checks discovery makes on a candidate plugin file before it opens it as a library: who
/// may have planted it (`trust`), and its header is a shared library for this platform (on
/// Linux: ELF, this host's class, byte order and machine, type `ET_DYN`, program headers within
/// the file). `Ok` means discovery would go on to `dlopen` it; nothing is loaded or run here, so
/// any bytes are safe to check.
pub use probe::precheck as precheck_file;
