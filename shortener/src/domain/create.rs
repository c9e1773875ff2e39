//! A create, from what a transport received ([`CreateInput`]) to what the service runs
//! ([`CreateRequest`]): every rule a create must pass, checked in one place (invariant I6:
//! nothing is stored for a refused request).

use super::password::check_password;
use super::tags::check_tags;
use super::{Error, TargetPolicy, TargetUrl, UrlError};
use chrono::{DateTime, Datelike, Utc};
use codespace::shape;
use std::sync::Arc;

/// The longest idempotency key.
const MAX_IDEMPOTENCY_KEY: usize = 200;

/// A create as it arrives from a transport, its wire types already converted, not yet checked.
#[derive(Clone, Default)]
pub struct CreateInput {
    /// The target URL as given.
    pub url: String,
    /// A custom alias.
    pub alias: Option<String>,
    /// Expiry.
    pub expires_at: Option<DateTime<Utc>>,
    /// Dedup flag.
    pub dedup: bool,
    /// With `dedup`, find only a link with the same tags and visit limit too (Shlink's
    /// `findIfExists`); without it, any with the same URL, expiry and domain.
    pub dedup_settings: bool,
    /// Private flag.
    pub private: bool,
    /// Idempotency key.
    pub idempotency_key: Option<String>,
    /// Tags (checked and sorted by the parse).
    pub tags: Vec<String>,
    /// After this many human visits the link answers 410.
    pub max_visits: Option<u64>,
    /// A password visitors must give.
    pub password: Option<String>,
    /// The host of the branded domain the link is for (`None`: the default domain).
    pub domain: Option<String>,
    /// Redirect rules.
    pub rules: Vec<super::RuleInput>,
    /// The iOS target.
    pub ios: Option<String>,
    /// The Android target.
    pub android: Option<String>,
    /// A split.
    pub variants: Vec<super::VariantInput>,
    /// UTM parameters for every target.
    pub utm: super::routes::Utm,
    /// Pass the short URL's query on to the target.
    pub pass_query: bool,
    /// The social preview (fields as given).
    pub preview: super::routes::Preview,
}

/// The largest body, JSON or protobuf, a create or an edit of one link may have when target URLs
/// may be `max_url` bytes long: a URL at that bound and 1 KiB besides, and never less than
/// 16 KiB (a link with rules, a split and a preview). HTTP and gRPC read by the same bound, so
/// a link one takes the other takes too.
pub fn link_body_limit(max_url: usize) -> usize {
    max_url.saturating_add(1024).max(16 * 1024)
}

/// The rules of a deployment that a create is checked against.
#[derive(Clone)]
pub struct CreateRules {
    /// The longest target URL, in bytes.
    pub max_url_length: usize,
    /// What the deployment refuses as a target (its own hosts, private ranges, blocked domains).
    pub targets: Arc<dyn TargetPolicy>,
    /// The base length L of generated codes (aliases must not take their shape).
    pub code_length: usize,
    /// The hosts of the default domain (the public URL's and the short domains), in normal
    /// form: a link "on" one of them is on the default domain.
    pub own_hosts: Arc<[String]>,
    /// Whether the node can tell a visitor's country (it has a GeoIP database): without one a
    /// `country` condition would never hold, so a rule with one is refused.
    pub countries: bool,
}

/// The routing a create (or a patch that sets every part) asks for, checked against `rules`.
pub fn routes_of(
    rule_input: Vec<super::RuleInput>,
    ios: Option<String>,
    android: Option<String>,
    variants: Vec<super::VariantInput>,
    rules: &CreateRules,
) -> Result<super::Routes, Error> {
    let (max, targets) = (rules.max_url_length, rules.targets.as_ref());
    Ok(super::Routes {
        rules: rules.rules(rule_input)?,
        ios: super::routes::app_target("ios", ios, max, targets)?,
        android: super::routes::app_target("android", android, max, targets)?,
        variants: super::routes::variants(variants, max, targets)?,
        utm: super::routes::Utm::default(),
        pass_query: false,
        preview: super::routes::Preview::default(),
    })
}

impl CreateRules {
    /// The condition types a rule may use on this node: every one, but `country` only where
    /// the node can tell a visitor's country.
    pub fn condition_types(&self) -> Vec<&'static str> {
        super::rules::CONDITION_TYPES
            .into_iter()
            .filter(|kind| self.countries || *kind != "country")
            .collect()
    }

    /// Redirect rules checked for this node: a `country` condition is refused where the node
    /// has no GeoIP database, as it would never hold.
    pub fn rules(&self, input: Vec<super::RuleInput>) -> Result<super::Rules, Error> {
        let parsed = super::Rules::parse(input, self.max_url_length, self.targets.as_ref())?;
        match parsed.first_country().filter(|_| !self.countries) {
            None => Ok(parsed),
            Some((rule, condition)) => Err(Error::invalid(
                "invalid_rules",
                format!(
                    "rules[{rule}].conditions[{condition}].type: a country condition needs \
                     the node's GeoIP database (SHORTENER_GEOIP_DB), and this node has none: \
                     it would never hold"
                ),
            )),
        }
    }

    /// The branded domain `input` names, in normal form: `None` for none or for a host of the
    /// default domain, `invalid_domain` for text no domain can have. Whether the caller's
    /// tenant owns it is the link service's check.
    pub fn domain(&self, input: Option<&str>) -> Result<Option<String>, Error> {
        let Some(text) = input.filter(|t| !t.is_empty()) else {
            return Ok(None);
        };
        // The node's own hosts first: the public URL's may be an IP address, which no domain
        // can be, and a link answers it as its `domain`.
        let plain = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
        if self.own_hosts.contains(&plain) {
            return Ok(None);
        }
        let host = super::path_host(text).ok_or_else(|| {
            Error::invalid(
                "invalid_domain",
                format!("{} is not a host a domain can have", super::echo(text)),
            )
        })?;
        Ok((!self.own_hosts.contains(&host)).then_some(host))
    }
}

