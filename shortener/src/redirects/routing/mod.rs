//! A link's routing as the edge decides it: compiled once, when the link enters the redirect
//! cache (each target checked as the `Location` it is sent as), then decided per request in
//! memory, in the order of [`crate::domain::routes`]: the first rule that holds, the app target
//! of the visitor's operating system, the visitor's variant of a split, else the link's URL.
//! What a request is read for is read once and only if something needs it: the user agent's
//! profile (remembered per agent), the preferred language, the client's address and country,
//! the query, the split's cookie.

mod visitor;

pub use visitor::{Visitor, preferred_language};

use crate::domain::routes::with_params;
use crate::domain::rules::{Condition, Os};
use crate::domain::{Route, Routes};
use axum::http::HeaderValue;

/// The hasher of a split's assignment: seeded with a constant, so every node agrees.
const SPLIT_HASH: foldhash::fast::FixedState =
    foldhash::fast::FixedState::with_seed(0x5ee7_5b11_7000_0001);
use std::sync::OnceLock;

/// The name of the cookie that keeps a visitor on its variant of a split (one per link: its
/// path is the short URL's).
pub const SPLIT_COOKIE: &str = "sv";

/// What the routing chose for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chosen<'a> {
    /// Where the visitor goes; `None`: the link's own URL (see [`Routing::url`]).
    pub location: Option<&'a HeaderValue>,
    /// Which target that is, for the rollups.
    pub route: Route,
    /// The cookie that keeps a visitor just assigned to a variant on it (none for a visitor
    /// whose cookie already named one).
    pub cookie: Option<&'a HeaderValue>,
}

/// A split: each variant's target and the end of its share of 0..100, and the cookie that keeps
/// a visitor on its variant (one per split; its values are made on the first new visitor).
#[derive(Debug)]
struct Split {
    variants: Vec<(HeaderValue, u8)>,
    /// The cookie's name: [`SPLIT_COOKIE`] for the link's split, `sv2` for rule 2's.
    name: Box<str>,
    /// `Set-Cookie` per variant, made once (they depend only on the short URL's path).
    cookies: OnceLock<Box<[Option<HeaderValue>]>>,
}

impl PartialEq for Split {
    fn eq(&self, other: &Self) -> bool {
        self.variants == other.variants && self.name == other.name
    }
}

impl Eq for Split {}

impl Split {
    fn new(variants: Vec<(HeaderValue, u8)>, name: String) -> Option<Self> {
        (!variants.is_empty()).then(|| Split {
            variants,
            name: name.into_boxed_str(),
            cookies: OnceLock::new(),
        })
    }

    /// The visitor's variant: the one its cookie names, else the one its bucket falls in (and
    /// the cookie that keeps it there).
    fn choose<'s>(
        &'s self,
        visitor: &Visitor<'_>,
    ) -> (usize, &'s HeaderValue, Option<&'s HeaderValue>) {
        if let Some(index) = visitor.cookie_variant(&self.name, self.variants.len()) {
            return (index, &self.variants[index].0, None);
        }
        let bucket = visitor.bucket(&self.name);
        let index = self
            .variants
            .iter()
            .position(|(_, end)| bucket < *end)
            .unwrap_or(self.variants.len() - 1);
        let cookies = self.cookies.get_or_init(|| {
            (0..self.variants.len())
                .map(|i| split_cookie(&self.name, i, visitor.path, visitor.secure))
                .collect()
        });
        (index, &self.variants[index].0, cookies[index].as_ref())
    }

    fn weight(&self) -> usize {
        self.variants.iter().map(|(l, _)| l.len() * 2 + 64).sum()
    }
}

/// The cookie that keeps a visitor on variant `index` of the split `name` of the short URL
/// `/{path}`: scoped to that path on the short domain, for 30 days, out of scripts' reach,
/// `Secure` under an https public URL.
fn split_cookie(name: &str, index: usize, path: &str, secure: bool) -> Option<HeaderValue> {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={index}; Path=/{path}; Max-Age=2592000; HttpOnly; SameSite=Lax{secure}"
    ))
    .ok()
}

/// Where a rule sends the visits that meet it.
#[derive(Debug, PartialEq, Eq)]
enum Goes {
    To(HeaderValue),
    Split(Split),
}

/// What a request is, as bits a rule's needs are checked against in one step: the agent's
/// device class, operating system and browser (one bit per value) and whether the short URL
/// has a query. A rule holds only if every bit it needs is set, so a rule whose agent
/// conditions the visitor does not meet, or one with a query condition asked without a
/// query, is passed over without reading anything else.
mod facts {
    use crate::domain::rules::{Browser, Condition, DeviceClass, Os};
    use crate::visits::classify::AgentProfile;

    /// The short URL has a (non-empty) query.
    pub const QUERY: u32 = 1 << 31;

    fn device(value: DeviceClass) -> u32 {
        1 << (value as u32)
    }

