//! The JSON API under `/api/v1`. Each handler admits its request ([`crate::access`]), turns
//! the wire request into a domain request once (`wire`), and calls the link service. Creates,
//! reads and deletes are here; lists, edits, history and export in `manage` (an NDJSON export's
//! lines written by `ndjson`); bulk import in `import` (its body split into rows by `records`);
//! branded domains in `domains`; API keys made by tenant admins in `keys`; a tag renamed or deleted across a tenant's links in `tags`.

mod audit;
mod blocklist;
mod cells;
mod domains;
mod import;
mod keys;
mod manage;
mod records;
mod stats;
mod tags;
mod webhooks;
mod wire;

pub(super) use wire::{MAX_BODY_BYTES, read_json_up_to};

pub use audit::audit;
pub use blocklist::{block, blocklist, unblock};
pub use domains::{claim_domain, delete_domain, domain, domains, update_domain};
pub use import::import;
pub use keys::{api_keys, create_api_key, revoke_api_key};
pub use manage::{export, history, list, qr, update};
pub use stats::{link_stats, tenant_stats};
pub use tags::{delete_tag, rename_tag};
pub use webhooks::{
    delete_webhook, register_webhook, retry_webhook_deliveries, update_webhook, webhook_deliveries,
    webhooks,
};

use super::{ApiError, HttpState};
use crate::access::Operation;
use crate::domain::{Caller, CreateRequest, Error, ShortCode};
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use codespace::shape::CodeKind;
use std::sync::Arc;
use wire::LinkJson;

/// A streamed response body from `rx`; an empty chunk ends it with an error (the transfer
/// breaks off, so a client never mistakes a failed stream for a complete one).
fn bytes_stream(
    rx: tokio::sync::mpsc::Receiver<axum::body::Bytes>,
    deadline: Option<tokio::time::Instant>,
) -> impl futures::Stream<Item = Result<axum::body::Bytes, std::io::Error>> + Send + 'static {
    futures::stream::unfold(Some(rx), move |rx| async move {
        let mut rx = rx?;
        let chunk = match deadline {
            // A reader still taking the answer at its deadline has it broken off, whatever is
            // still queued: the producer gives up there too, so what it queued is not all.
            Some(deadline) if tokio::time::Instant::now() >= deadline => axum::body::Bytes::new(),
            Some(deadline) => match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(chunk) => chunk?,
                Err(_) => axum::body::Bytes::new(),
            },
            None => rx.recv().await?,
        };
        if !chunk.is_empty() {
            return Some((Ok(chunk), Some(rx)));
        }
        // One turn of the connection's task before the failure: it flushes the chunk before it
        // (an export's last line, saying why it ended) to the socket, which the failure would
        // otherwise drop with the connection.
        tokio::task::yield_now().await;
        Some((Err(std::io::Error::other("the stream failed midway")), None))
    })
}

async fn admit(
    state: &HttpState,
    headers: &HeaderMap,
    operation: Operation,
) -> Result<Caller, Error> {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if authorization.is_none()
        && let Some(mut caller) = super::signin::session_caller()
    {
        state.admission.admit(&caller, operation)?;
        caller.address = crate::audit::client();
        return Ok(caller);
    }
    let mut caller = state
        .admission
        .admit_request(authorization, operation)
        .await?;
    caller.address = crate::audit::client();
    Ok(caller)
}

/// The code a path names, parsed for this node (a segment that does not decode to UTF-8 is no
/// code either), on the branded domain the query's `domain` names (the default domain when it
/// names none or one of the node's own hosts): an alias is found only on the domain named.
fn code(
    state: &HttpState,
    code: Result<Path<String>, PathRejection>,
    uri: &axum::http::Uri,
) -> Result<ShortCode, Error> {
    let Ok(Path(text)) = code else {
        return Err(Error::invalid(
            "invalid_code",
            "the code in the path is not valid UTF-8",
        ));
    };
    let named = uri.query().and_then(|query| {
        url::form_urlencoded::parse(query.as_bytes())
            .find(|(name, _)| name == "domain")
            .map(|(_, value)| value.into_owned())
    });
    let domain = state.rules.domain(named.as_deref())?;
    let code = ShortCode::parse(&text, state.rules.code_length)?;
    // An empty `?domain=` names none, as the create's empty `domain` does.
    Ok(match named.filter(|n| !n.is_empty()) {
        Some(_) => code.on_named(domain),
        None => code.on(domain),
    })
}

/// The answer of `error` for a call that named `code`: a `404` for an alias asked for on the
/// default domain says how a branded domain's alias is named, since an alias is found only on
/// the domain named (the same alias may be on several).
fn named(code: &ShortCode) -> impl Fn(Error) -> ApiError + '_ {
    move |error| {
        let on_default = code.domain().is_none() && code.kind() == CodeKind::Alias;
        let hint = matches!(error, Error::NotFound(_)) && on_default;
        let answer = ApiError::from(error);
        if hint {
            answer.hinted(
                " on the default domain; an alias on a branded domain is named with \
                 ?domain=<its host>",
            )
        } else {
            answer
        }
    }
}

