//! The what-if calls of the HTTP API (`POST /api/v1/align`): plugin modes run in worker
//! processes of their own, apart from the fleet.
//!
//! A what-if request chooses its mode and every input, so it can reach any bug of any loaded
//! plugin: a crash, an endless loop, a child process left behind. Whatever `[host]
//! plugin-isolation` says, a plugin mode of a what-if therefore never runs in the host's process
//! nor in a worker of the fleet: [`WhatIfCatalog`] hands out the fleet's modes with each plugin
//! mode replaced by one whose calls go to a what-if pool of its file.
//!
//! * A [`Pool`] starts a worker on its first call and keeps it for the next ones; calls running at
//!   once each get a worker of their own, so one that spins does not hold up another (the HTTP
//!   server bounds how many run at once, hence how many workers a pool has).
//! * Each call has the fleet's deadline, `[host] plugin-call-timeout`; a worker that misses it,
//!   dies or breaks the protocol is killed with its process group and restarted after the
//!   usual delay, as a fleet's worker is.
//! * Faults of what-if calls count towards a quarantine of their own, shared by the workers of
//!   the pool and for what-if calls only: they are never counted towards the fleet's.
//!
//! Built-in modes and modes linked into the binary have no plugin code and run in the host.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::pool::Pool;
use super::supervisor::Serves;
use super::{IsolationOptions, ProcessMode, Workers};
use crate::alignment::{CustomMode, ModeCatalog, ModeOrigin};

/// The modes a what-if request may name: those of `modes`, each plugin mode served by a
/// what-if pool of its file.
pub(crate) struct WhatIfCatalog {
    modes: Arc<dyn ModeCatalog + Send + Sync>,
    options: IsolationOptions,
    pools: Mutex<BTreeMap<PathBuf, Arc<Pool>>>,
}

impl WhatIfCatalog {
    /// The what-if view of `modes`, each call with the deadline `call_timeout`. No worker runs
    /// until a what-if request names a plugin mode.
    pub(crate) fn new(
        modes: Arc<dyn ModeCatalog + Send + Sync>,
        call_timeout: Duration,
    ) -> WhatIfCatalog {
        let mut options = IsolationOptions::new(call_timeout);
        options.serves = Serves::WhatIf;
        WhatIfCatalog {
            modes,
            options,
            pools: Mutex::new(BTreeMap::new()),
        }
    }

    /// The pool of `file`, made on first use.
    fn pool(&self, file: &Path) -> Arc<Pool> {
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        let pool = pools
            .entry(file.to_path_buf())
            .or_insert_with(|| Arc::new(Pool::new(file, self.options.clone())));
        Arc::clone(pool)
    }
}

impl ModeCatalog for WhatIfCatalog {
    fn find(&self, id: &str) -> Option<CustomMode> {
        let found = self.modes.find(id)?;
        let ModeOrigin::Plugin { file, .. } = &found.origin else {
            return Some(found);
        };
        let mode = Arc::new(ProcessMode {
            id: found.id.clone(),
            workers: Workers::Pool(self.pool(file)),
        });
        Some(CustomMode { mode, ..found })
    }

    fn ids(&self) -> Vec<String> {
        self.modes.ids()
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use flowscale_sdk::{AlignmentContext, AlignmentMode, ModeError, ModeParams};

    use super::*;

    struct Target;

    impl AlignmentMode for Target {
        fn align(&self, ctx: &AlignmentContext) -> Result<u32, ModeError> {
            Ok(ctx.target_parallelism())
        }
    }

    struct TwoModes(Vec<CustomMode>);

    impl ModeCatalog for TwoModes {
        fn find(&self, id: &str) -> Option<CustomMode> {
            self.0.iter().find(|m| m.id == id).cloned()
        }
        fn ids(&self) -> Vec<String> {
            self.0.iter().map(|m| m.id.clone()).collect()
        }
    }

    fn catalog() -> (WhatIfCatalog, Arc<dyn crate::alignment::HostMode>) {
        let linked = CustomMode::linked("linked", "", Arc::new(Target));
        let fleets = Arc::clone(&linked.mode);
        let plugin = CustomMode {
            id: "plug".into(),
            description: String::new(),
            origin: ModeOrigin::Plugin {
                file: PathBuf::from("/p/libplug.so"),
                plugin: "plug".into(),
                version: "1.0.0".into(),
            },
            // Stands for the fleet's own (in-process) mode object.
            mode: Arc::clone(&fleets),
        };
        let mut what_if = WhatIfCatalog::new(
            Arc::new(TwoModes(vec![linked, plugin])),
            Duration::from_secs(1),
        );
        // No worker can start: each call is a fault of the what-if pool.
        what_if.options.worker_exe = PathBuf::from("/nonexistent/flowscale");
        what_if.options.backoff_min = Duration::ZERO;
        what_if.options.backoff_max = Duration::ZERO;
        (what_if, fleets)
    }

    #[test]
    fn plugin_modes_go_to_what_if_workers_and_count_towards_their_own_quarantine_only() {
        let (what_if, fleets) = catalog();
        assert_eq!(what_if.ids(), ["linked", "plug"]);
        let linked = what_if.find("linked").expect("linked");
        assert!(
            Arc::ptr_eq(&linked.mode, &fleets),
            "a linked mode runs in the host"
        );
        let plugin = what_if.find("plug").expect("plug");
        assert!(
            !Arc::ptr_eq(&plugin.mode, &fleets),
            "a plugin mode is never the fleet's object"
        );
        assert_eq!(
            plugin.origin.to_string(),
            "plugin plug 1.0.0 (/p/libplug.so)"
        );
        assert_eq!(
            plugin.mode.unavailable(),
            None,
            "nothing started, nothing faulted"
        );
        let params = ModeParams::new("m", Default::default());
        // Three faults, through two lookups of the mode: one pool, one standing.
        for _ in 0..2 {
            let err = plugin.mode.validate(&params).unwrap_err();
            assert!(
                err.message()
                    .starts_with("the plugin worker could not be started: /nonexistent"),
                "{}",
                err.message()
            );
        }
        let again = what_if.find("plug").expect("plug");
        let err = again.mode.validate(&params).unwrap_err();
        assert!(
            err.message().contains("is quarantined for what-if calls"),
            "{}",
            err.message()
        );
        let why = plugin.mode.unavailable().expect("quarantined");
        assert!(why.contains("for what-if calls"), "{why}");
        assert!(fleets.unavailable().is_none(), "the fleet's mode is not");
        assert!(fleets.validate(&params).is_ok());
    }
}
