//! The bearer token: with `[host] api-token` set, every request must carry
//! `Authorization: Bearer <token>`, else it gets 401.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::shared::AppState;

/// Compares without an early exit, so that the time taken does not tell how much of a guess
/// was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `authorization` (the header's value) carries `token`: the scheme `Bearer`, in any
/// case (schemes are case-insensitive), then the token after one or more spaces.
pub(super) fn authorized(authorization: Option<&[u8]>, token: &str) -> bool {
    let Some(value) = authorization.map(<[u8]>::trim_ascii) else {
        return false;
    };
    let Some(space) = value.iter().position(|b| *b == b' ') else {
        return false;
    };
    let (scheme, given) = value.split_at(space);
    scheme.eq_ignore_ascii_case(b"Bearer") && same(given.trim_ascii(), token.as_bytes())
}

/// The middleware: passes the request on when no token is configured or it carries it.
pub(super) async fn require_token(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let token = state.token.get();
    let Some(token) = token.as_deref() else {
        return next.run(request).await;
    };
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    if authorized(given, token) {
        next.run(request).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer realm=\"flowscale\"")],
            "a bearer token is required (Authorization: Bearer <the token of [host] api-token-file or api-token>)\n",
        )
            .into_response()
    }
}