/// `POST /api/v1/links`: creates a link (201), or returns the existing one for a dedup hit or
/// an idempotent retry (200; to a key without `links:read`, only its code and short URL).
pub async fn create(
    State(state): State<Arc<HttpState>>,
    request: axum::extract::Request,
) -> Response {
    let started = std::time::Instant::now();
    // The request taken apart rather than a `HeaderMap` extractor, which clones the headers.
    let (parts, body) = request.into_parts();
    let (response, outcome) = match create_inner(&state, &parts.headers, body).await {
        Ok((response, true)) => (response, "created"),
        Ok((response, false)) => (response, "existing"),
        Err((error, outcome)) => (error.into_response(), outcome),
    };
    state.metrics.create(outcome, started.elapsed());
    response
}

/// A refused create: its response and its outcome label for the metrics.
type Failure = (ApiError, &'static str);

fn fail(error: Error) -> Failure {
    let outcome = error.outcome();
    (ApiError::from(error), outcome)
}

async fn create_inner(
    state: &HttpState,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Response, bool), Failure> {
    let caller = admit(state, headers, Operation::Create)
        .await
        .map_err(fail)?;
    let limit = crate::domain::link_body_limit(state.rules.max_url_length);
    let body: wire::CreateBody = wire::read_json_up_to(headers, body, &["application/json"], limit)
        .await
        .map_err(|e| (e, "invalid"))?;
    let input = body.into_input(headers).map_err(fail)?;
    let request = CreateRequest::parse(input, &state.rules, Utc::now()).map_err(fail)?;
    let (link, created) = state.links.create(&caller, request).await.map_err(fail)?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    // Where the link is read: its code as shown, and its branded domain, if any, as `?domain=`
    // (a branded alias is stored under `host/alias`, which no path names).
    let location = match &link.domain {
        Some(host) => format!("/api/v1/links/{}?domain={host}", link.shown_code()),
        None => format!("/api/v1/links/{}", link.shown_code()),
    };
    let response = (
        status,
        [(header::LOCATION, location)],
        axum::Json(wire::LinkAnswer::to(&caller, created, &state.public, &link)),
    )
        .into_response();
    Ok((response, created))
}

/// `GET /api/v1/links/{code}`: the link, including deleted and expired ones.
pub async fn get(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::Read).await?;
    let link = link_named(&state, &caller, path, &uri).await?;
    Ok(axum::Json(LinkJson::new(&state.public, &link)).into_response())
}

/// The link the path (and the query's `domain`) names, as `caller` may read it.
async fn link_named(
    state: &HttpState,
    caller: &Caller,
    path: Result<Path<String>, PathRejection>,
    uri: &axum::http::Uri,
) -> Result<crate::domain::Link, ApiError> {
    let code = code(state, path, uri)?;
    state.links.get(caller, &code).await.map_err(named(&code))
}

/// `DELETE /api/v1/links/{code}`: 204; the code answers 410 from then on.
pub async fn delete(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    let caller = admit(&state, &headers, Operation::Delete).await?;
    let code = code(&state, path, &uri)?;
    state
        .links
        .delete(&caller, &code)
        .await
        .map_err(named(&code))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /api/v1/me`: who the key is (tenant, name, scopes), for a client to offer what the key
/// may do, and the condition types a rule may use on this node (`country` only with a GeoIP
/// database), for a client to offer only those. Needs a valid key and no scope; reads nothing
/// from the store but what authentication reads (a key another node made, not yet held here).
pub async fn me(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let caller = match super::signin::session_caller() {
        Some(caller) if authorization.is_none() => caller,
        _ => {
            state
                .admission
                .authenticate(authorization, Operation::Read)
                .await?
        }
    };
    let scopes: Vec<&str> = caller.scopes.iter().map(|s| s.name()).collect();
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(serde_json::json!({
            "tenant": &*caller.tenant,
            "key": &*caller.key,
            "scopes": scopes,
            "rule_conditions": state.rules.condition_types(),
        })),
    )
        .into_response())
}

/// A method the route does not support.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this method is not supported here",
    )
}

/// An unknown API path.
pub async fn not_found() -> ApiError {
    not_found_error()
}

/// The answer of a path no route serves, for handlers that are not `async`.
pub fn not_found_error() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such API endpoint")
}

#[cfg(test)]
mod tests {
    use super::bytes_stream;
    use axum::body::Bytes;
    use futures::StreamExt;
    use tokio::time::{Duration, Instant};

    /// A stream past its deadline breaks off, chunks still queued or not; before it, the
    /// chunks pass and a closed channel ends it whole.
    #[tokio::test]
    async fn a_streamed_body_breaks_off_at_its_deadline_and_ends_whole_before_it() {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tx.send(Bytes::from_static(b"queued\n"))
            .await
            .expect("room");
        let past = Instant::now() - Duration::from_millis(1);
        let mut late = Box::pin(bytes_stream(rx, Some(past)));
        assert!(matches!(late.next().await, Some(Err(_))), "broken off");
        assert!(late.next().await.is_none());

        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tx.send(Bytes::from_static(b"line\n")).await.expect("room");
        drop(tx);
        let later = Instant::now() + Duration::from_secs(3600);
        let chunks: Vec<_> = bytes_stream(rx, Some(later)).collect().await;
        assert_eq!(chunks.len(), 1, "{chunks:?}");
        assert_eq!(chunks[0].as_ref().expect("a chunk").as_ref(), b"line\n");
    }
}
