//! `GET|HEAD /{code}`: the redirect edge.
//!
//! The [`Resolver`](crate::redirects::Resolver) says where a code goes (the redirect service,
//! [`crate::redirects`]); the handlers here turn that into the response, count the click and
//! the metrics, and spend the client's 404 budget on unknown codes.

mod protect;

use super::HttpState;
use crate::redirects::{Resolution, Target};
use crate::visits::Visit;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

fn no_store(status: StatusCode, body: &'static str) -> Response {
    (
        status,
        [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        body,
    )
        .into_response()
}

/// The code a request for the redirect edge names, when it can be answered without the router:
/// `GET` or `HEAD` of one non-empty path segment with nothing to percent-decode. Anything else
/// (other methods, `/api/...`, several segments, `%`-escapes) goes through the router, whose
/// `/{code}` route ends in the same [`answer`].
pub fn direct_code<B>(request: &hyper::Request<B>) -> Option<&str> {
    let method = request.method();
    if method != Method::GET && method != Method::HEAD {
        return None;
    }
    let code = request.uri().path().strip_prefix('/')?;
    let plain = !code.is_empty() && !code.bytes().any(|b| b == b'/' || b == b'%');
    // A fixed route's own path (`/console`, `/robots.txt`) goes to the router, never to the
    // code lookup.
    (plain && !super::FIXED_SEGMENTS.contains(&code) && !super::FIXED_FILES.contains(&code))
        .then_some(code)
}

/// `GET|HEAD /{code}` through the router (percent-encoded segments; plain ones are dispatched
/// directly by the accept loop, see [`direct_code`]).
pub async fn redirect(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    code: Result<Path<String>, PathRejection>,
    // The request itself rather than `HeaderMap` and `Method` extractors, which would clone the
    // headers on every redirect.
    request: axum::extract::Request,
) -> Response {
    let code = code.map(|Path(code)| code).unwrap_or_default();
    answer(&state, peer, &code, request.method(), request.headers()).await
}

/// Redirects a code to its URL; 404 (not cached) for unknown codes, 410 for deleted, disabled
/// or expired links and for links past their visit limit, 429 for clients that exceed their
/// 404 budget (before any lookup, for the `Retry-After` they are told). Paths that cannot be
/// codes are answered without touching the store. Clicks are counted in memory and flushed in
/// batches.
///
/// A redirect gets a server span only when tracing is on and the sampler picks it
/// (`otel::http::edge_span`); otherwise tracing costs it one flag read.
pub fn answer<'a>(
    state: &'a HttpState,
    peer: SocketAddr,
    code: &'a str,
    method: &'a Method,
    headers: &'a HeaderMap,
) -> impl Future<Output = Response> + Send + 'a {
    // Not an `async fn`: it would hold the answer's future twice (see `otel::http::answer_in`).
    let span = otel::http::edge_span(method, headers);
    otel::http::answer_in(span, answer_untraced(state, peer, code, method, headers))
}

async fn answer_untraced(
    state: &HttpState,
    peer: SocketAddr,
    code: &str,
    method: &Method,
    headers: &HeaderMap,
) -> Response {
    let started = Instant::now();
    if let Some(refused) = refused_before_lookup(state, peer, headers, started) {
        return refused;
    }
    let resolution = state.resolver.resolve(code, started).await;
    respond(state, peer, code, method, headers, resolution, started)
}

/// [`answer`] without waiting: `Some` when the answer is known without the store (a cached
/// code, or a path that cannot be a code), `None` when the store must be asked.
pub fn answer_cached(
    state: &HttpState,
    peer: SocketAddr,
    code: &str,
    method: &Method,
    headers: &HeaderMap,
) -> Option<Response> {
    let started = Instant::now();
    if let Some(refused) = refused_before_lookup(state, peer, headers, started) {
        return Some(refused);
    }
    let resolution = state.resolver.resolve_cached(code, started)?;
    let response = respond(state, peer, code, method, headers, Ok(resolution), started);
    // Asked only once the answer is known here, so that a request that goes on to [`answer`]
    // is not offered to the sampler twice.
    if let Some(span) = otel::http::edge_span(method, headers) {
        otel::record_http_status(&span, response.status().as_u16(), false);
    }
    Some(response)
}

/// The response to a resolved redirect request, counted in the click counts and the metrics.
fn respond(
    state: &HttpState,
    peer: SocketAddr,
    code: &str,
    method: &Method,
    headers: &HeaderMap,
    resolution: Result<Resolution, crate::domain::Error>,
    started: Instant,
) -> Response {
    let (response, outcome) = match resolution {
        // A protected link's target is never answered to a GET or HEAD: they get the form.
        Ok(Resolution::Redirect(target)) if target.password.is_some() => {
            protect::locked(code, method)
        }
        Ok(Resolution::Redirect(target)) => {
            if count_visit(state, peer, code, method == Method::HEAD, headers, &target) {
                let mut response = Response::new(Body::empty());
                *response.status_mut() = state.redirect_status;
                response
                    .headers_mut()
                    .insert(header::LOCATION, target.location);
                (response, "redirect")
            } else {
                (gone(), "gone")
            }
        }
        Ok(Resolution::NotFound) => (not_found(state, peer, headers), "not_found"),
        Ok(Resolution::Gone) => (gone(), "gone"),
        Ok(Resolution::Blocked) => (
            no_store(state.blocked_status, "this link has been disabled\n"),
            "blocked",
        ),
        Err(error) => (super::ApiError::from(error).into_response(), "error"),
    };
    state
        .metrics
        .redirect(response.status().as_u16(), outcome, started.elapsed());
    response
}

