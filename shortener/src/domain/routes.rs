//! Where a link routes besides its URL, stored whole as one JSON object beside it: its redirect
//! rules ([`super::rules`]), its app targets (`ios`, `android`) and its split (`variants`).
//! The redirect edge compiles it once per cache entry ([`crate::redirects::routing`]) and
//! decides in this order: the first rule that holds, else the app target of the visitor's
//! operating system, else the visitor's variant of the split, else the link's URL.
//!
//! One file (just over 450 lines): the stored object, the checks of each of its parts and its
//! JSON are one contract, read and written together (the rules' own checks are in
//! [`super::rules`]).

use super::rules::Rules;
use super::{Error, TargetPolicy, TargetUrl, UrlError};
use serde::{Deserialize, Serialize};

/// The most variants of a split.
pub const MAX_VARIANTS: usize = 10;
/// The longest app target, in bytes.
pub const MAX_APP_URL: usize = 2048;

/// Schemes an app target may never have: they run or read something in the browser itself.
const REFUSED_SCHEMES: &[&str] = &["javascript", "data", "vbscript", "file", "about", "blob"];

/// One variant of a split: a target and its share of new visitors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// The target.
    pub url: String,
    /// Its share, in percent (1 to 100; a split's weights sum to 100).
    pub weight: u8,
}

/// A variant as a transport received it (the weight any integer, checked by [`variants`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantInput {
    /// The target.
    pub url: String,
    /// Its share, in percent.
    pub weight: i64,
}

/// A link's routing, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Routes {
    /// Redirect rules, in order.
    #[serde(default, skip_serializing_if = "Rules::is_empty")]
    pub rules: Rules,
    /// The iOS target (an app URL or a store link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ios: Option<String>,
    /// The Android target (an app URL or a store link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub android: Option<String>,
    /// The split, if the link has one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<Variant>,
    /// UTM parameters added to every http(s) target.
    #[serde(default, skip_serializing_if = "Utm::is_empty")]
    pub utm: Utm,
    /// Whether the short URL's own query is passed on to the target.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pass_query: bool,
    /// What link-preview crawlers are shown.
    #[serde(default, skip_serializing_if = "Preview::is_empty")]
    pub preview: Preview,
}

/// A link's social preview: what a preview crawler (Facebook, X, LinkedIn, Slack, ...) is shown
/// instead of the redirect, each field optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preview {
    /// The title (`og:title`), at most [`MAX_TITLE`] characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The description (`og:description`), at most [`MAX_DESCRIPTION`] characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The image (`og:image`): an http(s) URL checked as a link's target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// The longest preview title, in characters.
pub const MAX_TITLE: usize = 200;
/// The longest preview description, in characters.
pub const MAX_DESCRIPTION: usize = 500;

impl Preview {
    /// Whether no field is set.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// Heap bytes its texts hold.
    pub fn heap_bytes(&self) -> usize {
        [&self.title, &self.description, &self.image]
            .iter()
            .filter_map(|t| t.as_ref().map(String::capacity))
            .sum()
    }

    /// `self` with each field checked against `rules`.
    pub fn checked(self, rules: &super::CreateRules) -> Result<Self, Error> {
        Ok(Self {
            title: preview_text("title", self.title, MAX_TITLE)?,
            description: preview_text("description", self.description, MAX_DESCRIPTION)?,
            image: preview_image(self.image, rules.max_url_length, rules.targets.as_ref())?,
        })
    }

    /// `self` with the set fields of `patch` applied (`Some(None)` clears one).
    pub fn patched(&self, patch: &PreviewPatch) -> Self {
        let pick = |now: &Option<String>, new: &Option<Option<String>>| match new {
            Some(value) => value.clone(),
            None => now.clone(),
        };
        Self {
            title: pick(&self.title, &patch.title),
            description: pick(&self.description, &patch.description),
            image: pick(&self.image, &patch.image),
        }
    }
}

/// A change of a preview: each field set, cleared (`Some(None)`) or left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreviewPatch {
    /// The title.
    pub title: Option<Option<String>>,
    /// The description.
    pub description: Option<Option<String>>,
    /// The image.
    pub image: Option<Option<String>>,
}

impl PreviewPatch {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// `self` with each value it sets checked against `rules`.
    pub fn checked(self, rules: &super::CreateRules) -> Result<Self, Error> {
        let (max, targets) = (rules.max_url_length, rules.targets.as_ref());
        Ok(Self {
            title: self
                .title
                .map(|t| preview_text("title", t, MAX_TITLE))
                .transpose()?,
            description: self
                .description
                .map(|d| preview_text("description", d, MAX_DESCRIPTION))
                .transpose()?,
            image: self
                .image
                .map(|i| preview_image(i, max, targets))
                .transpose()?,
        })
    }
}

