//! Writing the aggregator's counters: every analytics flush interval (on the visits' one
//! schedule), everything pending, in batches of [`FLUSH_BATCH`] rows, each one additive upsert
//! (PostgreSQL) or transaction (SQLite); what fails to be written goes back for the next flush.

use super::Analytics;
use super::aggregate::Taken;
use crate::store::{BatchMark, RollupRow, RollupRows, Store, VisitStore};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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
        // The counts cached links' words stand for join the aggregator's, first: even while
        // the store is down and the batch in doubt fails again, so that no word holds a rollup
        // cell's tag for longer than a flush interval (its hour is kept modulo 1024 hours). Two
        // kinds of count can miss this flush and go with the next one, though `began` claims
        // them: those of a word whose visit is listing it at this instant, and those a visit
        // of another cell has just taken out of its word and is handing over (nanoseconds,
        // between its compare-and-swap and its add here).
        self.take_every_held().await;
        let doubted = self.lock_in_doubt().take();
        if let Some(doubted) = doubted {
            self.resent.fetch_add(1, Ordering::Relaxed);
            if !self.send(store, doubted, &mut written).await {
                return false;
            }
        }
        let taken = self.aggregator.take();
        let held = TakenHeld::new(&self.taken_bytes, &taken);
        let taken = sorted(taken).await;
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
            let sent = self.send(store, batch, &mut written).await;
            // Written, or kept apart as the one batch in doubt: no longer the flush's.
            held.let_go(&chunk);
            drop(chunk);
            if !sent {
                // Back in the aggregator, which counts them from now on.
                let rest: Vec<Taken> = rest.collect();
                held.let_go(&rest);
                self.put_back(rest);
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

    /// How many rollup counters are not known to be written: the aggregator's and those of the
    /// batch whose write is in doubt (what a stop that ends now would lose).
    pub fn unwritten(&self) -> usize {
        let doubted = self.lock_in_doubt().as_ref().map_or(0, |d| d.rows.len());
        self.aggregator.entries() + doubted
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

/// Counters a flush sorts on the thread that serves requests; more are sorted on a thread of
/// their own.
const SORTED_IN_PLACE: usize = 4096;

/// What one counter costs in a flush's hands ([`Taken`]), besides the heap its texts hold
/// ([`held_bytes`]).
pub(super) const TAKEN_BYTES: u64 = std::mem::size_of::<Taken>() as u64;

/// What the budget allows one counter in a flush's hands: [`TAKEN_BYTES`] and a referrer host
/// of up to the bytes a counter in the aggregator is allowed for one
/// ([`super::aggregate::HOST_BYTES`]).
pub(super) const TAKEN_BUDGET_BYTES: u64 = TAKEN_BYTES + super::aggregate::HOST_BYTES as u64;

/// The bytes `taken` holds: each counter, its referrer host, and its code when too long to be
/// held inline (the aggregator that shared them has let go of them).
fn held_bytes(taken: &[Taken]) -> u64 {
    taken
        .iter()
        .map(|t| {
            let host = match &t.cell.referrer {
                super::aggregate::Referrer::Host(host) => host.len(),
                _ => 0,
            };
            TAKEN_BYTES + (t.code.heap_bytes() + host) as u64
        })
        .sum()
}

/// The bytes of what a flush took, shown in [`Analytics::bytes`] until the flush ends, however
/// it ends.
struct TakenHeld<'a>(&'a AtomicU64);

impl<'a> TakenHeld<'a> {
    fn new(bytes: &'a AtomicU64, taken: &[Taken]) -> Self {
        bytes.store(held_bytes(taken), Ordering::Relaxed);
        Self(bytes)
    }

    /// `gone` is no longer in the flush's hands (written, or put back into the aggregator).
    fn let_go(&self, gone: &[Taken]) {
        let less = held_bytes(gone);
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| {
                Some(now.saturating_sub(less))
            });
    }
}

impl Drop for TakenHeld<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// `taken` in the order of the rollup key (link, hour, dimensions), so that the store writes
/// each batch along its index, and the batches one after another, rather than at random
/// places. A node's hundred thousand counters take tens of milliseconds to sort, which the
/// requests waiting on the flush's thread would wait through: they are sorted on a blocking
/// thread, and, should that thread not run them, here after all (nothing is lost either way).
async fn sorted(taken: Vec<Taken>) -> Vec<Taken> {
    fn sort(taken: &mut [Taken]) {
        taken.sort_unstable_by(|a, b| (&a.code, a.hour, &a.cell).cmp(&(&b.code, b.hour, &b.cell)));
    }
    if taken.len() <= SORTED_IN_PLACE {
        let mut taken = taken;
        sort(&mut taken);
        return taken;
    }
    let shared = Arc::new(std::sync::Mutex::new(taken));
    let job = Arc::clone(&shared);
    let done = tokio::task::spawn_blocking(move || {
        sort(&mut job.lock().unwrap_or_else(|p| p.into_inner()));
    })
    .await
    .is_ok();
    let mut taken = std::mem::take(&mut *shared.lock().unwrap_or_else(|p| p.into_inner()));
    if !done {
        sort(&mut taken);
    }
    taken
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
/// name, say), and one upsert statement may not touch a row twice. The key is compared in
/// place: a flush sorts every batch on the thread that serves requests.
fn coalesced(mut rows: Vec<RollupRow>) -> Vec<RollupRow> {
    fn key(r: &RollupRow) -> (&str, i64, &str, &str, &str, &str) {
        (
            &r.code,
            r.bucket,
            &r.referrer,
            r.device,
            &r.country,
            &r.route,
        )
    }
    rows.sort_unstable_by(|a, b| key(a).cmp(&key(b)));
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

    #[tokio::test]
    async fn counters_are_sorted_by_the_rollup_key_whether_in_place_or_apart() {
        use super::super::aggregate::{Cell, Referrer};
        use crate::domain::{CompactCode, Device, Route};
        for n in [3, SORTED_IN_PLACE + 1000] {
            // Codes, hours and referrers in an order far from sorted (a multiplicative walk).
            let taken: Vec<Taken> = (0..n)
                .map(|i| {
                    let k = (i * 7919) % n;
                    Taken {
                        code: CompactCode::new(&format!("c{:03}", k % 500)),
                        hour: 3600 * (k % 3) as i64,
                        cell: Cell {
                            referrer: Referrer::Host(format!("h{}.example", k % 7).into()),
                            device: Device::Desktop,
                            country: None,
                            route: Route::Url,
                        },
                        counts: ClickCounts {
                            human: k as u64,
                            ..ClickCounts::default()
                        },
                        tenant: "acme".into(),
                    }
                })
                .collect();
            let mut want = taken.clone();
            want.sort_by(|a, b| {
                (&a.code, a.hour, &a.cell, a.counts.human).cmp(&(
                    &b.code,
                    b.hour,
                    &b.cell,
                    b.counts.human,
                ))
            });
            let got = sorted(taken).await;
            assert_eq!(got.len(), n, "{n} counters");
            assert!(
                got.windows(2)
                    .all(|w| (&w[0].code, w[0].hour, &w[0].cell)
                        <= (&w[1].code, w[1].hour, &w[1].cell)),
                "{n} counters in key order"
            );
            let mut got = got;
            got.sort_by_key(|t| (t.code.clone(), t.hour, t.cell.clone(), t.counts.human));
            assert_eq!(got, want, "{n} counters, none lost");
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
