//! Which addresses are not public: loopback, link-local, private, unique-local, and the other
//! special-purpose ranges a link from the internet has no business reaching.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether `ip` is loopback or unspecified (always this machine).
pub fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_unspecified(),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => is_local(IpAddr::V4(v4)),
            None => v6.is_loopback() || v6.is_unspecified(),
        },
    }
}

/// Whether `ip` is outside the public internet: loopback, unspecified, private (RFC 1918),
/// shared (CGNAT), link-local (cloud metadata services live there), benchmarking, reserved,
/// broadcast or multicast; for IPv6 also unique-local and link-local, and any IPv4 address it
/// embeds (mapped, compatible, NAT64) by the IPv4 rules.
pub fn is_not_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_not_public(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => v4_not_public(v4),
            None => {
                let first = v6.segments()[0];
                v6.is_loopback()
                    || v6.is_unspecified()
                    || v6.is_multicast()
                    || (first & 0xfe00) == 0xfc00 // unique-local fc00::/7
                    || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
                    || (first & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated)
                    || first == 0x2001 && v6.segments()[1] == 0x0db8 // documentation
            }
        },
    }
}

fn v4_not_public(v4: Ipv4Addr) -> bool {
    let [a, b, ..] = v4.octets();
    v4.is_loopback()
        || v4.is_unspecified()
        || v4.is_private()
        || v4.is_link_local()
        || v4.is_broadcast()
        || v4.is_multicast()
        || v4.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && v4.octets()[2] == 0) // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || a >= 240 // reserved
}

/// The IPv4 address an IPv6 address stands for: IPv4-mapped (`::ffff:a.b.c.d`),
/// IPv4-compatible (`::a.b.c.d`, deprecated) and the NAT64 well-known prefix (`64:ff9b::/96`).
pub fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = v6.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if s[..6] == [0, 0, 0, 0, 0, 0] && !v6.is_loopback() && !v6.is_unspecified() {
        return Some(low);
    }
    (s[..6] == [0x64, 0xff9b, 0, 0, 0, 0]).then_some(low)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_ranges_are_not_public_and_the_internet_is() {
        for ip in [
            "127.0.0.1",
            "127.9.9.9",
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.0.8",
            "198.18.0.1",
            "240.0.0.1",
            "::1",
            "::",
            "fd00::1",
            "fc00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::10.0.0.1",
            "64:ff9b::a00:1",
            "ff02::1",
            "2001:db8::1",
            "192.0.2.1",
        ] {
            assert!(
                is_not_public(ip.parse().expect(ip)),
                "{ip} counted as public"
            );
        }
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(
                !is_not_public(ip.parse().expect(ip)),
                "{ip} counted as not public"
            );
        }
        assert!(is_local("::ffff:127.0.0.1".parse().expect("ip")));
        assert!(!is_local("10.0.0.1".parse().expect("ip")));
    }
}
