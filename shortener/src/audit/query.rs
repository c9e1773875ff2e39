//! Reading the audit log: a query's parameters checked once (each refusal names its field),
//! the caller's tenant confinement, and the opaque keyset cursor of the next page.

use super::{Action, ObjectKind};
use crate::domain::{Caller, Error};
use crate::store::{AuditEntry, AuditFilter};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};

/// The most entries one page holds (`limit`), and its default.
pub const MAX_LIMIT: usize = 500;
const DEFAULT_LIMIT: usize = 100;
/// The most entries one export streams; a longer one is cut there (NDJSON ends with a line
/// holding the cursor that continues it).
pub const EXPORT_MAX_ROWS: usize = 100_000;
/// The longest value a text filter may have, in bytes.
const MAX_VALUE_BYTES: usize = 256;
/// What a cursor's text starts with once decoded, so a cursor of another list is refused.
const CURSOR_TAG: &str = "audit:";

/// The format of an answer: a JSON page, or a streamed export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `{"entries", "next_cursor"}`.
    Page,
    /// One JSON entry per line.
    Ndjson,
    /// A header, then one row per entry.
    Csv,
}

/// A checked query of `GET /api/v1/audit`.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditQuery {
    filter: AuditFilter,
    limit: Option<usize>,
    /// What the answer is.
    pub format: Format,
}

/// The query parameters `GET /api/v1/audit` takes.
pub const PARAMETERS: &[&str] = &[
    "action", "kind", "object", "actor", "tenant", "since", "until", "cursor", "limit", "format",
];

fn text(field: &str, value: &str) -> Result<String, Error> {
    if value.is_empty() || value.len() > MAX_VALUE_BYTES {
        return Err(Error::bad_request(
            "invalid_query_parameter",
            format!("{field}: 1 to {MAX_VALUE_BYTES} bytes"),
        ));
    }
    Ok(value.to_string())
}

fn instant(field: &str, value: &str) -> Result<DateTime<Utc>, Error> {
    DateTime::parse_from_rfc3339(value)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| {
            Error::bad_request(
                "invalid_date",
                format!(
                    "{field}: {} is not an RFC 3339 instant",
                    crate::domain::echo(value)
                ),
            )
        })
}

/// The cursor continuing after the entry numbered `id`.
pub fn cursor(id: i64) -> String {
    URL_SAFE_NO_PAD.encode(format!("{CURSOR_TAG}{id}"))
}

fn open_cursor(value: &str) -> Result<i64, Error> {
    let bad = || Error::bad_request("invalid_cursor", "cursor: not a cursor this list gave");
    let bytes = URL_SAFE_NO_PAD.decode(value).map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    text.strip_prefix(CURSOR_TAG)
        .and_then(|id| id.parse::<i64>().ok())
        .filter(|id| *id > 0)
        .ok_or_else(bad)
}

impl AuditQuery {
    /// The query `pairs` (name, value) ask for; refused, naming the field, for an unknown or
    /// repeated parameter, an unknown action or kind, a bad instant or range, a bad cursor,
    /// or a limit out of range.
    pub fn parse<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self, Error> {
        let mut seen = std::collections::BTreeSet::new();
        let mut query = AuditQuery {
            filter: AuditFilter::default(),
            limit: None,
            format: Format::Page,
        };
        for (name, value) in pairs {
            if !seen.insert(name) {
                return Err(Error::bad_request(
                    "invalid_query_parameter",
                    format!("{}: given twice", crate::domain::echo(name)),
                ));
            }
            query.set(name, value)?;
        }
        if let (Some(since), Some(until)) = (query.filter.since, query.filter.until)
            && since >= until
        {
            return Err(Error::bad_request(
                "invalid_range",
                "since: must be before until",
            ));
        }
        Ok(query)
    }

