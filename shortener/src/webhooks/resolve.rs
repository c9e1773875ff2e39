//! Name resolution for deliveries. A webhook URL's host name is resolved at each delivery,
//! not only checked when it was registered, and only public addresses are kept: a public name
//! pointed at a loopback, private, link-local or metadata address afterwards (DNS rebinding)
//! reaches nothing inside. Used unless the operator allows private endpoints.
//!
//! Addresses that stand for another address through a relay are refused as well, public or
//! not: 6to4 (`2002::/16`), Teredo (`2001::/32`) and the local-use NAT64 prefix
//! (`64:ff9b:1::/48`). Where they lead depends on a relay or gateway the node cannot see (a
//! 6to4 relay may hand `2002:7f00:1::` to 127.0.0.1), and no receiver needs one. An address in
//! the well-known NAT64 prefix (`64:ff9b::/96`) is judged by the IPv4 address it carries when a
//! name resolves to it, since that is what a DNS64 resolver of an IPv6-only network answers
//! for every IPv4-only receiver; a URL naming one literally is refused
//! ([`refused_literal`]): nobody needs to write one.
//!
//! The node's own addresses are refused too, public or not ([`own_addresses`]): a node with a
//! public address on an interface reaches its own ports through it from inside, past whatever
//! firewall keeps them from the internet (the admin port bound to all addresses, say). They are
//! read from the interfaces at each check, so an address added later counts. An address that
//! only a NAT in front of the node knows (a cloud's public IP mapped onto a private one) is not
//! on any interface; it leads back in only through that NAT, which egress policy governs.

use crate::targets::{embedded_v4, is_not_public};
use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Whether a delivery may not reach `ip` as an address a name resolves to: it is not public
/// ([`is_not_public`]; a well-known-prefix NAT64 address by the IPv4 address it carries), or
/// it leads through a relay (6to4, Teredo, local-use NAT64).
pub fn refused_address(ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    is_not_public(ip) || relayed(ip)
}

/// Whether a URL may not name `ip` literally: [`refused_address`], or any NAT64 address.
pub fn refused_literal(ip: IpAddr) -> bool {
    refused_address(ip)
        || matches!(ip, IpAddr::V6(v6) if v6.segments()[..6] == [0x64, 0xff9b, 0, 0, 0, 0])
}

/// The node's own addresses now: each address on its interfaces, and the whole prefix of each
/// one on a loopback interface (every address of such a prefix is answered locally: an address
/// added to `lo` as a /24 makes the /24 the node's). Empty when the interfaces cannot be read.
/// Addresses a local route alone makes the node's (`ip route add local ...`) are not seen.
pub fn own_addresses() -> Vec<IpNet> {
    match if_addrs::get_if_addrs() {
        Ok(interfaces) => interfaces.iter().map(own_net).collect(),
        Err(error) => {
            tracing::warn!(%error, "reading the node's interface addresses failed");
            Vec::new()
        }
    }
}

/// The addresses `interface`'s address makes the node's.
fn own_net(interface: &if_addrs::Interface) -> IpNet {
    let (ip, prefix) = match &interface.addr {
        if_addrs::IfAddr::V4(v4) => (IpAddr::V4(v4.ip), v4.prefixlen),
        if_addrs::IfAddr::V6(v6) => (IpAddr::V6(v6.ip), v6.prefixlen),
    };
    let host = IpNet::from(ip);
    if interface.name == "lo" || interface.is_loopback() {
        IpNet::new(ip, prefix).map_or(host, |net| net.trunc())
    } else {
        host
    }
}

/// Whether `ip` is among `own`, in any spelling of an own IPv4 address (IPv4-mapped, NAT64).
pub fn is_own(ip: IpAddr, own: &[IpNet]) -> bool {
    let ip = ip.to_canonical();
    let carried = match ip {
        IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4),
        IpAddr::V4(_) => None,
    };
    own.iter()
        .any(|net| net.contains(&ip) || carried.is_some_and(|v4| net.contains(&v4)))
}

/// Why a delivery may not reach an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Not public, or through a relay ([`refused_address`]).
    NotPublic,
    /// One of the node's own ([`own_addresses`]).
    Own,
}

/// Why a delivery may not reach `ip`, given the node's own addresses `own`; `None` if it may.
pub fn refusal(ip: IpAddr, own: &[IpNet]) -> Option<Refused> {
    if refused_address(ip) {
        Some(Refused::NotPublic)
    } else if is_own(ip, own) {
        Some(Refused::Own)
    } else {
        None
    }
}

/// 6to4, Teredo and local-use NAT64 addresses.
fn relayed(ip: IpAddr) -> bool {
    let IpAddr::V6(v6) = ip else {
        return false;
    };
    let s = v6.segments();
    s[0] == 0x2002 // 6to4 2002::/16
        || (s[0] == 0x2001 && s[1] == 0) // Teredo 2001::/32
        || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1) // local-use NAT64 64:ff9b:1::/48
}

/// The addresses deliveries may not reach among those `host` resolves to now, and why, looked
/// up for at most `wait`; empty when it resolves to none of them, does not resolve, or takes
/// longer (a delivery resolves it again anyway).
pub async fn refused_addresses_of(host: &str, wait: Duration) -> Vec<(IpAddr, Refused)> {
    match tokio::time::timeout(wait, tokio::net::lookup_host((host, 0))).await {
        Ok(Ok(found)) => {
            let own = own_addresses();
            found
                .filter_map(|a| refusal(a.ip(), &own).map(|why| (a.ip(), why)))
                .collect()
        }
        _ => Vec::new(),
    }
}

