//! The JSON API's wire types, and their one conversion to and from domain types.
//!
//! One file (just over 450 lines with its tests): every request and answer shape of the JSON
//! API sits beside its conversion, so a field changes in one place for every endpoint.

use super::super::ApiError;
use crate::domain::rules::ApiRules;
use crate::domain::{
    Caller, CreateInput, CreateRules, DomainFilter, Error, Event, Link, ListInput, PatchInput,
    PublicBase, RuleInput, Variant, VariantInput, echo,
};
use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The largest create body accepted.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// The body of `POST /api/v1/links`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateBody {
    url: String,
    #[serde(default)]
    alias: Option<String>,
    #[serde(default)]
    expires_at: Option<String>,
    #[serde(default)]
    dedup: bool,
    #[serde(default)]
    private: bool,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    max_visits: Option<u64>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    domain: Option<String>,
    #[serde(default)]
    rules: Vec<RuleInput>,
    #[serde(default)]
    ios: Option<String>,
    #[serde(default)]
    android: Option<String>,
    #[serde(default)]
    variants: Vec<VariantInput>,
    #[serde(default)]
    utm_source: Option<String>,
    #[serde(default)]
    utm_medium: Option<String>,
    #[serde(default)]
    utm_campaign: Option<String>,
    #[serde(default)]
    utm_term: Option<String>,
    #[serde(default)]
    utm_content: Option<String>,
    #[serde(default)]
    pass_query: bool,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    image: Option<String>,
}

impl CreateBody {
    /// The create this body and its request's headers (`Idempotency-Key`) ask for.
    pub(super) fn into_input(self, headers: &HeaderMap) -> Result<CreateInput, Error> {
        let expires_at = self
            .expires_at
            .as_deref()
            .map(|text| rfc3339("expires_at", "invalid_expiry", text))
            .transpose()?;
        let idempotency_key = match headers.get("idempotency-key") {
            None => None,
            Some(value) => Some(
                value
                    .to_str()
                    .map_err(|_| {
                        Error::bad_request(
                            "invalid_idempotency_key",
                            "the Idempotency-Key header must be ASCII",
                        )
                    })?
                    .to_string(),
            ),
        };
        Ok(CreateInput {
            url: self.url,
            alias: self.alias,
            expires_at,
            dedup: self.dedup,
            private: self.private,
            idempotency_key,
            tags: self.tags,
            max_visits: self.max_visits,
            password: self.password,
            domain: self.domain,
            rules: self.rules,
            ios: self.ios,
            android: self.android,
            variants: self.variants,
            utm: crate::domain::routes::Utm {
                source: self.utm_source,
                medium: self.utm_medium,
                campaign: self.utm_campaign,
                term: self.utm_term,
                content: self.utm_content,
            },
            pass_query: self.pass_query,
            preview: crate::domain::routes::Preview {
                title: self.title,
                description: self.description,
                image: self.image,
            },
        })
    }
}

/// An RFC 3339 time of field `field`, or `code` naming what is wrong.
pub(super) fn rfc3339(field: &str, code: &'static str, text: &str) -> Result<DateTime<Utc>, Error> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| Error::invalid(code, format!("{field} must be an RFC 3339 time: {e}")))
}

/// The media type of a request (`application/json` of `application/json; charset=utf-8`),
/// lowercased.
pub(super) fn media_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Reads a JSON body of one of the media types `accepted` (the first is named in the refusal),
/// of at most [`MAX_BODY_BYTES`], as `T`; one that does not parse as `T` is `invalid_json`.
pub(super) async fn read_json<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    accepted: &[&str],
) -> Result<T, ApiError> {
    read_json_up_to(headers, body, accepted, MAX_BODY_BYTES).await
}

/// [`read_json`] of a body of at most `limit` bytes.
pub(super) async fn read_json_up_to<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    accepted: &[&str],
    limit: usize,
) -> Result<T, ApiError> {
    let bytes = read_body_up_to(headers, body, accepted, limit).await?;
    serde_json::from_slice(&bytes).map_err(|e| {
        Error::bad_request("invalid_json", format!("invalid request body: {e}")).into()
    })
}

