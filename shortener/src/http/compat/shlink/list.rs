//! `GET /rest/v3/short-urls`: Shlink's numbered pages over our keyset lists. Shlink counts
//! its pages (`page`, `pagesCount`, `totalItems`), so the list is one pass over the caller's
//! links (an export, bounded and charged like one), keeping only the links up to the end of
//! the page asked for; a page may end at most [`MAX_DEPTH`] links in.

use super::body::parse_date;
use super::short_urls::short_url;
use super::{Answer, Fail, Problem, admit, finish, json, query_pairs};
use crate::access::Operation;
use crate::domain::{Caller, DomainFilter, Link, ListInput};
use crate::http::HttpState;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use chrono::Utc;
use serde_json::json;
use std::cmp::Ordering;
use std::sync::Arc;

/// The furthest into a list a page may end (`page` × `itemsPerPage`).
pub const MAX_DEPTH: usize = 10_000;
/// The page size when none is asked for (Shlink's).
const DEFAULT_ITEMS: usize = 10;
/// The most tags a list may filter by (each is compared with every link's tags).
pub const MAX_FILTER_TAGS: usize = 100;

/// Every link of the caller's (filtered by `input`) that is not deleted, one at a time.
pub async fn walk(
    state: &HttpState,
    caller: &Caller,
    input: &ListInput,
    mut each: impl FnMut(Link) + Send,
) -> Result<(), Fail> {
    let mut export = state.links.export(caller, input)?;
    while let Some(page) = export.recv().await {
        for link in page? {
            if link.deleted_at.is_none() {
                each(link);
            }
        }
    }
    Ok(())
}

/// How the list is ordered (`orderBy=field-DIR`).
#[derive(Debug, Clone, Copy)]
struct Order {
    field: &'static str,
    ascending: bool,
}

impl Order {
    fn parse(text: Option<&str>) -> Result<Self, Fail> {
        let Some(text) = text.filter(|t| !t.is_empty()) else {
            return Ok(Order {
                field: "dateCreated",
                ascending: false,
            });
        };
        let (field, dir) = text.split_once('-').unwrap_or((text, "ASC"));
        let field = [
            "dateCreated",
            "shortCode",
            "longUrl",
            "title",
            "visits",
            "nonBotVisits",
        ]
        .into_iter()
        .find(|f| *f == field);
        match (field, dir) {
            (Some(field), "ASC" | "DESC") => Ok(Order {
                field,
                ascending: dir == "ASC",
            }),
            _ => Err(Problem::invalid_data(
                "orderBy",
                "orderBy must be dateCreated, shortCode, longUrl, title, visits or \
                 nonBotVisits, then -ASC or -DESC",
            )
            .into()),
        }
    }

    fn compare(self, a: &Link, b: &Link) -> Ordering {
        let order = match self.field {
            "shortCode" => a.shown_code().cmp(b.shown_code()),
            "longUrl" => a.url.cmp(&b.url),
            "title" => a.routes.preview.title.cmp(&b.routes.preview.title),
            "visits" => (a.clicks.human + a.clicks.bot).cmp(&(b.clicks.human + b.clicks.bot)),
            "nonBotVisits" => a.clicks.human.cmp(&b.clicks.human),
            _ => a.created_at.cmp(&b.created_at),
        }
        .then(a.created_at.cmp(&b.created_at))
        .then(a.code.cmp(&b.code));
        if self.ascending {
            order
        } else {
            order.reverse()
        }
    }
}

/// The checked query of a list.
struct Query {
    input: ListInput,
    tags: Vec<String>,
    all_tags: bool,
    /// The tags asked for can match no link (a tag no link can carry, required, or only such
    /// tags): an empty page, as Shlink answers a tag nobody used, not a refusal.
    nothing: bool,
    search: Option<String>,
    exclude_expired: bool,
    exclude_spent: bool,
    order: Order,
    page: usize,
    per_page: usize,
}

fn number(pairs: &[(String, String)], name: &str) -> Result<Option<i64>, Fail> {
    match value(pairs, name) {
        None => Ok(None),
        Some(text) => text.parse().map(Some).map_err(|_| {
            Problem::invalid_data(name, format!("{name} must be a whole number")).into()
        }),
    }
}

fn value<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .rev()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

fn date(pairs: &[(String, String)], name: &str) -> Result<Option<chrono::DateTime<Utc>>, Fail> {
    value(pairs, name)
        .map(|text| {
            parse_date(text).ok_or_else(|| {
                Problem::invalid_data(name, format!("{name} must be an ISO 8601 date")).into()
            })
        })
        .transpose()
}

