//! The embedded lease ledger: the same promise as the id-service's (a lease is durable before it
//! is used, and no two leases of a namespace overlap), in the same file as the links.

use super::SqliteStore;
use super::convert::{db_error, millis};
use crate::store::StoreError;
use chrono::Utc;
use codespace::Block;
use id_client::{Lease, LeaseError, LeaseFuture, LeaseSource};
use rusqlite::{TransactionBehavior, params};

impl SqliteStore {
    /// Leases the next `size` IDs of `namespace` for `holder`: one immediate transaction
    /// advances the namespace cursor and records the lease; it returns after the commit is on
    /// disk. Overlap is refused by a trigger, so the file itself proves disjointness.
    pub async fn lease(
        &self,
        namespace: &str,
        size: u64,
        holder: &str,
    ) -> Result<(u64, Block), StoreError> {
        let (namespace, holder) = (namespace.to_string(), holder.to_string());
        self.write(move |conn| {
            let size = i64::try_from(size)
                .map_err(|_| StoreError::Internal("lease size too large".into()))?;
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db_error)?;
            tx.execute(
                "INSERT INTO id_namespaces (namespace, next_id) VALUES (?1, 0) ON CONFLICT DO NOTHING",
                [&namespace],
            )
            .map_err(db_error)?;
            let start: i64 = tx
                .query_row(
                    "SELECT next_id FROM id_namespaces WHERE namespace = ?1",
                    [&namespace],
                    |r| r.get(0),
                )
                .map_err(db_error)?;
            let end = start
                .checked_add(size)
                .ok_or_else(|| StoreError::Internal(format!("namespace {namespace} exhausted")))?;
            tx.execute(
                "UPDATE id_namespaces SET next_id = ?2 WHERE namespace = ?1",
                params![namespace, end],
            )
            .map_err(db_error)?;
            tx.execute(
                "INSERT INTO id_leases (namespace, start_id, end_id, holder, leased_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![namespace, start, end, holder, millis(Utc::now())],
            )
            .map_err(db_error)?;
            let lease_id = tx.last_insert_rowid() as u64;
            tx.commit().map_err(db_error)?;
            let block = Block::new(start as u64, end as u64)
                .ok_or_else(|| StoreError::Internal("empty lease".into()))?;
            Ok((lease_id, block))
        })
        .await
    }
}

/// Leases from the embedded ledger, for the node's ID pool.
pub(super) struct EmbeddedLeaseSource {
    pub(super) store: SqliteStore,
    pub(super) namespace: String,
    pub(super) holder: String,
}

impl LeaseSource for EmbeddedLeaseSource {
    fn lease(&self, size: u64) -> LeaseFuture<'_> {
        Box::pin(async move {
            match self.store.lease(&self.namespace, size, &self.holder).await {
                Ok((lease_id, block)) => Ok(Lease { lease_id, block }),
                // The pool retries with backoff and reports the error; the file stays the ledger.
                Err(error) => Err(LeaseError::Unavailable(error.to_string())),
            }
        })
    }
}
