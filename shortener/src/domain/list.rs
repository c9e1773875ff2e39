//! Listing a tenant's links: the filters, the keyset position, and a page.
//!
//! Lists are newest first, ordered by (`created_at`, `code`) descending. A page continues after
//! the position of the last link of the one before, so a page costs the same however deep it
//! is, and paging through while links are created or deleted returns every link that existed
//! throughout exactly once (a link keeps its creation time and code for life).

use super::{Error, Link, echo, tags::check_tag};
use chrono::{DateTime, Utc};

/// The default number of links on a page.
pub const DEFAULT_LIMIT: usize = 50;
/// The most links on a page.
pub const MAX_LIMIT: usize = 1000;

/// Which links by state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateFilter {
    /// Neither deleted, disabled, expired nor used up.
    Active,
    /// Past their expiry (and neither deleted nor disabled).
    Expired,
    /// Past their visit limit (and neither deleted, disabled nor expired).
    UsedUp,
    /// Disabled (and not deleted).
    Disabled,
    /// Deleted.
    Deleted,
    /// Every link.
    All,
}

impl StateFilter {
    /// The filter named `name`.
    pub fn parse(name: &str) -> Result<Self, Error> {
        Ok(match name {
            "active" => Self::Active,
            "expired" => Self::Expired,
            "used_up" => Self::UsedUp,
            "disabled" => Self::Disabled,
            "deleted" => Self::Deleted,
            "all" => Self::All,
            other => {
                return Err(Error::bad_request(
                    "invalid_state",
                    format!(
                        "state {} must be active, expired, used_up, disabled, deleted or all",
                        echo(other)
                    ),
                ));
            }
        })
    }
}

/// A target host to match: exactly, or with its subdomains. Kept with its labels reversed
/// (`com.example`), the way the stores index hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFilter {
    /// The host, labels reversed.
    pub reversed: String,
    /// Whether subdomains match too.
    pub subdomains: bool,
}

/// A host's labels reversed: `www.Example.com.` -> `com.example.www`.
pub fn reverse_host(host: &str) -> String {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let mut labels: Vec<&str> = host.split('.').collect();
    labels.reverse();
    labels.join(".")
}

impl HostFilter {
    /// `example.com` matches that host only; `.example.com` matches it and every subdomain.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let (host, subdomains) = match text.strip_prefix('.') {
            Some(rest) => (rest, true),
            None => (text, false),
        };
        let valid = !host.is_empty()
            && host.len() <= 253
            && host.split('.').all(|l| {
                !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
        if !valid {
            return Err(Error::bad_request(
                "invalid_host",
                format!(
                    "host {} must be a domain (`example.com`) or a suffix (`.example.com`)",
                    echo(text)
                ),
            ));
        }
        Ok(Self {
            reversed: reverse_host(host),
            subdomains,
        })
    }
}

/// Where a page starts: after the link with this creation time and code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// The creation time of the last link of the previous page.
    pub created_at: DateTime<Utc>,
    /// Its code.
    pub code: String,
}

impl Position {
    /// The position of `link`.
    pub fn of(link: &Link) -> Self {
        Self {
            created_at: link.created_at,
            code: link.code.clone(),
        }
    }
}

/// A list request, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    /// The tenant whose links to list; `None` for every tenant's (`admin`).
    pub tenant: Option<String>,
    /// At most this many links.
    pub limit: usize,
    /// Start after this link.
    pub after: Option<Position>,
    /// Only links with this tag.
    pub tag: Option<String>,
    /// Only links to this host.
    pub host: Option<HostFilter>,
    /// Only links in this state.
    pub state: StateFilter,
    /// Only links created at or after this.
    pub created_after: Option<DateTime<Utc>>,
    /// Only links created before this.
    pub created_before: Option<DateTime<Utc>>,
    /// Only links whose target contains this text.
    pub q: Option<String>,
    /// Only links on this domain.
    pub domain: Option<DomainFilter>,
    /// The moment states are judged at.
    pub now: DateTime<Utc>,
}

/// A list request as a transport received it (its cursor is checked by the link service).
#[derive(Debug, Clone, Default)]
pub struct ListInput {
    /// The page size.
    pub limit: Option<usize>,
    /// The opaque cursor of the previous page's `next_cursor`.
    pub cursor: Option<String>,
    /// A tag.
    pub tag: Option<String>,
    /// A host or `.suffix`.
    pub host: Option<String>,
    /// A state name.
    pub state: Option<String>,
    /// RFC 3339.
    pub created_after: Option<DateTime<Utc>>,
    /// RFC 3339.
    pub created_before: Option<DateTime<Utc>>,
    /// A substring of the target URL.
    pub q: Option<String>,
    /// A domain (resolved by the transport: [`DomainFilter::of`]).
    pub domain: Option<DomainFilter>,
}

