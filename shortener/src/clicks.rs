//! Click counting off the redirect path.
//!
//! A redirect only bumps an in-memory counter; a background task writes the accumulated counts
//! every flush interval in chunks of `FLUSH_CHUNK` (256) codes, one batched write each (never
//! a write per redirect, never a trigger on the link row). A crash loses at most the counts of
//! one flush interval (and of the flush that was writing them).

use crate::code_map_key::CodeMapKey;
use crate::domain::ClickCounts;
use crate::store::Store;
use aho_corasick::AhoCorasick;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What kind of visit a redirect was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visit {
    /// A GET from a person's browser (or anything not known to be a bot).
    Human,
    /// A HEAD request.
    Head,
    /// A GET from a known crawler or link-preview fetcher.
    Bot,
}

/// User-agent fragments (lowercase) of crawlers and link-preview fetchers.
const BOT_MARKERS: &[&str] = &[
    "bot",
    "crawler",
    "spider",
    "slurp",
    "facebookexternalhit",
    "facebookcatalog",
    "embedly",
    "quora link preview",
    "outbrain",
    "pinterest",
    "vkshare",
    "w3c_validator",
    "whatsapp",
    "skypeuripreview",
    "bitlybot",
    "preview",
    "headlesschrome",
    "lighthouse",
    "python-requests",
    "go-http-client",
    "okhttp",
    "curl/",
    "wget/",
];

/// Finds any of [`BOT_MARKERS`], ignoring ASCII case, in one pass over the user agent.
static BOT_FINDER: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(BOT_MARKERS)
        .expect("the bot markers are valid patterns")
});

/// Classifies a request by method and `User-Agent`.
pub fn classify(is_head: bool, user_agent: Option<&str>) -> Visit {
    if is_head {
        return Visit::Head;
    }
    match user_agent {
        Some(ua) if !BOT_FINDER.is_match(ua) => Visit::Human,
        _ => Visit::Bot,
    }
}

/// How many independently locked parts the pending counts are split into, so redirects on
/// different codes (and the flush) rarely wait for one another.
const SHARDS: usize = 16;

/// The shard of a code by its first byte, in byte order: every code of shard `i` sorts before
/// every code of shard `i + 1`. A flush can then take, sort and write one shard at a time and
/// still write all codes in order (so each page of the click table is written about once per
/// flush),
/// without ever holding the runtime's thread for a sort of every pending code. Generated and
/// private codes start with a uniformly random base62 character, so the 62 characters are
/// spread evenly; other bytes go to the shard of the nearest base62 character below them.
const SHARD_OF_FIRST_BYTE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    let mut below = 0; // base62 characters that sort before `byte`
    while byte < 256 {
        let shard = below * SHARDS / codespace::ALPHABET.len();
        table[byte] = if shard < SHARDS {
            shard as u8
        } else {
            (SHARDS - 1) as u8
        };
        if codespace::digit_value(byte as u8).is_some() {
            below += 1;
        }
        byte += 1;
    }
    table
};

fn shard_of(code: &str) -> usize {
    let first = code.as_bytes().first().copied().unwrap_or(0);
    usize::from(SHARD_OF_FIRST_BYTE[usize::from(first)])
}

/// Pending counts by code. Only codes that resolved to a link are ever recorded, so the keys are
/// not attacker-chosen; a fast seeded hash is enough. Keys hold short codes inline: recording a
/// code's first click of an interval allocates nothing, and a lookup follows no pointer.
type Pending = HashMap<CodeMapKey, ClickCounts, foldhash::fast::RandomState>;

/// Rows per store write of a flush. Each chunk is its own statement (PostgreSQL) or transaction
/// (SQLite), followed by a pause of [`FLUSH_PACE`], so a flush of many codes never holds the
/// store's writer, or on a small machine the CPU, for long at a stretch: redirects and creates
/// interleave with it instead of queueing behind it.
const FLUSH_CHUNK: usize = 256;

/// The pause between the chunks of one flush.
const FLUSH_PACE: Duration = Duration::from_millis(1);

/// Pending counts, flushed in batches.
#[derive(Default)]
pub struct ClickRecorder {
    shards: [Mutex<Pending>; SHARDS],
    /// Clicks written to the store since start.
    pub flushed: AtomicU64,
}

fn lock(shard: &Mutex<Pending>) -> std::sync::MutexGuard<'_, Pending> {
    // Counters stay consistent whatever panicked while holding the lock.
    shard.lock().unwrap_or_else(|p| p.into_inner())
}

