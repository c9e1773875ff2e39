//! Start-up: the callers, the migrations and the ledger, before any port is bound.

use crate::auth::{CallerSet, Gate, NamespaceGrant, tokens_file};
use crate::config::Config;
use crate::domain::Namespace;
use crate::ledger::{Failover, Ledger, LedgerSettings};
use crate::logsafe::Escaped;
use crate::metrics::Metrics;
use anyhow::Context;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use pgtls::pooler::PoolMode;
use std::sync::Arc;

/// The ledger over a connection pool for `config`, with the configured namespaces created.
pub(super) async fn open_ledger(config: &Config) -> anyhow::Result<Ledger> {
    let ledger = Ledger::new(
        build_pool(config)?,
        LedgerSettings {
            namespace_max: config.namespace_max,
            max_block: config.max_block,
            auto_create: config.auto_create_namespaces,
            failover: Failover {
                margin_ids: config.failover_margin_ids,
                margin_leases: config.failover_margin_leases,
                max_reported_ahead: config.max_reported_ahead,
            },
            pool_mode: config.database_pool_mode,
        },
    );
    for name in &config.namespaces {
        let namespace = Namespace::parse(name)?;
        ledger
            .ensure_namespace(&namespace)
            .await
            .with_context(|| format!("create namespace {namespace}"))?;
    }
    Ok(ledger)
}

/// Shows every namespace's counters at zero (see [`Metrics::expect_namespace`]): those of the
/// configuration and those made before by any replica, through `NamespaceAdmin` or on first
/// use. A listing that fails is said and leaves the counters to their first events.
pub(super) async fn expect_namespaces(ledger: &Ledger, metrics: &Metrics) {
    const PAGE: u32 = 1000;
    let mut after = None;
    loop {
        let request = crate::domain::ListNamespaces {
            limit: PAGE,
            after: after.take(),
        };
        let page = match ledger.list_namespaces(&request, None).await {
            Ok(page) => page,
            Err(error) => {
                tracing::warn!(%error, "could not list the namespaces to show their counters at zero");
                return;
            }
        };
        for info in &page {
            metrics.expect_namespace(&info.name);
        }
        let last = page.last().map(|info| Namespace::parse(&info.name));
        match last {
            Some(Ok(last)) if page.len() == PAGE as usize => after = Some(last),
            _ => return,
        }
    }
}

/// The gate for `config`: the tokens file's callers, or everyone with `--insecure-no-auth`.
pub(super) fn load_gate(
    config: &Config,
    metrics: &Arc<Metrics>,
) -> anyhow::Result<(Gate, Option<String>)> {
    let Some(path) = &config.tokens_file else {
        tracing::warn!(
            "serving WITHOUT authentication (--insecure-no-auth): anyone who reaches a port may \
             lease, allocate and manage namespaces"
        );
        return Ok((Gate::insecure(Arc::clone(metrics)), None));
    };
    let text = tokens_file::read_text(path).context("load ID_SERVICE_TOKENS_FILE")?;
    let specs = tokens_file::parse(&text)
        .map_err(|e| anyhow::anyhow!(Escaped(&e.to_string()).to_string()))
        .context("load ID_SERVICE_TOKENS_FILE")?;
    tracing::info!(callers = specs.len(), path = %path.display(), "tokens file loaded");
    let gate = Gate::with_callers(CallerSet::build(specs, None), Arc::clone(metrics));
    Ok((gate, Some(text)))
}

