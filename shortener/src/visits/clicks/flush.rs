//! Writing the pending counts: shard by shard in code order, in chunks paced so that
//! redirects and creates interleave with a large flush.

use super::{ClickRecorder, SHARDS, lock};
use crate::domain::{ClickCounts, CompactCode};
use crate::store::{ClickRows, Store, VisitStore};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Rows per store write of a flush. Each chunk is its own statement (PostgreSQL) or transaction
/// (SQLite), followed by a pause of [`FLUSH_PACE`], so a flush of many codes never holds the
/// store's writer, or on a small machine the CPU, for long at a stretch: redirects and creates
/// interleave with it instead of queueing behind it.
const FLUSH_CHUNK: usize = 256;

/// The pause between the chunks of one flush.
const FLUSH_PACE: Duration = Duration::from_millis(1);

impl ClickRecorder {
    /// Writes the pending counts to `store` in chunks of `FLUSH_CHUNK` (256) codes, paced by
    /// `FLUSH_PACE` (1 ms), then makes them durable together ([`VisitStore::sync_clicks`]: one fsync per
    /// flush on SQLite, not one per chunk); what fails to be written is kept for the next flush.
    /// A flush begun while another runs (the periodic one, say) waits for it: on return, every
    /// count recorded before the call is written, or kept after a failure.
    pub async fn flush(&self, store: &Store) {
        self.flush_paced(store, FLUSH_PACE).await;
    }

    /// [`ClickRecorder::flush`] without the pause between chunks: the last flush at stop, when
    /// no request is left to interleave with and the stop's bound is what counts. Returns
    /// whether every count is written ([`ClickRecorder::unwritten_codes`] is zero).
    pub async fn flush_last(&self, store: &Store) -> bool {
        self.flush_paced(store, Duration::ZERO).await;
        self.unwritten_codes() == 0
    }

    async fn flush_paced(&self, store: &Store, pace: Duration) {
        let _one_at_a_time = self.flushing.lock().await;
        let written = self.write_chunks(store, pace).await;
        if lock(&self.in_doubt).is_some() {
            self.fold_held();
        }
        if written && let Err(error) = store.sync_clicks().await {
            // Committed, but no fsync is known to cover them yet (the store is stopping, or an
            // fsync failed and it refuses writes until restart).
            tracing::warn!(%error, "click counts were written but are not known to be on disk");
        }
    }

    /// Moves the counts the lists of holders keep into the map, emptying the lists, after a
    /// flush failed: until one succeeds, a link read again after the cache evicted it would be
    /// listed again, and every list would keep its evicted entries alive; in the map a link's
    /// counts take one slot however often it was listed. The map then grows by at most a slot
    /// per link visited while the store refuses writes, never per visit.
    fn fold_held(&self) {
        let Some(held) = self.held.get() else {
            return;
        };
        for shard in 0..SHARDS {
            let mut folded = Vec::new();
            held.take_shard(shard, &mut |code, more| folded.push((code, more)));
            self.restore(&folded);
        }
    }

    /// Writes the pending counts in chunks ([`Chunks`]); returns whether any was written. A
    /// chunk whose write is in doubt from the flush before goes first, as it was. A failed
    /// chunk is kept in doubt ([`ClickRecorder::in_doubt`]), the rest of the shard it was cut
    /// from put back, and the flush ends: the shards not yet taken keep their counts for the
    /// next one.
    async fn write_chunks(&self, store: &Store, pace: Duration) -> bool {
        let mut written = false;
        let doubted = lock(&self.in_doubt).take();
        if let Some((mark, chunk)) = doubted {
            self.resent.fetch_add(1, Ordering::Relaxed);
            if let Err(error) = store.add_clicks(mark, Arc::clone(&chunk)).await {
                tracing::warn!(%error, codes = chunk.len(), "click flush failed again; will retry");
                *lock(&self.in_doubt) = Some((mark, chunk));
                return false;
            }
            self.flushed.fetch_add(total(&chunk), Ordering::Relaxed);
            written = true;
        }
        let mut chunks = Chunks::new(self);
        loop {
            let chunk = chunks.next_chunk();
            if chunk.is_empty() {
                return written;
            }
            if written && !pace.is_zero() {
                tokio::time::sleep(pace).await;
            }
            let chunk: ClickRows = chunk.into();
            let mark = self.batches.next();
            if let Err(error) = store.add_clicks(mark, Arc::clone(&chunk)).await {
                let rest = chunks.rest_of_shard();
                tracing::warn!(%error, codes = chunk.len() + rest.len(), "click flush failed; will retry");
                self.restore(rest);
                *lock(&self.in_doubt) = Some((mark, chunk));
                return written;
            }
            written = true;
            self.flushed.fetch_add(total(&chunk), Ordering::Relaxed);
        }
    }
}

