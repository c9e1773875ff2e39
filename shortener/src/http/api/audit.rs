//! `GET /api/v1/audit`: the audit log, a page at a time or exported as NDJSON or CSV.

use super::{admit, bytes_stream};
use crate::access::Operation;
use crate::audit::{AuditQuery, Entry, Format};
use crate::domain::Error;
use crate::http::{ApiError, HttpState};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Uri, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// The longest an export may run; past it the transfer breaks off (so a reader never takes a
/// cut export for a whole one).
const EXPORT_DEADLINE: Duration = Duration::from_secs(60);
/// The longest query string taken, in bytes.
const MAX_QUERY_BYTES: usize = 4096;

/// `GET /api/v1/audit?action=&kind=&object=&actor=&tenant=&since=&until=&cursor=&limit=&format=`
/// (`audit:read`): the caller's tenant's entries (every tenant's for `admin`), newest first;
/// `format=ndjson|csv` streams them all (at most `EXPORT_MAX_ROWS`; `MAX_EXPORTS` at once per
/// node, more answer `429`).
pub async fn audit(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::AuditRead).await?;
    let raw = uri.query().unwrap_or_default();
    if raw.len() > MAX_QUERY_BYTES {
        return Err(Error::bad_request(
            "invalid_query_parameter",
            format!("the query is longer than {MAX_QUERY_BYTES} bytes"),
        )
        .into());
    }
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(raw.as_bytes())
        .into_owned()
        .collect();
    let query = AuditQuery::parse(pairs.iter().map(|(n, v)| (n.as_str(), v.as_str())))?;
    if query.format == Format::Page {
        let page = state.audit.page(&caller, &query).await?;
        let entries: Vec<serde_json::Value> =
            page.entries.iter().map(crate::audit::entry_json).collect();
        let body = serde_json::json!({ "entries": entries, "next_cursor": page.next_cursor });
        return Ok(([(header::CACHE_CONTROL, "no-store")], axum::Json(body)).into_response());
    }
    // Refused before the stream starts, as a page would be.
    query.filter(&caller)?;
    let place = state.audit.export_place(&caller)?;
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    let format = query.format;
    // The whole transfer, a reader that takes it slowly included: past it the producer gives up
    // its place and the body breaks off (never ended as if whole).
    let deadline = tokio::time::Instant::now() + EXPORT_DEADLINE;
    tokio::spawn(async move {
        let _place = place;
        // Every hand-over waits until the deadline at most.
        let send = |tx: mpsc::Sender<Bytes>, chunk: Bytes| async move {
            tokio::time::timeout_at(deadline, tx.send(chunk))
                .await
                .is_ok_and(|sent| sent.is_ok())
        };
        if format == Format::Csv {
            let mut head = Vec::new();
            write_csv(&mut head, crate::audit::CSV_COLUMNS.iter().copied());
            if !send(tx.clone(), Bytes::from(head)).await {
                return;
            }
        }
        let sent = crate::audit::export_rows(&state.audit, &caller, &query, deadline, |rows| {
            let chunk = Bytes::from(lines(format, &rows));
            let tx = tx.clone();
            async move { chunk.is_empty() || send(tx, chunk).await }
        })
        .await;
        match sent {
            Ok(Some(cursor)) if format == Format::Ndjson => {
                let line = format!("{}\n", serde_json::json!({ "next_cursor": cursor }));
                send(tx, Bytes::from(line)).await;
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "an audit export broke off");
                // An empty chunk breaks the transfer off.
                send(tx, Bytes::new()).await;
            }
        }
    });
    let content_type = match format {
        Format::Csv => "text/csv; charset=utf-8",
        _ => "application/x-ndjson",
    };
    Ok((
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-store"),
        ],
        Body::from_stream(bytes_stream(rx, Some(deadline))),
    )
        .into_response())
}

/// `rows` as NDJSON lines or CSV rows.
fn lines(format: Format, rows: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    for row in rows {
        if format == Format::Csv {
            let fields = crate::audit::csv_fields(row);
            write_csv(&mut out, fields.iter().map(String::as_str));
        } else {
            out.extend_from_slice(crate::audit::entry_json(row).to_string().as_bytes());
            out.push(b'\n');
        }
    }
    out
}

fn write_csv<'a>(out: &mut Vec<u8>, fields: impl Iterator<Item = &'a str>) {
    let mut writer = csv::Writer::from_writer(out);
    let fields: Vec<_> = fields.map(super::cells::exported).collect();
    // Writing into memory cannot fail.
    let _ = writer.write_record(fields.iter().map(|c| c.as_bytes()));
    let _ = writer.flush();
}
