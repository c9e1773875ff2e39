//! Settings of one part of the node (`Redirects and targets` in `--help`).

use super::ConfigError;
use axum::http::StatusCode;
use clap::Args;
use std::num::{NonZeroU32, NonZeroU64};
use std::path::PathBuf;
use std::time::Duration;

/// The default bound of the redirect cache's links: a million links of 60-byte URLs at 243
/// bytes each is 232 MiB (docs/shortener.md, "What a cached link costs").
pub const DEFAULT_CACHE_BYTES: u64 = 240 * 1024 * 1024;

/// The default bound of the unknown codes remembered.
pub const DEFAULT_NEGATIVE_CACHE_BYTES: u64 = 4 * 1024 * 1024;

/// How redirects answer, what targets are accepted, and the link cache.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Redirects and targets")]
pub struct RedirectConfig {
    /// Status of a link whose target domain is on the blocklist: 403, 404, 410 or 451.
    #[arg(long, env = "SHORTENER_BLOCKED_STATUS", default_value = "410", value_parser = blocked_status)]
    pub blocked_status: StatusCode,
    /// File of blocked target domains, one per line (`example.com`; `.example.com` or
    /// `*.example.com` for a domain and all its subdomains): refused for new links, and
    /// existing links to them answer SHORTENER_BLOCKED_STATUS. Re-read when it changes.
    #[arg(long, env = "SHORTENER_BLOCKLIST_FILE")]
    pub blocklist_file: Option<PathBuf>,
    /// Refuse targets in loopback, link-local, private and unique-local ranges and cloud
    /// metadata host names.
    #[arg(long, env = "SHORTENER_REFUSE_PRIVATE_TARGETS", default_value = "false", value_parser = otel::parse_switch, action = clap::ArgAction::Set)]
    pub refuse_private_targets: bool,
    /// Redirect status: 301, 302, 307 or 308.
    #[arg(long, env = "SHORTENER_REDIRECT_STATUS", default_value = "302", value_parser = redirect_status)]
    pub redirect_status: StatusCode,
    /// Longest accepted target URL, in bytes.
    #[arg(long, env = "SHORTENER_MAX_URL_LENGTH", default_value_t = crate::domain::DEFAULT_MAX_URL_LENGTH)]
    pub max_url_length: usize,
    /// Memory bound of the redirect cache's links, in bytes, everything counted (a link with a
    /// 60-byte URL weighs 243 bytes, so the default holds a million such links).
    #[arg(long, env = "SHORTENER_CACHE_BYTES", default_value_t = DEFAULT_CACHE_BYTES, value_parser = super::parse_bytes)]
    pub cache_bytes: u64,
    /// Memory bound of the unknown codes the redirect cache remembers, in bytes (about 100
    /// bytes a code; kept apart from the links, so a storm of unknown codes never evicts one).
    #[arg(long, env = "SHORTENER_NEGATIVE_CACHE_BYTES", default_value_t = DEFAULT_NEGATIVE_CACHE_BYTES, value_parser = super::parse_bytes)]
    pub negative_cache_bytes: u64,
    /// Seconds a missed change notification can leave a stale cached link (an unchanged link
    /// is not read again while every change is confirmed reported).
    #[arg(long, env = "SHORTENER_CACHE_TTL", default_value = "60", value_parser = super::units::seconds::<NonZeroU64>)]
    pub cache_ttl: NonZeroU64,
    /// Milliseconds an unknown code is remembered.
    #[arg(long, env = "SHORTENER_NEGATIVE_CACHE_TTL_MS", default_value_t = 2000, value_parser = super::units::millis::<u64>)]
    pub negative_cache_ttl_ms: u64,
    /// Most reads a second of the links' slot high-water mark (PostgreSQL), made before a
    /// generated code above it is answered 404 without a lookup; requests meanwhile share the
    /// next read, so one may wait up to 1/this seconds.
    #[arg(long, env = "SHORTENER_HIGH_WATER_READS", default_value = "50")]
    pub high_water_reads: NonZeroU32,
    /// What a request on the public listener gets when its host is neither one of the node's
    /// own (the public URL's, the short domains) nor a claimed domain: `default` answers it as
    /// the default domain (as before domains existed), `not-found` answers every code, `/` and
    /// the domain files there 404 (the JSON API is not affected).
    #[arg(
        long,
        env = "SHORTENER_UNKNOWN_HOSTS",
        default_value = "default",
        value_enum,
        ignore_case = true
    )]
    pub unknown_hosts: UnknownHosts,
    /// Branded domains whose redirects are counted per domain
    /// (`shortener_domain_redirects_total{domain, outcome}`), comma-separated; no other host
    /// gets a series.
    #[arg(long, env = "SHORTENER_DOMAIN_METRICS", value_delimiter = ',')]
    pub domain_metrics: Vec<String>,
}

