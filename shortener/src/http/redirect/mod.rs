//! `GET|HEAD /{code}`: the redirect edge.
//!
//! The [`Resolver`](crate::redirects::Resolver) says where a code goes (the redirect service,
//! [`crate::redirects`]); the handlers here turn that into the response, count the click and
//! the metrics, and spend the client's 404 budget on unknown codes.
//!
//! One file of about 670 lines on purpose: it is the one path every redirect takes, read top
//! to bottom in the order a request meets it (refusal, site, lookup, routing, counting,
//! answer, metrics), and each step is a small function the next calls. The rare answers that
//! stand apart (the password form, the preview page) are modules of their own.

mod preview;
mod protect;

use super::HttpState;
use super::site::{self, Site};
use crate::domain::Domain;
use crate::limits::Paid;
use crate::redirects::Key;
use crate::redirects::routing::Visitor;
use crate::redirects::{Resolution, Target};
use crate::visits::Visit;
use crate::visits::classify::AgentProfile;
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
    answer(
        &state,
        peer,
        &code,
        request.method(),
        request.uri(),
        request.headers(),
    )
    .await
}

/// Redirects a code to its URL on the request's domain ([`Site`]); 404 (not cached) for
/// unknown codes, 410 for deleted, disabled or expired links and for links past their visit
/// limit (on a branded domain, a redirect to its `not_found_url` or `expired_url` instead when
/// it has one), 429 for clients that exceed their 404 budget (before any lookup, for the
/// `Retry-After` they are told). Paths that cannot be codes are answered without touching the
/// store. Clicks are counted in memory and flushed in batches.
///
/// A redirect gets a server span only when tracing is on and the sampler picks it
/// (`otel::http::edge_span`); otherwise tracing costs it one flag read.
pub fn answer<'a>(
    state: &'a HttpState,
    peer: SocketAddr,
    code: &'a str,
    method: &'a Method,
    uri: &'a axum::http::Uri,
    headers: &'a HeaderMap,
) -> impl Future<Output = Response> + Send + 'a {
    // Not an `async fn`: it would hold the answer's future twice (see `otel::http::answer_in`).
    let span = otel::http::edge_span(method, headers);
    otel::http::answer_in(
        span,
        answer_untraced(state, peer, code, method, uri, headers),
    )
}

async fn answer_untraced(
    state: &HttpState,
    peer: SocketAddr,
    code: &str,
    method: &Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
) -> Response {
    let started = Instant::now();
    let paid = match refused_before_lookup(state, peer, headers, started, true) {
        Door::Open(paid) => paid,
        Door::Refused(refused) => return refused,
    };
    let site = match site::load(state, peer, uri, headers, started).await {
        Ok(site) => site,
        Err(refused) => return refused,
    };
    let request = Asked {
        peer,
        code,
        method,
        headers,
        query: uri.query(),
        site: &site,
    };
    let Some(key) = lookup_key(state, &site, code) else {
        return respond(
            state,
            &request,
            code,
            Ok(Resolution::NotFound),
            (started, paid),
        );
    };
    let resolution = state.resolver.resolve(site.domain(), &key, started).await;
    respond(state, &request, &key.key, resolution, (started, paid))
}

/// The key `code` is looked up under on `site`; `None` when nothing can be found there (not a
/// code, or a closed site).
fn lookup_key<'a>(state: &HttpState, site: &Site, code: &'a str) -> Option<Key<'a>> {
    match site {
        Site::Closed => None,
        _ => state.resolver.key(site.domain(), code),
    }
}

/// [`answer`] without waiting: `Some` when the answer is known without the store (a cached
/// code on a known host, or a path that cannot be a code), `None` when the store must be asked.
pub fn answer_cached<B>(
    state: &HttpState,
    peer: SocketAddr,
    code: &str,
    request: &hyper::Request<B>,
) -> Option<Response> {
    let (method, headers) = (request.method(), request.headers());
    let started = Instant::now();
    if let Door::Refused(refused) = refused_before_lookup(state, peer, headers, started, false) {
        return Some(refused);
    }
    let site = site::cached(state, peer, request.uri(), headers, started)?;
    let asked = Asked {
        peer,
        code,
        method,
        headers,
        query: request.uri().query(),
        site: &site,
    };
    let response = match lookup_key(state, &site, code) {
        None => respond(
            state,
            &asked,
            code,
            Ok(Resolution::NotFound),
            (started, None),
        ),
        Some(key) => {
            let resolution = state
                .resolver
                .resolve_cached(site.domain(), &key, started)?;
            respond(state, &asked, &key.key, Ok(resolution), (started, None))
        }
    };
    // Asked only once the answer is known here, so that a request that goes on to [`answer`]
    // is not offered to the sampler twice.
    if let Some(span) = otel::http::edge_span(method, headers) {
        otel::record_http_status(&span, response.status().as_u16(), false);
    }
    Some(response)
}

