//! A change to a link, as a JSON merge patch (or its gRPC twin) asks for it: absent fields stay
//! as they are, `null` clears what can be cleared.

use super::password::{PasswordHash, check_password};
use super::tags::check_tags;
use super::{CreateRules, Error, TargetUrl, UrlError};
use chrono::{DateTime, Datelike, Utc};

/// A patch as a transport received it, its wire types converted.
#[derive(Clone, Default)]
pub struct PatchInput {
    /// A new target.
    pub url: Option<String>,
    /// A new expiry, or `Some(None)` to clear it.
    pub expires_at: Option<Option<DateTime<Utc>>>,
    /// New tags (replacing the old ones).
    pub tags: Option<Vec<String>>,
    /// Disable or enable.
    pub disabled: Option<bool>,
    /// A new visit limit, or `Some(None)` to clear it.
    pub max_visits: Option<Option<u64>>,
    /// A new password, or `Some(None)` to remove it.
    pub password: Option<Option<String>>,
    /// Another domain (its host), or `Some(None)` (or a host of the default domain) for the
    /// default domain.
    pub domain: Option<Option<String>>,
    /// New redirect rules, replacing the old ones (empty: none).
    pub rules: Option<Vec<super::RuleInput>>,
    /// A new iOS target, or `Some(None)` to remove it.
    pub ios: Option<Option<String>>,
    /// A new Android target, or `Some(None)` to remove it.
    pub android: Option<Option<String>>,
    /// A new split, replacing the old one (empty: none).
    pub variants: Option<Vec<super::VariantInput>>,
    /// UTM parameters to set or clear.
    pub utm: super::routes::UtmPatch,
    /// Pass the short URL's query on, or not.
    pub pass_query: Option<bool>,
    /// Preview fields to set or clear.
    pub preview: super::routes::PreviewPatch,
}

impl std::fmt::Debug for PatchInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PatchInput")
            .field("url", &self.url)
            .field("expires_at", &self.expires_at)
            .field("tags", &self.tags)
            .field("disabled", &self.disabled)
            .field("max_visits", &self.max_visits)
            .field("domain", &self.domain)
            .field("rules", &self.rules)
            .field("ios", &self.ios)
            .field("android", &self.android)
            .field("variants", &self.variants)
            .field("utm", &self.utm)
            .field("pass_query", &self.pass_query)
            .field("preview", &self.preview)
            .field(
                "password",
                &self
                    .password
                    .as_ref()
                    .map(|p| p.as_ref().map(|_| "<redacted>")),
            )
            .finish()
    }
}

/// What a patch does to a link's password.
#[derive(Clone, PartialEq, Eq)]
pub enum PasswordChange {
    /// Set this password (checked, not yet hashed: the link service hashes it).
    Set(String),
    /// Set the password of this hash.
    Hashed(PasswordHash),
    /// Remove the password.
    Remove,
}

impl std::fmt::Debug for PasswordChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PasswordChange::Set(_) => "Set(<redacted>)",
            PasswordChange::Hashed(_) => "Hashed(<redacted>)",
            PasswordChange::Remove => "Remove",
        })
    }
}

/// A checked patch: every value passes the rules a create's would.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkPatch {
    /// A new target.
    pub url: Option<TargetUrl>,
    /// A new expiry, or `Some(None)` to clear it.
    pub expires_at: Option<Option<DateTime<Utc>>>,
    /// New tags, sorted.
    pub tags: Option<Vec<String>>,
    /// Disable or enable.
    pub disabled: Option<bool>,
    /// A new visit limit, or `Some(None)` to clear it.
    pub max_visits: Option<Option<u64>>,
    /// A new password, or its removal.
    pub password: Option<PasswordChange>,
    /// Another domain (the host of a branded one, in normal form), or `Some(None)` for the
    /// default domain. Whether the link may move there is the link service's check.
    pub domain: Option<Option<String>>,
    /// New redirect rules (empty: none).
    pub rules: Option<super::Rules>,
    /// A new iOS target, or `Some(None)` to remove it.
    pub ios: Option<Option<String>>,
    /// A new Android target, or `Some(None)` to remove it.
    pub android: Option<Option<String>>,
    /// A new split (empty: none; ending a split, the link's `url` says where its visitors go).
    pub variants: Option<Vec<super::Variant>>,
    /// UTM parameters to set or clear (checked against the link's when applied).
    pub utm: super::routes::UtmPatch,
    /// Pass the short URL's query on, or not.
    pub pass_query: Option<bool>,
    /// Preview fields to set or clear (checked).
    pub preview: super::routes::PreviewPatch,
}

