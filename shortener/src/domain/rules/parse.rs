//! A rule as a transport sent it ([`RuleInput`]), checked into a [`Rule`]: its target and
//! each of its conditions, or why not.

use super::*;

pub(super) fn invalid(message: String) -> Error {
    Error::invalid("invalid_rules", message)
}

pub(super) fn parse_rule(
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
            let split =
                crate::domain::routes::split_at(&field, rule.variants, max_url_length, targets)?;
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
    serde_json::from_value(serde_json::Value::String(text.to_ascii_lowercase())).map_err(|_| {
        format!(
            "value: {} is not one of {allowed}",
            crate::domain::echo(text)
        )
    })
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
                    crate::domain::echo(&code)
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
                .map_err(|_| {
                    format!(
                        "value: {} is not a CIDR network",
                        crate::domain::echo(&text)
                    )
                })?;
            Condition::Cidr { value: net.trunc() }
        }
        other => {
            return Err(format!(
                "type: {} is not one of {}",
                crate::domain::echo(other),
                super::CONDITION_TYPES.join(", ")
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
            crate::domain::echo(text)
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