/// Whether `target`'s visit limit admits the visit this request makes, counting the visit if
/// so: the one place the redirect and the password unlock count a visit. The client address
/// is found only when the visits will look up its country.
fn count_visit(
    state: &HttpState,
    peer: SocketAddr,
    code: &str,
    head: bool,
    headers: &HeaderMap,
    target: &Target,
) -> bool {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let visit = Visit {
        head,
        user_agent: text(header::USER_AGENT),
        referrer: text(header::REFERER),
        client: (state.visits.locates_clients()).then(|| state.client_policy.client(peer, headers)),
    }
    .classify();
    if !target.admits(visit.kind()) {
        return false;
    }
    state.visits.record(code, &target.tenant, &visit);
    true
}

fn gone() -> Response {
    no_store(StatusCode::GONE, "this link is no longer available\n")
}

/// `POST /{code}`: a protected link's password form, answered with its redirect for the right
/// password (see `protect`).
pub async fn unlock(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    code: Result<Path<String>, PathRejection>,
    request: axum::extract::Request,
) -> Response {
    let started = Instant::now();
    let code = code.map(|Path(code)| code).unwrap_or_default();
    let (parts, body) = request.into_parts();
    if let Some(refused) = refused_before_lookup(&state, peer, &parts.headers, started) {
        return refused;
    }
    let (response, outcome) = match state.resolver.resolve(&code, started).await {
        Ok(Resolution::Redirect(target)) => {
            protect::unlock(&state, peer, &code, &parts.headers, body, target).await
        }
        Ok(Resolution::NotFound) => (not_found(&state, peer, &parts.headers), "not_found"),
        Ok(Resolution::Gone) => (gone(), "gone"),
        Ok(Resolution::Blocked) => (
            no_store(state.blocked_status, "this link has been disabled\n"),
            "blocked",
        ),
        Err(error) => (super::ApiError::from(error).into_response(), "error"),
    };
    state
        .metrics
        .redirect(response.status().as_u16(), outcome, started.elapsed());
    response
}

/// A 404, or a 429 once the client has spent its 404 budget (code enumeration).
pub(crate) fn not_found(state: &HttpState, peer: SocketAddr, headers: &HeaderMap) -> Response {
    spend_404_token(state, peer, headers)
        .unwrap_or_else(|| no_store(StatusCode::NOT_FOUND, "not found\n"))
}

/// Takes one token of the client's 404 budget for a lookup that found nothing; `Some` is the
/// 429 once the budget is spent.
pub(crate) fn spend_404_token(
    state: &HttpState,
    peer: SocketAddr,
    headers: &HeaderMap,
) -> Option<Response> {
    let client = state.client_policy.client(peer, headers);
    let retry_after = state.limits.not_found(client).err()?;
    Some(too_many_unknown(state, retry_after))
}

/// The 429 of a client past its 404 budget, before any lookup is made for it (see
/// [`refused_before_lookup`]); `None` for every other client.
pub(crate) fn past_404_budget(
    state: &HttpState,
    peer: SocketAddr,
    headers: &HeaderMap,
) -> Option<Response> {
    if !state.limits.any_404_budget_spent() {
        return None;
    }
    let client = state.client_policy.client(peer, headers);
    let retry_after = state.limits.refused_before_lookup(client)?;
    Some(too_many_unknown(state, retry_after))
}

/// A client past its 404 budget is answered 429 before the cache or the store is asked, for the
/// `Retry-After` it was told: a scanner costs the node no lookup once it is refused. While nobody's
/// budget is spent this is one atomic read; the client address is found only otherwise.
fn refused_before_lookup(
    state: &HttpState,
    peer: SocketAddr,
    headers: &HeaderMap,
    started: Instant,
) -> Option<Response> {
    let response = past_404_budget(state, peer, headers)?;
    state
        .metrics
        .redirect(response.status().as_u16(), "not_found", started.elapsed());
    Some(response)
}

fn too_many_unknown(state: &HttpState, retry_after: std::time::Duration) -> Response {
    state.metrics.rate_limited("not_found");
    let seconds = retry_after.as_secs().max(1);
    (
        StatusCode::TOO_MANY_REQUESTS,
        [
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (header::RETRY_AFTER, HeaderValue::from(seconds)),
        ],
        "too many unknown codes; slow down\n",
    )
        .into_response()
}

/// Anything that is not a single path segment: not a code.
pub async fn fallback(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    not_found(&state, peer, &headers)
}