/// A preview text (`field`, at most `max` characters, each [`super::text::displayable`]: no
/// control characters, bidirectional overrides or noncharacters); `None` or empty: unset.
pub fn preview_text(
    field: &str,
    input: Option<String>,
    max: usize,
) -> Result<Option<String>, Error> {
    let Some(text) = input.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    if text.chars().count() > max || !text.chars().all(super::text::displayable) {
        return Err(Error::invalid(
            "invalid_preview",
            format!(
                "{field}: at most {max} characters, without control characters, \
                 bidirectional overrides or noncharacters"
            ),
        ));
    }
    Ok(Some(text))
}

/// A preview image URL, checked as a link's target; `None` or empty: unset.
pub fn preview_image(
    input: Option<String>,
    max_url_length: usize,
    targets: &dyn TargetPolicy,
) -> Result<Option<String>, Error> {
    let Some(text) = input.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    TargetUrl::parse(&text, max_url_length, targets)
        .map(|u| Some(u.as_str().to_string()))
        .map_err(|e| Error::invalid("invalid_preview", format!("image: {e}")))
}

/// The UTM parameters of a link (`utm_source`, ...), each optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Utm {
    /// `utm_source`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// `utm_medium`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub medium: Option<String>,
    /// `utm_campaign`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub campaign: Option<String>,
    /// `utm_term`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term: Option<String>,
    /// `utm_content`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

impl Utm {
    /// `self` with each value checked ([`utm_value`]).
    pub fn checked(self) -> Result<Self, Error> {
        Ok(Self {
            source: utm_value("utm_source", self.source)?,
            medium: utm_value("utm_medium", self.medium)?,
            campaign: utm_value("utm_campaign", self.campaign)?,
            term: utm_value("utm_term", self.term)?,
            content: utm_value("utm_content", self.content)?,
        })
    }

    /// `self` with the set fields of `patch` applied (`Some(None)` clears one), checked.
    pub fn patched(&self, patch: &UtmPatch) -> Result<Self, Error> {
        let pick = |now: &Option<String>, new: &Option<Option<String>>| match new {
            Some(value) => value.clone(),
            None => now.clone(),
        };
        Self {
            source: pick(&self.source, &patch.source),
            medium: pick(&self.medium, &patch.medium),
            campaign: pick(&self.campaign, &patch.campaign),
            term: pick(&self.term, &patch.term),
            content: pick(&self.content, &patch.content),
        }
        .checked()
    }
}

/// A change of UTM parameters: each field set (`Some(Some)`), cleared (`Some(None)`) or left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UtmPatch {
    /// `utm_source`.
    pub source: Option<Option<String>>,
    /// `utm_medium`.
    pub medium: Option<Option<String>>,
    /// `utm_campaign`.
    pub campaign: Option<Option<String>>,
    /// `utm_term`.
    pub term: Option<Option<String>>,
    /// `utm_content`.
    pub content: Option<Option<String>>,
}

impl UtmPatch {
    /// The field of `name` (`utm_source`, ...), if it is one.
    pub fn field(&mut self, name: &str) -> Option<&mut Option<Option<String>>> {
        Some(match name {
            "utm_source" => &mut self.source,
            "utm_medium" => &mut self.medium,
            "utm_campaign" => &mut self.campaign,
            "utm_term" => &mut self.term,
            "utm_content" => &mut self.content,
            _ => return None,
        })
    }

    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// The longest UTM value, in bytes.
pub const MAX_UTM: usize = 200;

impl Utm {
    /// Whether no parameter is set.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// The parameters that are set, by their query names.
    pub fn pairs(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("utm_source", &self.source),
            ("utm_medium", &self.medium),
            ("utm_campaign", &self.campaign),
            ("utm_term", &self.term),
            ("utm_content", &self.content),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value.as_deref()?)))
    }
}

/// Checks a UTM value (`field` names it): 1 to [`MAX_UTM`] bytes, no control characters and none
/// of the query's separators (`&`, `=`, `#`, `?`), so what the target receives is what was set.
/// `None` or empty: unset.
pub fn utm_value(field: &str, input: Option<String>) -> Result<Option<String>, Error> {
    let Some(text) = input.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    if text.len() > MAX_UTM
        || text
            .chars()
            .any(|c| c.is_control() || matches!(c, '&' | '=' | '#' | '?'))
    {
        return Err(Error::invalid(
            "invalid_utm",
            format!("{field}: 1 to {MAX_UTM} bytes, without control characters, &, =, # or ?"),
        ));
    }
    Ok(Some(text))
}

