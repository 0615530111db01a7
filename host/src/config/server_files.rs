//! The files of the host's HTTP server: its certificate and private key (`[host] tls-cert-file`,
//! `tls-key-file`) and its bearer token (`[host] api-token-file`).
//!
//! They are read here, through [`crate::credentials`], both when the fleet file is checked (so
//! that `validate` and a reload report a bad file at its key, before the server would use it)
//! and by the server whenever they change on disk; one reading, so the two never disagree on
//! what is acceptable.

use std::path::{Path, PathBuf};

use rustls::sign::CertifiedKey;

use crate::credentials::{
    CredentialError, Secret, certified_key, read_certificates, read_private_key, read_secret,
};

/// The server's certificate chain and private key files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM: the server's certificate, then its chain.
    pub cert: PathBuf,
    /// PEM: the private key of the certificate (a private file).
    pub key: PathBuf,
}

/// Which of the two TLS files a problem is in (`tls-cert-file` or `tls-key-file`), to report it
/// at that key.
pub(crate) use crate::credentials::PairFile as TlsFile;

/// The certificate chain and signing key of `files`, checked to belong together; on error, which
/// file is wrong and why (naming the file, never its contents).
pub(crate) fn read_tls_files(files: &TlsFiles) -> Result<CertifiedKey, (TlsFile, CredentialError)> {
    let chain = read_certificates(&files.cert).map_err(|err| (TlsFile::Cert, err))?;
    let key = read_private_key(&files.key).map_err(|err| (TlsFile::Key, err))?;
    certified_key(chain, key, &files.cert, &files.key)
}

/// [`read_tls_files`] for a reload: the file is named in the error already.
pub(crate) fn load_tls_files(files: &TlsFiles) -> Result<CertifiedKey, CredentialError> {
    read_tls_files(files).map_err(|(_, err)| err)
}

/// The bearer token of `path`: a private file holding 16 to 256 visible ASCII characters (the
/// usual trailing line feed aside).
pub(crate) fn load_token_file(path: &Path) -> Result<Secret, CredentialError> {
    let secret = read_secret(path)?;
    if token_is_well_formed(secret.expose()) {
        Ok(secret)
    } else {
        Err(CredentialError::BadSecret {
            path: path.to_path_buf(),
            what: "the token must be 16 to 256 visible ASCII characters (no spaces)",
        })
    }
}

/// Whether a token can be sent in an HTTP header and is long enough not to be guessed.
pub(crate) fn token_is_well_formed(token: &str) -> bool {
    (16..=256).contains(&token.len()) && token.bytes().all(|b| b.is_ascii_graphic())
}
