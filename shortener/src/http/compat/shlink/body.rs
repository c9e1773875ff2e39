//! Reading Shlink's JSON bodies field by field, each refusal naming its field as Shlink's
//! `invalidElements` does; and Shlink's date format.

use super::{Fail, Problem};
use axum::body::Body;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

/// The most bytes of a JSON body read.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The body as a JSON object (an empty body is an empty object).
pub async fn object(body: Body) -> Result<Map<String, Value>, Fail> {
    let bytes = crate::http::body::read_public(body, MAX_BODY_BYTES)
        .await
        .map_err(|unread| Problem::unread_body(unread, MAX_BODY_BYTES))?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(Problem::invalid_data("body", "the body must be a JSON object").into()),
        // The parser's own words say where (`trailing comma at line 1 column 32`).
        Err(error) => Err(Problem::invalid_data(
            "body",
            format!("the body is not valid JSON: {error}"),
        )
        .into()),
    }
}

/// A field: absent (`None`), `null` (`Some(None)`) or a value.
pub struct Fields<'a>(pub &'a Map<String, Value>);

fn wrong(field: &str, what: &str) -> Fail {
    Problem::invalid_data(field, format!("{field} must be {what}")).into()
}

impl Fields<'_> {
    fn raw(&self, field: &str) -> Option<Option<&Value>> {
        self.0.get(field).map(|v| (!v.is_null()).then_some(v))
    }

    /// A string, or `null`.
    pub fn string(&self, field: &str) -> Result<Option<Option<String>>, Fail> {
        match self.raw(field) {
            None => Ok(None),
            Some(None) => Ok(Some(None)),
            Some(Some(Value::String(s))) => Ok(Some(Some(s.clone()))),
            Some(Some(_)) => Err(wrong(field, "a string")),
        }
    }

    /// A boolean, or `null`.
    pub fn boolean(&self, field: &str) -> Result<Option<bool>, Fail> {
        match self.raw(field) {
            None | Some(None) => Ok(None),
            Some(Some(Value::Bool(b))) => Ok(Some(*b)),
            Some(Some(_)) => Err(wrong(field, "true or false")),
        }
    }

    /// A whole number from 1, or `null`.
    pub fn count(&self, field: &str) -> Result<Option<Option<u64>>, Fail> {
        match self.raw(field) {
            None => Ok(None),
            Some(None) => Ok(Some(None)),
            // A numeric string too (`"5"`), which Shlink takes as its number.
            Some(Some(v)) => match v
                .as_u64()
                .or_else(|| {
                    v.as_str()
                        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                        .and_then(|s| s.parse().ok())
                })
                .filter(|n| *n >= 1)
            {
                Some(n) => Ok(Some(Some(n))),
                None => Err(wrong(field, "a whole number from 1")),
            },
        }
    }

    /// A list of strings.
    pub fn strings(&self, field: &str) -> Result<Option<Vec<String>>, Fail> {
        match self.raw(field) {
            None | Some(None) => Ok(None),
            Some(Some(Value::Array(items))) => items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| wrong(field, "a list of strings")),
            Some(Some(_)) => Err(wrong(field, "a list of strings")),
        }
    }

    /// A date (ISO 8601 with an offset), or `null`.
    pub fn date(&self, field: &str) -> Result<Option<Option<DateTime<Utc>>>, Fail> {
        match self.string(field)? {
            None => Ok(None),
            Some(None) => Ok(Some(None)),
            Some(Some(text)) => parse_date(&text)
                .map(|d| Some(Some(d)))
                .ok_or_else(|| wrong(field, "an ISO 8601 date with its offset")),
        }
    }
}

/// An ISO 8601 date with its offset (`2025-01-02T03:04:05+00:00`).
pub fn parse_date(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|d| d.with_timezone(&Utc))
}

/// A time as Shlink writes it (ISO 8601 with `+00:00`).
pub fn date(time: DateTime<Utc>) -> String {
    time.format("%Y-%m-%dT%H:%M:%S+00:00").to_string()
}
