//! A link's routing as the edge decides it: compiled once, when the link enters the redirect
//! cache (each target checked as the `Location` it is sent as), then decided per request in
//! memory, in the order of [`crate::domain::routes`]: the first rule that holds, the app target
//! of the visitor's operating system, the visitor's variant of a split, else the link's URL.
//! What a request is read for is read once and only if something needs it: the user agent's
//! profile (remembered per agent), the preferred language, the client's address and country,
//! the query, the split's cookie.

use crate::domain::Routes;
use crate::domain::routes::with_params;
use crate::domain::rules::{Condition, Os};
use crate::visits::classify::{AgentProfile, agent_profile};
use axum::http::{HeaderMap, HeaderValue, header};
use chrono::{DateTime, Utc};
use std::hash::{BuildHasher, Hash, Hasher};

/// The hasher of a split's assignment: seeded with a constant, so every node agrees.
const SPLIT_HASH: foldhash::fast::FixedState =
    foldhash::fast::FixedState::with_seed(0x5ee7_5b11_7000_0001);
use std::cell::OnceCell;
use std::net::IpAddr;

/// The request headers an answer decided by rules depends on, for its `Vary`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Varies {
    /// Device, OS or browser conditions read `User-Agent`.
    pub user_agent: bool,
    /// Language conditions read `Accept-Language`.
    pub language: bool,
    /// A split reads its cookie.
    pub cookie: bool,
    /// The answer depends on who asks (rules, app targets, a split): no shared cache may keep
    /// it. UTM parameters and the passed-on query alone do not make it so (the query is part
    /// of the URL a cache keys on).
    pub personal: bool,
}

/// The name of the cookie that keeps a visitor on its variant of a split (one per link: its
/// path is the short URL's).
pub const SPLIT_COOKIE: &str = "sv";

/// What the routing chose for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chosen<'a> {
    /// A rule's target.
    Rule(&'a HeaderValue),
    /// The app target of the visitor's operating system.
    App(&'a HeaderValue),
    /// A variant of the split (its index) and its target; `fresh` when the visitor had no valid
    /// cookie for it (the answer sets one).
    Variant {
        /// The variant's index.
        index: usize,
        /// Its target.
        location: &'a HeaderValue,
        /// Whether the visitor is assigned just now.
        fresh: bool,
    },
    /// The link's own URL.
    Url,
}

/// A link's rules, compiled.
#[derive(Debug, PartialEq, Eq)]
pub struct Routing {
    rules: Vec<(HeaderValue, Vec<Condition>)>,
    ios: Option<HeaderValue>,
    android: Option<HeaderValue>,
    /// Each variant's target and the end of its share of 0..100.
    split: Vec<(HeaderValue, u8)>,
    /// The link's own URL with its UTM parameters, when it has some.
    url: Option<HeaderValue>,
    /// Whether the short URL's query is passed on.
    pass_query: bool,
    /// The `Vary` of its answers (the headers its choice reads), made once.
    vary: Option<HeaderValue>,
    /// What preview crawlers are shown, if the link has a preview.
    preview: Option<crate::domain::routes::Preview>,
    varies: Varies,
}

/// What a request offers the conditions, each read on first use.
pub struct Visitor<'a> {
    /// The link's key (a split's assignment is per link).
    key: &'a str,
    headers: &'a HeaderMap,
    query: Option<&'a str>,
    now: DateTime<Utc>,
    client: &'a dyn Fn() -> IpAddr,
    country: &'a dyn Fn(IpAddr) -> Option<[u8; 2]>,
    agent: OnceCell<AgentProfile>,
    language: OnceCell<Option<&'a str>>,
    address: OnceCell<IpAddr>,
}

impl<'a> Visitor<'a> {
    /// A visit with `headers` and the short URL's `query`, at `now`; `client` finds the client
    /// address (by the trusted-proxy rules) and `country` its country, when asked.
    pub fn new(
        key: &'a str,
        headers: &'a HeaderMap,
        query: Option<&'a str>,
        now: DateTime<Utc>,
        client: &'a dyn Fn() -> IpAddr,
        country: &'a dyn Fn(IpAddr) -> Option<[u8; 2]>,
    ) -> Self {
        Self {
            key,
            headers,
            query,
            now,
            client,
            country,
            agent: OnceCell::new(),
            language: OnceCell::new(),
            address: OnceCell::new(),
        }
    }

    fn agent(&self) -> &AgentProfile {
        self.agent.get_or_init(|| {
            agent_profile(
                self.headers
                    .get(header::USER_AGENT)
                    .and_then(|v| v.to_str().ok()),
            )
        })
    }