impl std::fmt::Debug for CreateRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreateRules")
            .field("max_url_length", &self.max_url_length)
            .field("code_length", &self.code_length)
            .finish_non_exhaustive()
    }
}

/// A validated request to create a link, independent of transport. Its `Debug` leaves the
/// password out.
#[derive(Clone, PartialEq, Eq)]
pub struct CreateRequest {
    /// The target.
    pub url: TargetUrl,
    /// A custom alias (already checked against the alias namespace).
    pub alias: Option<String>,
    /// Expiry (already checked to be in the future).
    pub expires_at: Option<DateTime<Utc>>,
    /// Return the existing generated link for the same URL and expiry.
    pub dedup: bool,
    /// With `dedup`: and the same tags and visit limit ([`CreateInput::dedup_settings`]).
    pub dedup_settings: bool,
    /// Use a random private code.
    pub private: bool,
    /// Makes a retried create return the first result.
    pub idempotency_key: Option<String>,
    /// Tags, sorted, without duplicates.
    pub tags: Vec<String>,
    /// After this many human visits the link answers 410.
    pub max_visits: Option<u64>,
    /// A password visitors must give (checked; hashed by the link service).
    pub password: Option<String>,
    /// The branded domain (its host in normal form) the link is for; `None`: the default
    /// domain.
    pub domain: Option<String>,
    /// Where it routes besides its URL, checked.
    pub routes: super::Routes,
}

impl std::fmt::Debug for CreateInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreateInput")
            .field("url", &self.url)
            .field("alias", &self.alias)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for CreateRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreateRequest")
            .field("url", &self.url)
            .field("alias", &self.alias)
            .field("domain", &self.domain)
            .field("expires_at", &self.expires_at)
            .field("dedup", &self.dedup)
            .field("private", &self.private)
            .field("tags", &self.tags)
            .field("max_visits", &self.max_visits)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl CreateRequest {
    /// Checks `input` against `rules` as of `now`.
    pub fn parse(
        input: CreateInput,
        rules: &CreateRules,
        now: DateTime<Utc>,
    ) -> Result<Self, Error> {
        let url = TargetUrl::parse(&input.url, rules.max_url_length, rules.targets.as_ref())
            .map_err(|e| match e {
                UrlError::Blocked(_) => Error::invalid("blocked_target", e.to_string()),
                e => Error::invalid("invalid_url", e.to_string()),
            })?;
        if let Some(alias) = &input.alias {
            shape::validate_alias(alias, rules.code_length)
                .map_err(|e| Error::invalid("invalid_alias", e.to_string()))?;
        }
        let options = [input.alias.is_some(), input.dedup, input.private]
            .iter()
            .filter(|&&b| b)
            .count();
        if options > 1 {
            return Err(Error::invalid(
                "conflicting_options",
                "alias, dedup and private cannot be combined",
            ));
        }
        if let Some(expires_at) = input.expires_at {
            if expires_at <= now {
                return Err(Error::invalid(
                    "invalid_expiry",
                    "expires_at must be in the future",
                ));
            }
            if expires_at.year() > 9999 {
                return Err(Error::invalid(
                    "invalid_expiry",
                    "expires_at must be before the year 10000 (RFC 3339 cannot write later years)",
                ));
            }
        }
        if let Some(key) = &input.idempotency_key
            && (key.is_empty()
                || key.len() > MAX_IDEMPOTENCY_KEY
                || !key.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Err(Error::bad_request(
                "invalid_idempotency_key",
                format!(
                    "the idempotency key must be 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII characters"
                ),
            ));
        }
        if let Some(max_visits) = input.max_visits {
            super::check_max_visits(max_visits)?;
        }
        let tags = check_tags(input.tags)?;
        if let Some(password) = &input.password {
            check_password(password)?;
            if input.dedup {
                return Err(Error::invalid(
                    "conflicting_options",
                    "a dedup create returns an existing link, which a password cannot change: use one or the other",
                ));
            }
        }
        Ok(CreateRequest {
            url,
            alias: input.alias,
            expires_at: input.expires_at,
            dedup: input.dedup,
            dedup_settings: input.dedup_settings,
            private: input.private,
            idempotency_key: input.idempotency_key,
            tags,
            max_visits: input.max_visits,
            password: input.password,
            domain: rules.domain(input.domain.as_deref())?,
            routes: super::Routes {
                utm: input.utm.checked()?,
                pass_query: input.pass_query,
                preview: input.preview.checked(rules)?,
                ..routes_of(input.rules, input.ios, input.android, input.variants, rules)?
            },
        })
    }
}
