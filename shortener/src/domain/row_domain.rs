//! The domain an import row names, and the hosts an import reads as the default domain: both
//! read as a create reads a domain, so that the two compare.

use super::{CreateRules, Error};

/// What an import row's `domain` names, read as a create reads a domain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RowDomain {
    /// None, or one of the node's own hosts: the default domain.
    #[default]
    Default,
    /// A host that may be one of the importer's tenant's domains.
    Host(String),
    /// Text no domain can be (an IP address, a URL), in lower case without a final dot: where
    /// the link answered elsewhere, which only an import's `default_hosts` can place.
    Unusable(String),
    /// The host of the row's short URL, for a row that names no domain: the importer's
    /// tenant's domain of that host if it has claimed one, else the default domain.
    IfClaimed(String),
}

impl RowDomain {
    /// `text` (else the short URL's host `short_host`) read with `rules`' own hosts.
    pub(super) fn read(text: Option<&str>, short_host: Option<&str>, rules: &CreateRules) -> Self {
        match text.map(without_port).filter(|t| !t.is_empty()) {
            None => match short_host.map(|host| rules.domain(Some(host))) {
                Some(Ok(Some(host))) => RowDomain::IfClaimed(host),
                _ => RowDomain::Default,
            },
            Some(text) => match rules.domain(Some(text)) {
                Ok(None) => RowDomain::Default,
                Ok(Some(host)) => RowDomain::Host(host),
                Err(_) => RowDomain::Unusable(plain_host(text)),
            },
        }
    }

    /// The host or text as an import's `default_hosts` names it.
    pub fn named(&self) -> Option<&str> {
        match self {
            RowDomain::Default => None,
            RowDomain::Host(text) | RowDomain::Unusable(text) | RowDomain::IfClaimed(text) => {
                Some(text)
            }
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            RowDomain::Default => 0,
            RowDomain::Host(text) | RowDomain::Unusable(text) | RowDomain::IfClaimed(text) => {
                text.len()
            }
        }
    }
}

/// `text` trimmed, without a `:port` after a host name, IPv4 address or bracketed IPv6 address
/// (`sho.example:443` is `sho.example`, `[::1]:8080` is `[::1]`): a domain is a host, whatever
/// port it was reached on.
pub fn without_port(text: &str) -> &str {
    let text = text.trim();
    match text.rsplit_once(':') {
        Some((host, port))
            if !host.is_empty()
                && (!host.contains(':') || (host.starts_with('[') && host.ends_with(']')))
                && !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit()) =>
        {
            host
        }
        _ => text,
    }
}

/// `text` as a host is compared: trimmed, without a final dot, in lower case (at most 253
/// characters kept).
pub fn plain_host(text: &str) -> String {
    let text = text.trim();
    let text = text.strip_suffix('.').unwrap_or(text);
    text.chars().take(253).collect::<String>().to_lowercase()
}

/// The most hosts an import's `default_hosts` names.
const MAX_DEFAULT_HOSTS: usize = 16;

/// The most characters an import's `default_hosts` holds, all hosts together.
const MAX_DEFAULT_HOSTS_CHARS: usize = 1024;

/// An import's `default_hosts`: the hosts that mean the default domain in its rows (the public
/// hosts of the deployment the rows come from), each read as a row's `domain` is (a host as a
/// create reads a domain, so `Bücher.example.` is `xn--bcher-kva.example`; other text, an IP
/// address, as [`plain_host`] writes it; a URL is its host). Blank entries are skipped; more
/// than [`MAX_DEFAULT_HOSTS`] hosts, more than 1,024 characters (a separator between entries
/// counted as one, so the HTTP import's comma-separated text is bounded as written), or an
/// entry holding a comma or a space (hosts given as one list entry each) is refused.
pub fn default_hosts<'a>(
    rules: &CreateRules,
    entries: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<String>, Error> {
    let refused = |why: String| Error::bad_request("invalid_query_parameter", why);
    let mut hosts = Vec::new();
    let mut chars = 0;
    for (i, entry) in entries.into_iter().enumerate() {
        chars += entry.chars().count() + usize::from(i > 0);
        if chars > MAX_DEFAULT_HOSTS_CHARS {
            return Err(refused(format!(
                "default_hosts holds at most {MAX_DEFAULT_HOSTS_CHARS} characters"
            )));
        }
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        if entry.contains(|c: char| c == ',' || c.is_whitespace()) {
            return Err(refused(format!(
                "default_hosts entry {} holds more than one host: name one host per entry",
                super::echo(entry)
            )));
        }
        if hosts.len() == MAX_DEFAULT_HOSTS {
            return Err(refused(format!(
                "default_hosts names at most {MAX_DEFAULT_HOSTS} hosts"
            )));
        }
        let url = entry
            .contains("://")
            .then(|| url::Url::parse(entry).ok())
            .flatten();
        let entry = url
            .as_ref()
            .and_then(|u| u.host_str())
            .unwrap_or_else(|| without_port(entry));
        hosts.push(match rules.domain(Some(entry)) {
            Ok(Some(host)) => host,
            _ => plain_host(entry),
        });
    }
    Ok(hosts)
}

