//! Connecting: the pools (primary, read replica and, behind a transaction-mode pooler, the
//! direct connection's) and the migrations run at start-up.

use super::PgSettings;
use super::error::db_error;
use super::send::{Conn, Pooled, Sending};
use crate::store::StoreError;
use crate::store::migrate::{ADVISORY_LOCK, POSTGRES, VERSION_TABLE};
use deadpool_postgres::{Pool, Runtime, Timeouts};
use pgtls::pooler::PoolMode;

/// Most connections of the direct URL's pool: a migration and a layout run.
const DIRECT_CONNECTIONS: usize = 2;

/// The pools a store uses, and how its change feed connects.
pub(super) struct Pools {
    /// Every statement of the node's work (DATABASE_URL).
    pub(super) main: Pooled,
    /// Sessions of their own: the direct URL's in transaction mode, `main` otherwise.
    pub(super) direct: Pooled,
    /// The read replica's (SHORTENER_DATABASE_READ_URL).
    pub(super) replica: Option<Pooled>,
    /// Where the change feed's LISTEN connects: the direct URL in transaction mode.
    pub(super) feed_config: tokio_postgres::Config,
    /// Its TLS.
    pub(super) feed_tls: pgtls::MakeRustlsConnect,
}

impl Pools {
    /// The pools of `settings`. In session mode every session commits synchronously whatever
    /// the server default (an insert is acknowledged only once it is durable, I3, even as a
    /// single autocommit statement), a statement that outlives its bound is cancelled by the
    /// server, and a session left idle inside a transaction (a client gone mid-way) is ended
    /// rather than holding locks: all startup options. A pooler in transaction mode passes no
    /// session setting on, so there the node sets none and [`check_pooled`] checks the ones
    /// the role or database must carry.
    pub(super) fn new(settings: &PgSettings) -> Result<Self, StoreError> {
        let bounds = format!(
            "-c statement_timeout={} -c idle_in_transaction_session_timeout=60000",
            settings.statement_timeout.as_millis()
        );
        let session = format!("-c synchronous_commit=on {bounds}");
        let transaction = settings.pool_mode == PoolMode::Transaction;
        let pooled = |options: String| if transaction { String::new() } else { options };
        let sending = Sending::new(settings.pool_mode);
        let (pool, config, tls) = new_pool(
            &settings.url,
            "DATABASE_URL",
            &pooled(session.clone()),
            settings,
        )?;
        let main = Pooled {
            pool,
            sending: sending.clone(),
        };
        let replica = match &settings.read_url {
            // A replica refuses writes anyway; saying so makes a routing mistake an error.
            Some(url) => Some(Pooled {
                pool: new_pool(
                    url,
                    "SHORTENER_DATABASE_READ_URL",
                    &pooled(format!("-c default_transaction_read_only=on {bounds}")),
                    settings,
                )?
                .0,
                sending,
            }),
            None => None,
        };
        let (direct, feed_config, feed_tls) = match (&settings.direct_url, transaction) {
            (Some(url), true) => {
                let limited = PgSettings {
                    max_connections: DIRECT_CONNECTIONS,
                    ..settings.clone()
                };
                let (pool, config, tls) =
                    new_pool(url, "SHORTENER_DATABASE_DIRECT_URL", &session, &limited)?;
                let direct = Pooled {
                    pool,
                    sending: Sending::new(PoolMode::Session),
                };
                (direct, config, tls)
            }
            (None, true) => {
                return Err(StoreError::Internal(
                    "SHORTENER_DATABASE_POOL_MODE=transaction needs SHORTENER_DATABASE_DIRECT_URL"
                        .into(),
                ));
            }
            (_, false) => (main.clone(), config, tls),
        };
        Ok(Self {
            main,
            direct,
            replica,
            feed_config,
            feed_tls,
        })
    }
}

/// Checks, behind a pooler in transaction mode, what the node cannot set per session there:
/// the direct connection must reach a primary (a standby would hold no lock that matters
/// and migrate nothing), and a pooled session must commit synchronously (set on the role or
/// database) so an acknowledged create is durable. A statement timeout of 0 is warned of.
pub(super) async fn check_pooled(main: &Conn, direct: &Conn) -> Result<(), StoreError> {
    pgtls::evict::require_primary(direct.raw())
        .await
        .map_err(|e| {
            StoreError::Internal(format!(
                "SHORTENER_DATABASE_DIRECT_URL must reach the primary: {e}"
            ))
        })?;
    let row = main
        .query_one(
            "SELECT current_setting('synchronous_commit'), current_setting('statement_timeout')",
            &[],
        )
        .await
        .map_err(db_error)?;
    let (commit, timeout): (String, String) = (row.get(0), row.get(1));
    if !matches!(commit.as_str(), "on" | "remote_apply") {
        return Err(StoreError::Internal(format!(
            "behind a pooler in transaction mode the node cannot set synchronous_commit per \
             session, and the server says {commit:?}: set it to on for the node's role or \
             database (ALTER ROLE ... SET synchronous_commit = on), so that an acknowledged \
             create is durable"
        )));
    }
    if timeout == "0" {
        tracing::warn!(
            "behind a pooler in transaction mode SHORTENER_DATABASE_STATEMENT_TIMEOUT_MS is \
             not applied and the server sets no statement_timeout: set one on the node's role \
             (ALTER ROLE ... SET statement_timeout = ...)"
        );
    }
    Ok(())
}

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

/// Applies pending migrations to the database at `url` (the setting `what`) over one
/// connection of its own (TLS as `url` asks, trusting `ca_file` besides the system's roots),
/// needing nothing else: no code key, no id-service, no API keys. A server that is not a
/// primary is refused. Returns how many ran.
pub async fn migrate_database(
    url: &str,
    what: &str,
    ca_file: Option<&std::path::Path>,
) -> Result<usize, StoreError> {
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| StoreError::Internal(format!("parse {what}: {e}")))?;
    config.connect_timeout(std::time::Duration::from_secs(5));
    let tls = pgtls::connector(&config, ca_file)
        .map_err(|e| StoreError::Internal(format!("configure TLS to PostgreSQL: {e}")))?;
    let (mut client, connection) = config.connect(tls).await.map_err(db_error)?;
    let driver = tokio::spawn(connection);
    let ran = match pgtls::evict::require_primary(&client).await {
        Ok(()) => migrate(&mut client).await,
        Err(e) => Err(StoreError::Internal(format!(
            "{what} must reach the primary: {e}"
        ))),
    };
    drop(client);
    let _ = driver.await;
    ran
}
