//! End-to-end tests: build what a user builds, run the `flowscale` command line as a user does.
//!
//! Where things go: `align` for the alignment command, `validate` for configuration checking,
//! `plugin_loading` for the plugins directory, `kinds` for metric evaluators and scaling
//! executors, `quota` for the resource quota on a simulated job, `restart_aware` for restart-aware
//! hysteresis, `skew_aware` for skew-aware targets, `isolation` for plugins in worker processes,
//! `run` for `run` and `simulate`, `state` for `run` with a state directory (killed, corrupted,
//! locked), `reload` for a fleet file edited while `run` runs, `removed` for the jobs a reload removes
//! (gone from the API, the metrics and the host's memory), `scale` for the memory of a
//! large simulated fleet, `multi_host` for several hosts sharing a fleet through PostgreSQL
//! (`#[ignore]`d: it runs with `--ignored` and `FLOWSCALE_POSTGRES_URL`, which `.ci/run` sets),
//! (its `stale_writes` tests: a host that lost a lease never changes the job again, with
//! paused hosts, held requests and delaying proxies), `multi_host_flink` for three hosts on one PostgreSQL and a real Flink cluster (`#[ignore]`d:
//! it needs both `FLOWSCALE_FLINK_E2E=1` and `FLOWSCALE_POSTGRES_URL`),
//! `flink` for `flowscale run` against a real Flink cluster and `flink_load_align` for
//! load-aware alignment on a real cluster with skewed keys, `flink_slots` for two jobs sharing a
//! real 6-slot cluster through the slot arbiter, `flink_tls` for a real cluster whose
//! REST API has mutual TLS (all four `#[ignore]`d: they run with
//! `--ignored` and `FLOWSCALE_FLINK_E2E=1`).
//! `tls_rotation` renews the certificates of a cluster with mutual TLS (behind `tls_front`) and of
//! the host's API while `run` runs.
//! `discovery` for an entry without `job-id` whose cluster is down at start.
//! `shell_docs` for the generated shell completions and man pages.
//! `slots` for simulated jobs sharing a cluster's slots through its arbiter.
//! `secrets` checks that no token or password of a cluster reaches what the host prints.
//! `what_if` drives `POST /api/v1/align` on a running host as an attacker would (a plugin that
//! crashes, spins or forks; a request from a web page).
//! `grafana` for the Grafana dashboard and the alert rules of `examples/`: their shape, promtool's
//! unit tests of the rules and a real Prometheus answering every query (`#[ignore]`d: they run
//! with `FLOWSCALE_PROMTOOL=1`, and `FLOWSCALE_PROMETHEUS_E2E=1` with `FLOWSCALE_POSTGRES_URL`).
//! Shared helpers live in `harness`; `fake_flink` serves a Flink REST API for wall-clock jobs
//! without a cluster.

#![warn(missing_docs, unreachable_pub)]

mod align;
mod discovery;
mod fake_flink;
mod flink;
mod flink_load_align;
mod flink_skew_aware;
mod flink_slots;
mod flink_tls;
mod grafana;
mod harness;
mod isolation;
mod kinds;
mod multi_host;
mod multi_host_flink;
mod oracle;
mod plugin_loading;
mod proxy;
mod quota;
mod readme;
mod reload;
mod removed;
mod restart_aware;
mod run;
mod scale;
mod secrets;
mod serve;
mod serve_tls;
mod shell_docs;
mod skew_aware;
mod slots;
mod state;
mod tls_front;
mod tls_rotation;
mod validate;
mod what_if;