/// The visits a chunk counts.
fn total(chunk: &[(CompactCode, ClickCounts)]) -> u64 {
    chunk.iter().map(|(_, c)| c.human + c.head + c.bot).sum()
}

/// The chunks of one flush, in code order (a fixed order keeps concurrent flushes of several
/// nodes from deadlocking). A shard is taken only when the chunks before it have used up the
/// one before, and a chunk runs on into the next shard, so a flush of a few codes is one chunk,
/// not one per shard.
struct Chunks<'a> {
    recorder: &'a ClickRecorder,
    shards: std::ops::Range<usize>,
    /// The rest of the shard taken last; rows move off its front one by one (moving, not
    /// copying, what is left behind them).
    current: std::vec::IntoIter<(CompactCode, ClickCounts)>,
}

impl<'a> Chunks<'a> {
    fn new(recorder: &'a ClickRecorder) -> Self {
        Self {
            recorder,
            shards: 0..SHARDS,
            current: Vec::new().into_iter(),
        }
    }

    /// The next chunk of up to [`FLUSH_CHUNK`] codes; empty when every shard is used up.
    fn next_chunk(&mut self) -> Vec<(CompactCode, ClickCounts)> {
        let mut chunk = Vec::with_capacity(FLUSH_CHUNK);
        loop {
            chunk.extend(self.current.by_ref().take(FLUSH_CHUNK - chunk.len()));
            if chunk.len() == FLUSH_CHUNK {
                return chunk;
            }
            match self.shards.next() {
                Some(shard) => self.current = self.recorder.take_shard(shard).into_iter(),
                None => return chunk,
            }
        }
    }

    /// What is left of the shard the last chunk ended in.
    fn rest_of_shard(&self) -> &[(CompactCode, ClickCounts)] {
        self.current.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Capabilities, LinkStore};
    use crate::visits::VisitKind;

    #[test]
    fn chunks_are_full_run_across_shards_and_keep_code_order() {
        let recorder = ClickRecorder::default();
        let codes = 2 * FLUSH_CHUNK as u64 + 17;
        record(&recorder, codes);
        let mut chunks = Chunks::new(&recorder);
        let mut sizes = Vec::new();
        let mut all: Vec<String> = Vec::new();
        loop {
            let chunk = chunks.next_chunk();
            if chunk.is_empty() {
                break;
            }
            sizes.push(chunk.len());
            all.extend(chunk.iter().map(|(code, _)| code.as_str().to_string()));
        }
        assert_eq!(sizes, [FLUSH_CHUNK, FLUSH_CHUNK, 17]);
        let mut sorted: Vec<String> = (0..codes).map(code).collect();
        sorted.sort_unstable();
        assert_eq!(all, sorted);

        // A few codes, one in each shard, make one chunk.
        let recorder = ClickRecorder::default();
        record(&recorder, 62);
        let mut chunks = Chunks::new(&recorder);
        assert_eq!(chunks.next_chunk().len(), 62);
        assert!(chunks.next_chunk().is_empty());
    }

    fn counts(i: u64) -> ClickCounts {
        ClickCounts {
            human: i % 7,
            head: 1,
            bot: i % 3,
        }
    }

