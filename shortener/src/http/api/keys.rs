//! `/api/v1/keys`: the API keys a tenant admin (`keys:manage`, or `admin`) makes, lists and
//! revokes for its own tenant ([`crate::keys::KeyService`] owns them and their rules); this
//! file turns requests into its calls and its answers into JSON. A key's secret is in the
//! create's answer only; no answer ever holds a digest.

use super::admit;
use super::wire::read_json_up_to;
use crate::access::Operation;
use crate::http::{ApiError, HttpState};
use crate::keys::{KeyRequest, KeyView};
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// The largest body of `POST /api/v1/keys`: a name, a few scopes and a time.
pub const MAX_KEY_BODY_BYTES: usize = 4096;

/// The body of `POST /api/v1/keys`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    name: String,
    scopes: Vec<String>,
    #[serde(default)]
    expires_at: Option<String>,
}

fn time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn key_json(k: &KeyView) -> Value {
    let scopes: Vec<&str> = k.scopes.iter().map(|s| s.name()).collect();
    json!({
        "name": k.name,
        "tenant": k.tenant,
        "scopes": scopes,
        "created_at": time(&k.created_at),
        "created_by": k.created_by,
        "expires_at": k.expires_at.as_ref().map(time),
        "last_used_at": k.last_used_at.as_ref().map(time),
        "scopes_in_force": k.in_force.map(|held| held.iter().map(|s| s.name()).collect::<Vec<_>>()),
    })
}

/// `GET /api/v1/keys`: the caller's tenant's keys made through this API, by name.
pub async fn api_keys(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::KeyRead).await?;
    let keys: Vec<Value> = state
        .api_keys
        .list(&caller)
        .await?
        .iter()
        .map(key_json)
        .collect();
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(json!({ "keys": keys })),
    )
        .into_response())
}

/// `POST /api/v1/keys` `{"name", "scopes", "expires_at"?}`: makes a key of the caller's tenant
/// (201), its secret in the answer, shown this once, and its YOURLS token too (what
/// `shortener keys yourls-token` prints for a key of the keys file), for clients that sign
/// YOURLS requests with timestamps.
pub async fn create_api_key(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::KeyWrite).await?;
    let body: CreateBody =
        read_json_up_to(&headers, body, &["application/json"], MAX_KEY_BODY_BYTES).await?;
    let request = KeyRequest {
        name: body.name,
        scopes: body.scopes,
        expires_at: body.expires_at,
    };
    let created = state.api_keys.create(&caller, &request).await?;
    let mut answer = key_json(&created.key);
    // Given whether or not this node serves YOURLS: no call answers it again, and the dialect
    // may be turned on after.
    let digest = crate::access::digest(&created.secret);
    answer["yourls_token"] = Value::String(state.yourls_tokens.token(&digest));
    answer["secret"] = Value::String(created.secret);
    Ok((
        StatusCode::CREATED,
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(answer),
    )
        .into_response())
}

/// `DELETE /api/v1/keys/{name}`: revokes the caller's tenant's key of that name (204); it stops
/// working on this node at once and on every other within `SHORTENER_RELOAD_INTERVAL_MS`.
pub async fn revoke_api_key(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::KeyWrite).await?;
    let Ok(Path(name)) = path else {
        return Err(crate::domain::Error::invalid(
            "invalid_name",
            "name: the key name in the path is not valid UTF-8",
        )
        .into());
    };
    if state.api_keys.revoke(&caller, &name).await? {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no live key of that name in this tenant: it was never made here or is revoked \
             already (a key of the operator's keys file is removed from that file)",
        ))
    }
}
