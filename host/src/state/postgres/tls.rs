//! The TLS of the state link: a rustls client configuration for each `sslmode`, from the files
//! the URL names (read by `crate::credentials`, reloaded when they change).
//!
//! - `verify-full`: the server's chain ends at one of the root certificates and its leaf names
//!   the URL's host (rustls's own WebPKI verifier);
//! - `verify-ca` (and `require` or `prefer` given a root certificate, as libpq): the same chain
//!   check, but any name;
//! - `require` and `prefer` without a root certificate: the handshake's signatures are still
//!   checked against the server's certificate, whatever issued it.
//!
//! ring is the crypto provider, chosen here rather than process-wide so that the host's other
//! TLS users keep whatever they chose.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use super::conninfo::{SslMode, TlsFiles};
use crate::credentials::{self, CredentialError};

/// The certificates and key a link's TLS is made of, as read from its files.
#[derive(Debug)]
pub(crate) struct Material {
    /// The root certificates (`sslrootcert`); empty without one.
    roots: Vec<CertificateDer<'static>>,
    /// The client certificate chain and its key (`sslcert`, `sslkey`).
    client: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
}

impl Material {
    /// Reads `files`: the certificates, and the key from a private file (libpq refuses a key
    /// that group or others may read, and so does this).
    pub(crate) fn read(files: &TlsFiles) -> Result<Material, CredentialError> {
        let roots = match &files.root {
            Some(path) => credentials::read_certificates(path)?,
            None => Vec::new(),
        };
        let client = match &files.client {
            Some((cert, key)) => Some((
                credentials::read_certificates(cert)?,
                credentials::read_private_key(key)?,
            )),
            None => None,
        };
        Ok(Material { roots, client })
    }
}

/// The crypto provider of the state link.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The client configuration of `mode` from `material`. Fails on a root certificate rustls cannot
/// use, or a client key that does not fit its certificate.
pub(crate) fn client_config(mode: SslMode, material: &Material) -> Result<ClientConfig, String> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let verifier: Arc<dyn ServerCertVerifier> = if material.roots.is_empty() {
        // Only `require` and `prefer` come here (the verifying modes need a root).
        Arc::new(AnyCertificate {
            algorithms: provider.signature_verification_algorithms,
        })
    } else {
        let mut store = RootCertStore::empty();
        for cert in &material.roots {
            store
                .add(cert.clone())
                .map_err(|e| format!("a root certificate cannot be used: {e}"))?;
        }
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider)
            .build()
            .map_err(|e| e.to_string())?;
        if mode == SslMode::VerifyFull {
            webpki
        } else {
            Arc::new(AnyName(webpki))
        }
    };
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    match &material.client {
        Some((chain, key)) => builder
            .with_client_auth_cert(chain.clone(), key.clone_key())
            .map_err(|e| format!("the client certificate and key cannot be used: {e}")),
        None => Ok(builder.with_no_client_auth()),
    }
}

/// `verify-ca`: the chain is checked, the name is not (libpq's meaning).
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // WebPKI checks the name after the chain: a name error means the chain is good.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `require` without a root certificate: encryption only, any certificate (libpq's meaning);
/// the handshake is still signed by the certificate's key.
#[derive(Debug)]
struct AnyCertificate {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
