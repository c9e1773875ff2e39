//! Domain errors as HTTP responses: `{"error": "<machine_code>", "message": "..."}`.

use crate::domain::Error;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// An error on its way to an HTTP client.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    retry_after: Option<u64>,
}

impl ApiError {
    /// An error with an explicit status, for failures that exist only in HTTP (413, 415, ...).
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }
}

impl ApiError {
    /// The same error, its message followed by `hint` (what the caller may have meant).
    pub fn hinted(mut self, hint: &str) -> Self {
        self.message.push_str(hint);
        self
    }
}

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        let status = match &error {
            Error::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Error::Invalid { .. } | Error::IdempotencyMismatch => StatusCode::UNPROCESSABLE_ENTITY,
            Error::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            Error::Forbidden(_) | Error::HostNotAllowed(_) => StatusCode::FORBIDDEN,
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::Gone(_) => StatusCode::GONE,
            Error::AliasTaken(_) | Error::DomainTaken(_) | Error::Conflict { .. } => {
                StatusCode::CONFLICT
            }
            Error::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Error::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        match &error {
            Error::Internal(detail) => {
                tracing::error!(detail = %crate::domain::text::Untrusted(detail), "internal error")
            }
            // The cause was logged where it was known (the store's detail, a shortage).
            Error::Unavailable { message, .. } => {
                tracing::debug!(%message, "request refused: unavailable")
            }
            _ => {}
        }
        let retry_after = match &error {
            Error::Unavailable { retry_after, .. } | Error::RateLimited { retry_after } => {
                Some(retry_after.as_secs().max(1))
            }
            _ => None,
        };
        Self {
            status,
            code: error.code(),
            message: error.public_message(),
            retry_after,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.code, "message": self.message });
        let mut response = (self.status, axum::Json(body)).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}
