//! Hot configuration and plugins: `flowscale run` reads its fleet file again on SIGHUP and when
//! the file changes, and hands the running fleet the new plan only when it is valid; and it
//! watches its plugins directory, planning the fleet again with the modes available now when a
//! plugin file comes, goes or is replaced (or, on SIGHUP, when a refused file is now accepted).

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::alignment::ModeCatalog;
use crate::config::{ConfigErrors, FleetConfig, KeyPolicy};
use crate::events::{Event, EventReason, Severity};
use crate::plan::{FleetPlan, replan_fleet};
use crate::plugins::LivePlugins;
use crate::runner::{FleetSource, Printer, wall_ms};

use super::load::recheck_fleet;

use super::signals::Signals;

/// What changed while the host runs, for those who show it (the HTTP server).
pub(super) enum Changed<'a> {
    /// The fleet runs this plan from now on.
    Plan(&'a FleetPlan),
    /// The plugins directory changed.
    Plugins(&'a LivePlugins),
}

/// What is told of every [`Changed`].
pub(super) type OnChange<'p> = Box<dyn FnMut(Changed<'_>) + 'p>;

/// Watches one fleet file for the running host.
///
/// The file is read every time the fleet asks (a few times a second; fleet files are small) and
/// acted on when its bytes changed and then stayed the same for one more look, so that an
/// editor's half-written save is not reported as an error; SIGHUP acts at once, even on an
/// unchanged file. An invalid file is refused with every problem in one `ConfigRefused` event,
/// once per distinct content, and the fleet runs on with the plan it has. A job whose mode is
/// unavailable (quarantined, or its plugin file gone since) does not make the file invalid: it
/// goes on aligning with BALANCED until the mode is back ([`crate::plan::reload_fleet`]).
///
/// A change of the plugins directory (see `plugins::LivePlugins`) is printed as its events and,
/// when the modes on offer changed, the running configuration is planned again with them
/// ([`replan_fleet`]): a job whose mode has a new version takes it at its next decision, a job
/// whose mode is gone aligns with BALANCED (a `ModeFallback` event) until it is back. SIGHUP
/// also discovers the plugins directory again, refused files included.
pub(super) struct FleetWatcher<'p, W: Write> {
    path: PathBuf,
    /// The configuration the fleet runs with.
    fleet: FleetConfig,
    /// The modes plans are made with now.
    catalog: Arc<dyn ModeCatalog + Send + Sync>,
    /// Told of every new plan and every change of the plugins.
    on_change: Option<OnChange<'p>>,
    plugins: Option<LivePlugins>,
    /// The next plan comes from a plugin change: its `ConfigReloaded` summary is not printed
    /// (the plugin events say what happened).
    quiet: bool,
    policy: KeyPolicy,
    signals: Signals,
    printer: &'p Mutex<Printer<W>>,
    /// The bytes the running plan (or the last refusal) was made from.
    acted_on: Option<Vec<u8>>,
    /// The bytes seen at the last look, not yet acted on.
    seen: Option<Vec<u8>>,
    /// A SIGHUP came: the plugins directory is to be discovered again at once.
    hup_plugins: bool,
    /// A SIGHUP came: the file is to be read again at once.
    hup_file: bool,
}

impl<'p, W: Write> FleetWatcher<'p, W> {
    /// A watcher of `path`, whose current bytes are what the running `fleet` was made from,
    /// planned with `catalog` (from `plugins`, when watched).
    pub(super) fn new(
        path: PathBuf,
        fleet: FleetConfig,
        (catalog, plugins): (Arc<dyn ModeCatalog + Send + Sync>, Option<LivePlugins>),
        (policy, signals): (KeyPolicy, Signals),
        printer: &'p Mutex<Printer<W>>,
    ) -> FleetWatcher<'p, W> {
        let acted_on = std::fs::read(&path).ok();
        FleetWatcher {
            path,
            fleet,
            catalog,
            on_change: None,
            plugins,
            quiet: false,
            policy,
            signals,
            printer,
            acted_on,
            seen: None,
            hup_plugins: false,
            hup_file: false,
        }
    }

    /// Has `callback` told of every new plan and every change of the plugins directory.
    pub(super) fn on_change(&mut self, callback: OnChange<'p>) {
        self.on_change = Some(callback);
    }

    fn tell(&mut self, change: Changed<'_>) {
        if let Some(callback) = self.on_change.as_mut() {
            callback(change);
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
        let checked = recheck_fleet(&self.path, &self.fleet, self.catalog.as_ref(), self.policy);
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

impl<W: Write> FleetWatcher<'_, W> {
    /// Acts on a settled change of the plugins directory, or on SIGHUP at once: its events, and
    /// a new plan when the modes on offer changed.
    fn poll_plugins(&mut self) -> Option<FleetPlan> {
        let mut plugins = self.plugins.take()?;
        let update = if std::mem::take(&mut self.hup_plugins) {
            Some(plugins.recheck())
        } else {
            plugins.poll()
        };
        if update.is_some() {
            self.tell(Changed::Plugins(&plugins));
        }
        self.plugins = Some(plugins);
        let update = update?;
        for event in &update.events {
            self.print(event);
        }
        let registry = update.registry?;
        self.catalog = registry;
        match replan_fleet(self.fleet.clone(), self.catalog.as_ref()) {
            Ok(plan) => {
                self.quiet = true;
                self.tell(Changed::Plan(&plan));
                Some(plan)
            }
            // Only the modes changed, and a missing one falls back: nothing else can fail.
            Err(errors) => {
                self.refuse(errors.to_string());
                None
            }
        }
    }
}

impl<W: Write> FleetSource for FleetWatcher<'_, W> {
    fn poll(&mut self) -> Option<FleetPlan> {
        // A SIGHUP asks for both: the plugins first, the file at this poll or, when the plugins
        // gave a new plan, at the next one.
        if self.signals.take_reload() {
            self.hup_plugins = true;
            self.hup_file = true;
        }
        if let Some(plan) = self.poll_plugins() {
            return Some(plan);
        }
        let asked = std::mem::take(&mut self.hup_file);
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
        let plan = self.plan()?;
        self.fleet = plan.fleet.clone();
        self.tell(Changed::Plan(&plan));
        Some(plan)
    }

    fn applied(&mut self, event: Event) {
        if !std::mem::take(&mut self.quiet) {
            self.print(&event);
        }
    }
}
