//! Certificates renewed under a running, paced `flowscale run`: the Flink cluster's REST
//! endpoint (mutual TLS) renews its server certificate, flowscale's client certificate and key
//! are renewed, and so is the certificate of the host's own HTTPS API, all as a Kubernetes
//! secret volume renews them (the files are links through `..data`, swapped in one step); then
//! the same again onto a new CA, through a CA bundle that holds both for the changeover.
//!
//! Checked: the next connections use the new certificates on both sides (the server sees the
//! new client certificate, the client accepts the new server certificate), a fresh HTTPS
//! client of the API sees the new serial, each reload is a `CredentialsReloaded` event naming
//! the file and nothing of its contents, and no cycle fails.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use flowscale_tests::certs::TestCa;

use crate::fake_flink::{FakeFlink, JOB_ID};
use crate::reload::{Lines, cycle_of, signal, start_run, write};
use crate::serve::{free_port, wait_for};
use crate::tls_front::{FrontFiles, Handshake, TlsFront, first_certificate};

/// How long a renewal may take to be seen on a busy machine.
const PATIENCE: Duration = Duration::from_secs(30);

/// A directory of credential files laid out as Kubernetes mounts a secret: each file is a link
/// `name -> ..data/name`, `..data` a link to the current version's directory, and a renewal
/// swaps `..data` in one rename, so that a reader never sees a new certificate with an old key.
struct Volume {
    dir: PathBuf,
    versions: usize,
}

impl Volume {
    fn new(dir: PathBuf) -> Volume {
        std::fs::create_dir_all(&dir).expect("the volume");
        Volume { dir, versions: 0 }
    }

    /// Publishes a new version holding `files` (name, contents), readable by the owner only.
    fn publish(&mut self, files: &[(&str, Vec<u8>)]) {
        use std::os::unix::fs::PermissionsExt;
        self.versions += 1;
        let version = format!("..v{}", self.versions);
        std::fs::create_dir(self.dir.join(&version)).expect("a version");
        for (name, contents) in files {
            let path = self.dir.join(&version).join(name);
            std::fs::write(&path, contents).expect("write");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
            let link = self.dir.join(name);
            if !link.exists() {
                symlink(Path::new("..data").join(name), &link).expect("the file's link");
            }
        }
        let next = self.dir.join("..data_tmp");
        symlink(&version, &next).expect("the new ..data");
        std::fs::rename(&next, self.dir.join("..data")).expect("swap ..data");
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).expect("read")
}

/// The PEM files of `certs` one after the other: a CA bundle.
fn bundle(certs: &[&Path]) -> Vec<u8> {
    certs.iter().flat_map(|path| read(path)).collect()
}

/// The serial number of a certificate (DER): Certificate ::= SEQUENCE { tbsCertificate
/// SEQUENCE { [0] version OPTIONAL, serialNumber INTEGER, ... }, ... }.
fn serial(der: &[u8]) -> Vec<u8> {
    /// The tag, the contents and what follows of the DER element at the start of `der`.
    fn element(der: &[u8]) -> (u8, &[u8], &[u8]) {
        let tag = der[0];
        let (length, header) = match der[1] {
            short if short < 0x80 => (usize::from(short), 2),
            long => {
                let bytes = usize::from(long & 0x7f);
                let length = der[2..2 + bytes]
                    .iter()
                    .fold(0usize, |n, &b| (n << 8) | usize::from(b));
                (length, 2 + bytes)
            }
        };
        (tag, &der[header..header + length], &der[header + length..])
    }
    let (_, certificate, _) = element(der);
    let (_, tbs, _) = element(certificate);
    let (tag, first, rest) = element(tbs);
    let (tag, serial, _) = if tag == 0xa0 {
        element(rest)
    } else {
        (tag, first, rest)
    };
    assert_eq!(tag, 0x02, "an INTEGER serial");
    serial.to_vec()
}

/// The certificate a fresh TLS client trusting `ca` is shown by the server at `port`.
fn served_certificate(port: u16, ca: &Path) -> Option<Vec<u8>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in flowscale::credentials::read_certificates(ca).ok()? {
        roots.add(cert).ok()?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .ok()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name =
        rustls::pki_types::ServerName::IpAddress(std::net::IpAddr::from([127, 0, 0, 1]).into());
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).ok()?;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    while conn.is_handshaking() {
        conn.complete_io(&mut stream).ok()?;
    }
    Some(conn.peer_certificates()?.first()?.to_vec())
}

/// A certificate and its key (PEM).
type Pair = (Vec<u8>, Vec<u8>);