    fn language(&self) -> Option<&'a str> {
        *self.language.get_or_init(|| {
            preferred_language(
                self.headers
                    .get(header::ACCEPT_LANGUAGE)
                    .and_then(|v| v.to_str().ok())?,
            )
        })
    }

    fn address(&self) -> IpAddr {
        *self.address.get_or_init(|| (self.client)())
    }

    fn query_values<'q>(&'q self, key: &'q str) -> impl Iterator<Item = std::borrow::Cow<'q, str>> {
        url::form_urlencoded::parse(self.query.unwrap_or("").as_bytes())
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// The variant index the visitor's cookie names, if it names one of `count`.
    fn cookie_variant(&self, count: usize) -> Option<usize> {
        self.headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == SPLIT_COOKIE)
            .and_then(|(_, value)| value.trim().parse::<usize>().ok())
            .filter(|index| *index < count)
    }

    /// The visitor's bucket in 0..100 for a split without a cookie: a hash of the link's key,
    /// the client address and the user agent under a fixed seed (foldhash, the same on every
    /// node of a release), so a visitor without cookies who comes back from the same address
    /// and browser lands on the same variant. Not a secret: a visitor may pick its variant by
    /// its cookie anyway.
    fn bucket(&self) -> u8 {
        let mut hash = SPLIT_HASH.build_hasher();
        hash.write(self.key.as_bytes());
        self.address().hash(&mut hash);
        if let Some(agent) = self.headers.get(header::USER_AGENT) {
            hash.write(agent.as_bytes());
        }
        (hash.finish() % 100) as u8
    }

    fn meets(&self, condition: &Condition) -> bool {
        match condition {
            Condition::Device { value } => self.agent().device == Some(*value),
            Condition::Os { value } => self.agent().os == Some(*value),
            Condition::Browser { value } => self.agent().browser == Some(*value),
            Condition::Language { value } => self.language().is_some_and(|preferred| {
                preferred.eq_ignore_ascii_case(value)
                    || (!value.contains('-')
                        && preferred
                            .split_once('-')
                            .is_some_and(|(primary, _)| primary.eq_ignore_ascii_case(value)))
            }),
            Condition::Country { value } => (self.country)(self.address())
                .is_some_and(|code| code.eq_ignore_ascii_case(value.as_bytes())),
            Condition::Query { key, values } => {
                let mut found = self.query_values(key);
                if values.is_empty() {
                    found.next().is_some()
                } else {
                    found.any(|v| values.iter().any(|want| *want == v))
                }
            }
            Condition::Before { value } => self.now < *value,
            Condition::After { value } => self.now >= *value,
            Condition::Cidr { value } => value.contains(&self.address()),
        }
    }
}

/// The `Vary` value naming the headers `varies` reads, if any.
fn vary_of(varies: Varies) -> Option<HeaderValue> {
    let read = [
        (varies.user_agent, "User-Agent"),
        (varies.language, "Accept-Language"),
        (varies.cookie, "Cookie"),
    ];
    let names: Vec<&str> = read.iter().filter(|(on, _)| *on).map(|(_, h)| *h).collect();
    (!names.is_empty())
        .then(|| HeaderValue::from_str(&names.join(", ")).ok())
        .flatten()
}

/// The visitor's preferred language: the range of `Accept-Language` with the highest q-value
/// (the first of equals), as written (conditions compare it without case); `*` and `q=0`
/// ranges are never preferred.
pub fn preferred_language(accept: &str) -> Option<&str> {
    let mut best: Option<(f32, &str)> = None;
    for range in accept.split(',').take(32) {
        let mut parts = range.split(';');
        let tag = parts.next().unwrap_or("").trim();
        if tag.is_empty() || tag == "*" {
            continue;
        }
        let q = parts
            .find_map(|p| p.trim().strip_prefix("q="))
            .map_or(Some(1.0), |q| q.trim().parse::<f32>().ok())
            .unwrap_or(0.0);
        if q > 0.0 && best.is_none_or(|(b, _)| q > b) {
            best = Some((q, tag));
        }
    }
    best.map(|(_, tag)| tag)
}

