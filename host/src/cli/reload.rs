//! Hot configuration: `flowscale run` reads its fleet file again on SIGHUP and when the file
//! changes, and hands the running fleet the new plan only when it is valid.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

use crate::alignment::ModeCatalog;
use crate::config::{ConfigErrors, KeyPolicy};
use crate::events::{Event, EventReason, Severity};
use crate::plan::FleetPlan;
use crate::runner::{FleetSource, Printer, wall_ms};

use super::load::recheck_fleet;

use super::signals::Signals;

/// Watches one fleet file for the running host.
///
/// The file is read every time the fleet asks (a few times a second; fleet files are small) and
/// acted on when its bytes changed and then stayed the same for one more look, so that an
/// editor's half-written save is not reported as an error; SIGHUP acts at once, even on an
/// unchanged file. An invalid file is refused with every problem in one `ConfigRefused` event,
/// once per distinct content, and the fleet runs on with the plan it has.
pub(super) struct FleetWatcher<'p, W: Write> {
    path: PathBuf,
    catalog: &'p dyn ModeCatalog,
    policy: KeyPolicy,
    signals: Signals,
    printer: &'p Mutex<Printer<W>>,
    /// The bytes the running plan (or the last refusal) was made from.
    acted_on: Option<Vec<u8>>,
    /// The bytes seen at the last look, not yet acted on.
    seen: Option<Vec<u8>>,
}

impl<'p, W: Write> FleetWatcher<'p, W> {
    /// A watcher of `path`, whose current bytes are what the running plan was made from.
    pub fn new(
        path: PathBuf,
        catalog: &'p dyn ModeCatalog,
        policy: KeyPolicy,
        signals: Signals,
        printer: &'p Mutex<Printer<W>>,
    ) -> FleetWatcher<'p, W> {
        let acted_on = std::fs::read(&path).ok();
        FleetWatcher {
            path,
            catalog,
            policy,
            signals,
            printer,
            acted_on,
            seen: None,
        }
    }

    fn print(&self, event: &Event) {
        if let Ok(mut printer) = self.printer.lock() {
            let _ = printer.print_event(wall_ms(), event);
        }
    }

    fn refuse(&self, why: String) {
        let message = format!(
            "the changed configuration {} is not used, the host runs on with the one it has: \
             {}",
            self.path.display(),
            why.trim_end()
        );
        self.print(&Event::new(
            EventReason::ConfigRefused,
            Severity::Warning,
            message,
        ));
    }

    /// Reads, checks and plans the file as `flowscale run` does at start.
    fn plan(&self) -> Option<FleetPlan> {
        let checked = recheck_fleet(&self.path, self.catalog, self.policy);
        for warning in &checked.warnings {
            eprintln!("warning: {warning}");
        }
        if !checked.errors.is_empty() {
            self.refuse(ConfigErrors(checked.errors).to_string());
            return None;
        }
        checked.plan
    }
}

impl<W: Write> FleetSource for FleetWatcher<'_, W> {
    fn poll(&mut self) -> Option<FleetPlan> {
        let asked = self.signals.take_reload();
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(err) => {
                // A file being replaced can be missing for a moment: only a SIGHUP reports it.
                if asked {
                    self.refuse(format!("cannot read the file: {err}"));
                }
                return None;
            }
        };
        let changed = self.acted_on.as_ref() != Some(&bytes);
        let settled = self.seen.as_ref() == Some(&bytes);
        if !(asked || changed && settled) {
            self.seen = Some(bytes);
            return None;
        }
        self.seen = None;
        self.acted_on = Some(bytes);
        self.plan()
    }

    fn applied(&mut self, event: Event) {
        self.print(&event);
    }
}
