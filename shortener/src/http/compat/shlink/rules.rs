//! Shlink's redirect rules over a link's `rules`. Shlink's conditions and ours:
//! `device` is our `device` (`mobile`, `desktop`) or `os` (`android`, `ios`, `windows`,
//! `macos`, `linux`, `chromeos`); `language`, `browser` are ours; `query-param` is a `query`
//! condition with one value and `any-value-query-param` one with none; `ip-address` is `cidr`
//! (an address is its own network); `geolocation-country-code` is `country`; `before-date` and
//! `after-date` are `before` and `after`. `valueless-query-param` and `geolocation-city-name`
//! have no counterpart and are refused, as is a device Shlink does not have (`tablet`). A rule of ours Shlink cannot show (a split, a tablet,
//! a query condition with several values) is left out of what `GET` answers, and a link that
//! has one refuses a `POST` of its rules (`invalid-data`), so a client never drops it unseen.

use super::short_urls::find;
use super::{Fail, Problem, admit, finish, json, short_code};
use crate::access::Operation;
use crate::domain::rules::{Condition, ConditionInput, DeviceClass, Rule, ValueInput};
use crate::domain::{LinkPatch, PatchInput, RuleInput};
use crate::http::HttpState;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use chrono::Utc;
use serde_json::{Value, json};
use std::sync::Arc;

/// Shlink's devices that are operating systems (our `os` condition).
const OS_DEVICES: [&str; 6] = ["android", "ios", "windows", "macos", "linux", "chromeos"];
/// Shlink's devices that are classes of device (our `device` condition).
const CLASS_DEVICES: [&str; 2] = ["mobile", "desktop"];

/// A condition of ours in Shlink's shape, if Shlink has it.
fn shown_condition(condition: &Condition) -> Option<Value> {
    let (kind, value) = condition.parts();
    let (kind, key, value) = match condition {
        Condition::Device { value } if *value == DeviceClass::Tablet => return None,
        Condition::Device { .. } | Condition::Os { .. } => ("device", None, value),
        Condition::Browser { .. } | Condition::Language { .. } => (kind, None, value),
        Condition::Country { .. } => ("geolocation-country-code", None, value),
        Condition::Query { key, values } => match values.as_slice() {
            [] => ("any-value-query-param", Some(key.clone()), String::new()),
            [one] => ("query-param", Some(key.clone()), one.clone()),
            _ => return None,
        },
        Condition::Before { .. } => ("before-date", None, value),
        Condition::After { .. } => ("after-date", None, value),
        Condition::Cidr { .. } => ("ip-address", None, value),
    };
    let value = (!value.is_empty()).then_some(value);
    Some(json!({ "type": kind, "matchKey": key, "matchValue": value }))
}

fn shown_rule(rule: &Rule, priority: usize) -> Option<Value> {
    if !rule.variants.is_empty() {
        return None;
    }
    let conditions = rule
        .conditions
        .iter()
        .map(shown_condition)
        .collect::<Option<Vec<_>>>()?;
    Some(json!({ "longUrl": rule.url, "priority": priority, "conditions": conditions }))
}

fn shown(link: &crate::domain::Link) -> Value {
    let rules: Vec<Value> = link
        .routes
        .rules
        .0
        .iter()
        .filter_map(|rule| shown_rule(rule, 0))
        .enumerate()
        .map(|(i, mut rule)| {
            rule["priority"] = json!(i + 1);
            rule
        })
        .collect();
    json!({ "defaultLongUrl": link.url, "redirectRules": rules })
}

/// `GET /rest/v3/short-urls/{shortCode}/redirect-rules?domain=`.
pub async fn get(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    code: Result<Path<String>, PathRejection>,
    uri: Uri,
) -> Response {
    let code = super::path_text(code);
    let answer = async {
        let caller = admit(&state, &headers, None, Operation::Read).await?;
        let link = find(&state, &caller, &code, &uri).await?;
        Ok(json(shown(&link)))
    }
    .await;
    finish(&state, "rules-get", answer)
}

fn text(condition: &Value, name: &str, field: &str) -> Result<Option<String>, Fail> {
    match condition.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Problem::invalid_data(field, format!("{field}.{name} is a string")).into()),
    }
}

