//! `/api/v1/webhooks`: endpoints registered by an `admin` key, per tenant, and their delivery
//! logs. A secret goes in at registration and is never shown again.

use super::admit;
use super::wire::read_json;
use crate::access::Operation;
use crate::domain::Error;
use crate::http::{ApiError, HttpState};
use crate::webhooks::{DeliveryRecord, Endpoint, Registration};
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// The body of `POST /api/v1/webhooks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RegisterBody {
    tenant: String,
    url: String,
    secret: String,
}

/// The body of `PATCH /api/v1/webhooks/{id}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchBody {
    enabled: bool,
}

/// The body of `POST /api/v1/webhooks/{id}/deliveries/retry`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryBody {
    /// The one event to send again; none: every failed delivery (up to the batch).
    #[serde(default)]
    event_id: Option<i64>,
}

fn time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn endpoint_json(e: &Endpoint) -> Value {
    json!({
        "id": e.id,
        "tenant": e.tenant,
        "url": e.url,
        "created_at": time(&e.created_at),
        "created_by": e.created_by,
        "failures": e.failures,
        "disabled_at": e.disabled_at.as_ref().map(time),
    })
}

fn record_json(r: &DeliveryRecord) -> Value {
    json!({
        "event_id": r.event_id,
        "type": r.kind,
        "state": r.state,
        "attempts": r.attempts,
        "last_status": r.last_status,
        "last_error": r.last_error,
        "delivered_at": r.delivered_at.as_ref().map(time),
        "failed_at": r.failed_at.as_ref().map(time),
    })
}

fn no_such_webhook() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such webhook")
}

/// The endpoint a path names; one that cannot be an endpoint's number is not found.
fn id(path: Result<Path<String>, PathRejection>) -> Result<i64, ApiError> {
    path.ok()
        .and_then(|Path(text)| text.parse::<i64>().ok())
        .filter(|id| *id > 0)
        .ok_or_else(no_such_webhook)
}

/// A domain error, with an unknown endpoint said as such.
fn refused(error: Error) -> ApiError {
    match error {
        Error::NotFound(_) => no_such_webhook(),
        other => other.into(),
    }
}

/// `POST /api/v1/webhooks` `{"tenant", "url", "secret"}`: registers an endpoint (201).
pub async fn register_webhook(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::Admin).await?;
    let body: RegisterBody = read_json(&headers, body, &["application/json"]).await?;
    let tenants = state.admission.keys().tenants();
    let endpoint = state
        .webhooks
        .register(
            &caller,
            Registration {
                tenant: body.tenant,
                url: body.url,
                secret: body.secret,
            },
            &tenants,
        )
        .await?;
    tracing::info!(id = endpoint.id, tenant = %endpoint.tenant, key = %caller.key_id(), "webhook registered");
    Ok((StatusCode::CREATED, axum::Json(endpoint_json(&endpoint))).into_response())
}

/// `GET /api/v1/webhooks`: the endpoints, oldest first.
pub async fn webhooks(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::Admin).await?;
    let endpoints = state.webhooks.list(&caller).await?;
    let endpoints: Vec<Value> = endpoints.iter().map(endpoint_json).collect();
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(json!({ "webhooks": endpoints })),
    )
        .into_response())
}

/// `DELETE /api/v1/webhooks/{id}`: removes an endpoint and its pending deliveries (204).
pub async fn delete_webhook(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::Admin).await?;
    state
        .webhooks
        .delete(&caller, id(path)?)
        .await
        .map_err(refused)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `PATCH /api/v1/webhooks/{id}` `{"enabled": true|false}`: enables an endpoint again after
/// it was disabled (its run of failures starts at 0, its pending deliveries are due at once),
/// or disables it by hand; answers the endpoint (200).
pub async fn update_webhook(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Body,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::Admin).await?;
    let id = id(path)?;
    let body: PatchBody = read_json(
        &headers,
        body,
        &["application/json", "application/merge-patch+json"],
    )
    .await?;
    let endpoint = state
        .webhooks
        .set_enabled(&caller, id, body.enabled)
        .await
        .map_err(refused)?;
    tracing::info!(id, enabled = body.enabled, key = %caller.key_id(), "webhook endpoint updated");
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(endpoint_json(&endpoint)),
    )
        .into_response())
}

/// `GET /api/v1/webhooks/{id}/deliveries`: the latest deliveries, newest first.
pub async fn webhook_deliveries(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::Admin).await?;
    let log = state
        .webhooks
        .log(&caller, id(path)?)
        .await
        .map_err(refused)?;
    let log: Vec<Value> = log.iter().map(record_json).collect();
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(json!({ "deliveries": log })),
    )
        .into_response())
}

/// `POST /api/v1/webhooks/{id}/deliveries/retry` `{"event_id"?}`: makes one delivery (sent
/// again, delivered or failed) or the endpoint's failed deliveries (up to
/// [`crate::webhooks::RETRY_BATCH`]) due again from their first attempt; `200 {"retried"}`.
pub async fn retry_webhook_deliveries(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Body,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::Admin).await?;
    let id = id(path)?;
    let body: RetryBody = read_json(&headers, body, &["application/json"]).await?;
    if body.event_id.is_some_and(|e| e <= 0) {
        return Err(
            Error::invalid("invalid_event_id", "event_id must be a positive integer").into(),
        );
    }
    let retried = state
        .webhooks
        .retry(&caller, id, body.event_id)
        .await
        .map_err(refused)?;
    tracing::info!(id, retried, event_id = ?body.event_id, key = %caller.key_id(), "webhook deliveries made due again");
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(json!({ "retried": retried })),
    )
        .into_response())
}
