//! Settings of one part of the node (`Redirects and targets` in `--help`).

use super::ConfigError;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// How redirects answer, what targets are accepted, and the link cache.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Redirects and targets")]
pub struct RedirectConfig {
    /// Status of a link whose target domain is on the blocklist: 403, 404, 410 or 451.
    #[arg(long, env = "SHORTENER_BLOCKED_STATUS", default_value_t = 410)]
    pub blocked_status: u16,
    /// File of blocked target domains, one per line (`example.com`; `.example.com` or
    /// `*.example.com` for a domain and all its subdomains): refused for new links, and
    /// existing links to them answer SHORTENER_BLOCKED_STATUS. Re-read when it changes.
    #[arg(long, env = "SHORTENER_BLOCKLIST_FILE")]
    pub blocklist_file: Option<PathBuf>,
    /// Refuse targets in loopback, link-local, private and unique-local ranges and cloud
    /// metadata host names.
    #[arg(long, env = "SHORTENER_REFUSE_PRIVATE_TARGETS", default_value_t = false, action = clap::ArgAction::Set)]
    pub refuse_private_targets: bool,
    /// Redirect status: 301, 302, 307 or 308.
    #[arg(long, env = "SHORTENER_REDIRECT_STATUS", default_value_t = 302)]
    pub redirect_status: u16,
    /// Longest accepted target URL, in bytes.
    #[arg(long, env = "SHORTENER_MAX_URL_LENGTH", default_value_t = crate::domain::DEFAULT_MAX_URL_LENGTH)]
    pub max_url_length: usize,
    /// Memory bound of the redirect cache, in bytes.
    #[arg(long, env = "SHORTENER_CACHE_BYTES", default_value_t = 64 * 1024 * 1024)]
    pub cache_bytes: u64,
    /// Seconds a cached link is kept (bounds staleness if a change notification is missed).
    #[arg(long, env = "SHORTENER_CACHE_TTL", default_value_t = 60)]
    pub cache_ttl: u64,
    /// Milliseconds an unknown code is remembered.
    #[arg(long, env = "SHORTENER_NEGATIVE_CACHE_TTL_MS", default_value_t = 2000)]
    pub negative_cache_ttl_ms: u64,
}

impl RedirectConfig {
    /// The link cache's bounds; a link near its visit limit is kept `limited_ttl`.
    pub fn cache(&self, limited_ttl: Duration) -> crate::http::redirect::CacheConfig {
        crate::http::redirect::CacheConfig {
            max_bytes: self.cache_bytes,
            ttl: Duration::from_secs(self.cache_ttl),
            negative_ttl: Duration::from_millis(self.negative_cache_ttl_ms),
            limited_ttl,
        }
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
        if self.cache_ttl == 0 {
            return Err(ConfigError::new(
                "SHORTENER_CACHE_TTL",
                "SHORTENER_CACHE_TTL must be positive",
            ));
        }
        if ![301, 302, 307, 308].contains(&self.redirect_status) {
            return Err(ConfigError::new(
                "SHORTENER_REDIRECT_STATUS",
                format!(
                    "SHORTENER_REDIRECT_STATUS must be 301, 302, 307 or 308, not {}",
                    self.redirect_status
                ),
            ));
        }
        if ![403, 404, 410, 451].contains(&self.blocked_status) {
            return Err(ConfigError::new(
                "SHORTENER_BLOCKED_STATUS",
                format!(
                    "SHORTENER_BLOCKED_STATUS must be 403, 404, 410 or 451, not {}",
                    self.blocked_status
                ),
            ));
        }
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
