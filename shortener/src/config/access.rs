//! Settings of one part of the node (`Access` in `--help`).

use super::ConfigError;
use super::parse_switch;
use clap::Args;
use std::num::NonZeroU64;
use std::path::PathBuf;

/// Who may use the API and the console.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Access")]
pub struct AccessConfig {
    /// API keys, comma-separated: raw keys or `sha256:<hex digest>`, each of tenant `default`
    /// with every scope but `admin`.
    #[arg(
        long,
        env = "SHORTENER_API_KEYS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub api_keys: Vec<String>,
    /// File of API keys: TOML `[[key]]` tables (tenant, name, sha256 digest, scopes, expiry;
    /// `shortener keys add` writes them), or one key per line (raw or `sha256:<hex>`, tenant
    /// `default`). Re-read when it changes or on SIGHUP. Embedded mode default:
    /// `<data dir>/api-keys`, generated on first start.
    #[arg(long, env = "SHORTENER_API_KEYS_FILE")]
    pub api_keys_file: Option<PathBuf>,
    /// Password attempts per minute one client address may make on one protected link.
    #[arg(long, env = "SHORTENER_PASSWORD_ATTEMPTS", default_value_t = 5)]
    pub password_attempts: u32,
    /// Serve the web console at `/console/` on the public port (`on` or `off`).
    #[arg(long, env = "SHORTENER_CONSOLE", default_value = "on", value_parser = parse_switch)]
    pub console: bool,
    /// Seconds an idempotency key is remembered; a retry after that creates anew.
    #[arg(long, env = "SHORTENER_IDEMPOTENCY_TTL", default_value = "86400")]
    pub idempotency_ttl: NonZeroU64,
    /// Milliseconds between checks of the keys file (and the blocklist) for changes; SIGHUP
    /// re-reads them at once. The stored API keys and blocked domains are read again as often,
    /// so this bounds how long another node takes to see a revocation.
    #[arg(long, env = "SHORTENER_RELOAD_INTERVAL_MS", default_value = "2000")]
    pub reload_interval_ms: NonZeroU64,
    /// Host suffixes a tenant's keys may claim as domains, comma-separated `tenant=suffix`
    /// entries (`marketing=brand.com` lets marketing's keys claim `brand.com` and every host
    /// under it). An `admin` key claims any host for any tenant without one.
    #[arg(long, env = "SHORTENER_DOMAIN_SUFFIXES", value_delimiter = ',')]
    pub domain_suffixes: Vec<String>,
    /// Days an audit log entry is kept (it names people and their addresses: personal data);
    /// older entries are purged.
    #[arg(long, env = "SHORTENER_AUDIT_RETENTION_DAYS", default_value = "365")]
    pub audit_retention_days: NonZeroU64,
    /// Seconds an audit log entry is kept, instead of the days when set (short retention
    /// for trials and tests).
    #[arg(long, env = "SHORTENER_AUDIT_RETENTION_SECONDS")]
    pub audit_retention_seconds: Option<NonZeroU64>,
    /// Milliseconds between runs of the audit purge; each run removes at most 10000 entries.
    #[arg(
        long,
        env = "SHORTENER_AUDIT_PURGE_INTERVAL_MS",
        default_value = "3600000"
    )]
    pub audit_purge_interval_ms: NonZeroU64,
}

impl AccessConfig {
    /// Checks what this section alone can tell; the error names the setting.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        self.suffixes().map(|_| ())
    }

    /// How long audit entries are kept and how the purge runs.
    pub fn audit(&self) -> crate::audit::AuditSettings {
        let retention = match self.audit_retention_seconds {
            Some(seconds) => seconds.get(),
            None => self.audit_retention_days.get().saturating_mul(86_400),
        };
        crate::audit::AuditSettings {
            retention: std::time::Duration::from_secs(retention),
            purge_every: std::time::Duration::from_millis(self.audit_purge_interval_ms.get()),
            purge_batch: 10_000,
        }
    }

    /// The host suffixes each tenant's keys may claim.
    pub fn suffixes(&self) -> Result<crate::access::DomainSuffixes, ConfigError> {
        crate::access::DomainSuffixes::parse(&self.domain_suffixes).map_err(|e| {
            ConfigError::new(
                "SHORTENER_DOMAIN_SUFFIXES",
                format!("SHORTENER_DOMAIN_SUFFIXES: {e}"),
            )
        })
    }
}
