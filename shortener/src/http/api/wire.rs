//! The JSON API's wire types, and their one conversion to and from domain types.

use super::super::ApiError;
use crate::domain::{CreateInput, Error, Link, PublicBase};
use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

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
}

impl CreateBody {
    /// The create this body and its request's headers (`Idempotency-Key`) ask for.
    pub(super) fn into_input(self, headers: &HeaderMap) -> Result<CreateInput, Error> {
        let expires_at = self
            .expires_at
            .as_deref()
            .map(|text| {
                DateTime::parse_from_rfc3339(text)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|e| {
                        Error::invalid(
                            "invalid_expiry",
                            format!("expires_at must be an RFC 3339 time: {e}"),
                        )
                    })
            })
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
            private: self.private,
            idempotency_key,
        })
    }
}

/// Reads a JSON body of at most [`MAX_BODY_BYTES`].
pub(super) async fn read_json_body(
    headers: &HeaderMap,
    body: Body,
) -> Result<CreateBody, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the request body as Content-Type: application/json",
        ));
    }
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("the request body exceeds {MAX_BODY_BYTES} bytes"),
            )
        })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        Error::bad_request("invalid_json", format!("invalid request body: {e}")).into()
    })
}

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A link as the API shows it (serialized straight from the link, no intermediate JSON tree).
#[derive(Serialize)]
pub(super) struct LinkJson<'a> {
    code: &'a str,
    short_url: String,
    url: &'a str,
    created_at: String,
    expires_at: Option<String>,
    deleted_at: Option<String>,
    clicks: ClicksJson,
}

#[derive(Serialize)]
struct ClicksJson {
    human: u64,
    head: u64,
    bot: u64,
}

impl<'a> LinkJson<'a> {
    /// `link` as shown under `public`.
    pub(super) fn new(public: &PublicBase, link: &'a Link) -> Self {
        LinkJson {
            code: &link.code,
            short_url: public.short_url(&link.code),
            url: &link.url,
            created_at: time(link.created_at),
            expires_at: link.expires_at.map(time),
            deleted_at: link.deleted_at.map(time),
            clicks: ClicksJson {
                human: link.clicks.human,
                head: link.clicks.head,
                bot: link.clicks.bot,
            },
        }
    }
}