impl LinkPatch {
    /// Checks `input` against `rules` as of `now`: a new target follows every target rule of a
    /// create, a new expiry must be in the future and before the year 10000, tags follow the
    /// tag rules, a visit limit is at least 1.
    pub fn parse(
        input: PatchInput,
        rules: &CreateRules,
        now: DateTime<Utc>,
    ) -> Result<Self, Error> {
        let url = input
            .url
            .map(|url| {
                TargetUrl::parse(&url, rules.max_url_length, rules.targets.as_ref()).map_err(|e| {
                    match e {
                        UrlError::Blocked(_) => Error::invalid("blocked_target", e.to_string()),
                        e => Error::invalid("invalid_url", e.to_string()),
                    }
                })
            })
            .transpose()?;
        if let Some(Some(expires_at)) = input.expires_at
            && (expires_at <= now || expires_at.year() > 9999)
        {
            return Err(Error::invalid(
                "invalid_expiry",
                "expires_at must be in the future and before the year 10000",
            ));
        }
        if let Some(Some(max_visits)) = input.max_visits {
            super::check_max_visits(max_visits)?;
        }
        if let Some(Some(password)) = &input.password {
            check_password(password)?;
        }
        Ok(Self {
            url,
            expires_at: input.expires_at,
            tags: input.tags.map(check_tags).transpose()?,
            disabled: input.disabled,
            max_visits: input.max_visits,
            password: input
                .password
                .map(|p| p.map_or(PasswordChange::Remove, PasswordChange::Set)),
            domain: input
                .domain
                .map(|d| rules.domain(d.as_deref()))
                .transpose()?,
            rules: input.rules.map(|r| rules.rules(r)).transpose()?,
            ios: app_patch("ios", input.ios, rules)?,
            android: app_patch("android", input.android, rules)?,
            variants: input
                .variants
                .map(|v| super::routes::variants(v, rules.max_url_length, rules.targets.as_ref()))
                .transpose()?,
            utm: {
                // Each value is checked here; the whole is applied to the link's own.
                super::routes::Utm::default().patched(&input.utm)?;
                input.utm
            },
            pass_query: input.pass_query,
            preview: input.preview.checked(rules)?,
        })
    }

