//! What TLS costs the Flink REST client: one cycle's REST calls (the GETs a collector makes
//! for a job of a few vertices: job details, each vertex's metrics, the job's metrics) against a
//! local server over plain HTTP and over TLS with the connection kept alive, measured in the same
//! run, and the handshakes the TLS server completed (one for every cycle of the run means a
//! handshake per cycle; one in all means connections are reused).
//!
//! `cargo bench -p flowscale --bench flink_tls`: prints the time per cycle of each, their ratio
//! and the handshake count, and fails when the ratio is above 1.2 or a handshake is paid more
//! than once.

#![warn(missing_docs, unreachable_pub)]

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use flowscale::config::{EngineSpec, parse_fleet};
use flowscale::engine::flink::test_server::{Server, server_config};
use flowscale::engine::flink::{FlinkClient, FlinkOptions};
use flowscale_tests::certs::TestCa;

/// The GETs of one cycle.
const CALLS_PER_CYCLE: usize = 8;
/// Cycles per measured round; rounds alternate plain and TLS so that both see the same machine.
const CYCLES: usize = 200;
const ROUNDS: usize = 10;

/// An answer of the size of Flink's job details for a few vertices (about 4 KB).
fn answer() -> String {
    let vertices: Vec<String> = (0..12)
        .map(|v| {
            format!(
                r#"{{"id":"{v:032x}","name":"operator number {v} of the job","parallelism":4,"maxParallelism":128,"status":"RUNNING","metrics":{{"read-bytes":123456,"write-bytes":654321,"read-records":1000,"write-records":1000}}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"jid":"{:032x}","vertices":[{}]}}"#,
        7,
        vertices.join(",")
    )
}

fn cycle(client: &FlinkClient) {
    for call in 0..CALLS_PER_CYCLE {
        let answer = client
            .get_json(&format!("/jobs/{call}"))
            .expect("the local server answers");
        std::hint::black_box(answer);
    }
}

fn time(client: &FlinkClient) -> Duration {
    let started = Instant::now();
    for _ in 0..CYCLES {
        cycle(client);
    }
    started.elapsed() / u32::try_from(CYCLES).expect("small")
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new(dir.path(), "bench");
    let (cert, key) = ca.issue("server", &["localhost", "127.0.0.1"]);
    let body = answer();
    let plain = Server::answering(None, 200, &body);
    let tls = Server::answering(Some(server_config(&cert, &key, None)), 200, &body);
    let fleet = dir.path().join("fleet.toml");
    let text = format!(
        "[clusters.bench]\nrest = \"https://localhost:{}\"\nca-file = \"{}\"\n\
         [[jobs]]\nname = \"a\"\nengine = \"flink\"\ncluster = \"bench\"\njob-id = \"{:032x}\"\n",
        tls.port,
        ca.ca_pem().display(),
        7
    );
    let spec = parse_fleet(&fleet, &text).expect("a valid fleet");
    let Some(EngineSpec::Flink {
        rest,
        cluster: Some(cluster),
        ..
    }) = spec.jobs.first().map(|j| j.engine.clone())
    else {
        panic!("a job on the named cluster");
    };
    let tls_client = FlinkClient::for_cluster(FlinkOptions::new(rest), &cluster).expect("files");
    let plain_client = FlinkClient::new(FlinkOptions::new(format!(
        "http://127.0.0.1:{}",
        plain.port
    )));
    // Warm up both: connections open, code paged in.
    cycle(&plain_client);
    cycle(&tls_client);

    let (mut plain_best, mut tls_best) = (Duration::MAX, Duration::MAX);
    for _ in 0..ROUNDS {
        plain_best = plain_best.min(time(&plain_client));
        tls_best = tls_best.min(time(&tls_client));
    }
    let handshakes = tls.connections.load(Ordering::SeqCst);
    let requests = (ROUNDS * CYCLES + 1) * CALLS_PER_CYCLE;
    let ratio = tls_best.as_secs_f64() / plain_best.as_secs_f64();
    println!(
        "one cycle ({CALLS_PER_CYCLE} GETs of {} bytes): plain HTTP {:.1} us, TLS kept alive {:.1} us, \
         ratio {ratio:.2}; TLS handshakes for {requests} requests: {handshakes}; plain connections: {}",
        body.len(),
        plain_best.as_secs_f64() * 1e6,
        tls_best.as_secs_f64() * 1e6,
        plain.connections.load(Ordering::SeqCst),
    );
    assert_eq!(handshakes, 1, "a handshake is paid once, not per request");
    assert!(ratio <= 1.2, "TLS costs {ratio:.2}x plain HTTP per cycle");
}