impl ClickRecorder {
    fn shard(&self, code: &str) -> &Mutex<Pending> {
        &self.shards[shard_of(code)]
    }

    /// Counts one redirect of `code`.
    pub fn record(&self, code: &str, visit: Visit) {
        let mut pending = lock(self.shard(code));
        let counts = match pending.get_mut(code.as_bytes()) {
            Some(counts) => counts,
            None => pending.entry(CodeMapKey::new(code)).or_default(),
        };
        match visit {
            Visit::Human => counts.human += 1,
            Visit::Head => counts.head += 1,
            Visit::Bot => counts.bot += 1,
        }
    }

    /// Takes the pending counts of one shard, sorted by code. The shard is swapped under its lock
    /// for an empty map with room for as many codes as the one taken held (the next interval has
    /// about as many, and a map growing from nothing rehashes on the redirect path), so
    /// redirects wait for a pointer swap, never for the copy or the sort.
    fn take_shard(&self, shard: usize) -> Vec<(CodeMapKey, ClickCounts)> {
        let shard = &self.shards[shard];
        // Sized under one lock and swapped under another, so the allocation does not hold up
        // redirects (codes recorded in between go with the swap).
        let capacity = lock(shard).len();
        let empty = Pending::with_capacity_and_hasher(capacity, Default::default());
        let taken = std::mem::replace(&mut *lock(shard), empty);
        let mut rows: Vec<_> = taken.into_iter().collect();
        // Keys compare in place (no pointer to follow for a short code, nothing to allocate).
        rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        rows
    }

    /// Takes every pending count, sorted by code.
    #[cfg(test)]
    fn take(&self) -> Vec<(CodeMapKey, ClickCounts)> {
        (0..SHARDS)
            .flat_map(|shard| self.take_shard(shard))
            .collect()
    }

    fn restore(&self, rows: &[(CodeMapKey, ClickCounts)]) {
        for (code, c) in rows {
            let mut pending = lock(self.shard(code.as_str()));
            let counts = pending.entry(code.clone()).or_default();
            counts.human += c.human;
            counts.head += c.head;
            counts.bot += c.bot;
        }
    }

    /// Writes the pending counts to `store` in chunks of `FLUSH_CHUNK` (256) codes, paced by
    /// `FLUSH_PACE` (1 ms), then makes them durable together ([`Store::sync_clicks`]: one fsync per
    /// flush on SQLite, not one per chunk); what fails to be written is kept for the next flush.
    pub async fn flush(&self, store: &Store) {
        if self.write_chunks(store).await
            && let Err(error) = store.sync_clicks().await
        {
            // Committed, but no fsync is known to cover them yet (the store is stopping, or an
            // fsync failed and it refuses writes until restart).
            tracing::warn!(%error, "click counts were written but are not known to be on disk");
        }
    }

    /// Writes the pending counts in chunks ([`Chunks`]); returns whether any was written. A
    /// failed chunk puts itself and the rest of the shard it was cut from back and ends the
    /// flush: the shards not yet taken keep their counts for the next one.
    async fn write_chunks(&self, store: &Store) -> bool {
        let mut chunks = Chunks::new(self);
        let mut written = false;
        loop {
            let chunk = chunks.next_chunk();
            if chunk.is_empty() {
                return written;
            }
            if written {
                tokio::time::sleep(FLUSH_PACE).await;
            }
            let chunk: Arc<[(CodeMapKey, ClickCounts)]> = chunk.into();
            let total: u64 = chunk.iter().map(|(_, c)| c.human + c.head + c.bot).sum();
            if let Err(error) = store.add_clicks(Arc::clone(&chunk)).await {
                let rest = chunks.rest_of_shard();
                tracing::warn!(%error, codes = chunk.len() + rest.len(), "click flush failed; will retry");
                self.restore(&chunk);
                self.restore(rest);
                return written;
            }
            written = true;
            self.flushed.fetch_add(total, Ordering::Relaxed);
        }
    }

