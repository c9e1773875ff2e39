//! The visits interface: the exact click totals and the rollups the stats API reads, written in
//! batches by the visits' flushes.

use super::{ClickRows, RollupOutcome, RollupPlan, RollupRows, Store, StoreError};
use crate::domain::{StatsQuery, StatsReport};
use std::future::Future;

/// What a store does with visits: click totals and rollups. Both backends implement it;
/// [`Store`] dispatches.
pub trait VisitStore: Send + Sync {
    /// Adds batched click counts (one statement or transaction for the batch). On SQLite the
    /// batch is committed but not yet fsynced when this returns: see
    /// [`VisitStore::sync_clicks`].
    fn add_clicks(&self, rows: ClickRows) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Returns once every click count added so far is durable: one fsync on SQLite (one per
    /// flush instead of one per batch), nothing on PostgreSQL, where each commit is durable.
    fn sync_clicks(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Adds batched click rollups (one statement or transaction for the batch), each row's
    /// counts added to what its key holds. On SQLite, durable after the next
    /// [`VisitStore::sync_clicks`], as click counts are.
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
}

impl VisitStore for Store {
    async fn add_clicks(&self, rows: ClickRows) -> Result<(), StoreError> {
        traced!(self, "UPDATE", "link_clicks", s => s.add_clicks(rows))
    }

    async fn sync_clicks(&self) -> Result<(), StoreError> {
        traced!(self, "UPDATE", "link_clicks", s => s.sync_clicks())
    }

    async fn add_rollups(&self, rows: RollupRows) -> Result<(), StoreError> {
        traced!(self, "INSERT", "click_hourly", s => s.add_rollups(rows))
    }

    async fn stats(&self, query: &StatsQuery) -> Result<StatsReport, StoreError> {
        traced!(self, "SELECT", "click_hourly", s => s.stats(query))
    }

    async fn maintain_rollups(&self, plan: RollupPlan) -> Result<RollupOutcome, StoreError> {
        traced!(self, "UPDATE", "click_daily", s => s.maintain_rollups(plan))
    }
}
