//! `GET|HEAD /{code}`: the redirect edge.

use super::HttpState;
use crate::service::Resolution;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

fn no_store(status: StatusCode, body: &'static str) -> Response {
    (
        status,
        [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        body,
    )
        .into_response()
}

/// Redirects a code to its URL; 404 (not cached) for unknown codes, 410 for deleted or expired
/// links. Paths that cannot be codes are answered without touching the store.
pub async fn redirect(State(state): State<HttpState>, Path(code): Path<String>) -> Response {
    match state.service.resolve(&code).await {
        Ok(Resolution::Redirect(url)) => match HeaderValue::from_str(&url) {
            Ok(location) => (state.redirect_status, [(header::LOCATION, location)]).into_response(),
            Err(_) => {
                // Stored URLs are serialized by the URL parser (ASCII only); this is a bug.
                tracing::error!(code = %code, "stored URL is not a valid header value");
                no_store(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n")
            }
        },
        Ok(Resolution::NotFound) => no_store(StatusCode::NOT_FOUND, "not found\n"),
        Ok(Resolution::Gone) => no_store(StatusCode::GONE, "this link is no longer available\n"),
        Err(error) => super::ApiError::from(error).into_response(),
    }
}

/// Anything else: not a code.
pub async fn fallback() -> Response {
    no_store(StatusCode::NOT_FOUND, "not found\n")
}
