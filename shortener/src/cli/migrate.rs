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
    /// The pooling mode of a pooler behind DATABASE_URL (`session` or `transaction`); in
    /// transaction mode the migrations run over SHORTENER_DATABASE_DIRECT_URL.
    #[arg(long, env = "SHORTENER_DATABASE_POOL_MODE", default_value = "session",
          value_parser = crate::config::parse_pool_mode)]
    pub database_pool_mode: pgtls::pooler::PoolMode,
    /// A connection string that reaches the primary itself, not through the pooler (required
    /// in transaction mode).
    #[arg(long, env = "SHORTENER_DATABASE_DIRECT_URL", hide_env_values = true)]
    pub database_direct_url: Option<String>,
    /// PEM file of CA certificates trusted for TLS to PostgreSQL, besides the system's.
    #[arg(long, env = "SHORTENER_DATABASE_CA_FILE")]
    pub database_ca_file: Option<PathBuf>,
    /// Embedded mode: the directory holding the SQLite file and its code key.
    #[arg(long, env = "SHORTENER_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,
    /// Log output format.
    #[arg(long, env = "SHORTENER_LOG_FORMAT", value_enum, ignore_case = true, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Applies the migrations `args` point at and logs how many ran.
pub async fn run(args: MigrateArgs) -> anyhow::Result<()> {
    super::check_environment(args.database_url.as_deref())?;
    match &args.database_url {
        Some(url) => {
            let (url, what) = migration_url(&args, url)?;
            let ran = crate::store::postgres::migrate_database(
                url,
                what,
                args.database_ca_file.as_deref(),
            )
            .await
            .context("apply PostgreSQL migrations")?;
            tracing::info!(ran, "PostgreSQL migrations applied ({what})");
        }
        None => {
            // The embedded file migrates as a node opens it (its code key checked), which is
            // what preparing a node's store does.
            let mut config = Config::from_env_and_defaults()?;
            config.store.data_dir = args.data_dir;
            crate::app::prepare(&config).await?;
            tracing::info!(
                data_dir = %config.store.data_dir.display(),
                "no DATABASE_URL: the embedded store in the data directory is migrated (made \
                 there, with its keys, if it was not)"
            );
        }
    }
    Ok(())
}

/// The URL the migrations run over, and its setting's name: the direct URL in transaction
/// pooling mode (a pooler there keeps no advisory lock), DATABASE_URL otherwise.
fn migration_url<'a>(
    args: &'a MigrateArgs,
    url: &'a str,
) -> anyhow::Result<(&'a str, &'static str)> {
    use pgtls::pooler::PoolMode;
    match (args.database_pool_mode, args.database_direct_url.as_deref()) {
        (PoolMode::Transaction, Some(direct)) => Ok((direct, "SHORTENER_DATABASE_DIRECT_URL")),
        (PoolMode::Transaction, None) => anyhow::bail!(
            "SHORTENER_DATABASE_POOL_MODE=transaction needs SHORTENER_DATABASE_DIRECT_URL: the \
             migrations take an advisory lock, which a pooler in transaction mode cannot keep"
        ),
        (PoolMode::Session, Some(_)) => anyhow::bail!(
            "SHORTENER_DATABASE_DIRECT_URL is read only with SHORTENER_DATABASE_POOL_MODE=transaction"
        ),
        (PoolMode::Session, None) => Ok((url, "DATABASE_URL")),
    }
}