    async fn sqlite(dir: &tempfile::TempDir, migrated: bool) -> Store {
        let sqlite = crate::store::SqliteStore::open(
            &dir.path().join("clicks.db"),
            std::sync::Arc::new(
                codespace::CodeSpace::new(
                    &codespace::CodeKey::generate(),
                    codespace::DEFAULT_LENGTH,
                )
                .expect("space"),
            ),
            256,
        )
        .expect("open");
        if migrated {
            sqlite.migrate().await.expect("migrate");
        }
        Store::Sqlite(sqlite)
    }

    /// The `i`-th test code. Codes start with each base62 character in turn, so they fall in
    /// every shard.
    fn code(i: u64) -> String {
        let alphabet = codespace::ALPHABET;
        format!("{}-{i:04}", char::from(alphabet[(i % 62) as usize]))
    }

    /// Links for the first `n` test codes.
    async fn insert_links(store: &Store, n: u64) {
        let links: Vec<crate::store::NewLink> = (0..n)
            .map(|i| {
                crate::store::NewLink::plain(
                    code(i),
                    format!("https://example.com/{i}"),
                    codespace::shape::CodeKind::Alias,
                    None,
                    "t",
                    "o",
                )
            })
            .collect();
        store.insert_many(links).await.expect("links");
    }

    fn record(recorder: &ClickRecorder, codes: u64) -> u64 {
        let mut total = 0;
        for i in 0..codes {
            let c = counts(i);
            for (n, visit) in [
                (c.human, VisitKind::Human),
                (c.head, VisitKind::Head),
                (c.bot, VisitKind::Bot),
            ] {
                for _ in 0..n {
                    recorder.record(&code(i), visit);
                }
                total += n;
            }
        }
        total
    }