/// A redirect request: who asked for which code, how, and on which site.
struct Asked<'a> {
    peer: SocketAddr,
    code: &'a str,
    method: &'a Method,
    headers: &'a HeaderMap,
    /// The short URL's query (read by `query` rule conditions only).
    query: Option<&'a str>,
    site: &'a Site,
}

/// The response to a resolved redirect request for the link of `key`, counted in the click
/// counts and the metrics; `paid` is the 404 token its client paid at the door, if it did
/// (spent by a miss, else held for its next request).
fn respond(
    state: &HttpState,
    asked: &Asked<'_>,
    key: &str,
    resolution: Result<Resolution, crate::domain::Error>,
    (started, paid): (Instant, Option<Paid<'_>>),
) -> Response {
    let (peer, headers, domain) = (asked.peer, asked.headers, asked.site.domain());
    let paid = settled(paid, &resolution);
    let (response, outcome) = match resolution {
        // A protected link's target is never answered to a GET or HEAD: they get the form.
        Ok(Resolution::Redirect(target)) if target.password().is_some() => {
            protect::locked(asked.code, asked.method)
        }
        Ok(Resolution::Redirect(target))
            if target.routing().is_some_and(|r| r.preview().is_some())
                && preview::is_preview_crawler(headers) =>
        {
            let seen = Seen::of(asked.method == Method::HEAD, headers);
            // A link past its visit limit answers as gone to crawlers too.
            if !count_visit(state, peer, key, seen, headers, &target) {
                return finish(state, asked, (gone_on(domain), "gone"), started);
            }
            let mut short_url = String::new();
            let _ = state.public.write_link_url(
                &mut short_url,
                domain.map(|d| d.host.as_str()),
                asked.code,
            );
            let preview = target.routing().and_then(|r| r.preview());
            (
                preview::page(preview.unwrap_or(&Default::default()), &short_url),
                "preview",
            )
        }
        Ok(Resolution::Redirect(mut target)) => {
            let mut seen = Seen::of(asked.method == Method::HEAD, headers);
            let request = (peer, headers, asked.query);
            let routed = route(state, request, key, asked.code, &mut target, &mut seen);
            if count_visit(state, peer, key, seen, headers, &target) {
                let transient = target.transient();
                (
                    redirect_to(state, domain, target.location, routed, transient),
                    "redirect",
                )
            } else {
                (gone_on(domain), "gone")
            }
        }
        Ok(Resolution::NotFound) => (
            not_found_on(state, (peer, headers), domain, paid),
            "not_found",
        ),
        Ok(Resolution::Gone) => (gone_on(domain), "gone"),
        Ok(Resolution::Blocked) => (
            no_store(state.blocked_status, "this link has been disabled\n"),
            "blocked",
        ),
        Err(error) => (super::ApiError::from(error).into_response(), "error"),
    };
    finish(state, asked, (response, outcome), started)
}

/// The token a client on probation paid at the door, settled by what its lookup found: handed
/// back when the lookup found a link (a redirect, a gone or blocked link), kept for the 404 of
/// a miss; a store error spends it (the lookup was made), as does a request dropped before
/// this point.
fn settled<'s>(
    paid: Option<Paid<'s>>,
    resolution: &Result<Resolution, crate::domain::Error>,
) -> Option<Paid<'s>> {
    let paid = match resolution {
        Ok(Resolution::NotFound) => return paid,
        _ => paid?,
    };
    match resolution {
        Ok(_) => paid.refund(),
        Err(_) => paid.spend(),
    }
    None
}

/// `response` (of `outcome`) counted in the metrics: the node's, and its domain's.
fn finish(
    state: &HttpState,
    asked: &Asked<'_>,
    (response, outcome): (Response, &'static str),
    started: Instant,
) -> Response {
    state
        .metrics
        .redirect(response.status().as_u16(), outcome, started.elapsed());
    if let Some(domain) = asked.site.domain()
        && state.domain_metrics.any()
    {
        state.domain_metrics.count(&domain.host, outcome);
    }
    response
}

/// What a routed link's answer must say besides its `Location`.
struct Routed {
    /// The answer depends on who asks.
    personal: bool,
    /// The cookie that keeps a visitor just assigned to a variant on it.
    cookie: Option<HeaderValue>,
}

/// What the edge reads of a visit once, for its routing and its counting alike.
#[derive(Debug, Clone, Copy)]
pub(super) struct Seen<'a> {
    /// A HEAD request.
    pub(super) head: bool,
    /// The `User-Agent`, if it is text.
    pub(super) agent: Option<&'a str>,
    /// The agent's profile, once the routing has read it.
    pub(super) profile: Option<AgentProfile>,
}

