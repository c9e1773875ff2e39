//! What a deployment refuses to link to, beyond what no target may be (`domain::TargetUrl`).
//!
//! - **Its own hosts and addresses**, always: the public host and any extra short domains, with
//!   their subdomains; the loopback names (`localhost`, `localhost.localdomain`,
//!   `ip6-localhost`, ... [`LOOPBACK_NAMES`]) and their subdomains; loopback and unspecified
//!   addresses and the addresses the node listens on. Hosts are compared as the WHATWG parser
//!   gives them, so every spelling it accepts (decimal, octal or hex IPv4, IPv4-mapped IPv6,
//!   upper case, trailing dots) is caught.
//! - **Private ranges**, when configured (on in the Kubernetes manifests): loopback, link-local,
//!   private, shared, unique-local and other non-public ranges (`ranges`), cloud metadata host
//!   names and private-use names (`.internal`, `.local`, ...). Names are not resolved: a public
//!   name that resolves to a private address is not caught here (egress policy's job).
//! - **The operator's blocklist** (`blocklist`), a file re-read when it changes: refused for
//!   new links, and existing links to a listed domain answer as blocked on the next redirect
//!   ([`TargetRules::generation`] tells the redirect cache to drop what it knew). Entries added
//!   through the admin API are kept in the store; [`BlocklistService`] (`service`) owns them
//!   and the rules between them and the file's.

mod blocklist;
mod ranges;
mod service;
pub use ranges::{embedded_v4, is_not_public};

pub use blocklist::Blocklist;
pub use service::{BlockSource, BlockedEntry, BlocklistService, Unblocked};

use crate::domain::{TargetPolicy, UrlError};
use crate::watch::{ReloadCounters, ReloadSeries};
use arc_swap::ArcSwap;
use blocklist::normalise;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Names that mean this machine wherever they are resolved (the usual `/etc/hosts` entries):
/// refused with their subdomains, as the node's own hosts are, whatever the settings.
pub const LOOPBACK_NAMES: &[&str] = &[
    "localhost",
    "localhost.localdomain",
    "localhost4",
    "localhost4.localdomain4",
    "localhost6",
    "localhost6.localdomain6",
    "ip6-localhost",
    "ip6-loopback",
];

/// Whether `domain` (normalised: lower case, no trailing dot) is a loopback name or one of its
/// subdomains.
fn is_loopback_name(domain: &str) -> bool {
    LOOPBACK_NAMES.iter().any(|name| {
        domain == *name
            || domain
                .strip_suffix(name)
                .is_some_and(|rest| rest.ends_with('.'))
    })
}

/// Host names of cloud metadata services, refused with the private ranges.
const METADATA_HOSTS: &[&str] = &[
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "metadata.azure.com",
    "instance-data",
    "instance-data.ec2.internal",
];

/// Suffixes of names for private use, refused with the private ranges.
const PRIVATE_SUFFIXES: &[&str] = &[
    "internal",
    "local",
    "localdomain",
    "home.arpa",
    "lan",
    "intranet",
];

/// How a deployment is configured to treat targets.
#[derive(Debug, Clone, Default)]
pub struct TargetSettings {
    /// The public host and any extra short domains.
    pub own_hosts: Vec<String>,
    /// The addresses the node listens on.
    pub own_ips: Vec<IpAddr>,
    /// Refuse private, link-local, unique-local and metadata targets.
    pub refuse_private: bool,
    /// The blocklist file, if any.
    pub blocklist_file: Option<PathBuf>,
}

/// The target rules in force; the blocklist is swapped whole on reload.
pub struct TargetRules {
    own_hosts: Vec<String>,
    own_ips: Vec<IpAddr>,
    refuse_private: bool,
    /// The file's entries and the stored ones together: what is in force.
    blocklist: ArcSwap<Blocklist>,
    /// The file's entries.
    from_file: ArcSwap<Blocklist>,
    /// The entries added through the admin API (kept in the store).
    stored: ArcSwap<Blocklist>,
    generation: Arc<AtomicU64>,
    file: Option<PathBuf>,
    reloads: Arc<ReloadCounters>,
}

impl TargetRules {
    /// The rules of `settings`, with the blocklist file read (refused if it cannot be).
    pub fn load(settings: TargetSettings) -> Result<Self, String> {
        let rules = Self {
            own_hosts: settings.own_hosts.iter().map(|h| normalise(h)).collect(),
            own_ips: settings.own_ips,
            refuse_private: settings.refuse_private,
            blocklist: ArcSwap::from_pointee(Blocklist::default()),
            from_file: ArcSwap::from_pointee(Blocklist::default()),
            stored: ArcSwap::from_pointee(Blocklist::default()),
            generation: Arc::default(),
            file: settings.blocklist_file,
            reloads: Arc::new(ReloadCounters::new(ReloadSeries {
                name: "shortener_blocklist_reloads",
                applied_help: "Reloads of the blocklist that replaced the one in force",
                refused_help: "Reloads of the blocklist refused because it did not parse (the one in force stayed)",
            })),
        };
        rules.reload()?;
        Ok(rules)
    }

