//! Shlink's visits. The overview is the caller's links' visit counts (all time, as each link's
//! `visitsSummary`: people's and bots' `GET` visits), summed in one pass over its links (an
//! export, bounded like one). The node keeps counts, never single visits, so every list of
//! visits is an empty page with its pagination, and orphan visits (of no short URL) are not
//! counted: zeros.

use super::list::{pagination, walk};
use super::short_urls::{find, visits_summary};
use super::{Fail, Problem, admit, finish, json, query_value};
use crate::access::Operation;
use crate::domain::ListInput;
use crate::http::HttpState;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use serde_json::json;
use std::sync::Arc;

/// `GET /rest/v3/visits`.
pub async fn overview(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    let answer = async {
        let caller = admit(&state, &headers, None, Operation::Stats).await?;
        let (mut human, mut bot) = (0u64, 0u64);
        walk(&state, &caller, &ListInput::default(), |link| {
            human = human.saturating_add(link.clicks.human);
            bot = bot.saturating_add(link.clicks.bot);
        })
        .await?;
        Ok(json(json!({
            "visits": {
                "nonOrphanVisits": visits_summary(human, bot),
                "orphanVisits": visits_summary(0, 0),
            }
        })))
    }
    .await;
    finish(&state, "visits", answer)
}

/// An empty page of visits, numbered as asked (`page`, `itemsPerPage`).
fn empty_page(uri: &Uri) -> Result<serde_json::Value, Fail> {
    let number = |name: &str, default: i64| -> Result<i64, Fail> {
        match query_value(uri, name).filter(|v| !v.is_empty()) {
            None => Ok(default),
            Some(text) => text.parse::<i64>().map_err(|_| {
                Problem::invalid_data(name, format!("{name} must be a whole number")).into()
            }),
        }
    };
    let page = number("page", 1)?.max(1) as usize;
    let per_page = match number("itemsPerPage", 10)? {
        n if n < 1 => 10,
        n => n as usize,
    };
    Ok(json!({ "visits": { "data": [], "pagination": pagination(page, per_page, 0, 0) } }))
}

/// `GET /rest/v3/short-urls/{shortCode}/visits?domain=`: the link must be the caller's.
pub async fn short_url(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    code: Result<Path<String>, PathRejection>,
    uri: Uri,
) -> Response {
    let code = super::path_text(code);
    let answer = async {
        let caller = admit(&state, &headers, None, Operation::Stats).await?;
        find(&state, &caller, &code, &uri).await?;
        Ok(json(empty_page(&uri)?))
    }
    .await;
    finish(&state, "visits-list", answer)
}

/// The visits of a tag, a domain, orphan and non-orphan visits: an empty page.
pub async fn other(State(state): State<Arc<HttpState>>, headers: HeaderMap, uri: Uri) -> Response {
    let answer = async {
        admit(&state, &headers, None, Operation::Stats).await?;
        Ok(json(empty_page(&uri)?))
    }
    .await;
    finish(&state, "visits-list", answer)
}
