//! Reading a job file (TOML) into a validated
//! [`SimulatedJobSpec`](crate::sim::SimulatedJobSpec), with every error naming the file, the
//! line, the key and what would be valid.
//!
//! Two passes: serde turns the text into raw tables that remember where each value came from
//! (`toml::Spanned`, in `raw`), then validation resolves ids, checks ranges and the graph, and
//! builds the typed spec (`job` drives it, one file per kind of table). The schema is strict
//! (unknown keys are errors): a job file is a test fixture, and a silently ignored typo would
//! make a simulated result mean something other than intended.

mod distribution;
mod edges;
mod feedback;
mod graph;
mod job;
mod problem;
mod rate;
mod raw;
mod taskmanager;
mod trace;
mod vertex;
mod workload;

#[cfg(test)]
mod tests;

pub(crate) use job::parse_job;
