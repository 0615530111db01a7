//! Hot configuration and plugins: `flowscale run` reads its fleet file again on SIGHUP and when
//! the file changes, and hands the running fleet the new plan only when it is valid; and it
//! watches its plugins directory, planning the fleet again with the modes available now when a
//! plugin file comes, goes or is replaced (or, on SIGHUP, when a refused file is now accepted).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::config::{
    ConfigErrors, Diagnostic, FleetConfig, HostSettings, KeyPolicy, PluginIsolation,
    check_listen_token,
};
use crate::events::{Event, EventReason, Severity};
use crate::plan::PluginCatalog;
use crate::plan::{FleetPlan, replan_fleet};
use crate::plugins::LivePlugins;
use crate::runner::{FleetSource, JobRun, Printer, wall_ms};

use super::load::recheck_fleet;

use super::signals::Signals;

/// The `[host]` settings `flowscale run`'s command line sets over the file's (`--plugins`,
/// `--plugin-isolation`, `--workers`, `--listen`): applied to the file as read at start and at
/// every reload, so that the host runs with them and a reload compares the settings the host
/// really runs with (`--workers 4` is not reported against the file's `workers` as a change that
/// needs a restart).
#[derive(Debug, Clone, Default)]
pub(super) struct HostFlags {
    pub(super) plugins: Option<PathBuf>,
    pub(super) plugin_isolation: Option<PluginIsolation>,
    pub(super) workers: Option<usize>,
    pub(super) listen: Option<SocketAddr>,
}

impl HostFlags {
    /// Sets what the command line sets over `host`.
    pub(super) fn apply(&self, host: &mut HostSettings) {
        if let Some(dir) = &self.plugins {
            host.plugins_dir.clone_from(dir);
        }
        if let Some(isolation) = self.plugin_isolation {
            host.plugin_isolation = isolation;
        }
        if let Some(workers) = self.workers {
            host.workers = Some(workers);
        }
        if let Some(listen) = self.listen {
            host.listen = Some(listen);
        }
    }
}

/// What the host started with besides its fleet file, which every reload keeps.
#[derive(Debug, Clone, Default)]
pub(super) struct Started {
    /// The command line's `[host]` settings.
    pub(super) flags: HostFlags,
    /// Where the HTTP server listens, when one runs: it keeps that address until the host
    /// restarts, so a new `[host] api-token` must do for it.
    pub(super) serving: Option<SocketAddr>,
}

/// What changed while the host runs, for those who show it (the HTTP server).
pub(super) enum Changed<'a> {
    /// The fleet runs this plan from now on.
    Plan(&'a FleetPlan),
    /// The plugins directory changed.
    Plugins(&'a LivePlugins),
}

/// What is told of every [`Changed`].
pub(super) type OnChange<'p> = Box<dyn FnMut(Changed<'_>) + 'p>;

/// What is handed the runs of the entries a reload stopped, as they end.
pub(super) type OnLeft<'p> = Box<dyn FnMut(Vec<JobRun>) + 'p>;

/// Where the host's own events that happen outside the fleet's loop come from (the
/// `CredentialsReloaded` and `CredentialsRefused` of the state link and of the HTTP server):
/// asked at every poll.
pub(super) type HostEvents<'p> = Box<dyn FnMut() -> Vec<Event> + 'p>;

