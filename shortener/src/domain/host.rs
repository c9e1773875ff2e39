//! Host names of branded domains: one normal form (lower case, IDNA to ASCII, no trailing
//! dot), and the rules a host must pass before a tenant may own it.

use super::Error;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The longest host name, in bytes (of its ASCII form, without a trailing dot).
pub const MAX_HOST: usize = 253;

/// The longest label of a host name, in bytes.
pub const MAX_LABEL: usize = 63;

/// Names that mean the machine that resolves them, with their subdomains: never a domain.
const LOOPBACK_NAMES: &[&str] = &[
    "localhost",
    "localhost.localdomain",
    "localhost4",
    "localhost6",
    "ip6-localhost",
    "ip6-loopback",
];

fn invalid(message: impl Into<String>) -> Error {
    Error::invalid("invalid_host", message)
}

/// The normal form of `input` as a domain's host: lower case, IDNA to ASCII (punycode), one
/// trailing dot stripped. Refused (each with its code, a 422): anything but a bare host name
/// (`invalid_host`: a port, user info, a path, a query or fragment, a wildcard, an empty
/// label, a single label, characters no host name has, invalid IDNA), an IP literal in any
/// spelling (`ip_host`), a label over 63 or a name over 253 bytes (`host_too_long`), a loopback
/// name or one of `reserved` (the node's own hosts, normalised) (`reserved_host`).
pub fn normalise_host(input: &str, reserved: &[String]) -> Result<String, Error> {
    let host = bare_host(input)?;
    let ascii = idna::domain_to_ascii_cow(host.as_bytes(), idna::AsciiDenyList::STD3)
        .map_err(|_| invalid("the host is not a valid internationalised domain name"))?
        .into_owned();
    let labels: Vec<&str> = ascii.split('.').collect();
    if labels.iter().any(|l| l.is_empty()) {
        return Err(invalid("the host has an empty label"));
    }
    let letters_digits_hyphens = |l: &str| {
        l.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !labels.iter().all(|l| letters_digits_hyphens(l)) {
        return Err(invalid(
            "each label of the host is letters, digits and inner hyphens",
        ));
    }
    if labels.len() < 2 {
        return Err(invalid(
            "the host needs at least two labels (a name under a public suffix)",
        ));
    }
    if ascii.parse::<Ipv4Addr>().is_ok() || last_label_is_number(labels[labels.len() - 1]) {
        return Err(Error::invalid(
            "ip_host",
            "the host is an IP address (or ends in a number, which URLs read as one)",
        ));
    }
    if let Some(label) = labels.iter().find(|l| l.len() > MAX_LABEL) {
        return Err(Error::invalid(
            "host_too_long",
            format!(
                "a label of the host is {} bytes long; at most {MAX_LABEL} are allowed",
                label.len()
            ),
        ));
    }
    if ascii.len() > MAX_HOST {
        return Err(Error::invalid(
            "host_too_long",
            format!(
                "the host is {} bytes long; at most {MAX_HOST} are allowed",
                ascii.len()
            ),
        ));
    }
    let loopback = LOOPBACK_NAMES
        .iter()
        .any(|n| ascii == *n || ascii.ends_with(&format!(".{n}")));
    if loopback || reserved.contains(&ascii) {
        return Err(Error::invalid(
            "reserved_host",
            "the host is this shortener's own host, one of its short domains, or a loopback name",
        ));
    }
    Ok(ascii)
}

/// The host of a path (`/api/v1/domains/{host}`) in its normal form, or `None` when no domain
/// can have it (the caller answers as for an unknown domain).
pub fn path_host(input: &str) -> Option<String> {
    normalise_host(input, &[]).ok()
}

/// `input` with one trailing dot stripped, once it is known to be nothing but a host name.
fn bare_host(input: &str) -> Result<&str, Error> {
    if input.is_empty() {
        return Err(invalid("the host is empty"));
    }
    if input.starts_with('[') || input.parse::<Ipv6Addr>().is_ok() {
        return Err(Error::invalid("ip_host", "the host is an IPv6 address"));
    }
    let refusal = if input.contains("://") || input.contains('/') || input.contains('\\') {
        Some("a host, not a URL or path, is expected")
    } else if input.contains('@') {
        Some("the host may not carry user info")
    } else if input.contains(':') {
        Some("the host may not carry a port")
    } else if input.contains('?') || input.contains('#') {
        Some("the host may not carry a query or fragment")
    } else if input.contains('*') {
        Some("wildcard hosts are not domains: claim each host")
    } else if input.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("the host contains spaces or control characters")
    } else {
        None
    };
    if let Some(message) = refusal {
        return Err(invalid(message));
    }
    Ok(input.strip_suffix('.').unwrap_or(input))
}

