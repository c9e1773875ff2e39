//! The site of a request on the public listener: which domain its host names, and so where its
//! codes, its root and its files are looked up. The node's own hosts (the public URL's and the
//! short domains) and hosts no domain can have (absent, IP literals, single labels) are the
//! default domain; a claimed host is its branded domain; any other host gets what
//! `SHORTENER_UNKNOWN_HOSTS` says. The host is read as [`request_host`] reads it (a forwarded
//! host only from a trusted proxy), without allocating for a host already in normal form.

use super::HttpState;
use crate::config::UnknownHosts;
use crate::domain::Domain;
use crate::domains::files::{raw_request_host, request_host};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::sync::Arc;

/// Where a request's codes are looked up.
#[derive(Debug, Clone)]
pub enum Site {
    /// The default domain.
    Default,
    /// A tenant's branded domain.
    Branded(Arc<Domain>),
    /// A host that is no domain, under `SHORTENER_UNKNOWN_HOSTS=not-found`: nothing is found.
    Closed,
}

impl Site {
    /// The branded domain, if the site is one.
    pub fn domain(&self) -> Option<&Domain> {
        match self {
            Site::Branded(domain) => Some(domain),
            Site::Default | Site::Closed => None,
        }
    }
}

/// `host` without a port and one trailing dot, when it is already in the normal form a domain's
/// host has (lower-case ASCII letters, digits, `.` and `-`); `None` when it must be normalised.
fn plain(raw: &str) -> Option<&str> {
    let host = match raw.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        Some(_) => return None,
        None => raw,
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    host.bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        .then_some(host)
}

/// Whether `host` (plain) can be no domain at all: a single label, or a last label that is a
/// number (an IPv4 literal).
fn never_a_domain(host: &str) -> bool {
    match host.rsplit_once('.') {
        None => true,
        Some((_, last)) => last.is_empty() || last.bytes().all(|b| b.is_ascii_digit()),
    }
}

/// What the cache and the node's own hosts say of `host` (normal form or a candidate); `None`:
/// the store must be asked.
fn known_host(state: &HttpState, host: &str) -> Option<Site> {
    Some(match state.domains.cached_host(host)? {
        Some(domain) => Site::Branded(domain),
        None if state.domains.is_own_host(host) => Site::Default,
        None => unknown(state),
    })
}

/// The site of a host that is no domain.
fn unknown(state: &HttpState) -> Site {
    match state.unknown_hosts {
        UnknownHosts::Default => Site::Default,
        UnknownHosts::NotFound => Site::Closed,
    }
}

/// The site of a request when it is known without the store; `None`: [`load`] it.
pub fn cached(state: &HttpState, peer: SocketAddr, uri: &Uri, headers: &HeaderMap) -> Option<Site> {
    let Some(raw) = raw_request_host(peer, uri, headers, &state.client_policy) else {
        return Some(Site::Default);
    };
    let host = match plain(raw.trim()) {
        Some(host) if never_a_domain(host) => return Some(Site::Default),
        Some(host) => host,
        // Upper case, Unicode, an IPv6 literal: normalised below (allocating), then asked.
        None => return normalised(state, peer, uri, headers),
    };
    known_host(state, host)
}

/// [`cached`] for a host that needs normalising first.
fn normalised(state: &HttpState, peer: SocketAddr, uri: &Uri, headers: &HeaderMap) -> Option<Site> {
    let Some(host) = request_host(peer, uri, headers, &state.client_policy) else {
        return Some(Site::Default);
    };
    known_host(state, &host)
}

/// The site of a request, read from the store when the cache does not know its host, and
/// whether it was read. A host the node does not know costs a store read, so hosts are bounded
/// as codes are: a client past its 404 budget is refused (`Err`, the 429) before the read, and
/// a read that finds no domain spends one of its 404 tokens (refused once spent). The store
/// being down is `Err` too (503).
pub async fn load(
    state: &HttpState,
    peer: SocketAddr,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<Site, Response> {
    if let Some(site) = cached(state, peer, uri, headers) {
        return Ok(site);
    }
    let Some(host) = request_host(peer, uri, headers, &state.client_policy) else {
        return Ok(Site::Default);
    };
    if let Some(refused) = super::redirect::past_404_budget(state, peer, headers) {
        return Err(refused);
    }
    let domain = state
        .domains
        .load_host(&host)
        .await
        .map_err(|error| super::ApiError::from(error).into_response())?;
    match domain {
        Some(domain) => Ok(Site::Branded(domain)),
        None => match super::redirect::spend_404_token(state, peer, headers) {
            None => Ok(unknown(state)),
            Some(refused) => Err(refused),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_hosts_are_taken_as_they_are_and_others_normalised() {
        for (raw, want) in [
            ("go.brand.com", Some("go.brand.com")),
            ("go.brand.com:8080", Some("go.brand.com")),
            ("go.brand.com.", Some("go.brand.com")),
            ("go.brand.com.:443", Some("go.brand.com")),
            ("127.0.0.1:8080", Some("127.0.0.1")),
            ("Go.Brand.com", None),
            ("b\u{fc}cher.example", None),
            ("[::1]:8080", None),
            ("go.brand.com:x", None),
        ] {
            assert_eq!(plain(raw), want, "{raw}");
        }
        for (host, never) in [
            ("localhost", true),
            ("127.0.0.1", true),
            ("10.1.2.3", true),
            ("go.brand.com", false),
            ("a.b", false),
        ] {
            assert_eq!(never_a_domain(host), never, "{host}");
        }
    }
}