    /// Flushes every `interval` until `stop`, then once more.
    pub async fn run(&self, store: Store, interval: Duration, stop: CancellationToken) {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => self.flush(&store).await,
                () = stop.cancelled() => break,
            }
        }
        self.flush(&store).await;
    }
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
    current: std::vec::IntoIter<(CodeMapKey, ClickCounts)>,
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
    fn next_chunk(&mut self) -> Vec<(CodeMapKey, ClickCounts)> {
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
    fn rest_of_shard(&self) -> &[(CodeMapKey, ClickCounts)] {
        self.current.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visits_are_classified_by_method_and_user_agent() {
        let browser =
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/120.0 Safari/537.36";
        assert_eq!(classify(false, Some(browser)), Visit::Human);
        assert_eq!(classify(true, Some(browser)), Visit::Head);
        for ua in [
            "Slackbot-LinkExpanding 1.0",
            "facebookexternalhit/1.1",
            "Twitterbot/1.0",
            "Googlebot/2.1",
            "WhatsApp/2.23",
            "curl/8.0",
        ] {
            assert_eq!(classify(false, Some(ua)), Visit::Bot, "{ua}");
        }
        assert_eq!(classify(false, None), Visit::Bot);
    }

    #[test]
    fn counts_accumulate_per_code() {
        let recorder = ClickRecorder::default();
        recorder.record("a", Visit::Human);
        recorder.record("a", Visit::Human);
        recorder.record("a", Visit::Bot);
        recorder.record("b", Visit::Head);
        // An alias too long for an inline key, and one sharing its first 22 bytes.
        let long = "c-an-alias-longer-than-an-inline-key";
        recorder.record(long, Visit::Human);
        recorder.record(long, Visit::Human);
        recorder.record(&long[..22], Visit::Bot);
        let batch = recorder.take();
        let codes: Vec<&str> = batch.iter().map(|(code, _)| code.as_str()).collect();
        assert_eq!(codes, ["a", "b", &long[..22], long], "sorted by code");
        assert_eq!((batch[2].1.human, batch[2].1.bot), (0, 1));
        assert_eq!((batch[3].1.human, batch[3].1.bot), (2, 0));
        assert_eq!(
            batch[0].1,
            ClickCounts {
                human: 2,
                head: 0,
                bot: 1
            }
        );
        assert_eq!(
            batch[1].1,
            ClickCounts {
                human: 0,
                head: 1,
                bot: 0
            }
        );
        recorder.restore(&batch);
        assert_eq!(recorder.take().len(), 4);
    }

    #[test]
    fn shards_split_codes_in_byte_order_and_evenly() {
        for byte in 0..255 {
            assert!(
                SHARD_OF_FIRST_BYTE[byte] <= SHARD_OF_FIRST_BYTE[byte + 1],
                "shard of byte {byte} after the next byte's"
            );
        }
        let mut per_shard = [0; SHARDS];
        for &byte in codespace::ALPHABET {
            per_shard[usize::from(SHARD_OF_FIRST_BYTE[usize::from(byte)])] += 1;
        }
        assert!(
            per_shard.iter().all(|&n| n == 3 || n == 4),
            "base62 characters per shard: {per_shard:?}"
        );
        // Taken shard by shard, codes come out in byte order.
        let recorder = ClickRecorder::default();
        let codes = [
            "zz",
            "Z9",
            "0a",
            "a0",
            "",
            "-x",
            "9",
            "A",
            "~",
            "\u{e9}t\u{e9}",
        ];
        for code in codes {
            recorder.record(code, Visit::Human);
        }
        let mut sorted = codes;
        sorted.sort_unstable();
        let taken: Vec<String> = recorder
            .take()
            .iter()
            .map(|(code, _)| code.as_str().to_string())
            .collect();
        assert_eq!(taken, sorted);
    }

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
            .map(|i| crate::store::NewLink {
                code: code(i),
                url: format!("https://example.com/{i}"),
                kind: crate::store::Kind::Alias,
                id: None,
                expires_at: None,
                owner: "o".into(),
                dedup_key: None,
                idempotency: None,
            })
            .collect();
        store.insert_many(&links).await.expect("links");
    }

    fn record(recorder: &ClickRecorder, codes: u64) -> u64 {
        let mut total = 0;
        for i in 0..codes {
            let c = counts(i);
            for (n, visit) in [
                (c.human, Visit::Human),
                (c.head, Visit::Head),
                (c.bot, Visit::Bot),
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
        let Store::Sqlite(sqlite) = &store else {
            unreachable!("an SQLite store")
        };
        let before = sqlite.durability();
        recorder.flush(&store).await;
        let after = sqlite.durability();
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
        recorder.record(&new, Visit::Head);
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
        assert_eq!(recorder.flushed.load(Ordering::Relaxed), 0);
        let kept = recorder.take();
        assert_eq!(kept.len() as u64, codes);
        let kept_total: u64 = kept.iter().map(|(_, c)| c.human + c.head + c.bot).sum();
        assert_eq!(kept_total, total);
    }
}
