//! Shlink's errors: RFC 7807 problem+json with Shlink's `type` URIs where Shlink has the case,
//! `about:blank` (titled with the HTTP status) where only this node has it (a missing scope, a
//! rate limit, an outage).

use crate::domain::Error;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

const ERROR_BASE: &str = "https://shlink.io/api/error/";

/// The most characters of a tag a problem shows (a valid tag has at most 64).
const SHOWN_TAG: usize = 100;

/// A problem+json answer.
#[derive(Debug, Clone)]
pub struct Problem {
    /// The HTTP status.
    pub status: StatusCode,
    kind: String,
    title: String,
    detail: String,
    extra: Map<String, Value>,
    retry_after: Option<u64>,
}

impl Problem {
    fn new(status: StatusCode, kind: &str, title: &str, detail: impl Into<String>) -> Self {
        let kind = if kind.is_empty() {
            "about:blank".to_string()
        } else {
            format!("{ERROR_BASE}{kind}")
        };
        Problem {
            status,
            kind,
            title: title.to_string(),
            detail: detail.into(),
            extra: Map::new(),
            retry_after: None,
        }
    }

    fn with(mut self, name: &str, value: Value) -> Self {
        self.extra.insert(name.to_string(), value);
        self
    }

    /// No `X-Api-Key`.
    pub fn missing_key() -> Self {
        Problem::new(
            StatusCode::UNAUTHORIZED,
            "missing-authentication",
            "Invalid authorization",
            "Expected one of the following authentication headers, [\"X-Api-Key\"], but none \
             were provided",
        )
    }

    /// A key the node does not take.
    pub fn invalid_key() -> Self {
        Problem::new(
            StatusCode::UNAUTHORIZED,
            "invalid-api-key",
            "Invalid API key",
            "Provided API key does not exist or is invalid.",
        )
    }

    /// Invalid input in `field`.
    /// A request body that could not be read whole: `413` past `limit` bytes (as the JSON API
    /// answers it), `408` when it did not arrive in time, else `400` naming the body.
    pub fn unread_body(unread: crate::http::body::Unread, limit: usize) -> Self {
        use crate::http::body::Unread;
        match unread {
            Unread::TooLarge => Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "",
                "Payload Too Large",
                format!("the body exceeds {limit} bytes"),
            ),
            Unread::TooSlow => Problem::new(
                StatusCode::REQUEST_TIMEOUT,
                "",
                "Request Timeout",
                "the body did not arrive in time",
            ),
            Unread::Broken => Problem::invalid_data("body", "the body could not be read"),
        }
    }

    pub fn invalid_data(field: &str, detail: impl Into<String>) -> Self {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid-data",
            "Invalid data",
            detail,
        )
        .with("invalidElements", json!([field]))
    }

    /// No short URL `code` (on `domain`) the caller sees. Both are the client's text, said
    /// back bounded and with unsafe characters escaped ([`crate::domain::text::bounded`]).
    pub fn short_url_not_found(code: &str, domain: Option<&str>) -> Self {
        let code = crate::domain::text::bounded(code, 64);
        let domain = domain.map(|d| crate::domain::text::bounded(d, 256));
        let domain = domain.as_deref();
        let detail = match domain {
            Some(domain) => {
                format!("No URL found with short code \"{code}\" for domain \"{domain}\"")
            }
            None => format!("No URL found with short code \"{code}\""),
        };
        Problem::new(
            StatusCode::NOT_FOUND,
            "short-url-not-found",
            "Short URL not found",
            detail,
        )
        .with("shortCode", json!(code))
        .with("domain", json!(domain))
    }

    /// A path the dialect does not serve.
    pub fn not_found() -> Self {
        Problem::new(
            StatusCode::NOT_FOUND,
            "not-found",
            "Not found",
            "Requested route does not exist: this node serves part of Shlink's API \
             (docs/compat.md)",
        )
    }

    /// More distinct tags than one answer lists.
    pub fn too_many_tags(most: usize) -> Self {
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "",
            "Too many tags",
            format!("the links carry more than {most} distinct tags, more than one answer lists"),
        )
    }

    /// A bare `status` (`about:blank`).
    pub fn of_status(status: StatusCode) -> Self {
        let title = status.canonical_reason().unwrap_or("Error");
        Problem::new(status, "", title, title)
    }

    /// No live link of the caller's tenant carries `tag` (shown cut to [`SHOWN_TAG`]
    /// characters).
    pub fn tag_not_found(tag: &str) -> Self {
        let tag = crate::domain::text::bounded(tag, SHOWN_TAG);
        Problem::new(
            StatusCode::NOT_FOUND,
            "tag-not-found",
            "Tag not found",
            format!("Tag with name \"{tag}\" could not be found"),
        )
        .with("tag", json!(tag))
    }

    /// A rename of `old` onto `new`, which links carry already.
    pub fn tag_conflict(old: &str, new: &str) -> Self {
        let (old, new) = (
            crate::domain::text::bounded(old, SHOWN_TAG),
            crate::domain::text::bounded(new, SHOWN_TAG),
        );
        Problem::new(
            StatusCode::CONFLICT,
            "tag-conflict",
            "Tag conflict",
            format!("You cannot rename tag {old} to {new}, because it already exists"),
        )
        .with("oldName", json!(old))
        .with("newName", json!(new))
    }

    /// A domain the caller has not.
    pub fn domain_not_found(host: &str) -> Self {
        Problem::new(
            StatusCode::NOT_FOUND,
            "domain-not-found",
            "Domain not found",
            format!("Domain with authority \"{host}\" could not be found"),
        )
        .with("authority", json!(host))
    }

    /// `error` as Shlink would answer its case.
    pub fn of(error: &Error) -> Self {
        match error {
            Error::Internal(detail) => {
                tracing::error!(detail = %crate::domain::text::Untrusted(detail), "internal error")
            }
            Error::Unavailable { message, .. } => {
                tracing::debug!(%message, "request refused: unavailable")
            }
            _ => {}
        }
        let message = error.public_message();
        let mut problem = match error {
            Error::Unauthenticated(_) => Problem::invalid_key(),
            Error::Invalid { code, .. } | Error::BadRequest { code, .. } => {
                Problem::invalid_data(field_of(code, &message), message)
            }
            Error::AliasTaken(slug) => Problem::new(
                StatusCode::BAD_REQUEST,
                "non-unique-slug",
                "Invalid custom slug",
                format!("Provided slug \"{slug}\" is already in use."),
            )
            .with("customSlug", json!(slug)),
            Error::NotFound(code) | Error::Gone(code) => Problem::short_url_not_found(code, None),
            other => {
                let status = match other {
                    Error::Forbidden(_) | Error::HostNotAllowed(_) => StatusCode::FORBIDDEN,
                    Error::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
                    Error::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
                    Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
                    _ => StatusCode::CONFLICT,
                };
                let title = status.canonical_reason().unwrap_or("Error");
                Problem::new(status, "", title, message)
            }
        };
        if let Error::RateLimited { retry_after } | Error::Unavailable { retry_after, .. } = error {
            problem.retry_after = Some(retry_after.as_secs().max(1));
        }
        problem
    }
}

