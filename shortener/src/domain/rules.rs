//! Redirect rules of a link: an ordered list of targets, each with the conditions a visit must
//! meet for it; the first rule whose conditions all hold wins, else the link's own URL. What a
//! transport received ([`RuleInput`]) is checked here into [`Rules`], the form stored (as JSON)
//! and compiled by the redirect edge ([`crate::redirects::routing`]).

mod parse;

use super::{Error, TargetPolicy, TargetUrl, UrlError};
use chrono::{DateTime, Utc};
use ipnet::IpNet;
use parse::{invalid, parse_rule};
use serde::{Deserialize, Serialize};

/// The most rules a link has.
pub const MAX_RULES: usize = 32;
/// The most conditions a rule has.
pub const MAX_CONDITIONS: usize = 8;
/// The most values of a `query` condition's list (one of).
pub const MAX_VALUES: usize = 16;
/// The longest query key or value, in bytes.
pub const MAX_QUERY_TEXT: usize = 128;
/// The condition types a rule may use, in the order a client offers them.
pub const CONDITION_TYPES: [&str; 9] = [
    "device", "os", "browser", "language", "country", "query", "before", "after", "cidr",
];

/// A rule as a transport received it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleInput {
    /// Where a visit that meets every condition goes (empty when the rule splits instead).
    #[serde(default)]
    pub url: String,
    /// A split of the visits that meet every condition, instead of one `url`.
    #[serde(default)]
    pub variants: Vec<super::VariantInput>,
    /// What a visit must meet (all of them); at least one.
    pub conditions: Vec<ConditionInput>,
}

/// A condition as a transport received it: its type, a key (`query` only) and its values (one,
/// or for `query` none (present) or several (one of)).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConditionInput {
    /// `device`, `os`, `browser`, `language`, `country`, `query`, `before`, `after`, `cidr`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The query parameter's name (`query` only).
    #[serde(default)]
    pub key: Option<String>,
    /// The value: a string, or for `query` an array (one of) or nothing (present).
    #[serde(default)]
    pub value: Option<ValueInput>,
}

/// A condition's value as JSON gives it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum ValueInput {
    /// One value.
    One(String),
    /// Several (a `query` condition's "one of").
    Many(Vec<String>),
}

/// A device class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceClass {
    /// A desktop or laptop computer.
    Desktop,
    /// A phone.
    Mobile,
    /// A tablet.
    Tablet,
}

/// An operating system family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Os {
    /// iOS and iPadOS.
    Ios,
    /// Android.
    Android,
    /// Windows.
    Windows,
    /// macOS.
    Macos,
    /// Linux (not Android or ChromeOS).
    Linux,
    /// ChromeOS.
    Chromeos,
}

/// A browser family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Browser {
    /// Google Chrome and Chromium.
    Chrome,
    /// Mozilla Firefox.
    Firefox,
    /// Apple Safari.
    Safari,
    /// Microsoft Edge.
    Edge,
    /// Opera.
    Opera,
    /// Samsung Internet.
    Samsung,
}

/// A checked condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Condition {
    /// The visitor's device class.
    Device {
        /// The class.
        value: DeviceClass,
    },
    /// The visitor's operating system.
    Os {
        /// The family.
        value: Os,
    },
    /// The visitor's browser.
    Browser {
        /// The family.
        value: Browser,
    },
    /// The visitor's preferred language (the first of `Accept-Language` by q-value): a primary
    /// tag (`de`) matches every region of it, a full tag (`pt-br`) only itself.
    Language {
        /// The tag, lower case.
        value: String,
    },
    /// The visitor's country (GeoIP, when the node has a database).
    Country {
        /// ISO 3166-1 alpha-2, upper case.
        value: String,
    },
    /// A query parameter of the short URL: present (no values), equal to one value, or one of
    /// several.
    Query {
        /// The parameter's name.
        key: String,
        /// What it must equal (any of them); empty: present with any value.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        values: Vec<String>,
    },
    /// Before an instant.
    Before {
        /// The instant.
        value: DateTime<Utc>,
    },
    /// At or after an instant.
    After {
        /// The instant.
        value: DateTime<Utc>,
    },
    /// The client's address (as the trusted-proxy rules find it) in a network.
    Cidr {
        /// The network.
        value: IpNet,
    },
}

