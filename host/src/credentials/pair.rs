//! A certificate and its private key, read from two files, checked to belong together: the
//! one check of every link that presents a certificate (the HTTPS server, a Flink cluster's
//! client certificate), so that a key of another renewal is named the same way wherever it is
//! set, before a handshake would fail on it (or ureq would panic on it).

use std::path::Path;

use rustls::sign::CertifiedKey;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::files::CredentialError;
use super::provider::crypto_provider;

/// Which file of a certificate and key pair a problem is in, to report it at the key that
/// names that file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairFile {
    /// The certificate (chain).
    Cert,
    /// The private key.
    Key,
}

/// `chain` (read from `cert_file`) and `key` (read from `key_file`) as one signing key,
/// checked to belong together; on error, which file is wrong and why, naming the files and
/// never their contents.
pub fn certified_key(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    cert_file: &Path,
    key_file: &Path,
) -> Result<CertifiedKey, (PairFile, CredentialError)> {
    let bad = |file: PairFile, path: &Path, what: String| {
        (
            file,
            CredentialError::BadPem {
                path: path.to_path_buf(),
                what,
            },
        )
    };
    CertifiedKey::from_der(chain, key, &crypto_provider()).map_err(|err| match err {
        rustls::Error::InconsistentKeys(_) => bad(
            PairFile::Key,
            key_file,
            format!(
                "this private key does not belong to the certificate of {} (a key and \
                 certificate of different renewals?)",
                cert_file.display()
            ),
        ),
        rustls::Error::General(_) => bad(
            PairFile::Key,
            key_file,
            "a private key of a kind TLS cannot sign with (RSA, ECDSA P-256/P-384 or Ed25519 \
             can)"
                .to_string(),
        ),
        other => bad(
            PairFile::Cert,
            cert_file,
            format!("the first certificate cannot be used: {other}"),
        ),
    })
}