/// `url` with `pairs` added to its query, each only if the query has no parameter of that name
/// already; a URL that is not http(s) (an app's) or does not parse is left as it is.
pub fn with_params<K: AsRef<str>, V: AsRef<str>>(
    url: &str,
    pairs: impl IntoIterator<Item = (K, V)>,
) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return url.to_string();
    };
    if !matches!(parsed.scheme(), "http" | "https") {
        return url.to_string();
    }
    let present: Vec<String> = parsed.query_pairs().map(|(k, _)| k.into_owned()).collect();
    let added: Vec<(K, V)> = pairs
        .into_iter()
        .filter(|(k, _)| !present.iter().any(|p| p == k.as_ref()))
        .collect();
    if added.is_empty() {
        return url.to_string();
    }
    parsed.query_pairs_mut().extend_pairs(added);
    parsed.to_string()
}

impl Routes {
    /// Whether the link routes nowhere but its URL.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// As stored (JSON text); `None` for a plain link.
    pub fn to_stored(&self) -> Option<String> {
        (!self.is_empty()).then(|| serde_json::to_string(self).unwrap_or_default())
    }

    /// From stored JSON text; unreadable text routes nowhere.
    pub fn from_stored(text: Option<&str>) -> Self {
        text.and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or_default()
    }
}

/// Checks an app target (`field` names it in the error): an `http(s)` URL passes every rule a
/// link's target does; any other scheme (an app's, `myapp://item/7`) must parse as a URL, be at
/// most [`MAX_APP_URL`] bytes and not be one that runs in the browser (`javascript:`, `data:`,
/// `file:`, ...). `None` or empty: no target.
pub fn app_target(
    field: &str,
    input: Option<String>,
    max_url_length: usize,
    targets: &dyn TargetPolicy,
) -> Result<Option<String>, Error> {
    let Some(text) = input.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let invalid =
        |message: String| Error::invalid("invalid_app_target", format!("{field}: {message}"));
    let parsed = url::Url::parse(&text).map_err(|e| invalid(format!("not a URL: {e}")))?;
    if matches!(parsed.scheme(), "http" | "https") {
        return TargetUrl::parse(&text, max_url_length, targets)
            .map(|u| Some(u.as_str().to_string()))
            .map_err(|e| match e {
                UrlError::Blocked(_) => Error::invalid("blocked_target", format!("{field}: {e}")),
                e => invalid(e.to_string()),
            });
    }
    if REFUSED_SCHEMES.contains(&parsed.scheme()) {
        return Err(invalid(format!(
            "the {} scheme is not an app's",
            parsed.scheme()
        )));
    }
    let serialized = parsed.to_string();
    if serialized.len() > MAX_APP_URL || serialized.chars().any(char::is_control) {
        return Err(invalid(format!(
            "at most {MAX_APP_URL} bytes, no control characters"
        )));
    }
    Ok(Some(serialized))
}

/// Checks a link's split: 2 to [`MAX_VARIANTS`] variants, each target like a link's, each weight
/// 1 to 100, the weights summing to 100. Empty: no split.
pub fn variants(
    input: Vec<VariantInput>,
    max_url_length: usize,
    targets: &dyn TargetPolicy,
) -> Result<Vec<Variant>, Error> {
    split_at("variants", input, max_url_length, targets)
}

/// Checks the split at `field` (`variants`, or a rule's `rules[2].variants`) as [`variants`]
/// does, naming the field in the error.
pub fn split_at(
    field: &str,
    input: Vec<VariantInput>,
    max_url_length: usize,
    targets: &dyn TargetPolicy,
) -> Result<Vec<Variant>, Error> {
    if input.is_empty() {
        return Ok(Vec::new());
    }
    let invalid = |message: String| Error::invalid("invalid_variants", message);
    if input.len() < 2 || input.len() > MAX_VARIANTS {
        return Err(invalid(format!(
            "{field}: 2 to {MAX_VARIANTS} variants, not {}",
            input.len()
        )));
    }
    let mut total = 0u32;
    let mut checked = Vec::with_capacity(input.len());
    for (i, variant) in input.into_iter().enumerate() {
        let Ok(weight) = u8::try_from(variant.weight).map_err(drop).and_then(|w| {
            if (1..=100).contains(&w) {
                Ok(w)
            } else {
                Err(())
            }
        }) else {
            return Err(invalid(format!(
                "{field}[{i}].weight: 1 to 100, not {}",
                variant.weight
            )));
        };
        total += u32::from(weight);
        let url = TargetUrl::parse(&variant.url, max_url_length, targets).map_err(|e| match e {
            UrlError::Blocked(_) => {
                Error::invalid("blocked_target", format!("{field}[{i}].url: {e}"))
            }
            e => invalid(format!("{field}[{i}].url: {e}")),
        })?;
        checked.push(Variant {
            url: url.as_str().to_string(),
            weight,
        });
    }
    if total != 100 {
        return Err(invalid(format!(
            "{field}: the weights sum to {total}, not 100"
        )));
    }
    Ok(checked)
}

#[cfg(test)]
mod tests;
