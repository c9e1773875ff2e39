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

/// A century, in days: the longest any retention or lifetime setting may be. Longer values
/// (`u32::MAX` meant as "forever", say) would overflow the date arithmetic they feed.
pub(super) const CENTURY_DAYS: u64 = 36_500;

/// Refuses `value` of `setting` above `max` (in `unit`s): lifetimes, retentions and timeouts
/// far past any use, which the clock arithmetic that reads them cannot represent.
pub(super) fn at_most(
    setting: &'static str,
    value: u64,
    max: u64,
    unit: &str,
) -> Result<(), ConfigError> {
    if value > max {
        return Err(ConfigError::new(
            setting,
            format!("{setting} must be at most {max} {unit}, not {value}"),
        ));
    }
    Ok(())
}

impl Config {
    /// Checks every setting that can be checked without the network (it reads the CA file);
    /// the error names the setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.listeners.validate()?;
        self.store.validate()?;
        self.ids.validate()?;
        self.access.validate()?;
        self.redirects.validate()?;
        self.visits.validate()?;
        self.webhooks.validate()?;
        self.limits.validate()?;
        self.compat.validate()?;
        if self.listeners.admin_addr == super::Listen::Off && self.store.database_url.is_some() {
            return Err(ConfigError::new(
                "SHORTENER_ADMIN_ADDR",
                "SHORTENER_ADMIN_ADDR=off is for embedded mode only: a node with DATABASE_URL \
                 needs /readyz for its load balancer and /metrics for its alerts",
            ));
        }
        if self.store.database_url.is_some() {
            if self.ids.id_service.is_empty() {
                return Err(ConfigError::new(
                    "SHORTENER_ID_SERVICE",
                    "SHORTENER_ID_SERVICE is required with DATABASE_URL (distributed mode)",
                ));
            }
            if self.ids.key_file.is_none() && self.ids.key.is_none() {
                return Err(ConfigError::new(
                    "SHORTENER_KEY_FILE",
                    "SHORTENER_KEY_FILE or SHORTENER_KEY is required with DATABASE_URL: every node must share one key",
                ));
            }
            if self.access.api_keys.is_empty() && self.access.api_keys_file.is_none() {
                return Err(ConfigError::new(
                    "SHORTENER_API_KEYS",
                    "SHORTENER_API_KEYS or SHORTENER_API_KEYS_FILE is required with DATABASE_URL",
                ));
            }
        }
        // Exports read a page at a time from the same pool: they must leave connections to
        // redirect misses and creates whatever their number.
        if self.store.database_url.is_some()
            && self.limits.export_max_concurrent.get() >= self.store.database_max_connections
        {
            return Err(ConfigError::new(
                "SHORTENER_EXPORT_MAX_CONCURRENT",
                format!(
                    "SHORTENER_EXPORT_MAX_CONCURRENT ({}) must be below SHORTENER_DATABASE_MAX_CONNECTIONS ({}), so that exports leave connections to redirects and creates",
                    self.limits.export_max_concurrent, self.store.database_max_connections
                ),
            ));
        }

        Ok(())
    }
}
