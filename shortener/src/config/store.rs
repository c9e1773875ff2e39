//! Settings of one part of the node (`Storage` in `--help`).

use super::ConfigError;
use clap::Args;
use std::path::PathBuf;

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
    /// Most PostgreSQL connections this node opens (to the primary; as many again to a replica).
    #[arg(long, env = "SHORTENER_DATABASE_MAX_CONNECTIONS", default_value_t = 16)]
    pub database_max_connections: usize,
    /// Most milliseconds one PostgreSQL statement may run before the server cancels it (a
    /// lock wait or a runaway plan fails fast instead of holding a connection); migrations and
    /// rollup maintenance lift it for their own statements.
    #[arg(long, env = "SHORTENER_DATABASE_STATEMENT_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(100..=3_600_000)
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
}

impl StoreConfig {
    /// Checks what this section alone can tell; the error names the setting.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
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
        if let Some(path) = &self.database_ca_file {
            pgtls::load_ca_file(path).map_err(|e| {
                ConfigError::new(
                    "SHORTENER_DATABASE_CA_FILE",
                    format!("SHORTENER_DATABASE_CA_FILE: {e}"),
                )
            })?;
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
        }
        Ok(())
    }
}
