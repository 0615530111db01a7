//! Reading one secret or TLS file, with the checks every link needs.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why a secret or TLS file cannot be used. The message names the file and the cause, never
/// anything read from it.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// The file cannot be read (missing, a directory, no permission).
    #[error("{}: cannot read it: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// A private file (key, token, password) that others than its owner may read or write.
    #[error(
        "{path} is readable by group or others (mode {mode:03o}); run `chmod 600 {path}`",
        path = path.display()
    )]
    NotPrivate {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A token or password file that is not UTF-8 text, or holds nothing but whitespace.
    #[error("{}: {what}", path.display())]
    BadSecret {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        what: &'static str,
    },
    /// A certificate or key file that is not the PEM it should be.
    #[error("{}: {what}", path.display())]
    BadPem {
        /// The file.
        path: PathBuf,
        /// What was expected, and what was found.
        what: String,
    },
}

/// A secret read from a file (a token or a password). It prints as `Secret(***)` and has no
/// `Display`, so it cannot reach a log line, an event or an answer by accident: whoever needs
/// the text asks for it with [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `text` (read from a URL or the environment rather than a file).
    pub fn new(text: String) -> Secret {
        Secret(text)
    }

    /// The secret's text, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Refuses a file that its owner's group or anyone else may read or write (any of the `0o077`