/// Reads a body of one of the media types `accepted` (the first is named in the refusal), of
/// at most `limit` bytes.
pub(super) async fn read_body_up_to(
    headers: &HeaderMap,
    body: Body,
    accepted: &[&str],
    limit: usize,
) -> Result<axum::body::Bytes, ApiError> {
    if !accepted.contains(&media_type(headers).as_str()) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!("send the request body as Content-Type: {}", accepted[0]),
        ));
    }
    axum::body::to_bytes(body, limit).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the request body exceeds {limit} bytes"),
        )
    })
}

/// A time as the API shows every time: RFC 3339 to the millisecond, in UTC
/// (`YYYY-MM-DDTHH:MM:SS.mmmZ`, as chrono writes it), serialized without a heap string.
#[derive(Clone, Copy)]
pub(super) struct Millis(DateTime<Utc>);

impl Millis {
    /// The text, in a buffer on the stack; `None` outside four-digit years and for leap
    /// seconds (which chrono writes).
    fn digits(self) -> Option<[u8; 24]> {
        use chrono::{Datelike, Timelike};
        let t = self.0;
        let year = u32::try_from(t.year()).ok().filter(|y| *y <= 9999)?;
        if t.nanosecond() >= 1_000_000_000 {
            return None;
        }
        let mut text = *b"0000-00-00T00:00:00.000Z";
        for (range, mut value) in [
            (0..4, year),
            (5..7, t.month()),
            (8..10, t.day()),
            (11..13, t.hour()),
            (14..16, t.minute()),
            (17..19, t.second()),
            (20..23, t.nanosecond() / 1_000_000),
        ] {
            for digit in text[range].iter_mut().rev() {
                *digit = b'0' + (value % 10) as u8;
                value /= 10;
            }
        }
        Some(text)
    }
}

impl Serialize for Millis {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.digits() {
            // ASCII digits and punctuation only.
            Some(text) => serializer.serialize_str(std::str::from_utf8(&text).unwrap_or_default()),
            None => serializer.serialize_str(&self.0.to_rfc3339_opts(SecondsFormat::Millis, true)),
        }
    }
}

/// A link's short URL: the public base (or the link's branded domain) and the code, serialized
/// without joining them first.
pub(super) struct ShortUrl<'a>(&'a PublicBase, &'a Link);

impl std::fmt::Display for ShortUrl<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0
            .write_link_url(f, self.1.domain.as_deref(), self.1.shown_code())
    }
}

impl Serialize for ShortUrl<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A link as the API shows it, serialized straight from the link: no intermediate JSON tree
/// and no allocation per link (an export writes millions of them into one buffer).
#[derive(Serialize)]
pub(super) struct LinkJson<'a> {
    code: &'a str,
    domain: &'a str,
    short_url: ShortUrl<'a>,
    url: &'a str,
    tenant: &'a str,
    owner: &'a str,
    state: &'static str,
    created_at: Millis,
    expires_at: Option<Millis>,
    deleted_at: Option<Millis>,
    disabled_at: Option<Millis>,
    max_visits: Option<u64>,
    tags: &'a [String],
    imported: bool,
    protected: bool,
    rules: ApiRules<'a>,
    ios: Option<&'a str>,
    android: Option<&'a str>,
    variants: &'a [Variant],
    utm_source: Option<&'a str>,
    utm_medium: Option<&'a str>,
    utm_campaign: Option<&'a str>,
    utm_term: Option<&'a str>,
    utm_content: Option<&'a str>,
    pass_query: bool,
    title: Option<&'a str>,
    description: Option<&'a str>,
    image: Option<&'a str>,
    clicks: ClicksJson,
}

#[derive(Serialize)]
struct ClicksJson {
    human: u64,
    head: u64,
    bot: u64,
}

impl<'a> LinkJson<'a> {
    /// `link` as shown under `public`.
    pub(super) fn new(public: &'a PublicBase, link: &'a Link) -> Self {
        Self::at(public, link, Utc::now())
    }