    /// Whether the patch asks for nothing.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A patched app target, checked.
fn app_patch(
    field: &str,
    input: Option<Option<String>>,
    rules: &CreateRules,
) -> Result<Option<Option<String>>, Error> {
    input
        .map(|target| {
            super::routes::app_target(field, target, rules.max_url_length, rules.targets.as_ref())
        })
        .transpose()
}

impl LinkPatch {
    /// Applies the routing parts of the patch to `new`, recording each part that changes (its
    /// old and new value, as the API shows it).
    fn apply_routes(
        &self,
        old: &super::Link,
        new: &mut super::Link,
        changed: &mut serde_json::Map<String, serde_json::Value>,
    ) {
        use serde_json::{Value, json};
        let routes = &mut new.routes;
        if let Some(rules) = &self.rules
            && *rules != old.routes.rules
        {
            let api = |r: &super::Rules| {
                serde_json::to_value(super::rules::ApiRules(r)).unwrap_or(Value::Null)
            };
            changed.insert(
                "rules".into(),
                json!({ "old": api(&old.routes.rules), "new": api(rules) }),
            );
            routes.rules = rules.clone();
        }
        if let Some(ios) = &self.ios
            && *ios != old.routes.ios
        {
            changed.insert("ios".into(), json!({ "old": old.routes.ios, "new": ios }));
            routes.ios = ios.clone();
        }
        if let Some(android) = &self.android
            && *android != old.routes.android
        {
            changed.insert(
                "android".into(),
                json!({ "old": old.routes.android, "new": android }),
            );
            routes.android = android.clone();
        }
        if !self.utm.is_empty() {
            // Checked when the patch was parsed; the same values pass again.
            let utm = old.routes.utm.patched(&self.utm).unwrap_or_default();
            if utm != old.routes.utm {
                changed.insert("utm".into(), json!({ "old": old.routes.utm, "new": utm }));
                routes.utm = utm;
            }
        }
        if !self.preview.is_empty() {
            let preview = old.routes.preview.patched(&self.preview);
            if preview != old.routes.preview {
                changed.insert(
                    "preview".into(),
                    json!({ "old": old.routes.preview, "new": preview }),
                );
                routes.preview = preview;
            }
        }
        if let Some(pass) = self.pass_query
            && pass != old.routes.pass_query
        {
            changed.insert(
                "pass_query".into(),
                json!({ "old": old.routes.pass_query, "new": pass }),
            );
            routes.pass_query = pass;
        }
        if let Some(variants) = &self.variants
            && *variants != old.routes.variants
        {
            changed.insert(
                "variants".into(),
                json!({ "old": old.routes.variants, "new": variants }),
            );
            routes.variants = variants.clone();
        }
    }
}

impl LinkPatch {
    /// `old` with the patch applied at `now`, and the events that record the change: one
    /// `update` naming every changed field of target, expiry, tags and visit limit (each with
    /// its old and new value), and a `disable` or `enable` when that changes. Fields that
    /// already hold the asked value record nothing.
    pub fn apply(
        &self,
        old: &super::Link,
        now: DateTime<Utc>,
    ) -> (super::Link, Vec<(super::EventKind, serde_json::Value)>) {
        use serde_json::{Map, Value, json};
        let time = |t: Option<DateTime<Utc>>| {
            t.map_or(Value::Null, |t| {
                Value::String(t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            })
        };
        let mut new = old.clone();
        let mut changed = Map::new();
        if let Some(url) = &self.url
            && url.as_str() != old.url
        {
            changed.insert("url".into(), json!({ "old": old.url, "new": url.as_str() }));
            new.url = url.as_str().to_string();
        }
        if let Some(expires_at) = self.expires_at
            && expires_at != old.expires_at
        {
            changed.insert(
                "expires_at".into(),
                json!({ "old": time(old.expires_at), "new": time(expires_at) }),
            );
            new.expires_at = expires_at;
        }
        if let Some(tags) = &self.tags
            && *tags != old.tags
        {
            changed.insert("tags".into(), json!({ "old": old.tags, "new": tags }));
            new.tags = tags.clone();
        }
        if let Some(domain) = &self.domain
            && *domain != old.domain
        {
            changed.insert("domain".into(), json!({ "old": old.domain, "new": domain }));
            new.domain = domain.clone();
        }
        self.apply_routes(old, &mut new, &mut changed);
        if let Some(max_visits) = self.max_visits
            && max_visits != old.max_visits
        {
            changed.insert(
                "max_visits".into(),
                json!({ "old": old.max_visits, "new": max_visits }),
            );
            new.max_visits = max_visits;
        }
        // A password is never recorded, only that one was set or removed.
        let set = |on: bool| if on { json!("(set)") } else { Value::Null };
        match &self.password {
            Some(PasswordChange::Hashed(hash)) => {
                changed.insert(
                    "password".into(),
                    json!({ "old": set(old.password.is_some()), "new": set(true) }),
                );
                new.password = Some(hash.clone());
            }
            Some(PasswordChange::Remove) if old.password.is_some() => {
                changed.insert(
                    "password".into(),
                    json!({ "old": set(true), "new": set(false) }),
                );
                new.password = None;
            }
            // A plain password is hashed by the link service before the patch is applied.
            Some(PasswordChange::Set(_)) | Some(PasswordChange::Remove) | None => {}
        }
        let mut events = Vec::new();
        if !changed.is_empty() {
            events.push((super::EventKind::Update, Value::Object(changed)));
        }
        match self.disabled {
            Some(true) if old.disabled_at.is_none() => {
                new.disabled_at = Some(now);
                events.push((
                    super::EventKind::Disable,
                    json!({ "disabled": { "old": false, "new": true } }),
                ));
            }
            Some(false) if old.disabled_at.is_some() => {
                new.disabled_at = None;
                events.push((
                    super::EventKind::Enable,
                    json!({ "disabled": { "old": true, "new": false } }),
                ));
            }
            _ => {}
        }
        (new, events)
    }
}
