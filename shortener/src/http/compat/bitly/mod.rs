//! Bitly's API v4 under `/v4`: `POST /v4/shorten`, `POST /v4/expand`, `GET
//! /v4/bitlinks/{id}` and its `/clicks` and `/clicks/summary`, and the caller's user and group
//! (`GET /v4/user`, `/v4/groups`, `/v4/groups/{guid}`: its key and its tenant), answered in
//! Bitly's JSON shapes (`links`, `clicks`, `account`), refusals in Bitly's error shape
//! (`Failure`). The caller sends one
//! of our API keys as `Authorization: Bearer <key>`, as Bitly's clients send their token; see
//! docs/compat.md for what is served.

mod account;
mod clicks;
mod links;

use super::{authenticate, outcome};
use crate::access::Operation;
use crate::domain::{Caller, Error};
use crate::http::HttpState;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;

/// The API's first path segment (a reserved word: no code can take it).
pub const PATH_WORD: &str = "v4";
/// The dialect's metric label.
const DIALECT: &str = "bitly";

/// What a request asks for: the metric's `action` label (a fixed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Shorten,
    Expand,
    Bitlink,
    Clicks,
    ClicksSummary,
    /// `GET /v4/user`.
    User,
    /// `GET /v4/groups` and `/v4/groups/{guid}`.
    Groups,
    Unknown,
}

impl Action {
    fn name(self) -> &'static str {
        match self {
            Action::Shorten => "shorten",
            Action::Expand => "expand",
            Action::Bitlink => "bitlink",
            Action::Clicks => "clicks",
            Action::ClicksSummary => "clicks_summary",
            Action::User => "user",
            Action::Groups => "groups",
            Action::Unknown => "unknown",
        }
    }

    /// The JSON API operation the action amounts to (its scope and rate).
    fn operation(self) -> Operation {
        match self {
            Action::Shorten => Operation::Create,
            Action::Clicks | Action::ClicksSummary => Operation::Stats,
            Action::Expand | Action::Bitlink | Action::Unknown => Operation::Read,
            // Counted as reads; any valid key may ask who it is (`scoped`).
            Action::User | Action::Groups => Operation::Read,
        }
    }

    /// Whether the action needs its operation's scope and rate: who the caller is (its user
    /// and group) is asked by tools before anything else, with whatever key they hold, so a
    /// `links:create` key can find the `group_guid` it shortens with.
    fn scoped(self) -> bool {
        !matches!(self, Action::User | Action::Groups)
    }

    /// Bitly's `resource` of the action's errors.
    fn resource(self) -> &'static str {
        match self {
            Action::Shorten | Action::Expand | Action::Bitlink => "bitlinks",
            Action::Clicks | Action::ClicksSummary => "bitlinks/clicks",
            Action::User => "user",
            Action::Groups => "groups",
            Action::Unknown => "",
        }
    }
}

/// A refused request in Bitly's error shape: `message` (Bitly's code, such as
/// `INVALID_ARG_LONG_URL`), the field at fault with its `error_code`, and a description.
#[derive(Debug)]
struct Failure {
    status: StatusCode,
    message: &'static str,
    field: Option<(&'static str, &'static str)>,
    description: String,
    retry_after: Option<u64>,
    outcome: &'static str,
}

