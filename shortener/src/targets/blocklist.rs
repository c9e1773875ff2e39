//! The operator's blocklist of target domains: one per line, `example.com` for that domain
//! alone, `.example.com` or `*.example.com` for it and every subdomain; `#` comments.

use std::collections::HashSet;

/// Blocked domains.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Blocklist {
    exact: HashSet<String>,
    with_subdomains: HashSet<String>,
}

/// A domain as compared: lower case, without trailing dots.
pub fn normalise(domain: &str) -> String {
    domain.trim().trim_end_matches('.').to_ascii_lowercase()
}

impl Blocklist {
    /// The blocklist in a file's `text`; a line that is no domain is refused, naming it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut list = Self::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (domain, subdomains) =
                match line.strip_prefix("*.").or_else(|| line.strip_prefix('.')) {
                    Some(rest) => (rest, true),
                    None => (line, false),
                };
            let domain = normalise(domain);
            let valid = !domain.is_empty()
                && domain.len() <= 253
                && domain.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                });
            if !valid {
                return Err(format!(
                    "line {}: {} is not a domain (`example.com`, `.example.com` or `*.example.com`)",
                    n + 1,
                    crate::domain::echo(line)
                ));
            }
            if subdomains {
                list.with_subdomains.insert(domain);
            } else {
                list.exact.insert(domain);
            }
        }
        Ok(list)
    }

    /// How many entries the list holds.
    pub fn len(&self) -> usize {
        self.exact.len() + self.with_subdomains.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry that blocks `host`, if any.
    pub fn blocks(&self, host: &str) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let host = normalise(host);
        if self.exact.contains(&host) {
            return Some(host);
        }
        let mut rest = host.as_str();
        loop {
            if self.with_subdomains.contains(rest) {
                return Some(rest.to_string());
            }
            match rest.split_once('.') {
                Some((_, parent)) => rest = parent,
                None => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_entries_block_one_domain_and_suffix_entries_its_subdomains_too() {
        let list = Blocklist::parse("# phishing\nevil.example\n.campaign.test\n*.Other.Test.\n")
            .expect("valid");
        assert_eq!(list.len(), 3);
        for (host, blocked) in [
            ("evil.example", true),
            ("EVIL.example.", true),
            ("www.evil.example", false),
            ("campaign.test", true),
            ("a.b.campaign.test", true),
            ("notcampaign.test", false),
            ("x.other.test", true),
            ("example", false),
        ] {
            assert_eq!(list.blocks(host).is_some(), blocked, "{host}");
        }
        for bad in ["not a domain", "*.", "a..b", "http://x.test/"] {
            assert!(Blocklist::parse(bad).is_err(), "{bad}");
        }
    }
}
