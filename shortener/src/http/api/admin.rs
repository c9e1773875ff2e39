//! `/api/v1/admin`: the deployment's settings an `admin` key may change while it runs. Today,
//! the blocked target domains: the blocklist file's entries (read-only here) and those added
//! through this API, kept in the store and re-read by every node each reload interval, as the
//! file is (the node that takes the change puts it in force at once).

use super::admit;
use super::wire::read_json;
use crate::access::Operation;
use crate::domain::Error;
use crate::http::{ApiError, HttpState};
use crate::store::LinkStore;
use crate::targets::Blocklist;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::SecondsFormat;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

/// The body of `POST /api/v1/admin/blocklist`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockBody {
    domain: String,
}

fn invalid_domain(message: String) -> Error {
    Error::invalid("invalid_domain", message)
}

/// `GET /api/v1/admin/blocklist`: every blocked domain, from the file and from this API.
pub async fn blocklist(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    admit(&state, &headers, Operation::Admin)?;
    let stored = state.store.blocked_domains().await.map_err(Error::from)?;
    let mut entries: Vec<serde_json::Value> = state
        .targets
        .file_entries()
        .into_iter()
        .map(|domain| json!({ "domain": domain, "source": "file" }))
        .collect();
    entries.extend(stored.iter().map(|e| {
        json!({
            "domain": e.entry,
            "source": "api",
            "added_at": e.added_at.to_rfc3339_opts(SecondsFormat::Millis, true),
            "added_by": e.added_by,
        })
    }));
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(json!({ "entries": entries })),
    )
        .into_response())
}

/// `POST /api/v1/admin/blocklist` `{"domain": ".evil.example"}`: blocks a domain (with its
/// subdomains for a leading `.` or `*.`). 201 when added, 200 when it was blocked already.
pub async fn block(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::Admin)?;
    let body: BlockBody = read_json(&headers, body, &["application/json"]).await?;
    let entry = Blocklist::canonical(&body.domain).map_err(invalid_domain)?;
    let added = state
        .store
        .block_domain(&entry, &caller.key_id())
        .await
        .map_err(Error::from)?;
    crate::app::sync_blocklist_of(&state.store, &state.targets)
        .await
        .map_err(Error::from)?;
    tracing::info!(entry = %entry, key = %caller.key_id(), "domain blocked");
    let status = if added {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        axum::Json(json!({ "domain": entry, "source": "api" })),
    )
        .into_response())
}

/// `DELETE /api/v1/admin/blocklist/{domain}`: unblocks a domain added through this API (204);
/// an entry of the file is removed from the file, not here (409 `in_blocklist_file`).
pub async fn unblock(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::Admin)?;
    let Ok(Path(domain)) = path else {
        return Err(invalid_domain("the domain in the path is not valid UTF-8".into()).into());
    };
    let entry = Blocklist::canonical(&domain).map_err(invalid_domain)?;
    if !state
        .store
        .unblock_domain(&entry)
        .await
        .map_err(Error::from)?
    {
        if state.targets.file_entries().contains(&entry) {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "in_blocklist_file",
                "this entry comes from the blocklist file: remove it there",
            ));
        }
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no such blocked domain",
        ));
    }
    crate::app::sync_blocklist_of(&state.store, &state.targets)
        .await
        .map_err(Error::from)?;
    tracing::info!(entry = %entry, key = %caller.key_id(), "domain unblocked");
    Ok(StatusCode::NO_CONTENT.into_response())
}
