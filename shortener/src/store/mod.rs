//! Link storage behind one interface ([`LinkStore`]), with a PostgreSQL and an embedded SQLite
//! backend; [`Store`] holds either and is what the rest of the node uses.
//!
//! Both backends keep the same guarantees:
//! - a code maps to at most one row, ever (byte-wise comparison), decided by the database's
//!   constraints: a code that decodes sits at the slot it decodes to (PostgreSQL's `slot`
//!   primary key, SQLite's rowid) and any other code has a unique index of its own, see
//!   [`postgres`] and [`sqlite`]; a URL changes only through an explicit edit, which is kept
//!   in the link's history;
//! - [`LinkStore::insert`] returns only after the row is committed and durable, so an
//!   acknowledged create is never lost;
//! - conflicts are reported, never papered over: a taken code is [`InsertOutcome::CodeTaken`],
//!   a dedup or idempotency hit returns the existing link.
//!
//! Each backend batches concurrent creates itself: PostgreSQL through a writer task that sends
//! whatever rows are waiting as one statement ([`postgres`]), SQLite on the writer thread that
//! owns the file's one writer connection and fsyncs each round once ([`sqlite`]).
//!
//! Layout: [`model`] (the values that cross the interface), `migrate` (the versioned schema
//! of both backends), `reply` (answering the callers of one batch), one folder per backend.
//!
//! It is long because it holds the whole trait and its one dispatcher side by side: every
//! signature and the single place that looks at the backend variant.

mod migrate;
pub use migrate::sqlite_migrations_after;
pub mod model;
pub mod postgres;
mod reply;
pub mod rollups;
mod sample;
pub mod sqlite;
pub mod webhooks;

use crate::domain::{
    ClickCounts, CompactCode, Event, Link, LinkPatch, ListQuery, Page, StatsQuery, StatsReport,
};
use chrono::{DateTime, Utc};
use id_client::LeaseSource;
pub use model::{
    BlockedDomain, ChangeEvent, DeleteOutcome, Idempotency, InsertOutcome, NewLink, StoreError,
    UpdateOutcome, WriterStats, host_rev, kind_name,
};
pub use postgres::{
    ChangeFeed, Fallback, LayoutOptions, LayoutStatus, PgSettings, PgStore, ReplicaStats,
};
pub use rollups::{RollupOutcome, RollupPlan, RollupRow, RollupRows};
pub use sqlite::{Durability, SqliteStore};
use std::future::Future;
use std::sync::Arc;
pub use webhooks::{
    Attempt, Backlog, Delivery, DeliveryRecord, Endpoint, Finished, NewEndpoint, OutboxBound,
};

/// Click counts of several codes, written in one batch. Shared, so the caller keeps the rows to
/// retry with and a backend that writes on another thread needs no copy.
pub type ClickRows = Arc<[(CompactCode, ClickCounts)]>;

/// What a link store does. Both backends implement it with the same signatures and the same
/// guarantees (see the [module](self) docs); [`Store`] dispatches to one of them.
pub trait LinkStore: Send + Sync {
    /// Applies pending migrations (and, embedded, checks the file's code space); returns how
    /// many ran.
    fn migrate(&self) -> impl Future<Output = Result<usize, StoreError>> + Send;

    /// Inserts one link (see [`InsertOutcome`]), batched with concurrent inserts where it can
    /// be (a link with an idempotency key takes a transaction of its own); returns after the
    /// commit is durable.
    fn insert(
        &self,
        link: NewLink,
    ) -> impl Future<Output = Result<InsertOutcome, StoreError>> + Send;

    /// Inserts many links (none with an idempotency key) with one commit; outcomes in input
    /// order, each row's conflicts resolved on its own. A bulk write (a chunk of an import):
    /// the embedded store checkpoints after it less often than after other writes.
    fn insert_many(
        &self,
        links: Vec<NewLink>,
    ) -> impl Future<Output = Result<Vec<InsertOutcome>, StoreError>> + Send;

    /// Reads a link by code (live, deleted or expired), without its click counts.
    fn get(&self, code: &str) -> impl Future<Output = Result<Option<Link>, StoreError>> + Send;

    /// Reads a link with its click counts.
    fn get_with_clicks(
        &self,
        code: &str,
    ) -> impl Future<Output = Result<Option<Link>, StoreError>> + Send;

    /// The live link with this dedup key, if any.
    fn find_dedup(
        &self,
        dedup_key: &[u8],
    ) -> impl Future<Output = Result<Option<Link>, StoreError>> + Send;

    /// The fingerprint and link of an idempotency key claimed by `tenant` at or after
    /// `expired_before` (older claims have expired).
    fn find_idempotent(
        &self,
        tenant: &str,
        key: &str,
        expired_before: DateTime<Utc>,
    ) -> impl Future<Output = Result<Option<(Vec<u8>, Link)>, StoreError>> + Send;

