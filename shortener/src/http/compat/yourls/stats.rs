//! YOURLS's `stats` and `db-stats`: one pass over the caller's tenant's links (an export,
//! bounded like one), keeping the links a `filter` asks for and the totals.

use super::actions::{NEED_FORMAT, clicks, link_fields};
use super::answer::{Answer, Value};
use super::{Outcome, refusal};
use crate::domain::{Caller, Error, Link, ListInput};
use crate::http::HttpState;
use crate::http::compat::{Params, outcome};
use rand::Rng;

/// The most links `stats` lists (`limit`), and the furthest it starts (`start`).
pub const MAX_STATS_LIMIT: usize = 1000;

/// Which links `stats` lists (`filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Filter {
    Top,
    Bottom,
    Rand,
    Last,
}

/// The caller's tenant's links that are not deleted, walked once (an export: bounded like
/// one), keeping `keep` of them by `filter` (none for `db-stats`), and the totals.
struct Walk {
    links: Vec<Link>,
    total_links: u64,
    total_clicks: u64,
}

async fn walk(
    state: &HttpState,
    caller: &Caller,
    filter: Filter,
    keep: usize,
) -> Result<Walk, Error> {
    let mut export = state.links.export(caller, &ListInput::default())?;
    let mut out = Walk {
        links: Vec::new(),
        total_links: 0,
        total_clicks: 0,
    };
    while let Some(page) = export.recv().await {
        for link in page? {
            if link.deleted_at.is_some() {
                continue;
            }
            out.total_links += 1;
            out.total_clicks = out.total_clicks.saturating_add(clicks(&link));
            match filter {
                // The list is newest first.
                Filter::Last if out.links.len() < keep => out.links.push(link),
                Filter::Last => {}
                // Reservoir sampling: each link is kept with the same chance.
                Filter::Rand if out.links.len() < keep => out.links.push(link),
                Filter::Rand => {
                    // A fresh handle each time: the walk's future must stay `Send`.
                    let slot = rand::rng().random_range(0..out.total_links) as usize;
                    if slot < keep {
                        out.links[slot] = link;
                    }
                }
                Filter::Top | Filter::Bottom => out.links.push(link),
            }
        }
        if matches!(filter, Filter::Top | Filter::Bottom) && out.links.len() > 2 * keep {
            sort_by_clicks(&mut out.links, filter);
            out.links.truncate(keep);
        }
    }
    sort_by_clicks(&mut out.links, filter);
    out.links.truncate(keep);
    Ok(out)
}

/// Most clicked first (`top`), least clicked first (`bottom`); newer first among equals.
fn sort_by_clicks(links: &mut [Link], filter: Filter) {
    match filter {
        Filter::Top => links.sort_by(|a, b| {
            clicks(b)
                .cmp(&clicks(a))
                .then(b.created_at.cmp(&a.created_at))
        }),
        Filter::Bottom => links.sort_by(|a, b| {
            clicks(a)
                .cmp(&clicks(b))
                .then(b.created_at.cmp(&a.created_at))
        }),
        Filter::Rand | Filter::Last => {}
    }
}

fn totals(walk: &Walk) -> Value {
    Value::Map(vec![
        ("total_links".into(), walk.total_links.to_string().into()),
        ("total_clicks".into(), walk.total_clicks.to_string().into()),
    ])
}

/// `action=stats`: `filter` (`top`, the default, `bottom`, `rand` or `random`, `last`),
/// `limit` (up to [`MAX_STATS_LIMIT`]; none lists none, as in YOURLS) and `start`.
pub async fn stats(state: &HttpState, caller: &Caller, params: &Params) -> Outcome {
    let filter = match params.get("filter").unwrap_or_default() {
        "" | "top" => Filter::Top,
        "bottom" => Filter::Bottom,
        "rand" | "random" => Filter::Rand,
        "last" => Filter::Last,
        other => {
            let message = format!(
                "filter must be top, bottom, rand or last, not {}",
                crate::domain::echo(other)
            );
            return (stats_refusal(message), "invalid");
        }
    };
    let number = |name: &str| -> Result<usize, Answer> {
        match params.non_empty(name) {
            None => Ok(0),
            Some(text) => text
                .parse::<usize>()
                .ok()
                .filter(|n| *n <= MAX_STATS_LIMIT)
                .ok_or_else(|| {
                    stats_refusal(format!(
                        "{name} must be a number from 0 to {MAX_STATS_LIMIT}, not {}",
                        crate::domain::echo(text)
                    ))
                }),
        }
    };
    let (limit, start) = match (number("limit"), number("start")) {
        (Ok(limit), Ok(start)) => (limit, start),
        (Err(answer), _) | (_, Err(answer)) => return (answer, "invalid"),
    };
    let keep = if limit == 0 { 0 } else { start + limit };
    let walked = match walk(state, caller, filter, keep).await {
        Ok(walked) => walked,
        Err(error) => return (refusal(&error), outcome(&error)),
    };
    let listed: Vec<(String, Value)> = walked
        .links
        .iter()
        .skip(start)
        .enumerate()
        .map(|(i, link)| (format!("link_{}", i + 1), link_fields(state, link)))
        .collect();
    let mut fields = Vec::new();
    if !listed.is_empty() {
        fields.push(("links", Value::Map(listed)));
    }
    fields.extend([
        ("stats", totals(&walked)),
        ("statusCode", 200u64.into()),
        ("message", "success".into()),
    ]);
    (Answer::new(fields, NEED_FORMAT), "ok")
}

fn stats_refusal(message: String) -> Answer {
    Answer::error(axum::http::StatusCode::BAD_REQUEST, message)
}

/// `action=db-stats`: the caller's tenant's links (not deleted) and their clicks.
pub async fn db_stats(state: &HttpState, caller: &Caller) -> Outcome {
    match walk(state, caller, Filter::Last, 0).await {
        Ok(walked) => (
            Answer::new(
                vec![
                    ("db-stats", totals(&walked)),
                    ("statusCode", 200u64.into()),
                    ("message", "success".into()),
                ],
                NEED_FORMAT,
            ),
            "ok",
        ),
        Err(error) => (refusal(&error), outcome(&error)),
    }
}
