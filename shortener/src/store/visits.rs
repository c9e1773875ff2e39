//! The visits interface: the exact click totals and the rollups the stats API reads, written in
//! batches by the visits' flushes.

use super::{ClickRows, RollupOutcome, RollupPlan, RollupRows, Store, StoreError};
use crate::domain::{StatsQuery, StatsReport};
use rand::Rng;
use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};

/// Days a writer's flush mark is kept after its last batch (the rollup maintenance removes it
/// then): a process that wrote nothing for so long is gone.
pub const MARKS_KEPT_DAYS: i64 = 7;

/// Which of a node's flushes a batch belongs to: each keeps its own sequence of batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushStream {
    /// The click totals ([`VisitStore::add_clicks`]).
    Clicks,
    /// The rollups ([`VisitStore::add_rollups`]).
    Rollups,
}

impl FlushStream {
    /// Its name in the `flush_marks` table.
    pub fn stored(self) -> &'static str {
        match self {
            FlushStream::Clicks => "clicks",
            FlushStream::Rollups => "rollups",
        }
    }
}

/// A batch's place in its writer's sequence. Counts are added, so a batch written twice would
/// count its visits twice: a write that fails after the store may have committed it (the
/// connection lost during the commit) leaves the flush not knowing whether it did. The flush
/// sends such a batch again with the same mark, and the store adds a batch only if its mark is
/// past the last one it added for the writer and stream (kept in `flush_marks`, in the batch's
/// own transaction): a batch is counted once however often it is sent. A writer's batches are
/// sent one after another, each only after the one before it is known to be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMark {
    /// The writer: one flush of one node process, chosen at random when it starts.
    pub writer: i64,
    /// The flush it belongs to.
    pub stream: FlushStream,
    /// Its place in the writer's sequence, from 1.
    pub seq: i64,
}

/// The marks of one writer's batches, in order.
#[derive(Debug)]
pub struct BatchSequence {
    writer: i64,
    stream: FlushStream,
    last: AtomicI64,
}

impl BatchSequence {
    /// A new writer of `stream` (an identity of its own, drawn at random).
    pub fn new(stream: FlushStream) -> Self {
        Self {
            writer: rand::rng().random(),
            stream,
            last: AtomicI64::new(0),
        }
    }

    /// The mark of the writer's next batch.
    pub fn next(&self) -> BatchMark {
        BatchMark {
            writer: self.writer,
            stream: self.stream,
            seq: self.last.fetch_add(1, Ordering::Relaxed) + 1,
        }
    }
}

/// What a store does with visits: click totals and rollups. Both backends implement it;
/// [`Store`] dispatches.
pub trait VisitStore: Send + Sync {
    /// Adds batched click counts (one statement or transaction for the batch), unless a batch
    /// of `mark`'s writer at or past `mark` was added already ([`BatchMark`]): then nothing, and
    /// `Ok`. On SQLite the batch is committed but not yet fsynced when this returns: see
    /// [`VisitStore::sync_clicks`].
    fn add_clicks(
        &self,
        mark: BatchMark,
        rows: ClickRows,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Returns once every click count added so far is durable: one fsync on SQLite (one per
    /// flush instead of one per batch), nothing on PostgreSQL, where each commit is durable.
    fn sync_clicks(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Adds batched click rollups (one statement or transaction for the batch), each row's
    /// counts added to what its key holds, unless a batch of `mark`'s writer at or past `mark`
    /// was added already (as [`VisitStore::add_clicks`]). On SQLite, durable after the next
    /// [`VisitStore::sync_clicks`], as click counts are.
    fn add_rollups(
        &self,
        mark: BatchMark,
        rows: RollupRows,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

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

    /// Removes the flush marks of writers that wrote nothing for [`MARKS_KEPT_DAYS`] days
    /// (processes gone long ago: a live one advances its mark with every batch), measured on the
    /// clock that stamps the marks; how many it removed. The click flush writes marks whether or
    /// not analytics are on, so this runs either way.
    fn forget_flush_marks(&self) -> impl Future<Output = Result<u64, StoreError>> + Send;
}

impl VisitStore for Store {
    async fn add_clicks(&self, mark: BatchMark, rows: ClickRows) -> Result<(), StoreError> {
        traced!(self, "UPDATE", "link_clicks", s => s.add_clicks(mark, rows))
    }

    async fn sync_clicks(&self) -> Result<(), StoreError> {
        traced!(self, "UPDATE", "link_clicks", s => s.sync_clicks())
    }

    async fn add_rollups(&self, mark: BatchMark, rows: RollupRows) -> Result<(), StoreError> {
        traced!(self, "INSERT", "click_hourly", s => s.add_rollups(mark, rows))
    }

    async fn stats(&self, query: &StatsQuery) -> Result<StatsReport, StoreError> {
        traced!(self, "SELECT", "click_hourly", s => s.stats(query))
    }

    async fn maintain_rollups(&self, plan: RollupPlan) -> Result<RollupOutcome, StoreError> {
        traced!(self, "UPDATE", "click_daily", s => s.maintain_rollups(plan))
    }

    async fn forget_flush_marks(&self) -> Result<u64, StoreError> {
        traced!(self, "DELETE", "flush_marks", s => s.forget_flush_marks())
    }
}
