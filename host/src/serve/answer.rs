//! The body of every error answer of the API, so that the routes and the checks in front of
//! them answer alike.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// An error answer of the API.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ApiError {
    /// What went wrong.
    pub(crate) error: String,
}

/// An answer with `status` and an [`ApiError`] body saying `message`.
pub(super) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (
        status,
        Json(ApiError {
            error: message.into(),
        }),
    )
        .into_response()
}
