//! `flowscale run`'s side of the HTTP server: what the server asks of the running host (the
//! plugin listing, the align what-if) and keeping the server's view of the fleet in step with
//! reloads of the fleet file and of the plugins directory.
//!
//! The what-if runs with the host's modes as a [`WhatIfCatalog`] sees them: a plugin mode's
//! calls go to what-if workers of their own, never into the host's process or the fleet's
//! workers.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::align::answer_request;
use crate::config::{EngineSpec, check_listen};
use crate::events::Event;
use crate::plan::FleetPlan;
use crate::plan::PluginCatalog;
use crate::plugins::isolation::what_if::WhatIfCatalog;
use crate::plugins::{LivePlugins, PluginFileReport, PluginListing, PluginStatus};
use crate::serve::{Backend, CustomView, FleetView, ServeConfig, Server};

use super::reload::Changed;

/// The plugins as the running host has them now: the server's listing and its align what-if
/// read them, the plugins watcher replaces them.
struct PluginsNow {
    listing: PluginListing,
    /// The what-if view of the host's modes.
    catalog: Arc<WhatIfCatalog>,
}

/// What the server asks of `run`.
struct RunBackend {
    plugins: Arc<Mutex<PluginsNow>>,
}

impl Backend for RunBackend {
    fn plugins(&self) -> PluginListing {
        self.now().listing.clone()
    }

    fn align(&self, request: &[u8]) -> Result<serde_json::Value, serde_json::Value> {
        let catalog = Arc::clone(&self.now().catalog);
        answer_request(request, catalog.as_ref())
    }
}

impl RunBackend {
    fn now(&self) -> std::sync::MutexGuard<'_, PluginsNow> {
        self.plugins.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The engine of a fleet entry, in a word.
fn engine_kind(spec: &EngineSpec) -> &'static str {
    match spec {
        EngineSpec::Sim { .. } => "sim",
        EngineSpec::Flink { .. } => "flink",
        EngineSpec::Replay { .. } => "replay",
    }
}

fn loaded(reports: &[PluginFileReport]) -> usize {
    reports
        .iter()
        .filter(|r| r.status == PluginStatus::Loaded)
        .count()
}

/// The start-up line: where the server is, and how it is protected when that is not obvious (a
/// plaintext address others can reach relies on a proxy in front).
fn serving_line(server: &Server, listen_plaintext: bool) -> String {
    let addr = server.local_addr();
    if server.tls() {
        format!("serving metrics, API and dashboard on https://{addr}/")
    } else if addr.ip().is_loopback() {
        format!("serving metrics, API and dashboard on http://{addr}/")
    } else if listen_plaintext {
        format!(
            "serving metrics, API and dashboard on http://{addr}/ in plaintext \
             (`listen-plaintext = true`: the TLS-terminating proxy in front must be the only way in)"
        )
    } else {
        format!("serving metrics, API and dashboard on http://{addr}/ in plaintext")
    }
}

/// A running server and what keeps it current.
pub(super) struct Serving {
    /// Serves until dropped.
    server: Server,
    view: Arc<FleetView>,
    plugins: Arc<Mutex<PluginsNow>>,
    /// The deadline of a what-if's plugin calls: `[host] plugin-call-timeout` as the host
    /// started with it.
    call_timeout: Duration,
    /// The fleet entries shown, to forget those a reload removes (a Flink entry without a job
    /// id shows its jobs under their own names: those come and go with their reports).
    entries: Mutex<Vec<String>>,
}

impl Serving {
    /// Starts the server on `listen` (`None`: no server), for `plan` and the plugins it was
    /// planned with; an error is printed.
    pub(super) fn start(
        listen: Option<SocketAddr>,
        plan: &FleetPlan,
        catalog: Arc<dyn PluginCatalog + Send + Sync>,
        plugins: Option<&LivePlugins>,
    ) -> Result<Option<Serving>, ()> {
        let Some(listen) = listen else {
            return Ok(None);
        };
        let host = &plan.fleet.host;
        if let Err(why) = check_listen(listen, host) {
            eprintln!("error: --listen: {why}");
            return Err(());
        }
        let view = Arc::new(FleetView::new());
        let listing = plugins.map_or_else(
            || PluginListing::empty(plan.fleet.host.plugins_dir.clone()),
            LivePlugins::listing,
        );
        view.metrics().set_plugins_loaded(loaded(&listing.files));
        let call_timeout = plan.fleet.host.plugin_call_timeout;
        let plugins = Arc::new(Mutex::new(PluginsNow {
            listing,
            catalog: Arc::new(WhatIfCatalog::new(catalog, call_timeout)),
        }));
        let serving_plugins = Arc::clone(&plugins);
        let backend = Arc::new(RunBackend { plugins });
        let config = ServeConfig {
            listen,
            api_token: host.api_token.clone(),
            api_token_file: host.api_token_file.clone(),
            tls: host.tls.clone(),
        };
        match Server::start(&config, Arc::clone(&view), backend) {
            Ok(server) => {
                eprintln!("{}", serving_line(&server, host.listen_plaintext));
                let serving = Serving {
                    server,
                    view,
                    plugins: serving_plugins,
                    call_timeout,
                    entries: Mutex::new(Vec::new()),
                };
                serving.show(plan);
                Ok(Some(serving))
            }
            Err(err) => {
                eprintln!("error: {err}");
                Err(())
            }
        }
    }

    /// The fleet as the server shows it.
    pub(super) fn view(&self) -> &FleetView {
        &self.view
    }

    /// Forgets the entries `plan` no longer has (their jobs and every series of theirs), then
    /// lists every job of `plan`, with its engine and mode. Told before the fleet applies the
    /// plan: an entry added now takes the reports of the runs the fleet starts for it.
    fn show(&self, plan: &FleetPlan) {
        let names: HashSet<&str> = plan.jobs.iter().map(|j| j.spec.name.as_str()).collect();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        self.view.remove_entries(
            entries
                .iter()
                .map(String::as_str)
                .filter(|e| !names.contains(e)),
        );
        for job in &plan.jobs {
            let mode = job.alignment.mode_id();
            self.view
                .add_job(&job.spec.name, engine_kind(&job.spec.engine), &mode);
            self.view
                .set_custom(&job.spec.name, CustomView::of(&job.custom));
        }
        *entries = plan.jobs.iter().map(|j| j.spec.name.clone()).collect();
    }

    /// The events of the server's certificate, key and token files since the last call (a
    /// renewal taken in, or a file passed over).
    pub(super) fn credential_events(&self) -> Vec<Event> {
        self.server.credential_events()
    }

    /// Keeps the server current with what the running host changed.
    pub(super) fn changed(&self, change: Changed<'_>) {
        match change {
            Changed::Plan(plan) => {
                // The token of the file read last; the reload checked it against the address
                // the server listens on.
                let host = &plan.fleet.host;
                self.server
                    .set_api_token(host.api_token.as_deref(), host.api_token_file.as_deref());
                self.show(plan);
            }
            Changed::Plugins(live) => {
                let listing = live.listing();
                self.view
                    .metrics()
                    .set_plugins_loaded(loaded(&listing.files));
                let catalog = Arc::new(WhatIfCatalog::new(
                    Arc::new(live.registry()),
                    self.call_timeout,
                ));
                let mut now = self.plugins.lock().unwrap_or_else(PoisonError::into_inner);
                now.listing = listing;
                let before = std::mem::replace(&mut now.catalog, catalog);
                drop(now);
                // Its idle what-if workers end here, outside the lock (a call still running
                // keeps its pool until it returns).
                drop(before);
            }
        }
    }
}
