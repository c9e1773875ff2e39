//! Checking a [`Config`] before anything is bound or opened.

use super::Config;

/// A setting that cannot be used, named by its environment variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    /// The environment variable of the setting (or the first of the settings that conflict).
    pub setting: &'static str,
    /// What is wrong, naming the setting.
    message: String,
}

impl ConfigError {
    /// `setting` is wrong as `message` says (which names the setting).
    pub fn new(setting: &'static str, message: impl Into<String>) -> Self {
        Self {
            setting,
            message: message.into(),
        }
    }
}

impl Config {
    /// Checks every setting that can be checked without the network (it reads the CA file);
    /// the error names the setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(codespace::MIN_LENGTH..=codespace::MAX_GENERATED_LENGTH).contains(&self.code_length) {
            return Err(ConfigError::new(
                "SHORTENER_CODE_LENGTH",
                format!(
                    "SHORTENER_CODE_LENGTH must be between {} and {}, not {}",
                    codespace::MIN_LENGTH,
                    codespace::MAX_GENERATED_LENGTH,
                    self.code_length
                ),
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
        if self.min_block == 0 || self.min_block > self.max_block {
            return Err(ConfigError::new(
                "SHORTENER_MIN_BLOCK",
                format!(
                    "SHORTENER_MIN_BLOCK ({}) must be at least 1 and at most SHORTENER_MAX_BLOCK ({})",
                    self.min_block, self.max_block
                ),
            ));
        }
        if self.create_burst < self.batch_limit as u32 {
            return Err(ConfigError::new(
                "SHORTENER_CREATE_BURST",
                format!(
                    "SHORTENER_CREATE_BURST ({}) must be at least SHORTENER_BATCH_LIMIT ({})",
                    self.create_burst, self.batch_limit
                ),
            ));
        }
        if !(1..=10_000).contains(&self.write_batch) || !(1..=64).contains(&self.write_concurrency)
        {
            return Err(ConfigError::new(
                "SHORTENER_WRITE_BATCH",
                format!(
                    "SHORTENER_WRITE_BATCH must be 1 to 10000 and SHORTENER_WRITE_CONCURRENCY 1 to 64, not {} and {}",
                    self.write_batch, self.write_concurrency
                ),
            ));
        }
        if self.batch_limit == 0 || self.batch_limit > 10_000 {
            return Err(ConfigError::new(
                "SHORTENER_BATCH_LIMIT",
                format!(
                    "SHORTENER_BATCH_LIMIT must be between 1 and 10000, not {}",
                    self.batch_limit
                ),
            ));
        }
        if !(1..=128).contains(&self.ipv6_prefix) {
            return Err(ConfigError::new(
                "SHORTENER_IPV6_PREFIX",
                format!(
                    "SHORTENER_IPV6_PREFIX must be 1 to 128, not {}",
                    self.ipv6_prefix
                ),
            ));
        }
        if self.max_connections_per_client == 0
            || self.grpc_idle_timeout == 0
            || self.grpc_max_in_flight == 0
            || self.grpc_max_streams == 0
        {
            return Err(ConfigError::new(
                "SHORTENER_MAX_CONNECTIONS_PER_CLIENT",
                "SHORTENER_MAX_CONNECTIONS_PER_CLIENT, SHORTENER_GRPC_IDLE_TIMEOUT, SHORTENER_GRPC_MAX_IN_FLIGHT and SHORTENER_GRPC_MAX_STREAMS must be positive",
            ));
        }
        if self.idempotency_ttl == 0 || self.reload_interval_ms == 0 {
            return Err(ConfigError::new(
                "SHORTENER_IDEMPOTENCY_TTL",
                "SHORTENER_IDEMPOTENCY_TTL and SHORTENER_RELOAD_INTERVAL_MS must be positive",
            ));
        }
        if self.header_read_timeout == 0
            || self.click_flush_interval_ms == 0
            || self.analytics_flush_interval_ms == 0
            || self.cache_ttl == 0
        {
            return Err(ConfigError::new(
                "SHORTENER_HEADER_READ_TIMEOUT",
                "SHORTENER_HEADER_READ_TIMEOUT, SHORTENER_CLICK_FLUSH_INTERVAL_MS, SHORTENER_ANALYTICS_FLUSH_INTERVAL_MS and SHORTENER_CACHE_TTL must be positive",
            ));
        }
        if self.analytics_flush_interval_ms > 50_000 {
            // The hourly `clicks.rollup` event is recorded a minute after its hour ends: every
            // flush of the hour must be in by then.
            return Err(ConfigError::new(
                "SHORTENER_ANALYTICS_FLUSH_INTERVAL_MS",
                "SHORTENER_ANALYTICS_FLUSH_INTERVAL_MS must be at most 50000 (the hourly rollup event is recorded a minute after its hour)",
            ));
        }
        if self.analytics_max_entries == 0 || self.analytics_referrers_per_hour == 0 {
            return Err(ConfigError::new(
                "SHORTENER_ANALYTICS_MAX_ENTRIES",
                "SHORTENER_ANALYTICS_MAX_ENTRIES and SHORTENER_ANALYTICS_REFERRERS_PER_HOUR must be positive",
            ));
        }
        if self.analytics_compact_after_days == 0 {
            return Err(ConfigError::new(
                "SHORTENER_ANALYTICS_COMPACT_AFTER_DAYS",
                "SHORTENER_ANALYTICS_COMPACT_AFTER_DAYS must be at least 1",
            ));
        }
        if self.analytics_retention_days != 0
            && self.analytics_retention_days <= self.analytics_compact_after_days
        {
            return Err(ConfigError::new(
                "SHORTENER_ANALYTICS_RETENTION_DAYS",
                format!(
                    "SHORTENER_ANALYTICS_RETENTION_DAYS ({}) must be 0 (keep forever) or more than SHORTENER_ANALYTICS_COMPACT_AFTER_DAYS ({})",
                    self.analytics_retention_days, self.analytics_compact_after_days
                ),
            ));
        }
        if self.webhook_timeout_ms == 0
            || self.webhook_retry_base_ms == 0
            || self.webhook_max_failures == 0
        {
            return Err(ConfigError::new(
                "SHORTENER_WEBHOOK_TIMEOUT_MS",
                "SHORTENER_WEBHOOK_TIMEOUT_MS, SHORTENER_WEBHOOK_RETRY_BASE_MS and SHORTENER_WEBHOOK_MAX_FAILURES must be positive",
            ));
        }
        if self.webhook_max_pending == 0 {
            return Err(ConfigError::new(
                "SHORTENER_WEBHOOK_MAX_PENDING",
                "SHORTENER_WEBHOOK_MAX_PENDING must be positive",
            ));
        }
        if let Some(header) = &self.client_ip_header
            && axum::http::HeaderName::try_from(header.as_str()).is_err()
        {
            return Err(ConfigError::new(
                "SHORTENER_CLIENT_IP_HEADER",
                format!("SHORTENER_CLIENT_IP_HEADER is not a valid header name: {header:?}"),
            ));
        }
        if self.client_ip_header.is_some() && self.trusted_proxies.is_empty() {
            return Err(ConfigError::new(
                "SHORTENER_TRUSTED_PROXIES",
                "SHORTENER_CLIENT_IP_HEADER needs SHORTENER_TRUSTED_PROXIES (whose connections may set it)",
            ));
        }
        if let Some(path) = &self.database_ca_file {
            pgtls::load_ca_file(path).map_err(|e| {
                ConfigError::new(
                    "SHORTENER_DATABASE_CA_FILE",
                    format!("SHORTENER_DATABASE_CA_FILE: {e}"),
                )
            })?;
        }
        if self.admin_addr == super::Listen::Off && self.database_url.is_some() {
            return Err(ConfigError::new(
                "SHORTENER_ADMIN_ADDR",
                "SHORTENER_ADMIN_ADDR=off is for embedded mode only: a node with DATABASE_URL \
                 needs /readyz for its load balancer and /metrics for its alerts",
            ));
        }
        if self.database_read_url.is_some() && self.database_url.is_none() {
            return Err(ConfigError::new(
                "SHORTENER_DATABASE_READ_URL",
                "SHORTENER_DATABASE_READ_URL needs DATABASE_URL (a replica is read beside its primary)",
            ));
        }
        if let Some(url) = &self.database_url {
            let pg: tokio_postgres::Config = url.parse().map_err(|e| {
                ConfigError::new(
                    "DATABASE_URL",
                    format!("DATABASE_URL is not a valid PostgreSQL connection string: {e}"),
                )
            })?;
            pgtls::connector(&pg, self.database_ca_file.as_deref()).map_err(|e| {
                ConfigError::new(
                    "SHORTENER_DATABASE_CA_FILE",
                    format!("SHORTENER_DATABASE_CA_FILE with DATABASE_URL: {e}"),
                )
            })?;
            if let Some(read) = &self.database_read_url {
                let replica: tokio_postgres::Config = read.parse().map_err(|e| {
                    ConfigError::new(
                        "SHORTENER_DATABASE_READ_URL",
                        format!("SHORTENER_DATABASE_READ_URL is not a valid PostgreSQL connection string: {e}"),
                    )
                })?;
                pgtls::connector(&replica, self.database_ca_file.as_deref()).map_err(|e| {
                    ConfigError::new(
                        "SHORTENER_DATABASE_CA_FILE",
                        format!("SHORTENER_DATABASE_CA_FILE with SHORTENER_DATABASE_READ_URL: {e}"),
                    )
                })?;
            }
            if self.id_service.is_empty() {
                return Err(ConfigError::new(
                    "SHORTENER_ID_SERVICE",
                    "SHORTENER_ID_SERVICE is required with DATABASE_URL (distributed mode)",
                ));
            }
            if self.key_file.is_none() && self.key.is_none() {
                return Err(ConfigError::new(
                    "SHORTENER_KEY_FILE",
                    "SHORTENER_KEY_FILE or SHORTENER_KEY is required with DATABASE_URL: every node must share one key",
                ));
            }
            if self.api_keys.is_empty() && self.api_keys_file.is_none() {
                return Err(ConfigError::new(
                    "SHORTENER_API_KEYS",
                    "SHORTENER_API_KEYS or SHORTENER_API_KEYS_FILE is required with DATABASE_URL",
                ));
            }
        }
        for endpoint in &self.id_service {
            if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                return Err(ConfigError::new(
                    "SHORTENER_ID_SERVICE",
                    format!(
                        "SHORTENER_ID_SERVICE entries must be http:// or https:// URLs, not {endpoint:?}"
                    ),
                ));
            }
        }
        let namespace_ok = {
            let mut chars = self.id_namespace.chars();
            chars.next().is_some_and(|c| c.is_ascii_lowercase())
                && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                && self.id_namespace.len() <= 63
        };
        if !namespace_ok {
            return Err(ConfigError::new(
                "SHORTENER_ID_NAMESPACE",
                format!(
                    "SHORTENER_ID_NAMESPACE must match [a-z][a-z0-9_]{{0,62}}, not {:?}",
                    self.id_namespace
                ),
            ));
        }
        if let Some(public) = &self.public_url {
            let url = url::Url::parse(public).map_err(|e| {
                ConfigError::new(
                    "SHORTENER_PUBLIC_URL",
                    format!("SHORTENER_PUBLIC_URL is not a URL: {e}"),
                )
            })?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                return Err(ConfigError::new(
                    "SHORTENER_PUBLIC_URL",
                    format!(
                        "SHORTENER_PUBLIC_URL must be an http(s) URL with a host, not {public:?}"
                    ),
                ));
            }
        }
        // Exports read a page at a time from the same pool: they must leave connections to
        // redirect misses and creates whatever their number.
        if self.database_url.is_some()
            && self.export_max_concurrent.get() >= self.database_max_connections
        {
            return Err(ConfigError::new(
                "SHORTENER_EXPORT_MAX_CONCURRENT",
                format!(
                    "SHORTENER_EXPORT_MAX_CONCURRENT ({}) must be below SHORTENER_DATABASE_MAX_CONNECTIONS ({}), so that exports leave connections to redirects and creates",
                    self.export_max_concurrent, self.database_max_connections
                ),
            ));
        }
        Ok(())
    }
}
