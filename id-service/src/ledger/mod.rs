//! The lease ledger in PostgreSQL: grants, look-ups and namespaces.
//!
//! A grant is one autocommit call of `id_grant()` (see `migrations/0002_namespaces_timeline.sql`):
//! it locks the namespace row, moves the cursor forward if the database is on a new timeline or
//! the caller reports holding IDs above it, advances the namespace's sequence by the lease size,
//! inserts the lease row and forces `synchronous_commit = on`, all in one transaction. The reply
//! is built from the row that call returns, so it exists only once the commit is durable.

mod errors;
mod namespaces;
mod quotas;
mod sql;

use crate::domain::{Lease, ListRequest, LookupRequest, Namespace};
use crate::error::Error;
use codespace::Block;
use deadpool_postgres::{Object, Pool};
pub(crate) use errors::{classify, db_error, pool_error};
pub use quotas::{QuotaCharge, QuotaKind};
use std::time::Duration;
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

/// The columns every lease query returns, in [`lease_from_row`] order.
const LEASE_COLUMNS: &str = "lease_id, namespace, lower(ids), upper(ids), holder, leased_at";

/// How far a grant may move the cursor before granting (see `docs/leases.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failover {
    /// On a new timeline or system: skip at least this many IDs past the ledger's end.
    pub margin_ids: u64,
    /// ... or this many times the largest of the namespace's last 1000 leases, if more.
    pub margin_leases: u64,
    /// The most a caller's reported high water may lie above the cursor.
    pub max_reported_ahead: u64,
}

/// What the ledger needs to know about the server's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerSettings {
    /// MAXVALUE of namespaces created without a bound of their own.
    pub namespace_max: u64,
    /// The server's largest block (a namespace's own limit may be lower).
    pub max_block: u64,
    /// Whether a grant for an unknown namespace creates it.
    pub auto_create: bool,
    /// The failover margins.
    pub failover: Failover,
    /// The pooler's mode, which decides how statements are sent (see `sql`).
    pub pool_mode: pgtls::pooler::PoolMode,
}

/// A grant to make: the holder is already the one to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant<'a> {
    /// Where to draw from.
    pub namespace: &'a Namespace,
    /// How many IDs.
    pub size: u64,
    /// The holder to record.
    pub holder: &'a str,
    /// One past the highest ID the caller reports holding.
    pub high_water: Option<u64>,
}

/// IDs the cursor skipped before a grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    /// The ID the grant would have started at.
    pub from: u64,
    /// The ID it started at.
    pub to: u64,
    /// The database was on a new timeline or system.
    pub new_timeline: bool,
    /// A reported high water moved the cursor (further).
    pub reported: bool,
}

impl Skip {
    /// How many IDs were skipped.
    pub fn ids(&self) -> u64 {
        self.to.saturating_sub(self.from)
    }

    /// `timeline` or `reported`, for metrics and logs.
    pub fn cause(&self) -> &'static str {
        if self.new_timeline {
            "timeline"
        } else {
            "reported"
        }
    }
}

/// Grants and reads leases through a connection pool.
#[derive(Clone)]
pub struct Ledger {
    pool: Pool,
    settings: LedgerSettings,
}

