//! What a branded domain answers by itself on the public listener, chosen by the request's host
//! ([`super::site`]): its root, `robots.txt`, and the two app-link files under `/.well-known/`.
//! A host that is no claimed domain (the node's own hosts are never one) gets the answer it got
//! before domains existed (or a 404 under `SHORTENER_UNKNOWN_HOSTS=not-found`).

use super::HttpState;
use super::site::Site;
use crate::domain::Domain;
use crate::domains::files::robots_txt;
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

/// The request's [`Site`]; `Err` is the answer when it cannot be known (the store is down:
/// `503`, so that a crawler does not read a missing `robots.txt` as leave to crawl; or the
/// client is past its 404 budget: `429`). A host the node does not know costs a store read and
/// a 404 token when it is no domain ([`super::site::load`]); a host already known (the negative
/// cache too) costs nothing.
async fn site_of(
    state: &HttpState,
    peer: SocketAddr,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<Site, Response> {
    super::site::load(state, peer, uri, headers, std::time::Instant::now()).await
}

/// `GET|HEAD /`: a branded domain with a `root_url` redirects there (with its
/// `redirect_status`, else the node's); anything else gets the node's own root answer.
pub async fn root(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let domain = match site_of(&state, peer, &uri, &headers).await {
        Ok(Site::Branded(domain)) => Some(domain),
        Ok(Site::Default) => None,
        Ok(Site::Closed) => return super::redirect::not_found(&state, peer, &headers),
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
    match site_of(&state, peer, &uri, &headers).await {
        Ok(Site::Branded(domain)) => file(
            "text/plain; charset=utf-8",
            robots_txt(domain.settings.robots).to_string(),
        ),
        Ok(_) => super::redirect::not_found(&state, peer, &headers),
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
    match site_of(state, peer, uri, headers).await {
        Ok(site) => match site.domain().and_then(pick) {
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
