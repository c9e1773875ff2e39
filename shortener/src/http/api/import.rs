//! `POST /api/v1/links/import`: NDJSON or CSV rows in, one NDJSON result per row out, then a
//! summary.
//!
//! The body is read as it arrives and turned into a stream of rows (CSV and NDJSON records,
//! column mappings of other shorteners' exports) for the import pipeline
//! ([`crate::links::LinkService::import_rows`]), which checks and writes them a chunk at a time;
//! each chunk's results become one buffer of answer lines. A client that reads nothing until
//! it has sent everything should ask for `?results=errors`, which answers only the rows refused
//! (and the summary), so that the answer never waits on a client that is not reading it.

use super::admit;
use super::records::{MAX_RECORD, Record, Splitter};
use super::wire::media_type;
use crate::access::Operation;
use crate::domain::{Error, ImportInput};
use crate::http::{ApiError, HttpState};
use crate::links::{ImportEvent, ImportStop, ImportSummary, InputRow, RowResult, RowStatus};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use futures::{Stream, StreamExt};
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
    let caller = admit(&state, &parts.headers, Operation::Import)?;
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
        Some(reader.header().await?)
    } else {
        None
    };
    let rows = reader.into_rows(columns);
    let events = state
        .links
        .import_rows(&caller, dry_run, state.rules.clone(), rows);
    let lines = events.filter_map(move |event| async move {
        let bytes = match event {
            ImportEvent::Rows(results) => rows_lines(&results, errors_only)?,
            ImportEvent::End(summary) => summary_line(summary),
        };
        Some(Ok::<Bytes, std::io::Error>(bytes))
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
fn rows_lines(results: &[RowResult], errors_only: bool) -> Option<Bytes> {
    let mut lines = Vec::with_capacity(results.len() * 48);
    for result in results {
        if !errors_only || matches!(result.status, RowStatus::Error(_)) {
            row_line(&mut lines, result);
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
}

/// Appends the answer line of `result` to `out`.
fn row_line(out: &mut Vec<u8>, result: &RowResult) {
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
            return Err(Error::bad_request(
                "row_too_long",
                format!(
                    "the row is longer than {MAX_RECORD} bytes (for CSV, an unbalanced quote makes the rest of the file one row)"
                ),
            ));
        }
    };
    match columns {
        None => ndjson_row(&bytes),
        Some(columns) => columns.row(&bytes),
    }
}

/// One NDJSON row: the fields of a create, plus `code` and `created_at`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NdjsonRow {
    url: String,
    #[serde(default)]
    code: Option<String>,
    /// A create's alias: a code to keep, as `code` is.
    #[serde(default)]
    alias: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    expires_at: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    max_visits: Option<u64>,
    #[serde(default)]
    private: bool,
    /// Accepted for a create's sake; an import always finds the rows it made before.
    #[serde(default, rename = "dedup")]
    _dedup: bool,
}

fn utf8(bytes: &[u8]) -> Result<&str, Error> {
    std::str::from_utf8(bytes).map_err(|e| {
        Error::bad_request(
            "invalid_utf8",
            format!(
                "the row is not UTF-8 (bad byte at offset {})",
                e.valid_up_to()
            ),
        )
    })
}

fn ndjson_row(bytes: &[u8]) -> Result<ImportInput, Error> {
    let row: NdjsonRow = serde_json::from_str(utf8(bytes)?)
        .map_err(|e| Error::bad_request("invalid_json", format!("invalid row: {e}")))?;
    let code = match (row.code, row.alias) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid(
                "conflicting_options",
                "give code or alias, not both",
            ));
        }
        (code, alias) => code.or(alias),
    };
    Ok(ImportInput {
        url: row.url,
        code,
        tags: row.tags,
        expires_at: row
            .expires_at
            .as_deref()
            .map(|t| import_time("expires_at", "invalid_expiry", t))
            .transpose()?,
        created_at: row
            .created_at
            .as_deref()
            .map(|t| import_time("created_at", "invalid_created_at", t))
            .transpose()?,
        max_visits: row.max_visits,
        private: row.private,
    })
}

/// A time of an imported row: RFC 3339, or (as other shorteners' exports write them) `YYYY-MM-DD
/// HH:MM:SS` or `YYYY-MM-DD`, read as UTC.
fn import_time(field: &str, code: &'static str, text: &str) -> Result<DateTime<Utc>, Error> {
    let text = text.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(t) = NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S") {
        return Ok(t.and_utc());
    }
    if let Some(t) = NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
    {
        return Ok(t.and_utc());
    }
    Err(Error::invalid(
        code,
        format!(
            "{field} must be an RFC 3339 time (or YYYY-MM-DD HH:MM:SS, UTC), not {}",
            crate::domain::echo(text)
        ),
    ))
}

/// What a CSV column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Url,
    Code,
    /// A full short URL whose last path segment is the code (Bitly's `link`, Shlink's
    /// `shortUrl`).
    ShortUrl,
    Tags,
    ExpiresAt,
    CreatedAt,
    MaxVisits,
    Ignored,
}

