//! The exact click totals of each link, counted off the redirect path: they never drop a
//! visit.
//!
//! A visit only bumps an in-memory counter (through [`super::Visits::record`] or
//! [`super::Visits::record_held`]): in the cached link it was served from ([`HeldClicks`]),
//! or by code in the recorder's map; the visits' flush schedule takes both and writes the
//! accumulated counts every
//! click flush interval in chunks, one batched write each (never a write per redirect, never a
//! trigger on the link row; `flush`). A crash loses at most the counts of one flush interval
//! (and of the flush that was writing them).

mod flush;
mod held;
mod word;

pub use held::{HandOver, HandOverFn, HeldClicks, Holder, Recorded, TakeHeld};
pub use word::{PendingClicks, RollupTag, Rollups};

use super::VisitKind;
use crate::domain::{ClickCounts, CompactCode};
use crate::metrics::{Sample, Samples};
use crate::store::{BatchMark, BatchSequence, ClickRows, FlushStream};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

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
type Pending = HashMap<CompactCode, ClickCounts, foldhash::fast::RandomState>;

/// The most codes with pending counts by default (`SHORTENER_CLICK_MAX_PENDING`).
pub const DEFAULT_MAX_PENDING: usize = 1_000_000;

/// What one code's pending counts cost, estimated: its slot in a shard (code held inline,
/// counts, one control byte).
const SLOT_BYTES: u64 = std::mem::size_of::<(CompactCode, ClickCounts)>() as u64 + 1;

/// Pending counts, flushed in batches. They are bounded without dropping a visit: when a
/// shard holds its part of `max_pending` codes, the flush is asked to run at once
/// ([`ClickRecorder::full`]) rather than at the end of its interval.
pub struct ClickRecorder {
    shards: [Mutex<Pending>; SHARDS],
    /// Codes one shard holds before it asks for a flush.
    shard_bound: usize,
    /// Woken when a shard reaches its bound.
    full: tokio::sync::Notify,
    /// Clicks written to the store since start.
    pub flushed: AtomicU64,
    /// Held by the flush in progress, so that a flush begun beside another waits for it and
    /// returns only once every count taken before it began is written (or put back).
    flushing: tokio::sync::Mutex<()>,
    /// Counts held outside the map (by cached links: [`HeldClicks`]), taken with it.
    held: OnceLock<Arc<dyn TakeHeld>>,
    /// The marks of the chunks this recorder writes ([`BatchMark`]).
    batches: BatchSequence,
    /// The chunk whose write failed, with its mark: the store may have committed it (a
    /// connection lost during the commit), so it is neither counted as written nor put back
    /// with the pending counts, but sent again as it is, with the same mark, before any other
    /// chunk (the store adds it at most once). Written before the flush takes anything new, so
    /// there is at most one.
    in_doubt: Mutex<Option<(BatchMark, ClickRows)>>,
    /// Chunks sent again after a write in doubt, since start.
    pub resent: AtomicU64,
    /// Heap bytes of the map's keys too long to be held inline (aliases on branded hosts,
    /// [`CompactCode::heap_bytes`]).
    key_heap: AtomicU64,
}

impl Default for ClickRecorder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_PENDING)
    }
}

fn lock<T>(shard: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Counters and lists stay consistent whatever panicked while holding the lock.
    shard.lock().unwrap_or_else(|p| p.into_inner())
}

impl ClickRecorder {
    /// A recorder that asks for an early flush past about `max_pending` codes.
    pub fn new(max_pending: usize) -> Self {
        Self {
            shards: Default::default(),
            shard_bound: max_pending.div_ceil(SHARDS).max(1),
            full: tokio::sync::Notify::new(),
            flushed: AtomicU64::new(0),
            flushing: tokio::sync::Mutex::new(()),
            held: OnceLock::new(),
            batches: BatchSequence::new(FlushStream::Clicks),
            in_doubt: Mutex::new(None),
            resent: AtomicU64::new(0),
            key_heap: AtomicU64::new(0),
        }
    }

