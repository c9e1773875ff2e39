//! The JSON endpoint for shells and languages without gRPC tooling, on its own port
//! (`ID_SERVICE_HTTP_ADDR`):
//!
//! - `POST /v1/namespaces/{namespace}/ids:allocate` with `{"count": N}` answers
//!   `{"ranges": [[start, end], ...]}` (half-open ranges), with the same tokens, scopes and
//!   quotas as `AllocateIds`;
//! - `GET /v1/openapi.json` serves the OpenAPI document of this port (no token needed).
//!
//! Errors are `{"error": "<code>", "message": "..."}`. They are the gRPC status of the same
//! refusal (one mapping of domain errors, in `error.rs`), turned into the HTTP status of the
//! standard mapping; retry advice becomes `Retry-After`.

use crate::allocator::Allocator;
use crate::auth::{Gate, Scope};
use crate::domain::AllocateRequest;
use crate::error::Error;
use axum::Router;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use std::sync::Arc;
use tonic::Code;

/// The OpenAPI document of this port.
pub const OPENAPI: &str = include_str!("openapi.json");

/// The largest request body read.
pub const MAX_BODY_BYTES: usize = 1024;

/// What the handlers share.
pub struct HttpApi {
    /// The one admission check.
    pub gate: Arc<Gate>,
    /// AllocateIds.
    pub allocator: Arc<Allocator>,
    /// The most IDs one call may ask for.
    pub max_count: u64,
    /// How long a call may take, as a gRPC call may (`ID_SERVICE_REQUEST_TIMEOUT`): past it the
    /// caller is told the service is unavailable, and anything the call held is let go.
    pub timeout: std::time::Duration,
}

/// The routes of the JSON port.
pub fn router(api: Arc<HttpApi>) -> Router {
    Router::new()
        .route("/v1/namespaces/{namespace}/ids:allocate", post(allocate))
        .route("/v1/openapi.json", get(openapi))
        .route_layer(axum::middleware::from_fn(traced))
        .fallback(unknown_path)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(api)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AllocateBody {
    count: u64,
}

async fn allocate(
    State(api): State<Arc<HttpApi>>,
    namespace: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<axum::Json<AllocateBody>, JsonRejection>,
) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes);
    let admitted = api.gate.admit(authorization, Scope::Allocate, || {
        let Path(namespace) =
            namespace.map_err(|_| Error::invalid("the namespace in the path is malformed"))?;
        let axum::Json(body) = body.map_err(body_error)?;
        AllocateRequest::parse(&namespace, body.count, api.max_count)
    });
    let (caller, outcome) = match admitted {
        Ok((principal, request)) => {
            let allocating = api.allocator.allocate(&principal, &request);
            let outcome = tokio::time::timeout(api.timeout, allocating)
                .await
                .unwrap_or_else(|_| {
                    Err(Error::Unavailable(format!(
                        "no answer within {:?}",
                        api.timeout
                    )))
                });
            (principal.name().to_string(), outcome)
        }
        Err(refused) => (refused.caller_name().to_string(), Err(refused.error)),
    };
    if let Err(error) = &outcome {
        crate::grpc::log_failure("AllocateIds", &caller, error);
    }
    match outcome {
        Ok(ranges) => {
            let ranges: Vec<[u64; 2]> = ranges.ranges().iter().map(|r| [r.start, r.end]).collect();
            no_store(
                StatusCode::OK,
                axum::Json(serde_json::json!({ "ranges": ranges })),
            )
        }
        Err(error) => error_response(tonic::Status::from(error)),
    }
}

fn body_error(rejection: JsonRejection) -> Error {
    match rejection {
        JsonRejection::MissingJsonContentType(_) => {
            Error::invalid("Content-Type must be application/json")
        }
        JsonRejection::BytesRejection(_) => {
            Error::invalid(format!("the body must be at most {MAX_BODY_BYTES} bytes"))
        }
        other => Error::invalid(format!(
            "the body must be {{\"count\": N}}: {}",
            other.body_text()
        )),
    }
}

/// A refusal as JSON: the HTTP status of the gRPC code, the code in snake case, the message,
/// and `Retry-After` from the status's retry advice.
fn error_response(status: tonic::Status) -> Response {
    let retry_after = status
        .metadata()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| HeaderValue::from_str(v).ok());
    let (http, code) = match status.code() {
        Code::InvalidArgument | Code::OutOfRange => (StatusCode::BAD_REQUEST, "invalid_argument"),
        Code::Unauthenticated => (StatusCode::UNAUTHORIZED, "unauthenticated"),
        Code::PermissionDenied => (StatusCode::FORBIDDEN, "permission_denied"),
        Code::NotFound => (StatusCode::NOT_FOUND, "not_found"),
        Code::AlreadyExists => (StatusCode::CONFLICT, "already_exists"),
        Code::FailedPrecondition => (StatusCode::CONFLICT, "failed_precondition"),
        Code::ResourceExhausted if retry_after.is_some() => {
            (StatusCode::TOO_MANY_REQUESTS, "quota_exceeded")
        }
        Code::ResourceExhausted => (StatusCode::TOO_MANY_REQUESTS, "namespace_exhausted"),
        Code::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    };
    let body = axum::Json(serde_json::json!({ "error": code, "message": status.message() }));
    let mut response = no_store(http, body);
    if let Some(value) = retry_after {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    if http == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

/// A path this port does not serve: `404` in the port's error shape (a typo in the path
/// should read as one to a client that parses every answer).
async fn unknown_path() -> Response {
    let message = "no such path: the endpoint is POST /v1/namespaces/{namespace}/ids:allocate";
    let body = serde_json::json!({ "error": "not_found", "message": message });
    no_store(StatusCode::NOT_FOUND, axum::Json(body))
}

/// A served path asked with another method: `405` in the port's error shape (axum has set
/// `Allow` already).
async fn wrong_method() -> Response {
    let message = "this path takes another method (see the Allow header)";
    let body = serde_json::json!({ "error": "method_not_allowed", "message": message });
    no_store(StatusCode::METHOD_NOT_ALLOWED, axum::Json(body))
}

fn no_store(status: StatusCode, body: impl IntoResponse) -> Response {
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn openapi() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        OPENAPI,
    )
        .into_response()
}

/// A server span for each request, named after its route template (never the namespace in
/// the path), when tracing is on (see the `otel` crate).
async fn traced(
    route: axum::extract::MatchedPath,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let span = otel::http::server_span(request.method(), route.as_str(), request.headers());
    otel::http::answer_in(span, next.run(request)).await
}
