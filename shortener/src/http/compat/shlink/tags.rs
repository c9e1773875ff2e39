//! Shlink's tag endpoints. Tags live on links here (there is no tag table), so the list and
//! the stats are one pass over the caller's links (an export, bounded and charged like one),
//! and a rename or delete is one change of every live link of the caller's tenant that carries
//! the tag (see [`crate::links::LinkService::rename_tag`]): all of them change, or none does.

use super::body::{Fields, object};
use super::list::{pagination, walk};
use super::short_urls::visits_summary;
use super::{Fail, Problem, admit, finish, json, query_pairs};
use crate::access::Operation;
use crate::domain::{Error, ListInput};
use crate::http::HttpState;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The most distinct tags a tag list or its stats holds (Shlink's answer is one page of every
/// tag): past it the answer is a `422`, not a table as large as the tenant's tags make it.
pub const MAX_LISTED_TAGS: usize = 10_000;

/// Per tag: its links, and their people's and bots' visits; at most [`MAX_LISTED_TAGS`] tags.
async fn counts(
    state: &HttpState,
    headers: &HeaderMap,
) -> Result<BTreeMap<String, [u64; 3]>, super::Fail> {
    let caller = admit(state, headers, None, Operation::Export).await?;
    let mut tags: BTreeMap<String, [u64; 3]> = BTreeMap::new();
    let mut too_many = false;
    walk(state, &caller, &ListInput::default(), |link| {
        // The caller's own tenant's, an admin key's too: the tags its renames and deletes act
        // on (an admin sees every tenant's links, but a tag is changed within one tenant).
        if link.tenant != *caller.tenant {
            return;
        }
        for tag in &link.tags {
            if !tags.contains_key(tag) {
                if tags.len() >= MAX_LISTED_TAGS {
                    too_many = true;
                    continue;
                }
                tags.insert(tag.clone(), [0; 3]);
            }
            if let Some(entry) = tags.get_mut(tag) {
                entry[0] += 1;
                entry[1] = entry[1].saturating_add(link.clicks.human);
                entry[2] = entry[2].saturating_add(link.clicks.bot);
            }
        }
    })
    .await?;
    if too_many {
        return Err(Problem::too_many_tags(MAX_LISTED_TAGS).into());
    }
    Ok(tags)
}

/// `GET /rest/v3/tags`: the tags of the caller's tenant's links, in order.
pub async fn list(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    let answer = async {
        let tags = counts(&state, &headers).await?;
        let data: Vec<&String> = tags.keys().collect();
        let count = data.len();
        Ok(json(json!({
            "tags": { "data": data, "pagination": pagination(1, count.max(1), count, count) }
        })))
    }
    .await;
    finish(&state, "tags", answer)
}

/// `GET /rest/v3/tags/stats`: each tag with its short URLs and their visits.
pub async fn stats(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    let answer = async {
        let tags = counts(&state, &headers).await?;
        let data: Vec<_> = tags
            .iter()
            .map(|(tag, [links, human, bot])| {
                json!({
                    "tag": tag,
                    "shortUrlsCount": links,
                    "visitsSummary": visits_summary(*human, *bot),
                })
            })
            .collect();
        let count = data.len();
        Ok(json(json!({
            "tags": { "data": data, "pagination": pagination(1, count.max(1), count, count) }
        })))
    }
    .await;
    finish(&state, "tags-stats", answer)
}

/// The most tags one `DELETE /rest/v3/tags` names.
pub const MAX_DELETED_TAGS: usize = 100;

/// A required string field of a body.
fn required(fields: &Fields<'_>, field: &str) -> Result<String, Fail> {
    fields
        .string(field)?
        .flatten()
        .ok_or_else(|| Problem::invalid_data(field, format!("{field} is required")).into())
}

/// `PUT /rest/v3/tags` `{"oldName", "newName"}`: renames the tag on every live link of the
/// caller's tenant (204); `tag-not-found` when no link carries it, `tag-conflict` when one
/// carries the new name already, `invalid-data` for a missing field or a name no link could
/// carry.
pub async fn rename(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let answer = async {
        let caller = admit(&state, &headers, None, Operation::Update).await?;
        let fields = object(body).await?;
        let fields = Fields(&fields);
        // Read as a create reads a tag (`Summer Sale` is `summer-sale`).
        let (old, new) = (required(&fields, "oldName")?, required(&fields, "newName")?);
        let (old, new) = (crate::domain::peer_tag(&old), crate::domain::peer_tag(&new));
        match state.links.rename_tag(&caller, &old, &new).await {
            Ok(_) => Ok(StatusCode::NO_CONTENT.into_response()),
            Err(Error::NotFound(_)) => Err(Problem::tag_not_found(&old).into()),
            Err(Error::Invalid { message, .. }) => {
                Err(Problem::invalid_data("newName", message).into())
            }
            Err(Error::Conflict {
                code: "tag_conflict",
                ..
            }) => Err(Problem::tag_conflict(&old, &new).into()),
            Err(other) => Err(other.into()),
        }
    }
    .await;
    finish(&state, "tag-rename", answer)
}

/// `DELETE /rest/v3/tags?tags[]=a&tags[]=b`: removes the tags from every live link of the
/// caller's tenant (204); tags no link carries are ignored, as Shlink ignores them.
pub async fn delete(State(state): State<Arc<HttpState>>, headers: HeaderMap, uri: Uri) -> Response {
    let answer = async {
        let caller = admit(&state, &headers, None, Operation::Update).await?;
        let tags: Vec<String> = query_pairs(&uri)
            .into_iter()
            .filter(|(name, _)| name == "tags[]" || name == "tags")
            .map(|(_, tag)| crate::domain::peer_tag(&tag))
            .collect();
        if tags.len() > MAX_DELETED_TAGS {
            return Err(Problem::invalid_data(
                "tags",
                format!(
                    "at most {MAX_DELETED_TAGS} tags at once, not {}",
                    tags.len()
                ),
            )
            .into());
        }
        match state.links.delete_tags(&caller, &tags).await {
            Ok(_) | Err(Error::NotFound(_)) => Ok(StatusCode::NO_CONTENT.into_response()),
            Err(other) => Err(other.into()),
        }
    }
    .await;
    finish(&state, "tag-delete", answer)
}
