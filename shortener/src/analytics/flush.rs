//! Writing the aggregator's counters: every flush interval, everything pending, in batches of
//! [`FLUSH_BATCH`] rows, each one additive upsert (PostgreSQL) or transaction (SQLite); what
//! fails to be written goes back for the next flush.

use super::Analytics;
use super::aggregate::Taken;
use crate::store::{LinkStore, RollupRow, Store, StoreError};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Rows per store write of a flush.
const FLUSH_BATCH: usize = 1000;

impl Analytics {
    /// Writes every pending counter to `store`; returns whether all of it was written.
    pub async fn flush(&self, store: &Store) -> bool {
        let taken = self.aggregator.take();
        if taken.is_empty() {
            self.last_flush
                .store(self.clock.unix_seconds(), Ordering::Relaxed);
            return true;
        }
        let tenants = match self.tenants_of(store, &taken).await {
            Ok(tenants) => tenants,
            Err(error) => {
                tracing::warn!(%error, "reading the tenants of clicked links failed; the rollups will be written next flush");
                self.put_back(taken);
                return false;
            }
        };
        let mut rest = taken.into_iter().peekable();
        let mut written = false;
        while rest.peek().is_some() {
            let chunk: Vec<Taken> = rest.by_ref().take(FLUSH_BATCH).collect();
            let rows: Vec<RollupRow> = chunk
                .iter()
                .filter_map(|(code, hour, cell, counts)| {
                    let Some(tenant) = tenants.get(code.as_str()) else {
                        // A code with no link row (cannot happen for a resolved redirect).
                        self.aggregator
                            .dropped
                            .fetch_add(counts.human + counts.bot + counts.head, Ordering::Relaxed);
                        return None;
                    };
                    Some(RollupRow {
                        tenant: tenant.to_string(),
                        code: code.as_str().to_string(),
                        bucket: *hour,
                        referrer: cell.referrer.stored().to_string(),
                        device: cell.device.name(),
                        country: cell
                            .country
                            .map(|c| String::from_utf8_lossy(&c).into_owned())
                            .unwrap_or_default(),
                        counts: *counts,
                    })
                })
                .collect();
            let visits: u64 = rows
                .iter()
                .map(|r| r.counts.human + r.counts.bot + r.counts.head)
                .sum();
            if let Err(error) = store.add_rollups(rows.into()).await {
                tracing::warn!(%error, "rollup flush failed; will retry");
                self.put_back(chunk);
                self.put_back(rest.collect());
                if written {
                    let _ = store.sync_clicks().await;
                }
                return false;
            }
            written = true;
            self.flushed.fetch_add(visits, Ordering::Relaxed);
        }
        if let Err(error) = store.sync_clicks().await {
            tracing::warn!(%error, "rollups were written but are not known to be on disk");
        }
        self.last_flush
            .store(self.clock.unix_seconds(), Ordering::Relaxed);
        true
    }

    fn put_back(&self, taken: Vec<Taken>) {
        for (code, hour, cell, counts) in taken {
            self.aggregator
                .add(code.as_str(), hour, cell, counts, false);
        }
    }

    /// The tenant of every code in `taken`, from the cache or the store.
    async fn tenants_of(
        &self,
        store: &Store,
        taken: &[Taken],
    ) -> Result<HashMap<String, Arc<str>>, StoreError> {
        let mut tenants = HashMap::new();
        let mut unknown = Vec::new();
        for (code, ..) in taken {
            let code = code.as_str();
            if tenants.contains_key(code) || unknown.last().is_some_and(|c: &String| c == code) {
                continue;
            }
            match self.tenants.get(code) {
                Some(tenant) => {
                    tenants.insert(code.to_string(), tenant);
                }
                None => unknown.push(code.to_string()),
            }
        }
        for codes in unknown.chunks(FLUSH_BATCH) {
            for link in store.get_many(codes).await? {
                let tenant: Arc<str> = link.tenant.as_str().into();
                self.tenants.insert(link.code.clone(), Arc::clone(&tenant));
                tenants.insert(link.code, tenant);
            }
        }
        Ok(tenants)
    }

    /// Flushes every `interval` until `stop`, then once more.
    pub async fn run(self: Arc<Self>, store: Store, interval: Duration, stop: CancellationToken) {
        if !self.settings.enabled {
            return;
        }
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => { self.flush(&store).await; }
                () = stop.cancelled() => break,
            }
        }
        self.flush(&store).await;
    }
}
