//! The rows of a CSV import body, by the columns its header names (the mappings of other
//! shorteners' exports, docs/shortener.md), and what an NDJSON row (`super::ndjson`) shares
//! with them.

use super::routing::Routing;
use crate::domain::{Error, ImportInput};
use crate::links::InputRow;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};

pub(super) fn utf8(bytes: &[u8]) -> Result<&str, Error> {
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

/// A time of an imported row: RFC 3339, or (as other shorteners' exports write them) `YYYY-MM-DD
/// HH:MM:SS` or `YYYY-MM-DD`, read as UTC.
pub(super) fn import_time(
    field: &str,
    code: &'static str,
    text: &str,
) -> Result<DateTime<Utc>, Error> {
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
    /// A routing field ([`super::routing`]).
    Routing(Routing),
    /// The link's state where it was exported: only an active (or expired) one is imported.
    State,
    /// Whether it was password protected where it was exported: such a row is refused.
    Protected,
    /// Another tool's password (or its hash): an import sets none, so a row with one is
    /// refused as a protected one is, never imported open to anyone.
    Password,
    /// The visits it had where it was exported: a row with a visit limit it has reached is
    /// refused.
    Clicks,
    /// The host the link answered on where it was exported (Shlink's and this node's exports).
    Domain,
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
        "state" => Column::State,
        "protected" => Column::Protected,
        "password" | "passwordhash" => Column::Password,
        "clicks" => Column::Clicks,
        "domain" => Column::Domain,
        routing => Routing::of(routing).map_or(Column::Ignored, Column::Routing),
    }
}

/// The columns of a CSV import, from its header.
#[derive(Debug)]
pub(super) struct Columns(Vec<Column>);

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
    /// The columns a header row names; refused without a `url` column.
    pub(super) fn parse(header: &[u8]) -> Result<Self, Error> {
        let fields = csv_fields(header)?;
        let mut columns = Vec::with_capacity(fields.len());
        for field in &fields {
            columns.push(column(utf8(field)?));
        }
        if !columns.contains(&Column::Url) {
            return Err(Error::invalid(
                "missing_url_column",
                "the header row names no url column (url, long_url, Long URL, longUrl, original_url, destination, target)",
            ));
        }
        Ok(Self(columns))
    }

    /// The fields of one CSV row; refused with the code it gives, where it gives one.
    pub(super) fn row(&self, bytes: &[u8]) -> InputRow {
        let fields = csv_fields(bytes).map_err(|error| (None, error))?;
        self.fields(&fields)
            .map_err(|error| (self.code_in(&fields), error))
    }

    /// The code a row gives: its code cell, else its short URL's path.
    fn code_in(&self, fields: &csv::ByteRecord) -> Option<String> {
        let cell = |wanted: Column| {
            let (_, field) = self.0.iter().zip(fields).find(|(c, _)| **c == wanted)?;
            let text = super::super::cells::imported(std::str::from_utf8(field).ok()?).trim();
            (!text.is_empty()).then_some(text)
        };
        match cell(Column::Code) {
            Some(code) => Some(code.to_string()),
            None => code_of_short_url(cell(Column::ShortUrl)?).ok(),
        }
    }

    fn fields(&self, fields: &csv::ByteRecord) -> Result<ImportInput, Error> {
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
        for (column, field) in self.0.iter().zip(fields) {
            let text = super::super::cells::imported(utf8(field)?).trim();
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
                Column::Routing(field) => field.fill(&mut input.routes, text)?,
                // Repeated columns: a cell that refuses the row is not undone by a later one.
                Column::State => input.origin.note_state(text),
                Column::Protected => input.origin.protected |= text.eq_ignore_ascii_case("true"),
                Column::Password => input.origin.protected = true,
                // Other tools' counts come in other shapes; only a count is read.
                Column::Clicks => input.origin.clicks = text.parse::<u64>().ok(),
                Column::Domain => input.domain = Some(text.to_string()),
                Column::Ignored => {}
            }
        }
        if let Some(short) = short_url {
            // Only a file without a domain column: a blank cell there is the default domain.
            if !self.0.iter().any(|c| matches!(c, Column::Domain)) {
                input.short_host = host_of_short_url(&short);
            }
            if input.code.is_none() {
                input.code = Some(code_of_short_url(&short)?);
            }
        }
        Ok(input)
    }
}

/// The host of a short URL (`https://go.acme.example/spring`, `bit.ly/3abcXYZ`), without user
/// information or a port; `None` for text with no path after a host.
pub(super) fn host_of_short_url(text: &str) -> Option<String> {
    // A scheme only where one can be: letters and `+-.` before the first `://`, so a URL in
    // the query (`go.example/x?to=https://other.example/`) is not the host.
    let rest = match text.split_once("://") {
        Some((scheme, rest))
            if !scheme.is_empty()
                && scheme
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')) =>
        {
            rest
        }
        _ => text,
    };
    let end = rest.find(['/', '?', '#'])?;
    if rest.as_bytes()[end] != b'/' {
        return None;
    }
    let authority = &rest[..end];
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = crate::domain::without_port(host);
    (!host.is_empty()).then(|| host.to_string())
}

