//! The capabilities interface: the store's schema, whether it answers, and what its backend
//! offers beyond the data (a change feed, an embedded lease ledger, counts of its batching,
//! group commit and replica routing). Callers ask these instead of matching on the backend.

use super::{ChangeFeed, Durability, ReplicaStats, Store, StoreError, WriterStats};
use id_client::LeaseSource;
use std::future::Future;
use std::sync::Arc;

/// What a store is beyond its data: migrations, health and what its backend offers. Both
/// backends implement it; [`Store`] dispatches.
pub trait Capabilities: Send + Sync {
    /// Applies pending migrations (and, embedded, checks the file's code space); returns how
    /// many ran.
    fn migrate(&self) -> impl Future<Output = Result<usize, StoreError>> + Send;

    /// Checks the store answers.
    fn ping(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// What the backend's write batching has done so far.
    fn writer_stats(&self) -> &WriterStats;

    /// What the group commit has done so far, where the backend has one (SQLite).
    fn durability(&self) -> Option<Durability>;

    /// What the read replica routing has done, where a replica is configured (PostgreSQL).
    fn replica_stats(&self) -> Option<Arc<ReplicaStats>>;

    /// The feed of changes made by other nodes, where several nodes share the store
    /// (PostgreSQL). `None` where this node is the only writer.
    fn change_feed(&self) -> Option<ChangeFeed>;

    /// A lease source over the store's own ledger, where the store is one (embedded SQLite);
    /// `None` where IDs come from the id-service.
    fn embedded_lease_source(&self, namespace: &str, holder: &str) -> Option<Arc<dyn LeaseSource>>;
}

impl Capabilities for Store {
    async fn migrate(&self) -> Result<usize, StoreError> {
        dispatch!(self, s => s.migrate().await)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        traced!(self, "SELECT", "links", s => s.ping())
    }

    fn writer_stats(&self) -> &WriterStats {
        dispatch!(self, s => s.writer_stats())
    }

    fn durability(&self) -> Option<Durability> {
        dispatch!(self, s => s.durability())
    }

    fn replica_stats(&self) -> Option<Arc<ReplicaStats>> {
        dispatch!(self, s => s.replica_stats())
    }

    fn change_feed(&self) -> Option<ChangeFeed> {
        dispatch!(self, s => s.change_feed())
    }

    fn embedded_lease_source(&self, namespace: &str, holder: &str) -> Option<Arc<dyn LeaseSource>> {
        dispatch!(self, s => s.embedded_lease_source(namespace, holder))
    }
}
