//! What a branded domain answers by itself, chosen by the request's host: the host of a request
//! in its normal form ([`request_host`]), and the text of its `robots.txt`.

use crate::domain::{Robots, path_host};
use crate::limits::ClientAddressPolicy;
use axum::http::{HeaderMap, HeaderName, Uri, header};
use std::borrow::Cow;
use std::net::SocketAddr;

/// `X-Forwarded-Host`: the host a proxy was asked for.
static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// The host a request from `peer` was sent to, in the normal form of a domain's host (lower
/// case, no port, one trailing dot stripped, IDNA to ASCII), or `None` when it names no host a
/// domain can have (absent, an IP literal, malformed): such a request is answered as the
/// default host's.
///
/// The host is the request target's authority (HTTP/2's `:authority`, an absolute-form
/// request), else the `Host` header. When `peer` is a trusted proxy (`policy`, the networks of
/// `SHORTENER_TRUSTED_PROXIES`, the same decision that lets it name the client's address), a
/// forwarded host replaces it: the `host=` of the last element of `Forwarded` (RFC 7239), else
/// the last entry of `X-Forwarded-Host`, both being what the nearest proxy added. Anyone else's
/// forwarded host is ignored.
pub fn request_host(
    peer: SocketAddr,
    uri: &Uri,
    headers: &HeaderMap,
    policy: &ClientAddressPolicy,
) -> Option<String> {
    normal_host(&raw_request_host(peer, uri, headers, policy)?)
}

/// The host a request from `peer` was sent to as the request (or a trusted proxy) wrote it,
/// before [`request_host`] puts it in normal form; borrowed unless a proxy forwarded it.
pub fn raw_request_host<'a>(
    peer: SocketAddr,
    uri: &'a Uri,
    headers: &'a HeaderMap,
    policy: &ClientAddressPolicy,
) -> Option<Cow<'a, str>> {
    if policy.trusts(peer.ip())
        && let Some(forwarded) = forwarded_host(headers)
    {
        return Some(Cow::Owned(forwarded));
    }
    match uri.authority() {
        Some(authority) => Some(Cow::Borrowed(authority.as_str())),
        None => Some(Cow::Borrowed(utf8(headers.get(header::HOST)?)?)),
    }
}

/// A header's value as UTF-8 text (a host may arrive in Unicode, which IDNA then converts).
fn utf8(value: &axum::http::HeaderValue) -> Option<&str> {
    std::str::from_utf8(value.as_bytes()).ok()
}

/// The host a trusted proxy forwarded, as it wrote it.
fn forwarded_host(headers: &HeaderMap) -> Option<String> {
    let last = |name: &HeaderName| {
        headers
            .get_all(name)
            .iter()
            .filter_map(utf8)
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .rfind(|v| !v.is_empty())
            .map(str::to_string)
    };
    if let Some(element) = last(&header::FORWARDED) {
        let host = element.split(';').find_map(|pair| {
            let (name, value) = pair.split_once('=')?;
            name.trim()
                .eq_ignore_ascii_case("host")
                .then(|| value.trim().trim_matches('"').to_string())
        });
        if host.is_some() {
            return host;
        }
    }
    last(&X_FORWARDED_HOST)
}

/// `raw` (`host`, `host:port`, `host.`) in the normal form of a domain's host, or `None`.
fn normal_host(raw: &str) -> Option<String> {
    let raw = raw.trim();
    if raw.starts_with('[') {
        // An IPv6 literal: never a domain.
        return None;
    }
    let host = match raw.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => host,
        Some(_) => return None,
        None => raw,
    };
    path_host(&host.to_lowercase())
}

