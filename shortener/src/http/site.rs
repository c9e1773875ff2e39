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
use std::time::Instant;

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

/// A host as [`plain`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plain<'a> {
    /// Without a port and one trailing dot (ASCII only).
    host: &'a [u8],
    /// Whether it can be no domain at all: a single label, or a last label that is empty or a
    /// number (an IPv4 literal).
    never_a_domain: bool,
}

/// `raw` without a port and one trailing dot, when it is already in the normal form a domain's
/// host has (lower-case ASCII letters, digits, `.` and `-`); `None` when it must be normalised.
/// One pass over the bytes, and no UTF-8 pass before it: every redirect reads its host here.
fn plain(bytes: &[u8]) -> Option<Plain<'_>> {
    // A port: digits after the last `:` (a `:` anywhere else is refused below).
    let digits = bytes
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    let mut end = bytes.len();
    if digits < end && bytes[end - digits - 1] == b':' {
        end -= digits + 1;
    }
    if end > 0 && bytes[end - 1] == b'.' {
        end -= 1;
    }
    let host = &bytes[..end];
    let (mut dotted, mut label, mut numeric) = (false, 0usize, true);
    for &b in host {
        match b {
            b'.' => (dotted, label, numeric) = (true, 0, true),
            b'0'..=b'9' => label += 1,
            b'a'..=b'z' | b'-' => (label, numeric) = (label + 1, false),
            _ => return None,
        }
    }
    Some(Plain {
        host,
        never_a_domain: !dotted || label == 0 || numeric,
    })
}

impl Plain<'_> {
    /// The host as text (it is ASCII, so the check cannot fail).
    fn text(&self) -> Option<&str> {
        std::str::from_utf8(self.host).ok()
    }
}

/// What the cache and the node's own hosts say of `host` (normal form or a candidate) as of
/// `now`; `None`: the store must be asked.
fn known_host(state: &HttpState, host: &str, now: Instant) -> Option<Site> {
    Some(match state.domains.cached_host(host, now)? {
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

/// The site of a request that arrived at `now` when it is known without the store (a cached
/// domain is fresh if it was at `now`); `None`: [`load`] it.
pub fn cached(
    state: &HttpState,
    peer: SocketAddr,
    uri: &Uri,
    headers: &HeaderMap,
    now: Instant,
) -> Option<Site> {
    // The common case first: a `Host` header (no absolute URI, no proxy whose forwarded host
    // counts) already in normal form, read as bytes.
    if uri.authority().is_none() && !state.client_policy.trusts(peer.ip()) {
        let Some(value) = headers.get(axum::http::header::HOST) else {
            return Some(Site::Default);
        };
        if let Some(plain) = plain(value.as_bytes()) {
            return plain_site(state, plain, now);
        }
    }
    let Some(raw) = raw_request_host(peer, uri, headers, &state.client_policy) else {
        return Some(Site::Default);
    };
    match plain(raw.trim().as_bytes()) {
        Some(plain) => plain_site(state, plain, now),
        // Upper case, Unicode, an IPv6 literal: normalised below (allocating), then asked.
        None => normalised(state, peer, uri, headers, now),
    }
}

/// [`cached`] for a host in normal form.
fn plain_site(state: &HttpState, plain: Plain<'_>, now: Instant) -> Option<Site> {
    if plain.never_a_domain {
        return Some(Site::Default);
    }
    known_host(state, plain.text()?, now)
}

/// [`cached`] for a host that needs normalising first.
fn normalised(
    state: &HttpState,
    peer: SocketAddr,
    uri: &Uri,
    headers: &HeaderMap,
    now: Instant,
) -> Option<Site> {
    let Some(host) = request_host(peer, uri, headers, &state.client_policy) else {
        return Some(Site::Default);
    };
    known_host(state, &host, now)
}

/// The site of a request that arrived at `now`, read from the store when the cache does not
/// know its host. A host the node does not know costs a store read, so hosts are bounded
/// as codes are: a client past its 404 budget is refused (`Err`, the 429) before the read, and
/// a read that finds no domain spends one of its 404 tokens (refused once spent). The store
/// being down is `Err` too (503).
pub async fn load(
    state: &HttpState,
    peer: SocketAddr,
    uri: &Uri,
    headers: &HeaderMap,
    now: Instant,
) -> Result<Site, Response> {
    if let Some(site) = cached(state, peer, uri, headers, now) {
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
            let host = plain(raw.as_bytes()).and_then(|p| p.text().map(str::to_string));
            assert_eq!(host.as_deref(), want, "{raw}");
        }
        for (host, never) in [
            ("localhost", true),
            ("localhost:8080", true),
            ("127.0.0.1", true),
            ("127.0.0.1:8080", true),
            ("10.1.2.3", true),
            ("a..", true),
            ("go.brand.com", false),
            ("go.brand.com.", false),
            ("a.b", false),
            ("x.b2", false),
            ("1.2.3.com", false),
        ] {
            let read = plain(host.as_bytes());
            assert_eq!(read.map(|p| p.never_a_domain), Some(never), "{host}");
        }
    }
}
