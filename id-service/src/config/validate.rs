//! Checks of a [`Config`], and what is derived from it (PostgreSQL settings, TLS, names).

use super::Config;
use crate::domain::namespaces::MAX_BOUND;
use crate::domain::{Holder, Namespace};
use std::time::Duration;

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `DATABASE_URL` is missing or not a PostgreSQL connection string.
    #[error("DATABASE_URL is not a valid PostgreSQL connection string: {0}")]
    DatabaseUrl(String),
    /// The block or segment bounds are inconsistent.
    #[error("block bounds: {0}")]
    Blocks(String),
    /// A listed namespace name is malformed.
    #[error("ID_SERVICE_NAMESPACES: {0}")]
    Namespace(String),
    /// The CA file is unusable, or does not fit the connection string's `sslmode`.
    #[error("ID_SERVICE_DATABASE_CA_FILE: {0}")]
    DatabaseTls(pgtls::Error),
    /// No way to authenticate callers was chosen, or two were.
    #[error("{0}")]
    Auth(String),
    /// The pool mode and the direct URL do not fit together, or the direct URL is malformed.
    #[error("{0}")]
    Pooler(String),
    /// Another setting is out of range.
    #[error("{0}")]
    Invalid(String),
}

impl Config {
    /// Checks every setting; called by [`crate::App::build`] and [`crate::migrate`] before
    /// anything else.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.legacy_token.is_some() {
            return Err(ConfigError::Auth(
                "ID_SERVICE_TOKEN is no longer read: give each caller its own token in a tokens \
                 file (`id-service tokens add --file F ...`) and set ID_SERVICE_TOKENS_FILE=F"
                    .into(),
            ));
        }
        if self.database_url.trim().is_empty() {
            return Err(ConfigError::DatabaseUrl("DATABASE_URL is required".into()));
        }
        self.tls()?;
        self.check_pooler()?;
        if self.min_block == 0 {
            return Err(ConfigError::Blocks(
                "ID_SERVICE_MIN_BLOCK must be at least 1".into(),
            ));
        }
        if self.min_block > self.max_block {
            return Err(ConfigError::Blocks(format!(
                "ID_SERVICE_MIN_BLOCK ({}) is above ID_SERVICE_MAX_BLOCK ({})",
                self.min_block, self.max_block
            )));
        }
        if self.namespace_max == 0 || self.namespace_max > MAX_BOUND {
            return Err(ConfigError::Invalid(format!(
                "ID_SERVICE_NAMESPACE_MAX must be within 1..={MAX_BOUND}, got {}",
                self.namespace_max
            )));
        }
        if self.max_block > self.namespace_max {
            return Err(ConfigError::Blocks(format!(
                "ID_SERVICE_MAX_BLOCK ({}) is above ID_SERVICE_NAMESPACE_MAX ({})",
                self.max_block, self.namespace_max
            )));
        }
        self.validate_segments()?;
        for name in &self.namespaces {
            Namespace::parse(name).map_err(|e| ConfigError::Namespace(e.to_string()))?;
        }
        self.instance_name()?;
        for (name, value) in [
            ("ID_SERVICE_FAILOVER_MARGIN_IDS", self.failover_margin_ids),
            (
                "ID_SERVICE_FAILOVER_MARGIN_LEASES",
                self.failover_margin_leases,
            ),
            ("ID_SERVICE_MAX_REPORTED_AHEAD", self.max_reported_ahead),
        ] {
            if value > MAX_BOUND {
                return Err(ConfigError::Invalid(format!(
                    "{name} must be at most {MAX_BOUND}, got {value}"
                )));
            }
        }
        if self.db_pool_size == 0 {
            return Err(ConfigError::Invalid(
                "ID_SERVICE_DB_POOL_SIZE must be at least 1".into(),
            ));
        }
        for (name, value) in [
            ("ID_SERVICE_DRAIN_TIMEOUT", self.drain_timeout),
            ("ID_SERVICE_REQUEST_TIMEOUT", self.request_timeout),
            ("ID_SERVICE_DB_CONNECT_TIMEOUT", self.db_connect_timeout),
            ("ID_SERVICE_DB_POOL_TIMEOUT", self.db_pool_timeout),
            ("ID_SERVICE_SEGMENT_DURATION", self.segment_duration),
            (
                "ID_SERVICE_TOKENS_RELOAD_INTERVAL",
                self.tokens_reload_interval,
            ),
        ] {
            if value.is_zero() {
                return Err(ConfigError::Invalid(format!("{name} must be above zero")));
            }
        }
        Ok(())
    }

    fn validate_segments(&self) -> Result<(), ConfigError> {
        let fail = |m: String| Err(ConfigError::Blocks(m));
        if self.allocate_max_count == 0 {
            return fail("ID_SERVICE_ALLOCATE_MAX_COUNT must be at least 1".into());
        }
        if self.segment_min < self.allocate_max_count {
            return fail(format!(
                "ID_SERVICE_SEGMENT_MIN ({}) is below ID_SERVICE_ALLOCATE_MAX_COUNT ({}): a call \
                 could need more than two segments",
                self.segment_min, self.allocate_max_count
            ));
        }
        if self.segment_min > self.segment_max {
            return fail(format!(
                "ID_SERVICE_SEGMENT_MIN ({}) is above ID_SERVICE_SEGMENT_MAX ({})",
                self.segment_min, self.segment_max
            ));
        }
        Ok(())
    }

    /// The check only serving needs: callers are authenticated by a tokens file, or the
    /// operator said `--insecure-no-auth`; never neither, never both.
    pub fn validate_serving(&self) -> Result<(), ConfigError> {
        match (&self.tokens_file, self.insecure_no_auth) {
            (Some(_), false) | (None, true) => Ok(()),
            (Some(_), true) => Err(ConfigError::Auth(
                "ID_SERVICE_TOKENS_FILE and --insecure-no-auth contradict each other; give one"
                    .into(),
            )),
            (None, false) => Err(ConfigError::Auth(
                "no ID_SERVICE_TOKENS_FILE: refusing to serve without authentication; create \
                 one with `id-service tokens add`, or pass --insecure-no-auth for development"
                    .into(),
            )),
        }
    }

    /// This replica's name: `ID_SERVICE_INSTANCE`, else the host name and process ID.
    pub fn instance_name(&self) -> Result<Holder, ConfigError> {
        let name = match &self.instance {
            Some(name) => name.clone(),
            None => {
                let host = std::env::var("HOSTNAME")
                    .ok()
                    .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
                    .map(|h| h.trim().to_string())
                    .filter(|h| !h.is_empty())
                    .unwrap_or_else(|| "id-service".into());
                format!("{host}-{}", std::process::id())
            }
        };
        let holder = Holder::parse(&name)
            .map_err(|e| ConfigError::Invalid(format!("ID_SERVICE_INSTANCE: {e}")))?;
        // The segments' holder is "@segment/<instance>".
        if holder.chars() > Holder::MAX_CHARS - 9 {
            return Err(ConfigError::Invalid(format!(
                "ID_SERVICE_INSTANCE must be at most {} characters",
                Holder::MAX_CHARS - 9
            )));
        }
        Ok(holder)
    }

    /// The PostgreSQL client settings: the URL plus our connect timeout and keepalives.
    pub fn pg_config(&self) -> Result<tokio_postgres::Config, ConfigError> {
        let mut pg: tokio_postgres::Config = self
            .database_url
            .parse()
            .map_err(|e: tokio_postgres::Error| ConfigError::DatabaseUrl(e.to_string()))?;
        if pg.get_hosts().is_empty() {
            return Err(ConfigError::DatabaseUrl("no host given".into()));
        }
        pg.connect_timeout(self.db_connect_timeout)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30));
        if pg.get_application_name().is_none() {
            pg.application_name("id-service");
        }
        Ok(pg)
    }

    /// Transaction pooling needs a direct URL, and a direct URL is only read with it.
    fn check_pooler(&self) -> Result<(), ConfigError> {
        use pgtls::pooler::PoolMode;
        let direct = self
            .database_direct_url
            .as_deref()
            .filter(|u| !u.trim().is_empty());
        match (self.database_pool_mode, direct) {
            (PoolMode::Transaction, None) => Err(ConfigError::Pooler(
                "ID_SERVICE_DATABASE_POOL_MODE=transaction needs ID_SERVICE_DATABASE_DIRECT_URL: \
                 the migrations take an advisory lock, which a pooler in transaction mode cannot \
                 keep"
                    .into(),
            )),
            (PoolMode::Session, Some(_)) => Err(ConfigError::Pooler(
                "ID_SERVICE_DATABASE_DIRECT_URL is read only with \
                 ID_SERVICE_DATABASE_POOL_MODE=transaction (in session mode everything uses \
                 DATABASE_URL)"
                    .into(),
            )),
            (_, Some(_)) => self.direct_pg_config().map(|_| ()),
            (PoolMode::Session, None) => Ok(()),
        }
    }

    /// The settings of the connection the migrations use: the direct URL in transaction mode,
    /// `DATABASE_URL` otherwise.
    pub fn direct_pg_config(&self) -> Result<tokio_postgres::Config, ConfigError> {
        let Some(url) = &self.database_direct_url else {
            return self.pg_config();
        };
        let mut pg: tokio_postgres::Config = url.parse().map_err(|e: tokio_postgres::Error| {
            ConfigError::Pooler(format!(
                "ID_SERVICE_DATABASE_DIRECT_URL is not a valid PostgreSQL connection string: {e}"
            ))
        })?;
        if pg.get_hosts().is_empty() {
            return Err(ConfigError::Pooler(
                "ID_SERVICE_DATABASE_DIRECT_URL: no host given".into(),
            ));
        }
        pg.connect_timeout(self.db_connect_timeout);
        if pg.get_application_name().is_none() {
            pg.application_name("id-service");
        }
        Ok(pg)
    }

    /// The TLS connector for the direct connection (see [`Config::direct_pg_config`]).
    pub fn direct_tls(&self) -> Result<pgtls::MakeRustlsConnect, ConfigError> {
        pgtls::connector(&self.direct_pg_config()?, self.database_ca_file.as_deref())
            .map_err(ConfigError::DatabaseTls)
    }

    /// The TLS connector for the ledger's connections, following DATABASE_URL's `sslmode`
    /// (see [`pgtls::connector`]). Reads the CA file, so a bad one is refused at start-up.
    pub fn tls(&self) -> Result<pgtls::MakeRustlsConnect, ConfigError> {
        if let Some(path) = &self.database_ca_file {
            pgtls::load_ca_file(path).map_err(ConfigError::DatabaseTls)?;
        }
        pgtls::connector(&self.pg_config()?, self.database_ca_file.as_deref())
            .map_err(ConfigError::DatabaseTls)
    }
}
