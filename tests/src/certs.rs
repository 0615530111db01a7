//! Test certificate authorities, made when a test runs: every key is fresh and lives in the
//! test's temporary directory, so nothing secret is ever committed.
//!
//! A [`TestCa`] writes its certificate as PEM, and issues leaves for DNS names or IP addresses,
//! usable by a server and by a client (mutual TLS), with the private key in a file only its
//! owner may read, as the host demands of key files.

use std::path::{Path, PathBuf};

use time::{Duration, OffsetDateTime};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A certificate authority of one test.
pub struct TestCa {
    dir: PathBuf,
    ca_pem: PathBuf,
    issuer: Issuer<'static, KeyPair>,
}

impl TestCa {
    /// A new CA named `name`; its certificate is written to `<dir>/<name>-ca.pem`.
    pub fn new(dir: &Path, name: &str) -> TestCa {
        let key = KeyPair::generate().expect("a CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{name} test CA"));
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let certificate = params.self_signed(&key).expect("a self-signed CA");
        let ca_pem = dir.join(format!("{name}-ca.pem"));
        std::fs::write(&ca_pem, certificate.pem()).expect("write the CA certificate");
        TestCa {
            dir: dir.to_path_buf(),
            ca_pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// The CA's certificate (PEM).
    pub fn ca_pem(&self) -> &Path {
        &self.ca_pem
    }

    /// A leaf for `sans` (DNS names or IP addresses), valid from yesterday for a year, for
    /// servers and clients: `<dir>/<name>.pem` and `<dir>/<name>.key` (mode 600).
    pub fn issue(&self, name: &str, sans: &[&str]) -> (PathBuf, PathBuf) {
        let now = OffsetDateTime::now_utc();
        self.issue_between(
            name,
            sans,
            now - Duration::days(1),
            now + Duration::days(365),
        )
    }

    /// The same, but expired yesterday.
    pub fn issue_expired(&self, name: &str, sans: &[&str]) -> (PathBuf, PathBuf) {
        let now = OffsetDateTime::now_utc();
        self.issue_between(
            name,
            sans,
            now - Duration::days(30),
            now - Duration::days(1),
        )
    }

    fn issue_between(
        &self,
        name: &str,
        sans: &[&str],
        not_before: OffsetDateTime,
        not_after: OffsetDateTime,
    ) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().expect("a leaf key");
        let names: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("leaf parameters");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.not_before = not_before;
        params.not_after = not_after;
        let certificate = params
            .signed_by(&key, &self.issuer)
            .expect("a leaf signed by the CA");
        let cert_path = self.dir.join(format!("{name}.pem"));
        let key_path = self.dir.join(format!("{name}.key"));
        std::fs::write(&cert_path, certificate.pem()).expect("write the certificate");
        write_private(&key_path, &key.serialize_pem());
        (cert_path, key_path)
    }
}

/// Writes `text` to `path`, readable by its owner only.
pub fn write_private(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("write a private file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod 600");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaf_and_its_key_are_readable_by_the_host_and_the_key_is_private() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = TestCa::new(dir.path(), "t");
        let (cert, key) = ca.issue("server", &["localhost", "127.0.0.1"]);
        assert_eq!(
            flowscale::credentials::read_certificates(ca.ca_pem())
                .expect("the CA")
                .len(),
            1
        );
        assert_eq!(
            flowscale::credentials::read_certificates(&cert)
                .expect("the leaf")
                .len(),
            1
        );
        flowscale::credentials::read_private_key(&key).expect("a private key");
        let (expired, _) = ca.issue_expired("old", &["localhost"]);
        assert_ne!(
            std::fs::read(&expired).expect("read"),
            std::fs::read(&cert).expect("read")
        );
    }
}
