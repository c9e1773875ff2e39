//! A tag across the caller's tenant over HTTP: rename and delete (each one change in the
//! store; see [`crate::links::LinkService::rename_tag`]).

use super::admit;
use super::wire::read_json;
use crate::access::Operation;
use crate::domain::{Error, echo};
use crate::http::{ApiError, HttpState};
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The body of `PATCH /api/v1/tags/{tag}`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Rename {
    /// The tag's new name.
    name: String,
}

/// The tag a path names (a segment that is not UTF-8 names none).
fn tag(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    path.map(|Path(tag)| tag).map_err(|_| unknown(""))
}

/// No live link of the caller's tenant carries `tag`.
fn unknown(tag: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "no link of this tenant carries the tag {}{}",
            echo(tag),
            crate::domain::tag_stored_as(tag)
        ),
    )
}

/// A refusal of the link service, with an unknown tag said as such.
fn refused(error: Error, tag: &str) -> ApiError {
    match error {
        Error::NotFound(_) => unknown(tag),
        other => other.into(),
    }
}

/// The answer of a change: the tag and how many links it changed.
fn changed(tag: &str, links: usize) -> Response {
    (
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(serde_json::json!({ "tag": tag, "links": links })),
    )
        .into_response()
}

/// `PATCH /api/v1/tags/{tag}` `{"name": "<new>"}`: renames the tag on every live link of the
/// caller's tenant that carries it, as one change; answers the new name and how many links
/// changed. 404 when no such link exists, 409 `tag_conflict` when a link carries the new name
/// already, 409 `too_many_links` past the bound, 422 `invalid_tag` for a name a link could not
/// carry. Needs `links:write`.
pub async fn rename_tag(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Body,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::Update).await?;
    let from = tag(path)?;
    let Rename { name } = read_json(
        &headers,
        body,
        &["application/json", "application/merge-patch+json"],
    )
    .await?;
    let links = state
        .links
        .rename_tag(&caller, &from, &name)
        .await
        .map_err(|e| refused(e, &from))?;
    Ok(changed(&name, links))
}

/// `DELETE /api/v1/tags/{tag}`: removes the tag from every live link of the caller's tenant
/// that carries it, as one change; answers the tag and how many links changed. 404 when no
/// such link exists, 409 `too_many_links` past the bound. Needs `links:write`.
pub async fn delete_tag(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::Update).await?;
    let tag = tag(path)?;
    let links = state
        .links
        .delete_tags(&caller, std::slice::from_ref(&tag))
        .await
        .map_err(|e| refused(e, &tag))?;
    Ok(changed(&tag, links))
}