    /// `link` as shown under `public`, its state as of `now` (one reading of the clock for a
    /// whole batch of links).
    pub(super) fn at(public: &'a PublicBase, link: &'a Link, now: DateTime<Utc>) -> Self {
        LinkJson {
            code: link.shown_code(),
            domain: link.domain.as_deref().unwrap_or(public.host_str()),
            short_url: ShortUrl(public, link),
            url: &link.url,
            tenant: &link.tenant,
            owner: &link.owner,
            state: link.state(now).name(),
            created_at: Millis(link.created_at),
            expires_at: link.expires_at.map(Millis),
            deleted_at: link.deleted_at.map(Millis),
            disabled_at: link.disabled_at.map(Millis),
            max_visits: link.max_visits,
            tags: &link.tags,
            imported: link.import_batch.is_some(),
            protected: link.password.is_some(),
            rules: ApiRules(&link.routes.rules),
            ios: link.routes.ios.as_deref(),
            android: link.routes.android.as_deref(),
            variants: &link.routes.variants,
            utm_source: link.routes.utm.source.as_deref(),
            utm_medium: link.routes.utm.medium.as_deref(),
            utm_campaign: link.routes.utm.campaign.as_deref(),
            utm_term: link.routes.utm.term.as_deref(),
            utm_content: link.routes.utm.content.as_deref(),
            pass_query: link.routes.pass_query,
            title: link.routes.preview.title.as_deref(),
            description: link.routes.preview.description.as_deref(),
            image: link.routes.preview.image.as_deref(),
            clicks: ClicksJson {
                human: link.clicks.human,
                head: link.clicks.head,
                bot: link.clicks.bot,
            },
        }
    }
}

/// A link as answered to a caller that may not read it: its code and short URL, nothing a read
/// would reveal (see [`crate::links::answers_whole`]).
#[derive(Serialize)]
pub(super) struct ReceiptJson<'a> {
    code: &'a str,
    short_url: ShortUrl<'a>,
}

/// The link a create or an edit answers: whole, or as a receipt to a caller that may not read
/// it.
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum LinkAnswer<'a> {
    Whole(Box<LinkJson<'a>>),
    Receipt(ReceiptJson<'a>),
}

impl<'a> LinkAnswer<'a> {
    /// `link` as answered to `caller` (`created`: its request just made it).
    pub(super) fn to(
        caller: &Caller,
        created: bool,
        public: &'a PublicBase,
        link: &'a Link,
    ) -> Self {
        if crate::links::answers_whole(caller, created) {
            LinkAnswer::Whole(Box::new(LinkJson::new(public, link)))
        } else {
            LinkAnswer::Receipt(ReceiptJson {
                code: link.shown_code(),
                short_url: ShortUrl(public, link),
            })
        }
    }
}

/// The query of `GET /api/v1/links` and `GET /api/v1/links/export`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListParams {
    #[serde(default)]
    limit: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    tag: Option<String>,
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    created_after: Option<String>,
    #[serde(default)]
    created_before: Option<String>,
    #[serde(default)]
    q: Option<String>,
    #[serde(default)]
    domain: Option<String>,
    /// Export only: `ndjson` (the default) or `csv`.
    #[serde(default)]
    pub(super) format: Option<String>,
}

impl ListParams {
    /// The parameters of a request to `uri`.
    pub(super) fn parse(uri: &axum::http::Uri) -> Result<Self, Error> {
        axum::extract::Query::<Self>::try_from_uri(uri)
            .map(|q| q.0)
            .map_err(|e| {
                Error::bad_request(
                    "invalid_query_parameter",
                    format!("invalid query: {}", e.body_text()),
                )
            })
    }

    /// The list these parameters ask for.
    pub(super) fn into_input(self, rules: &CreateRules) -> Result<ListInput, Error> {
        let limit = self
            .limit
            .map(|text| {
                text.parse::<usize>().map_err(|_| {
                    Error::bad_request(
                        "invalid_limit",
                        format!("limit must be a number, not {}", echo(&text)),
                    )
                })
            })
            .transpose()?;
        let date = |field: &str, text: Option<String>| {
            text.map(|text| {
                DateTime::parse_from_rfc3339(&text)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|_| {
                        Error::bad_request(
                            "invalid_date",
                            format!("{field} must be an RFC 3339 time, not {}", echo(&text)),
                        )
                    })
            })
            .transpose()
        };
        Ok(ListInput {
            limit,
            cursor: self.cursor,
            tag: self.tag,
            host: self.host,
            state: self.state,
            created_after: date("created_after", self.created_after)?,
            created_before: date("created_before", self.created_before)?,
            q: self.q,
            domain: DomainFilter::of(self.domain.as_deref(), rules)?,
        })
    }
}

/// A page of a list.
#[derive(Serialize)]
pub(super) struct PageJson<'a> {
    pub(super) links: Vec<LinkJson<'a>>,
    pub(super) next_cursor: Option<&'a str>,
}

