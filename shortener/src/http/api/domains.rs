//! `/api/v1/domains`: branded domains a tenant owns. [`crate::domains::DomainService`] owns
//! their rules; who may claim a host is the admission's; this file turns requests into their
//! calls and answers into JSON.

use super::admit;
use super::wire::{read_json, read_json_up_to};
use crate::access::Operation;
use crate::domain::{Domain, Error, echo};
use crate::http::{ApiError, HttpState};
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use chrono::SecondsFormat;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// The most bytes of a domain patch: room for both app-link files at their bound and the
/// other settings.
pub const MAX_PATCH_BYTES: usize = 2 * crate::domain::MAX_APP_FILE_BYTES + 16 * 1024;

/// The body of `POST /api/v1/domains`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimBody {
    host: String,
    /// The tenant to claim for (an `admin` key only; the caller's own when left out).
    #[serde(default)]
    tenant: Option<String>,
}

/// The query of `GET /api/v1/domains`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    #[serde(default)]
    limit: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
}

/// A domain as the API shows it.
fn domain_json(d: &Domain) -> Value {
    let s = &d.settings;
    json!({
        "host": d.host,
        "tenant": d.tenant,
        "created_at": d.created_at.to_rfc3339_opts(SecondsFormat::Millis, true),
        "created_by": d.created_by,
        "root_url": s.root_url,
        "not_found_url": s.not_found_url,
        "expired_url": s.expired_url,
        "redirect_status": s.redirect_status,
        "robots": s.robots.name(),
        "apple_app_site_association": app_file(s.apple_app_site_association.as_deref()),
        "assetlinks": app_file(s.assetlinks.as_deref()),
    })
}

/// A stored app-link file as the JSON it holds (null when unset).
fn app_file(text: Option<&str>) -> Value {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or(Value::Null)
}

/// A domain error, with an unknown domain said as such.
fn refused(error: Error) -> ApiError {
    match error {
        Error::NotFound(_) => ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such domain"),
        other => other.into(),
    }
}

/// The host a path names, as written (the service normalises it; a segment that is not UTF-8
/// names no domain).
fn path(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    path.map(|Path(host)| host)
        .map_err(|_| refused(Error::NotFound(String::new())))
}

/// `POST /api/v1/domains` `{"host", "tenant"?}`: claims a host as a domain (201); 409
/// `domain_taken` when it is one already, 403 when the key may not claim it.
pub async fn claim_domain(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::DomainWrite).await?;
    let body: ClaimBody = read_json(&headers, body, &["application/json"]).await?;
    let host = state.domains.host(&body.host)?;
    let tenant = state.domains.tenant(&caller, body.tenant.as_deref())?;
    state.admission.admit_claim(&caller, &tenant, &host)?;
    let domain = state.domains.claim(&caller, &tenant, &host).await?;
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, format!("/api/v1/domains/{}", domain.host))],
        axum::Json(domain_json(&domain)),
    )
        .into_response())
}

/// `GET /api/v1/domains?limit=&cursor=`: the caller's tenant's domains (every tenant's for
/// `admin`), in host order, a page at a time.
pub async fn domains(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::DomainRead).await?;
    let params = axum::extract::Query::<ListParams>::try_from_uri(&uri)
        .map(|q| q.0)
        .map_err(|e| {
            Error::bad_request(
                "invalid_query_parameter",
                format!("invalid query: {}", e.body_text()),
            )
        })?;
    let limit = params
        .limit
        .map(|text| {
            text.parse::<i64>().map_err(|_| {
                Error::bad_request(
                    "invalid_limit",
                    format!("limit must be a number, not {}", echo(&text)),
                )
            })
        })
        .transpose()?;
    let page = state
        .domains
        .list(&caller, params.cursor.as_deref(), limit)
        .await?;
    let domains: Vec<Value> = page.domains.iter().map(domain_json).collect();
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(json!({ "domains": domains, "next_cursor": page.next_cursor })),
    )
        .into_response())
}

/// `GET /api/v1/domains/{host}`: one domain; another tenant's answers as an unknown one.
pub async fn domain(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    host: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::DomainRead).await?;
    let domain = state
        .domains
        .get(&caller, &path(host)?)
        .await
        .map_err(refused)?;
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(domain_json(&domain)),
    )
        .into_response())
}

/// `PATCH /api/v1/domains/{host}`: a JSON merge patch of the domain's settings; the domain as
/// it is now.
pub async fn update_domain(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    host: Result<Path<String>, PathRejection>,
    body: Body,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::DomainWrite).await?;
    let host = path(host)?;
    let patch: Map<String, Value> = read_json_up_to(
        &headers,
        body,
        &["application/merge-patch+json", "application/json"],
        MAX_PATCH_BYTES,
    )
    .await?;
    let domain = state
        .domains
        .update(&caller, &host, &patch)
        .await
        .map_err(refused)?;
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(domain_json(&domain)),
    )
        .into_response())
}

/// `DELETE /api/v1/domains/{host}`: removes the domain (204).
pub async fn delete_domain(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    host: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::DomainWrite).await?;
    state
        .domains
        .delete(&caller, &path(host)?)
        .await
        .map_err(refused)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