/// A bigint within the ledger's range, as an ID or a count (validated configuration and
/// requests keep every such value below `i64::MAX`).
fn bigint(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl Ledger {
    /// A ledger over `pool`.
    pub fn new(pool: Pool, settings: LedgerSettings) -> Self {
        Self { pool, settings }
    }

    /// The pool, for status metrics.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn client(&self) -> Result<Object, Error> {
        self.pool.get().await.map_err(pool_error)
    }

    /// Grants a block, creating the namespace first if it is unknown and auto-creation is on.
    /// Returns the lease and, if the cursor was moved first, by how much and why.
    ///
    /// A grant refused as read-only (the server is a standby now) changed nothing: it runs once
    /// more on a fresh connection, which finds the primary if the connection string lists it.
    pub async fn grant(&self, grant: &Grant<'_>) -> Result<(Lease, Option<Skip>), Error> {
        match self.grant_on(grant).await {
            Err(Refusal::ReadOnly(error)) => {
                tracing::debug!(%error, "grant refused as read-only; running it once more");
                self.grant_on(grant).await.map_err(Refusal::into_error)
            }
            other => other.map_err(Refusal::into_error),
        }
    }

    /// [`Ledger::grant`] on one pooled connection.
    async fn grant_on(&self, grant: &Grant<'_>) -> Result<(Lease, Option<Skip>), Refusal> {
        let classify = |e: tokio_postgres::Error| {
            if pgtls::evict::read_only(&e) {
                Refusal::ReadOnly(db_error(e, grant.namespace))
            } else {
                Refusal::Other(db_error(e, grant.namespace))
            }
        };
        let client = self.client().await.map_err(Refusal::Other)?;
        // Traced when the call is (see the `otel` crate): the procedure, never its arguments.
        let span = otel::db_procedure_span("postgresql", "id_grant");
        let first = tracing::Instrument::instrument(self.grant_once(&client, grant), span).await;
        let no_row = || Refusal::Other(Error::Internal("id_grant returned no row".into()));
        match first {
            Err(e) if e.code() == Some(&SqlState::NO_DATA_FOUND) && self.settings.auto_create => {
                if self
                    .create_default(&client, grant.namespace)
                    .await
                    .map_err(Refusal::Other)?
                {
                    tracing::info!(namespace = %grant.namespace, "created namespace on first use");
                }
                self.grant_once(&client, grant)
                    .await
                    .map_err(classify)?
                    .ok_or_else(no_row)
            }
            result => result.map_err(classify)?.ok_or_else(no_row),
        }
    }

    async fn grant_once(
        &self,
        client: &Object,
        grant: &Grant<'_>,
    ) -> Result<Option<(Lease, Option<Skip>)>, tokio_postgres::Error> {
        let failover = self.settings.failover;
        // The statement runs in its own implicit transaction, which the server commits when it
        // processes Sync, before it sends ReadyForQuery. `sql::query_opt` collects the rows up
        // to ReadyForQuery (prepared or unnamed alike), so it returns the row only after the
        // durable commit, and a failed commit comes back as an error. Keep it that way: an API
        // that returned at the first DataRow could reply before the commit.
        let row = sql::query_opt(
            client,
            self.settings.pool_mode,
            "SELECT lease_id, first_id, end_id, leased_at, skipped_from, new_timeline,
                    reported_ahead
               FROM id_grant($1, $2, $3, $4, $5, $6, $7)",
            &[
                (&grant.namespace.as_str(), Type::TEXT),
                (&bigint(grant.size), Type::INT8),
                (&grant.holder, Type::TEXT),
                (&grant.high_water.map(bigint), Type::INT8),
                (&bigint(failover.margin_ids), Type::INT8),
                (&bigint(failover.margin_leases), Type::INT8),
                (&bigint(failover.max_reported_ahead), Type::INT8),
            ],
        )
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let lease_id: i64 = row.try_get(0)?;
        let first: i64 = row.try_get(1)?;
        let end: i64 = row.try_get(2)?;
        let skipped_from: Option<i64> = row.try_get(4)?;
        let new_timeline: bool = row.try_get(5)?;
        let reported: bool = row.try_get(6)?;
        let lease = Lease {
            lease_id: lease_id as u64,
            namespace: grant.namespace.as_str().to_string(),
            // The ledger's CHECK constraints keep ranges non-empty and IDs at least 1.
            block: Block {
                start: first as u64,
                end: end as u64,
            },
            holder: grant.holder.to_string(),
            leased_at: row.try_get(3)?,
        };
        let skip = skipped_from.map(|from| Skip {
            from: from as u64,
            to: first as u64,
            new_timeline,
            reported,
        });
        Ok(Some((lease, skip)))
    }

    /// The lease that contains the ID.
    pub async fn lookup(&self, request: &LookupRequest) -> Result<Lease, Error> {
        // Traced when the call is (see the `otel` crate): never the arguments.
        let span = otel::db_span("postgresql", "SELECT", "id_leases");
        tracing::Instrument::instrument(self.lookup_untraced(request), span).await
    }

    async fn lookup_untraced(&self, request: &LookupRequest) -> Result<Lease, Error> {
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
        let row = sql::query_opt(
            &client,
            self.settings.pool_mode,
            &format!(
                "SELECT {LEASE_COLUMNS} FROM id_leases WHERE namespace = $1 AND ids @> $2::int8"
            ),
            &[(&request.namespace.as_str(), Type::TEXT), (&id, Type::INT8)],
        )
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
        // Traced when the call is (see the `otel` crate): never the arguments.
        let span = otel::db_span("postgresql", "SELECT", "id_leases");
        tracing::Instrument::instrument(self.list_untraced(request), span).await
    }

    async fn list_untraced(&self, request: &ListRequest) -> Result<Vec<Lease>, Error> {
        let before = request.before_lease_id.map_or(i64::MAX, bigint);
        let client = self.client().await?;
        let rows = sql::query(
            &client,
            self.settings.pool_mode,
            &format!(
                "SELECT {LEASE_COLUMNS} FROM id_leases
                  WHERE namespace = $1 AND lease_id < $2
                  ORDER BY lease_id DESC LIMIT $3"
            ),
            &[
                (&request.namespace.as_str(), Type::TEXT),
                (&before, Type::INT8),
                (&i64::from(request.limit), Type::INT8),
            ],
        )
        .await
        .map_err(|e| db_error(e, &request.namespace))?;
        if rows.is_empty() {
            self.require_namespace(&client, &request.namespace).await?;
        }
        rows.iter().map(lease_from_row).collect()
    }

    /// Whether a primary answers within `timeout`: a pooled connection whose server is
    /// read-only (a standby, or a primary demoted since) does not count, and empties the pool
    /// of connections made before it (see [`pgtls::evict`]).
    pub async fn ping(&self, timeout: Duration) -> bool {
        let check = async {
            let client = self.client().await.ok()?;
            pgtls::evict::require_primary(&client).await.ok()
        };
        matches!(tokio::time::timeout(timeout, check).await, Ok(Some(_)))
    }
}

/// How a grant on one connection failed.
enum Refusal {
    /// The server refused the write as read-only: nothing changed.
    ReadOnly(Error),
    /// Anything else.
    Other(Error),
}

impl Refusal {
    fn into_error(self) -> Error {
        match self {
            Refusal::ReadOnly(e) | Refusal::Other(e) => e,
        }
    }
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
