//! The lease ledger in PostgreSQL: grants, look-ups and namespace creation.
//!
//! A grant is one autocommit call of `id_grant_lease()` (see `migrations/0001_ledger.sql`): it
//! locks the namespace row, advances the namespace's sequence by the lease size, inserts the
//! lease row and forces `synchronous_commit = on`, all in one transaction. The reply is built
//! from the row that call returns, so it exists only once the commit is durable.

use crate::domain::{Lease, LeaseRequest, ListRequest, LookupRequest, Namespace};
use crate::error::Error;
use codespace::Block;
use deadpool_postgres::{Object, Pool, PoolError};
use std::time::Duration;
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;

/// The columns every lease query returns, in [`lease_from_row`] order.
const LEASE_COLUMNS: &str = "lease_id, namespace, lower(ids), upper(ids), holder, leased_at";

/// Grants and reads leases through a connection pool.
#[derive(Clone)]
pub struct Ledger {
    pool: Pool,
    /// MAXVALUE of namespaces created from now on.
    namespace_max: i64,
    auto_create: bool,
}

impl Ledger {
    /// A ledger over `pool`; `namespace_max` bounds namespaces it creates.
    pub fn new(pool: Pool, namespace_max: u64, auto_create: bool) -> Self {
        Self {
            pool,
            // Config validation keeps the bound below i64::MAX.
            namespace_max: i64::try_from(namespace_max).unwrap_or(i64::MAX - 1),
            auto_create,
        }
    }

    /// The pool, for status metrics.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn client(&self) -> Result<Object, Error> {
        self.pool.get().await.map_err(pool_error)
    }

    /// Grants a block, creating the namespace first if it is unknown and auto-creation is on.
    pub async fn grant(&self, request: &LeaseRequest) -> Result<Lease, Error> {
        let client = self.client().await?;
        match grant_once(&client, request).await {
            Err(e) if e.code() == Some(&SqlState::NO_DATA_FOUND) && self.auto_create => {
                self.ensure_namespace_with(&client, &request.namespace)
                    .await?;
                tracing::info!(namespace = %request.namespace, "created namespace on first use");
                grant_once(&client, request)
                    .await
                    .map_err(|e| db_error(e, &request.namespace))
            }
            result => result.map_err(|e| db_error(e, &request.namespace)),
        }
    }

    /// Creates `namespace` (with this ledger's bound) unless it exists.
    pub async fn ensure_namespace(&self, namespace: &Namespace) -> Result<(), Error> {
        let client = self.client().await?;
        self.ensure_namespace_with(&client, namespace).await
    }

    async fn ensure_namespace_with(
        &self,
        client: &Object,
        namespace: &Namespace,
    ) -> Result<(), Error> {
        client
            .execute(
                "SELECT id_ensure_namespace($1, $2)",
                &[&namespace.as_str(), &self.namespace_max],
            )
            .await
            .map(|_| ())
            .map_err(|e| db_error(e, namespace))
    }

    /// The lease that contains the ID.
    pub async fn lookup(&self, request: &LookupRequest) -> Result<Lease, Error> {
        let not_found = || {
            Error::NotFound(format!(
                "no lease of namespace {} contains ID {}",
                request.namespace, request.id
            ))
        };
        let Ok(id) = i64::try_from(request.id) else {
            return Err(not_found());
        };
        let client = self.client().await?;
        let statement = client
            .prepare_cached(&format!(
                "SELECT {LEASE_COLUMNS} FROM id_leases WHERE namespace = $1 AND ids @> $2::int8"
            ))
            .await
            .map_err(|e| db_error(e, &request.namespace))?;
        let row = client
            .query_opt(&statement, &[&request.namespace.as_str(), &id])
            .await
            .map_err(|e| db_error(e, &request.namespace))?;
        match row {
            Some(row) => lease_from_row(&row),
            None => {
                self.require_namespace(&client, &request.namespace).await?;
                Err(not_found())
            }
        }
    }

    /// A page of the namespace's leases, newest first.
    pub async fn list(&self, request: &ListRequest) -> Result<Vec<Lease>, Error> {
        let before = request
            .before_lease_id
            .map_or(i64::MAX, |id| i64::try_from(id).unwrap_or(i64::MAX));
        let client = self.client().await?;
        let statement = client
            .prepare_cached(&format!(
                "SELECT {LEASE_COLUMNS} FROM id_leases
                  WHERE namespace = $1 AND lease_id < $2
                  ORDER BY lease_id DESC LIMIT $3"
            ))
            .await
            .map_err(|e| db_error(e, &request.namespace))?;
        let rows = client
            .query(
                &statement,
                &[
                    &request.namespace.as_str(),
                    &before,
                    &i64::from(request.limit),
                ],
            )
            .await
            .map_err(|e| db_error(e, &request.namespace))?;
        if rows.is_empty() {
            self.require_namespace(&client, &request.namespace).await?;
        }
        rows.iter().map(lease_from_row).collect()
    }

    async fn require_namespace(&self, client: &Object, namespace: &Namespace) -> Result<(), Error> {
        let exists = client
            .query_opt(
                "SELECT 1 FROM id_namespaces WHERE name = $1",
                &[&namespace.as_str()],
            )
            .await
            .map_err(|e| db_error(e, namespace))?
            .is_some();
        if exists {
            Ok(())
        } else {
            Err(Error::NotFound(format!(
                "namespace {namespace} does not exist"
            )))
        }
    }

    /// Whether the database answers within `timeout`.
    pub async fn ping(&self, timeout: Duration) -> bool {
        let check = async {
            let client = self.client().await.ok()?;
            client.simple_query("SELECT 1").await.ok()
        };
        matches!(tokio::time::timeout(timeout, check).await, Ok(Some(_)))
    }
}