/// Whether the last label is a number as the WHATWG URL parser reads one (decimal, or `0x`
/// hex): such a host is parsed as an IPv4 address, never looked up as a name.
fn last_label_is_number(label: &str) -> bool {
    let hex = label
        .strip_prefix("0x")
        .is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_hexdigit()));
    hex || label.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reserved() -> Vec<String> {
        vec!["sho.rt".to_string(), "go.sho.rt".to_string()]
    }

    #[test]
    fn good_hosts_table() {
        let long_label = "a".repeat(63);
        let long_host = format!("{0}.{0}.{0}.{1}.com", long_label, "b".repeat(57));
        assert_eq!(long_host.len(), 253);
        let table: &[(&str, &str)] = &[
            ("go.brand.com", "go.brand.com"),
            ("Go.Brand.COM", "go.brand.com"),
            ("go.brand.com.", "go.brand.com"),
            ("bücher.example", "xn--bcher-kva.example"),
            ("BÜCHER.example.", "xn--bcher-kva.example"),
            ("xn--bcher-kva.example", "xn--bcher-kva.example"),
            ("例え.テスト", "xn--r8jz45g.xn--zckzah"),
            ("a-b.c0.example", "a-b.c0.example"),
            ("brand.sho.rt", "brand.sho.rt"),
            (&long_host, &long_host),
            (&format!("{long_label}.com"), &format!("{long_label}.com")),
        ];
        for (input, want) in table {
            assert_eq!(
                normalise_host(input, &reserved()).as_deref().ok(),
                Some(*want),
                "{input}"
            );
        }
    }

    #[test]
    fn bad_hosts_table() {
        let long_label = format!("{}.com", "a".repeat(64));
        let long_host = format!("{}.com", vec!["a".repeat(60); 5].join("."));
        let just_over = format!("{0}.{0}.{0}.{1}.coma", "a".repeat(63), "b".repeat(57));
        assert_eq!(just_over.len(), 254);
        let table: &[(&str, &str)] = &[
            ("", "invalid_host"),
            (".", "invalid_host"),
            ("brand", "invalid_host"),
            ("go..brand.com", "invalid_host"),
            (".brand.com", "invalid_host"),
            ("go.brand.com..", "invalid_host"),
            ("go.brand.com:8080", "invalid_host"),
            ("user@go.brand.com", "invalid_host"),
            ("user:pw@go.brand.com", "invalid_host"),
            ("go.brand.com/path", "invalid_host"),
            ("https://go.brand.com", "invalid_host"),
            ("go.brand.com?q=1", "invalid_host"),
            ("go.brand.com#top", "invalid_host"),
            ("*.brand.com", "invalid_host"),
            ("go brand.com", "invalid_host"),
            ("go\tbrand.com", "invalid_host"),
            ("go_brand.com", "invalid_host"),
            ("xn--a.example", "invalid_host"),
            ("-go.brand.com", "invalid_host"),
            ("127.0.0.1", "ip_host"),
            ("10.1.2.3.", "ip_host"),
            ("0x7f.1", "ip_host"),
            ("brand.123", "ip_host"),
            ("::1", "ip_host"),
            ("[::1]", "ip_host"),
            ("[2001:db8::1]:80", "ip_host"),
            ("2001:db8::1", "ip_host"),
            (&long_label, "host_too_long"),
            (&long_host, "host_too_long"),
            (&just_over, "host_too_long"),
            ("sho.rt", "reserved_host"),
            ("SHO.RT.", "reserved_host"),
            ("go.sho.rt", "reserved_host"),
            ("localhost.localdomain", "reserved_host"),
            ("x.localhost", "reserved_host"),
        ];
        for (input, code) in table {
            match normalise_host(input, &reserved()) {
                Err(error) => assert_eq!(error.code(), *code, "{input:?}: {error}"),
                Ok(host) => panic!("{input:?} was accepted as {host:?}"),
            }
        }
    }

    #[test]
    fn a_path_host_is_the_normal_form_or_none() {
        assert_eq!(path_host("Go.Brand.com.").as_deref(), Some("go.brand.com"));
        assert_eq!(path_host("sho.rt").as_deref(), Some("sho.rt"));
        assert_eq!(path_host("127.0.0.1"), None);
    }
}
