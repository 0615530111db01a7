//! A failed request to a cluster, and what it means, in words one can act on: rustls and ureq report
//! a bad certificate or a protocol mix-up as a chain of errors whose text ("invalid peer
//! certificate: UnknownIssuer", "received corrupt message of type InvalidContentType") says
//! little to whoever runs the host. Each cause gets one sentence and what to change; no
//! message quotes anything but the server's certificate names and the files' paths.

use rustls::{AlertDescription, CertificateError};

/// A failed attempt, before it is turned into an [`EngineError`].
#[derive(Debug)]
pub(super) enum Failure {
    /// Transport-level trouble (refused, reset, timed out): worth retrying.
    Transport(String),
    /// TLS or protocol trouble that the same request would meet again (an unknown CA, a
    /// certificate for another name, https to a plain port): not retried now; the job's next
    /// cycle tries again, after a rotation may have fixed it.
    Setup(String),
    /// The server answered with an error status.
    Status { code: u16, body: String },
}

impl Failure {
    pub(super) fn retryable(&self) -> bool {
        match self {
            Failure::Transport(_) => true,
            Failure::Setup(_) => false,
            Failure::Status { code, .. } => matches!(code, 502..=504),
        }
    }
}

/// The failure of a request that got no answer (`https`: the URL is `https://`); `prefix` goes
/// before the cause (what was being done).
pub(super) fn describe_transport(err: &ureq::Error, https: bool, prefix: &str) -> Failure {
    if let Some(tls) = rustls_error(err) {
        return Failure::Setup(format!("{prefix}{}", tls_cause(tls)));
    }
    match err {
        ureq::Error::Protocol(_) | ureq::Error::BadUri(_) if !https => Failure::Setup(format!(
            "{prefix}the answer is not HTTP ({err}); if the cluster's REST API has TLS \
             (security.ssl.rest.enabled), set `rest` to an https:// URL"
        )),
        ureq::Error::Io(io)
            if !https
                && matches!(
                    io.kind(),
                    std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::UnexpectedEof
                ) =>
        {
            // A TLS port closes the connection on a request that is not a TLS handshake; a
            // plain server that resets is retried like any reset.
            Failure::Transport(format!(
                "{prefix}the connection was closed without an answer ({err}); if the cluster's \
                 REST API has TLS (security.ssl.rest.enabled), set `rest` to an https:// URL"
            ))
        }
        ureq::Error::Io(io) if https && io.kind() == std::io::ErrorKind::UnexpectedEof => {
            Failure::Transport(format!(
                "{prefix}the connection was closed during the TLS handshake ({err}); is the \
                 address a plain http:// port?"
            ))
        }
        _ => Failure::Transport(format!("{prefix}{err}")),
    }
}

/// A redirect to an `https://` address: the answer of a TLS port to a plain request (Flink's
/// REST endpoint with `security.ssl.rest.enabled` answers so). Redirects are not followed.
pub(super) fn redirect_to_tls(response: &ureq::http::Response<ureq::Body>) -> Option<Failure> {
    if !response.status().is_redirection() {
        return None;
    }
    let location = response
        .headers()
        .get(ureq::http::header::LOCATION)?
        .to_str()
        .ok()?;
    let https = location
        .get(..8)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"));
    https.then(|| {
        Failure::Setup(format!(
            "the server redirects to {location}: its REST API has TLS \
             (security.ssl.rest.enabled); set `rest` to an https:// URL"
        ))
    })
}

/// The cause of a refusal that authentication explains (HTTP 401 and 403, from Flink behind
/// an authenticating proxy).
pub(super) fn status_cause(code: u16) -> Option<&'static str> {
    match code {
        401 => Some(
            "authentication refused: the token or user and password were not accepted (check \
             the cluster's `token-file` or `basic-auth-file`)",
        ),
        403 => Some(
            "access forbidden: the credentials were accepted but may not do this (check the \
             rights of the cluster's token or user)",
        ),
        _ => None,
    }
}

/// The rustls error at the root of `err`, when there is one (ureq reports it directly, or
/// inside the I/O error of the read that met it).
fn rustls_error(err: &ureq::Error) -> Option<&rustls::Error> {
    match err {
        ureq::Error::Rustls(tls) => Some(tls),
        ureq::Error::Io(io) => io.get_ref()?.downcast_ref::<rustls::Error>(),
        _ => None,
    }
}

/// One sentence for a TLS failure.
fn tls_cause(err: &rustls::Error) -> String {
    use rustls::Error as E;
    match err {
        E::InvalidCertificate(cert) => certificate_cause(cert),
        E::AlertReceived(AlertDescription::CertificateRequired) => {
            "the server asks for a client certificate and none is configured (set the \
             cluster's `cert-file` and `key-file`)"
                .to_string()
        }
        E::AlertReceived(
            alert @ (AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateUnknown
            | AlertDescription::HandshakeFailure
            | AlertDescription::DecryptError),
        ) => format!(
            "the server refused the handshake ({alert:?}): it asks for a client certificate \
             signed by a CA it trusts (check the cluster's `cert-file`, or set it and `key-file` \
             when there is none)"
        ),
        E::InvalidMessage(_) | E::InappropriateMessage { .. } => {
            "the address does not speak TLS (a plain http:// port?); set `rest` to an http:// URL or to the \
             cluster's TLS port"
                .to_string()
        }
        other => format!("TLS handshake failed: {other}"),
    }
}

fn certificate_cause(err: &CertificateError) -> String {
    use CertificateError as C;
    match err {
        C::UnknownIssuer => "the server's certificate is not signed by a trusted CA (set the \
                             cluster's `ca-file` to the CA that signs it)"
            .to_string(),
        C::NotValidForName => {
            "the server's certificate is not valid for this host name (connect by a name the \
             certificate lists)"
                .to_string()
        }
        C::NotValidForNameContext {
            expected,
            presented,
        } => {
            let expected = match expected {
                rustls::pki_types::ServerName::DnsName(name) => name.as_ref().to_string(),
                rustls::pki_types::ServerName::IpAddress(ip) => {
                    std::net::IpAddr::from(*ip).to_string()
                }
                other => format!("{other:?}"),
            };
            // rustls gives each name as `DnsName("...")` or `IpAddress(...)`: the name alone.
            let presented: Vec<&str> = presented
                .iter()
                .map(|name| {
                    name.split_once('(')
                        .and_then(|(_, rest)| rest.strip_suffix(')'))
                        .map_or(name.as_str(), |inner| inner.trim_matches('"'))
                })
                .collect();
            format!(
                "the server's certificate is not valid for `{expected}`; it lists {} (connect \
                 by one of those names)",
                presented.join(", ")
            )
        }
        C::Expired | C::ExpiredContext { .. } => {
            "the server's certificate has expired (renew it on the cluster)".to_string()
        }
        C::NotValidYet | C::NotValidYetContext { .. } => {
            "the server's certificate is not valid yet (check the clocks)".to_string()
        }
        C::Revoked => "the server's certificate is revoked".to_string(),
        other => format!("the server's certificate was refused: {other:?}"),
    }
}
