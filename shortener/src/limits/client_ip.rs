//! The client address of a request: the socket's, or the one a trusted proxy forwarded.

use axum::http::HeaderMap;
use ipnet::IpNet;
use std::net::{IpAddr, SocketAddr};

/// How to find the client's address behind proxies.
#[derive(Debug, Clone, Default)]
pub struct ClientAddressPolicy {
    /// A header carrying the client chain (e.g. `x-forwarded-for`), honoured only from trusted
    /// proxies.
    pub header: Option<axum::http::HeaderName>,
    /// Networks whose connections are trusted proxies.
    pub trusted: Vec<IpNet>,
}

impl ClientAddressPolicy {
    /// The client address of a request from `peer`: the socket address, unless the peer is a
    /// trusted proxy and the configured header names an address; then the rightmost address in
    /// the header that is not itself a trusted proxy.
    pub fn client(&self, peer: SocketAddr, headers: &HeaderMap) -> IpAddr {
        let peer_ip = peer.ip().to_canonical();
        let Some(header) = &self.header else {
            return peer_ip;
        };
        if !self.is_trusted(peer_ip) {
            return peer_ip;
        }
        let chain: Vec<IpAddr> = headers
            .get_all(header)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|part| part.trim().parse::<IpAddr>().ok())
            .collect();
        chain
            .into_iter()
            .rev()
            .find(|ip| !self.is_trusted(ip.to_canonical()))
            .unwrap_or(peer_ip)
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted.iter().any(|net| net.contains(&ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarded_addresses_count_only_from_trusted_proxies() {
        let policy = ClientAddressPolicy {
            header: Some(axum::http::HeaderName::from_static("x-forwarded-for")),
            trusted: vec!["10.0.0.0/8".parse().expect("net")],
        };
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            "203.0.113.9, 198.51.100.7, 10.1.2.3"
                .parse()
                .expect("value"),
        );
        let proxy: SocketAddr = "10.0.0.5:4000".parse().expect("addr");
        let stranger: SocketAddr = "192.0.2.1:4000".parse().expect("addr");
        assert_eq!(
            policy.client(proxy, &headers),
            "198.51.100.7".parse::<IpAddr>().expect("ip")
        );
        assert_eq!(policy.client(stranger, &headers), stranger.ip());
        assert_eq!(
            ClientAddressPolicy::default().client(proxy, &headers),
            proxy.ip()
        );
    }
}