    /// Takes the counts `held` keeps with every flush, and counts them in
    /// [`ClickRecorder::pending_human`] and the gauge. Set once; a second set is ignored.
    pub fn hold(&self, held: Arc<dyn TakeHeld>) {
        let _ = self.held.set(held);
    }

    /// A shard's list of holders grew to `len` holders keeping `bytes` alive (from `before`):
    /// at the shard's bound in holders, or as the bytes cross half the shard's part of the
    /// budget, the flush is asked to run (so that the entries a list keeps alive after the
    /// cache evicted them are let go).
    fn listed(&self, len: usize, before: u64, bytes: u64) {
        let half_share = self.budget() / (2 * SHARDS as u64);
        if len == self.shard_bound || (before < half_share && bytes >= half_share) {
            self.full.notify_one();
        }
    }

    /// Completes when a shard reached its bound since the last flush began (the flush schedule
    /// then flushes at once).
    pub async fn full(&self) {
        self.full.notified().await;
    }

    /// Bytes the pending counts hold now, estimated from the shards' capacity (every slot,
    /// used or free; aliases longer than an inline code hold a little more on the heap), and
    /// the lists of holders with what they keep alive ([`TakeHeld::bytes`]).
    pub fn bytes(&self) -> u64 {
        let slots: usize = self.shards.iter().map(|s| lock(s).capacity()).sum();
        slots as u64 * SLOT_BYTES
            + self.key_heap.load(Ordering::Relaxed)
            + self.held.get().map_or(0, |held| held.bytes())
    }

    /// How many codes hold pending counts in the map now (not counting those cached links
    /// hold, [`TakeHeld`]).
    pub fn pending_codes(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }

    /// How many codes hold counts not known to be written: those in the map and those of the
    /// chunk whose write is in doubt (what a stop that ends now would lose).
    pub fn unwritten_codes(&self) -> usize {
        let doubted = lock(&self.in_doubt)
            .as_ref()
            .map_or(0, |(_, rows)| rows.len());
        self.pending_codes() + doubted
    }

    /// [`ClickRecorder::bytes`] at the bound: a hash table holding `max_pending` codes has up
    /// to twice as many slots, and while a flush writes a shard the next interval's map is
    /// already filling (about as many again, covered by the same factor); the keys held on the
    /// heap get twice their share ([`ClickRecorder::key_heap_share`]) on the same grounds.
    pub fn budget(&self) -> u64 {
        2 * (self.shard_bound * SHARDS) as u64 * SLOT_BYTES + 2 * self.key_heap_share()
    }

    /// Heap bytes the keys too long to be held inline may hold before the flush is asked to
    /// run at once: a quarter of what the slots of `max_pending` codes cost. Without it a
    /// node whose links are long aliases on branded hosts would hold several times its budget
    /// in keys before the map reached its bound in codes.
    fn key_heap_share(&self) -> u64 {
        (self.shard_bound * SHARDS) as u64 * SLOT_BYTES / 4
    }

    /// Counts `heap` more key bytes, asking for a flush as the total crosses its share.
    fn key_heap_grew(&self, heap: u64) {
        if heap == 0 {
            return;
        }
        let before = self.key_heap.fetch_add(heap, Ordering::Relaxed);
        let share = self.key_heap_share();
        if before < share && before + heap >= share {
            self.full.notify_one();
        }
    }

    fn shard(&self, code: &str) -> &Mutex<Pending> {
        &self.shards[shard_of(code)]
    }

    /// Adds `more` to the pending counts of `code`, asking for a flush when its shard reaches
    /// its bound.
    fn add(&self, code: &str, more: ClickCounts) {
        let mut pending = lock(self.shard(code));
        if let Some(counts) = pending.get_mut(code.as_bytes()) {
            *counts += more;
            return;
        }
        if pending.len() + 1 == self.shard_bound {
            self.full.notify_one();
        }
        let key = CompactCode::new(code);
        // A generated code is held inline: no shared counter is touched on its redirect.
        self.key_heap_grew(key.heap_bytes() as u64);
        pending.insert(key, more);
    }

