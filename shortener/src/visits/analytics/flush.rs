//! Writing the aggregator's counters: every analytics flush interval (on the visits' one
//! schedule), everything pending, in batches of [`FLUSH_BATCH`] rows, each one additive upsert
//! (PostgreSQL) or transaction (SQLite); what fails to be written goes back for the next flush.

use super::Analytics;
use super::aggregate::Taken;
use crate::store::{RollupRow, Store, VisitStore};
use std::sync::atomic::Ordering;

/// Rows per store write of a flush.
const FLUSH_BATCH: usize = 1000;

impl Analytics {
    /// Writes every pending counter to `store`; returns whether all of it was written. A flush
    /// begun while another runs (the periodic one, say) waits for it, so that on `true` every
    /// visit counted before the call is in the rollups, not still in the other flush's hands.
    pub async fn flush(&self, store: &Store) -> bool {
        let _one_at_a_time = self.flushing.lock().await;
        // Every visit counted before this second is taken now or was written before.
        let began = self.clock.unix_seconds();
        let taken = self.aggregator.take();
        let mut rest = taken.into_iter().peekable();
        let mut written = false;
        while rest.peek().is_some() {
            let chunk: Vec<Taken> = rest.by_ref().take(FLUSH_BATCH).collect();
            let rows: Vec<RollupRow> = chunk
                .iter()
                .map(|t| RollupRow {
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
                })
                .collect();
            let rows = coalesced(rows);
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
        if written && let Err(error) = store.sync_clicks().await {
            tracing::warn!(%error, "rollups were written but are not known to be on disk");
        }
        self.last_flush.store(began, Ordering::Relaxed);
        true
    }

    fn put_back(&self, taken: Vec<Taken>) {
        for t in taken {
            self.aggregator
                .add(t.code.as_str(), &t.tenant, t.hour, t.cell, t.counts, false);
        }
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
