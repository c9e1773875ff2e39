//! A link's redirect rules as the edge decides them: compiled once, when the link enters the
//! redirect cache (each target checked as the `Location` it is sent as), then decided per
//! request in memory. What a request is read for is read once and only if some condition needs
//! it: the user agent's profile (remembered per agent), the preferred language, the client's
//! address and country, the query.

use crate::domain::rules::{Condition, Rules};
use crate::visits::classify::{AgentProfile, agent_profile};
use axum::http::{HeaderMap, HeaderValue, header};
use chrono::{DateTime, Utc};
use std::cell::OnceCell;
use std::net::IpAddr;

/// The request headers an answer decided by rules depends on, for its `Vary`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Varies {
    /// Device, OS or browser conditions read `User-Agent`.
    pub user_agent: bool,
    /// Language conditions read `Accept-Language`.
    pub language: bool,
}

/// A link's rules, compiled.
#[derive(Debug, PartialEq, Eq)]
pub struct Routing {
    rules: Vec<(HeaderValue, Vec<Condition>)>,
    varies: Varies,
}

/// What a request offers the conditions, each read on first use.
pub struct Visitor<'a> {
    headers: &'a HeaderMap,
    query: Option<&'a str>,
    now: DateTime<Utc>,
    client: &'a dyn Fn() -> IpAddr,
    country: &'a dyn Fn(IpAddr) -> Option<[u8; 2]>,
    agent: OnceCell<AgentProfile>,
    language: OnceCell<Option<String>>,
    address: OnceCell<IpAddr>,
}

impl<'a> Visitor<'a> {
    /// A visit with `headers` and the short URL's `query`, at `now`; `client` finds the client
    /// address (by the trusted-proxy rules) and `country` its country, when asked.
    pub fn new(
        headers: &'a HeaderMap,
        query: Option<&'a str>,
        now: DateTime<Utc>,
        client: &'a dyn Fn() -> IpAddr,
        country: &'a dyn Fn(IpAddr) -> Option<[u8; 2]>,
    ) -> Self {
        Self {
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

    fn language(&self) -> Option<&str> {
        self.language
            .get_or_init(|| {
                preferred_language(
                    self.headers
                        .get(header::ACCEPT_LANGUAGE)
                        .and_then(|v| v.to_str().ok())?,
                )
            })
            .as_deref()
    }

    fn address(&self) -> IpAddr {
        *self.address.get_or_init(|| (self.client)())
    }

    fn query_values<'q>(&'q self, key: &'q str) -> impl Iterator<Item = std::borrow::Cow<'q, str>> {
        url::form_urlencoded::parse(self.query.unwrap_or("").as_bytes())
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v)
    }

    fn meets(&self, condition: &Condition) -> bool {
        match condition {
            Condition::Device { value } => self.agent().device == Some(*value),
            Condition::Os { value } => self.agent().os == Some(*value),
            Condition::Browser { value } => self.agent().browser == Some(*value),
            Condition::Language { value } => self.language().is_some_and(|preferred| {
                preferred == value
                    || (!value.contains('-')
                        && preferred
                            .split_once('-')
                            .is_some_and(|(primary, _)| primary == value))
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

/// The visitor's preferred language: the range of `Accept-Language` with the highest q-value
/// (the first of equals), lower case; `*` and `q=0` ranges are never preferred.
pub fn preferred_language(accept: &str) -> Option<String> {
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
    best.map(|(_, tag)| tag.to_ascii_lowercase())
}

impl Routing {
    /// `rules` compiled, or `None` when there are none (a plain link). A target that is no
    /// valid `Location` (impossible for a checked URL) is left out.
    pub fn compile(rules: &Rules) -> Option<Self> {
        if rules.is_empty() {
            return None;
        }
        let mut varies = Varies::default();
        let compiled = rules
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
                let location = HeaderValue::from_str(&rule.url).ok()?;
                Some((location, rule.conditions.clone()))
            })
            .collect();
        Some(Self {
            rules: compiled,
            varies,
        })
    }

    /// The target of the first rule whose conditions `visitor` all meets; `None`: the link's
    /// own URL.
    pub fn choose(&self, visitor: &Visitor<'_>) -> Option<&HeaderValue> {
        self.rules
            .iter()
            .find(|(_, conditions)| conditions.iter().all(|c| visitor.meets(c)))
            .map(|(location, _)| location)
    }

    /// The request headers the choice depends on.
    pub fn varies(&self) -> Varies {
        self.varies
    }

    /// Bytes the compiled rules hold (for the cache's weight).
    pub fn weight(&self) -> usize {
        self.rules
            .iter()
            .map(|(location, conditions)| location.len() + conditions.len() * 48)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preferred_language_is_the_highest_q_value() {
        for (header, want) in [
            ("de-AT,de;q=0.9,en;q=0.8", Some("de-at")),
            ("en;q=0.5, fr;q=0.9", Some("fr")),
            ("*;q=1, it", Some("it")),
            ("es;q=0, pt-BR", Some("pt-br")),
            ("en;q=oops, nl;q=0.1", Some("nl")),
            ("", None),
            ("*", None),
        ] {
            assert_eq!(preferred_language(header).as_deref(), want, "{header}");
        }
    }
}
