//! The JSON API's wire types, and their one conversion to and from domain types.
//!
//! Requests are read here, answers written in [`answer`], and a PATCH body read in [`patch`]:
//! every shape of the JSON API sits beside its conversion, so a field changes in one place for
//! every endpoint.

use super::super::ApiError;
use crate::domain::rules::ApiRules;
use crate::domain::{
    Caller, CreateInput, CreateRules, DomainFilter, Error, Event, Link, ListInput, PatchInput,
    PublicBase, RuleInput, Variant, VariantInput, echo,
};
use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod answer;
mod patch;

#[cfg(test)]
use answer::Millis;
pub(super) use answer::{EventJson, LinkAnswer, LinkJson, PageJson};
pub(super) use patch::patch_input;

/// The largest create body accepted.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// The body of `POST /api/v1/links`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateBody {
    url: String,
    #[serde(default)]
    alias: Option<String>,
    #[serde(default)]
    expires_at: Option<String>,
    #[serde(default)]
    dedup: bool,
    #[serde(default)]
    private: bool,
    #[serde(default)]
    tags: Vec<String>,
    /// Any JSON number, so that a negative or fractional one is `invalid_max_visits` as 0 is.
    #[serde(default)]
    max_visits: Option<serde_json::Number>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    domain: Option<String>,
    #[serde(default)]
    rules: Vec<RuleInput>,
    #[serde(default)]
    ios: Option<String>,
    #[serde(default)]
    android: Option<String>,
    #[serde(default)]
    variants: Vec<VariantInput>,
    #[serde(default)]
    utm_source: Option<String>,
    #[serde(default)]
    utm_medium: Option<String>,
    #[serde(default)]
    utm_campaign: Option<String>,
    #[serde(default)]
    utm_term: Option<String>,
    #[serde(default)]
    utm_content: Option<String>,
    #[serde(default)]
    pass_query: bool,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    image: Option<String>,
}

impl CreateBody {
    /// The create this body and its request's headers (`Idempotency-Key`) ask for.
    pub(super) fn into_input(self, headers: &HeaderMap) -> Result<CreateInput, Error> {
        let expires_at = self
            .expires_at
            .as_deref()
            .map(|text| rfc3339("expires_at", "invalid_expiry", text))
            .transpose()?;
        let max_visits = self
            .max_visits
            .as_ref()
            .map(crate::domain::max_visits_of)
            .transpose()?;
        let idempotency_key = match headers.get("idempotency-key") {
            None => None,
            Some(value) => Some(
                value
                    .to_str()
                    .map_err(|_| {
                        Error::bad_request(
                            "invalid_idempotency_key",
                            "the Idempotency-Key header must be ASCII",
                        )
                    })?
                    .to_string(),
            ),
        };
        Ok(CreateInput {
            url: self.url,
            alias: self.alias,
            expires_at,
            dedup: self.dedup,
            dedup_settings: false,
            private: self.private,
            idempotency_key,
            tags: self.tags,
            max_visits,
            password: self.password,
            domain: self.domain,
            rules: self.rules,
            ios: self.ios,
            android: self.android,
            variants: self.variants,
            utm: crate::domain::routes::Utm {
                source: self.utm_source,
                medium: self.utm_medium,
                campaign: self.utm_campaign,
                term: self.utm_term,
                content: self.utm_content,
            },
            pass_query: self.pass_query,
            preview: crate::domain::routes::Preview {
                title: self.title,
                description: self.description,
                image: self.image,
            },
        })
    }
}

/// An RFC 3339 time of field `field`, or `code` naming what is wrong.
pub(super) fn rfc3339(field: &str, code: &'static str, text: &str) -> Result<DateTime<Utc>, Error> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            Error::invalid(
                code,
                format!("{field} must be an RFC 3339 time such as 2027-01-31T00:00:00Z: {e}"),
            )
        })
}

/// The media type of a request (`application/json` of `application/json; charset=utf-8`),
/// lowercased.
pub(super) fn media_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Reads a JSON body of one of the media types `accepted` (the first is named in the refusal),
/// of at most [`MAX_BODY_BYTES`], as `T`; one that does not parse as `T` is `invalid_json`.
pub(super) async fn read_json<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    accepted: &[&str],
) -> Result<T, ApiError> {
    read_json_up_to(headers, body, accepted, MAX_BODY_BYTES).await
}

/// [`read_json`] of a body of at most `limit` bytes.
pub(in crate::http) async fn read_json_up_to<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    accepted: &[&str],
    limit: usize,
) -> Result<T, ApiError> {
    let bytes = read_body_up_to(headers, body, accepted, limit).await?;
    serde_json::from_slice(&bytes).map_err(|e| {
        Error::bad_request("invalid_json", format!("invalid request body: {e}")).into()
    })
}

/// Reads a body of one of the media types `accepted` (the first is named in the refusal), of
/// at most `limit` bytes.
pub(in crate::http) async fn read_body_up_to(
    headers: &HeaderMap,
    body: Body,
    accepted: &[&str],
    limit: usize,
) -> Result<axum::body::Bytes, ApiError> {
    if !accepted.contains(&media_type(headers).as_str()) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!("send the request body as Content-Type: {}", accepted[0]),
        ));
    }
    axum::body::to_bytes(body, limit).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the request body exceeds {limit} bytes"),
        )
    })
}

/// The query of `GET /api/v1/links` and `GET /api/v1/links/export`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListParams {
    #[serde(default)]
    limit: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    tag: Option<String>,
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    created_after: Option<String>,
    #[serde(default)]
    created_before: Option<String>,
    #[serde(default)]
    q: Option<String>,
    #[serde(default)]
    domain: Option<String>,
    /// Export only: `ndjson` (the default) or `csv`.
    #[serde(default)]
    pub(super) format: Option<String>,
}

impl ListParams {
    /// The parameters of a request to `uri`.
    pub(super) fn parse(uri: &axum::http::Uri) -> Result<Self, Error> {
        axum::extract::Query::<Self>::try_from_uri(uri)
            .map(|q| q.0)
            .map_err(|e| {
                Error::bad_request(
                    "invalid_query_parameter",
                    format!("invalid query: {}", e.body_text()),
                )
            })
    }

    /// The list these parameters ask for.
    pub(super) fn into_input(self, rules: &CreateRules) -> Result<ListInput, Error> {
        let limit = self
            .limit
            .map(|text| {
                text.parse::<usize>().map_err(|_| {
                    Error::bad_request(
                        "invalid_limit",
                        format!("limit must be a number, not {}", echo(&text)),
                    )
                })
            })
            .transpose()?;
        let date = |field: &str, text: Option<String>| {
            text.map(|text| {
                DateTime::parse_from_rfc3339(&text)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|_| {
                        Error::bad_request(
                            "invalid_date",
                            format!("{field} must be an RFC 3339 time, not {}", echo(&text)),
                        )
                    })
            })
            .transpose()
        };
        Ok(ListInput {
            limit,
            cursor: self.cursor,
            tag: self.tag,
            host: self.host,
            state: self.state,
            created_after: date("created_after", self.created_after)?,
            created_before: date("created_before", self.created_before)?,
            q: self.q,
            domain: DomainFilter::of(self.domain.as_deref(), rules)?,
        })
    }
}

#[cfg(test)]
mod tests;
