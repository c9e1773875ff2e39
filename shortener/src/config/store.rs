//! Settings of one part of the node (`Storage` in `--help`).

use super::ConfigError;
use clap::Args;
use pgtls::pooler::PoolMode;
use std::path::PathBuf;

/// `SHORTENER_DATABASE_STATEMENT_TIMEOUT_MS`: 100 ms to an hour.
fn statement_timeout(text: &str) -> Result<u64, String> {
    let millis: u64 = super::units::millis(text)?;
    if (100..=3_600_000).contains(&millis) {
        Ok(millis)
    } else {
        Err(format!("{millis} ms is not in 100 ms to an hour"))
    }
}

/// Parses `SHORTENER_DATABASE_POOL_MODE` (`session` or `transaction`).
pub fn parse_pool_mode(text: &str) -> Result<PoolMode, String> {
    text.trim().parse()
}

/// Where links live: the embedded SQLite file or PostgreSQL (and a replica).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Storage")]
pub struct StoreConfig {
    /// Embedded mode: the directory holding the SQLite file and generated keys.
    #[arg(long, env = "SHORTENER_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,
    /// PostgreSQL connection string; set it for the distributed mode (unset: embedded SQLite).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// A streaming replica of DATABASE_URL's database: redirect cache misses, gets, histories,
    /// lists and exports read from it, falling back to the primary for what it has not
    /// replayed yet and whenever it is down.
    #[arg(long, env = "SHORTENER_DATABASE_READ_URL", hide_env_values = true)]
    pub database_read_url: Option<String>,
    /// The pooling mode of a pooler (PgBouncer) between the node and PostgreSQL: `session`
    /// (the default, also without a pooler) or `transaction`, where the node prepares nothing
    /// that outlives a transaction, sets no session setting, and takes what needs a session of
    /// its own (the change feed's LISTEN, migrations, `shortener layout`) from
    /// SHORTENER_DATABASE_DIRECT_URL.
    #[arg(long, env = "SHORTENER_DATABASE_POOL_MODE", default_value = "session",
          value_parser = parse_pool_mode)]
    pub database_pool_mode: PoolMode,
    /// A connection string that reaches the primary itself, not through the pooler: required
    /// with SHORTENER_DATABASE_POOL_MODE=transaction, refused without it. A standby there is
    /// refused at start-up.
    #[arg(long, env = "SHORTENER_DATABASE_DIRECT_URL", hide_env_values = true)]
    pub database_direct_url: Option<String>,
    /// Most PostgreSQL connections this node opens (to the primary; as many again to a replica).
    #[arg(long, env = "SHORTENER_DATABASE_MAX_CONNECTIONS", default_value_t = 16)]
    pub database_max_connections: usize,
    /// Most milliseconds one PostgreSQL statement may run before the server cancels it (a
    /// lock wait or a runaway plan fails fast instead of holding a connection); migrations and
    /// rollup maintenance lift it for their own statements. The embedded store interrupts a
    /// read that runs longer.
    #[arg(long, env = "SHORTENER_DATABASE_STATEMENT_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = statement_timeout
    )]
    pub database_statement_timeout_ms: u64,
    /// PEM file of CA certificates trusted for TLS to PostgreSQL, besides the system's; used
    /// with `sslmode=require` in DATABASE_URL, which verifies the server's certificate and name.
    #[arg(long, env = "SHORTENER_DATABASE_CA_FILE")]
    pub database_ca_file: Option<PathBuf>,
    /// Most creates written in one batched insert (one statement, one commit).
    #[arg(long, env = "SHORTENER_WRITE_BATCH", default_value_t = 256)]
    pub write_batch: usize,
    /// Most batched inserts in flight at once on PostgreSQL.
    #[arg(long, env = "SHORTENER_WRITE_CONCURRENCY", default_value_t = 4)]
    pub write_concurrency: usize,
    /// Creates a batched insert waits for, on PostgreSQL, before it starts beside another
    /// still in flight (a batch starts at once when none is): fewer, larger statements under
    /// load, each paying its commit and its executor set-up once for more rows. Capped at
    /// `SHORTENER_WRITE_BATCH`; 1 starts every batch at once.
    #[arg(long, env = "SHORTENER_WRITE_FILL", default_value_t = 32)]
    pub write_fill: usize,
}

impl StoreConfig {
    /// Checks what this section alone can tell; the error names the setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
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
        if !(1..=10_000).contains(&self.write_fill) {
            return Err(ConfigError::new(
                "SHORTENER_WRITE_FILL",
                format!(
                    "SHORTENER_WRITE_FILL must be 1 to 10000, not {}",
                    self.write_fill
                ),
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
        if self.database_url.is_none()
            && (self.database_direct_url.is_some()
                || self.database_pool_mode == PoolMode::Transaction)
        {
            return Err(ConfigError::new(
                "SHORTENER_DATABASE_POOL_MODE",
                "SHORTENER_DATABASE_POOL_MODE and SHORTENER_DATABASE_DIRECT_URL need DATABASE_URL \
                 (the embedded store has no pooler)",
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
            self.check_pooler()?;
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
        }
        Ok(())
    }

    /// Transaction pooling needs a direct URL, and a direct URL is read only with it; the
    /// direct URL must parse, name a host and suit the CA file.
    fn check_pooler(&self) -> Result<(), ConfigError> {
        const SETTING: &str = "SHORTENER_DATABASE_DIRECT_URL";
        let direct = self
            .database_direct_url
            .as_deref()
            .filter(|u| !u.trim().is_empty());
        let url = match (self.database_pool_mode, direct) {
            (PoolMode::Transaction, None) => {
                return Err(ConfigError::new(
                    SETTING,
                    "SHORTENER_DATABASE_POOL_MODE=transaction needs SHORTENER_DATABASE_DIRECT_URL: \
                     the change feed's LISTEN, the migrations and `shortener layout` need a \
                     session of their own, which a pooler in transaction mode cannot keep",
                ));
            }
            (PoolMode::Session, Some(_)) => {
                return Err(ConfigError::new(
                    SETTING,
                    "SHORTENER_DATABASE_DIRECT_URL is read only with \
                     SHORTENER_DATABASE_POOL_MODE=transaction (in session mode everything uses \
                     DATABASE_URL)",
                ));
            }
            (PoolMode::Session, None) => return Ok(()),
            (PoolMode::Transaction, Some(url)) => url,
        };
        let pg: tokio_postgres::Config = url.parse().map_err(|e| {
            ConfigError::new(
                SETTING,
                format!(
                    "SHORTENER_DATABASE_DIRECT_URL is not a valid PostgreSQL connection string: {e}"
                ),
            )
        })?;
        if pg.get_hosts().is_empty() {
            return Err(ConfigError::new(
                SETTING,
                "SHORTENER_DATABASE_DIRECT_URL: no host given",
            ));
        }
        pgtls::connector(&pg, self.database_ca_file.as_deref()).map_err(|e| {
            ConfigError::new(
                "SHORTENER_DATABASE_CA_FILE",
                format!("SHORTENER_DATABASE_CA_FILE with SHORTENER_DATABASE_DIRECT_URL: {e}"),
            )
        })?;
        Ok(())
    }
}