impl Failure {
    /// A `400` for `field` (`error_code` `invalid`, or `missing` when absent).
    fn arg(message: &'static str, field: &'static str, missing: bool, text: String) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message,
            field: Some((field, if missing { "missing" } else { "invalid" })),
            description: text,
            retry_after: None,
            outcome: "invalid",
        }
    }

    /// A body that could not be read whole: `413` past `limit` bytes (as the JSON API answers
    /// it), `408` when it did not arrive in time, else the `400` of `message` for `field`.
    fn unread(
        unread: crate::http::body::Unread,
        limit: usize,
        message: &'static str,
        field: &'static str,
    ) -> Self {
        use crate::http::body::Unread;
        let (status, code, description) = match unread {
            Unread::TooLarge => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "PAYLOAD_TOO_LARGE",
                format!("the request body exceeds {limit} bytes"),
            ),
            Unread::TooSlow => (
                StatusCode::REQUEST_TIMEOUT,
                "REQUEST_TIMEOUT",
                "the request body did not arrive in time".to_string(),
            ),
            Unread::Broken => {
                let text = "the request body could not be read".to_string();
                return Self::arg(message, field, false, text);
            }
        };
        Self {
            status,
            message: code,
            field: None,
            description,
            retry_after: None,
            outcome: "invalid",
        }
    }

    /// A refusal or fault of the services, as Bitly answers the like; `field` names the
    /// argument an invalid value came from.
    fn of(error: &Error, arg: Option<(&'static str, &'static str)>) -> Self {
        let (status, message) = match error {
            Error::Unauthenticated(_) => (StatusCode::UNAUTHORIZED, "UNAUTHORIZED"),
            Error::Forbidden(_) | Error::HostNotAllowed(_) => (StatusCode::FORBIDDEN, "FORBIDDEN"),
            Error::NotFound(_) | Error::Gone(_) => (StatusCode::NOT_FOUND, "NOT_FOUND"),
            Error::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "RATE_LIMIT_EXCEEDED"),
            Error::Unavailable { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "TEMPORARILY_UNAVAILABLE")
            }
            Error::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL_ERROR"),
            Error::AliasTaken(_) | Error::DomainTaken(_) | Error::Conflict { .. } => {
                (StatusCode::CONFLICT, "ALREADY_EXISTS")
            }
            Error::BadRequest { .. } | Error::Invalid { .. } | Error::IdempotencyMismatch => {
                (StatusCode::BAD_REQUEST, arg.map_or("INVALID_ARG", |a| a.0))
            }
        };
        let field = match status {
            StatusCode::BAD_REQUEST => arg.map(|(_, field)| (field, "invalid")),
            _ => None,
        };
        let retry_after = match error {
            Error::RateLimited { retry_after } | Error::Unavailable { retry_after, .. } => {
                Some(retry_after.as_secs().max(1))
            }
            _ => None,
        };
        Self {
            status,
            message,
            field,
            description: error.public_message(),
            retry_after,
            outcome: outcome(error),
        }
    }

    fn render(self, action: Action) -> Response {
        let errors: Vec<Value> = self
            .field
            .iter()
            .map(|(field, code)| json!({ "field": field, "error_code": code }))
            .collect();
        let mut body = json!({
            "message": self.message,
            "description": self.description,
            "resource": action.resource(),
        });
        if !errors.is_empty() {
            body["errors"] = Value::Array(errors);
        }
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// A request's result: the status and body of a success, or a refusal.
type Outcome = Result<(StatusCode, Value), Failure>;

/// The caller `headers` authenticate (`Authorization: Bearer <key>`, checked as on
/// `/api/v1`), admitted for `action`'s operation when it is [`Action::scoped`]: no or an
/// unknown key is `401`, a key without the scope `403`, past its rate `429`.
async fn admit(state: &HttpState, headers: &HeaderMap, action: Action) -> Result<Caller, Failure> {
    let operation = action.operation();
    let key = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|k| !k.is_empty());
    let Some(key) = key else {
        state
            .admission
            .authenticate(None, operation)
            .await
            .map_err(|e| Failure::of(&e, None))?;
        return Err(Failure::of(
            &Error::Unauthenticated(crate::domain::NoKey::Missing),
            None,
        ));
    };
    let caller = authenticate(state, key, operation)
        .await
        .map_err(|e| Failure::of(&e, None))?;
    if action.scoped() {
        state
            .admission
            .admit(&caller, operation)
            .map_err(|e| Failure::of(&e, None))?;
    }
    Ok(caller)
}