/// Warns once for each caller of the tokens file that may use a namespace that does not exist
/// (at start, and after each reload of the file): its leases and allocations there will be
/// refused until the namespace is created.
pub(super) async fn warn_of_missing_namespaces(ledger: &Ledger, tokens_text: &str) {
    let Ok(specs) = tokens_file::parse(tokens_text) else {
        return;
    };
    let mut exists = std::collections::BTreeMap::new();
    for spec in &specs {
        let NamespaceGrant::Only(granted) = &spec.namespaces else {
            continue;
        };
        let mut missing = Vec::new();
        for namespace in granted {
            let known = match exists.get(namespace) {
                Some(known) => *known,
                None => {
                    let known = match ledger.describe_namespace(namespace).await {
                        Ok(_) => true,
                        Err(crate::error::Error::NotFound(_)) => false,
                        // The ledger cannot tell now; the first lease will say.
                        Err(_) => true,
                    };
                    exists.insert(namespace.clone(), known);
                    known
                }
            };
            if !known {
                missing.push(namespace.to_string());
            }
        }
        if !missing.is_empty() {
            let missing = missing.join(",");
            tracing::warn!(
                caller = %spec.name,
                namespaces = %missing,
                "a caller may use namespaces that do not exist: its leases there are refused \
                 until they are created (add them to ID_SERVICE_NAMESPACES, or set \
                 ID_SERVICE_AUTO_CREATE_NAMESPACES=true)"
            );
        }
    }
}

/// Validates `config` like [`App::build`], then applies pending migrations over a dedicated
/// connection (to ID_SERVICE_DATABASE_DIRECT_URL in transaction pooling mode, which must reach
/// a primary); returns the versions applied.
pub async fn migrate(config: &Config) -> anyhow::Result<Vec<i32>> {
    config.validate().context("validate configuration")?;
    let (pg, what) = match config.database_pool_mode {
        PoolMode::Transaction => (config.direct_pg_config(), "ID_SERVICE_DATABASE_DIRECT_URL"),
        PoolMode::Session => (config.pg_config(), "DATABASE_URL"),
    };
    let pg = pg.with_context(|| format!("read {what}"))?;
    let tls = config.direct_tls().context("configure TLS to postgres")?;
    let (mut client, connection) = pg
        .connect(tls)
        .await
        .with_context(|| format!("connect to postgres ({what})"))?;
    let connection = tokio::spawn(connection);
    if config.database_pool_mode == PoolMode::Transaction {
        // A direct URL at a standby would migrate nothing and hold no lock that matters.
        pgtls::evict::require_primary(&client)
            .await
            .with_context(|| format!("{what} must reach the primary"))?;
    }
    let applied = crate::migrate::apply(&mut client)
        .await
        .context("apply migrations");
    drop(client);
    // The connection ends once the client is dropped; its error (if any) adds nothing here.
    let _ = connection.await;
    applied
}

fn build_pool(config: &Config) -> anyhow::Result<Pool> {
    let mut pg = config.pg_config()?;
    // A call the server gave up on (request timeout) must not keep waiting inside PostgreSQL,
    // for example on a namespace lock an operator holds, and pin a pooled connection there.
    // Migrations use their own connection without this bound: they may queue behind another
    // replica's.
    let mut options = pg.get_options().unwrap_or_default().to_string();
    // A pooler in transaction mode passes no startup options: there, set statement_timeout on
    // the role (docs/operations.md, "PgBouncer and HAProxy").
    if config.database_pool_mode == PoolMode::Session && !options.contains("statement_timeout") {
        options.push_str(&format!(
            " -c statement_timeout={}",
            config.request_timeout.as_millis()
        ));
    }
    if !options.trim().is_empty() {
        pg.options(options.trim());
    }
    let manager = Manager::from_config(
        pg,
        config.tls()?,
        ManagerConfig {
            // A closed connection is detected without a round trip; a server that died under
            // an open one makes the next query fail with UNAVAILABLE and the pool drops it.
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(config.db_pool_size)
        // A connection made before a read-only answer, a shutdown or a failure is not reused.
        .pre_recycle(pgtls::evict::hook())
        .wait_timeout(Some(config.db_pool_timeout))
        .create_timeout(Some(config.db_connect_timeout))
        .recycle_timeout(Some(config.db_connect_timeout))
        .runtime(Runtime::Tokio1)
        .build()
        .context("build the connection pool")
}