/// Which domain's links a list holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainFilter {
    /// The default domain's (links made without a domain, and every link of before domains).
    Default,
    /// The branded domain of this host's (in normal form).
    Host(String),
}

impl DomainFilter {
    /// The filter `input` names under `rules` (a host of the default domain names the default
    /// domain); `invalid_domain` (a bad request) for text no domain can have.
    pub fn of(input: Option<&str>, rules: &super::CreateRules) -> Result<Option<Self>, Error> {
        let Some(text) = input.filter(|t| !t.is_empty()) else {
            return Ok(None);
        };
        // A filter is part of the query: a bad one is a bad request, as a bad tag is.
        let named = rules
            .domain(Some(text))
            .map_err(|e| Error::bad_request("invalid_domain", e.public_message()))?;
        Ok(Some(match named {
            Some(host) => DomainFilter::Host(host),
            None => DomainFilter::Default,
        }))
    }
}

/// The longest `q`.
const MAX_Q: usize = 256;
/// The shortest `q`: a trigram index answers a substring of three characters or more; a
/// shorter one would scan every link.
const MIN_Q: usize = 3;

impl ListQuery {
    /// Checks `input` (all but its cursor) for a caller confined to `tenant`, as of `now`.
    pub fn parse(
        input: &ListInput,
        tenant: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Self, Error> {
        let limit = input.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::bad_request(
                "invalid_limit",
                format!("limit must be 1 to {MAX_LIMIT}, not {limit}"),
            ));
        }
        if let Some(tag) = &input.tag {
            // A filter is part of the query: a bad one is a bad request.
            check_tag(tag).map_err(|e| Error::bad_request("invalid_tag", e.public_message()))?;
        }
        if let (Some(after), Some(before)) = (input.created_after, input.created_before)
            && after >= before
        {
            return Err(Error::bad_request(
                "invalid_range",
                "created_after must be before created_before",
            ));
        }
        if let Some(q) = &input.q
            && (q.chars().count() < MIN_Q
                || q.chars().count() > MAX_Q
                || q.chars().any(char::is_control))
        {
            return Err(Error::bad_request(
                "invalid_query",
                format!("q must be {MIN_Q} to {MAX_Q} characters without control characters"),
            ));
        }
        Ok(Self {
            tenant: tenant.map(str::to_string),
            limit,
            after: None,
            tag: input.tag.clone(),
            host: input.host.as_deref().map(HostFilter::parse).transpose()?,
            state: input
                .state
                .as_deref()
                .map_or(Ok(StateFilter::All), StateFilter::parse)?,
            created_after: input.created_after,
            created_before: input.created_before,
            q: input.q.clone(),
            domain: input.domain.clone(),
            now,
        })
    }

    /// What the filters are, for binding a cursor to them (the page size, the position and the
    /// clock aside: a client may change its page size between pages).
    pub fn filters_text(&self) -> String {
        let mut text = format!(
            "{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
            self.tenant,
            self.tag,
            self.host,
            self.state,
            self.created_after.map(|t| t.timestamp_micros()),
            self.created_before.map(|t| t.timestamp_micros()),
            self.q
        );
        // Only when set, so that cursors made before domains keep their filters' text.
        if let Some(domain) = &self.domain {
            text.push_str(&format!("|{domain:?}"));
        }
        text
    }
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The links, newest first.
    pub links: Vec<Link>,
    /// Where the next page starts, if there may be one.
    pub next: Option<Position>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_input_is_checked() {
        let now = Utc::now();
        let ok = ListQuery::parse(&ListInput::default(), Some("t"), now).expect("defaults");
        assert_eq!((ok.limit, ok.state), (DEFAULT_LIMIT, StateFilter::All));
        let bad: [(ListInput, &str); 7] = [
            (
                ListInput {
                    limit: Some(0),
                    ..Default::default()
                },
                "invalid_limit",
            ),
            (
                ListInput {
                    limit: Some(1001),
                    ..Default::default()
                },
                "invalid_limit",
            ),
            (
                ListInput {
                    state: Some("gone".into()),
                    ..Default::default()
                },
                "invalid_state",
            ),
            (
                ListInput {
                    tag: Some("Bad Tag".into()),
                    ..Default::default()
                },
                "invalid_tag",
            ),
            (
                ListInput {
                    host: Some("a b".into()),
                    ..Default::default()
                },
                "invalid_host",
            ),
            (
                ListInput {
                    created_after: Some(now),
                    created_before: Some(now),
                    ..Default::default()
                },
                "invalid_range",
            ),
            (
                ListInput {
                    q: Some(String::new()),
                    ..Default::default()
                },
                "invalid_query",
            ),
        ];
        for (input, code) in bad {
            assert_eq!(
                ListQuery::parse(&input, None, now).expect_err(code).code(),
                code
            );
        }
        let host = HostFilter::parse(".Example.com").expect("suffix");
        assert_eq!(
            (host.reversed.as_str(), host.subdomains),
            ("com.example", true)
        );
    }
}