impl<'a> Seen<'a> {
    /// A visit with `headers`, a HEAD request if `head`.
    pub(super) fn of(head: bool, headers: &'a HeaderMap) -> Self {
        Self {
            head,
            agent: headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok()),
            profile: None,
        }
    }
}

/// Replaces `target`'s location (and route) by the one its routing chooses for this request
/// (the link of `key`, asked for as `/{code}`), if it routes; what the answer must say (`None`:
/// a plain link). The user agent's profile, if the choice read it, is kept in `seen`.
fn route(
    state: &HttpState,
    request: (SocketAddr, &HeaderMap, Option<&str>),
    key: &str,
    code: &str,
    target: &mut Target,
    seen: &mut Seen<'_>,
) -> Option<Routed> {
    let (peer, headers, query) = request;
    let routing = Arc::clone(target.routing()?);
    let client = || state.client_policy.client(peer, headers);
    // The GeoIP database is asked only by a country condition.
    let country = |ip| {
        let geo = state.visits.analytics().geo().filter(|g| g.loaded());
        geo.and_then(|g| g.country(ip))
    };
    let secure = state.public.as_str().starts_with("https:");
    let visitor = Visitor::new(key, headers, seen.agent, query, &client, &country).at(code, secure);
    let chosen = routing.choose(&visitor);
    if let Some(location) = chosen.location {
        target.location = location.clone();
    }
    target.route = chosen.route;
    if let Some(passed) = routing.pass_on(&target.location, query) {
        target.location = passed;
    }
    let routed = Routed {
        personal: routing.personal(),
        cookie: chosen.cookie.cloned(),
    };
    seen.profile = visitor.profile();
    Some(routed)
}

/// The redirect to `location` on `domain`. An answer that depends on who asks (`personal`) is
/// one no cache may keep (`Cache-Control: private, no-store`; no `Vary`: an answer no cache
/// stores has no variance a cache could cross, RFC 9110 section 12.5.5), and never permanent: a
/// 301 or 308 status is sent as its temporary twin (302, 307), since a browser keeps a
/// permanent redirect for good. So is the answer of a `transient` link (one that expires or
/// has a visit limit), which a browser must not keep past its end.
fn redirect_to(
    state: &HttpState,
    domain: Option<&Domain>,
    location: HeaderValue,
    routed: Option<Routed>,
    transient: bool,
) -> Response {
    let mut response = Response::new(Body::empty());
    let status = redirect_status(state, domain);
    let headers = response.headers_mut();
    headers.insert(header::LOCATION, location);
    let temporary = match status {
        StatusCode::MOVED_PERMANENTLY => StatusCode::FOUND,
        StatusCode::PERMANENT_REDIRECT => StatusCode::TEMPORARY_REDIRECT,
        other => other,
    };
    let shared = if transient { temporary } else { status };
    *response.status_mut() = match routed {
        None => shared,
        Some(Routed {
            personal: false, ..
        }) => shared,
        Some(Routed { cookie, .. }) => {
            headers.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("private, no-store"),
            );
            if let Some(cookie) = cookie {
                headers.insert(header::SET_COOKIE, cookie);
            }
            temporary
        }
    };
    response
}

/// The status of redirects on `domain`: its own, else the node's.
fn redirect_status(state: &HttpState, domain: Option<&Domain>) -> StatusCode {
    domain
        .and_then(|d| d.settings.redirect_status)
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(state.redirect_status)
}

/// A `302` to a domain's fallback URL, never stored by caches (the fallback may change, and
/// the code may come to exist).
fn fallback_to(url: Option<&str>) -> Option<Response> {
    let location = HeaderValue::from_str(url?).ok()?;
    Some(
        (
            StatusCode::FOUND,
            [
                (header::LOCATION, location),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ],
        )
            .into_response(),
    )
}

/// What an unknown code answers on `domain`: the 404 budget is spent as anywhere (a 429 once
/// it is; the token `paid` at the door, when the client paid one), then the domain's
/// `not_found_url`, else the 404.
fn not_found_on(
    state: &HttpState,
    (peer, headers): (SocketAddr, &HeaderMap),
    domain: Option<&Domain>,
    paid: Option<Paid<'_>>,
) -> Response {
    match paid {
        Some(paid) => paid.spend(),
        None => {
            if let Some(refused) = spend_404_token(state, peer, headers) {
                return refused;
            }
        }
    }
    fallback_to(domain.and_then(|d| d.settings.not_found_url.as_deref()))
        .unwrap_or_else(|| no_store(StatusCode::NOT_FOUND, "not found\n"))
}

/// What an expired, disabled, deleted or spent link answers on `domain`: its `expired_url`,
/// else the 410.
fn gone_on(domain: Option<&Domain>) -> Response {
    fallback_to(domain.and_then(|d| d.settings.expired_url.as_deref())).unwrap_or_else(gone)
}

