//! Redirects per branded domain, for the domains the operator lists
//! (`SHORTENER_DOMAIN_METRICS`) and no others: a label per host would grow with every claim, so
//! the label values come from configuration only, never from a request.

use crate::metrics::{Sample, Samples};
use std::sync::atomic::{AtomicU64, Ordering};

/// The outcomes counted per domain, as the redirect metrics name them.
const OUTCOMES: [&str; 5] = ["redirect", "not_found", "gone", "blocked", "error"];

/// Per-domain redirect counts of the listed hosts.
#[derive(Debug, Default)]
pub struct DomainMetrics {
    hosts: Vec<(String, [AtomicU64; OUTCOMES.len()])>,
}

impl DomainMetrics {
    /// Counts for `hosts` (each put in a domain's normal form; one that cannot be a domain is
    /// left out: no request could name it).
    pub fn new(hosts: &[String]) -> Self {
        let mut listed: Vec<String> = hosts
            .iter()
            .filter_map(|h| crate::domain::path_host(h))
            .collect();
        listed.sort();
        listed.dedup();
        Self {
            hosts: listed
                .into_iter()
                .map(|h| (h, Default::default()))
                .collect(),
        }
    }

    /// Whether any host is listed (otherwise nothing is ever counted).
    pub fn any(&self) -> bool {
        !self.hosts.is_empty()
    }

    /// Counts one redirect request of `outcome` on `host`, if `host` is listed.
    pub fn count(&self, host: &str, outcome: &str) {
        let Some((_, counts)) = self.hosts.iter().find(|(h, _)| h == host) else {
            return;
        };
        if let Some(i) = OUTCOMES.iter().position(|o| *o == outcome) {
            counts[i].fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Sample for DomainMetrics {
    fn sample(&self, out: &mut Samples<'_, '_>) -> std::fmt::Result {
        out.counters(
            "shortener_domain_redirects",
            "Redirect requests on the branded domains listed in SHORTENER_DOMAIN_METRICS, by domain and outcome",
            self.hosts.iter().flat_map(|(host, counts)| {
                OUTCOMES.iter().zip(counts).map(move |(outcome, count)| {
                    (
                        [("domain", host.as_str()), ("outcome", *outcome)],
                        count.load(Ordering::Relaxed),
                    )
                })
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_hosts_are_counted() {
        let metrics = DomainMetrics::new(&["Go.Brand.Example.".into(), "not a host".into()]);
        assert!(metrics.any());
        metrics.count("go.brand.example", "redirect");
        metrics.count("go.brand.example", "redirect");
        metrics.count("go.brand.example", "not_found");
        metrics.count("other.example", "redirect");
        let counts: Vec<(&str, u64)> = metrics.hosts[0]
            .1
            .iter()
            .zip(OUTCOMES)
            .map(|(c, o)| (o, c.load(Ordering::Relaxed)))
            .collect();
        assert_eq!(metrics.hosts.len(), 1);
        assert_eq!(
            counts,
            [
                ("redirect", 2),
                ("not_found", 1),
                ("gone", 0),
                ("blocked", 0),
                ("error", 0)
            ]
        );
        assert!(!DomainMetrics::new(&[]).any());
    }
}
