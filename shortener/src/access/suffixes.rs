//! Which hosts a tenant's own keys may claim as domains: the host suffixes the operator allows
//! each tenant (`SHORTENER_DOMAIN_SUFFIXES`). An `admin` key needs none.

use super::check_name;
use crate::domain::normalise_host;
use std::collections::BTreeMap;

/// The host suffixes allowed per tenant. A suffix covers itself and every host under it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DomainSuffixes {
    by_tenant: BTreeMap<String, Vec<String>>,
}

impl DomainSuffixes {
    /// Parses `tenant=suffix` entries (a tenant may have several); a suffix is a host name,
    /// normalised as a domain's host is (`Brand.COM.` is `brand.com`). Refused with the entry
    /// named: no `=`, a bad tenant name, a suffix that is no host name.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        let mut by_tenant: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for entry in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
            let (tenant, suffix) = entry
                .split_once('=')
                .ok_or_else(|| format!("{} is not tenant=suffix", crate::domain::echo(entry)))?;
            check_name("tenant", tenant.trim(), false)?;
            let suffix = normalise_host(suffix.trim(), &[])
                .map_err(|e| format!("the suffix of {}: {e}", crate::domain::echo(entry)))?;
            by_tenant
                .entry(tenant.trim().to_string())
                .or_default()
                .push(suffix);
        }
        Ok(Self { by_tenant })
    }

    /// Whether `tenant` may claim `host` (normalised): it is one of the tenant's suffixes or
    /// under one.
    pub fn covers(&self, tenant: &str, host: &str) -> bool {
        self.by_tenant.get(tenant).is_some_and(|suffixes| {
            suffixes.iter().any(|s| {
                host == s
                    || host
                        .strip_suffix(s.as_str())
                        .is_some_and(|rest| rest.ends_with('.'))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_suffix_covers_itself_and_hosts_under_it_for_its_tenant_only() {
        let s = DomainSuffixes::parse(&entries(&[
            "marketing=Brand.COM.",
            "marketing=go.brand.net",
            "sales=sales.example",
        ]))
        .expect("parse");
        for (tenant, host, covered) in [
            ("marketing", "brand.com", true),
            ("marketing", "go.brand.com", true),
            ("marketing", "a.b.brand.com", true),
            ("marketing", "notbrand.com", false),
            ("marketing", "brand.com.evil.example", false),
            ("marketing", "go.brand.net", true),
            ("marketing", "brand.net", false),
            ("sales", "go.brand.com", false),
            ("other", "brand.com", false),
        ] {
            assert_eq!(s.covers(tenant, host), covered, "{tenant} {host}");
        }
    }

    #[test]
    fn bad_entries_are_refused_by_name() {
        for bad in [
            "brand.com",
            "Marketing=brand.com",
            "marketing=*.brand.com",
            "marketing=127.0.0.1",
            "marketing=",
        ] {
            let error = DomainSuffixes::parse(&entries(&[bad])).expect_err(bad);
            assert!(!error.is_empty(), "{bad}");
        }
    }
}