/// The fields a PATCH may change; every other field of a link is read-only.
const PATCHABLE: [&str; 20] = [
    "url",
    "title",
    "description",
    "image",
    "utm_source",
    "utm_medium",
    "utm_campaign",
    "utm_term",
    "utm_content",
    "pass_query",
    "domain",
    "rules",
    "ios",
    "android",
    "variants",
    "expires_at",
    "tags",
    "disabled",
    "max_visits",
    "password",
];
/// The fields of a link a PATCH cannot change.
const READ_ONLY: [&str; 13] = [
    "code",
    "short_url",
    "tenant",
    "owner",
    "state",
    "created_at",
    "deleted_at",
    "disabled_at",
    "imported",
    "protected",
    "clicks",
    "alias",
    "private",
];

/// A PATCH body (JSON merge patch, RFC 7396) as the change it asks for: absent fields stay,
/// `null` clears `expires_at` and `max_visits`. Read-only fields are `read_only_field` (422),
/// unknown ones `unknown_field` (400), wrong types `invalid_json` (400).
pub(super) fn patch_input(bytes: &[u8]) -> Result<PatchInput, Error> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| Error::bad_request("invalid_json", format!("invalid request body: {e}")))?;
    let Value::Object(fields) = value else {
        return Err(Error::bad_request(
            "invalid_json",
            "a patch is a JSON object of the fields to change",
        ));
    };
    for name in fields.keys() {
        if READ_ONLY.contains(&name.as_str()) {
            return Err(Error::invalid(
                "read_only_field",
                format!("{} cannot be changed", echo(name)),
            ));
        }
        if !PATCHABLE.contains(&name.as_str()) {
            return Err(Error::bad_request(
                "unknown_field",
                format!(
                    "unknown field {}; a patch may set {}",
                    echo(name),
                    PATCHABLE.join(", ")
                ),
            ));
        }
    }
    let wrong = |field: &str, want: &str| {
        Error::bad_request("invalid_json", format!("{field} must be {want}"))
    };
    let mut input = PatchInput::default();
    for (name, value) in fields {
        match (name.as_str(), value) {
            ("url", Value::String(url)) => input.url = Some(url),
            ("url", _) => return Err(wrong("url", "a string")),
            ("expires_at", Value::Null) => input.expires_at = Some(None),
            ("expires_at", Value::String(text)) => {
                input.expires_at = Some(Some(rfc3339("expires_at", "invalid_expiry", &text)?))
            }
            ("expires_at", _) => return Err(wrong("expires_at", "an RFC 3339 time or null")),
            ("tags", Value::Array(tags)) => {
                input.tags = Some(
                    tags.into_iter()
                        .map(|t| match t {
                            Value::String(t) => Ok(t),
                            _ => Err(wrong("tags", "an array of strings")),
                        })
                        .collect::<Result<_, _>>()?,
                )
            }
            ("tags", _) => return Err(wrong("tags", "an array of strings")),
            ("disabled", Value::Bool(disabled)) => input.disabled = Some(disabled),
            ("disabled", _) => return Err(wrong("disabled", "true or false")),
            ("max_visits", Value::Null) => input.max_visits = Some(None),
            ("max_visits", Value::Number(n)) => match n.as_u64() {
                Some(n) => input.max_visits = Some(Some(n)),
                None => return Err(wrong("max_visits", "a positive integer or null")),
            },
            ("max_visits", _) => return Err(wrong("max_visits", "a positive integer or null")),
            ("password", Value::Null) => input.password = Some(None),
            ("password", Value::String(password)) => input.password = Some(Some(password)),
            ("password", _) => return Err(wrong("password", "a string or null")),
            ("domain", Value::Null) => input.domain = Some(None),
            ("domain", Value::String(host)) => input.domain = Some(Some(host)),
            ("domain", _) => return Err(wrong("domain", "a host or null")),
            ("rules", Value::Null) => input.rules = Some(Vec::new()),
            ("rules", rules @ Value::Array(_)) => {
                input.rules = Some(
                    serde_json::from_value(rules)
                        .map_err(|e| Error::bad_request("invalid_json", format!("rules: {e}")))?,
                )
            }
            ("rules", _) => return Err(wrong("rules", "an array of rules or null")),
            ("ios", Value::Null) => input.ios = Some(None),
            ("ios", Value::String(t)) => input.ios = Some(Some(t)),
            ("ios", _) => return Err(wrong("ios", "a URL or null")),
            ("android", Value::Null) => input.android = Some(None),
            ("android", Value::String(t)) => input.android = Some(Some(t)),
            ("android", _) => return Err(wrong("android", "a URL or null")),
            ("variants", Value::Null) => input.variants = Some(Vec::new()),
            ("variants", variants @ Value::Array(_)) => {
                input.variants =
                    Some(serde_json::from_value(variants).map_err(|e| {
                        Error::bad_request("invalid_json", format!("variants: {e}"))
                    })?)
            }
            ("variants", _) => return Err(wrong("variants", "an array of variants or null")),
            ("pass_query", Value::Bool(pass)) => input.pass_query = Some(pass),
            ("pass_query", _) => return Err(wrong("pass_query", "true or false")),
            (field @ ("title" | "description" | "image"), value) => {
                let set = match value {
                    Value::Null => None,
                    Value::String(text) => Some(text),
                    _ => return Err(wrong(field, "a string or null")),
                };
                let preview = &mut input.preview;
                match field {
                    "title" => preview.title = Some(set),
                    "description" => preview.description = Some(set),
                    _ => preview.image = Some(set),
                }
            }
            (utm, value) if utm.starts_with("utm_") => {
                let field = input
                    .utm
                    .field(utm)
                    .ok_or_else(|| wrong(utm, "a known field"))?;
                *field = Some(match value {
                    Value::Null => None,
                    Value::String(text) => Some(text),
                    _ => return Err(wrong(utm, "a string or null")),
                });
            }
            _ => {}
        }
    }
    Ok(input)
}

