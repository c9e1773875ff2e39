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
    /// `/.well-known/apple-app-site-association`: a JSON object, as its compact text.
    pub apple_app_site_association: Option<String>,
    /// `/.well-known/assetlinks.json`: a JSON array, as its compact text.
    pub assetlinks: Option<String>,
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

impl Domain {
    /// Heap bytes it holds: its names and every setting's text (fallback URLs, app files).
    pub fn heap_bytes(&self) -> usize {
        let settings = &self.settings;
        [
            &settings.root_url,
            &settings.not_found_url,
            &settings.expired_url,
            &settings.apple_app_site_association,
            &settings.assetlinks,
        ]
        .iter()
        .filter_map(|t| t.as_ref().map(String::capacity))
        .sum::<usize>()
            + self.host.capacity()
            + self.tenant.capacity()
            + self.created_by.capacity()
    }
}

/// The redirect statuses a domain may choose.
pub const REDIRECT_STATUSES: [u16; 4] = [301, 302, 307, 308];

/// The most bytes of a stored app-link file (`apple_app_site_association`, `assetlinks`), in
/// its compact JSON text.
pub const MAX_APP_FILE_BYTES: usize = 16 * 1024;

/// The fields a domain patch may name.
const FIELDS: [&str; 7] = [
    "root_url",
    "not_found_url",
    "expired_url",
    "redirect_status",
    "robots",
    "apple_app_site_association",
    "assetlinks",
];

/// The JSON shape an app-link file must have at its top level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppFile {
    /// `apple-app-site-association`: an object.
    AppleAppSiteAssociation,
    /// `assetlinks.json`: an array.
    AssetLinks,
}

impl AppFile {
    /// The domain's field that holds it.
    pub fn field(self) -> &'static str {
        match self {
            AppFile::AppleAppSiteAssociation => "apple_app_site_association",
            AppFile::AssetLinks => "assetlinks",
        }
    }

    /// `value` as the file's stored text (compact JSON), or why not: the wrong top-level type
    /// (`invalid_app_file`), over [`MAX_APP_FILE_BYTES`] (`app_file_too_large`).
    pub fn text(self, value: &Value) -> Result<String, Error> {
        let (fits, shape) = match self {
            AppFile::AppleAppSiteAssociation => (value.is_object(), "a JSON object"),
            AppFile::AssetLinks => (value.is_array(), "a JSON array"),
        };
        if !fits {
            return Err(Error::invalid(
                "invalid_app_file",
                format!("{} is {shape} or null", self.field()),
            ));
        }
        let text = value.to_string();
        if text.len() > MAX_APP_FILE_BYTES {
            return Err(Error::invalid(
                "app_file_too_large",
                format!(
                    "{} is {} bytes as compact JSON; at most {MAX_APP_FILE_BYTES} are allowed",
                    self.field(),
                    text.len()
                ),
            ));
        }
        Ok(text)
    }

    /// `text` (as a gRPC request carries the file) as JSON, or `invalid_app_file`.
    pub fn parse(self, text: &str) -> Result<Value, Error> {
        serde_json::from_str(text).map_err(|e| {
            Error::invalid(
                "invalid_app_file",
                format!("{} is not JSON: {e}", self.field()),
            )
        })
    }
}

/// Applies the JSON merge patch `patch` to `current`, the settings of the domain `host`, under
/// `rules` (a fallback is a target like any link's: `invalid_url`, `blocked_target`). Refused:
/// an unknown field (400 `unknown_field`), a fallback on the domain itself (`fallback_loop`),
/// a status other than 301, 302, 307, 308 (`invalid_redirect_status`), `robots` other than
/// `allow` or `disallow` (`invalid_robots`), an app-link file of the wrong top-level type
/// (`invalid_app_file`) or over [`MAX_APP_FILE_BYTES`] (`app_file_too_large`); nothing is
/// applied then. An app-link file is replaced whole, never merged.
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
    for (file, slot) in [
        (
            AppFile::AppleAppSiteAssociation,
            &mut next.apple_app_site_association,
        ),
        (AppFile::AssetLinks, &mut next.assetlinks),
    ] {
        match patch.get(file.field()) {
            None => {}
            Some(Value::Null) => *slot = None,
            Some(value) => *slot = Some(file.text(value)?),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn app_files_keep_their_shape_and_bound() {
        let aasa = AppFile::AppleAppSiteAssociation;
        let links = AppFile::AssetLinks;
        let object = json!({"applinks": {"details": [{"appIDs": ["A.b"], "components": []}]}});
        assert_eq!(
            aasa.text(&object).as_deref().ok(),
            Some(object.to_string().as_str())
        );
        let array = json!([{"relation": ["delegate_permission/common.handle_all_urls"]}]);
        assert_eq!(
            links.text(&array).as_deref().ok(),
            Some(array.to_string().as_str())
        );
        // Just at the bound: `["xxx..."]` of exactly MAX_APP_FILE_BYTES.
        let at_bound = json!(["x".repeat(MAX_APP_FILE_BYTES - 4)]);
        assert_eq!(at_bound.to_string().len(), MAX_APP_FILE_BYTES);
        assert!(links.text(&at_bound).is_ok());
        let over = json!(["x".repeat(MAX_APP_FILE_BYTES - 3)]);
        let over_object = json!({"k": "x".repeat(MAX_APP_FILE_BYTES)});
        let table: &[(AppFile, Value, &str)] = &[
            (aasa, json!([]), "invalid_app_file"),
            (aasa, json!("{}"), "invalid_app_file"),
            (aasa, json!(1), "invalid_app_file"),
            (aasa, json!(true), "invalid_app_file"),
            (links, json!({}), "invalid_app_file"),
            (links, json!("[]"), "invalid_app_file"),
            (links, over, "app_file_too_large"),
            (aasa, over_object, "app_file_too_large"),
        ];
        for (file, value, code) in table {
            let error = file
                .text(value)
                .expect_err(&format!("{file:?} {value:.40}"));
            assert_eq!(error.code(), *code, "{file:?}: {error}");
        }
        for text in ["", "{", "{\"a\":}", "nope", "[1,]"] {
            let error = aasa.parse(text).expect_err(text);
            assert_eq!(error.code(), "invalid_app_file", "{text:?}");
        }
        assert_eq!(links.parse("[1]").ok(), Some(json!([1])));
    }
}
