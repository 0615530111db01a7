//! The Flink REST URL of a `flink` job, checked before any connection is tried so that a typo
//! is a configuration error with its line rather than a stream of connection failures.

/// Why a REST URL is not usable. Each message quotes the URL and says what would be valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RestUrlError {
    /// Any other scheme, or none.
    #[error("`{0}` is not an http:// or https:// URL (expected e.g. http://127.0.0.1:8081)")]
    NotHttp(String),
    /// `http://` with nothing after it, or only a port.
    #[error("`{0}` names no host (expected e.g. http://127.0.0.1:8081)")]
    NoHost(String),
    /// A port that is not a number in 1..=65535.
    #[error("`{url}`: port `{port}` is out of range (valid: 1 to 65535)")]
    Port {
        /// The whole URL.
        url: String,
        /// The port as written.
        port: String,
    },
}

/// Checks a Flink REST URL: `http[s]://HOST[:PORT][/PATH]`, the port in 1..=65535. An
/// `https://` URL is verified against the system's roots unless the job names a
/// `[clusters.<name>]` with its own `ca-file`.
pub(crate) fn check_rest_url(url: &str) -> Result<(), RestUrlError> {
    let lower = url.to_ascii_lowercase();
    let Some(rest) = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"))
    else {
        return Err(RestUrlError::NotHttp(url.to_string()));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    // An IPv6 literal keeps its colons inside brackets; the port follows the closing bracket.
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((host, tail)) => (host, tail.strip_prefix(':')),
            None => return Err(RestUrlError::NoHost(url.to_string())),
        },
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if host.is_empty() {
        return Err(RestUrlError::NoHost(url.to_string()));
    }
    if let Some(port) = port
        && !port.parse::<u32>().is_ok_and(|p| (1..=65_535).contains(&p))
    {
        return Err(RestUrlError::Port {
            url: url.to_string(),
            port: port.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_urls_with_a_host_and_a_port_in_range_only() {
        for ok in [
            "http://127.0.0.1:8081",
            "http://flink:1",
            "http://flink:65535/",
            "http://flink",
            "http://[::1]:8081/jobs",
            "https://flink:8443",
            "HTTPS://flink",
        ] {
            assert_eq!(check_rest_url(ok), Ok(()), "{ok}");
        }
        for not_http in ["flink:8081", "ftp://flink:21", "httpx://flink"] {
            assert!(
                matches!(check_rest_url(not_http), Err(RestUrlError::NotHttp(_))),
                "{not_http}"
            );
        }
        assert!(matches!(
            check_rest_url("https://:8443"),
            Err(RestUrlError::NoHost(_))
        ));
        assert!(matches!(
            check_rest_url("http://:8081"),
            Err(RestUrlError::NoHost(_))
        ));
        // 65535 is the highest TCP port (16 bits); 0 is not a port one can connect to.
        for port in ["99999", "65536", "0", "", "http"] {
            let url = format!("http://flink:{port}");
            let err = check_rest_url(&url).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("`{url}`: port `{port}` is out of range (valid: 1 to 65535)")
            );
        }
    }
}