/// One event of a link's history.
#[derive(Serialize)]
pub(super) struct EventJson<'a> {
    at: Millis,
    key: &'a str,
    kind: &'static str,
    change: &'a Value,
}

impl<'a> EventJson<'a> {
    pub(super) fn new(event: &'a Event) -> Self {
        Self {
            at: Millis(event.at),
            key: &event.key,
            kind: event.kind.name(),
            change: &event.change,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn times_are_written_as_chrono_writes_them_to_the_millisecond() {
        let times = [
            Utc.timestamp_millis_opt(0).unwrap(),
            Utc.timestamp_millis_opt(1_700_000_000_123).unwrap(),
            Utc.timestamp_millis_opt(253_402_300_799_999).unwrap(),
            Utc.with_ymd_and_hms(12_000, 1, 2, 3, 4, 5).unwrap(),
            Utc.with_ymd_and_hms(-1, 12, 31, 23, 59, 59).unwrap(),
            Utc.with_ymd_and_hms(2016, 12, 31, 23, 59, 59).unwrap()
                + chrono::Duration::nanoseconds(1_500_000_000),
        ];
        for t in times {
            let expected = serde_json::to_string(&t.to_rfc3339_opts(SecondsFormat::Millis, true))
                .expect("serializes");
            assert_eq!(
                serde_json::to_string(&Millis(t)).expect("serializes"),
                expected
            );
        }
    }

    #[test]
    fn a_link_is_serialized_with_its_short_url_and_escaped_fields() {
        let public = PublicBase::new("https://s.test/");
        let link = Link {
            code: "abc1234".into(),
            domain: None,
            routes: Default::default(),
            tenant: "t\"en".into(),
            owner: "ci".into(),
            url: "https://example.com/\"q\"\\b\u{1}/ü".into(),
            created_at: Utc.timestamp_millis_opt(1_700_000_000_123).unwrap(),
            expires_at: None,
            deleted_at: None,
            disabled_at: None,
            max_visits: Some(3),
            tags: vec!["a".into()],
            import_batch: None,
            password: None,
            clicks: Default::default(),
        };
        let now = Utc.timestamp_millis_opt(1_750_000_000_000).unwrap();
        let json: Value = serde_json::from_slice(
            &serde_json::to_vec(&LinkJson::at(&public, &link, now)).expect("serializes"),
        )
        .expect("JSON");
        assert_eq!(json["short_url"], "https://s.test/abc1234");
        assert_eq!(json["url"], link.url.as_str());
        assert_eq!(json["tenant"], "t\"en");
        assert_eq!(json["created_at"], "2023-11-14T22:13:20.123Z");
        assert_eq!(json["expires_at"], Value::Null);
        assert_eq!(json["max_visits"], 3);
    }
}
