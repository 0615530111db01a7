//! What a request must show before a handler runs, so that a web page open in the operator's
//! browser cannot use the server (the token is `auth`'s):
//!
//! * without `[host] api-token`, its `Host` must be a loopback name or address (`localhost`, a
//!   name under `.localhost`, `127.0.0.0/8`, `[::1]`; any port), else 421. A page of another
//!   site whose name is made to resolve to 127.0.0.1 (DNS rebinding) sends its own name, and
//!   would otherwise read every answer as if it were of its own origin;
//! * a request that changes or computes something (any method but GET, HEAD, OPTIONS and
//!   TRACE) must say `Content-Type: application/json`, else 415. A browser sends a
//!   cross-origin request with that type only after a preflight this server never approves,
//!   while a form or a `text/plain` fetch goes out without one.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::answer::error;
use super::shared::AppState;

/// Whether `host` (a `Host` header's value, or a request target's authority) names this
/// machine's loopback: `localhost` or a name under `.localhost` (RFC 6761: they never leave the
/// machine), an IPv4 address of `127.0.0.0/8`, `[::1]` (or `[::ffff:127.x.y.z]`), with or
/// without a port.
pub(super) fn loopback_host(host: &str) -> bool {
    let host = host.trim();
    let is_port = |port: &str| port.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = host.strip_prefix('[') {
        let Some((address, after)) = rest.split_once(']') else {
            return false;
        };
        let port_ok = after.is_empty() || after.strip_prefix(':').is_some_and(is_port);
        return port_ok
            && address
                .parse::<Ipv6Addr>()
                .is_ok_and(|a| IpAddr::V6(a).to_canonical().is_loopback());
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if is_port(port) => name,
        Some(_) => return false,
        None => host,
    };
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<Ipv4Addr>().is_ok_and(|a| a.is_loopback())
}

/// The middleware: without a token, passes on a request whose `Host` (and target authority, if
/// it has one) is a loopback name or address; 421 otherwise.
pub(super) async fn require_loopback_host(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    if state.token.get().is_some() {
        return next.run(request).await;
    }
    let header = request
        .headers()
        .get(header::HOST)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let authority = request.uri().authority().map(|a| a.as_str().to_string());
    let names: Vec<&String> = header.iter().chain(authority.iter()).collect();
    if !names.is_empty() && names.iter().all(|n| loopback_host(n)) {
        return next.run(request).await;
    }
    let given = names
        .first()
        .map_or_else(|| "no Host header".to_string(), |n| format!("Host `{n}`"));
    error(
        StatusCode::MISDIRECTED_REQUEST,
        format!(
            "this server answers only requests for a loopback name or address (Host: \
             localhost, 127.0.0.1 or [::1], with any port), not {given}: set [host] api-token-file \
             to serve it under other names"
        ),
    )
}

/// `Accept-Post` (RFC 9110's companion of 415): what a POST must send.
const ACCEPT_POST: HeaderName = HeaderName::from_static("accept-post");

/// Whether `content_type` (the header's value) is JSON: `application/json`, parameters such as
/// `charset=utf-8` allowed.
pub(super) fn is_json(content_type: Option<&[u8]>) -> bool {
    content_type
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// The middleware: passes on a request of a safe method, or one whose body says it is JSON;
/// 415 otherwise.
pub(super) async fn require_json(request: Request, next: Next) -> Response {
    let content_type = request.headers().get(header::CONTENT_TYPE);
    if request.method().is_safe() || is_json(content_type.map(|v| v.as_bytes())) {
        return next.run(request).await;
    }
    let given = content_type.map_or_else(
        || "none".to_string(),
        |v| format!("`{}`", String::from_utf8_lossy(v.as_bytes())),
    );
    let mut answer = error(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        format!(
            "a {} request needs `Content-Type: application/json` (given: {given})",
            request.method()
        ),
    );
    answer.headers_mut().insert(
        ACCEPT_POST,
        header::HeaderValue::from_static("application/json"),
    );
    answer.into_response()
}