/// The column a header names. Names compare without case, spaces, `_` and `-`, so
/// `Long URL`, `long_url` and `longUrl` are one name. docs/shortener.md lists the mappings.
fn column(name: &str) -> Column {
    let key: String = name
        .chars()
        .filter(|c| !matches!(c, ' ' | '_' | '-'))
        .flat_map(char::to_lowercase)
        .collect();
    match key.trim_start_matches('\u{feff}') {
        "url" | "longurl" | "originalurl" | "destination" | "target" => Column::Url,
        "code" | "shortcode" | "keyword" | "backhalf" | "custombackhalf" => Column::Code,
        "shorturl" | "shortlink" | "bitlink" | "link" => Column::ShortUrl,
        "tags" | "tag" => Column::Tags,
        "expiresat" | "expires" | "validuntil" => Column::ExpiresAt,
        "createdat" | "created" | "datecreated" | "timestamp" | "date" => Column::CreatedAt,
        "maxvisits" => Column::MaxVisits,
        _ => Column::Ignored,
    }
}

/// The columns of a CSV import, from its header.
#[derive(Debug)]
struct Columns(Vec<Column>);

fn csv_fields(bytes: &[u8]) -> Result<csv::ByteRecord, Error> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes);
    let mut record = csv::ByteRecord::new();
    match reader.read_byte_record(&mut record) {
        Ok(true) => Ok(record),
        Ok(false) => Ok(csv::ByteRecord::new()),
        Err(e) => Err(Error::bad_request(
            "invalid_csv",
            format!("the row is not valid CSV: {e}"),
        )),
    }
}

impl Columns {
    fn parse(header: &[u8]) -> Result<Self, Error> {
        let fields = csv_fields(header)?;
        let mut columns = Vec::with_capacity(fields.len());
        for field in &fields {
            columns.push(column(utf8(field)?));
        }
        if !columns.contains(&Column::Url) {
            return Err(Error::invalid(
                "missing_url_column",
                "the header row names no url column (url, long_url, Long URL, longUrl, original_url)",
            ));
        }
        Ok(Self(columns))
    }

    fn row(&self, bytes: &[u8]) -> Result<ImportInput, Error> {
        let fields = csv_fields(bytes)?;
        if fields.len() > self.0.len() {
            return Err(Error::bad_request(
                "invalid_csv",
                format!(
                    "the row has {} fields, the header {}",
                    fields.len(),
                    self.0.len()
                ),
            ));
        }
        let mut input = ImportInput::default();
        let mut short_url = None;
        for (column, field) in self.0.iter().zip(&fields) {
            let text = utf8(field)?.trim();
            if text.is_empty() {
                continue;
            }
            match column {
                Column::Url => input.url = text.to_string(),
                Column::Code => input.code = Some(text.to_string()),
                Column::ShortUrl => short_url = Some(text.to_string()),
                Column::Tags => {
                    input.tags = text
                        .split('|')
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(str::to_string)
                        .collect()
                }
                Column::ExpiresAt => {
                    input.expires_at = Some(import_time("expires_at", "invalid_expiry", text)?)
                }
                Column::CreatedAt => {
                    input.created_at = Some(import_time("created_at", "invalid_created_at", text)?)
                }
                Column::MaxVisits => {
                    input.max_visits = Some(text.parse().map_err(|_| {
                        Error::invalid(
                            "invalid_max_visits",
                            "max_visits must be a positive integer",
                        )
                    })?)
                }
                Column::Ignored => {}
            }
        }
        if input.code.is_none()
            && let Some(short) = short_url
        {
            input.code = Some(code_of_short_url(&short)?);
        }
        Ok(input)
    }
}

/// The code of a short URL (`https://bit.ly/3abcXYZ`, `bit.ly/3abcXYZ`): its last path
/// segment.
fn code_of_short_url(text: &str) -> Result<String, Error> {
    let without_query = text.split(['?', '#']).next().unwrap_or("");
    match without_query.trim_end_matches('/').rsplit('/').next() {
        Some(code) if !code.is_empty() && without_query.contains('/') => Ok(code.to_string()),
        _ => Err(Error::invalid(
            "invalid_code",
            format!(
                "{} is not a short URL with a code",
                crate::domain::echo(text)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_headers_of_other_shorteners_map_to_columns() {
        let columns =
            Columns::parse(b"\xef\xbb\xbfTitle,Bitlink,Long URL,Created,Tags").expect("a header");
        let row = columns
            .row(b"Spring,https://bit.ly/3abcXYZ,https://example.com/a,2024-03-01 10:00:00,a|b")
            .expect("a row");
        assert_eq!(row.url, "https://example.com/a");
        assert_eq!(row.code.as_deref(), Some("3abcXYZ"));
        assert_eq!(row.tags, ["a", "b"]);
        assert_eq!(
            row.created_at.map(|t| t.to_rfc3339()),
            Some("2024-03-01T10:00:00+00:00".into())
        );
        let yourls = Columns::parse(b"keyword,url,title,timestamp,ip,clicks").expect("a header");
        let row = yourls
            .row(b"abc,https://example.org/,T,2019-01-02 03:04:05,1.2.3.4,7")
            .expect("a row");
        assert_eq!(row.code.as_deref(), Some("abc"));
        let shlink = Columns::parse(b"createdAt,shortCode,shortUrl,longUrl,title,tags,visits")
            .expect("a header");
        let row = shlink
            .row(b"2023-05-06T07:08:09+00:00,x-1,https://s.test/x-1,https://e.test/,,t1|t2,3")
            .expect("a row");
        assert_eq!((row.code.as_deref(), row.tags.len()), (Some("x-1"), 2));
        assert_eq!(
            Columns::parse(b"code,tags").expect_err("no url").code(),
            "missing_url_column"
        );
    }
}