/// The code of a short URL (`https://bit.ly/3abcXYZ`, `bit.ly/3abcXYZ`): its last path
/// segment.
pub(super) fn code_of_short_url(text: &str) -> Result<String, Error> {
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
        assert_eq!(row.short_host.as_deref(), Some("bit.ly"));
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
            row.short_host.as_deref(),
            Some("s.test"),
            "beside a code column too"
        );
        for (short, host) in [
            ("go.acme.example/spring", Some("go.acme.example")),
            ("http://Go.Acme.Example:8080/x?y=1", Some("Go.Acme.Example")),
            ("spring", None),
            ("https:///x", None),
            (
                "go.acme.example/x?to=https://other.example/y",
                Some("go.acme.example"),
            ),
            ("https://user@go.acme.example/x", Some("go.acme.example")),
            ("https://[::1]:8080/x", Some("[::1]")),
            ("go.acme.example?x=/y", None),
        ] {
            assert_eq!(host_of_short_url(short).as_deref(), host, "{short}");
        }
        assert_eq!(
            Columns::parse(b"code,tags").expect_err("no url").code(),
            "missing_url_column"
        );
    }

    #[test]
    fn a_row_refused_as_it_is_read_keeps_its_code_and_a_refusing_cell_stays() {
        let columns =
            Columns::parse(b"url,code,created_at,state,state,protected,protected").expect("header");
        let (code, error) = columns
            .row(b"https://e.test/,promo,yesterday,,,,")
            .expect_err("a bad date");
        assert_eq!(
            (code.as_deref(), error.code()),
            (Some("promo"), "invalid_created_at")
        );
        let bitly = Columns::parse(b"Bitlink,Long URL,created_at").expect("header");
        let (code, _) = bitly
            .row(b"bit.ly/spring,https://e.test/,yesterday")
            .expect_err("a bad date");
        assert_eq!(code.as_deref(), Some("spring"), "the short URL's code");
        let (code, _) = columns
            .row(b"https://e.test/,,yesterday,,,,")
            .expect_err("a bad date");
        assert_eq!(code, None, "a row that gives no code");
        // Repeated columns: a later cell does not undo one that refuses the row.
        let row = columns
            .row(b"https://e.test/,promo,,disabled,active,true,false")
            .expect("a row");
        assert_eq!(row.origin.state.as_deref(), Some("disabled"));
        assert!(row.origin.protected);
        let row = columns
            .row(b"https://e.test/,promo,,active,deleted,,")
            .expect("a row");
        assert_eq!(row.origin.state.as_deref(), Some("deleted"));
    }

    #[test]
    fn routing_columns_read_what_an_export_writes() {
        let columns = Columns::parse(
            b"url,title,rules,variants,UTM Source,utm_content,pass_query,preview_title,preview_image,ios",
        )
        .expect("a header");
        let row = columns
            .row(br#"https://e.test/,Named,"[{""url"":""https://r.test/"",""conditions"":[{""type"":""device"",""value"":""mobile""}]}]","[{""url"":""https://a.test/"",""weight"":60},{""url"":""https://b.test/"",""weight"":40}]",news,x y,TRUE,Spring,https://i.test/a.png,myapp://x"#)
            .expect("a row");
        let routes = &row.routes;
        assert_eq!(routes.rules.len(), 1);
        assert_eq!(routes.variants[1].weight, 40);
        assert_eq!(routes.utm.source.as_deref(), Some("news"));
        assert_eq!(routes.utm.content.as_deref(), Some("x y"));
        assert!(routes.pass_query);
        // `title` is a link's name in other shorteners' exports, never a preview.
        assert_eq!(routes.preview.title.as_deref(), Some("Spring"));
        assert_eq!(
            routes.preview.image.as_deref(),
            Some("https://i.test/a.png")
        );
        assert_eq!(routes.ios.as_deref(), Some("myapp://x"));
        let named = Columns::parse(b"url,title").expect("a header");
        let row = named.row(b"https://e.test/,Named").expect("a row");
        assert!(row.routes.preview.is_empty());
        for (cell, code) in [
            ("x,[nope,,,,,,,", "invalid_rules"),
            ("x,,{},,,,,,", "invalid_variants"),
            ("x,,,,,yes,,,", "invalid_pass_query"),
        ] {
            let row = format!("https://e.test/,{cell}");
            assert_eq!(
                columns.row(row.as_bytes()).expect_err(cell).1.code(),
                code,
                "{cell}"
            );
        }
    }
}
