//! `flowscale run` against a real Apache Flink 2.3 session cluster whose REST API is https with
//! mutual TLS (`security.ssl.rest.enabled` and `.authentication-enabled`), as production
//! clusters are set up: flowscale rescales a job there exactly as on the plain cluster, through
//! a `[clusters.<name>]` table with the cluster's CA and a client certificate; the same host,
//! without a client certificate or with one of another CA, is refused with the clear error and
//! goes on with its other jobs.
//!
//! `#[ignore]`d and gated on `FLOWSCALE_FLINK_E2E=1` like the other real-Flink tests (`.ci/run`
//! runs it with them); one cluster start. The keystores are made from a test CA with `openssl`
//! and the JDK's `keytool`.

use std::time::{Duration, Instant};

use flowscale_tests::certs::TestCa;
use flowscale_tests::flink::{self, Cluster, rest_ssl, run_script, wait_for};

use super::flink::{fast_defaults, run_flowscale, settled_parallelism, vertex};

#[test]
#[ignore = "needs Java and Flink: FLOWSCALE_FLINK_E2E=1 and a local Flink (see flink/README.md)"]
fn rescales_a_job_over_mutual_tls_and_names_a_missing_or_foreign_client_certificate() {
    flink::require_enabled();
    run_script("setup.sh", &[], &[]);
    run_script("job.sh", &["build"], &[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = TestCa::new(dir.path(), "cluster");
    let ssl = rest_ssl(dir.path(), &ca);
    let t = Instant::now();
    let cluster = Cluster::start_with_rest_ssl(8, &ssl);
    eprintln!("TLS cluster at {} up after {:?}", cluster.url, t.elapsed());
    assert!(cluster.url.starts_with("https://"), "{}", cluster.url);

    let env = cluster.ssl_env().expect("TLS");
    let id = run_script(
        "job.sh",
        &[
            "submit",
            &cluster.url,
            "--rate",
            "1000",
            "--cost-ms",
            "0",
            "--keyed-cost-ms",
            "2",
            "--parallelism",
            "1",
            "--max-parallelism",
            "128",
        ],
        &[(env.0, env.1.as_str())],
    );
    let details = wait_for("the job to run", Duration::from_secs(60), || {
        cluster
            .get(&format!("/jobs/{id}"))
            .filter(|d| settled_parallelism(d) == Some(1))
    });
    let count = vertex(&details, "count").expect("a count vertex")["id"]
        .as_str()
        .expect("vertex id")
        .to_string();

    // A client certificate of another CA, and none at all.
    let stranger = TestCa::new(dir.path(), "stranger").issue("stranger-client", &["stranger"]);
    let fleet = dir.path().join("fleet.toml");
    std::fs::write(
        &fleet,
        format!(
            r#"[host]
interval = "5s"

{defaults}
[clusters.prod]
rest = "{url}"
ca-file = "{ca}"
cert-file = "{client}"
key-file = "{client_key}"

[clusters.nocert]
rest = "{url}"
ca-file = "{ca}"

[clusters.stranger]
rest = "{url}"
ca-file = "{ca}"
cert-file = "{stranger_cert}"
key-file = "{stranger_key}"

[[jobs]]
name = "mtls"
engine = "flink"
cluster = "prod"
job-id = "{id}"
[jobs.config]
"scaling.alignment.mode" = "BALANCED"

[[jobs]]
name = "nocert"
engine = "flink"
cluster = "nocert"
job-id = "{id}"

[[jobs]]
name = "stranger"
engine = "flink"
cluster = "stranger"
job-id = "{id}"
"#,
            defaults = fast_defaults(),
            url = cluster.url,
            ca = ssl.join("ca.pem").display(),
            client = ssl.join("client.pem").display(),
            client_key = ssl.join("client.key").display(),
            stranger_cert = stranger.0.display(),
            stranger_key = stranger.1.display(),
        ),
    )
    .expect("fleet");

    let mut rescaled_to = None;
    let out = run_flowscale(&fleet, |lines| {
        let asked = lines
            .iter()
            .filter(|(_, l)| l["type"] == "cycle" && l["data"]["job"] == "mtls")
            .filter_map(|(_, l)| l["data"]["operation"][&count].as_u64())
            .next_back();
        if let Some(asked) = asked
            && cluster
                .get(&format!("/jobs/{id}"))
                .as_ref()
                .and_then(settled_parallelism)
                .map(u64::from)
                == Some(asked)
        {
            rescaled_to = Some(asked);
        }
        rescaled_to.is_some()
    });
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let asked = rescaled_to.unwrap_or_else(|| {
        panic!(
            "the job was not rescaled over mutual TLS; stderr:\n{}",
            out.stderr
        )
    });
    assert!(asked > 1, "the overloaded vertex was scaled up to {asked}");

    let errors = |job: &str| -> Vec<String> {
        out.cycles(job)
            .flat_map(|(_, c)| c["events"].as_array().cloned().unwrap_or_default())
            .filter(|e| e["reason"] == "EngineError")
            .filter_map(|e| e["message"].as_str().map(str::to_string))
            .collect()
    };
    assert!(errors("mtls").is_empty(), "{:?}", errors("mtls"));
    for (job, cluster_name) in [("nocert", "nocert"), ("stranger", "stranger")] {
        let lines = errors(job);
        let line = lines
            .first()
            .unwrap_or_else(|| panic!("{job} was not refused; stderr:\n{}", out.stderr));
        eprintln!("{job}: {line}");
        assert!(
            line.contains(&format!("cluster `{cluster_name}` at {}", cluster.url)),
            "{line}"
        );
        assert!(
            line.contains("client certificate"),
            "says the client certificate is the cause: {line}"
        );
    }
}
