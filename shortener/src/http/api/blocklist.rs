//! `/api/v1/admin`: the deployment's settings an `admin` key may change while it runs. Today,
//! the blocked target domains ([`crate::targets::BlocklistService`] owns them and their
//! rules); this file turns requests into its calls and its answers into JSON.

use super::admit;
use super::wire::read_json;
use crate::access::Operation;
use crate::http::{ApiError, HttpState};
use crate::targets::{BlockSource, Unblocked};
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

/// `GET /api/v1/admin/blocklist`: every blocked domain, from the file and from this API.
pub async fn blocklist(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    admit(&state, &headers, Operation::Admin).await?;
    let entries: Vec<serde_json::Value> = state
        .blocklist
        .entries()
        .await?
        .into_iter()
        .map(|entry| match entry.source {
            BlockSource::File => json!({ "domain": entry.domain, "source": "file" }),
            BlockSource::Api { added_at, added_by } => json!({
                "domain": entry.domain,
                "source": "api",
                "added_at": added_at.to_rfc3339_opts(SecondsFormat::Millis, true),
                "added_by": added_by,
            }),
        })
        .collect();
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
    let caller = admit(&state, &headers, Operation::Admin).await?;
    let body: BlockBody = read_json(&headers, body, &["application/json"]).await?;
    let (entry, added) = state.blocklist.block(&caller, &body.domain).await?;
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
    let caller = admit(&state, &headers, Operation::Admin).await?;
    let Ok(Path(domain)) = path else {
        return Err(crate::domain::Error::invalid(
            "invalid_domain",
            "the domain in the path is not valid UTF-8",
        )
        .into());
    };
    match state.blocklist.unblock(&caller, &domain).await? {
        Unblocked::Removed => Ok(StatusCode::NO_CONTENT.into_response()),
        Unblocked::InFile => Err(ApiError::new(
            StatusCode::CONFLICT,
            "in_blocklist_file",
            "this entry comes from the blocklist file: remove it there",
        )),
        Unblocked::NotFound => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no such blocked domain",
        )),
    }
}