    fn os(value: Os) -> u32 {
        1 << (8 + value as u32)
    }

    fn browser(value: Browser) -> u32 {
        1 << (16 + value as u32)
    }

    /// The bits of an agent's profile.
    pub fn of_agent(profile: &AgentProfile) -> u32 {
        profile.device.map_or(0, device)
            | profile.os.map_or(0, os)
            | profile.browser.map_or(0, browser)
    }

    /// The bit `condition` needs set, if it needs one: all of an agent condition, a part of a
    /// query condition (a query must be there before its values are looked for).
    pub fn needed_by(condition: &Condition) -> Option<u32> {
        match condition {
            Condition::Device { value } => Some(device(*value)),
            Condition::Os { value } => Some(os(*value)),
            Condition::Browser { value } => Some(browser(*value)),
            Condition::Query { .. } => Some(QUERY),
            _ => None,
        }
    }

    /// Whether the bits of `condition` decide it alone (nothing is left to check).
    pub fn decide(condition: &Condition) -> bool {
        matches!(
            condition,
            Condition::Device { .. } | Condition::Os { .. } | Condition::Browser { .. }
        )
    }
}

/// A rule, compiled: the [`facts`] bits it needs, and the conditions those bits do not decide
/// (language, country, address, time, a query's keys and values), checked in order after.
/// Where it goes is boxed, so the rules a request walks past are 32 bytes each: ten of them
/// are five cache lines, not fifteen.
#[derive(Debug, PartialEq, Eq)]
struct Rule {
    need: u32,
    rest: Box<[Condition]>,
    goes: Box<Goes>,
}

impl Rule {
    fn new(goes: Goes, conditions: &[Condition]) -> Self {
        Self {
            goes: Box::new(goes),
            need: conditions
                .iter()
                .filter_map(facts::needed_by)
                .fold(0, |need, bit| need | bit),
            rest: conditions
                .iter()
                .filter(|c| !facts::decide(c))
                .cloned()
                .collect(),
        }
    }

    fn holds(&self, facts: u32, visitor: &Visitor<'_>) -> bool {
        facts & self.need == self.need && self.rest.iter().all(|c| visitor.meets(c))
    }
}

/// A link's rules, compiled.
#[derive(Debug, PartialEq, Eq)]
pub struct Routing {
    rules: Vec<Rule>,
    /// Some rule has an agent condition: the agent's profile is read before the rules are.
    agent_rules: bool,
    ios: Option<HeaderValue>,
    android: Option<HeaderValue>,
    split: Option<Split>,
    /// The link's own URL with its UTM parameters, when it has some.
    url: Option<HeaderValue>,
    /// Whether the short URL's query is passed on.
    pass_query: bool,
    /// What preview crawlers are shown, if the link has a preview.
    preview: Option<crate::domain::routes::Preview>,
    /// Its answer depends on who asks (rules, app targets, a split, a preview): no cache may
    /// keep it. UTM parameters and the passed-on query alone do not make it so (the query is
    /// part of the URL a cache keys on).
    personal: bool,
}

impl Routing {
    /// `routes` compiled, or `None` for a plain link. A target that is no valid `Location`
    /// (impossible for a checked URL) is left out.
    pub fn compile(routes: &Routes, url: &str) -> Option<Self> {
        if routes.is_empty() {
            return None;
        }
        let any_split =
            !routes.variants.is_empty() || routes.rules.0.iter().any(|r| !r.variants.is_empty());
        // A preview is answered to crawlers only: the redirect depends on the user agent.
        let personal = !routes.rules.is_empty()
            || routes.ios.is_some()
            || routes.android.is_some()
            || any_split
            || !routes.preview.is_empty();
        // Every http(s) target carries the link's UTM parameters, added once, here.
        let header = |url: &str| HeaderValue::from_str(&with_params(url, routes.utm.pairs())).ok();
        let split = |variants: &[crate::domain::Variant], name: String| {
            let mut end = 0u8;
            let targets = variants
                .iter()
                .filter_map(|v| {
                    end = end.saturating_add(v.weight);
                    Some((header(&v.url)?, end))
                })
                .collect();
            Split::new(targets, name)
        };
        let compiled = routes
            .rules
            .0
            .iter()
            .enumerate()
            .filter_map(|(i, rule)| {
                let goes = if rule.variants.is_empty() {
                    Goes::To(header(&rule.url)?)
                } else {
                    Goes::Split(split(&rule.variants, format!("{SPLIT_COOKIE}{i}"))?)
                };
                Some(Rule::new(goes, &rule.conditions))
            })
            .collect();
        Some(Self {
            rules: compiled,
            agent_rules: routes
                .rules
                .0
                .iter()
                .any(|r| r.conditions.iter().any(facts::decide)),
            ios: routes.ios.as_deref().and_then(header),
            android: routes.android.as_deref().and_then(header),
            split: split(&routes.variants, SPLIT_COOKIE.to_string()),
            url: (!routes.utm.is_empty()).then(|| header(url)).flatten(),
            pass_query: routes.pass_query,
            preview: (!routes.preview.is_empty()).then(|| routes.preview.clone()),
            personal,
        })
    }

