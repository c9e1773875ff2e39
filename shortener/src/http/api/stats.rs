//! Click statistics over HTTP: `GET /api/v1/links/{code}/stats` and `GET /api/v1/stats`, as
//! JSON or (`format=csv`) the series as CSV for spreadsheets. A JSON answer says how far it
//! reaches: `as_of`, before which every visit this node counted is in, and how often the node
//! writes newer ones (`flush_interval_ms`).

use super::{admit, code, named};
use crate::access::Operation;
use crate::domain::{Error, StatsInput, StatsReport};
use crate::http::{ApiError, HttpState};
use crate::visits::analytics::Freshness;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, SecondsFormat};
use serde_json::{Value, json};
use std::sync::Arc;

/// The query of both stats endpoints (`tag` only on the tenant's, `domain` only on a link's).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StatsParams {
    /// A link's domain (read by the code's parse); refused on the tenant's stats.
    #[serde(default)]
    domain: Option<String>,
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    to: Option<String>,
    #[serde(default)]
    granularity: Option<String>,
    #[serde(default)]
    top: Option<usize>,
    #[serde(default)]
    format: Option<String>,
    #[serde(default)]
    tag: Option<String>,
}

/// How a report is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Csv,
}

impl StatsParams {
    fn parse(uri: &Uri) -> Result<(Self, Format), Error> {
        let params: Self = axum::extract::Query::try_from_uri(uri)
            .map(|q| q.0)
            .map_err(|e| {
                Error::bad_request(
                    "invalid_query_parameter",
                    format!("invalid query: {}", e.body_text()),
                )
            })?;
        let format = match params.format.as_deref() {
            None | Some("json") => Format::Json,
            Some("csv") => Format::Csv,
            Some(other) => {
                return Err(Error::bad_request(
                    "invalid_query_parameter",
                    format!(
                        "format must be json or csv, not {}",
                        crate::domain::echo(other)
                    ),
                ));
            }
        };
        Ok((params, format))
    }

    fn input(&self) -> StatsInput {
        StatsInput {
            from: self.from.clone(),
            to: self.to.clone(),
            granularity: self.granularity.clone(),
            top: self.top,
        }
    }
}

/// `GET /api/v1/links/{code}/stats?from=&to=&granularity=hour|day&top=&format=json|csv`.
pub async fn link_stats(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    uri: Uri,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::Stats).await?;
    let (params, format) = StatsParams::parse(&uri)?;
    if params.tag.is_some() {
        return Err(Error::bad_request(
            "invalid_query_parameter",
            "tag is a parameter of /api/v1/stats, not of one link's stats",
        )
        .into());
    }
    let code = code(&state, path, &uri)?;
    let (freshness, report) = state
        .stats
        .link(&caller, &code, params.input())
        .await
        .map_err(named(&code))?;
    Ok(render(&report, freshness, format, false, code.shown()))
}

/// `GET /api/v1/stats?tag=&from=&to=&granularity=&top=&format=`: the caller's tenant's clicks
/// (or those of its links with the tag) and its top links.
pub async fn tenant_stats(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::Stats).await?;
    let (params, format) = StatsParams::parse(&uri)?;
    if params.domain.is_some() {
        // The tenant's report covers every domain; a filter it would not apply is refused
        // rather than answered with the whole tenant's numbers.
        return Err(Error::bad_request(
            "invalid_query_parameter",
            "domain is a parameter of one link's stats (/api/v1/links/{code}/stats), not of \
             /api/v1/stats, which covers every domain of the tenant; use tag to narrow it",
        )
        .into());
    }
    let (freshness, report) = state
        .stats
        .tenant(&caller, params.tag.clone(), params.input())
        .await?;
    Ok(render(&report, freshness, format, true, "tenant"))
}

fn time(at: i64) -> String {
    DateTime::from_timestamp(at, 0)
        .unwrap_or(DateTime::UNIX_EPOCH)
        .to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn render(
    report: &StatsReport,
    freshness: Freshness,
    format: Format,
    links: bool,
    name: &str,
) -> Response {
    if format == Format::Csv {
        let mut text = String::from("at,human,bot,head\r\n");
        for point in &report.series {
            let c = point.counts;
            text.push_str(&format!(
                "{},{},{},{}\r\n",
                time(point.at),
                c.human,
                c.bot,
                c.head
            ));
        }
        return (
            [
                (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
                (header::CACHE_CONTROL, "no-store".to_string()),
                (
                    header::CONTENT_DISPOSITION,
                    format!("attachment; filename=\"stats-{name}.csv\""),
                ),
            ],
            text,
        )
            .into_response();
    }
    let t = report.totals;
    let mut body = json!({
        "totals": { "human": t.human, "bot": t.bot, "head": t.head },
        "series": report.series.iter().map(|p| json!({
            "at": time(p.at), "human": p.counts.human, "bot": p.counts.bot, "head": p.counts.head,
        })).collect::<Vec<Value>>(),
        "referrers": report.referrers.iter()
            .map(|(host, visits)| json!({ "host": host, "visits": visits }))
            .collect::<Vec<Value>>(),
        "devices": report.devices.iter()
            .map(|(device, visits)| json!({ "device": device, "visits": visits }))
            .collect::<Vec<Value>>(),
        "countries": report.countries.iter()
            .map(|(country, visits)| json!({ "country": country, "visits": visits }))
            .collect::<Vec<Value>>(),
        "as_of": time(freshness.as_of),
        "flush_interval_ms": freshness.flush_interval.map(|d| d.as_millis() as u64),
    });
    if !links {
        body["routes"] = report
            .routes
            .iter()
            .map(|(route, visits)| json!({ "route": route, "visits": visits }))
            .collect();
    }
    if links {
        body["links"] = report
            .links
            .iter()
            .map(|(code, visits)| json!({ "code": code, "visits": visits }))
            .collect();
    }
    ([(header::CACHE_CONTROL, "no-store")], axum::Json(body)).into_response()
}
