//! Link management over HTTP: list, edit, history, export.

use super::wire::{
    EventJson, LinkAnswer, LinkJson, ListParams, PageJson, patch_input, read_body_up_to,
};
use super::{admit, bytes_stream, code, link_named, named};
use crate::access::Operation;
use crate::domain::rules::ApiRules;
use crate::domain::{Error, LinkPatch, PublicBase};
use crate::http::{ApiError, HttpState};
use axum::body::{Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use std::sync::Arc;
use tokio::sync::mpsc;

/// `GET /api/v1/links`: one page, newest first, and the cursor of the next.
pub async fn list(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::List).await?;
    let input = ListParams::parse(&uri)?;
    if input.format.is_some() {
        return Err(Error::bad_request(
            "invalid_query_parameter",
            "format is a parameter of the export",
        )
        .into());
    }
    let page = state
        .links
        .list(&caller, &input.into_input(&state.rules)?)
        .await?;
    let body = PageJson {
        links: page
            .links
            .iter()
            .map(|l| LinkJson::new(&state.public, l))
            .collect(),
        next_cursor: page.next_cursor.as_deref(),
    };
    Ok(([(header::CACHE_CONTROL, "no-store")], axum::Json(body)).into_response())
}

/// `PATCH /api/v1/links/{code}`: a JSON merge patch of `url`, `expires_at`, `tags`,
/// `disabled` and `max_visits`; answers the link as it is now (to a key without `links:read`,
/// only its code and short URL).
pub async fn update(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    uri: Uri,
    body: Body,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::Update).await?;
    let code = code(&state, path, &uri)?;
    let bytes = read_body_up_to(
        &headers,
        body,
        &["application/merge-patch+json", "application/json"],
        crate::domain::link_body_limit(state.rules.max_url_length),
    )
    .await?;
    let patch = LinkPatch::parse(patch_input(&bytes)?, &state.rules, Utc::now())?;
    let link = state
        .links
        .update(&caller, &code, &patch)
        .await
        .map_err(named(&code))?;
    Ok(axum::Json(LinkAnswer::to(&caller, false, &state.public, &link)).into_response())
}

/// `GET /api/v1/links/{code}/history`: every event, oldest first (the latest ones, and
/// `truncated`, for a link changed more often than an answer holds).
pub async fn history(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    uri: Uri,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::History).await?;
    let code = code(&state, path, &uri)?;
    let (events, truncated) = state
        .links
        .history(&caller, &code)
        .await
        .map_err(named(&code))?;
    let events: Vec<EventJson<'_>> = events.iter().map(EventJson::new).collect();
    Ok(axum::Json(serde_json::json!({ "events": events, "truncated": truncated })).into_response())
}

/// The query of `GET /api/v1/links/{code}/qr`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct QrParams {
    /// Read by [`code`].
    #[serde(default)]
    #[allow(dead_code)]
    domain: Option<String>,
    #[serde(default)]
    format: Option<String>,
    #[serde(default)]
    size: Option<u32>,
    #[serde(default)]
    margin: Option<u32>,
    #[serde(default)]
    ecc: Option<String>,
}

/// `GET /api/v1/links/{code}/qr?format=svg|png&size=&margin=&ecc=`: the QR code of the link's
/// short URL. The image of a code never changes while the public URL stays, so it carries a
/// strong `ETag` and may be kept a day (privately: it needs a key).
pub async fn qr(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    uri: Uri,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::Read).await?;
    let params: QrParams = axum::extract::Query::try_from_uri(&uri)
        .map(|q| q.0)
        .map_err(|e| {
            Error::bad_request(
                "invalid_query_parameter",
                format!("invalid query: {}", e.body_text()),
            )
        })?;
    let options = crate::qr::QrOptions::parse(
        params.format.as_deref(),
        params.size,
        params.margin,
        params.ecc.as_deref(),
    )?;
    let link = link_named(&state, &caller, path, &uri).await?;
    let text = state.public.link_url(&link);
    let etag = options.etag(&text);
    let cache = [
        (header::ETAG, etag.clone()),
        (header::CACHE_CONTROL, "private, max-age=86400".to_string()),
    ];
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    if matches {
        return Ok((StatusCode::NOT_MODIFIED, cache).into_response());
    }
    let image = crate::qr::render(&text, &options)?;
    Ok((
        StatusCode::OK,
        cache,
        [(header::CONTENT_TYPE, options.format.content_type())],
        image,
    )
        .into_response())
}

/// The columns of a CSV export, which a CSV import reads back: the link, then its routing
/// (`rules` and `variants` as JSON text, empty when unset), then whether it is password
/// protected (its password never leaves the store, so an import refuses such a row, as it
/// refuses a disabled or deleted one, rather than make it an open link). The preview's columns are
/// `preview_title`, `preview_description` and `preview_image` rather than the API's `title`,
/// ...: Bitly, Shlink and YOURLS exports have a `title` column that names the link, which
/// must not import as a social preview.
const CSV_COLUMNS: [&str; 25] = [
    "code",
    "url",
    "tags",
    "created_at",
    "expires_at",
    "max_visits",
    "state",
    "short_url",
    "tenant",
    "clicks",
    "domain",
    "rules",
    "ios",
    "android",
    "variants",
    "utm_source",
    "utm_medium",
    "utm_campaign",
    "utm_term",
    "utm_content",
    "pass_query",
    "preview_title",
    "preview_description",
    "preview_image",
    "protected",
];