async fn grant_once(
    client: &Object,
    request: &LeaseRequest,
) -> Result<Lease, tokio_postgres::Error> {
    let statement = client
        .prepare_cached(
            "SELECT lease_id, first_id, end_id, leased_at FROM id_grant_lease($1, $2, $3)",
        )
        .await?;
    // The size is at most the configured maximum, which validation keeps within i64.
    let size = i64::try_from(request.size).unwrap_or(i64::MAX);
    // The statement runs in its own implicit transaction, which the server commits when it
    // processes Sync, before it sends ReadyForQuery. `query_one` reads up to ReadyForQuery, so it
    // returns the row only after the durable commit, and a failed commit comes back as an error.
    // Keep it that way: an API that returned at the first DataRow could reply before the commit.
    let row = client
        .query_one(
            &statement,
            &[&request.namespace.as_str(), &size, &request.holder.as_str()],
        )
        .await?;
    let lease_id: i64 = row.try_get(0)?;
    let first: i64 = row.try_get(1)?;
    let end: i64 = row.try_get(2)?;
    let leased_at = row.try_get(3)?;
    Ok(Lease {
        lease_id: lease_id as u64,
        namespace: request.namespace.as_str().to_string(),
        // The ledger's CHECK constraints keep ranges non-empty and IDs at least 1.
        block: Block {
            start: first as u64,
            end: end as u64,
        },
        holder: request.holder.as_str().to_string(),
        leased_at,
    })
}

fn lease_from_row(row: &Row) -> Result<Lease, Error> {
    let read = || -> Result<Lease, tokio_postgres::Error> {
        let lease_id: i64 = row.try_get(0)?;
        let first: i64 = row.try_get(2)?;
        let end: i64 = row.try_get(3)?;
        Ok(Lease {
            lease_id: lease_id as u64,
            namespace: row.try_get(1)?,
            block: Block {
                start: first as u64,
                end: end as u64,
            },
            holder: row.try_get(4)?,
            leased_at: row.try_get(5)?,
        })
    };
    read().map_err(|e| Error::Internal(format!("decode a lease row: {e}")))
}

fn pool_error(error: PoolError) -> Error {
    match error {
        PoolError::Timeout(kind) => Error::Unavailable(format!(
            "no database connection within the timeout ({kind:?})"
        )),
        PoolError::Backend(e) => classify(e, None),
        PoolError::Closed => Error::Unavailable("the connection pool is closed".into()),
        other => Error::Internal(format!("connection pool: {other}")),
    }
}

fn db_error(error: tokio_postgres::Error, namespace: &Namespace) -> Error {
    classify(error, Some(namespace))
}

/// Sorts a database error into the cases callers act on.
fn classify(error: tokio_postgres::Error, namespace: Option<&Namespace>) -> Error {
    let Some(db) = error.as_db_error() else {
        // No server answer at all: the connection failed, closed or timed out.
        return Error::Unavailable(error.to_string());
    };
    let code = db.code();
    if *code == SqlState::SEQUENCE_GENERATOR_LIMIT_EXCEEDED {
        return Error::Exhausted {
            namespace: namespace.map(|n| n.to_string()).unwrap_or_default(),
        };
    }
    if *code == SqlState::NO_DATA_FOUND {
        return Error::NotFound(db.message().to_string());
    }
    let class = &code.code()[..2];
    let transient = matches!(
        class,
        "08" // connection exception
        | "53" // insufficient resources (too many connections, disk full)
        | "57" // operator intervention: shutdown, crash recovery, query cancelled
        | "40" // serialization failure, deadlock: nothing was committed
    ) || *code == SqlState::LOCK_NOT_AVAILABLE
        // A standby after a failover misrouting: writes are refused, nothing was granted.
        || *code == SqlState::READ_ONLY_SQL_TRANSACTION;
    if transient {
        Error::Unavailable(format!("{}: {}", code.code(), db.message()))
    } else {
        Error::Internal(format!("{}: {}", code.code(), db.message()))
    }
}