    fn set(&mut self, name: &str, value: &str) -> Result<(), Error> {
        let f = &mut self.filter;
        match name {
            "action" => {
                let action = Action::parse(value).ok_or_else(|| {
                    unknown("action", value, Action::ALL.iter().map(|a| a.name()))
                })?;
                f.action = Some(action.name().to_string());
            }
            "kind" => {
                let kind = ObjectKind::parse(value).ok_or_else(|| {
                    unknown("kind", value, ObjectKind::ALL.iter().map(|k| k.name()))
                })?;
                f.object_kind = Some(kind.name().to_string());
            }
            "object" => f.object_id = Some(text(name, value)?),
            "actor" => f.actor = Some(text(name, value)?),
            "tenant" => f.tenant = Some(text(name, value)?),
            "since" => f.since = Some(instant(name, value)?),
            "until" => f.until = Some(instant(name, value)?),
            "cursor" => f.before_id = Some(open_cursor(value)?),
            "limit" => {
                let limit = value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| {
                        Error::bad_request(
                            "invalid_limit",
                            format!("limit: 1 to {MAX_LIMIT} (an export reads up to {EXPORT_MAX_ROWS} entries without it)"),
                        )
                    })?;
                self.limit = Some(limit);
            }
            "format" => {
                self.format = match value {
                    "json" => Format::Page,
                    "ndjson" => Format::Ndjson,
                    "csv" => Format::Csv,
                    _ => {
                        return Err(Error::bad_request(
                            "invalid_query_parameter",
                            "format: json, ndjson or csv",
                        ));
                    }
                }
            }
            _ => {
                return Err(Error::bad_request(
                    "invalid_query_parameter",
                    format!(
                        "{}: unknown parameter; the parameters are {}",
                        crate::domain::echo(name),
                        PARAMETERS.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The most entries of a page.
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_LIMIT)
    }

    /// The most entries of an export: its `limit` when given, else [`EXPORT_MAX_ROWS`].
    pub fn export_limit(&self) -> usize {
        self.limit.unwrap_or(EXPORT_MAX_ROWS)
    }

    /// The store filter for `caller`: its own tenant's entries (or the one its `tenant`
    /// names, which only `admin` may name when it is another's); every tenant's for `admin`.
    pub fn filter(&self, caller: &Caller) -> Result<AuditFilter, Error> {
        let mut filter = self.filter.clone();
        match (caller.tenant_scope(), filter.tenant.as_deref()) {
            (Some(own), Some(named)) if own != named => {
                return Err(Error::bad_request(
                    "invalid_tenant",
                    "tenant: a key without admin reads only its own tenant's entries",
                ));
            }
            (Some(own), _) => filter.tenant = Some(own.to_string()),
            (None, _) => {}
        }
        Ok(filter)
    }
}

pub(super) fn unknown<'a>(field: &str, value: &str, known: impl Iterator<Item = &'a str>) -> Error {
    Error::bad_request(
        "invalid_query_parameter",
        format!(
            "{field}: unknown {field} {}; known: {}",
            crate::domain::echo(value),
            grouped(known)
        ),
    )
}

/// Names written with a shared object once (`link.{create,delete}, signin`), so that the
/// whole list fits in an error message, which is cut at [`crate::domain::MAX_MESSAGE`].
fn grouped<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for name in names {
        let (object, verb) = name.split_once('.').unwrap_or((name, ""));
        match groups.iter_mut().find(|(o, _)| *o == object) {
            Some((_, verbs)) if !verb.is_empty() => verbs.push(verb),
            _ => groups.push((object, if verb.is_empty() { vec![] } else { vec![verb] })),
        }
    }
    let written: Vec<String> = groups
        .into_iter()
        .map(|(object, verbs)| match verbs.as_slice() {
            [] => object.to_string(),
            [verb] => format!("{object}.{verb}"),
            _ => format!("{object}.{{{}}}", verbs.join(",")),
        })
        .collect();
    written.join(", ")
}

/// One page of entries and the cursor of the next (none on the last page).
#[derive(Debug, Clone)]
pub struct AuditPage {
    /// The entries, newest first.
    pub entries: Vec<AuditEntry>,
    /// Where the next page starts.
    pub next_cursor: Option<String>,
}

impl AuditPage {
    pub(super) fn new(entries: Vec<AuditEntry>, limit: usize) -> Self {
        let next_cursor = (entries.len() == limit)
            .then(|| entries.last().map(|e| cursor(e.id)))
            .flatten();
        Self {
            entries,
            next_cursor,
        }
    }
}

/// Streams the entries `caller` may read as `query` asks into `send`, a page at a time, at
/// most its export limit and until `deadline`; returns the cursor continuing a cut export.
/// Refused before anything is sent when the query is. `send` answers false once the reader
/// is gone.
pub async fn export_rows<F, Fut>(
    log: &super::AuditLog,
    caller: &Caller,
    query: &AuditQuery,
    deadline: tokio::time::Instant,
    mut send: F,
) -> Result<Option<String>, Error>
where
    F: FnMut(Vec<AuditEntry>) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut filter = query.filter(caller)?;
    let mut left = query.export_limit();
    while left > 0 {
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Internal(
                "the audit export ran past its deadline".into(),
            ));
        }
        let want = left.min(MAX_LIMIT);
        let page = log.read(&filter, want).await?;
        let (count, last) = (page.len(), page.last().map(|e| e.id));
        left -= count;
        if !send(page).await {
            return Ok(None);
        }
        match last {
            Some(id) if count == want => filter.before_id = Some(id),
            _ => return Ok(None),
        }
    }
    // Cut at the bound: more entries may follow.
    Ok(filter.before_id.map(cursor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Scopes;
    use std::sync::Arc;

    fn caller(scopes: &str) -> Caller {
        Caller::of_key(
            Arc::from("acme"),
            Arc::from("lead"),
            Scopes::parse_list(scopes).expect("scopes"),
        )
    }

    fn parse(query: &str) -> Result<AuditQuery, Error> {
        let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        AuditQuery::parse(pairs.iter().map(|(n, v)| (n.as_str(), v.as_str())))
    }

    #[test]
    fn a_cursor_opens_to_the_number_it_was_made_from_and_nothing_else_opens() {
        let query = parse(&format!("cursor={}", cursor(42))).expect("a cursor");
        assert_eq!(query.filter.before_id, Some(42));
        for bad in [
            "42",
            "nonsense",
            &URL_SAFE_NO_PAD.encode("links:42"),
            &cursor(0),
        ] {
            let error = parse(&format!("cursor={bad}")).expect_err(bad);
            assert_eq!(error.code(), "invalid_cursor", "{bad}");
        }
    }

    #[test]
    fn a_caller_without_admin_is_confined_to_its_tenant_and_admin_to_none() {
        let reader = caller("audit:read");
        let own = parse("").expect("empty").filter(&reader).expect("own");
        assert_eq!(own.tenant.as_deref(), Some("acme"));
        let named = parse("tenant=acme").expect("own tenant");
        assert_eq!(
            named.filter(&reader).expect("own").tenant.as_deref(),
            Some("acme")
        );
        let other = parse("tenant=other").expect("parses");
        assert_eq!(
            other.filter(&reader).expect_err("another").code(),
            "invalid_tenant"
        );
        let admin = caller("admin");
        assert_eq!(
            parse("")
                .expect("empty")
                .filter(&admin)
                .expect("all")
                .tenant,
            None
        );
        let theirs = other.filter(&admin).expect("admin names any");
        assert_eq!(theirs.tenant.as_deref(), Some("other"));
    }

    #[test]
    fn limits_formats_and_instants_are_checked() {
        assert_eq!(parse("").expect("empty").limit(), DEFAULT_LIMIT);
        assert_eq!(parse("limit=500").expect("max").limit(), 500);
        assert_eq!(
            parse("format=csv").expect("csv").export_limit(),
            EXPORT_MAX_ROWS
        );
        for (query, code) in [
            ("limit=0", "invalid_limit"),
            ("limit=501", "invalid_limit"),
            ("since=monday", "invalid_date"),
            (
                "since=2025-01-02T00:00:00Z&until=2025-01-02T00:00:00Z",
                "invalid_range",
            ),
            ("format=xml", "invalid_query_parameter"),
            ("kind=planet", "invalid_query_parameter"),
            ("actor=", "invalid_query_parameter"),
        ] {
            assert_eq!(parse(query).expect_err(query).code(), code, "{query}");
        }
    }
}
