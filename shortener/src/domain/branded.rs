//! Branded domains: a host a tenant owns, and what it says about requests to it (fallbacks, the
//! redirect status, robots), and the rules a change of those must pass.

use super::{CreateRules, Error, TargetUrl, UrlError};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

/// What `robots.txt` on a domain says to crawlers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Robots {
    /// Crawl everything.
    Allow,
    /// Crawl nothing (the default: short links are not content).
    #[default]
    Disallow,
}

impl Robots {
    /// The wire and stored name.
    pub fn name(self) -> &'static str {
        match self {
            Robots::Allow => "allow",
            Robots::Disallow => "disallow",
        }
    }

    /// The value of a wire or stored name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "allow" => Some(Robots::Allow),
            "disallow" => Some(Robots::Disallow),
            _ => None,
        }
    }
}

/// What a domain's owner sets: each fallback and the redirect status are optional (`None`: the
/// node's behaviour).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DomainSettings {
    /// Where the domain's root (`/`) goes.
    pub root_url: Option<String>,
    /// Where an unknown code goes, instead of a 404.
    pub not_found_url: Option<String>,
    /// Where an expired, disabled or over-limit link goes, instead of a 410.
    pub expired_url: Option<String>,
    /// The redirect status of the domain's links (301, 302, 307 or 308).
    pub redirect_status: Option<u16>,
    /// What `robots.txt` says.
    pub robots: Robots,
}

/// A domain as stored: its host (normal form), owner, when and by which key it was claimed,
/// and its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    /// The host, in its normal form ([`super::normalise_host`]).
    pub host: String,
    /// The tenant that owns it.
    pub tenant: String,
    /// When it was claimed.
    pub created_at: DateTime<Utc>,
    /// The key that claimed it (`tenant/name`).
    pub created_by: String,
    /// What its owner set.
    pub settings: DomainSettings,
}

/// The redirect statuses a domain may choose.
pub const REDIRECT_STATUSES: [u16; 4] = [301, 302, 307, 308];

/// The fields a domain patch may name.
const FIELDS: [&str; 5] = [
    "root_url",
    "not_found_url",
    "expired_url",
    "redirect_status",
    "robots",
];

/// Applies the JSON merge patch `patch` to `current`, the settings of the domain `host`, under
/// `rules` (a fallback is a target like any link's: `invalid_url`, `blocked_target`). Refused:
/// an unknown field (400 `unknown_field`), a fallback on the domain itself (`fallback_loop`),
/// a status other than 301, 302, 307, 308 (`invalid_redirect_status`), `robots` other than
/// `allow` or `disallow` (`invalid_robots`); nothing is applied then.
pub fn patch_settings(
    host: &str,
    current: &DomainSettings,
    patch: &Map<String, Value>,
    rules: &CreateRules,
) -> Result<DomainSettings, Error> {
    if let Some(field) = patch.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(Error::bad_request(
            "unknown_field",
            format!(
                "{} is not a field of a domain patch; it may name {}",
                super::echo(field),
                FIELDS.join(", ")
            ),
        ));
    }
    let mut next = current.clone();
    for (field, slot) in [
        ("root_url", &mut next.root_url),
        ("not_found_url", &mut next.not_found_url),
        ("expired_url", &mut next.expired_url),
    ] {
        match patch.get(field) {
            None => {}
            Some(Value::Null) => *slot = None,
            Some(Value::String(url)) => *slot = Some(fallback(host, field, url, rules)?),
            Some(_) => {
                return Err(Error::invalid(
                    "invalid_url",
                    format!("{field} is a URL string or null"),
                ));
            }
        }
    }
    match patch.get("redirect_status") {
        None => {}
        Some(Value::Null) => next.redirect_status = None,
        Some(value) => {
            let status = value
                .as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .filter(|s| REDIRECT_STATUSES.contains(s))
                .ok_or_else(|| {
                    Error::invalid(
                        "invalid_redirect_status",
                        "redirect_status is 301, 302, 307, 308 or null",
                    )
                })?;
            next.redirect_status = Some(status);
        }
    }
    if let Some(value) = patch.get("robots") {
        next.robots = value
            .as_str()
            .and_then(Robots::from_name)
            .ok_or_else(|| Error::invalid("invalid_robots", "robots is allow or disallow"))?;
    }
    Ok(next)
}

/// A fallback URL of `host`'s `field`, checked as a link target and never on `host` itself.
fn fallback(host: &str, field: &str, url: &str, rules: &CreateRules) -> Result<String, Error> {
    let target = TargetUrl::parse(url, rules.max_url_length, rules.targets.as_ref()).map_err(
        |e| match e {
            UrlError::Blocked(_) => Error::invalid("blocked_target", format!("{field}: {e}")),
            e => Error::invalid("invalid_url", format!("{field}: {e}")),
        },
    )?;
    let target_host = url::Url::parse(target.as_str())
        .ok()
        .and_then(|u| u.host_str().map(|h| h.trim_end_matches('.').to_string()));
    if target_host.as_deref() == Some(host) {
        return Err(Error::invalid(
            "fallback_loop",
            format!("{field} points at the domain itself, which would loop"),
        ));
    }
    Ok(target.into_string())
}
