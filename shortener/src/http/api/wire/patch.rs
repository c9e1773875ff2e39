//! A PATCH body (JSON merge patch) as the change it asks for.

use super::*;

/// The fields a PATCH may change; every other field of a link is read-only.
const PATCHABLE: [&str; 20] = [
    "url",
    "title",
    "description",
    "image",
    "utm_source",
    "utm_medium",
    "utm_campaign",
    "utm_term",
    "utm_content",
    "pass_query",
    "domain",
    "rules",
    "ios",
    "android",
    "variants",
    "expires_at",
    "tags",
    "disabled",
    "max_visits",
    "password",
];
/// The fields of a link a PATCH cannot change.
const READ_ONLY: [&str; 13] = [
    "code",
    "short_url",
    "tenant",
    "owner",
    "state",
    "created_at",
    "deleted_at",
    "disabled_at",
    "imported",
    "protected",
    "clicks",
    "alias",
    "private",
];

/// A PATCH body (JSON merge patch, RFC 7396) as the change it asks for: absent fields stay,
/// `null` clears `expires_at` and `max_visits`. Read-only fields are `read_only_field` (422),
/// unknown ones `unknown_field` (400), wrong types `invalid_json` (400).
pub(in crate::http::api) fn patch_input(bytes: &[u8]) -> Result<PatchInput, Error> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| Error::bad_request("invalid_json", format!("invalid request body: {e}")))?;
    let Value::Object(fields) = value else {
        return Err(Error::bad_request(
            "invalid_json",
            "a patch is a JSON object of the fields to change",
        ));
    };
    for name in fields.keys() {
        if READ_ONLY.contains(&name.as_str()) {
            return Err(Error::invalid(
                "read_only_field",
                format!("{} cannot be changed", echo(name)),
            ));
        }
        if !PATCHABLE.contains(&name.as_str()) {
            return Err(Error::bad_request(
                "unknown_field",
                format!(
                    "unknown field {}; a patch may set {}",
                    echo(name),
                    PATCHABLE.join(", ")
                ),
            ));
        }
    }
    let wrong = |field: &str, want: &str| {
        Error::bad_request("invalid_json", format!("{field} must be {want}"))
    };
    let mut input = PatchInput::default();
    for (name, value) in fields {
        match (name.as_str(), value) {
            ("url", Value::String(url)) => input.url = Some(url),
            ("url", _) => return Err(wrong("url", "a string")),
            ("expires_at", Value::Null) => input.expires_at = Some(None),
            ("expires_at", Value::String(text)) => {
                input.expires_at = Some(Some(rfc3339("expires_at", "invalid_expiry", &text)?))
            }
            ("expires_at", _) => return Err(wrong("expires_at", "an RFC 3339 time or null")),
            ("tags", Value::Array(tags)) => {
                input.tags = Some(
                    tags.into_iter()
                        .map(|t| match t {
                            Value::String(t) => Ok(t),
                            _ => Err(wrong("tags", "an array of strings")),
                        })
                        .collect::<Result<_, _>>()?,
                )
            }
            ("tags", _) => return Err(wrong("tags", "an array of strings")),
            ("disabled", Value::Bool(disabled)) => input.disabled = Some(disabled),
            ("disabled", _) => return Err(wrong("disabled", "true or false")),
            ("max_visits", Value::Null) => input.max_visits = Some(None),
            ("max_visits", Value::Number(n)) => {
                input.max_visits = Some(Some(crate::domain::max_visits_of(&n)?))
            }
            ("max_visits", _) => return Err(wrong("max_visits", "a positive integer or null")),
            ("password", Value::Null) => input.password = Some(None),
            ("password", Value::String(password)) => input.password = Some(Some(password)),
            ("password", _) => return Err(wrong("password", "a string or null")),
            ("domain", Value::Null) => input.domain = Some(None),
            ("domain", Value::String(host)) => input.domain = Some(Some(host)),
            ("domain", _) => return Err(wrong("domain", "a host or null")),
            ("rules", Value::Null) => input.rules = Some(Vec::new()),
            ("rules", rules @ Value::Array(_)) => {
                input.rules = Some(
                    serde_json::from_value(rules)
                        .map_err(|e| Error::bad_request("invalid_json", format!("rules: {e}")))?,
                )
            }
            ("rules", _) => return Err(wrong("rules", "an array of rules or null")),
            ("ios", Value::Null) => input.ios = Some(None),
            ("ios", Value::String(t)) => input.ios = Some(Some(t)),
            ("ios", _) => return Err(wrong("ios", "a URL or null")),
            ("android", Value::Null) => input.android = Some(None),
            ("android", Value::String(t)) => input.android = Some(Some(t)),
            ("android", _) => return Err(wrong("android", "a URL or null")),
            ("variants", Value::Null) => input.variants = Some(Vec::new()),
            ("variants", variants @ Value::Array(_)) => {
                input.variants =
                    Some(serde_json::from_value(variants).map_err(|e| {
                        Error::bad_request("invalid_json", format!("variants: {e}"))
                    })?)
            }
            ("variants", _) => return Err(wrong("variants", "an array of variants or null")),
            ("pass_query", Value::Bool(pass)) => input.pass_query = Some(pass),
            ("pass_query", _) => return Err(wrong("pass_query", "true or false")),
            (field @ ("title" | "description" | "image"), value) => {
                let set = match value {
                    Value::Null => None,
                    Value::String(text) => Some(text),
                    _ => return Err(wrong(field, "a string or null")),
                };
                let preview = &mut input.preview;
                match field {
                    "title" => preview.title = Some(set),
                    "description" => preview.description = Some(set),
                    _ => preview.image = Some(set),
                }
            }
            (utm, value) if utm.starts_with("utm_") => {
                let field = input
                    .utm
                    .field(utm)
                    .ok_or_else(|| wrong(utm, "a known field"))?;
                *field = Some(match value {
                    Value::Null => None,
                    Value::String(text) => Some(text),
                    _ => return Err(wrong(utm, "a string or null")),
                });
            }
            _ => {}
        }
    }
    Ok(input)
}
