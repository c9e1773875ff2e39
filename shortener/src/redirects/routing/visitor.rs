//! What a request offers a link's conditions ([`Visitor`]): each part (the agent's profile, the
//! preferred language, the client's address and country, the query, the time) read on first use
//! and only if a condition or the routing needs it.

use super::SPLIT_HASH;
use crate::domain::rules::Condition;
use crate::visits::classify::{AgentProfile, agent_profile};
use axum::http::{HeaderMap, header};
use chrono::{DateTime, Utc};
use std::borrow::Cow;
use std::cell::OnceCell;
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::IpAddr;

/// What a request offers the conditions, each read on first use.
pub struct Visitor<'a> {
    /// The link's key (a split's assignment is per link).
    key: &'a str,
    /// The short URL's path after `/` (a split's cookie is scoped to it; see [`Visitor::at`]).
    pub(super) path: &'a str,
    /// Whether a split's cookie is `Secure`.
    pub(super) secure: bool,
    headers: &'a HeaderMap,
    /// The `User-Agent`, read once by the edge for the routing and the visit's counting.
    user_agent: Option<&'a str>,
    pub(super) query: Option<&'a str>,
    now: OnceCell<DateTime<Utc>>,
    client: &'a dyn Fn() -> IpAddr,
    country: &'a dyn Fn(IpAddr) -> Option<[u8; 2]>,
    agent: OnceCell<AgentProfile>,
    /// The preferred language's bytes (printable ASCII when a condition can match it).
    language: OnceCell<Option<&'a [u8]>>,
    address: OnceCell<IpAddr>,
    /// The query's pairs, decoded once for every query condition of the link (a link may
    /// have hundreds; each parsing a long query again would cost a request as much).
    pairs: OnceCell<Vec<(Cow<'a, str>, Cow<'a, str>)>>,
}

impl<'a> Visitor<'a> {
    /// A visit of the link of `key` with `headers` and the short URL's `query`; `client`
    /// finds the client address (by the trusted-proxy rules) and `country` its country, when
    /// asked. The time is read when a condition asks for it.
    pub fn new(
        key: &'a str,
        headers: &'a HeaderMap,
        user_agent: Option<&'a str>,
        query: Option<&'a str>,
        client: &'a dyn Fn() -> IpAddr,
        country: &'a dyn Fn(IpAddr) -> Option<[u8; 2]>,
    ) -> Self {
        Self {
            key,
            path: key,
            secure: false,
            headers,
            user_agent,
            query,
            now: OnceCell::new(),
            client,
            country,
            agent: OnceCell::new(),
            language: OnceCell::new(),
            address: OnceCell::new(),
            pairs: OnceCell::new(),
        }
    }

    /// The visit as asked for at `/{path}` (a split's cookie is scoped to it), its cookie
    /// `Secure` if `secure`.
    pub fn at(mut self, path: &'a str, secure: bool) -> Self {
        self.path = path;
        self.secure = secure;
        self
    }

    /// The visit at `now` instead of the time a condition reads it (for tests).
    pub fn at_time(self, now: DateTime<Utc>) -> Self {
        let _ = self.now.set(now);
        self
    }

    /// The user agent's profile, if a condition read it (so the visit's counting reads it
    /// from here instead of again).
    pub fn profile(&self) -> Option<AgentProfile> {
        self.agent.get().copied()
    }

    pub(super) fn now(&self) -> DateTime<Utc> {
        *self.now.get_or_init(Utc::now)
    }

    pub(super) fn agent(&self) -> &AgentProfile {
        self.agent.get_or_init(|| agent_profile(self.user_agent))
    }