    /// Re-reads the blocklist file; returns how many entries are now in force.
    pub fn reload(&self) -> Result<usize, String> {
        let Some(path) = &self.file else {
            return Ok(0);
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("read blocklist {}: {e}", path.display()))?;
        let list =
            Blocklist::parse(&text).map_err(|e| format!("blocklist {}: {e}", path.display()))?;
        let count = list.len();
        self.from_file.store(Arc::new(list));
        self.apply();
        Ok(count)
    }

    /// Puts the file's and the stored entries in force together; bumps the generation.
    fn apply(&self) {
        let merged = self.from_file.load().union(&self.stored.load());
        self.blocklist.store(Arc::new(merged));
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Replaces the entries kept in the store (added through the admin API); a list equal to
    /// the one in force changes nothing (the redirect cache keeps its answers).
    pub fn set_stored(&self, list: Blocklist) {
        if **self.stored.load() != list {
            self.stored.store(Arc::new(list));
            self.apply();
        }
    }

    /// The entries of the blocklist file.
    pub fn file_entries(&self) -> Vec<String> {
        self.from_file.load().entries()
    }

    /// Bumped at every blocklist change: a cached answer made under another generation is
    /// stale.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The generation counter itself, for the redirect cache to compare its answers against.
    pub fn generation_source(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.generation)
    }

    /// The counts of blocklist reloads applied and refused (a part of `/metrics`).
    pub fn reloads(&self) -> Arc<ReloadCounters> {
        Arc::clone(&self.reloads)
    }

    /// Whether a stored target URL points at a blocked domain.
    pub fn blocks_stored(&self, url: &str) -> bool {
        match url::Url::parse(url)
            .ok()
            .as_ref()
            .and_then(url::Url::host_str)
        {
            Some(host) => self.blocklist.load().blocks(host).is_some(),
            None => false,
        }
    }

    /// Re-reads the blocklist whenever it changes or on SIGHUP (see [`crate::watch`]).
    pub async fn watch(self: Arc<Self>, every: Duration, stop: CancellationToken) {
        let Some(path) = self.file.clone() else {
            return;
        };
        let rules = Arc::clone(&self);
        let reload = move || rules.reload().map(|count| format!("{count} entries"));
        crate::watch::watch_file(path, "blocklist", every, &self.reloads, reload, stop).await;
    }

    /// The rules for webhook endpoint URLs, which the node itself requests: private,
    /// loopback, link-local and metadata hosts are refused whatever `refuse_private` says for
    /// links, unless `allow_private` (the operator's `SHORTENER_WEBHOOK_ALLOW_PRIVATE`) lifts
    /// exactly that rule; the node's own public hosts and the blocklist apply either way.
    pub fn for_webhooks(&self, allow_private: bool) -> WebhookTargets<'_> {
        WebhookTargets {
            rules: self,
            allow_private,
        }
    }

    fn check_domain(&self, domain: &str, refuse_private: bool) -> Result<(), UrlError> {
        let domain = normalise(domain);
        let within = |base: &str| domain == base || domain.ends_with(&format!(".{base}"));
        if is_loopback_name(&domain) || self.own_hosts.iter().any(|own| within(own)) {
            return Err(UrlError::OwnDomain);
        }
        if refuse_private
            && (METADATA_HOSTS.contains(&domain.as_str())
                || PRIVATE_SUFFIXES.iter().any(|s| within(s)))
        {
            return Err(UrlError::PrivateAddress);
        }
        match self.blocklist.load().blocks(&domain) {
            Some(entry) => Err(UrlError::Blocked(entry)),
            None => Ok(()),
        }
    }

    fn check_ip(&self, ip: IpAddr) -> Result<(), UrlError> {
        let ip = ip.to_canonical();
        if ranges::is_local(ip) || self.own_ips.contains(&ip) {
            return Err(UrlError::OwnDomain);
        }
        if self.refuse_private && ranges::is_not_public(ip) {
            return Err(UrlError::PrivateAddress);
        }
        Ok(())
    }
}

impl TargetPolicy for TargetRules {
    fn check_host(&self, host: url::Host<&str>) -> Result<(), UrlError> {
        match host {
            url::Host::Domain(domain) => self.check_domain(domain, self.refuse_private),
            url::Host::Ipv4(v4) => self.check_ip(IpAddr::V4(v4)),
            url::Host::Ipv6(v6) => self.check_ip(IpAddr::V6(v6)),
        }
    }
}