/// The refusal of an import that names both a domain for every row and hosts that mean the
/// default domain in the rows: with the one, the rows' domains are not read.
pub fn both_domains() -> Error {
    Error::bad_request(
        "invalid_query_parameter",
        "domain puts every row on that domain whatever the rows name, so default_hosts (which \
         reads the rows' domains) cannot go with it: give one or the other",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::AnyHost;
    use std::sync::Arc;

    fn rules() -> CreateRules {
        CreateRules {
            max_url_length: 2048,
            targets: Arc::new(AnyHost),
            code_length: 7,
            own_hosts: Arc::from(["sho.rt".to_string()]),
            countries: true,
        }
    }

    fn read(text: &str) -> Result<Vec<String>, String> {
        default_hosts(&rules(), text.split(',')).map_err(|e| e.public_message())
    }

    #[test]
    fn default_hosts_are_read_as_row_domains_are() {
        assert_eq!(
            read(" https://Old.Example:8443/x , ,B\u{fc}cher.example.,192.0.2.1,OLD.example"),
            Ok(vec![
                "old.example".to_string(),
                "xn--bcher-kva.example".into(),
                "192.0.2.1".into(),
                "old.example".into(),
            ])
        );
        assert_eq!(read(""), Ok(vec![]));
        // A port is no part of a domain.
        assert_eq!(
            read("sho.example:443,192.0.2.1:80,[::1]:8080,http://[::1]:8080/,::1"),
            Ok(vec![
                "sho.example".to_string(),
                "192.0.2.1".into(),
                "[::1]".into(),
                "[::1]".into(),
                "::1".into()
            ])
        );
        // The node's own host is the default domain: named, it matches the rows naming it.
        assert_eq!(read("sho.rt"), Ok(vec!["sho.rt".to_string()]));
    }

    #[test]
    fn default_hosts_are_bounded_in_hosts_and_characters() {
        let hosts = |n: usize| (0..n).map(|i| format!("h{i}.example")).collect::<Vec<_>>();
        assert_eq!(read(&hosts(16).join(",")).map(|h| h.len()), Ok(16));
        let said = read(&hosts(17).join(",")).expect_err("17 hosts");
        assert!(said.contains("at most 16 hosts"), "{said}");
        // 1,024 characters as written, commas included; blank entries count too.
        let long = format!("{}.example", "a".repeat(1016));
        assert_eq!(read(&long).map(|h| h.len()), Ok(1));
        let said = read(&format!("{long},")).expect_err("1,025 characters");
        assert!(said.contains("1024 characters"), "{said}");
        assert!(read(&",".repeat(1100)).is_err(), "commas alone");
    }

    #[test]
    fn a_list_entry_holding_two_hosts_is_refused() {
        for entry in ["a.example,b.example", "a.example b.example"] {
            let said = default_hosts(&rules(), [entry])
                .expect_err(entry)
                .public_message();
            assert!(said.contains("one host per entry"), "{entry}: {said}");
        }
        assert_eq!(
            default_hosts(&rules(), [" a.example ", "", "B.example"])
                .map_err(|e| e.public_message()),
            Ok(vec!["a.example".to_string(), "b.example".into()])
        );
    }
}