    #[tokio::test]
    async fn a_flush_of_several_chunks_writes_every_count() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = sqlite(&dir, true).await;
        let codes = 2 * FLUSH_CHUNK as u64 + 17;
        insert_links(&store, codes).await;
        let recorder = ClickRecorder::default();
        let total = record(&recorder, codes);
        let before = store.durability().expect("an SQLite store");
        recorder.flush(&store).await;
        let after = store.durability().expect("an SQLite store");
        assert_eq!(
            after.wal_syncs - before.wal_syncs,
            1,
            "one fsync for the whole flush of three chunks"
        );
        assert_eq!(
            after.writes - before.writes,
            1,
            "only the sync counts as a durable write"
        );
        assert_eq!(after.durable_writes, after.writes, "all of it durable");
        assert_eq!(recorder.flushed.load(Ordering::Relaxed), total);
        assert!(recorder.take().is_empty());
        for i in [0, FLUSH_CHUNK as u64 - 1, FLUSH_CHUNK as u64, codes - 1] {
            let link = store
                .get_with_clicks(&code(i))
                .await
                .expect("get")
                .expect("link");
            assert_eq!(link.clicks, counts(i), "{}", code(i));
        }
    }

    #[tokio::test]
    async fn a_flush_begun_beside_another_waits_for_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = sqlite(&dir, true).await;
        insert_links(&store, 10).await;
        let recorder = std::sync::Arc::new(ClickRecorder::default());
        let total = record(&recorder, 10);
        // Another flush is in progress.
        let other = recorder.flushing.lock().await;
        let flush = tokio::spawn({
            let (recorder, store) = (std::sync::Arc::clone(&recorder), store.clone());
            async move { recorder.flush(&store).await }
        });
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            recorder.pending_human(&code(1)),
            counts(1).human,
            "nothing is taken while the other flush runs"
        );
        assert!(!flush.is_finished());
        drop(other);
        flush.await.expect("flush");
        assert_eq!(recorder.flushed.load(Ordering::Relaxed), total);
        assert_eq!(recorder.pending_human(&code(1)), 0);
    }

    #[tokio::test]
    async fn later_flushes_add_to_the_stored_counts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = sqlite(&dir, true).await;
        let codes = FLUSH_CHUNK as u64 + 3;
        insert_links(&store, codes + 1).await;
        let recorder = ClickRecorder::default();
        record(&recorder, codes);
        recorder.flush(&store).await;
        // The same codes again (each now has a row) and one code seen for the first time.
        record(&recorder, codes);
        let new = code(codes);
        recorder.record(&new, VisitKind::Head);
        recorder.flush(&store).await;
        for i in [0, FLUSH_CHUNK as u64, codes - 1] {
            let link = store
                .get_with_clicks(&code(i))
                .await
                .expect("get")
                .expect("link");
            let once = counts(i);
            let twice = ClickCounts {
                human: 2 * once.human,
                head: 2 * once.head,
                bot: 2 * once.bot,
            };
            assert_eq!(link.clicks, twice, "{}", code(i));
        }
        let link = store
            .get_with_clicks(&new)
            .await
            .expect("get")
            .expect("link");
        assert_eq!(
            link.clicks,
            ClickCounts {
                human: 0,
                head: 1,
                bot: 0
            }
        );
    }

    #[tokio::test]
    async fn a_failed_flush_keeps_every_count_for_the_next_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        // No migrations: the click table does not exist, so the first chunk fails.
        let store = sqlite(&dir, false).await;
        let recorder = ClickRecorder::default();
        let codes = FLUSH_CHUNK as u64 + 5;
        let total = record(&recorder, codes);
        recorder.flush(&store).await;
        // The failed chunk is kept in doubt with its mark, the rest of its shard put back; the
        // next flush sends the chunk again, as it was, before taking anything new.
        let first = lock(&recorder.in_doubt).clone().expect("a chunk in doubt");
        recorder.flush(&store).await;
        let again = lock(&recorder.in_doubt).clone().expect("still in doubt");
        assert_eq!(again.0, first.0, "sent again with its mark");
        assert!(Arc::ptr_eq(&again.1, &first.1), "sent again as it was");
        assert_eq!(recorder.resent.load(Ordering::Relaxed), 1);
        assert_eq!(recorder.flushed.load(Ordering::Relaxed), 0);
        let kept = recorder.take();
        assert_eq!(kept.len() + first.1.len(), codes as usize);
        assert_eq!(total_of(&kept) + total_of(&first.1), total);
    }

    /// A cached link that holds its counts, as the redirect cache's entries do.
    #[derive(Clone, Default)]
    struct Held(Arc<super::super::PendingClicks>);

    impl super::super::Holder for Held {
        fn pending(&self) -> &super::super::PendingClicks {
            &self.0
        }

        fn bytes(&self) -> usize {
            1000
        }
    }

    /// After a failed flush the lists of holders are folded into the map: a link listed again
    /// and again (read anew each time the cache evicted it) while the store refuses writes
    /// takes one slot, the evicted entries are let go, and no visit is lost.
    #[tokio::test]
    async fn a_failed_flush_folds_the_held_counts_into_one_slot_a_link() {
        use super::super::{HeldClicks, TakeHeld};
        let dir = tempfile::tempdir().expect("tempdir");
        let store = sqlite(&dir, false).await;
        let recorder = ClickRecorder::default();
        let held = Arc::new(HeldClicks::<Held>::default());
        recorder.hold(Arc::clone(&held) as Arc<dyn TakeHeld>);
        let links = 100;
        let mut visits = 0;
        for round in 0..5 {
            // Each link is read anew (a fresh entry), listed and visited once.
            for i in 0..links {
                held.record(
                    &recorder,
                    &code(i),
                    &Held::default(),
                    (VisitKind::Human, None),
                );
                visits += 1;
            }
            recorder.flush(&store).await;
            assert!(
                lock(&recorder.in_doubt).is_some(),
                "round {round}: the flush failed"
            );
            assert!(
                held.bytes() < 1000 * links,
                "round {round}: the lists let their entries go ({} bytes)",
                held.bytes()
            );
        }
        let doubted = lock(&recorder.in_doubt).clone().expect("in doubt");
        let kept = recorder.take();
        assert!(
            kept.len() <= links as usize,
            "one slot a link: {}",
            kept.len()
        );
        assert_eq!(total_of(&kept) + total_of(&doubted.1), visits);
    }

    fn total_of(rows: &[(CompactCode, ClickCounts)]) -> u64 {
        rows.iter().map(|(_, c)| c.human + c.head + c.bot).sum()
    }
}