/// What the resolver says of a name that leaves no address to reach, after the name.
pub const NO_ADDRESS_LEFT: &str = "resolves to no public address other than the node's own";

/// The system resolver, keeping only the addresses deliveries may reach ([`refusal`]); a name
/// with none is an error (the delivery counts as unreachable and is retried like any other
/// failure).
#[derive(Debug, Default, Clone, Copy)]
pub struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public = public(found, &own_addresses());
            if public.is_empty() {
                return Err(format!("{host} {NO_ADDRESS_LEFT}").into());
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// The addresses among `found` that deliveries may reach, the node's own being `own`.
fn public(found: Vec<SocketAddr>, own: &[IpNet]) -> Vec<SocketAddr> {
    found
        .into_iter()
        .filter(|a| refusal(a.ip(), own).is_none())
        .collect()
}

/// What a failed connection is recorded as: the resolver's refusal when the name left no
/// address a delivery may reach ([`PublicOnly`]), else that no connection was made.
pub fn connect_failure(error: &reqwest::Error) -> String {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if text.contains(NO_ADDRESS_LEFT) {
            return text;
        }
        source = cause.source();
    }
    "could not connect".into()
}

/// Whether `url` names a literal address that deliveries may not reach
/// ([`refused_literal`], or one of the node's own).
pub fn names_refused_address(url: &str) -> bool {
    let Ok(url) = url::Url::parse(url) else {
        return false;
    };
    let ip: IpAddr = match url.host() {
        Some(url::Host::Ipv4(v4)) => v4.into(),
        Some(url::Host::Ipv6(v6)) => v6.into(),
        _ => return false,
    };
    refused_literal(ip) || is_own(ip, &own_addresses())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn only_public_addresses_are_kept() {
        let addr = |s: &str| SocketAddr::from_str(s).expect("addr");
        let found = vec![
            addr("127.0.0.1:0"),
            addr("10.1.2.3:0"),
            addr("169.254.169.254:0"),
            addr("[::1]:0"),
            addr("[fd00::1]:0"),
            addr("[::ffff:192.168.0.1]:0"),
            addr("[2002:7f00:1::]:0"),
            addr("[2002:5db8:d70e::]:0"),
            addr("[2001:0:4136:e378::1]:0"),
            addr("[64:ff9b::7f00:1]:0"),
            addr("[64:ff9b:1::1]:0"),
            addr("93.184.215.14:0"),
            addr("[2606:4700::1]:0"),
            // What DNS64 answers for a public IPv4-only receiver.
            addr("[64:ff9b::5db8:d70e]:0"),
        ];
        assert_eq!(
            public(found, &[]),
            vec![
                addr("93.184.215.14:0"),
                addr("[2606:4700::1]:0"),
                addr("[64:ff9b::5db8:d70e]:0")
            ]
        );
    }

    #[test]
    fn the_nodes_own_addresses_are_not_kept_in_any_spelling() {
        let addr = |s: &str| SocketAddr::from_str(s).expect("addr");
        let net = |s: &str| IpNet::from_str(s).expect("net");
        let own = [
            net("93.184.215.14/32"),
            net("2606:4700::1/128"),
            net("198.51.100.0/24"),
        ];
        let found = vec![
            addr("93.184.215.14:0"),
            addr("[::ffff:93.184.215.14]:0"),
            addr("[64:ff9b::5db8:d70e]:0"),
            addr("[2606:4700::1]:0"),
            addr("198.51.100.77:0"),
            addr("93.184.215.15:0"),
        ];
        assert_eq!(public(found, &own), vec![addr("93.184.215.15:0")]);
        let ip = |s: &str| IpAddr::from_str(s).expect("ip");
        assert_eq!(refusal(ip("93.184.215.14"), &own), Some(Refused::Own));
        assert_eq!(refusal(ip("10.0.0.1"), &own), Some(Refused::NotPublic));
        assert_eq!(refusal(ip("93.184.215.15"), &own), None);
    }

    #[test]
    fn a_loopback_interface_makes_its_whole_prefix_the_nodes() {
        let own = own_addresses();
        assert!(is_own(IpAddr::from([127, 0, 0, 1]), &own), "{own:?}");
        assert!(is_own(IpAddr::from([127, 9, 8, 7]), &own), "{own:?}");
    }

    #[test]
    fn a_url_may_not_name_any_nat64_address() {
        let ip = |s: &str| IpAddr::from_str(s).expect("ip");
        assert!(refused_literal(ip("64:ff9b::5db8:d70e")));
        assert!(refused_literal(ip("2002:5db8:d70e::1")));
        assert!(!refused_literal(ip("2606:4700::1")));
        assert!(!refused_literal(ip("93.184.215.14")));
    }

    #[tokio::test]
    async fn a_name_that_resolves_only_to_loopback_is_refused() {
        let name = Name::from_str("localhost").expect("name");
        let resolved = PublicOnly.resolve(name).await;
        let error = resolved.err().expect("refused").to_string();
        assert!(error.contains("no public address"), "{error}");
    }
}