/// The files of the cluster's REST endpoint: its certificate and key, and the CAs it trusts
/// for client certificates.
fn front_files(server: &Pair, client_ca: Vec<u8>) -> [(&'static str, Vec<u8>); 3] {
    [
        ("tls.crt", server.0.clone()),
        ("tls.key", server.1.clone()),
        ("client-ca.pem", client_ca),
    ]
}

/// flowscale's files: the cluster's CA bundle, its client certificate, the API's certificate.
fn host_files(ca: Vec<u8>, client: &Pair, api: &Pair) -> [(&'static str, Vec<u8>); 5] {
    [
        ("ca.pem", ca),
        ("client.pem", client.0.clone()),
        ("client.key", client.1.clone()),
        ("api.pem", api.0.clone()),
        ("api.key", api.1.clone()),
    ]
}

/// The events of every line of the host's output (those of its cycles, and its own).
fn events(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .flat_map(|line| match line["type"].as_str() {
            Some("cycle") => line["data"]["events"]
                .as_array()
                .map(|e| e.iter().collect())
                .unwrap_or_default(),
            Some("event") => vec![&line["data"]["event"]],
            _ => Vec::new(),
        })
        .collect()
}

/// Waits until `front` completed a handshake with `expected`; from then on, every handshake
/// must be with it: the next connections use the renewed certificates.
fn wait_for_handshake(front: &TlsFront, expected: &Handshake, what: &str) -> usize {
    let at = wait_for(what, PATIENCE, || {
        front.handshakes().iter().position(|h| h == expected)
    });
    // A few more cycles, each a connection.
    let seen = wait_for("more handshakes", PATIENCE, || {
        let all = front.handshakes();
        (all.len() >= at + 4).then_some(all)
    });
    assert!(
        seen[at..].iter().all(|h| h == expected),
        "{what}: a later connection used other certificates"
    );
    at
}

#[test]
fn server_client_and_api_certificates_renewed_mid_run_are_used_from_the_next_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("issued");
    std::fs::create_dir(&certs).expect("issued");
    let ca = TestCa::new(&certs, "cluster");
    let issue = |ca: &TestCa, name: &str| {
        let (cert, key) = ca.issue(name, &["127.0.0.1", "localhost"]);
        (read(&cert), read(&key))
    };

    // The cluster's REST endpoint: its files in a volume of its own.
    let mut front_volume = Volume::new(dir.path().join("front"));
    let server_1 = issue(&ca, "server-1");
    front_volume.publish(&front_files(&server_1, read(ca.ca_pem())));
    let fake = FakeFlink::start();
    let backend = fake
        .url()
        .trim_start_matches("http://")
        .parse()
        .expect("the fake's address");
    let front = TlsFront::start(
        backend,
        FrontFiles {
            cert: front_volume.path("tls.crt"),
            key: front_volume.path("tls.key"),
            client_ca: front_volume.path("client-ca.pem"),
        },
    );

    // flowscale's files: the cluster's CA, its client certificate, and the API's certificate.
    let mut volume = Volume::new(dir.path().join("tls"));
    let client_1 = issue(&ca, "client-1");
    let api_1 = issue(&ca, "api-1");
    volume.publish(&host_files(read(ca.ca_pem()), &client_1, &api_1));
    let job = crate::harness::repo_root().join("examples/jobs/diurnal.toml");
    std::fs::copy(job, dir.path().join("job.toml")).expect("the simulated job");
    let port = free_port();
    let fleet = dir.path().join("fleet.toml");
    write(
        &fleet,
        &format!(
            "[host]\ninterval = \"300ms\"\nlisten = \"127.0.0.1:{port}\"\n\
             tls-cert-file = \"tls/api.pem\"\ntls-key-file = \"tls/api.key\"\n\n\
             [defaults]\n\"metrics.window\" = \"1s\"\n\"stabilization.interval\" = \"0\"\n\
             \"scaling.enabled\" = \"false\"\n\n\
             [clusters.prod]\nrest = \"{rest}\"\nca-file = \"tls/ca.pem\"\n\
             cert-file = \"tls/client.pem\"\nkey-file = \"tls/client.key\"\n\n\
             [[jobs]]\nname = \"flink\"\nengine = \"flink\"\ncluster = \"prod\"\n\
             job-id = \"{JOB_ID}\"\n\n\
             [[jobs]]\nname = \"sim\"\njob = \"job.toml\"\n",
            rest = front.url()
        ),
    );
    let mut host = start_run(&[fleet.as_os_str(), "--pace".as_ref(), "60".as_ref()]);
    let mut lines = Lines::of(&mut host);
    let der = |pem: &[u8]| {
        let path = dir.path().join("scratch.pem");
        std::fs::write(&path, pem).expect("write");
        first_certificate(&path)
    };

    // As issued: both sides, and the API.
    let first = Handshake {
        server: der(&server_1.0),
        client: der(&client_1.0),
    };
    wait_for_handshake(&front, &first, "the first handshake");
    lines.wait_for("a decision on the cluster's job", |l| {
        cycle_of(l, "flink")
            && l["data"]["vertices"]
                .as_array()
                .is_some_and(|v| !v.is_empty())
    });
    lines.wait_for("a cycle of the paced simulated job", |l| cycle_of(l, "sim"));
    let api_seen = wait_for("the API", PATIENCE, || {
        served_certificate(port, ca.ca_pem())
    });
    assert_eq!(serial(&api_seen), serial(&der(&api_1.0)));

    // Renewed, same CA, new serials: the server's, then flowscale's (client and API).
    let server_2 = issue(&ca, "server-2");
    let client_2 = issue(&ca, "client-2");
    let api_2 = issue(&ca, "api-2");
    for (old, new) in [
        (&server_1.0, &server_2.0),
        (&client_1.0, &client_2.0),
        (&api_1.0, &api_2.0),
    ] {
        assert_ne!(
            serial(&der(old)),
            serial(&der(new)),
            "a renewal has a new serial"
        );
    }
    front_volume.publish(&front_files(&server_2, read(ca.ca_pem())));
    volume.publish(&host_files(read(ca.ca_pem()), &client_2, &api_2));
    let renewed = Handshake {
        server: der(&server_2.0),
        client: der(&client_2.0),
    };
    wait_for_handshake(
        &front,
        &renewed,
        "a handshake with the renewed certificates",
    );
    let api_serial = serial(&der(&api_2.0));
    wait_for("the API's renewed certificate", PATIENCE, || {
        served_certificate(port, ca.ca_pem()).filter(|seen| serial(seen) == api_serial)
    });

    // A new CA: first trusted beside the old one on both sides, then the certificates it signs.
    let ca_2 = TestCa::new(&certs, "cluster-2");
    let both = bundle(&[ca.ca_pem(), ca_2.ca_pem()]);
    front_volume.publish(&front_files(&server_2, both.clone()));
    volume.publish(&host_files(both.clone(), &client_2, &api_2));
    let ca_file = volume.path("ca.pem").display().to_string();
    lines.wait_for("the CA bundle's reload", |l| {
        events(std::slice::from_ref(l)).iter().any(|e| {
            e["reason"] == "CredentialsReloaded"
                && e["message"].as_str().is_some_and(|m| m.contains(&ca_file))
        })
    });
    let server_3 = issue(&ca_2, "server-3");
    let client_3 = issue(&ca_2, "client-3");
    let api_3 = issue(&ca_2, "api-3");
    front_volume.publish(&front_files(&server_3, both.clone()));
    volume.publish(&host_files(both, &client_3, &api_3));
    let new_ca = Handshake {
        server: der(&server_3.0),
        client: der(&client_3.0),
    };
    wait_for_handshake(
        &front,
        &new_ca,
        "a handshake with the new CA's certificates",
    );
    let api_serial = serial(&der(&api_3.0));
    wait_for("the API's certificate of the new CA", PATIENCE, || {
        served_certificate(port, ca_2.ca_pem()).filter(|seen| serial(seen) == api_serial)
    });
    lines.wait_for("a decision after the changeover", |l| {
        cycle_of(l, "flink")
            && l["data"]["vertices"]
                .as_array()
                .is_some_and(|v| !v.is_empty())
    });

    signal(host.id(), "INT");
    let status = host.wait().expect("the host ends");
    while let Ok(line) = lines.rx.recv_timeout(Duration::from_secs(5)) {
        lines.seen.push(line);
    }
    // Interrupted: the paced simulated job was stopped before the end of its simulated time.
    assert_eq!(status.code(), Some(130), "{status:?}");

    let all = events(&lines.seen);
    let reloaded: Vec<&str> = all
        .iter()
        .filter(|e| e["reason"] == "CredentialsReloaded")
        .filter_map(|e| e["message"].as_str())
        .collect();
    for file in ["client.pem", "client.key", "ca.pem", "api.pem", "api.key"] {
        let path = volume.path(file).display().to_string();
        assert!(
            reloaded.iter().any(|m| m.contains(&path)),
            "no CredentialsReloaded names {path}: {reloaded:#?}"
        );
    }
    // Nothing of any file's contents: no PEM armour, no line of a key or certificate.
    let secrets: Vec<String> = [&client_3.1, &api_3.1, &client_3.0, &api_3.0]
        .iter()
        .flat_map(|pem| {
            String::from_utf8_lossy(pem)
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|line| !line.starts_with("-----"))
        .collect();
    for message in &reloaded {
        assert!(!message.contains("-----BEGIN"), "{message}");
        assert!(
            !secrets.iter().any(|line| message.contains(line.as_str())),
            "{message}"
        );
    }
    let failures: Vec<&&Value> = all
        .iter()
        .filter(|e| e["reason"] == "EngineError" || e["reason"] == "CredentialsRefused")
        .collect();
    assert!(
        failures.is_empty(),
        "no cycle fails, no file is refused: {failures:#?}"
    );
}