    /// Marks a link deleted (it answers 410 from then on), frees its dedup key and records the
    /// delete by `key` in its history. With a `tenant`, only a link of that tenant: another
    /// tenant's link is [`DeleteOutcome::NotFound`], as an unknown code is.
    fn delete(
        &self,
        code: &str,
        tenant: Option<&str>,
        key: &str,
    ) -> impl Future<Output = Result<DeleteOutcome, StoreError>> + Send;

    /// Applies `patch` to a link (of `tenant`, or any tenant's for `None`) on behalf of `key`:
    /// the change, its history events and (on a shared store) its announcement to the other
    /// nodes commit together. A changed target or expiry frees the dedup key.
    fn update(
        &self,
        code: &str,
        tenant: Option<&str>,
        patch: &LinkPatch,
        key: &str,
    ) -> impl Future<Output = Result<UpdateOutcome, StoreError>> + Send;

    /// A link (without click counts) and the events recorded after its creation, oldest first.
    fn history(
        &self,
        code: &str,
    ) -> impl Future<Output = Result<Option<(Link, Vec<Event>)>, StoreError>> + Send;

    /// One page of a list, newest first, continued by keyset (see [`crate::domain::list`]).
    fn list(&self, query: &ListQuery) -> impl Future<Output = Result<Page, StoreError>> + Send;

    /// The links (with click counts) that hold any of `codes`.
    fn get_many(
        &self,
        codes: &[String],
    ) -> impl Future<Output = Result<Vec<Link>, StoreError>> + Send;

    /// The domains blocked through the admin API, in entry order.
    fn blocked_domains(
        &self,
    ) -> impl Future<Output = Result<Vec<BlockedDomain>, StoreError>> + Send;