/// One of Shlink's conditions as ours.
fn condition(condition: &Value, field: &str) -> Result<ConditionInput, Fail> {
    let kind = text(condition, "type", field)?.unwrap_or_default();
    let key = text(condition, "matchKey", field)?;
    let value = text(condition, "matchValue", field)?;
    let (ours, key, value) = match kind.as_str() {
        "device" => {
            let value = value.unwrap_or_default();
            let ours = if OS_DEVICES.contains(&value.as_str()) {
                "os"
            } else if CLASS_DEVICES.contains(&value.as_str()) {
                "device"
            } else {
                // Shlink has no other device (ours has `tablet`, which a Shlink client could
                // set but never see).
                return Err(Problem::invalid_data(
                    field,
                    format!(
                        "{field}.matchValue {} is not a device (supported: {}, {})",
                        crate::domain::echo(&value),
                        CLASS_DEVICES.join(", "),
                        OS_DEVICES.join(", ")
                    ),
                )
                .into());
            };
            (ours, None, Some(value))
        }
        "language" | "browser" => (kind.as_str(), None, value),
        "query-param" => ("query", key, value),
        "any-value-query-param" => ("query", key, None),
        "ip-address" => ("cidr", None, value),
        "geolocation-country-code" => ("country", None, value),
        "before-date" => ("before", None, value),
        "after-date" => ("after", None, value),
        other => {
            return Err(Problem::invalid_data(
                field,
                format!(
                    "{field}.type {} is not supported (supported: device, language, browser, \
                     query-param, any-value-query-param, ip-address, \
                     geolocation-country-code, before-date, after-date)",
                    crate::domain::echo(other)
                ),
            )
            .into());
        }
    };
    Ok(ConditionInput {
        kind: ours.to_string(),
        key,
        value: value.map(ValueInput::One),
    })
}

fn rule_inputs(body: &serde_json::Map<String, Value>) -> Result<Vec<RuleInput>, Fail> {
    let Some(Value::Array(rules)) = body.get("redirectRules") else {
        return Err(Problem::invalid_data("redirectRules", "redirectRules is a list").into());
    };
    rules
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            let field = format!("redirectRules[{i}]");
            let url = text(rule, "longUrl", &field)?.unwrap_or_default();
            let Some(Value::Array(conditions)) = rule.get("conditions") else {
                return Err(
                    Problem::invalid_data(&field, format!("{field}.conditions is a list")).into(),
                );
            };
            let conditions = conditions
                .iter()
                .enumerate()
                .map(|(j, c)| condition(c, &format!("{field}.conditions[{j}]")))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(RuleInput {
                url,
                variants: Vec::new(),
                conditions,
            })
        })
        .collect()
}

/// `POST /rest/v3/short-urls/{shortCode}/redirect-rules?domain=`: `{"redirectRules": [...]}`
/// replaces the link's rules (in the order given: Shlink's priorities); answers them as `GET`.
pub async fn set(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    code: Result<Path<String>, PathRejection>,
    uri: Uri,
    body: Body,
) -> Response {
    let code = super::path_text(code);
    let answer = async {
        let caller = admit(&state, &headers, None, Operation::Update).await?;
        let map = super::body::object(body).await?;
        let input = PatchInput {
            rules: Some(rule_inputs(&map)?),
            ..PatchInput::default()
        };
        let patch = LinkPatch::parse(input, &state.rules, Utc::now())?;
        // Rules Shlink cannot show are not in what a Shlink client read, so saving its list
        // would drop them unseen: such a link's rules are changed through /api/v1 only.
        let current = find(&state, &caller, &code, &uri).await?;
        if current
            .routes
            .rules
            .0
            .iter()
            .any(|r| shown_rule(r, 0).is_none())
        {
            return Err(Problem::invalid_data(
                "redirectRules",
                "this short URL has redirect rules Shlink cannot express (a split, a tablet \
                 condition or a query condition with several values), which saving would drop: \
                 change its rules through /api/v1",
            )
            .into());
        }
        let code = short_code(&state, &code, &uri)?;
        let link =
            (state.links.update(&caller, &code, &patch).await).map_err(super::about(&code))?;
        if !crate::links::answers_whole(&caller, false) {
            // The rules hold targets: only a read reveals them.
            return Ok(json(super::short_urls::seen(&state, &caller, &link, false)));
        }
        Ok(json(shown(&link)))
    }
    .await;
    finish(&state, "rules-set", answer)
}
