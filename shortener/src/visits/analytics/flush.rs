//! Writing the aggregator's counters: every analytics flush interval (on the visits' one
//! schedule), everything pending, in batches of [`FLUSH_BATCH`] rows, each one additive upsert
//! (PostgreSQL) or transaction (SQLite); what fails to be written goes back for the next flush.

use super::Analytics;
use super::aggregate::Taken;
use crate::store::{BatchMark, RollupRow, RollupRows, Store, VisitStore};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Rows per store write of a flush.
const FLUSH_BATCH: usize = 1000;

/// A batch whose write failed: the store may have committed it (a connection lost during the
/// commit), so it is sent again as it is, with the same mark, before anything else is taken
/// (the store adds it at most once). Its visits count as written only then.
pub(super) struct Doubted {
    mark: BatchMark,
    rows: RollupRows,
    visits: u64,
}

impl Analytics {
    /// Writes every pending counter to `store`; returns whether all of it was written. A flush
    /// begun while another runs (the periodic one, say) waits for it, so that on `true` every
    /// visit counted before the call is in the rollups, not still in the other flush's hands.
    /// A batch in doubt from the flush before goes first; a batch that fails is kept in doubt
    /// and the counters not yet sent are put back.
    pub async fn flush(&self, store: &Store) -> bool {
        let _one_at_a_time = self.flushing.lock().await;
        // Every visit counted before this second is taken now or was written before.
        let began = self.clock.unix_seconds();
        let mut written = false;
        let doubted = self.lock_in_doubt().take();
        if let Some(doubted) = doubted {
            self.resent.fetch_add(1, Ordering::Relaxed);
            if !self.send(store, doubted, &mut written).await {
                return false;
            }
        }
        // The counts cached links' words stand for join the aggregator's. Two kinds of count
        // can miss this flush and go with the next one, though `began` claims them: those of a
        // word whose visit is listing it at this instant, and those a visit of another cell has
        // just taken out of its word and is handing over (nanoseconds, between its
        // compare-and-swap and its add here).
        self.take_every_held();
        let taken = self.aggregator.take();
        let mut rest = taken.into_iter().peekable();
        while rest.peek().is_some() {
            let chunk: Vec<Taken> = rest.by_ref().take(FLUSH_BATCH).collect();
            let rows = coalesced(chunk.iter().map(stored).collect());
            let visits: u64 = rows
                .iter()
                .map(|r| r.counts.human + r.counts.bot + r.counts.head)
                .sum();
            let batch = Doubted {
                mark: self.batches.next(),
                rows: rows.into(),
                visits,
            };
            if !self.send(store, batch, &mut written).await {
                self.put_back(rest.collect());
                return false;
            }
        }
        if written && let Err(error) = store.sync_clicks().await {
            tracing::warn!(%error, "rollups were written but are not known to be on disk");
        }
        self.last_flush.store(began, Ordering::Relaxed);
        true
    }

    /// Writes `batch`; false if that failed (it is then kept in doubt, and what was written
    /// before it is made durable).
    async fn send(&self, store: &Store, batch: Doubted, written: &mut bool) -> bool {
        if let Err(error) = store.add_rollups(batch.mark, Arc::clone(&batch.rows)).await {
            tracing::warn!(%error, "rollup flush failed; will retry");
            *self.lock_in_doubt() = Some(batch);
            if *written {
                let _ = store.sync_clicks().await;
            }
            return false;
        }
        *written = true;
        self.flushed.fetch_add(batch.visits, Ordering::Relaxed);
        true
    }

    fn lock_in_doubt(&self) -> std::sync::MutexGuard<'_, Option<Doubted>> {
        self.in_doubt.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn put_back(&self, taken: Vec<Taken>) {
        for t in taken {
            self.aggregator
                .add(t.code.as_str(), &t.tenant, t.hour, t.cell, t.counts, false);
        }
    }
}

/// The row a taken counter is stored as.
fn stored(t: &Taken) -> RollupRow {
    RollupRow {
        tenant: t.tenant.to_string(),
        code: t.code.as_str().to_string(),
        bucket: t.hour,
        referrer: t.cell.referrer.stored().to_string(),
        device: t.cell.device.name(),
        country: t
            .cell
            .country
            .map(|c| String::from_utf8_lossy(&c).into_owned())
            .unwrap_or_default(),
        route: t.cell.route.stored().into_owned(),
        counts: t.counts,
    }
}

/// `rows` with those of one stored key (link, hour, referrer, device, country, route) summed
/// into one: two cells may be stored alike (a referrer host spelled as the folded bucket's
/// name, say), and one upsert statement may not touch a row twice.
fn coalesced(mut rows: Vec<RollupRow>) -> Vec<RollupRow> {
    let key = |r: &RollupRow| {
        (
            r.code.clone(),
            r.bucket,
            r.referrer.clone(),
            r.device,
            r.country.clone(),
            r.route.clone(),
        )
    };
    rows.sort_by_key(key);
    let mut out: Vec<RollupRow> = Vec::with_capacity(rows.len());
    for row in rows {
        match out.last_mut() {
            Some(last) if key(last) == key(&row) => last.counts += row.counts,
            _ => out.push(row),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ClickCounts;

    fn row(code: &str, referrer: &str, human: u64) -> RollupRow {
        RollupRow {
            tenant: "acme".into(),
            code: code.into(),
            bucket: 3600,
            referrer: referrer.into(),
            device: "desktop",
            country: String::new(),
            route: String::new(),
            counts: ClickCounts {
                human,
                ..ClickCounts::default()
            },
        }
    }

    #[test]
    fn rows_stored_alike_are_summed_into_one() {
        let rows = coalesced(vec![
            row("b", "(other)", 2),
            row("a", "x.example", 1),
            row("b", "y.example", 4),
            row("b", "(other)", 3),
        ]);
        let summary: Vec<(&str, &str, u64)> = rows
            .iter()
            .map(|r| (r.code.as_str(), r.referrer.as_str(), r.counts.human))
            .collect();
        assert_eq!(
            summary,
            [
                ("a", "x.example", 1),
                ("b", "(other)", 5),
                ("b", "y.example", 4)
            ]
        );
    }
}
