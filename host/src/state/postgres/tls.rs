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
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use super::conninfo::{SslMode, TlsFiles};
use crate::credentials::{self, CredentialError, crypto_provider};

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

/// The client configuration of `mode` from `material`. Fails on a root certificate rustls cannot
/// use, or a client key that does not fit its certificate.
pub(crate) fn client_config(mode: SslMode, material: &Material) -> Result<ClientConfig, String> {
    let provider = crypto_provider();
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

#[cfg(test)]
mod tests {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    use rustls::pki_types::PrivatePkcs8KeyDer;
    use rustls::{ClientConnection, ServerConfig, ServerConnection};

    use super::*;

    /// A CA made in memory.
    struct Ca {
        cert: CertificateDer<'static>,
        issuer: Issuer<'static, KeyPair>,
    }

    impl Ca {
        /// A CA named `name` (two CAs of one name would be told apart by signature only).
        fn new(name: &str) -> Ca {
            let key = KeyPair::generate().expect("a key");
            let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
            params.distinguished_name.push(DnType::CommonName, name);
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            let cert = params.self_signed(&key).expect("a CA").der().clone();
            Ca {
                cert,
                issuer: Issuer::new(params, key),
            }
        }

        /// A server configuration with a leaf for `names`, valid now or expired.
        fn server(&self, names: &[&str], expired: bool) -> Arc<ServerConfig> {
            let key = KeyPair::generate().expect("a key");
            let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            let mut params = CertificateParams::new(names).expect("params");
            if expired {
                params.not_before = rcgen::date_time_ymd(2020, 1, 1);
                params.not_after = rcgen::date_time_ymd(2021, 1, 1);
            }
            let leaf = params.signed_by(&key, &self.issuer).expect("a leaf");
            let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
            let config = ServerConfig::builder_with_provider(crypto_provider())
                .with_safe_default_protocol_versions()
                .expect("versions")
                .with_no_client_auth()
                .with_single_cert(vec![leaf.der().clone()], key)
                .expect("a server config");
            Arc::new(config)
        }
    }

    /// A handshake in memory between `mode` with `roots` and `server`, the client dialing
    /// `name`: the client's verdict.
    fn handshake(
        mode: SslMode,
        roots: &[&Ca],
        server: Arc<ServerConfig>,
        name: &str,
    ) -> Result<(), rustls::Error> {
        let material = Material {
            roots: roots.iter().map(|ca| ca.cert.clone()).collect(),
            client: None,
        };
        let config = client_config(mode, &material).expect("a client config");
        let name = ServerName::try_from(name.to_string()).expect("a name");
        let mut client = ClientConnection::new(Arc::new(config), name).expect("a client");
        let mut server = ServerConnection::new(server).expect("a server");
        for _ in 0..10 {
            let mut bytes = Vec::new();
            client.write_tls(&mut bytes).expect("client bytes");
            server.read_tls(&mut &bytes[..]).expect("to the server");
            // The server's own complaint comes after the client's, which is what is asserted.
            let _ = server.process_new_packets();
            let mut bytes = Vec::new();
            server.write_tls(&mut bytes).expect("server bytes");
            client.read_tls(&mut &bytes[..]).expect("to the client");
            client.process_new_packets()?;
            if !client.is_handshaking() {
                return Ok(());
            }
        }
        panic!("the handshake did not end");
    }

    fn certificate_error(result: Result<(), rustls::Error>) -> CertificateError {
        match result {
            Err(rustls::Error::InvalidCertificate(err)) => err,
            other => panic!("a certificate error, got {other:?}"),
        }
    }

    #[test]
    fn verify_full_checks_the_chain_and_the_name() {
        let (ca, other) = (Ca::new("ca"), Ca::new("other"));
        let server = ca.server(&["db.example"], false);
        handshake(SslMode::VerifyFull, &[&ca], server.clone(), "db.example").expect("verified");
        let err = certificate_error(handshake(
            SslMode::VerifyFull,
            &[&ca],
            server.clone(),
            "other.example",
        ));
        assert!(
            matches!(
                err,
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }
            ),
            "{err:?}"
        );
        let err = certificate_error(handshake(
            SslMode::VerifyFull,
            &[&other],
            server,
            "db.example",
        ));
        assert_eq!(err, CertificateError::UnknownIssuer);
    }

    #[test]
    fn verify_ca_and_require_with_a_root_check_the_chain_but_not_the_name() {
        let (ca, other) = (Ca::new("ca"), Ca::new("other"));
        let server = ca.server(&["db.example"], false);
        for mode in [SslMode::VerifyCa, SslMode::Require, SslMode::Prefer] {
            handshake(mode, &[&ca], server.clone(), "other.example")
                .unwrap_or_else(|e| panic!("{mode:?}: any name: {e}"));
            let err = certificate_error(handshake(mode, &[&other], server.clone(), "db.example"));
            assert_eq!(err, CertificateError::UnknownIssuer, "{mode:?}");
        }
        // Only the name is let pass: an expired certificate is refused all the same.
        let expired = ca.server(&["db.example"], true);
        let err = certificate_error(handshake(SslMode::VerifyCa, &[&ca], expired, "db.example"));
        assert!(
            matches!(
                err,
                CertificateError::Expired | CertificateError::ExpiredContext { .. }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn require_without_a_root_takes_any_certificate() {
        let server = Ca::new("any").server(&["db.example"], true);
        handshake(SslMode::Require, &[], server.clone(), "other.example").expect("encrypted");
        handshake(SslMode::Prefer, &[], server, "other.example").expect("encrypted");
    }
}