/// `GET /api/v1/links/export?format=ndjson|csv`: every link of the list (filters as in
/// `GET /api/v1/links`), from one snapshot, streamed. A failure midway ends the stream with an
/// error line (NDJSON) and a broken transfer, never a silently short file.
pub async fn export(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::Export).await?;
    let params = ListParams::parse(&uri)?;
    let csv = match params.format.as_deref() {
        None | Some("ndjson") => false,
        Some("csv") => true,
        Some(_) => {
            return Err(
                Error::bad_request("invalid_format", "format must be ndjson or csv").into(),
            );
        }
    };
    let input = params.into_input(&state.rules)?;
    if input.cursor.is_some() || input.limit.is_some() {
        return Err(Error::bad_request(
            "invalid_query_parameter",
            "an export has every link of the list: it takes no cursor or limit",
        )
        .into());
    }
    let mut batches = state.links.export(&caller, &input)?;
    let (tx, rx) = mpsc::channel::<Bytes>(1);
    let public = state.public.clone();
    tokio::spawn(async move {
        let mut out = Vec::new();
        if csv {
            out.extend_from_slice(CSV_COLUMNS.join(",").as_bytes());
            out.push(b'\n');
        }
        // One buffer per batch of links, sent as one chunk of the body.
        while let Some(next) = batches.recv().await {
            match next {
                Ok(links) => {
                    let now = Utc::now();
                    out.reserve(links.len() * 512);
                    for link in &links {
                        if csv {
                            csv_row(&mut out, &public, link, now);
                        } else {
                            // Writing into a Vec cannot fail.
                            let _ =
                                serde_json::to_writer(&mut out, &LinkJson::at(&public, link, now));
                            out.push(b'\n');
                        }
                    }
                }
                Err(error) => {
                    if !csv {
                        let line = serde_json::json!({ "error": error.code(), "message": error.public_message() });
                        out.extend_from_slice(line.to_string().as_bytes());
                        out.push(b'\n');
                    }
                    let _ = tx.send(Bytes::from(std::mem::take(&mut out))).await;
                    // An empty chunk marks the failure: the stream ends in an error.
                    let _ = tx.send(Bytes::new()).await;
                    return;
                }
            }
            if tx
                .send(Bytes::from(std::mem::take(&mut out)))
                .await
                .is_err()
            {
                return;
            }
        }
        if !out.is_empty() {
            let _ = tx.send(Bytes::from(out)).await;
        }
    });
    let content_type = if csv {
        "text/csv; charset=utf-8"
    } else {
        "application/x-ndjson"
    };
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-store"),
        ],
        Body::from_stream(bytes_stream(rx, None)),
    )
        .into_response())
}

/// One link as a CSV row of [`CSV_COLUMNS`], its state as of `now`.
fn csv_row(
    out: &mut Vec<u8>,
    public: &PublicBase,
    link: &crate::domain::Link,
    now: chrono::DateTime<Utc>,
) {
    let time = |t: chrono::DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let routes = &link.routes;
    fn text(value: &Option<String>) -> &str {
        value.as_deref().unwrap_or_default()
    }
    // Writing JSON into a String cannot fail.
    let rules = if routes.rules.is_empty() {
        String::new()
    } else {
        serde_json::to_string(&ApiRules(&routes.rules)).unwrap_or_default()
    };
    let variants = if routes.variants.is_empty() {
        String::new()
    } else {
        serde_json::to_string(&routes.variants).unwrap_or_default()
    };
    let (utm, preview) = (&routes.utm, &routes.preview);
    let mut writer = csv::Writer::from_writer(out);
    let cells = [
        link.shown_code(),
        link.url.as_str(),
        &link.tags.join("|"),
        &time(link.created_at),
        &link.expires_at.map(time).unwrap_or_default(),
        &link.max_visits.map(|n| n.to_string()).unwrap_or_default(),
        link.state(now).name(),
        &public.link_url(link),
        link.tenant.as_str(),
        &link.clicks.human.to_string(),
        link.domain.as_deref().unwrap_or(public.host_str()),
        &rules,
        text(&routes.ios),
        text(&routes.android),
        &variants,
        text(&utm.source),
        text(&utm.medium),
        text(&utm.campaign),
        text(&utm.term),
        text(&utm.content),
        if routes.pass_query { "true" } else { "false" },
        text(&preview.title),
        text(&preview.description),
        text(&preview.image),
        if link.password.is_some() {
            "true"
        } else {
            "false"
        },
    ];
    let _ = writer.write_record(
        cells
            .map(super::cells::exported)
            .iter()
            .map(|c| c.as_bytes()),
    );
    let _ = writer.flush();
}
