//! Redirect rules of a link: an ordered list of targets, each with the conditions a visit must
//! meet for it; the first rule whose conditions all hold wins, else the link's own URL. What a
//! transport received ([`RuleInput`]) is checked here into [`Rules`], the form stored (as JSON)
//! and compiled by the redirect edge ([`crate::redirects::routing`]).

use super::{Error, TargetPolicy, TargetUrl, UrlError};
use chrono::{DateTime, Utc};
use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// The most rules a link has.
pub const MAX_RULES: usize = 32;
/// The most conditions a rule has.
pub const MAX_CONDITIONS: usize = 8;
/// The most values of a `query` condition's list (one of).
pub const MAX_VALUES: usize = 16;
/// The longest query key or value, in bytes.
pub const MAX_QUERY_TEXT: usize = 128;

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

fn invalid(message: String) -> Error {
    Error::invalid("invalid_rules", message)
}

fn parse_rule(
    i: usize,
    rule: RuleInput,
    max_url_length: usize,
    targets: &dyn TargetPolicy,
) -> Result<Rule, Error> {
    let (url, variants) = match (rule.url.is_empty(), rule.variants.is_empty()) {
        (false, false) | (true, true) => {
            return Err(invalid(format!(
                "rules[{i}]: a rule has a url or variants (a split), exactly one of them"
            )));
        }
        (true, false) => {
            let field = format!("rules[{i}].variants");
            let split = super::routes::split_at(&field, rule.variants, max_url_length, targets)?;
            (String::new(), split)
        }
        (false, true) => {
            let url =
                TargetUrl::parse(&rule.url, max_url_length, targets).map_err(|e| match e {
                    UrlError::Blocked(_) => {
                        Error::invalid("blocked_target", format!("rules[{i}].url: {e}"))
                    }
                    e => invalid(format!("rules[{i}].url: {e}")),
                })?;
            (url.as_str().to_string(), Vec::new())
        }
    };
    if rule.conditions.is_empty() || rule.conditions.len() > MAX_CONDITIONS {
        return Err(invalid(format!(
            "rules[{i}].conditions: 1 to {MAX_CONDITIONS} conditions, not {}",
            rule.conditions.len()
        )));
    }
    let conditions = rule
        .conditions
        .into_iter()
        .enumerate()
        .map(|(j, c)| {
            parse_condition(c).map_err(|m| invalid(format!("rules[{i}].conditions[{j}].{m}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Rule {
        url,
        variants,
        conditions,
    })
}

/// One value of a condition that takes exactly one.
fn one(value: Option<ValueInput>) -> Result<String, String> {
    match value {
        Some(ValueInput::One(v)) => Ok(v),
        _ => Err("value: one string is expected".into()),
    }
}

fn lower_enum<T: serde::de::DeserializeOwned>(text: &str, allowed: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(text.to_ascii_lowercase()))
        .map_err(|_| format!("value: {} is not one of {allowed}", super::echo(text)))
}

fn parse_condition(input: ConditionInput) -> Result<Condition, String> {
    if input.key.is_some() && input.kind != "query" {
        return Err("key: only a query condition has a key".into());
    }
    let value = input.value;
    Ok(match input.kind.as_str() {
        "device" => Condition::Device {
            value: lower_enum(&one(value)?, "desktop, mobile, tablet")?,
        },
        "os" => Condition::Os {
            value: lower_enum(
                &one(value)?,
                "ios, android, windows, macos, linux, chromeos",
            )?,
        },
        "browser" => Condition::Browser {
            value: lower_enum(
                &one(value)?,
                "chrome, firefox, safari, edge, opera, samsung",
            )?,
        },
        "language" => Condition::Language {
            value: language_tag(&one(value)?)?,
        },
        "country" => {
            let code = one(value)?;
            if code.len() != 2 || !code.bytes().all(|b| b.is_ascii_alphabetic()) {
                return Err(format!(
                    "value: {} is not an ISO 3166-1 alpha-2 country code",
                    super::echo(&code)
                ));
            }
            Condition::Country {
                value: code.to_ascii_uppercase(),
            }
        }
        "query" => query(input.key, value)?,
        "before" | "after" => {
            let text = one(value)?;
            let at = DateTime::parse_from_rfc3339(&text)
                .map_err(|e| format!("value: not an RFC 3339 instant: {e}"))?
                .with_timezone(&Utc);
            if input.kind == "before" {
                Condition::Before { value: at }
            } else {
                Condition::After { value: at }
            }
        }
        "cidr" => {
            let text = one(value)?;
            let net: IpNet = text
                .parse()
                .or_else(|_| text.parse::<std::net::IpAddr>().map(IpNet::from))
                .map_err(|_| format!("value: {} is not a CIDR network", super::echo(&text)))?;
            Condition::Cidr { value: net.trunc() }
        }
        other => {
            return Err(format!(
                "type: {} is not one of device, os, browser, language, country, query, before, after, cidr",
                super::echo(other)
            ));
        }
    })
}

/// A language tag as a condition holds it: `de`, `pt-br` (letters, digits and `-`, a primary
/// tag of 2 or 3 letters), lower case.
fn language_tag(text: &str) -> Result<String, String> {
    let lower = text.to_ascii_lowercase();
    let mut parts = lower.split('-');
    let primary = parts.next().unwrap_or("");
    let ok = (2..=3).contains(&primary.len())
        && primary.bytes().all(|b| b.is_ascii_lowercase())
        && parts
            .all(|p| (1..=8).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_alphanumeric()))
        && lower.len() <= 35;
    if ok {
        Ok(lower)
    } else {
        Err(format!(
            "value: {} is not a language tag (de, pt-BR)",
            super::echo(text)
        ))
    }
}

/// A `query` condition: its key, and none, one or several values.
fn query(key: Option<String>, value: Option<ValueInput>) -> Result<Condition, String> {
    let key = key.ok_or("key: a query condition names its parameter")?;
    let bounded = |text: &str, field: &str| {
        if text.is_empty() || text.len() > MAX_QUERY_TEXT || text.chars().any(char::is_control) {
            Err(format!(
                "{field}: 1 to {MAX_QUERY_TEXT} bytes without control characters"
            ))
        } else {
            Ok(())
        }
    };
    bounded(&key, "key")?;
    let values = match value {
        None => Vec::new(),
        Some(ValueInput::One(v)) => vec![v],
        Some(ValueInput::Many(vs)) if !vs.is_empty() && vs.len() <= MAX_VALUES => vs,
        Some(ValueInput::Many(_)) => {
            return Err(format!("value: 1 to {MAX_VALUES} values"));
        }
    };
    for v in &values {
        bounded(v, "value")?;
    }
    Ok(Condition::Query { key, values })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::domain::target::AnyHost as Anything;

    fn parse(json: serde_json::Value) -> Result<Rules, Error> {
        let input: Vec<RuleInput> = serde_json::from_value(json).expect("rule input");
        Rules::parse(input, 2048, &Anything)
    }

    #[test]
    fn rules_round_trip_through_their_stored_form() {
        let rules = parse(serde_json::json!([
            {"url": "https://a.example/", "conditions": [
                {"type": "device", "value": "Mobile"},
                {"type": "os", "value": "iOS"},
                {"type": "language", "value": "pt-BR"},
                {"type": "country", "value": "de"},
                {"type": "query", "key": "ref", "value": ["a", "b"]},
                {"type": "query", "key": "utm"},
                {"type": "after", "value": "2026-01-01T00:00:00Z"},
                {"type": "cidr", "value": "10.1.2.3/8"}
            ]}
        ]))
        .expect("valid");
        let stored = rules.to_stored().expect("some");
        assert_eq!(Rules::from_stored(Some(&stored)), rules);
        let Condition::Cidr { value } = &rules.0[0].conditions[7] else {
            panic!("cidr");
        };
        assert_eq!(value.to_string(), "10.0.0.0/8");
        assert_eq!(Rules::from_stored(None), Rules::default());
    }

    #[test]
    fn bad_rules_name_their_field() {
        let many = serde_json::json!({"url": "https://a.example/", "conditions": [{"type": "device", "value": "mobile"}]});
        let cases = [
            (
                serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "planet", "value": "mars"}]}]),
                "rules[0].conditions[0].type",
            ),
            (
                serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "device", "value": "fridge"}]}]),
                "rules[0].conditions[0].value",
            ),
            (
                serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "language", "value": "english!"}]}]),
                "rules[0].conditions[0].value",
            ),
            (
                serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "country", "value": "DEU"}]}]),
                "rules[0].conditions[0].value",
            ),
            (
                serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "cidr", "value": "10.0.0.0/33"}]}]),
                "rules[0].conditions[0].value",
            ),
            (
                serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "before", "value": "tomorrow"}]}]),
                "rules[0].conditions[0].value",
            ),
            (
                serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "query", "value": "x"}]}]),
                "rules[0].conditions[0].key",
            ),
            (
                serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "device", "key": "k", "value": "mobile"}]}]),
                "rules[0].conditions[0].key",
            ),
            (
                serde_json::json!([{"url": "https://a.example/", "conditions": [{"type": "query", "key": "k", "value": []}]}]),
                "rules[0].conditions[0].value",
            ),
            (
                serde_json::json!([{"url": "https://a.example/", "conditions": []}]),
                "rules[0].conditions",
            ),
            (
                serde_json::json!([{"url": "ftp://a.example/", "conditions": [{"type": "device", "value": "mobile"}]}]),
                "rules[0].url",
            ),
            (
                serde_json::Value::Array(vec![many; MAX_RULES + 1]),
                "rules:",
            ),
        ];
        for (json, field) in cases {
            let error = parse(json.clone()).expect_err(&json.to_string());
            assert_eq!(error.code(), "invalid_rules", "{json}");
            assert!(error.to_string().starts_with(field), "{json}: {error}");
        }
    }
}