/// Whether `target`'s visit limit admits the visit this request makes, counting the visit if
/// so: the one place the redirect and the password unlock count a visit. The client address
/// is found only when the visits will look up its country.
fn count_visit(
    state: &HttpState,
    peer: SocketAddr,
    code: &str,
    seen: Seen<'_>,
    headers: &HeaderMap,
    target: &Target,
) -> bool {
    let visit = Visit {
        head: seen.head,
        user_agent: seen.agent,
        referrer: headers
            .get(header::REFERER)
            .and_then(|v: &HeaderValue| v.to_str().ok()),
        client: (state.visits.locates_clients()).then(|| state.client_policy.client(peer, headers)),
        route: target.route,
        profile: seen.profile,
    }
    .classify();
    if !target.admits(visit.kind()) {
        return false;
    }
    state.resolver.count(code, target, &visit);
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
    let paid = match refused_before_lookup(&state, peer, &parts.headers, started, true) {
        Door::Open(paid) => paid,
        Door::Refused(refused) => return refused,
    };
    let site = match site::load(&state, peer, &parts.uri, &parts.headers, started).await {
        Ok(site) => site,
        Err(refused) => return refused,
    };
    let domain = site.domain();
    let key = lookup_key(&state, &site, &code);
    let resolution = match &key {
        Some(key) => state.resolver.resolve(domain, key, started).await,
        None => Ok(Resolution::NotFound),
    };
    let paid = settled(paid, &resolution);
    let (response, outcome) = match (resolution, &key) {
        (Ok(Resolution::Redirect(mut target)), Some(key)) => {
            // The form posts to the code without the short URL's query.
            let mut seen = Seen::of(false, &parts.headers);
            route(
                &state,
                (peer, &parts.headers, None),
                &key.key,
                &code,
                &mut target,
                &mut seen,
            );
            protect::unlock(
                &state,
                peer,
                &code,
                &key.key,
                &parts.headers,
                body,
                (target, domain),
            )
            .await
        }
        (Ok(Resolution::Redirect(_)) | Ok(Resolution::NotFound), _) => (
            not_found_on(&state, (peer, &parts.headers), domain, paid),
            "not_found",
        ),
        (Ok(Resolution::Gone), _) => (gone_on(domain), "gone"),
        (Ok(Resolution::Blocked), _) => (
            no_store(state.blocked_status, "this link has been disabled\n"),
            "blocked",
        ),
        (Err(error), _) => (super::ApiError::from(error).into_response(), "error"),
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

/// The 429 of a client waiting for its next 404 token, before any lookup is made for it; `None`
/// for every other client. Pays no token on probation: for a lookup behind
/// [`refused_before_lookup`] or one that spends a token when it finds nothing.
pub(crate) fn past_404_budget(
    state: &HttpState,
    peer: SocketAddr,
    headers: &HeaderMap,
) -> Option<Response> {
    if !state.limits.any_404_budget_spent() {
        return None;
    }
    let client = state.client_policy.client(peer, headers);
    let retry_after = state.limits.waiting_for_404_token(client)?;
    Some(too_many_unknown(state, retry_after))
}

/// A client past its 404 budget is answered 429 before the cache or the store is asked, for the
/// `Retry-After` it was told: a scanner costs the node no lookup once it is refused. Past that
/// wait it pays its 404 token here, before the lookup, until it is forgotten: the request's
/// [`Paid`] ([`Limits::door`](crate::limits::Limits::door)). While nobody's budget is spent
/// this is one atomic read; the client address is found only otherwise. The answer from the
/// cache alone ([`answer_cached`]) asks without paying (`pays` false): only a request that goes
/// on to the store pays, and only once.
fn refused_before_lookup<'s>(
    state: &'s HttpState,
    peer: SocketAddr,
    headers: &HeaderMap,
    started: Instant,
    pays: bool,
) -> Door<'s> {
    if !state.limits.any_404_budget_spent() {
        return Door::Open(None);
    }
    let client = state.client_policy.client(peer, headers);
    let retry_after = if pays {
        match state.limits.door(client) {
            Ok(paid) => return Door::Open(paid),
            Err(retry_after) => retry_after,
        }
    } else {
        match state.limits.waiting_for_404_token(client) {
            None => return Door::Open(None),
            Some(retry_after) => retry_after,
        }
    };
    let response = too_many_unknown(state, retry_after);
    state
        .metrics
        .redirect(response.status().as_u16(), "not_found", started.elapsed());
    Door::Refused(response)
}

/// What [`refused_before_lookup`] answers.
enum Door<'s> {
    /// The request may be looked up, with the 404 token its client paid for it, if it did.
    Open(Option<Paid<'s>>),
    /// The 429, before any lookup.
    Refused(Response),
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
