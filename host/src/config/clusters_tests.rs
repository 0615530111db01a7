//! Tests of `[clusters.<name>]` tables and of jobs that name them, through the fleet parser.

use std::path::Path;

use super::errors::ConfigErrors;
use super::fleet::{EngineSpec, FleetConfig, parse_fleet};

fn parse(text: &str) -> Result<FleetConfig, ConfigErrors> {
    parse_fleet(Path::new("/etc/flowscale/fleet.toml"), text)
}

fn errors(text: &str) -> Vec<String> {
    parse(text)
        .expect_err("refused")
        .0
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn a_job_names_a_cluster_defined_once_and_gets_its_address_and_settings() {
    let fleet = parse(
        r#"
[[jobs]]
name = "orders"
engine = "flink"
cluster = "prod"
job-id = "abc"

[clusters.prod]
rest = "https://flink.prod:8443"
max-requests = 8

[clusters.lab]
rest = "http://flink.lab:8081"
"#,
    )
    .expect("valid");
    let EngineSpec::Flink {
        rest,
        cluster: Some(cluster),
        job_id,
    } = &fleet.job("orders").expect("orders").engine
    else {
        panic!("a flink job on a named cluster");
    };
    assert_eq!(rest, "https://flink.prod:8443", "the cluster's address");
    assert_eq!(cluster.name, "prod");
    assert_eq!(cluster.max_requests, Some(8));
    assert_eq!(cluster.ca_file, None, "the system's roots");
    assert_eq!(job_id.as_deref(), Some("abc"));
    assert!(fleet.warnings.is_empty(), "{:?}", fleet.warnings);
}

#[test]
fn credential_files_are_resolved_from_the_fleet_files_directory_and_read_before_running() {
    // None of the files exists: each is reported at its own line, by its resolved path.
    let all = errors(
        r#"
[clusters.prod]
rest = "https://flink:8443"
ca-file = "tls/ca.pem"
cert-file = "tls/client.pem"
key-file = "/abs/client.key"
basic-auth-file = "secrets/basic"

[[jobs]]
name = "a"
engine = "flink"
cluster = "prod"
"#,
    );
    let file = "/etc/flowscale/fleet.toml";
    for (line, key, path) in [
        (4, "ca-file", "/etc/flowscale/tls/ca.pem"),
        (5, "cert-file", "/etc/flowscale/tls/client.pem"),
        (6, "key-file", "/abs/client.key"),
        (7, "basic-auth-file", "/etc/flowscale/secrets/basic"),
    ] {
        let at = format!("{file}:{line}: clusters.prod.{key}: {path}");
        assert!(all.iter().any(|e| e.starts_with(&at)), "{at}\n{all:#?}");
    }
    assert_eq!(all.len(), 4, "{all:#?}");
}

#[test]
fn a_key_others_can_read_and_a_key_of_another_certificate_are_refused() {
    use super::test_certs::write;
    use flowscale_tests::certs::TestCa as Ca;
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new(dir.path(), "c");
    let (cert, _) = ca.issue("client", &["client"]);
    let (_, other_key) = ca.issue("other", &["other"]);
    let (good_cert, open_key) = ca.issue("open", &["open"]);
    let text = std::fs::read_to_string(&open_key).expect("key");
    write(&open_key, &text, 0o640);
    let fleet = dir.path().join("fleet.toml");
    let toml = format!(
        "[clusters.prod]\nrest = \"https://flink:8443\"\ncert-file = \"{}\"\nkey-file = \"{}\"\n\n\
         [clusters.lab]\nrest = \"https://lab:8443\"\ncert-file = \"{}\"\nkey-file = \"{}\"\n",
        cert.display(),
        other_key.display(),
        good_cert.display(),
        open_key.display(),
    );
    let all: Vec<String> = parse_fleet(&fleet, &toml)
        .expect_err("refused")
        .0
        .iter()
        .map(ToString::to_string)
        .collect();
    let at =
        |line: usize, name: &str| format!("{}:{line}: clusters.{name}.key-file:", fleet.display());
    assert!(
        all.iter()
            .any(|e| e.starts_with(&at(4, "prod"))
                && e.contains("does not belong to the certificate")),
        "{all:#?}"
    );
    assert!(
        all.iter()
            .any(|e| e.starts_with(&at(9, "lab")) && e.contains("chmod 600")),
        "{all:#?}"
    );
    assert_eq!(all.len(), 2, "{all:#?}");
}

#[test]
fn cluster_mistakes_are_located_and_say_what_would_be_valid() {
    let all = errors(
        r#"[clusters.prod]
rest = "https://flink:8443"
ca-fle = "ca.pem"
cert-file = "c.pem"
token-file = "t"
basic-auth-file = "b"
max-requests = 0

[clusters.plain]
rest = "http://flink:8081"
ca-file = "ca.pem"

[clusters.norest]
max-requests = 2

[[jobs]]
name = "typo"
engine = "flink"
cluster = "prd"

[[jobs]]
name = "both"
engine = "flink"
cluster = "plain"
rest = "http://flink:8081"

[[jobs]]
name = "replayed"
engine = "replay"
trace = "x.jsonl"
cluster = "prod"
"#,
    );
    let file = "/etc/flowscale/fleet.toml";
    let expected = [
        format!(
            "{file}:3: clusters.prod.ca-fle: unknown key (did you mean `ca-file`? known: rest, \
             ca-file, cert-file, key-file, token-file, basic-auth-file, max-requests, slots)"
        ),
        format!("{file}:7: clusters.prod.max-requests: expected a whole number from 1 to 256"),
        format!(
            "{file}:4: clusters.prod.cert-file: `cert-file` needs `key-file` too (the client \
             certificate's private key)"
        ),
        format!(
            "{file}:6: clusters.prod.basic-auth-file: `token-file` and `basic-auth-file` cannot \
             both be set: a request carries one `Authorization` header"
        ),
        format!("{file}:11: clusters.plain.ca-file: /etc/flowscale/ca.pem: "),
        format!(
            "{file}:10: clusters.plain.rest: `http://flink:8081` is plain http, yet the cluster \
             has `ca-file` or `cert-file`: use an https:// URL"
        ),
        format!(
            "{file}:13: clusters.norest: cluster `norest` needs `rest` (a Flink cluster, e.g. \
             rest = \"https://flink:8081\") or `slots` (a simulated cluster, e.g. slots = 64)"
        ),
        // `prod` has errors of its own, yet is what the typo meant.
        format!(
            "{file}:19: jobs[0].cluster: unknown cluster `prd` (did you mean `prod`? defined: \
             norest, plain, prod)"
        ),
        format!(
            "{file}:24: jobs[1].cluster: `cluster` and `rest` cannot both be set: the cluster \
             names its REST URL (remove `rest`, or `cluster` to reach the address without TLS \
             settings)"
        ),
        format!(
            "{file}:31: jobs[2].cluster: only flink and sim jobs run on a cluster (this job's \
             engine is `replay`)"
        ),
    ];
    for line in &expected {
        // The file's error ends with the system's words for it.
        assert!(
            all.iter()
                .any(|e| e == line || (line.ends_with(": ") && e.starts_with(line))),
            "missing: {line}\nall: {all:#?}"
        );
    }
    assert_eq!(all.len(), expected.len(), "{all:#?}");
}

#[test]
fn an_unknown_cluster_name_suggests_the_closest_defined_one() {
    let all = errors(
        r#"[clusters.production]
rest = "https://flink:8443"
[clusters.staging]
rest = "https://flink-staging:8443"

[[jobs]]
name = "a"
engine = "flink"
cluster = "prodution"
"#,
    );
    assert_eq!(
        all,
        [
            "/etc/flowscale/fleet.toml:9: jobs[0].cluster: unknown cluster `prodution` (did you \
          mean `production`? defined: production, staging)"
        ]
    );
    let all = errors("[[jobs]]\nname = \"a\"\nengine = \"flink\"\ncluster = \"prod\"\n");
    assert_eq!(
        all,
        [
            "/etc/flowscale/fleet.toml:4: jobs[0].cluster: unknown cluster `prod`: the file \
          defines no `[clusters.<name>]` table"
        ]
    );
}

#[test]
fn a_job_with_its_own_rest_still_works_and_may_be_https() {
    let fleet =
        parse("[[jobs]]\nname = \"a\"\nengine = \"flink\"\nrest = \"https://flink:8443\"\n")
            .expect("valid");
    assert_eq!(
        fleet.jobs[0].engine,
        EngineSpec::Flink {
            rest: "https://flink:8443".to_string(),
            cluster: None,
            job_id: None,
        }
    );
}

#[test]
fn a_simulated_cluster_has_slots_and_its_sim_jobs_share_them() {
    let fleet = parse(
        r#"
[clusters.shared]
slots = 64

[[jobs]]
name = "orders"
job = "jobs/orders.toml"
cluster = "shared"

[[jobs]]
name = "alone"
job = "jobs/orders.toml"
"#,
    )
    .expect("valid");
    let EngineSpec::Sim {
        cluster: Some(cluster),
        ..
    } = &fleet.job("orders").expect("orders").engine
    else {
        panic!("a sim job on a simulated cluster");
    };
    assert_eq!((cluster.name.as_str(), cluster.slots), ("shared", 64));
    assert!(matches!(
        fleet.job("alone").expect("alone").engine,
        EngineSpec::Sim { cluster: None, .. }
    ));
}

#[test]
fn simulated_and_flink_clusters_are_not_mixed_up() {
    let all = errors(
        r#"[clusters.prod]
rest = "https://flink:8443"
slots = 8

[clusters.lab]
rest = "http://flink:8081"

[clusters.sim]
slots = 16
token-file = "t"

[clusters.tiny]
slots = 0

[clusters.small]
slots = 4

[[jobs]]
name = "sim-on-flink"
job = "x.toml"
cluster = "lab"

[[jobs]]
name = "sim-nowhere"
job = "x.toml"
cluster = "smal"

[[jobs]]
name = "flink-on-sim"
engine = "flink"
cluster = "small"
"#,
    );
    let file = "/etc/flowscale/fleet.toml";
    let expected = [
        format!(
            "{file}:3: clusters.prod.slots: `slots` is for a simulated cluster (without `rest`); \
             `prod` is a Flink cluster, whose slots are its TaskManagers'"
        ),
        format!(
            "{file}:10: clusters.sim.token-file: `token-file` is a Flink cluster's key, and `sim` \
             is a simulated cluster (`slots`, no `rest`)"
        ),
        format!("{file}:13: clusters.tiny.slots: expected a whole number from 1 to 100000"),
        format!(
            "{file}:21: jobs[0].cluster: cluster `lab` is a Flink cluster (it has `rest`): a sim \
             job runs on a simulated cluster, one with `slots` and no `rest`"
        ),
        format!(
            "{file}:26: jobs[1].cluster: unknown cluster `smal` (did you mean `small`? defined: \
             lab, prod, sim, small, tiny)"
        ),
        format!(
            "{file}:31: jobs[2].cluster: cluster `small` is a simulated cluster (`slots`, no \
             `rest`): a flink job needs a cluster with `rest`"
        ),
    ];
    for line in &expected {
        assert!(all.contains(line), "missing: {line}\nall: {all:#?}");
    }
    assert_eq!(all.len(), expected.len(), "{all:#?}");
}