impl Routing {
    /// `routes` compiled, or `None` for a plain link. A target that is no valid `Location`
    /// (impossible for a checked URL) is left out.
    pub fn compile(routes: &Routes, url: &str) -> Option<Self> {
        if routes.is_empty() {
            return None;
        }
        let mut varies = Varies {
            user_agent: routes.ios.is_some() || routes.android.is_some(),
            cookie: !routes.variants.is_empty(),
            personal: !routes.rules.is_empty()
                || routes.ios.is_some()
                || routes.android.is_some()
                || !routes.variants.is_empty()
                || !routes.preview.is_empty(),
            ..Varies::default()
        };
        // A preview is answered to crawlers only: the redirect varies by user agent.
        varies.user_agent |= !routes.preview.is_empty();
        // Every http(s) target carries the link's UTM parameters, added once, here.
        let header = |url: &str| HeaderValue::from_str(&with_params(url, routes.utm.pairs())).ok();
        let mut end = 0u8;
        let split = routes
            .variants
            .iter()
            .filter_map(|v| {
                end = end.saturating_add(v.weight);
                Some((header(&v.url)?, end))
            })
            .collect();
        let compiled = routes
            .rules
            .0
            .iter()
            .filter_map(|rule| {
                for condition in &rule.conditions {
                    match condition {
                        Condition::Device { .. }
                        | Condition::Os { .. }
                        | Condition::Browser { .. } => varies.user_agent = true,
                        Condition::Language { .. } => varies.language = true,
                        _ => {}
                    }
                }
                let location = header(&rule.url)?;
                Some((location, rule.conditions.clone()))
            })
            .collect();
        Some(Self {
            rules: compiled,
            ios: routes.ios.as_deref().and_then(header),
            android: routes.android.as_deref().and_then(header),
            split,
            url: (!routes.utm.is_empty()).then(|| header(url)).flatten(),
            pass_query: routes.pass_query,
            preview: (!routes.preview.is_empty()).then(|| routes.preview.clone()),
            vary: vary_of(varies),
            varies,
        })
    }

    /// Where `visitor` goes: the first rule whose conditions it all meets, else the app target
    /// of its operating system, else its variant of the split, else the link's own URL.
    pub fn choose(&self, visitor: &Visitor<'_>) -> Chosen<'_> {
        if let Some((location, _)) = self
            .rules
            .iter()
            .find(|(_, conditions)| conditions.iter().all(|c| visitor.meets(c)))
        {
            return Chosen::Rule(location);
        }
        if self.ios.is_some() || self.android.is_some() {
            let app = match visitor.agent().os {
                Some(Os::Ios) => self.ios.as_ref(),
                Some(Os::Android) => self.android.as_ref(),
                _ => None,
            };
            if let Some(location) = app {
                return Chosen::App(location);
            }
        }
        if self.split.is_empty() {
            return Chosen::Url;
        }
        let (index, fresh) = match visitor.cookie_variant(self.split.len()) {
            Some(index) => (index, false),
            None => {
                let bucket = visitor.bucket();
                let index = self
                    .split
                    .iter()
                    .position(|(_, end)| bucket < *end)
                    .unwrap_or(self.split.len() - 1);
                (index, true)
            }
        };
        Chosen::Variant {
            index,
            location: &self.split[index].0,
            fresh,
        }
    }

    /// What preview crawlers are shown, if the link has a preview.
    pub fn preview(&self) -> Option<&crate::domain::routes::Preview> {
        self.preview.as_ref()
    }

    /// The link's own URL with its UTM parameters, if it has some.
    pub fn url(&self) -> Option<&HeaderValue> {
        self.url.as_ref()
    }

    /// `location` with the short URL's `query` passed on, if the link passes it on (a
    /// parameter the target has already is kept as the target has it).
    pub fn pass_on(&self, location: &HeaderValue, query: Option<&str>) -> Option<HeaderValue> {
        let query = query.filter(|q| self.pass_query && !q.is_empty())?;
        let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
            .take(64)
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let target = location.to_str().ok()?;
        let passed = with_params(target, pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        HeaderValue::from_str(&passed).ok()
    }

    /// The `Vary` header value of its answers, if the choice reads any header.
    pub fn vary(&self) -> Option<&HeaderValue> {
        self.vary.as_ref()
    }

    /// The request headers the choice depends on.
    pub fn varies(&self) -> Varies {
        self.varies
    }

    /// Bytes the compiled rules hold (for the cache's weight).
    pub fn weight(&self) -> usize {
        let rules: usize = self
            .rules
            .iter()
            .map(|(location, conditions)| location.len() + conditions.len() * 48)
            .sum();
        let apps = [&self.ios, &self.android]
            .iter()
            .filter_map(|a| a.as_ref().map(HeaderValue::len))
            .sum::<usize>();
        rules + apps + self.split.iter().map(|(l, _)| l.len() + 8).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preferred_language_is_the_highest_q_value() {
        for (header, want) in [
            ("de-AT,de;q=0.9,en;q=0.8", Some("de-AT")),
            ("en;q=0.5, fr;q=0.9", Some("fr")),
            ("*;q=1, it", Some("it")),
            ("es;q=0, pt-BR", Some("pt-BR")),
            ("en;q=oops, nl;q=0.1", Some("nl")),
            ("", None),
            ("*", None),
        ] {
            assert_eq!(preferred_language(header), want, "{header}");
        }
    }
}