/// The Shlink field a refusal of ours is about: by its code, and for a target refused in a
/// redirect rule or a device URL (whose message names where it was, `rules[0].url: ...` or
/// `ios: ...`), that field rather than `longUrl`.
fn field_of<'a>(code: &'a str, message: &str) -> &'a str {
    let target = matches!(
        code,
        "invalid_url" | "blocked_target" | "ip_host" | "invalid_host"
    );
    if target && (message.starts_with("rules[") || message.starts_with("variants[")) {
        return "redirectRules";
    }
    if target && (message.starts_with("ios:") || message.starts_with("android:")) {
        return "deviceLongUrls";
    }
    match code {
        "invalid_url" | "blocked_target" | "ip_host" | "invalid_host" => "longUrl",
        "invalid_alias" | "invalid_code" => "customSlug",
        "invalid_tag" => "tags",
        "invalid_expiry" => "validUntil",
        "invalid_max_visits" => "maxVisits",
        "invalid_domain" | "unknown_domain" => "domain",
        "invalid_preview" => "title",
        "invalid_app_target" => "deviceLongUrls",
        "invalid_rules" | "invalid_variants" => "redirectRules",
        "invalid_query" => "searchTerm",
        "invalid_limit" => "itemsPerPage",
        other => other,
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut body = Map::new();
        body.insert("type".into(), json!(self.kind));
        body.insert("title".into(), json!(self.title));
        body.insert("detail".into(), json!(self.detail));
        body.insert("status".into(), json!(self.status.as_u16()));
        body.extend(self.extra);
        let mut response = (
            self.status,
            [(header::CONTENT_TYPE, "application/problem+json")],
            Value::Object(body).to_string(),
        )
            .into_response();
        if let Some(seconds) = self.retry_after
            && let Ok(value) = seconds.to_string().parse()
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    /// A refused target is named by the field it was in: the long URL, a redirect rule's or a
    /// device URL.
    #[test]
    fn a_refused_target_names_the_field_it_was_in() {
        for (code, message, field) in [
            (
                "blocked_target",
                "links to evil.example are blocked here",
                "longUrl",
            ),
            (
                "blocked_target",
                "rules[0].url: links to evil.example are blocked here",
                "redirectRules",
            ),
            ("invalid_url", "variants[1].url: not a URL", "redirectRules"),
            (
                "blocked_target",
                "ios: links to evil.example are blocked here",
                "deviceLongUrls",
            ),
            ("invalid_url", "android: not a URL", "deviceLongUrls"),
            ("invalid_tag", "rules[0]: not this", "tags"),
        ] {
            assert_eq!(super::field_of(code, message), field, "{code} {message}");
        }
    }
}
