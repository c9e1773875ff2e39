//! Cross-origin calls to the dialects (`SHORTENER_COMPAT_CORS_ORIGINS`): browser apps such as
//! the Shlink web client are served from another origin and send the key in a header, so the
//! browser asks first (a preflight) and then reads an answer only when it names their origin.
//!
//! Only the dialects' routes carry this layer: the console and the JSON API answer no other
//! origin. No answer allows credentials: the dialects' keys are sent in headers or the query,
//! never in cookies, so a page can use no key its own script did not send.

use crate::config::CorsOrigins;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The methods the dialects serve, as a preflight answers them.
pub const ALLOW_METHODS: &str = "GET, POST, PUT, PATCH, DELETE";
/// The request headers a page may send: the Shlink key, JSON bodies, the Bitly bearer key.
pub const ALLOW_HEADERS: &str = "X-Api-Key, Content-Type, Authorization";
/// The answer headers a page may read beyond the always readable ones.
pub const EXPOSE_HEADERS: &str = "Retry-After";
/// How long, in seconds, a browser may keep a preflight's answer (Chromium keeps it at most
/// two hours, Firefox a day).
pub const MAX_AGE: u64 = 3600;

/// Answers a preflight to a dialect's path, and marks every other answer with the origins
/// that may read it.
pub async fn layer(
    State(origins): State<Arc<CorsOrigins>>,
    request: Request,
    next: Next,
) -> Response {
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let preflight = request.method() == Method::OPTIONS
        && origin.is_some()
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let allowed = origin.as_deref().filter(|o| origins.allows(o));
    if preflight {
        let mut response = StatusCode::NO_CONTENT.into_response();
        let headers = response.headers_mut();
        mark(headers, &origins, allowed);
        if allowed.is_some() {
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static(ALLOW_METHODS),
            );
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static(ALLOW_HEADERS),
            );
            headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from(MAX_AGE));
        }
        return response;
    }
    let mut response = next.run(request).await;
    mark(response.headers_mut(), &origins, allowed);
    response
}

/// Names the origin that may read an answer (`*` for any), and says the answer depends on
/// `Origin` when it names one, so a shared cache keeps one answer per origin.
fn mark(headers: &mut HeaderMap, origins: &CorsOrigins, allowed: Option<&str>) {
    let allow = match origins {
        CorsOrigins::None => return,
        CorsOrigins::Any => Some(HeaderValue::from_static("*")),
        CorsOrigins::Listed(_) => {
            headers.append(header::VARY, HeaderValue::from_static("Origin"));
            allowed.and_then(|o| HeaderValue::from_str(o).ok())
        }
    };
    if let Some(allow) = allow {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allow);
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(EXPOSE_HEADERS),
        );
    }
}