/// Watches one fleet file for the running host.
///
/// The file is read every time the fleet asks (a few times a second; fleet files are small) and
/// acted on when its bytes changed and then stayed the same for one more look, so that an
/// editor's half-written save is not reported as an error; SIGHUP acts at once, even on an
/// unchanged file. An invalid file is refused with every problem in one `ConfigRefused` event,
/// once per distinct content, and the fleet runs on with the plan it has. A job whose mode is
/// unavailable (quarantined, or its plugin file gone since) does not make the file invalid: it
/// goes on aligning with BALANCED until the mode is back ([`crate::plan::reload_fleet`]). The
/// command line's `[host]` settings ([`HostFlags`]) stay over the file's.
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
    catalog: Arc<dyn PluginCatalog + Send + Sync>,
    /// Told of every new plan and every change of the plugins.
    on_change: Option<OnChange<'p>>,
    /// Handed the runs of the entries a reload stopped.
    on_left: Option<OnLeft<'p>>,
    /// Asked at every poll for the host's events from outside the fleet's loop, which are
    /// printed.
    host_events: Vec<HostEvents<'p>>,
    plugins: Option<LivePlugins>,
    /// The next plan comes from a plugin change: its `ConfigReloaded` summary is not printed
    /// (the plugin events say what happened).
    quiet: bool,
    policy: KeyPolicy,
    signals: Signals,
    started: Started,
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
        (catalog, plugins): (Arc<dyn PluginCatalog + Send + Sync>, Option<LivePlugins>),
        (policy, signals): (KeyPolicy, Signals),
        started: Started,
        printer: &'p Mutex<Printer<W>>,
    ) -> FleetWatcher<'p, W> {
        let acted_on = std::fs::read(&path).ok();
        FleetWatcher {
            path,
            fleet,
            catalog,
            on_change: None,
            on_left: None,
            host_events: Vec::new(),
            plugins,
            quiet: false,
            policy,
            signals,
            started,
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

    /// Has `callback` handed the runs of every entry a reload stopped, once they have ended.
    pub(super) fn on_left(&mut self, callback: OnLeft<'p>) {
        self.on_left = Some(callback);
    }

    /// Has `source` asked for host events at every poll, to print them (one of several).
    pub(super) fn host_events(&mut self, source: HostEvents<'p>) {
        self.host_events.push(source);
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
        let mut plan = checked.plan?;
        self.started.flags.apply(&mut plan.fleet.host);
        if let Some(addr) = self.started.serving
            && let Err(why) = check_listen_token(addr, &plan.fleet.host)
        {
            let problem = Diagnostic::new(
                format!("{}: host.api-token", self.path.display()),
                format!("the server keeps listening on {addr} until the host restarts: {why}"),
            );
            self.refuse(ConfigErrors(vec![problem]).to_string());
            return None;
        }
        Some(plan)
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
        let events: Vec<Event> = self
            .host_events
            .iter_mut()
            .flat_map(|source| source())
            .collect();
        for event in &events {
            self.print(event);
        }
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

    fn left(&mut self, runs: Vec<JobRun>) {
        if let Some(callback) = self.on_left.as_mut() {
            callback(runs);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::alignment::NoCustomModes;
    use crate::config::parse_fleet;

    /// A watcher of `fleet.toml` (written with `host` as its `[host]` section) started with
    /// `started`, and what it printed.
    struct Watched {
        dir: tempfile::TempDir,
        printer: Mutex<Printer<Vec<u8>>>,
        reload: Arc<AtomicBool>,
    }

    impl Watched {
        fn new(host: &str) -> Watched {
            let dir = tempfile::tempdir().expect("tempdir");
            let watched = Watched {
                dir,
                printer: Mutex::new(Printer::new(Vec::new(), false, false)),
                reload: Arc::new(AtomicBool::new(false)),
            };
            watched.write(host);
            watched
        }

        fn path(&self) -> PathBuf {
            self.dir.path().join("fleet.toml")
        }

        fn write(&self, host: &str) {
            std::fs::write(self.path(), format!("[host]\n{host}\n")).expect("write");
        }

        fn watcher(&self, started: Started) -> FleetWatcher<'_, Vec<u8>> {
            let text = std::fs::read_to_string(self.path()).expect("read");
            let fleet = parse_fleet(&self.path(), &text).expect("a valid fleet");
            let signals = Signals {
                stop: Arc::new(AtomicBool::new(false)),
                reload: Arc::clone(&self.reload),
            };
            FleetWatcher::new(
                self.path(),
                fleet,
                (Arc::new(NoCustomModes), None),
                (KeyPolicy::default(), signals),
                started,
                &self.printer,
            )
        }

        /// SIGHUP, then one poll.
        fn hup(&self, watcher: &mut FleetWatcher<'_, Vec<u8>>) -> Option<FleetPlan> {
            self.reload.store(true, Ordering::Release);
            watcher.poll()
        }

        fn printed(&self) -> String {
            let mut printer = self.printer.lock().expect("printer");
            String::from_utf8_lossy(printer.out()).into_owned()
        }
    }

    #[test]
    fn a_reload_keeps_the_command_line_s_host_settings() {
        let watched = Watched::new("workers = 2\nplugin-isolation = \"in-process\"");
        let started = Started {
            flags: HostFlags {
                workers: Some(4),
                plugin_isolation: Some(PluginIsolation::Process),
                ..HostFlags::default()
            },
            serving: None,
        };
        let mut watcher = watched.watcher(started);
        let plan = watched.hup(&mut watcher).expect("applied");
        assert_eq!(plan.fleet.host.workers, Some(4));
        assert_eq!(plan.fleet.host.plugin_isolation, PluginIsolation::Process);
    }

    #[test]
    fn a_token_file_is_reloaded_as_a_token_is_and_the_server_cannot_be_left_without_one() {
        let watched = Watched::new("api-token-file = \"token\"");
        let token = |name: &str, text: &str| {
            let path = watched.dir.path().join(name);
            flowscale_tests::certs::write_private(&path, text);
            path
        };
        let first = token("token", "a-token-from-a-file-0123");
        let mut watcher = watched.watcher(Started {
            flags: HostFlags::default(),
            serving: Some("0.0.0.0:9464".parse().expect("an address")),
        });
        // Another file: taken, the path (never the token) in the reload's message.
        let second = token("other-token", "another-token-from-a-file");
        watched.write("api-token-file = \"other-token\"");
        let plan = watched.hup(&mut watcher).expect("applied");
        assert_eq!(plan.fleet.host.api_token_file, Some(second));
        // The file removed from the fleet file while the server listens on another address
        // than loopback: refused, as a removed api-token is.
        watched.write("");
        assert!(watched.hup(&mut watcher).is_none());
        // A file the server could not use: refused where the fleet file names it.
        std::fs::set_permissions(&first, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .expect("chmod");
        watched.write("api-token-file = \"token\"");
        assert!(watched.hup(&mut watcher).is_none());
        let printed = watched.printed();
        assert!(
            printed.contains(
                "fleet.toml: host.api-token: the server keeps listening on 0.0.0.0:9464 until the \
                 host restarts: 0.0.0.0:9464 is not a loopback address: set `[host] \
                 api-token-file` (or `api-token`)"
            ),
            "{printed}"
        );
        assert!(printed.contains("run `chmod 600"), "{printed}");
        assert!(!printed.contains("a-token-from-a-file"), "{printed}");
        assert!(!printed.contains("another-token-from-a-file"), "{printed}");
    }

    #[test]
    fn a_token_the_running_server_cannot_go_without_is_refused() {
        let token = "api-token = \"a-token-0123456789\"";
        let watched = Watched::new(token);
        let started = Started {
            flags: HostFlags::default(),
            serving: Some("0.0.0.0:9464".parse().expect("an address")),
        };
        let mut watcher = watched.watcher(started);
        // Removed while the server listens on another address than loopback: refused.
        watched.write("");
        assert!(watched.hup(&mut watcher).is_none());
        let printed = watched.printed();
        assert!(
            printed.contains("ConfigRefused")
                && printed.contains(
                    "fleet.toml: host.api-token: the server keeps listening on 0.0.0.0:9464"
                )
                && printed.contains("is not a loopback address"),
            "{printed}"
        );
        // Replaced: taken.
        watched.write("api-token = \"another-token-0123456789\"");
        let plan = watched.hup(&mut watcher).expect("applied");
        assert_eq!(
            plan.fleet.host.api_token.as_deref(),
            Some("another-token-0123456789")
        );
    }
}
