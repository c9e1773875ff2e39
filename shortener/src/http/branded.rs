//! What a branded domain answers by itself on the public listener, chosen by the request's host
//! ([`crate::domains::files::request_host`]): its root, `robots.txt`, and the two app-link files
//! under `/.well-known/`. Only these fixed paths look the host up (through the
//! [`crate::domains::DomainCache`]); redirects of codes never do. A host that is no claimed
//! domain (the node's own hosts are never one) gets the answer it got before domains existed.

use super::HttpState;
use crate::domain::Domain;
use crate::domains::files::{request_host, robots_txt};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::sync::Arc;

/// `/robots.txt`: the one fixed path of a single segment, kept away from the code lookup (no
/// code holds a `.`, and the redirect edge's fast path leaves it to the router).
pub const ROBOTS_PATH: &str = "/robots.txt";

/// `/.well-known/apple-app-site-association`.
pub const AASA_PATH: &str = "/.well-known/apple-app-site-association";

/// `/.well-known/assetlinks.json`.
pub const ASSETLINKS_PATH: &str = "/.well-known/assetlinks.json";

/// The domain the request's host names, if any, and whether the store was read to tell; `Err`
/// is the answer when it cannot be known (the store is down: `503`, so that a crawler does not
/// read a missing `robots.txt` as leave to crawl; or the client is past its 404 budget: `429`).
///
/// A host the node does not know yet costs a store read, so hosts are bounded as codes are: a
/// client past its 404 budget is refused before the read, and a read that finds no domain
/// spends one of its 404 tokens (the files' 404 does that itself; the root, whose answer is
/// no 404, through [`root`]). Random `Host` values are then no cheaper a probe than random
/// codes, while a host already known (the negative cache too) costs nothing.
async fn domain_of(
    state: &HttpState,
    peer: SocketAddr,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<(Option<Arc<Domain>>, bool), Response> {
    let Some(host) = request_host(peer, uri, headers, &state.client_policy) else {
        return Ok((None, false));
    };
    if let Some(known) = state.domains.cached_host(&host) {
        return Ok((known, false));
    }
    if let Some(refused) = super::redirect::past_404_budget(state, peer, headers) {
        return Err(refused);
    }
    let domain = state
        .domains
        .load_host(&host)
        .await
        .map_err(|error| super::ApiError::from(error).into_response())?;
    Ok((domain, true))
}

/// `GET|HEAD /`: a branded domain with a `root_url` redirects there (with its
/// `redirect_status`, else the node's); anything else gets the node's own root answer.
pub async fn root(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let domain = match domain_of(&state, peer, &uri, &headers).await {
        Ok((None, true)) => match super::redirect::spend_404_token(&state, peer, &headers) {
            None => None,
            Some(refused) => return refused,
        },
        Ok((domain, _)) => domain,
        Err(response) => return response,
    };
    let target = domain.as_ref().and_then(|d| {
        let location = HeaderValue::from_str(d.settings.root_url.as_deref()?).ok()?;
        let status = d
            .settings
            .redirect_status
            .and_then(|s| StatusCode::from_u16(s).ok())
            .unwrap_or(state.redirect_status);
        Some((status, location))
    });
    match target {
        Some((status, location)) => (
            status,
            [
                (header::LOCATION, location),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ],
        )
            .into_response(),
        None => super::default_root(&state),
    }
}

/// `GET /robots.txt`: on a branded domain, allow or disallow everything as its `robots` says;
/// elsewhere the answer of before (a `404`, as for any path that is no code).
pub async fn robots(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    match domain_of(&state, peer, &uri, &headers).await {
        Ok((Some(domain), _)) => file(
            "text/plain; charset=utf-8",
            robots_txt(domain.settings.robots).to_string(),
        ),
        Ok((None, _)) => super::redirect::not_found(&state, peer, &headers),
        Err(response) => response,
    }
}

/// `GET /.well-known/apple-app-site-association`: the domain's stored JSON object.
pub async fn apple_app_site_association(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    app_file(&state, peer, &uri, &headers, |d| {
        d.settings.apple_app_site_association.clone()
    })
    .await
}

/// `GET /.well-known/assetlinks.json`: the domain's stored JSON array.
pub async fn assetlinks(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    app_file(&state, peer, &uri, &headers, |d| {
        d.settings.assetlinks.clone()
    })
    .await
}

/// An app-link file of the request's domain as `application/json`; a `404` as for any path
/// that is no code when the host is no domain or the domain has none.
async fn app_file(
    state: &HttpState,
    peer: SocketAddr,
    uri: &Uri,
    headers: &HeaderMap,
    pick: impl Fn(&Domain) -> Option<String>,
) -> Response {
    match domain_of(state, peer, uri, headers).await {
        Ok((domain, _)) => match domain.as_deref().and_then(pick) {
            Some(json) => file("application/json", json),
            None => super::redirect::not_found(state, peer, headers),
        },
        Err(response) => response,
    }
}

/// A file's response: its type, revalidated on every use (a change shows at once).
fn file(content_type: &'static str, body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}