impl Condition {
    /// Heap bytes it holds beyond its own size: the texts of a language, a country or a
    /// query condition (its key and every value).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Condition::Language { value } | Condition::Country { value } => value.capacity(),
            Condition::Query { key, values } => {
                key.capacity()
                    + values.capacity() * size_of::<String>()
                    + values.iter().map(String::capacity).sum::<usize>()
            }
            _ => 0,
        }
    }
}

/// A checked rule: one target, or a split of its visits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// The target, serialized as a link's URL is; empty when the rule splits.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
    /// The rule's split (2 to 10 variants, weights summing to 100), instead of `url`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<super::Variant>,
    /// What a visit must meet, all of them.
    pub conditions: Vec<Condition>,
}

/// A link's checked rules, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Rules(pub Vec<Rule>);

impl Rules {
    /// Checks `input` against the target rules and the bounds; the field of the first problem
    /// is named in the error (`rules[2].conditions[0].value`).
    pub fn parse(
        input: Vec<RuleInput>,
        max_url_length: usize,
        targets: &dyn TargetPolicy,
    ) -> Result<Self, Error> {
        if input.len() > MAX_RULES {
            return Err(invalid(format!(
                "rules: at most {MAX_RULES} rules, not {}",
                input.len()
            )));
        }
        input
            .into_iter()
            .enumerate()
            .map(|(i, rule)| parse_rule(i, rule, max_url_length, targets))
            .collect::<Result<Vec<_>, _>>()
            .map(Rules)
    }

    /// The rules as stored (JSON text); `None` for none.
    pub fn to_stored(&self) -> Option<String> {
        (!self.0.is_empty()).then(|| serde_json::to_string(self).unwrap_or_default())
    }

    /// The rules of stored JSON text (a row written by this release or a later one that only
    /// added fields); unreadable text is no rules.
    pub fn from_stored(text: Option<&str>) -> Self {
        text.and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or_default()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Where the first `country` condition is: its rule's index and its own.
    pub fn first_country(&self) -> Option<(usize, usize)> {
        self.0.iter().enumerate().find_map(|(i, rule)| {
            (rule.conditions.iter())
                .position(|c| matches!(c, Condition::Country { .. }))
                .map(|j| (i, j))
        })
    }
}

/// Rules in the API's shape (as a create gives them): a condition's `value` is a string, or for
/// a `query` condition a string (one value), an array (one of) or absent (present). Serialized
/// straight from the rules, with no intermediate tree.
pub struct ApiRules<'a>(pub &'a Rules);

impl Serialize for ApiRules<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(Some(self.0.0.len()))?;
        for rule in &self.0.0 {
            seq.serialize_element(&ApiRule(rule))?;
        }
        seq.end()
    }
}

struct ApiRule<'a>(&'a Rule);

impl Serialize for ApiRule<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        if self.0.variants.is_empty() {
            map.serialize_entry("url", &self.0.url)?;
        } else {
            map.serialize_entry("variants", &self.0.variants)?;
        }
        let conditions: Vec<ApiCondition<'_>> =
            self.0.conditions.iter().map(ApiCondition).collect();
        map.serialize_entry("conditions", &conditions)?;
        map.end()
    }
}

struct ApiCondition<'a>(&'a Condition);

impl Serialize for ApiCondition<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        let (kind, value) = self.0.parts();
        map.serialize_entry("type", kind)?;
        if let Condition::Query { key, values } = self.0 {
            map.serialize_entry("key", key)?;
            match values.as_slice() {
                [] => {}
                [one] => map.serialize_entry("value", one)?,
                many => map.serialize_entry("value", many)?,
            }
        } else {
            map.serialize_entry("value", &value)?;
        }
        map.end()
    }
}

impl Condition {
    /// The condition's type name, and its value as text (empty for `query`, whose values are
    /// its own).
    pub fn parts(&self) -> (&'static str, String) {
        fn text<T: Serialize>(v: &T) -> String {
            serde_json::to_value(v)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        }
        match self {
            Condition::Device { value } => ("device", text(value)),
            Condition::Os { value } => ("os", text(value)),
            Condition::Browser { value } => ("browser", text(value)),
            Condition::Language { value } => ("language", value.clone()),
            Condition::Country { value } => ("country", value.clone()),
            Condition::Query { .. } => ("query", String::new()),
            Condition::Before { value } => (
                "before",
                value.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            ),
            Condition::After { value } => (
                "after",
                value.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            ),
            Condition::Cidr { value } => ("cidr", value.to_string()),
        }
    }
}

#[cfg(test)]
mod tests;