/// [`TargetRules`] as they apply to webhook endpoint URLs (see [`TargetRules::for_webhooks`]).
pub struct WebhookTargets<'a> {
    rules: &'a TargetRules,
    allow_private: bool,
}

impl TargetPolicy for WebhookTargets<'_> {
    fn check_host(&self, host: url::Host<&str>) -> Result<(), UrlError> {
        let ip = match host {
            url::Host::Domain(domain) => {
                return if self.allow_private {
                    // Local names are allowed with the private ranges; the rest still holds.
                    if is_loopback_name(&normalise(domain)) {
                        Ok(())
                    } else {
                        self.rules.check_domain(domain, false)
                    }
                } else {
                    self.rules.check_domain(domain, true)
                };
            }
            url::Host::Ipv4(v4) => IpAddr::V4(v4),
            url::Host::Ipv6(v6) => IpAddr::V6(v6),
        }
        .to_canonical();
        if self.allow_private {
            Ok(())
        } else if ranges::is_local(ip) || ranges::is_not_public(ip) {
            Err(UrlError::PrivateAddress)
        } else if self.rules.own_ips.contains(&ip) {
            Err(UrlError::OwnDomain)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::TargetUrl;

    fn rules(refuse_private: bool, blocklist: &str) -> (tempfile::TempDir, TargetRules) {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("blocklist");
        std::fs::write(&file, blocklist).expect("write");
        let rules = TargetRules::load(TargetSettings {
            own_hosts: vec!["sho.rt".into(), "Go.Example".into()],
            own_ips: vec!["203.0.113.10".parse().expect("ip")],
            refuse_private,
            blocklist_file: Some(file),
        })
        .expect("load");
        (dir, rules)
    }

    fn refused(rules: &TargetRules, url: &str) -> Option<UrlError> {
        TargetUrl::parse(url, 2048, rules).err()
    }

    #[test]
    fn own_hosts_and_addresses_are_refused_in_every_spelling() {
        let (_dir, rules) = rules(false, "");
        for url in [
            "https://sho.rt/x",
            "https://SHO.RT./x",
            "https://www.sho.rt/x",
            "https://go.example/x",
            "http://localhost/",
            "http://sub.localhost./",
            "http://LOCALHOST.localdomain./",
            "http://a.localhost.localdomain/",
            "http://localhost6/",
            "http://ip6-localhost/",
            "http://ip6-loopback./",
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://0.0.0.0/",
            "http://203.0.113.10/",
        ] {
            assert_eq!(refused(&rules, url), Some(UrlError::OwnDomain), "{url}");
        }
        // Without the private option, private ranges are allowed.
        for url in [
            "http://10.0.0.1/",
            "http://169.254.169.254/",
            "https://sho.rt.example/",
            "https://example.com/",
            "https://notlocalhost/",
            "https://localhost.example.com/",
            "https://my-ip6-localhost.example/",
        ] {
            assert_eq!(refused(&rules, url), None, "{url}");
        }
    }

    #[test]
    fn private_ranges_and_metadata_names_are_refused_when_configured() {
        let (_dir, rules) = rules(true, "");
        for url in [
            "http://169.254.169.254/latest/meta-data/",
            "http://10.1.2.3/",
            "http://172.16.0.9/",
            "http://192.168.0.1/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "http://100.64.0.1/",
            "http://[::ffff:10.0.0.1]/",
            "http://metadata.google.internal/",
            "http://metadata/",
            "http://printer.local/",
            "http://db.corp.internal/",
            "http://2852039166/",
        ] {
            assert_eq!(
                refused(&rules, url),
                Some(UrlError::PrivateAddress),
                "{url}"
            );
        }
        assert_eq!(refused(&rules, "https://example.com/"), None);
        assert_eq!(refused(&rules, "http://8.8.8.8/"), None);
    }

    #[test]
    fn blocked_domains_are_refused_and_reloads_move_the_generation() {
        let (dir, rules) = rules(false, ".phish.test\n");
        assert_eq!(
            refused(&rules, "https://login.phish.test/"),
            Some(UrlError::Blocked("phish.test".into()))
        );
        assert!(rules.blocks_stored("https://phish.test/a"));
        let generation = rules.generation();
        std::fs::write(dir.path().join("blocklist"), "other.test\n").expect("write");
        rules.reload().expect("reload");
        assert!(rules.generation() > generation);
        assert!(!rules.blocks_stored("https://phish.test/a"));
        assert!(rules.blocks_stored("https://other.test/"));
        std::fs::write(dir.path().join("blocklist"), "not a domain\n").expect("write");
        assert!(rules.reload().is_err());
        assert!(
            rules.blocks_stored("https://other.test/"),
            "a refused file changes nothing"
        );
    }
}