    /// Adds a blocked domain entry on behalf of `key`; false if it was there already.
    fn block_domain(
        &self,
        entry: &str,
        key: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Removes a blocked domain entry; false if it was not there.
    fn unblock_domain(&self, entry: &str) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Deletes idempotency claims made before `expired_before`; returns how many.
    fn purge_idempotency(
        &self,
        expired_before: DateTime<Utc>,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Checks the store answers.
    fn ping(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Adds batched click counts (one statement or transaction for the batch). On SQLite the
    /// batch is committed but not yet fsynced when this returns: see
    /// [`LinkStore::sync_clicks`].
    fn add_clicks(&self, rows: ClickRows) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Returns once every click count added so far is durable: one fsync on SQLite (one per
    /// flush instead of one per batch), nothing on PostgreSQL, where each commit is durable.
    fn sync_clicks(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Adds batched click rollups (one statement or transaction for the batch), each row's
    /// counts added to what its key holds. On SQLite, durable after the next
    /// [`LinkStore::sync_clicks`], as click counts are.
    fn add_rollups(&self, rows: RollupRows) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The click statistics `query` asks for, from the rollups.
    fn stats(
        &self,
        query: &StatsQuery,
    ) -> impl Future<Output = Result<StatsReport, StoreError>> + Send;

    /// Compacts old hourly rollups into daily ones and removes those past retention, as `plan`
    /// says (and, on PostgreSQL, makes the partitions of the coming days).
    fn maintain_rollups(
        &self,
        plan: RollupPlan,
    ) -> impl Future<Output = Result<RollupOutcome, StoreError>> + Send;

    /// Records a `clicks.rollup` event for each tenant with enabled webhook endpoints and
    /// clicks in the hour starting at `hour` (Unix seconds), once whatever the number of
    /// nodes asking; returns how many were recorded now.
    fn record_rollup_events(
        &self,
        hour: i64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Registers a webhook endpoint.
    fn create_endpoint(
        &self,
        endpoint: NewEndpoint,
    ) -> impl Future<Output = Result<Endpoint, StoreError>> + Send;

    /// The endpoints of `tenant` (every tenant's for `None`), oldest first.
    fn endpoints(
        &self,
        tenant: Option<&str>,
    ) -> impl Future<Output = Result<Vec<Endpoint>, StoreError>> + Send;

    /// Removes an endpoint (of `tenant`, if given) and its deliveries; false if there was none.
    fn delete_endpoint(
        &self,
        id: i64,
        tenant: Option<&str>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// The latest `limit` deliveries of an endpoint (of `tenant`, if given), newest first;
    /// `None` when there is no such endpoint.
    fn delivery_log(
        &self,
        id: i64,
        tenant: Option<&str>,
        limit: i64,
    ) -> impl Future<Output = Result<Option<Vec<DeliveryRecord>>, StoreError>> + Send;

    /// Claims up to `endpoints` enabled endpoints with due deliveries that no worker holds, in
    /// turns across tenants (every tenant's longest-waiting endpoint before any tenant's
    /// second), each with up to `per_endpoint` of its due deliveries, oldest due first; the
    /// endpoints and deliveries are held for `lease` (no other worker takes them meanwhile).
    /// The deliveries come grouped by endpoint, each endpoint's in the order to send them.
    fn claim_deliveries(
        &self,
        lease: std::time::Duration,
        endpoints: i64,
        per_endpoint: i64,
    ) -> impl Future<Output = Result<Vec<Delivery>, StoreError>> + Send;

    /// Records how a claimed delivery's attempt went (and the endpoint's run of failures,
    /// disabling it at the limit), and whether the endpoint is to get no further attempts.
    fn finish_delivery(
        &self,
        attempt: Attempt,
    ) -> impl Future<Output = Result<Finished, StoreError>> + Send;

    /// Lets go of a claimed endpoint and of its claimed deliveries `unsent` (not attempted),
    /// so any worker may claim them again at once.
    fn release_endpoint(
        &self,
        endpoint_id: i64,
        unsent: Vec<i64>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Measures each tenant's pending deliveries (of enabled endpoints) against `max_pending`:
    /// the tenants at or over it have their events dropped from now on, the others recorded
    /// again; and takes the counts of events dropped since the last measurement.
    fn bound_outbox(
        &self,
        max_pending: u64,
    ) -> impl Future<Output = Result<OutboxBound, StoreError>> + Send;

    /// Enables an endpoint (of `tenant`, if given): its run of failures starts again at 0 and
    /// its pending deliveries are due at once; or disables it by hand. `None` when there is no
    /// such endpoint.
    fn set_endpoint_enabled(
        &self,
        id: i64,
        tenant: Option<&str>,
        enabled: bool,
    ) -> impl Future<Output = Result<Option<Endpoint>, StoreError>> + Send;

    /// The deliveries waiting for enabled endpoints, and how long the oldest due one has been
    /// due.
    fn outbox_backlog(&self) -> impl Future<Output = Result<Backlog, StoreError>> + Send;

    /// Removes up to `limit` deliveries delivered before `before`, then events recorded before
    /// `before` that no delivery refers to any more; returns how many deliveries and events it
    /// removed.
    fn purge_outbox(
        &self,
        before: chrono::DateTime<chrono::Utc>,
        limit: i64,
    ) -> impl Future<Output = Result<(u64, u64), StoreError>> + Send;

    /// How many links exist, of every kind and state (a full count: for tests and tools, never
    /// for a request path).
    fn count_links(&self) -> impl Future<Output = Result<u64, StoreError>> + Send;

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

/// The store of one node: PostgreSQL (distributed) or SQLite (embedded). Cheap to clone.
#[derive(Clone)]
pub enum Store {
    /// Shared PostgreSQL.
    Postgres(PgStore),
    /// A local SQLite file.
    Sqlite(SqliteStore),
}

/// Runs the same call on whichever backend `store` holds. The only place that looks at the
/// variant.
macro_rules! dispatch {
    ($store:expr, $backend:ident => $call:expr) => {
        match $store {
            Store::Postgres($backend) => $call,
            Store::Sqlite($backend) => $call,
        }
    };
}

impl LinkStore for Store {
    async fn migrate(&self) -> Result<usize, StoreError> {
        dispatch!(self, s => s.migrate().await)
    }

    async fn insert(&self, link: NewLink) -> Result<InsertOutcome, StoreError> {
        dispatch!(self, s => s.insert(link).await)
    }

    async fn insert_many(&self, links: Vec<NewLink>) -> Result<Vec<InsertOutcome>, StoreError> {
        dispatch!(self, s => s.insert_many(links).await)
    }

    async fn get(&self, code: &str) -> Result<Option<Link>, StoreError> {
        dispatch!(self, s => s.get(code).await)
    }

    async fn get_with_clicks(&self, code: &str) -> Result<Option<Link>, StoreError> {
        dispatch!(self, s => s.get_with_clicks(code).await)
    }

    async fn find_dedup(&self, dedup_key: &[u8]) -> Result<Option<Link>, StoreError> {
        dispatch!(self, s => s.find_dedup(dedup_key).await)
    }

    async fn find_idempotent(
        &self,
        tenant: &str,
        key: &str,
        expired_before: DateTime<Utc>,
    ) -> Result<Option<(Vec<u8>, Link)>, StoreError> {
        dispatch!(self, s => s.find_idempotent(tenant, key, expired_before).await)
    }

    async fn delete(
        &self,
        code: &str,
        tenant: Option<&str>,
        key: &str,
    ) -> Result<DeleteOutcome, StoreError> {
        dispatch!(self, s => s.delete(code, tenant, key).await)
    }

    async fn update(
        &self,
        code: &str,
        tenant: Option<&str>,
        patch: &LinkPatch,
        key: &str,
    ) -> Result<UpdateOutcome, StoreError> {
        dispatch!(self, s => s.update(code, tenant, patch, key).await)
    }

    async fn history(&self, code: &str) -> Result<Option<(Link, Vec<Event>)>, StoreError> {
        dispatch!(self, s => s.history(code).await)
    }

    async fn list(&self, query: &ListQuery) -> Result<Page, StoreError> {
        dispatch!(self, s => s.list(query).await)
    }

    async fn get_many(&self, codes: &[String]) -> Result<Vec<Link>, StoreError> {
        dispatch!(self, s => s.get_many(codes).await)
    }

    async fn blocked_domains(&self) -> Result<Vec<BlockedDomain>, StoreError> {
        dispatch!(self, s => s.blocked_domains().await)
    }

    async fn block_domain(&self, entry: &str, key: &str) -> Result<bool, StoreError> {
        dispatch!(self, s => s.block_domain(entry, key).await)
    }

    async fn unblock_domain(&self, entry: &str) -> Result<bool, StoreError> {
        dispatch!(self, s => s.unblock_domain(entry).await)
    }

    async fn purge_idempotency(&self, expired_before: DateTime<Utc>) -> Result<u64, StoreError> {
        dispatch!(self, s => s.purge_idempotency(expired_before).await)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        dispatch!(self, s => s.ping().await)
    }

    async fn add_clicks(&self, rows: ClickRows) -> Result<(), StoreError> {
        dispatch!(self, s => s.add_clicks(rows).await)
    }

    async fn sync_clicks(&self) -> Result<(), StoreError> {
        dispatch!(self, s => s.sync_clicks().await)
    }

    async fn add_rollups(&self, rows: RollupRows) -> Result<(), StoreError> {
        dispatch!(self, s => s.add_rollups(rows).await)
    }

    async fn stats(&self, query: &StatsQuery) -> Result<StatsReport, StoreError> {
        dispatch!(self, s => s.stats(query).await)
    }

    async fn maintain_rollups(&self, plan: RollupPlan) -> Result<RollupOutcome, StoreError> {
        dispatch!(self, s => s.maintain_rollups(plan).await)
    }

    async fn record_rollup_events(&self, hour: i64) -> Result<u64, StoreError> {
        dispatch!(self, s => s.record_rollup_events(hour).await)
    }

    async fn create_endpoint(&self, endpoint: NewEndpoint) -> Result<Endpoint, StoreError> {
        dispatch!(self, s => s.create_endpoint(endpoint).await)
    }

    async fn endpoints(&self, tenant: Option<&str>) -> Result<Vec<Endpoint>, StoreError> {
        dispatch!(self, s => s.endpoints(tenant).await)
    }

    async fn delete_endpoint(&self, id: i64, tenant: Option<&str>) -> Result<bool, StoreError> {
        dispatch!(self, s => s.delete_endpoint(id, tenant).await)
    }

    async fn delivery_log(
        &self,
        id: i64,
        tenant: Option<&str>,
        limit: i64,
    ) -> Result<Option<Vec<DeliveryRecord>>, StoreError> {
        dispatch!(self, s => s.delivery_log(id, tenant, limit).await)
    }

    async fn claim_deliveries(
        &self,
        lease: std::time::Duration,
        endpoints: i64,
        per_endpoint: i64,
    ) -> Result<Vec<Delivery>, StoreError> {
        dispatch!(self, s => s.claim_deliveries(lease, endpoints, per_endpoint).await)
    }

    async fn finish_delivery(&self, attempt: Attempt) -> Result<Finished, StoreError> {
        dispatch!(self, s => s.finish_delivery(attempt).await)
    }

    async fn release_endpoint(&self, endpoint_id: i64, unsent: Vec<i64>) -> Result<(), StoreError> {
        dispatch!(self, s => s.release_endpoint(endpoint_id, unsent).await)
    }

    async fn bound_outbox(&self, max_pending: u64) -> Result<OutboxBound, StoreError> {
        dispatch!(self, s => s.bound_outbox(max_pending).await)
    }

    async fn set_endpoint_enabled(
        &self,
        id: i64,
        tenant: Option<&str>,
        enabled: bool,
    ) -> Result<Option<Endpoint>, StoreError> {
        dispatch!(self, s => s.set_endpoint_enabled(id, tenant, enabled).await)
    }

    async fn outbox_backlog(&self) -> Result<Backlog, StoreError> {
        dispatch!(self, s => s.outbox_backlog().await)
    }

    async fn purge_outbox(
        &self,
        before: chrono::DateTime<chrono::Utc>,
        limit: i64,
    ) -> Result<(u64, u64), StoreError> {
        dispatch!(self, s => s.purge_outbox(before, limit).await)
    }

    async fn count_links(&self) -> Result<u64, StoreError> {
        dispatch!(self, s => s.count_links().await)
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
