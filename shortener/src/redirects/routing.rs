//! A link's routing as the edge decides it: compiled once, when the link enters the redirect
//! cache (each target checked as the `Location` it is sent as), then decided per request in
//! memory, in the order of [`crate::domain::routes`]: the first rule that holds, the app target
//! of the visitor's operating system, the visitor's variant of a split, else the link's URL.
//! What a request is read for is read once and only if something needs it: the user agent's
//! profile (remembered per agent), the preferred language, the client's address and country,
//! the query, the split's cookie.

use crate::domain::routes::with_params;
use crate::domain::rules::{Condition, Os};
use crate::domain::{Route, Routes};
use crate::visits::classify::{AgentProfile, agent_profile};
use axum::http::{HeaderMap, HeaderValue, header};
use chrono::{DateTime, Utc};
use std::hash::{BuildHasher, Hash, Hasher};

/// The hasher of a split's assignment: seeded with a constant, so every node agrees.
const SPLIT_HASH: foldhash::fast::FixedState =
    foldhash::fast::FixedState::with_seed(0x5ee7_5b11_7000_0001);
use std::cell::OnceCell;
use std::net::IpAddr;
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

/// What a request offers the conditions, each read on first use.
pub struct Visitor<'a> {
    /// The link's key (a split's assignment is per link).
    key: &'a str,
    /// The short URL's path after `/` (a split's cookie is scoped to it; see [`Visitor::at`]).
    path: &'a str,
    /// Whether a split's cookie is `Secure`.
    secure: bool,
    headers: &'a HeaderMap,
    /// The `User-Agent`, read once by the edge for the routing and the visit's counting.
    user_agent: Option<&'a str>,
    query: Option<&'a str>,
    now: OnceCell<DateTime<Utc>>,
    client: &'a dyn Fn() -> IpAddr,
    country: &'a dyn Fn(IpAddr) -> Option<[u8; 2]>,
    agent: OnceCell<AgentProfile>,
    /// The preferred language's bytes (printable ASCII when a condition can match it).
    language: OnceCell<Option<&'a [u8]>>,
    address: OnceCell<IpAddr>,
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

    fn now(&self) -> DateTime<Utc> {
        *self.now.get_or_init(Utc::now)
    }

    fn agent(&self) -> &AgentProfile {
        self.agent.get_or_init(|| agent_profile(self.user_agent))
    }

    fn language(&self) -> Option<&'a [u8]> {
        *self.language.get_or_init(|| {
            let value = self.headers.get(header::ACCEPT_LANGUAGE)?;
            first_language(value.as_bytes())
                .unwrap_or_else(|| preferred_language(value.to_str().ok()?).map(str::as_bytes))
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

    /// The variant index the visitor's cookie `name` names, if it names one of `count`.
    fn cookie_variant(&self, name: &str, count: usize) -> Option<usize> {
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
    fn bucket(&self, name: &str) -> u8 {
        let mut hash = SPLIT_HASH.build_hasher();
        hash.write(self.key.as_bytes());
        hash.write(name.as_bytes());
        self.address().hash(&mut hash);
        if let Some(agent) = self.user_agent {
            hash.write(agent.as_bytes());
        }
        (hash.finish() % 100) as u8
    }

    fn meets(&self, condition: &Condition) -> bool {
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
fn language_matches(preferred: &[u8], tag: &str) -> bool {
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
fn first_language(value: &[u8]) -> Option<Option<&[u8]>> {
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

    /// Bytes the compiled rules hold (for the cache's weight).
    pub fn weight(&self) -> usize {
        let rules: usize = self
            .rules
            .iter()
            .map(|rule| {
                let goes = match &*rule.goes {
                    Goes::To(location) => location.len(),
                    Goes::Split(split) => split.weight(),
                };
                goes + 8 + rule.rest.len() * 48
            })
            .sum();
        let apps = [&self.ios, &self.android]
            .iter()
            .filter_map(|a| a.as_ref().map(HeaderValue::len))
            .sum::<usize>();
        rules + apps + self.split.as_ref().map_or(0, Split::weight)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_language_tag_holds_for_itself_and_a_primary_tag_for_its_regions() {
        for (preferred, tag, holds) in [
            ("de", "de", true),
            ("DE-at", "de", true),
            ("de-AT", "de-at", true),
            ("de", "de-at", false),
            ("de-CH", "de-at", false),
            ("pt-BR-x", "pt-br", false),
            ("den", "de", false),
            ("en-US", "de", false),
        ] {
            assert_eq!(
                language_matches(preferred.as_bytes(), tag),
                holds,
                "{preferred} {tag}"
            );
        }
    }

    /// The compiled rules (agent conditions and a query's presence as bits) choose the rule
    /// that reading every condition in order would: for each agent, query and language, over
    /// rules that mix every kind of condition the bits decide or pre-check.
    #[test]
    fn compiled_rules_choose_what_reading_each_condition_would() {
        use crate::domain::rules::{Browser, DeviceClass, Rule as Written, Rules};
        let rule = |n: usize, conditions: Vec<Condition>| Written {
            url: format!("https://r{n}.example/"),
            variants: Vec::new(),
            conditions,
        };
        let query = |key: &str, values: &[&str]| Condition::Query {
            key: key.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        };
        let written = vec![
            rule(0, vec![query("ref", &[])]),
            rule(
                1,
                vec![query("src", &["feed"]), Condition::Os { value: Os::Ios }],
            ),
            rule(2, vec![Condition::Language { value: "de".into() }]),
            rule(
                3,
                vec![
                    Condition::Device {
                        value: DeviceClass::Mobile,
                    },
                    Condition::Browser {
                        value: Browser::Firefox,
                    },
                ],
            ),
            rule(
                4,
                vec![
                    Condition::Device {
                        value: DeviceClass::Desktop,
                    },
                    Condition::Device {
                        value: DeviceClass::Mobile,
                    },
                ],
            ),
            rule(
                5,
                vec![
                    Condition::Os { value: Os::Android },
                    Condition::Language { value: "fr".into() },
                ],
            ),
            rule(
                6,
                vec![
                    Condition::Browser {
                        value: Browser::Chrome,
                    },
                    query("x", &[]),
                ],
            ),
            rule(
                7,
                vec![Condition::Device {
                    value: DeviceClass::Desktop,
                }],
            ),
        ];
        let routes = Routes {
            rules: Rules(written.clone()),
            ..Routes::default()
        };
        let routing = Routing::compile(&routes, "https://url.example/").expect("it routes");
        let agents = [
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1",
            "Mozilla/5.0 (Android 14; Mobile; rv:121.0) Gecko/121.0 Firefox/121.0",
            "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36",
            "curl/8.5",
        ];
        let mut chosen = std::collections::BTreeSet::new();
        for agent in agents {
            for query in [
                None,
                Some(""),
                Some("ref=1"),
                Some("src=feed"),
                Some("x=&y=2"),
            ] {
                for language in [None, Some("de-AT"), Some("fr;q=0.9, en;q=0.8")] {
                    let mut headers = HeaderMap::new();
                    if let Some(language) = language {
                        headers.insert(header::ACCEPT_LANGUAGE, language.parse().unwrap());
                    }
                    let client = || IpAddr::from([192, 0, 2, 1]);
                    let country = |_| None;
                    let visitor =
                        Visitor::new("k", &headers, Some(agent), query, &client, &country);
                    let read = written
                        .iter()
                        .position(|r| r.conditions.iter().all(|c| visitor.meets(c)));
                    let route = routing.choose(&visitor).route;
                    let want = read.map_or(Route::Url, |i| Route::Rule(i as u8));
                    assert_eq!(route, want, "{agent} {query:?} {language:?}");
                    chosen.insert(format!("{route:?}"));
                }
            }
        }
        // The table reaches most rules, so a wrong bit would show.
        assert!(chosen.len() >= 6, "{chosen:?}");
    }

    #[test]
    fn a_plain_first_range_is_the_preferred_language_without_reading_on() {
        for (header, fast) in [
            ("en-US,en;q=0.9", Some(Some(&b"en-US"[..]))),
            ("  de-AT , fr", Some(Some(&b"de-AT"[..]))),
            ("pt-BR", Some(Some(&b"pt-BR"[..]))),
            ("de;q=0.5, en", None),
            ("*, en", None),
            (", en", None),
            ("", None),
            ("d\u{e9}, en", None),
            ("de\tat, en", None),
        ] {
            assert_eq!(first_language(header.as_bytes()), fast, "{header}");
            if let Some(answer) = fast {
                assert_eq!(
                    preferred_language(header).map(str::as_bytes),
                    answer,
                    "{header}"
                );
            }
        }
    }

    #[test]
    fn the_preferred_language_is_the_highest_q_value() {
        for (header, want) in [
            ("de-AT,de;q=0.9,en;q=0.8", Some("de-AT")),
            ("en;q=0.5, fr;q=0.9", Some("fr")),
            ("*;q=1, it", Some("it")),
            ("es;q=0, pt-BR", Some("pt-BR")),
            ("fr;q=1, de", Some("fr")),
            ("de;q=0.5, en, fr", Some("en")),
            ("en;q=oops, nl;q=0.1", Some("nl")),
            ("", None),
            ("*", None),
        ] {
            assert_eq!(preferred_language(header), want, "{header}");
        }
    }
}
