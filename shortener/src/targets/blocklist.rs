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

    /// The entries, sorted: `example.com`, or `.example.com` for one with its subdomains.
    pub fn entries(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .exact
            .iter()
            .cloned()
            .chain(self.with_subdomains.iter().map(|d| format!(".{d}")))
            .collect();
        all.sort_unstable();
        all
    }

    /// One entry in its canonical form (`*.x` and `x.` become `.x` and `x`), or why it is none.
    pub fn canonical(entry: &str) -> Result<String, String> {
        let list = Self::parse(entry.lines().next().unwrap_or(""))?;
        match list.entries().as_slice() {
            [one] if !entry.contains('\n') => Ok(one.clone()),
            _ => Err(format!(
                "{} is not one domain (`example.com` or `.example.com`)",
                crate::domain::echo(entry)
            )),
        }
    }

    /// This list and `other` together.
    pub fn union(&self, other: &Blocklist) -> Blocklist {
        Blocklist {
            exact: self.exact.union(&other.exact).cloned().collect(),
            with_subdomains: self
                .with_subdomains
                .union(&other.with_subdomains)
                .cloned()
                .collect(),
        }
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
        assert_eq!(
            list.entries(),
            [".campaign.test", ".other.test", "evil.example"]
        );
        for (entry, canonical) in [
            ("*.Evil.Test.", ".evil.test"),
            ("x.test", "x.test"),
            (".y.test", ".y.test"),
        ] {
            assert_eq!(Blocklist::canonical(entry).as_deref(), Ok(canonical));
        }
        for bad in ["", "# comment", "a b", "a.test\nb.test"] {
            assert!(Blocklist::canonical(bad).is_err(), "{bad:?}");
        }
        let both = list.union(&Blocklist::parse("more.test").expect("valid"));
        assert_eq!(both.len(), 4);
    }
}