    /// Where `visitor` goes: the first rule whose conditions it all meets (its target, or its
    /// variant of the rule's split), else the app target of its operating system, else its
    /// variant of the link's split, else the link's own URL.
    pub fn choose(&self, visitor: &Visitor<'_>) -> Chosen<'_> {
        let found = (!self.rules.is_empty())
            .then(|| {
                let facts = self.facts(visitor);
                self.rules
                    .iter()
                    .enumerate()
                    .find(|(_, rule)| rule.holds(facts, visitor))
            })
            .flatten();
        if let Some((i, Rule { goes, .. })) = found {
            let rule = u8::try_from(i).unwrap_or(u8::MAX);
            return match &**goes {
                Goes::To(location) => Chosen {
                    location: Some(location),
                    route: Route::Rule(rule),
                    cookie: None,
                },
                Goes::Split(split) => {
                    let (index, location, cookie) = split.choose(visitor);
                    Chosen {
                        location: Some(location),
                        route: Route::RuleVariant(rule, index as u8),
                        cookie,
                    }
                }
            };
        }
        if self.ios.is_some() || self.android.is_some() {
            let app = match visitor.agent().os {
                Some(Os::Ios) => self.ios.as_ref().map(|l| (l, Route::Ios)),
                Some(Os::Android) => self.android.as_ref().map(|l| (l, Route::Android)),
                _ => None,
            };
            if let Some((location, route)) = app {
                return Chosen {
                    location: Some(location),
                    route,
                    cookie: None,
                };
            }
        }
        match &self.split {
            Some(split) => {
                let (index, location, cookie) = split.choose(visitor);
                Chosen {
                    location: Some(location),
                    route: Route::Variant(index as u8),
                    cookie,
                }
            }
            None => Chosen {
                location: self.url.as_ref(),
                route: Route::Url,
                cookie: None,
            },
        }
    }

    /// The [`facts`] bits of `visitor`'s request, read once before the rules are walked.
    fn facts(&self, visitor: &Visitor<'_>) -> u32 {
        let query = if visitor.query.is_some_and(|q| !q.is_empty()) {
            facts::QUERY
        } else {
            0
        };
        let agent = if self.agent_rules {
            facts::of_agent(visitor.agent())
        } else {
            0
        };
        query | agent
    }

    /// What preview crawlers are shown, if the link has a preview.
    pub fn preview(&self) -> Option<&crate::domain::routes::Preview> {
        self.preview.as_ref()
    }

    /// `location` with the short URL's `query` passed on, if the link passes it on (a
    /// parameter the target has already is kept as the target has it).
    #[inline]
    pub fn pass_on(&self, location: &HeaderValue, query: Option<&str>) -> Option<HeaderValue> {
        if !self.pass_query {
            return None;
        }
        self.passed_on(location, query.filter(|q| !q.is_empty())?)
    }

    fn passed_on(&self, location: &HeaderValue, query: &str) -> Option<HeaderValue> {
        let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
            .take(64)
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let target = location.to_str().ok()?;
        let passed = with_params(target, pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        HeaderValue::from_str(&passed).ok()
    }

    /// Whether its answer depends on who asks, so that no cache may keep it.
    pub fn personal(&self) -> bool {
        self.personal
    }

    /// Heap bytes it holds beyond its own struct (for the cache's weight): every rule with its
    /// target and conditions (a query condition's key and values included), the app targets,
    /// the split, the link's URL with its UTM parameters and the preview's texts. An entry
    /// weighed at less than it holds would let links with large rules fill many times the
    /// cache's budget.
    pub fn weight(&self) -> usize {
        let rules: usize = self
            .rules
            .iter()
            .map(|rule| {
                let goes = match &*rule.goes {
                    Goes::To(location) => header_bytes(location),
                    Goes::Split(split) => split.weight(),
                };
                let conditions: usize = rule
                    .rest
                    .iter()
                    .map(|c| size_of::<Condition>() + c.heap_bytes())
                    .sum();
                size_of::<Rule>() + size_of::<Goes>() + goes + conditions
            })
            .sum();
        let headers = [&self.ios, &self.android, &self.url]
            .iter()
            .filter_map(|h| h.as_ref().map(header_bytes))
            .sum::<usize>();
        let preview = self
            .preview
            .as_ref()
            .map_or(0, crate::domain::routes::Preview::heap_bytes);
        rules + headers + preview + self.split.as_ref().map_or(0, Split::weight)
    }
}

/// Heap bytes a header value holds: its bytes and the shared buffer's header.
fn header_bytes(value: &HeaderValue) -> usize {
    value.len() + 32
}

#[cfg(test)]
mod tests;