    /// Counts one redirect of `code`.
    pub(super) fn record(&self, code: &str, kind: VisitKind) {
        let mut one = ClickCounts::default();
        match kind {
            VisitKind::Human => one.human = 1,
            VisitKind::Head => one.head = 1,
            VisitKind::Bot => one.bot = 1,
        }
        self.add(code, one);
    }

    /// Waits until no flush is running and keeps one from starting while the guard is held: a
    /// count is then either pending here or written to the store, never in between (taken by a
    /// flush whose write has not committed), so the store's total and [`Self::pending_human`]
    /// read under the guard add up to every visit this node counted.
    pub async fn settled(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.flushing.lock().await
    }

    /// This node's human visits of `code` not known to be written (in the map, held, and in a
    /// chunk whose write is in doubt: counted here even if it was written after all, so a
    /// visit limit errs towards refusing while the store cannot say).
    pub fn pending_human(&self, code: &str) -> u64 {
        let mapped = lock(self.shard(code))
            .get(code.as_bytes())
            .map_or(0, |counts| counts.human);
        let doubted = lock(&self.in_doubt).as_ref().map_or(0, |(_, rows)| {
            // A chunk is sorted by code.
            rows.binary_search_by(|(c, _)| c.as_str().cmp(code))
                .map_or(0, |at| rows[at].1.human)
        });
        mapped + doubted + self.held.get().map_or(0, |held| held.pending_human(code))
    }

    /// Takes the pending counts of one shard, sorted by code. The shard is swapped under its lock
    /// for an empty map with room for as many codes as the one taken held (the next interval has
    /// about as many, and a map growing from nothing rehashes on the redirect path), so
    /// redirects wait for a pointer swap, never for the copy or the sort.
    fn take_shard(&self, index: usize) -> Vec<(CompactCode, ClickCounts)> {
        // Sized under one lock and swapped under another, so the allocation does not hold up
        // redirects (codes recorded in between go with the swap). The held counts of the
        // shard's codes join the rows taken.
        let capacity = lock(&self.shards[index]).len();
        let empty = Pending::with_capacity_and_hasher(capacity, Default::default());
        let mut taken = std::mem::replace(&mut *lock(&self.shards[index]), empty);
        let heap: usize = taken.keys().map(CompactCode::heap_bytes).sum();
        self.key_heap.fetch_sub(heap as u64, Ordering::Relaxed);
        if let Some(held) = self.held.get() {
            held.take_shard(index, &mut |code, more| {
                *taken.entry(code).or_default() += more;
            });
        }
        let mut rows: Vec<_> = taken.into_iter().collect();
        // Keys compare in place (no pointer to follow for a short code, nothing to allocate).
        rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        rows
    }

    /// Takes every pending count, sorted by code.
    #[cfg(test)]
    fn take(&self) -> Vec<(CompactCode, ClickCounts)> {
        (0..SHARDS)
            .flat_map(|shard| self.take_shard(shard))
            .collect()
    }

    fn restore(&self, rows: &[(CompactCode, ClickCounts)]) {
        for (code, more) in rows {
            let mut pending = lock(self.shard(code.as_str()));
            match pending.entry(code.clone()) {
                std::collections::hash_map::Entry::Occupied(mut held) => *held.get_mut() += *more,
                std::collections::hash_map::Entry::Vacant(slot) => {
                    self.key_heap_grew(code.heap_bytes() as u64);
                    slot.insert(*more);
                }
            }
        }
    }
}

impl Sample for ClickRecorder {
    fn sample(&self, out: &mut Samples<'_, '_>) -> std::fmt::Result {
        out.counter(
            "shortener_clicks_flushed",
            "Click counts written to the store",
            self.flushed.load(Ordering::Relaxed),
        )?;
        out.counter(
            "shortener_clicks_chunks_resent",
            "Chunks of click counts sent again, with the same mark, after a write whose outcome was unknown (the store adds each once)",
            self.resent.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests;
