//! How fast the simulator runs: simulated vertex-ticks per wall second, and days of simulated
//! time per wall second for a 10-vertex job (1 s ticks).
//!
//! `SIM_SPEED_PROFILE=<ticks>` runs that many ticks of the 10-vertex job (no timeline) and
//! nothing else, for instruction counts that do not depend on machine noise:
//! `SIM_SPEED_PROFILE=86400 valgrind --tool=callgrind --toggle-collect='*advance_to*' <bench
//! binary>` counts one simulated day.

#![warn(missing_docs, unreachable_pub)]

use std::fmt::Write as _;
use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group};
use flowscale::sim::Simulation;

const VERTICES: usize = 10;
const TICKS: u64 = 3600;

/// source -> 8 operators (HASH, REBALANCE, FORWARD, CUSTOM in turn) -> sink, parallelism 16-32,
/// under a diurnal load that saturates some vertices at the peak.
fn ten_vertex_job() -> String {
    let mut t = String::from("[job]\nname = \"bench\"\nseed = 1\n\n");
    let ships = ["HASH", "REBALANCE", "FORWARD", "CUSTOM:48"];
    for i in 0..VERTICES {
        let (kind, extra) = match i {
            0 => ("source", "partitions = 37\n"),
            _ if i == VERTICES - 1 => ("sink", ""),
            _ => ("operator", ""),
        };
        let p = if ships[i % ships.len()] == "FORWARD" {
            24
        } else {
            16 + (i as u32 * 5) % 17
        };
        let p = if i > 0 && ships[(i - 1) % ships.len()] == "FORWARD" {
            24
        } else {
            p
        };
        let _ = write!(
            t,
            "[[vertices]]\nid = \"v{i}\"\nkind = \"{kind}\"\nparallelism = {p}\nmax_parallelism = 128\ncapacity = 2000\n{extra}\n"
        );
    }
    for i in 1..VERTICES {
        let _ = write!(
            t,
            "[[edges]]\nfrom = \"v{}\"\nto = \"v{i}\"\nship = \"{}\"\n\n",
            i - 1,
            ships[(i - 1) % ships.len()]
        );
    }
    t.push_str("[workload.v0]\nnoise = 0.05\n[[workload.v0.rate]]\nkind = \"diurnal\"\nlow = 5000\nhigh = 45000\nperiod = \"1h\"\n");
    t
}

/// Time this thread has spent on a CPU (Linux `/proc/thread-self/schedstat`), if available.
fn cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}

fn bench(c: &mut Criterion) {
    let text = ten_vertex_job();
    let fresh = || {
        let mut s = Simulation::from_toml_str(&text).expect("the bench job is valid");
        s.record_timeline(false);
        s
    };

    // A plain measurement for the headline figure.
    let mut s = fresh();
    let start = Instant::now();
    let cpu_start = cpu_seconds();
    s.advance_to(86_400_000);
    let wall = start.elapsed().as_secs_f64();
    eprintln!(
        "10-vertex job: 1 simulated day in {wall:.3} s wall = {:.2} simulated days per wall second ({:.0} vertex-ticks/s)",
        1.0 / wall,
        86_400.0 * VERTICES as f64 / wall
    );
    if let (Some(a), Some(b)) = (cpu_start, cpu_seconds()) {
        // On a shared machine the wall figure understates the speed; CPU time does not.
        let cpu = b - a;
        eprintln!(
            "  on CPU: {cpu:.3} s = {:.2} simulated days per CPU second ({:.0} vertex-ticks/s)",
            1.0 / cpu,
            86_400.0 * VERTICES as f64 / cpu
        );
    }

    let mut group = c.benchmark_group("sim_speed");
    group.sample_size(10);
    group.throughput(Throughput::Elements(TICKS * VERTICES as u64));
    group.bench_function("vertex_ticks_10_vertices_no_timeline", |b| {
        b.iter_batched(
            fresh,
            |mut s| {
                s.advance_to(TICKS as i64 * 1000);
                s
            },
            criterion::BatchSize::LargeInput,
        )
    });
    group.bench_function("vertex_ticks_10_vertices_with_timeline", |b| {
        b.iter_batched(
            || Simulation::from_toml_str(&text).expect("the bench job is valid"),
            |mut s| {
                s.advance_to(TICKS as i64 * 1000);
                s
            },
            criterion::BatchSize::LargeInput,
        )
    });
    group.finish();
}

/// A fixed workload for instruction counting (no timing loop, no statistics): `ticks` ticks of
/// the 10-vertex job without a timeline.
fn profile(ticks: &str) {
    let ticks: i64 = ticks
        .parse()
        .expect("SIM_SPEED_PROFILE is a number of ticks");
    let mut s = Simulation::from_toml_str(&ten_vertex_job()).expect("the bench job is valid");
    s.record_timeline(false);
    s.advance_to(ticks * 1000);
    std::hint::black_box(&s);
}

criterion_group!(benches, bench);

fn main() {
    if let Ok(ticks) = std::env::var("SIM_SPEED_PROFILE") {
        profile(&ticks);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
