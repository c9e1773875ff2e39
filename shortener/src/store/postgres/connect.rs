//! Connecting: the pools (primary and read replica) and the migrations run at start-up.

use super::PgSettings;
use super::error::db_error;
use crate::store::StoreError;
use crate::store::migrate::{ADVISORY_LOCK, POSTGRES, VERSION_TABLE};
use deadpool_postgres::{Pool, Runtime, Timeouts};

/// A pool for `url` (named `what` in errors) with `options` added to every session.
pub(super) fn new_pool(
    url: &str,
    what: &str,
    options: &str,
    settings: &PgSettings,
) -> Result<(Pool, tokio_postgres::Config, pgtls::MakeRustlsConnect), StoreError> {
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| StoreError::Internal(format!("parse {what}: {e}")))?;
    let options = match config.get_options() {
        Some(existing) => format!("{existing} {options}"),
        None => options.to_string(),
    };
    config.options(&options);
    config.connect_timeout(settings.timeout);
    let tls = pgtls::connector(&config, settings.ca_file.as_deref())
        .map_err(|e| StoreError::Internal(format!("configure TLS to PostgreSQL ({what}): {e}")))?;
    let manager = deadpool_postgres::Manager::from_config(
        config.clone(),
        tls.clone(),
        deadpool_postgres::ManagerConfig {
            recycling_method: deadpool_postgres::RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(manager)
        .max_size(settings.max_connections)
        // A connection made before a read-only answer, a shutdown or a failure is not reused.
        .pre_recycle(pgtls::evict::hook())
        .runtime(Runtime::Tokio1)
        .timeouts(Timeouts {
            wait: Some(settings.timeout),
            create: Some(settings.timeout),
            recycle: Some(settings.timeout),
        })
        .build()
        .map_err(|e| {
            StoreError::Internal(format!("configure the PostgreSQL pool ({what}): {e}"))
        })?;
    Ok((pool, config, tls))
}

/// Applies pending migrations under an advisory lock, so several nodes starting at once apply
/// each exactly once.
pub(super) async fn migrate(client: &mut tokio_postgres::Client) -> Result<usize, StoreError> {
    let tx = client.transaction().await.map_err(db_error)?;
    // A migration may rewrite a large table, and waits for the lock while another node migrates.
    tx.batch_execute("SET LOCAL statement_timeout = 0")
        .await
        .map_err(db_error)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&ADVISORY_LOCK])
        .await
        .map_err(db_error)?;
    tx.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version bigint PRIMARY KEY, name text NOT NULL, \
         applied_at timestamptz NOT NULL DEFAULT now())"
    ))
    .await
    .map_err(db_error)?;
    let applied: Vec<i64> = tx
        .query(&format!("SELECT version FROM {VERSION_TABLE}"), &[])
        .await
        .map_err(db_error)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut ran = 0;
    for m in POSTGRES.iter().filter(|m| !applied.contains(&m.version)) {
        tx.batch_execute(m.sql).await.map_err(db_error)?;
        tx.execute(
            &format!("INSERT INTO {VERSION_TABLE} (version, name) VALUES ($1, $2)"),
            &[&m.version, &m.name],
        )
        .await
        .map_err(db_error)?;
        ran += 1;
    }
    tx.commit().await.map_err(db_error)?;
    Ok(ran)
}

/// Applies pending migrations to the database at `url` over one connection of its own (TLS as
/// `url` asks, trusting `ca_file` besides the system's roots), needing nothing else: no code
/// key, no id-service, no API keys. Returns how many ran.
pub async fn migrate_database(
    url: &str,
    ca_file: Option<&std::path::Path>,
) -> Result<usize, StoreError> {
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| StoreError::Internal(format!("parse DATABASE_URL: {e}")))?;
    config.connect_timeout(std::time::Duration::from_secs(5));
    let tls = pgtls::connector(&config, ca_file)
        .map_err(|e| StoreError::Internal(format!("configure TLS to PostgreSQL: {e}")))?;
    let (mut client, connection) = config.connect(tls).await.map_err(db_error)?;
    let driver = tokio::spawn(connection);
    let ran = migrate(&mut client).await;
    drop(client);
    let _ = driver.await;
    ran
}