/// bits), as ssh does for a private key and libpq for `sslkey` and `.pgpass`: a secret others
/// can read is not a secret. The mode is that of the file a symbolic link leads to.
pub fn check_private(path: &Path) -> Result<(), CredentialError> {
    let metadata = std::fs::metadata(path).map_err(|source| unreadable(path, source))?;
    let mode = permission_bits(&metadata);
    if mode & 0o077 != 0 {
        return Err(CredentialError::NotPrivate {
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

#[cfg(unix)]
fn permission_bits(metadata: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    metadata.permissions().mode() & 0o777
}

#[cfg(not(unix))]
fn permission_bits(_: &std::fs::Metadata) -> u32 {
    0o600
}

/// Reads a private file whole, after [`check_private`].
fn read_private(path: &Path) -> Result<Vec<u8>, CredentialError> {
    check_private(path)?;
    std::fs::read(path).map_err(|source| unreadable(path, source))
}

fn unreadable(path: &Path, source: io::Error) -> CredentialError {
    CredentialError::Unreadable {
        path: path.to_path_buf(),
        source,
    }
}

/// A token or password file: private, UTF-8, its surrounding whitespace (the usual trailing
/// line feed) trimmed, not empty.
pub fn read_secret(path: &Path) -> Result<Secret, CredentialError> {
    let bytes = read_private(path)?;
    let bad = |what| CredentialError::BadSecret {
        path: path.to_path_buf(),
        what,
    };
    let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8 text"))?;
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(bad("it is empty"));
    }
    Ok(Secret(trimmed.to_string()))
}

/// A PEM file of one or more certificates: a CA bundle, or a certificate followed by its
/// chain. Other PEM sections (a key in the same file) are skipped; no certificate at all is an
/// error.
pub fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, CredentialError> {
    let bytes = std::fs::read(path).map_err(|source| unreadable(path, source))?;
    let certificates = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| bad_pem(path, "certificates", &err))?;
    if certificates.is_empty() {
        return Err(CredentialError::BadPem {
            path: path.to_path_buf(),
            what: "no PEM certificate (-----BEGIN CERTIFICATE-----) in it".to_string(),
        });
    }
    Ok(certificates)
}

/// The first PEM private key (PKCS#8, PKCS#1 RSA or SEC1 EC) of a private file.
pub fn read_private_key(path: &Path) -> Result<PrivateKeyDer<'static>, CredentialError> {
    let bytes = read_private(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|err| match err {
        pem::Error::NoItemsFound => CredentialError::BadPem {
            path: path.to_path_buf(),
            what: "no PEM private key (-----BEGIN PRIVATE KEY-----, RSA PRIVATE KEY or EC PRIVATE KEY) in it".to_string(),
        },
        other => bad_pem(path, "a private key", &other),
    })
}

/// A PEM decoding error, described without the bytes it may quote.
fn bad_pem(path: &Path, wanted: &str, err: &pem::Error) -> CredentialError {
    let cause = match err {
        pem::Error::MissingSectionEnd { .. } => "a PEM section without its END line",
        pem::Error::IllegalSectionStart { .. } => "a malformed BEGIN line",
        pem::Error::Base64Decode(_) => "a PEM section that is not valid base64",
        pem::Error::Io(_) => "a read error",
        pem::Error::NoItemsFound => "nothing in PEM",
        _ => "text that is not PEM",
    };
    CredentialError::BadPem {
        path: path.to_path_buf(),
        what: format!("expected {wanted} in PEM, found {cause}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate and its key, made for the test.
    fn certified() -> (String, String) {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
            .expect("rcgen makes a certificate");
        (made.cert.pem(), made.signing_key.serialize_pem())
    }

    fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }

    #[test]
    fn a_private_file_readable_by_others_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        for mode in [0o644, 0o640, 0o604, 0o620, 0o602] {
            let path = write(dir.path(), "token", "s3cret-token\n", mode);
            let err = read_secret(&path).expect_err("not private");
            let text = err.to_string();
            assert!(
                text.contains(&format!("run `chmod 600 {}`", path.display())),
                "{text}"
            );
            assert!(text.contains(&format!("mode {mode:03o}")), "{text}");
            assert!(!text.contains("s3cret"), "{text}");
        }
        for mode in [0o600, 0o400] {
            let path = write(dir.path(), "token", "s3cret-token\n", mode);
            assert_eq!(
                read_secret(&path).expect("private").expose(),
                "s3cret-token"
            );
        }
    }

    #[test]
    fn a_secret_is_trimmed_never_printed_and_never_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write(dir.path(), "t", "  tok:en \r\n", 0o600);
        let secret = read_secret(&path).expect("a secret");
        assert_eq!(secret.expose(), "tok:en");
        assert_eq!(format!("{secret:?}"), "Secret(***)");
        let empty = write(dir.path(), "e", " \n\n", 0o600);
        assert!(
            read_secret(&empty)
                .expect_err("empty")
                .to_string()
                .ends_with("it is empty")
        );
        std::fs::write(&empty, [0xff, 0xfe, b'x']).expect("write");
        assert!(
            read_secret(&empty)
                .expect_err("binary")
                .to_string()
                .ends_with("not UTF-8 text")
        );
        let missing = dir.path().join("missing");
        let err = read_secret(&missing).expect_err("missing").to_string();
        assert!(
            err.starts_with(&format!("{}: cannot read it", missing.display())),
            "{err}"
        );
    }

    #[test]
    fn certificates_and_keys_are_read_from_pem_and_anything_else_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cert, key) = certified();
        let (other, _) = certified();
        let bundle = write(dir.path(), "ca.pem", &format!("{cert}{other}"), 0o644);
        assert_eq!(read_certificates(&bundle).expect("two").len(), 2);
        // A combined file: the certificate is found next to its key.
        let both = write(dir.path(), "both.pem", &format!("{key}{cert}"), 0o600);
        assert_eq!(read_certificates(&both).expect("one").len(), 1);
        assert!(matches!(
            read_private_key(&both).expect("the key"),
            PrivateKeyDer::Pkcs8(_)
        ));

        let key_only = write(dir.path(), "key.pem", &key, 0o600);
        let err = read_certificates(&key_only).expect_err("no certificate");
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
        let cert_only = write(dir.path(), "cert.pem", &cert, 0o600);
        let err = read_private_key(&cert_only)
            .expect_err("no key")
            .to_string();
        assert!(err.contains("no PEM private key"), "{err}");

        // A key whose base64 is damaged: the error quotes none of it.
        let body: Vec<&str> = key.lines().collect();
        let damaged = format!("{}\n!!!{}\n{}\n", body[0], body[1], body[body.len() - 1]);
        let broken = write(dir.path(), "broken.key", &damaged, 0o600);
        let err = read_private_key(&broken).expect_err("damaged").to_string();
        assert!(
            err.starts_with(&format!("{}: expected a private key", broken.display())),
            "{err}"
        );
        assert!(!err.contains(&body[1][..8]), "{err}");

        let key_open = write(dir.path(), "open.key", &key, 0o644);
        assert!(matches!(
            read_private_key(&key_open),
            Err(CredentialError::NotPrivate { mode: 0o644, .. })
        ));
    }
}
