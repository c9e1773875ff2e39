//! The client address of a request: the socket's, or the one a trusted proxy forwarded, keyed
//! the way the limits count clients (IPv6 clients by prefix, since one host holds a whole /64).

use axum::http::HeaderMap;
use ipnet::{IpNet, Ipv6Net};
use std::net::{IpAddr, SocketAddr};

/// The address limits count `ip` under: IPv4 (and IPv4-mapped IPv6) addresses as they are,
/// IPv6 addresses by their first `ipv6_prefix` bits.
pub fn client_key(ip: IpAddr, ipv6_prefix: u8) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => Ipv6Net::new(v6, ipv6_prefix.min(128))
            .map(|net| IpAddr::V6(net.trunc().addr()))
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// How to find the client's address behind proxies.
#[derive(Debug, Clone)]
pub struct ClientAddressPolicy {
    /// A header carrying the client chain (e.g. `x-forwarded-for`), honoured only from trusted
    /// proxies.
    pub header: Option<axum::http::HeaderName>,
    /// Networks whose connections are trusted proxies.
    pub trusted: Vec<IpNet>,
    /// IPv6 clients are counted by this many leading bits.
    pub ipv6_prefix: u8,
}

impl Default for ClientAddressPolicy {
    fn default() -> Self {
        Self {
            header: None,
            trusted: Vec::new(),
            ipv6_prefix: 64,
        }
    }
}

/// One entry of a forwarding chain as an address: a bare IP, `ip:port`, `[v6]` or `[v6]:port`.
fn entry_address(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(socket) = entry.parse::<SocketAddr>() {
        return Some(socket.ip());
    }
    entry
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|inner| inner.parse().ok())
}

impl ClientAddressPolicy {
    /// The client of a request from `peer`, keyed by [`client_key`]: the socket address,
    /// unless the peer is a trusted proxy and the configured header holds a chain. Then the
    /// chain is read from its right end (the entry the nearest proxy added) towards its left:
    /// trusted proxies are skipped, the first other address is the client, and an entry that
    /// is not an address (`unknown`, garbage) ends the walk at the peer itself, so a client
    /// cannot pick its own key by adding entries to the left.
    pub fn client(&self, peer: SocketAddr, headers: &HeaderMap) -> IpAddr {
        client_key(self.address(peer, headers), self.ipv6_prefix)
    }

    /// The client's own address, found as [`ClientAddressPolicy::client`] finds it but whole
    /// (not keyed by prefix): what the audit log records.
    pub fn address(&self, peer: SocketAddr, headers: &HeaderMap) -> IpAddr {
        let peer_ip = peer.ip().to_canonical();
        let Some(header) = &self.header else {
            return peer_ip;
        };
        if !self.is_trusted(peer_ip) {
            return peer_ip;
        }
        let entries: Vec<&str> = headers
            .get_all(header)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .collect();
        for entry in entries.into_iter().rev() {
            match entry_address(entry) {
                Some(ip) if self.is_trusted(ip.to_canonical()) => continue,
                Some(ip) => return ip.to_canonical(),
                None => return peer_ip,
            }
        }
        peer_ip
    }

    /// Whether a connection from `peer` is a trusted proxy's (`SHORTENER_TRUSTED_PROXIES`): the
    /// one decision behind every forwarded header the node believes (client address, host).
    pub fn trusts(&self, peer: IpAddr) -> bool {
        self.is_trusted(peer.to_canonical())
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted.iter().any(|net| net.contains(&ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> ClientAddressPolicy {
        ClientAddressPolicy {
            header: Some(axum::http::HeaderName::from_static("x-forwarded-for")),
            trusted: vec!["10.0.0.0/8".parse().expect("net")],
            ipv6_prefix: 64,
        }
    }

    fn client(chain: &str, peer: &str) -> String {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", chain.parse().expect("value"));
        policy()
            .client(peer.parse().expect("addr"), &headers)
            .to_string()
    }

    #[test]
    fn the_right_most_untrusted_entry_is_the_client() {
        let proxy = "10.0.0.5:4000";
        #[rustfmt::skip]
        let cases = [
            ("203.0.113.9, 198.51.100.7, 10.1.2.3", proxy, "198.51.100.7"),
            // The attacker's own left-most entries are never reached.
            ("1.1.1.1, 198.51.100.7", proxy, "198.51.100.7"),
            // Ports are stripped, in both notations.
            ("198.51.100.7:5555", proxy, "198.51.100.7"),
            ("[2001:db8::7]:443, 10.0.0.9", proxy, "2001:db8::"),
            ("[2001:db8::7]", proxy, "2001:db8::"),
            // An entry that is no address ends the walk at the peer.
            ("198.51.100.7, unknown", proxy, "10.0.0.5"),
            ("unknown, 198.51.100.7", proxy, "198.51.100.7"),
            ("garbage!!", proxy, "10.0.0.5"),
            // Every entry a trusted proxy: the peer.
            ("10.0.0.1, 10.0.0.2", proxy, "10.0.0.5"),
            // A peer that is not a trusted proxy sets nothing.
            ("198.51.100.7", "192.0.2.1:4000", "192.0.2.1"),
        ];
        for (chain, peer, want) in cases {
            assert_eq!(client(chain, peer), want, "{chain:?} from {peer}");
        }
        let untrusting = ClientAddressPolicy::default();
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", "198.51.100.7".parse().expect("value"));
        let peer: SocketAddr = "10.0.0.5:4000".parse().expect("addr");
        assert_eq!(untrusting.client(peer, &headers), peer.ip());
    }

    #[test]
    fn ipv6_clients_are_keyed_by_their_prefix() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().expect("ip");
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().expect("ip");
        let c: IpAddr = "2001:db8:1:3::1".parse().expect("ip");
        assert_eq!(client_key(a, 64), client_key(b, 64));
        assert_ne!(client_key(a, 64), client_key(c, 64));
        assert_ne!(client_key(a, 128), client_key(b, 128));
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().expect("ip");
        assert_eq!(client_key(mapped, 64).to_string(), "192.0.2.1");
    }
}
