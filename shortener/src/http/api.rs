//! The JSON API under `/api/v1`.

use super::{ApiError, HttpState, Shared};
use crate::auth::Owner;
use crate::domain::{Error, Link};
use crate::service::CreateInput;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

/// The largest create body accepted.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// The body of `POST /api/v1/links`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    url: String,
    #[serde(default)]
    alias: Option<String>,
    #[serde(default)]
    expires_at: Option<String>,
    #[serde(default)]
    dedup: bool,
    #[serde(default)]
    private: bool,
}

fn authenticate(state: &HttpState, headers: &HeaderMap) -> Result<Owner, ApiError> {
    let header = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    Ok(state.keys.authenticate(header)?)
}

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A link as the API shows it (serialized straight from the link, no intermediate JSON tree).
#[derive(Serialize)]
pub(crate) struct LinkJson<'a> {
    code: &'a str,
    short_url: String,
    url: &'a str,
    created_at: String,
    expires_at: Option<String>,
    deleted_at: Option<String>,
    clicks: ClicksJson,
}

#[derive(Serialize)]
struct ClicksJson {
    human: u64,
    head: u64,
    bot: u64,
}

pub(crate) fn link_json<'a>(state: &HttpState, link: &'a Link) -> LinkJson<'a> {
    LinkJson {
        code: &link.code,
        short_url: state.service.short_url(&link.code),
        url: &link.url,
        created_at: time(link.created_at),
        expires_at: link.expires_at.map(time),
        deleted_at: link.deleted_at.map(time),
        clicks: ClicksJson {
            human: link.clicks.human,
            head: link.clicks.head,
            bot: link.clicks.bot,
        },
    }
}

async fn read_json_body(headers: &HeaderMap, body: Body) -> Result<CreateBody, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the request body as Content-Type: application/json",
        ));
    }
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("the request body exceeds {MAX_BODY_BYTES} bytes"),
            )
        })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        Error::bad_request("invalid_json", format!("invalid request body: {e}")).into()
    })
}

/// `POST /api/v1/links`: creates a link (201), or returns the existing one for a dedup hit or
/// an idempotent retry (200).
pub async fn create(State(state): State<Shared>, request: axum::extract::Request) -> Response {
    let started = std::time::Instant::now();
    // The request taken apart rather than a `HeaderMap` extractor, which clones the headers.
    let (parts, body) = request.into_parts();
    let (response, outcome) = match create_inner(&state, &parts.headers, body).await {
        Ok((response, true)) => (response, "created"),
        Ok((response, false)) => (response, "existing"),
        Err((error, outcome)) => (error.into_response(), outcome),
    };
    state.metrics.create(outcome, started.elapsed());
    response
}

type Failure = (ApiError, &'static str);

fn fail(error: Error) -> Failure {
    let outcome = error.outcome();
    (ApiError::from(error), outcome)
}

async fn create_inner(
    state: &HttpState,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Response, bool), Failure> {
    let owner = authenticate(state, headers).map_err(|e| (e, "unauthorized"))?;
    if let Err(retry_after) = state.limits.create(&owner.0) {
        state.metrics.rate_limited("create");
        return Err(fail(Error::RateLimited { retry_after }));
    }
    let body = read_json_body(headers, body)
        .await
        .map_err(|e| (e, "invalid"))?;
    let expires_at = body
        .expires_at
        .as_deref()
        .map(|text| {
            DateTime::parse_from_rfc3339(text)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|e| {
                    Error::invalid(
                        "invalid_expiry",
                        format!("expires_at must be an RFC 3339 time: {e}"),
                    )
                })
        })
        .transpose()
        .map_err(fail)?;
    let idempotency_key = match headers.get("idempotency-key") {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| {
                    fail(Error::bad_request(
                        "invalid_idempotency_key",
                        "the Idempotency-Key header must be ASCII",
                    ))
                })?
                .to_string(),
        ),
    };
    let input = CreateInput {
        url: body.url,
        alias: body.alias,
        expires_at,
        dedup: body.dedup,
        private: body.private,
        idempotency_key,
    };
    let request = state.service.validate(input, Utc::now()).map_err(fail)?;
    let (link, created) = state.service.create(&owner, request).await.map_err(fail)?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let location = format!("/api/v1/links/{}", link.code);
    let response = (
        status,
        [(header::LOCATION, location)],
        axum::Json(link_json(state, &link)),
    )
        .into_response();
    Ok((response, created))
}

/// The path segment, or an empty one (which is no code) when it does not decode to UTF-8.
pub(crate) fn segment(code: Result<Path<String>, PathRejection>) -> String {
    code.map(|Path(code)| code).unwrap_or_default()
}

/// `GET /api/v1/links/{code}`: the link, including deleted and expired ones.
pub async fn get(
    State(state): State<Shared>,
    headers: HeaderMap,
    code: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    authenticate(&state, &headers)?;
    let link = state.service.get(&segment(code)).await?;
    Ok(axum::Json(link_json(&state, &link)).into_response())
}

/// `DELETE /api/v1/links/{code}`: 204; the code answers 410 from then on.
pub async fn delete(
    State(state): State<Shared>,
    headers: HeaderMap,
    code: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    authenticate(&state, &headers)?;
    state.service.delete(&segment(code)).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// A method the route does not support.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this method is not supported here",
    )
}

/// An unknown API path.
pub async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such API endpoint")
}