/// The body of `robots.txt` on a domain whose robots setting is `robots`.
pub fn robots_txt(robots: Robots) -> &'static str {
    match robots {
        Robots::Allow => "User-agent: *\nAllow: /\n",
        Robots::Disallow => "User-agent: *\nDisallow: /\n",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn policy() -> ClientAddressPolicy {
        ClientAddressPolicy {
            header: None,
            trusted: vec!["10.0.0.0/8".parse().expect("net")],
            ipv6_prefix: 64,
        }
    }

    /// Peer, request target, headers, and the host the request names.
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], Option<&'a str>);

    #[test]
    fn request_hosts_table() {
        let proxy = "10.0.0.5:4000";
        let stranger = "192.0.2.1:4000";
        #[rustfmt::skip]
        let cases: &[Case] = &[
            // (peer, request target, headers, host)
            (stranger, "/", &[("host", "go.brand.com")], Some("go.brand.com")),
            (stranger, "/", &[("host", "Go.Brand.COM:8080")], Some("go.brand.com")),
            (stranger, "/", &[("host", "go.brand.com.")], Some("go.brand.com")),
            (stranger, "/", &[("host", "go.brand.com.:443")], Some("go.brand.com")),
            (stranger, "/", &[("host", "BÜCHER.example")], Some("xn--bcher-kva.example")),
            (stranger, "/", &[("host", "xn--bcher-kva.example")], Some("xn--bcher-kva.example")),
            // An HTTP/2 authority or absolute form wins over the header.
            (stranger, "http://go.brand.com:81/", &[("host", "other.example")], Some("go.brand.com")),
            // Nothing a domain can be.
            (stranger, "/", &[], None),
            (stranger, "/", &[("host", "127.0.0.1:8080")], None),
            (stranger, "/", &[("host", "[::1]:8080")], None),
            (stranger, "/", &[("host", "localhost")], None),
            (stranger, "/", &[("host", "go.brand.com:")], None),
            (stranger, "/", &[("host", "go.brand.com:x")], None),
            (stranger, "/", &[("host", "user@go.brand.com")], None),
            (stranger, "/", &[("host", "*.brand.com")], None),
            (stranger, "/", &[("host", "go..brand.com")], None),
            // A forwarded host from anyone but a trusted proxy is ignored.
            (stranger, "/", &[("host", "node.example"), ("x-forwarded-host", "brand.example")], Some("node.example")),
            (stranger, "/", &[("host", "node.example"), ("forwarded", "host=brand.example")], Some("node.example")),
            // From a trusted proxy it is believed, the nearest proxy's (last) entry.
            (proxy, "/", &[("host", "node.example"), ("x-forwarded-host", "brand.example")], Some("brand.example")),
            (proxy, "/", &[("host", "node.example"), ("x-forwarded-host", "evil.example, Brand.Example:443")], Some("brand.example")),
            (proxy, "/", &[("host", "node.example"), ("forwarded", "for=1.2.3.4;host=a.example, for=5.6.7.8;proto=https;host=\"b.example:8443\"")], Some("b.example")),
            // Forwarded wins over X-Forwarded-Host; an element without host= falls back.
            (proxy, "/", &[("forwarded", "host=a.example"), ("x-forwarded-host", "b.example")], Some("a.example")),
            (proxy, "/", &[("host", "node.example"), ("forwarded", "for=1.2.3.4"), ("x-forwarded-host", "b.example")], Some("b.example")),
            // No forwarded host: the request's own.
            (proxy, "/", &[("host", "node.example")], Some("node.example")),
            // A forwarded host that is no host: no domain (never the proxy's Host instead).
            (proxy, "/", &[("host", "node.example"), ("x-forwarded-host", "10.1.2.3")], None),
        ];
        for (peer, target, headers, want) in cases {
            let mut map = HeaderMap::new();
            for (name, value) in *headers {
                map.append(
                    HeaderName::from_bytes(name.as_bytes()).expect("name"),
                    HeaderValue::from_str(value).expect("value"),
                );
            }
            let uri: Uri = target.parse().expect("uri");
            let got = request_host(peer.parse().expect("peer"), &uri, &map, &policy());
            assert_eq!(got.as_deref(), *want, "{peer} {target} {headers:?}");
        }
        // Without trusted proxies, no peer's forwarded host is believed.
        let mut map = HeaderMap::new();
        map.insert(
            "x-forwarded-host",
            HeaderValue::from_static("brand.example"),
        );
        let untrusting = ClientAddressPolicy::default();
        let uri: Uri = "/".parse().expect("uri");
        assert_eq!(
            request_host(proxy.parse().expect("peer"), &uri, &map, &untrusting),
            None
        );
    }

    #[test]
    fn robots_say_allow_or_disallow_everything() {
        assert_eq!(robots_txt(Robots::Disallow), "User-agent: *\nDisallow: /\n");
        assert_eq!(robots_txt(Robots::Allow), "User-agent: *\nAllow: /\n");
    }
}
