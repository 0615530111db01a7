//! A what-if pool: the workers of one plugin file that serve the HTTP API's what-if calls, a
//! worker for each call running at once.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::supervisor::{IsolationOptions, Standing, Supervisor};

/// The what-if workers of one plugin file: a supervisor per call running at once, with the
/// standing of the file's modes shared between them.
pub(crate) struct Pool {
    file: PathBuf,
    options: IsolationOptions,
    standing: Arc<Mutex<Standing>>,
    /// Supervisors not serving a call right now, the last used on top (its worker is the most
    /// likely to be running).
    idle: Mutex<Vec<Supervisor>>,
}

impl Pool {
    /// A pool of `file`'s workers with no worker running yet.
    pub(super) fn new(file: &Path, options: IsolationOptions) -> Pool {
        Pool {
            file: file.to_path_buf(),
            options,
            standing: Arc::default(),
            idle: Mutex::new(Vec::new()),
        }
    }

    fn idle(&self) -> MutexGuard<'_, Vec<Supervisor>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `call` with a supervisor no other call is using (a new one if all are busy), and
    /// keeps the supervisor, with its worker, for the next call.
    pub(super) fn with<T>(&self, call: impl FnOnce(&Supervisor) -> T) -> T {
        let taken = self.idle().pop();
        let supervisor = taken.unwrap_or_else(|| {
            Supervisor::idle(&self.file, self.options.clone(), Arc::clone(&self.standing))
        });
        let answer = call(&supervisor);
        self.idle().push(supervisor);
        answer
    }
}
