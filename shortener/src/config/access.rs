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
    #[arg(long, env = "SHORTENER_CONSOLE", default_value = "on", value_parser = parse_switch, action = clap::ArgAction::Set)]
    pub console: bool,
    /// Seconds an idempotency key is remembered; a retry after that creates anew.
    #[arg(long, env = "SHORTENER_IDEMPOTENCY_TTL", default_value = "86400", value_parser = super::units::seconds::<NonZeroU64>)]
    pub idempotency_ttl: NonZeroU64,
    /// Milliseconds between checks of the keys file (and the blocklist) for changes; SIGHUP
    /// re-reads them at once. The stored API keys and blocked domains are read again as often,
    /// so this bounds how long another node takes to see a revocation.
    #[arg(long, env = "SHORTENER_RELOAD_INTERVAL_MS", default_value = "2000", value_parser = super::units::millis::<NonZeroU64>)]
    pub reload_interval_ms: NonZeroU64,
    /// Host suffixes a tenant's keys may claim as domains, comma-separated `tenant=suffix`
    /// entries (`marketing=brand.com` lets marketing's keys claim `brand.com` and every host
    /// under it). An `admin` key claims any host for any tenant without one.
    #[arg(long, env = "SHORTENER_DOMAIN_SUFFIXES", value_delimiter = ',')]
    pub domain_suffixes: Vec<String>,
    /// Days an audit log entry is kept (it names people and their addresses: personal data);
    /// older entries are purged.
    #[arg(long, env = "SHORTENER_AUDIT_RETENTION_DAYS", default_value = "365", value_parser = super::units::days::<NonZeroU64>)]
    pub audit_retention_days: NonZeroU64,
    /// Seconds an audit log entry is kept, instead of the days when set (short retention
    /// for trials and tests).
    #[arg(long, env = "SHORTENER_AUDIT_RETENTION_SECONDS", value_parser = super::units::seconds::<NonZeroU64>)]
    pub audit_retention_seconds: Option<NonZeroU64>,
    /// Milliseconds between runs of the audit purge; each run removes at most 10000 entries.
    #[arg(
        long,
        env = "SHORTENER_AUDIT_PURGE_INTERVAL_MS",
        default_value = "3600000", value_parser = super::units::millis::<NonZeroU64>)]
    pub audit_purge_interval_ms: NonZeroU64,
    /// The OpenID Connect issuer people sign in to the console with (`https://id.example.com`;
    /// discovery is read from `<issuer>/.well-known/openid-configuration`). Off when unset.
    #[arg(long, env = "SHORTENER_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,
    /// The client id the issuer knows the console by.
    #[arg(long, env = "SHORTENER_OIDC_CLIENT_ID")]
    pub oidc_client_id: Option<String>,
    /// File holding the client secret (its first line).
    #[arg(long, env = "SHORTENER_OIDC_CLIENT_SECRET_FILE")]
    pub oidc_client_secret_file: Option<PathBuf>,
    /// File mapping the issuer's claims to roles in tenants: TOML `[[role]]` tables of
    /// `claim`, `value`, `tenant` and `role` (owner, admin, editor or viewer). Re-read when it
    /// changes or on SIGHUP.
    #[arg(long, env = "SHORTENER_ROLES_FILE")]
    pub roles_file: Option<PathBuf>,
    /// Seconds a console session may go unused before it ends.
    #[arg(long, env = "SHORTENER_SESSION_IDLE_SECONDS", default_value = "3600", value_parser = super::units::seconds::<NonZeroU64>)]
    pub session_idle_seconds: NonZeroU64,
    /// Seconds a console session lasts at most, however it is used.
    #[arg(long, env = "SHORTENER_SESSION_MAX_SECONDS", default_value = "43200", value_parser = super::units::seconds::<NonZeroU64>)]
    pub session_max_seconds: NonZeroU64,
}

impl AccessConfig {
    /// Checks what this section alone can tell; the error names the setting.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        use super::validate::{CENTURY_DAYS, at_most};
        crate::access::parse_legacy(self.api_keys.iter().map(String::as_str)).map_err(|error| {
            ConfigError::new("SHORTENER_API_KEYS", format!("SHORTENER_API_KEYS: {error}"))
        })?;
        let century_seconds = CENTURY_DAYS * 86_400;
        for (setting, value) in [
            ("SHORTENER_IDEMPOTENCY_TTL", self.idempotency_ttl.get()),
            (
                "SHORTENER_SESSION_IDLE_SECONDS",
                self.session_idle_seconds.get(),
            ),
            (
                "SHORTENER_SESSION_MAX_SECONDS",
                self.session_max_seconds.get(),
            ),
            (
                "SHORTENER_AUDIT_RETENTION_SECONDS",
                self.audit_retention_seconds.map_or(0, |s| s.get()),
            ),
        ] {
            at_most(setting, value, century_seconds, "seconds (a century)")?;
        }
        at_most(
            "SHORTENER_AUDIT_RETENTION_DAYS",
            self.audit_retention_days.get(),
            CENTURY_DAYS,
            "days (a century)",
        )?;
        self.suffixes()?;
        self.validate_oidc()
    }

    fn validate_oidc(&self) -> Result<(), ConfigError> {
        let Some(issuer) = &self.oidc_issuer else {
            return if self.oidc_client_id.is_some() || self.oidc_client_secret_file.is_some() {
                Err(ConfigError::new(
                    "SHORTENER_OIDC_ISSUER",
                    "SHORTENER_OIDC_CLIENT_ID and SHORTENER_OIDC_CLIENT_SECRET_FILE need SHORTENER_OIDC_ISSUER",
                ))
            } else {
                Ok(())
            };
        };
        let parsed = url::Url::parse(issuer).ok();
        if !parsed.is_some_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some()) {
            return Err(ConfigError::new(
                "SHORTENER_OIDC_ISSUER",
                format!("SHORTENER_OIDC_ISSUER must be an http(s) URL, not {issuer:?}"),
            ));
        }
        if self.oidc_client_id.as_deref().is_none_or(str::is_empty) {
            return Err(ConfigError::new(
                "SHORTENER_OIDC_CLIENT_ID",
                "SHORTENER_OIDC_CLIENT_ID is required with SHORTENER_OIDC_ISSUER",
            ));
        }
        if self.oidc_client_secret_file.is_none() {
            return Err(ConfigError::new(
                "SHORTENER_OIDC_CLIENT_SECRET_FILE",
                "SHORTENER_OIDC_CLIENT_SECRET_FILE is required with SHORTENER_OIDC_ISSUER",
            ));
        }
        if self.session_idle_seconds > self.session_max_seconds {
            return Err(ConfigError::new(
                "SHORTENER_SESSION_IDLE_SECONDS",
                "SHORTENER_SESSION_IDLE_SECONDS must not exceed SHORTENER_SESSION_MAX_SECONDS",
            ));
        }
        Ok(())
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
