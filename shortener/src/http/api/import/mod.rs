//! `POST /api/v1/links/import`: NDJSON or CSV rows in, one NDJSON result per row out, then a
//! summary.
//!
//! The body is read as it arrives and turned into a stream of rows (CSV and NDJSON records,
//! column mappings of other shorteners' exports) for the import pipeline
//! ([`crate::links::LinkService::import_rows`]), which checks and writes them a chunk at a time;
//! each chunk's results become one buffer of answer lines. A client that reads nothing until
//! it has sent everything should ask for `?results=errors`, which answers only the rows refused
//! (and the summary), so that the answer never waits on a client that is not reading it.

mod ndjson;
mod routing;
mod rows;

use super::admit;
use super::records::{MAX_RECORD, Record, Splitter};
use super::wire::media_type;
use crate::access::Operation;
use crate::domain::{Error, PublicBase};
use crate::http::{ApiError, HttpState};
use crate::links::{
    ImportEvent, ImportSettings, ImportStop, ImportSummary, InputRow, RowResult, RowStatus,
    import_idle,
};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use ndjson::ndjson_row;
use rows::Columns;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

/// The query of an import.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportParams {
    #[serde(default)]
    dry_run: Option<String>,
    #[serde(default)]
    results: Option<String>,
    /// The branded domain the links go on (absent: each row's own).
    #[serde(default)]
    domain: Option<String>,
    /// Hosts a row's `domain` may name that mean the default domain, comma-separated.
    #[serde(default)]
    default_hosts: Option<String>,
}

/// How rows are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Ndjson,
    Csv,
}

/// `POST /api/v1/links/import`.
pub async fn import(
    State(state): State<Arc<HttpState>>,
    request: axum::extract::Request,
) -> Response {
    match start(state, request).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn start(
    state: Arc<HttpState>,
    request: axum::extract::Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let caller = admit(&state, &parts.headers, Operation::Import).await?;
    // A place among the imports running, before anything of the body is read.
    let place = state.links.admit_import(&caller)?;
    let params: ImportParams = axum::extract::Query::try_from_uri(&parts.uri)
        .map(|q| q.0)
        .map_err(|e| {
            Error::bad_request(
                "invalid_query_parameter",
                format!("invalid query: {}", e.body_text()),
            )
        })?;
    let flag = |name: &str, value: Option<&str>| match value {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(Error::bad_request(
            "invalid_query_parameter",
            format!("{name} must be true or false"),
        )),
    };
    let dry_run = flag("dry_run", params.dry_run.as_deref())?;
    let default_hosts = crate::domain::default_hosts(
        &state.rules,
        params.default_hosts.as_deref().unwrap_or("").split(','),
    )?;
    if params.domain.is_some() && !default_hosts.is_empty() {
        return Err(crate::domain::both_domains().into());
    }
    let domain = state.rules.domain(params.domain.as_deref())?;
    if let Some(host) = &domain {
        state.links.check_domain(&caller, host).await?;
    }
    let errors_only = match params.results.as_deref() {
        None | Some("all") => false,
        Some("errors") => true,
        Some(_) => {
            return Err(Error::bad_request(
                "invalid_query_parameter",
                "results must be all or errors",
            )
            .into());
        }
    };
    let format = match media_type(&parts.headers).as_str() {
        "application/x-ndjson" | "application/jsonl" => Format::Ndjson,
        "text/csv" => Format::Csv,
        _ => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the rows as Content-Type: application/x-ndjson (one JSON object per line) or text/csv (a header row first)",
            ));
        }
    };
    let mut reader = RowReader::new(body, format);
    // A CSV's header is read before answering, so a file without a `url` column is refused
    // with a status of its own rather than a row at a time.
    let columns = if format == Format::Csv {
        let idle = state.links.import_idle();
        let header = tokio::time::timeout(idle, reader.header()).await;
        Some(header.map_err(|_| import_idle(idle))??)
    } else {
        None
    };
    let rows = reader.into_rows(columns);
    let settings = ImportSettings {
        dry_run,
        row_domains: params.domain.is_none(),
        default_hosts,
        domain,
        rules: state.rules.clone(),
        idle: state.links.import_idle(),
    };
    let events = state.links.import_rows(&caller, place, settings, rows);
    let public = Arc::new(state.public.clone());
    let lines = events.filter_map(move |event| {
        let public = Arc::clone(&public);
        async move {
            let bytes = match event {
                ImportEvent::Rows(results) => rows_lines(&results, errors_only, &public)?,
                ImportEvent::End(summary) => summary_line(summary),
            };
            Some(Ok::<Bytes, std::io::Error>(bytes))
        }
    });
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/x-ndjson"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        Body::from_stream(lines),
    )
        .into_response())
}

