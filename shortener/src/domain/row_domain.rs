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
        match text.map(str::trim).filter(|t| !t.is_empty()) {
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
/// than [`MAX_DEFAULT_HOSTS`] hosts, or more than 1,024 characters, is refused.
pub fn default_hosts<'a>(
    rules: &CreateRules,
    entries: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<String>, Error> {
    let refused = || {
        Error::bad_request(
            "invalid_query_parameter",
            format!(
                "default_hosts names at most {MAX_DEFAULT_HOSTS} hosts of at most \
                 {MAX_DEFAULT_HOSTS_CHARS} characters in all"
            ),
        )
    };
    let mut hosts = Vec::new();
    let mut chars = 0;
    for entry in entries {
        chars += entry.chars().count();
        if chars > MAX_DEFAULT_HOSTS_CHARS {
            return Err(refused());
        }
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        if hosts.len() == MAX_DEFAULT_HOSTS {
            return Err(refused());
        }
        let url = entry
            .contains("://")
            .then(|| url::Url::parse(entry).ok())
            .flatten();
        let entry = url.as_ref().and_then(|u| u.host_str()).unwrap_or(entry);
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