/// Answers `action`: admits the caller, runs `run`, counts the request and renders the answer.
async fn answer<F>(state: &HttpState, headers: &HeaderMap, action: Action, run: F) -> Response
where
    F: AsyncFnOnce(&Caller) -> Outcome,
{
    let result = match admit(state, headers, action).await {
        Ok(caller) => run(&caller).await,
        Err(refused) => Err(refused),
    };
    let label = result.as_ref().map_or_else(|f| f.outcome, |_| "ok");
    state.metrics.compat_request(DIALECT, action.name(), label);
    match result {
        Ok((status, body)) => {
            let mut response = (status, axum::Json(body)).into_response();
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(failure) => failure.render(action),
    }
}

/// `POST /v4/shorten`.
pub async fn shorten(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    answer(&state, &headers, Action::Shorten, async |caller| {
        links::shorten(&state, caller, body).await
    })
    .await
}

/// `POST /v4/expand`.
pub async fn expand(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    answer(&state, &headers, Action::Expand, async |caller| {
        links::expand(&state, caller, body).await
    })
    .await
}

/// `GET /v4/bitlinks/{id}`, `.../clicks` and `.../clicks/summary` (`id` is `host/code`, its
/// `/` as is or as `%2F`).
pub async fn bitlinks(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    rest: Result<Path<String>, axum::extract::rejection::PathRejection>,
    uri: Uri,
) -> Response {
    // A segment that does not decode to UTF-8 names no bitlink: an empty id, refused after the
    // key check in Bitly's shape rather than with the router's plain-text 400.
    let rest = rest.map(|Path(rest)| rest).unwrap_or_default();
    let (action, id) = if let Some(id) = rest.strip_suffix("/clicks/summary") {
        (Action::ClicksSummary, id)
    } else if let Some(id) = rest.strip_suffix("/clicks") {
        (Action::Clicks, id)
    } else {
        (Action::Bitlink, rest.as_str())
    };
    // `host/code/countries` and Bitly's other sub-resources of a bitlink are not served: a code
    // never holds a `/`, so an id whose code would is such a path, not a malformed id.
    if links::split_id(&state, id).is_some_and(|(_, code)| code.contains('/')) {
        return unknown(State(state)).await;
    }
    answer(&state, &headers, action, async |caller| match action {
        Action::Bitlink => links::bitlink(&state, caller, id).await,
        Action::Clicks => clicks::clicks(&state, caller, id, uri.query(), false).await,
        _ => clicks::clicks(&state, caller, id, uri.query(), true).await,
    })
    .await
}

/// `GET /v4/user`: the caller's key as Bitly's user, its tenant as the default group.
pub async fn user(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    answer(&state, &headers, Action::User, async |caller| {
        Ok((StatusCode::OK, account::user(caller)))
    })
    .await
}

/// `GET /v4/groups` (the caller's tenant, its one group) and `GET /v4/groups/{guid}`.
pub async fn groups(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    guid: Option<Path<String>>,
) -> Response {
    answer(
        &state,
        &headers,
        Action::Groups,
        async |caller| match guid {
            None => Ok((StatusCode::OK, account::groups(&state, caller))),
            Some(Path(guid)) => account::group(&state, caller, &guid),
        },
    )
    .await
}

/// Any other path under `/v4`: Bitly's `404`.
pub async fn unknown(State(state): State<Arc<HttpState>>) -> Response {
    refuse(
        &state,
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
        "this path of Bitly's API is not served (docs/compat.md)",
    )
}

/// A served path with another method: Bitly's `405`.
pub async fn method_not_allowed(State(state): State<Arc<HttpState>>) -> Response {
    refuse(
        &state,
        StatusCode::METHOD_NOT_ALLOWED,
        "METHOD_NOT_ALLOWED",
        "POST /v4/shorten and /v4/expand, GET /v4/bitlinks/..., /v4/user and /v4/groups (docs/compat.md)",
    )
}

fn refuse(
    state: &HttpState,
    status: StatusCode,
    message: &'static str,
    description: &str,
) -> Response {
    let outcome = if status == StatusCode::NOT_FOUND {
        "not_found"
    } else {
        "invalid"
    };
    state
        .metrics
        .compat_request(DIALECT, Action::Unknown.name(), outcome);
    Failure {
        status,
        message,
        field: None,
        description: description.into(),
        retry_after: None,
        outcome,
    }
    .render(Action::Unknown)
}
