//! The JSON API's answers: links, pages and history events, serialized straight from the
//! domain types.

use super::*;

/// A time as the API shows every time: RFC 3339 to the millisecond, in UTC
/// (`YYYY-MM-DDTHH:MM:SS.mmmZ`, as chrono writes it), serialized without a heap string.
#[derive(Clone, Copy)]
pub(in crate::http::api) struct Millis(pub(super) DateTime<Utc>);

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
pub(in crate::http::api) struct LinkJson<'a> {
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
    pub(in crate::http::api) fn new(public: &'a PublicBase, link: &'a Link) -> Self {
        Self::at(public, link, Utc::now())
    }

    /// `link` as shown under `public`, its state as of `now` (one reading of the clock for a
    /// whole batch of links).
    pub(in crate::http::api) fn at(
        public: &'a PublicBase,
        link: &'a Link,
        now: DateTime<Utc>,
    ) -> Self {
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
pub(in crate::http::api) struct ReceiptJson<'a> {
    code: &'a str,
    short_url: ShortUrl<'a>,
}

/// The link a create or an edit answers: whole, or as a receipt to a caller that may not read
/// it.
#[derive(Serialize)]
#[serde(untagged)]
pub(in crate::http::api) enum LinkAnswer<'a> {
    Whole(Box<LinkJson<'a>>),
    Receipt(ReceiptJson<'a>),
}

impl<'a> LinkAnswer<'a> {
    /// `link` as answered to `caller` (`created`: its request just made it).
    pub(in crate::http::api) fn to(
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
/// A page of a list.
#[derive(Serialize)]
pub(in crate::http::api) struct PageJson<'a> {
    pub(in crate::http::api) links: Vec<LinkJson<'a>>,
    pub(in crate::http::api) next_cursor: Option<&'a str>,
}

/// One event of a link's history.
#[derive(Serialize)]
pub(in crate::http::api) struct EventJson<'a> {
    at: Millis,
    key: &'a str,
    kind: &'static str,
    change: &'a Value,
}

impl<'a> EventJson<'a> {
    pub(in crate::http::api) fn new(event: &'a Event) -> Self {
        Self {
            at: Millis(event.at),
            key: &event.key,
            kind: event.kind.name(),
            change: &event.change,
        }
    }
}
