//! `flowscale status`: which host owns which job of a fleet shared through PostgreSQL.
//!
//! Reads the leases and heartbeats in the database the fleet file's `[host] state` names and
//! prints, per job, its owner, fencing token and lease expiry, and the live hosts. Ownership
//! exists only with a shared database: with `state-dir` one host holds the whole directory, and
//! that is what is shown. Nothing is written anywhere.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::exit_codes;
use super::json_out::write_json;
use crate::config::{KeyPolicy, read_fleet};
use crate::state::lock_holder;
use crate::state::postgres::{Ownership, read_ownership};

/// Arguments of `flowscale status`.
#[derive(Debug, clap::Args)]
pub(super) struct StatusArgs {
    /// The fleet configuration file.
    file: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// What `status` found, by where the fleet keeps its state.
#[derive(Debug, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
enum Report {
    /// `[host] state`: a shared PostgreSQL database.
    Postgres {
        /// The database's clock when it was read (ms since the epoch).
        now_ms: i64,
        hosts: Vec<HostRow>,
        jobs: Vec<JobRow>,
    },
    /// `[host] state-dir`: one host at a time.
    Files {
        state_dir: String,
        /// The process id of the host holding the directory's lock, when one does.
        holder_pid: Option<u32>,
        /// True when a host holds the lock (its process id may be unreadable).
        held: bool,
        message: String,
    },
    /// Neither: each host keeps its state in memory.
    Memory { message: String },
}

#[derive(Debug, Serialize)]
struct HostRow {
    id: String,
    expires_ms: i64,
    expires_in_ms: i64,
}

#[derive(Debug, Serialize)]
struct JobRow {
    name: String,
    /// `None`: no host holds the job's lease now.
    owner: Option<String>,
    token: Option<i64>,
    expires_ms: Option<i64>,
    expires_in_ms: Option<i64>,
}

const FILES_MESSAGE: &str = "job ownership exists only with a shared database (`[host] state = \
     \"postgres://...\"`); with `state-dir` one host holds the whole directory";
const MEMORY_MESSAGE: &str = "job ownership exists only with a shared database (`[host] state = \
     \"postgres://...\"`); this fleet keeps its state in each host's memory";

/// Runs `flowscale status`.
pub(super) fn exec(args: StatusArgs) -> u8 {
    let reading = match read_fleet(&args.file, KeyPolicy::default()) {
        Ok(reading) if reading.errors.is_empty() => reading,
        Ok(reading) => return refuse(&reading.errors),
        Err(errors) => return refuse(&errors.0),
    };
    let fleet = reading.fleet;
    let report = if let Some(url) = fleet.host.state_url.as_deref() {
        let jobs: Vec<&str> = fleet.jobs.iter().map(|j| j.name.as_str()).collect();
        match read_ownership(url, &jobs) {
            Ok(ownership) => postgres_report(&ownership),
            Err(err) => {
                eprintln!("error: cannot read the state database (`[host] state`): {err}");
                return exit_codes::FAILED;
            }
        }
    } else if let Some(dir) = fleet.host.state_dir.as_deref() {
        match files_report(dir) {
            Ok(report) => report,
            Err(err) => {
                eprintln!("error: cannot look at the state directory (`[host] state-dir`): {err}");
                return exit_codes::FAILED;
            }
        }
    } else {
        Report::Memory {
            message: MEMORY_MESSAGE.to_string(),
        }
    };
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        write_json(&mut out, &report)
    } else {
        out.write_all(human(&report).as_bytes())
    };
    match written {
        Ok(()) => exit_codes::OK,
        Err(err) => {
            eprintln!("error: cannot write the status: {err}");
            exit_codes::FAILED
        }
    }
}

fn refuse(errors: &[crate::config::Diagnostic]) -> u8 {
    for error in errors {
        eprintln!("error: {error}");
    }
    exit_codes::FAILED
}

fn postgres_report(ownership: &Ownership) -> Report {
    let now = ownership.now_ms;
    Report::Postgres {
        now_ms: now,
        hosts: ownership
            .hosts
            .iter()
            .map(|h| HostRow {
                id: h.id.clone(),
                expires_ms: h.expires_ms,
                expires_in_ms: h.expires_ms - now,
            })
            .collect(),
        jobs: ownership
            .jobs
            .iter()
            .map(|(name, owner)| JobRow {
                name: name.clone(),
                owner: owner.as_ref().map(|o| o.host.clone()),
                token: owner.as_ref().map(|o| o.token),
                expires_ms: owner.as_ref().map(|o| o.expires_ms),
                expires_in_ms: owner.as_ref().map(|o| o.expires_ms - now),
            })
            .collect(),
    }
}

fn files_report(dir: &Path) -> Result<Report, crate::state::StateError> {
    let holder = lock_holder(dir)?;
    Ok(Report::Files {
        state_dir: dir.display().to_string(),
        holder_pid: holder.flatten(),
        held: holder.is_some(),
        message: FILES_MESSAGE.to_string(),
    })
}

/// Seconds with one decimal, for people.
fn seconds(ms: i64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

fn human(report: &Report) -> String {
    let mut text = String::new();
    match report {
        Report::Postgres { hosts, jobs, .. } => {
            text.push_str(&format!("live hosts: {}\n", hosts.len()));
            for host in hosts {
                text.push_str(&format!(
                    "  {}  heartbeat expires in {}\n",
                    host.id,
                    seconds(host.expires_in_ms)
                ));
            }
            text.push_str("jobs:\n");
            let width = jobs.iter().map(|j| j.name.len()).max().unwrap_or(0);
            for job in jobs {
                match (&job.owner, job.token, job.expires_in_ms) {
                    (Some(owner), Some(token), Some(expires_in)) => text.push_str(&format!(
                        "  {:width$}  owner {owner}  token {token}  lease expires in {}\n",
                        job.name,
                        seconds(expires_in)
                    )),
                    _ => text.push_str(&format!("  {:width$}  no owner\n", job.name)),
                }
            }
        }
        Report::Files {
            state_dir,
            holder_pid,
            held,
            message,
        } => {
            text.push_str(&format!("{message}\nstate directory {state_dir}: "));
            match (held, holder_pid) {
                (true, Some(pid)) => text.push_str(&format!("held by process {pid}\n")),
                (true, None) => text.push_str("held by a process of unknown id\n"),
                (false, _) => text.push_str("no host holds it\n"),
            }
        }
        Report::Memory { message } => {
            text.push_str(message);
            text.push('\n');
        }
    }
    text
}
