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

use crate::targets::is_not_public;
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

/// The addresses deliveries may not reach among those `host` resolves to now, looked up for
/// at most `wait`; empty when it resolves to none of them, does not resolve, or takes longer
/// (a delivery resolves it again anyway).
pub async fn refused_addresses_of(host: &str, wait: Duration) -> Vec<IpAddr> {
    match tokio::time::timeout(wait, tokio::net::lookup_host((host, 0))).await {
        Ok(Ok(found)) => found
            .map(|a| a.ip())
            .filter(|ip| refused_address(*ip))
            .collect(),
        _ => Vec::new(),
    }
}

/// The system resolver, keeping only the addresses deliveries may reach
/// ([`refused_address`]); a name with none is an error (the delivery counts as unreachable and
/// is retried like any other failure).
#[derive(Debug, Default, Clone, Copy)]
pub struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public = public(found);
            if public.is_empty() {
                return Err(format!("{host} resolves to no public address").into());
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// The addresses among `found` that deliveries may reach.
fn public(found: Vec<SocketAddr>) -> Vec<SocketAddr> {
    found
        .into_iter()
        .filter(|a| !refused_address(a.ip()))
        .collect()
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
            public(found),
            vec![
                addr("93.184.215.14:0"),
                addr("[2606:4700::1]:0"),
                addr("[64:ff9b::5db8:d70e]:0")
            ]
        );
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