/// The answer lines of one chunk's results (only the refused rows' with `errors_only`), in one
/// buffer; `None` when there are none.
fn rows_lines(results: &[RowResult], errors_only: bool, public: &PublicBase) -> Option<Bytes> {
    let mut lines = Vec::with_capacity(results.len() * 80);
    for result in results {
        if !errors_only || matches!(result.status, RowStatus::Error(_)) {
            row_line(&mut lines, result, public);
        }
    }
    (!lines.is_empty()).then(|| Bytes::from(lines))
}

/// The summary line: the totals, and why the import stopped early if it did.
fn summary_line(end: ImportSummary<Error>) -> Bytes {
    let totals = end.totals;
    let mut summary = json!({
        "rows": totals.rows,
        "created": totals.created,
        "valid": totals.valid,
        "exists": totals.exists,
        "errors": totals.errors,
        "dry_run": end.dry_run,
    });
    if let Some(ImportStop::Input(error) | ImportStop::Failed(error)) = end.stopped {
        // The rows after the last answered one were not imported; importing the file again
        // is safe (what was created is found again).
        summary["stopped"] = json!({ "error": error.code(), "message": error.public_message() });
    }
    let mut line = serde_json::to_vec(&json!({ "summary": summary })).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// The answer line of one row.
#[derive(serde::Serialize)]
struct RowLine<'a> {
    row: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<&'a str>,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    short_url: Option<String>,
}

/// Appends the answer line of `result` (short URLs on `public`) to `out`.
fn row_line(out: &mut Vec<u8>, result: &RowResult, public: &PublicBase) {
    let (error, message) = match &result.status {
        RowStatus::Error(error) => (Some(error.code()), Some(error.public_message())),
        _ => (None, None),
    };
    let line = RowLine {
        row: result.row,
        code: result.code.as_deref(),
        status: result.status.name(),
        error,
        message,
        short_url: result.short_url(public),
    };
    if serde_json::to_writer(&mut *out, &line).is_ok() {
        out.push(b'\n');
    }
}

/// Reads records from a request body.
struct RowReader {
    body: axum::body::BodyDataStream,
    splitter: Splitter,
    ready: std::collections::VecDeque<Record>,
    ended: bool,
}

impl RowReader {
    fn new(body: Body, format: Format) -> Self {
        Self {
            body: body.into_data_stream(),
            splitter: Splitter::new(format == Format::Csv),
            ready: std::collections::VecDeque::new(),
            ended: false,
        }
    }

    /// Reads until at least one record is ready or the body ends.
    async fn fill(&mut self) -> Result<(), Error> {
        while self.ready.is_empty() && !self.ended {
            match self.body.next().await {
                Some(Ok(bytes)) => {
                    let ready = &mut self.ready;
                    self.splitter.push(&bytes, &mut |r| ready.push_back(r));
                }
                Some(Err(error)) => {
                    return Err(Error::bad_request(
                        "body_read_failed",
                        format!("reading the request body failed: {error}"),
                    ));
                }
                None => {
                    let ready = &mut self.ready;
                    self.splitter.finish(&mut |r| ready.push_back(r));
                    self.ended = true;
                }
            }
        }
        Ok(())
    }

    /// The CSV header (the first record), as the columns it maps.
    async fn header(&mut self) -> Result<Columns, Error> {
        self.fill().await?;
        match self.ready.pop_front() {
            Some(Record::Bytes(bytes)) => Columns::parse(&bytes),
            Some(Record::TooLong) => Err(Error::invalid(
                "invalid_csv_header",
                "the header row is too long",
            )),
            None => Err(Error::invalid(
                "invalid_csv_header",
                "the body is empty: a CSV import starts with a header row",
            )),
        }
    }

    /// The rows of the rest of the body (CSV rows mapped by `columns`), ending after the
    /// first failure to read it.
    fn into_rows(
        self,
        columns: Option<Columns>,
    ) -> impl Stream<Item = Result<InputRow, Error>> + Send + 'static {
        futures::stream::unfold(Some((self, columns)), |state| async move {
            let (mut reader, columns) = state?;
            if let Err(error) = reader.fill().await {
                return Some((Err(error), None));
            }
            let record = reader.ready.pop_front()?;
            let row = input_of(record, columns.as_ref());
            Some((Ok(row), Some((reader, columns))))
        })
    }
}

/// The fields of one record.
fn input_of(record: Record, columns: Option<&Columns>) -> InputRow {
    let bytes = match record {
        Record::Bytes(bytes) => bytes,
        Record::TooLong => {
            return Err((
                None,
                Error::bad_request(
                    "row_too_long",
                    format!(
                        "the row is longer than {MAX_RECORD} bytes (for CSV, an unbalanced quote makes the rest of the file one row)"
                    ),
                ),
            ));
        }
    };
    match columns {
        None => ndjson_row(&bytes),
        Some(columns) => columns.row(&bytes),
    }
}
