//! Shlink's tag endpoints. Tags live on links here (there is no tag table), so the list and
//! the stats are one pass over the caller's links (an export, bounded and charged like one).
//! Renaming and deleting a tag would change every link that has it, one link at a time and not
//! as one change (a failure midway would leave some changed): they are refused with Shlink's
//! `forbidden-tag-operation`; change the links' tags instead.

use super::list::{pagination, walk};
use super::short_urls::visits_summary;
use super::{Problem, admit, finish, json};
use crate::access::Operation;
use crate::domain::ListInput;
use crate::http::HttpState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Per tag: its links, and their people's and bots' visits.
async fn counts(
    state: &HttpState,
    headers: &HeaderMap,
) -> Result<BTreeMap<String, [u64; 3]>, super::Fail> {
    let caller = admit(state, headers, None, Operation::Export)?;
    let mut tags: BTreeMap<String, [u64; 3]> = BTreeMap::new();
    walk(state, &caller, &ListInput::default(), |link| {
        for tag in &link.tags {
            let entry = tags.entry(tag.clone()).or_default();
            entry[0] += 1;
            entry[1] = entry[1].saturating_add(link.clicks.human);
            entry[2] = entry[2].saturating_add(link.clicks.bot);
        }
    })
    .await?;
    Ok(tags)
}

/// `GET /rest/v3/tags`: the tags of the caller's links, in order.
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

fn refused(state: &HttpState, headers: &HeaderMap, action: &'static str, what: &str) -> Response {
    let answer = admit(state, headers, None, Operation::Update).and_then(|_| {
        Err(Problem::tag_operation(format!(
            "{what} is not supported by this node: a tag lives on each link; change the tags \
             of the links instead (PATCH /rest/v3/short-urls/{{shortCode}})"
        ))
        .into())
    });
    finish(state, action, answer)
}

/// `PUT /rest/v3/tags`: refused (see the module's note).
pub async fn rename(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    refused(&state, &headers, "tag-rename", "Renaming a tag")
}

/// `DELETE /rest/v3/tags`: refused (see the module's note).
pub async fn delete(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    refused(&state, &headers, "tag-delete", "Deleting a tag")
}
