//! `shortener migrate`: applies the schema migrations and exits, needing only the store's
//! settings (a PostgreSQL URL, or the embedded data directory).

use crate::config::{Config, LogFormat};
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `shortener migrate`: only what reaching the store takes.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// PostgreSQL connection string (unset: the embedded SQLite file in the data directory,
    /// which a node also migrates at every start).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// PEM file of CA certificates trusted for TLS to PostgreSQL, besides the system's.
    #[arg(long, env = "SHORTENER_DATABASE_CA_FILE")]
    pub database_ca_file: Option<PathBuf>,
    /// Embedded mode: the directory holding the SQLite file and its code key.
    #[arg(long, env = "SHORTENER_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,
    /// Log output format.
    #[arg(long, env = "SHORTENER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Applies the migrations `args` point at and logs how many ran.
pub async fn run(args: MigrateArgs) -> anyhow::Result<()> {
    let ran = match &args.database_url {
        Some(url) => {
            crate::store::postgres::migrate_database(url, args.database_ca_file.as_deref())
                .await
                .context("apply PostgreSQL migrations")?
        }
        None => {
            // The embedded file migrates as a node opens it (its code key checked), which is
            // what preparing a node's store does.
            let mut config = Config::from_env_and_defaults()?;
            config.store.data_dir = args.data_dir;
            crate::app::prepare(&config).await?;
            0
        }
    };
    tracing::info!(ran, "migrations applied");
    Ok(())
}