/// What a host that is no domain gets (`SHORTENER_UNKNOWN_HOSTS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UnknownHosts {
    /// Answered as the default domain.
    Default,
    /// Every code, `/` and the domain files answer 404.
    NotFound,
}

impl RedirectConfig {
    /// The link cache's bounds; a link near its visit limit is kept `limited_ttl`.
    pub fn cache(&self, limited_ttl: Duration) -> crate::redirects::CacheConfig {
        crate::redirects::CacheConfig {
            max_bytes: self.cache_bytes,
            negative_max_bytes: self.negative_cache_bytes,
            ttl: Duration::from_secs(self.cache_ttl.get()),
            negative_ttl: Duration::from_millis(self.negative_cache_ttl_ms),
            limited_ttl,
        }
    }

    /// What a start says of cache bounds that turn a cache off: a bound of 0, or one below
    /// what a single entry costs, is allowed (a node that must read every redirect from the
    /// store), but never silently.
    pub fn cache_notices(&self) -> Vec<String> {
        // Room for one entry at most (a link weighs 115 bytes and its URL's block, 243 bytes
        // with a 60-byte URL; an unknown code about 100 bytes): a cache that is off in effect.
        const SMALLEST_LINK: u64 = 256;
        const SMALLEST_CODE: u64 = 200;
        let mut notices = Vec::new();
        if self.cache_bytes < SMALLEST_LINK {
            notices.push(format!(
                "SHORTENER_CACHE_BYTES is {}: the redirect cache is off, so every redirect reads the store",
                self.cache_bytes
            ));
        }
        if self.negative_cache_bytes < SMALLEST_CODE {
            notices.push(format!(
                "SHORTENER_NEGATIVE_CACHE_BYTES is {}: unknown codes are not remembered, so each one that could exist reads the store",
                self.negative_cache_bytes
            ));
        }
        notices
    }

    /// The target rules' settings, given the node's own names and addresses.
    pub fn targets(
        &self,
        own_hosts: Vec<String>,
        own_ips: Vec<std::net::IpAddr>,
    ) -> crate::targets::TargetSettings {
        crate::targets::TargetSettings {
            own_hosts,
            own_ips,
            refuse_private: self.refuse_private_targets,
            blocklist_file: self.blocklist_file.clone(),
        }
    }

    /// Checks what this section alone can tell; the error names the setting.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if !(16..=65_536).contains(&self.max_url_length) {
            return Err(ConfigError::new(
                "SHORTENER_MAX_URL_LENGTH",
                format!(
                    "SHORTENER_MAX_URL_LENGTH must be between 16 and 65536, not {}",
                    self.max_url_length
                ),
            ));
        }
        Ok(())
    }
}

/// A status among `allowed`, or the error naming them.
fn status_among(text: &str, allowed: &[u16]) -> Result<StatusCode, String> {
    let listed = allowed
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    text.parse::<u16>()
        .ok()
        .filter(|code| allowed.contains(code))
        .and_then(|code| StatusCode::from_u16(code).ok())
        .ok_or_else(|| format!("{text:?} is not one of {listed}"))
}

/// `SHORTENER_REDIRECT_STATUS`: 301, 302, 307 or 308.
fn redirect_status(text: &str) -> Result<StatusCode, String> {
    status_among(text, &[301, 302, 307, 308])
}

/// `SHORTENER_BLOCKED_STATUS`: 403, 404, 410 or 451.
fn blocked_status(text: &str) -> Result<StatusCode, String> {
    status_among(text, &[403, 404, 410, 451])
}