    pub(super) fn language(&self) -> Option<&'a [u8]> {
        *self.language.get_or_init(|| {
            let value = self.headers.get(header::ACCEPT_LANGUAGE)?;
            first_language(value.as_bytes())
                .unwrap_or_else(|| preferred_language(value.to_str().ok()?).map(str::as_bytes))
        })
    }

    pub(super) fn address(&self) -> IpAddr {
        *self.address.get_or_init(|| (self.client)())
    }

    pub(super) fn query_values<'q>(&'q self, key: &'q str) -> impl Iterator<Item = &'q str> {
        self.pairs
            .get_or_init(|| {
                url::form_urlencoded::parse(self.query.unwrap_or("").as_bytes()).collect()
            })
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_ref())
    }

    /// The variant index the visitor's cookie `name` names, if it names one of `count`.
    pub(super) fn cookie_variant(&self, name: &str, count: usize) -> Option<usize> {
        // One lookup finds a new visitor (no cookie at all); only a visitor with cookies has
        // every `Cookie` header read.
        self.headers.get(header::COOKIE)?;
        self.headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(cookie, _)| *cookie == name)
            .and_then(|(_, value)| value.trim().parse::<usize>().ok())
            .filter(|index| *index < count)
    }

    /// The visitor's bucket in 0..100 for the split `name` without a cookie: a hash of the
    /// link's key, the split's name, the client address and the user agent under a fixed seed
    /// (foldhash, the same on every node of a release), so a visitor without cookies who comes
    /// back from the same address and browser lands on the same variant. Not a secret: a
    /// visitor may pick its variant by its cookie anyway.
    pub(super) fn bucket(&self, name: &str) -> u8 {
        let mut hash = SPLIT_HASH.build_hasher();
        hash.write(self.key.as_bytes());
        hash.write(name.as_bytes());
        self.address().hash(&mut hash);
        if let Some(agent) = self.user_agent {
            hash.write(agent.as_bytes());
        }
        (hash.finish() % 100) as u8
    }

    pub(super) fn meets(&self, condition: &Condition) -> bool {
        match condition {
            Condition::Device { value } => self.agent().device == Some(*value),
            Condition::Os { value } => self.agent().os == Some(*value),
            Condition::Browser { value } => self.agent().browser == Some(*value),
            Condition::Language { value } => self
                .language()
                .is_some_and(|preferred| language_matches(preferred, value)),
            Condition::Country { value } => (self.country)(self.address())
                .is_some_and(|code| code.eq_ignore_ascii_case(value.as_bytes())),
            // Without a query no query condition holds: nothing to parse.
            Condition::Query { .. } if self.query.is_none_or(str::is_empty) => false,
            Condition::Query { key, values } => {
                let mut found = self.query_values(key);
                if values.is_empty() {
                    found.next().is_some()
                } else {
                    found.any(|v| values.iter().any(|want| *want == v))
                }
            }
            Condition::Before { value } => self.now() < *value,
            Condition::After { value } => self.now() >= *value,
            Condition::Cidr { value } => value.contains(&self.address()),
        }
    }
}

/// Whether the `preferred` language (as the visitor wrote it) is the condition's `tag` (lower
/// case): the same tag without case, or a region of it when the tag is a primary tag alone
/// (`de` holds for `de-AT`, `de-at` not for `de`). The lengths are compared first, so a tag of
/// another length costs no compare.
pub(super) fn language_matches(preferred: &[u8], tag: &str) -> bool {
    let (p, t) = (preferred, tag.as_bytes());
    if p.len() == t.len() {
        return p.eq_ignore_ascii_case(t);
    }
    p.len() > t.len()
        && p[t.len()] == b'-'
        && p[..t.len()].eq_ignore_ascii_case(t)
        && !t.contains(&b'-')
}

/// The preferred language of an `Accept-Language` value whose first range is a plain tag (no
/// q-value, printable ASCII): that range, found without reading the rest of the value (which
/// cannot change the answer; see [`preferred_language`]). `None` when the first range needs the
/// full reading: it has parameters, is empty or `*`, or holds other bytes.
pub(super) fn first_language(value: &[u8]) -> Option<Option<&[u8]>> {
    let mut end = 0;
    while end < value.len() && value[end] != b',' {
        if value[end] == b';' || !(value[end] == b' ' || value[end].is_ascii_graphic()) {
            return None;
        }
        end += 1;
    }
    let tag = value[..end].trim_ascii();
    if tag.is_empty() || tag == b"*" {
        return None;
    }
    Some(Some(tag))
}

/// The visitor's preferred language: the range of `Accept-Language` with the highest q-value
/// (the first of equals), as written (conditions compare it without case); `*` and `q=0`
/// ranges are never preferred.
pub fn preferred_language(accept: &str) -> Option<&str> {
    // Most agents send their preferred language first, without a q-value (q=1): that range is
    // the answer, found without splitting the rest.
    let bytes = accept.as_bytes();
    let (mut end, mut params) = (0, false);
    while end < bytes.len() && bytes[end] != b',' {
        params |= bytes[end] == b';';
        end += 1;
    }
    if !params {
        let tag = accept[..end].trim_ascii();
        if !tag.is_empty() && tag != "*" {
            return Some(tag);
        }
    }
    let mut best: Option<(f32, &str)> = None;
    for range in accept.split(',').take(32) {
        let mut parts = range.split(';');
        let tag = parts.next().unwrap_or("").trim_ascii();
        if tag.is_empty() || tag == "*" {
            continue;
        }
        let Some(q) = parts.find_map(|p| p.trim_ascii().strip_prefix("q=")) else {
            // No q-value is q=1, the highest there is: nothing after it can be preferred, and
            // only an earlier range of q=1 is preferred to it.
            return Some(best.filter(|(b, _)| *b >= 1.0).map_or(tag, |(_, t)| t));
        };
        let q = q.trim_ascii().parse::<f32>().unwrap_or(0.0);
        if q > 0.0 && best.is_none_or(|(b, _)| q > b) {
            best = Some((q, tag));
        }
    }
    best.map(|(_, tag)| tag)
}