impl Query {
    fn parse(state: &HttpState, uri: &Uri) -> Result<Self, Fail> {
        let pairs = query_pairs(uri);
        let page = number(&pairs, "page")?.unwrap_or(1);
        let per_page = match number(&pairs, "itemsPerPage")? {
            None => DEFAULT_ITEMS as i64,
            // Shlink's "every item": as many as a page may reach.
            Some(-1) => MAX_DEPTH as i64,
            Some(n) => n,
        };
        if per_page < 1 || per_page as usize > MAX_DEPTH {
            return Err(Problem::invalid_data(
                "itemsPerPage",
                format!("itemsPerPage must be 1 to {MAX_DEPTH}, or -1"),
            )
            .into());
        }
        if page < 1 || (page as usize).saturating_mul(per_page as usize) > MAX_DEPTH {
            return Err(Problem::invalid_data(
                "page",
                format!("page must be 1 or more, and end at most {MAX_DEPTH} short URLs in"),
            )
            .into());
        }
        let tags: Vec<String> = pairs
            .iter()
            .filter(|(n, v)| (n == "tags[]" || n == "tags") && !v.is_empty())
            .map(|(_, v)| v.clone())
            .collect();
        if tags.len() > MAX_FILTER_TAGS {
            return Err(Problem::invalid_data(
                "tags",
                format!("a list filters by at most {MAX_FILTER_TAGS} tags"),
            )
            .into());
        }
        let all_tags = match value(&pairs, "tagsMode") {
            None | Some("any") => false,
            Some("all") => true,
            Some(_) => {
                return Err(
                    Problem::invalid_data("tagsMode", "tagsMode must be any or all").into(),
                );
            }
        };
        // Read as a create reads them (`Summer Sale` is `summer-sale`); a tag of a form no
        // link's tags have still matches nothing.
        let asked = tags.len();
        let tags: Vec<String> = tags
            .iter()
            .map(|t| crate::domain::peer_tag(t))
            .filter(|t| crate::domain::check_tag(t).is_ok())
            .collect();
        let (start, end) = (date(&pairs, "startDate")?, date(&pairs, "endDate")?);
        // Shlink's `endDate` is inclusive, ours exclusive: a microsecond past it (the
        // precision of a link's creation time on PostgreSQL; SQLite's milliseconds round an
        // exclusive bound up) includes what Shlink includes.
        let end = end.map(|end| end + chrono::Duration::microseconds(1));
        // A range that ends before it starts matches nothing (Shlink answers it empty).
        let reversed = matches!((start, end), (Some(start), Some(end)) if start >= end);
        let nothing =
            reversed || (asked > 0 && (tags.is_empty() || (all_tags && tags.len() < asked)));
        let domain = value(&pairs, "domain").map(|d| {
            if d == "DEFAULT" {
                Ok(Some(DomainFilter::Default))
            } else {
                DomainFilter::of(Some(d), &state.rules)
            }
        });
        let input = ListInput {
            created_after: start,
            created_before: end,
            domain: domain.transpose()?.flatten(),
            // One tag (or every tag asked for) narrows the pass itself.
            tag: (tags.len() == 1 || all_tags)
                .then(|| tags.first().cloned())
                .flatten(),
            ..ListInput::default()
        };
        Ok(Query {
            input,
            tags,
            all_tags,
            nothing,
            search: value(&pairs, "searchTerm").map(str::to_lowercase),
            exclude_expired: value(&pairs, "excludePastValidUntil") == Some("true"),
            exclude_spent: value(&pairs, "excludeMaxVisitsReached") == Some("true"),
            order: Order::parse(value(&pairs, "orderBy"))?,
            page: page as usize,
            per_page: per_page as usize,
        })
    }

    /// Whether `link` is listed (the filters the pass does not apply itself).
    fn keeps(&self, link: &Link, now: chrono::DateTime<Utc>) -> bool {
        let tagged = |t: &String| link.tags.contains(t);
        if !self.tags.is_empty()
            && !(if self.all_tags {
                self.tags.iter().all(tagged)
            } else {
                self.tags.iter().any(tagged)
            })
        {
            return false;
        }
        if self.exclude_expired && link.expires_at.is_some_and(|at| at <= now) {
            return false;
        }
        if self.exclude_spent && link.max_visits.is_some_and(|max| link.clicks.human >= max) {
            return false;
        }
        match &self.search {
            None => true,
            Some(term) => {
                let has = |text: &str| text.to_lowercase().contains(term.as_str());
                has(&link.url)
                    || has(link.shown_code())
                    || link.routes.preview.title.as_deref().is_some_and(has)
                    || link.tags.iter().any(|t| has(t))
            }
        }
    }
}

/// `GET /rest/v3/short-urls`: `page`, `itemsPerPage` (-1: as many as a page may reach),
/// `searchTerm` (in the long URL, short code, title and tags), `tags[]` with `tagsMode`,
/// `orderBy`, `startDate`, `endDate`, `excludeMaxVisitsReached`, `excludePastValidUntil`,
/// `domain`.
pub async fn list(State(state): State<Arc<HttpState>>, headers: HeaderMap, uri: Uri) -> Response {
    let answer = async {
        let caller = admit(&state, &headers, None, Operation::Export).await?;
        let query = Query::parse(&state, &uri)?;
        page(&state, &caller, &query).await
    }
    .await;
    finish(&state, "list", answer)
}

async fn page(state: &HttpState, caller: &Caller, query: &Query) -> Answer {
    if query.nothing {
        return Ok(json(json!({
            "shortUrls": {
                "data": [],
                "pagination": pagination(query.page, query.per_page, 0, 0),
            }
        })));
    }
    let keep = query.page * query.per_page;
    let now = Utc::now();
    let mut total = 0usize;
    let mut kept: Vec<Link> = Vec::new();
    let order = query.order;
    walk(state, caller, &query.input, |link| {
        if !query.keeps(&link, now) {
            return;
        }
        total += 1;
        kept.push(link);
        if kept.len() > 2 * keep {
            kept.sort_by(|a, b| order.compare(a, b));
            kept.truncate(keep);
        }
    })
    .await?;
    kept.sort_by(|a, b| order.compare(a, b));
    kept.truncate(keep);
    let data: Vec<_> = kept
        .iter()
        .skip((query.page - 1) * query.per_page)
        .map(|link| short_url(state, link))
        .collect();
    Ok(json(json!({
        "shortUrls": {
            "data": data,
            "pagination": pagination(query.page, query.per_page, data.len(), total),
        }
    })))
}

/// Shlink's pagination block.
pub fn pagination(page: usize, per_page: usize, in_page: usize, total: usize) -> serde_json::Value {
    json!({
        "currentPage": page,
        "pagesCount": total.div_ceil(per_page),
        "itemsPerPage": per_page,
        "itemsInCurrentPage": in_page,
        "totalItems": total,
    })
}
