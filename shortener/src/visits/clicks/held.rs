//! Click counts held by the thing a redirect already has in hand (a cached link), so that
//! counting a visit touches no map of its own.
//!
//! A redirect served from the cache holds the link's entry, which sits in memory the request
//! has just read. Counting the visit in a map keyed by code (the recorder's own) costs a hash
//! and, over many links, a miss in the processor's cache on the map's table and again on its
//! slot. A [`PendingClicks`] in the entry costs one atomic add on a line already loaded; the
//! first visit since the counts were last taken also lists the entry (a handle, so an entry
//! the cache evicts meanwhile still has its counts taken) in [`HeldClicks`], which the flush
//! drains shard by shard into the same rows as the recorder's map. No visit is dropped: a
//! count is in the entry until a flush takes it, and an entry with counts is listed until
//! then (or listed again).

use super::{ClickRecorder, SHARDS, lock, shard_of};
use crate::domain::{ClickCounts, CompactCode};
use crate::visits::VisitKind;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Human visits in the low 32 bits, HEAD requests in the next 16, bots' in the 15 after, and
/// [`LISTED`] on top.
const HUMAN: u64 = 1;
const HEAD: u64 = 1 << 32;
const BOT: u64 = 1 << 48;
/// The holder is on a list no flush has taken yet (set under the list's lock when it is put
/// there; cleared only by a flush's take, after the flush took the list).
const LISTED: u64 = 1 << 63;

/// Past these a field is taken at once into the recorder's map, long before it could carry
/// into the next (every adder checks after its own add, so at most one add per thread lands
/// beyond the mark).
const HUMAN_MARK: u64 = 1 << 30;
const SMALL_MARK: u64 = 1 << 14;

/// One holder's counts not yet taken by a flush, in one word.
#[derive(Debug, Default)]
pub struct PendingClicks(AtomicU64);

/// What [`PendingClicks::add`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// The holder is not listed: it must be, before the visit counts as recorded
    /// ([`PendingClicks::list`]).
    Unlisted,
    /// Counted in a holder already listed.
    More,
    /// A field is near its width: spill the counts into the recorder's map now
    /// ([`PendingClicks::spill`]).
    Full,
}

fn unpack(word: u64) -> ClickCounts {
    ClickCounts {
        human: word & 0xffff_ffff,
        head: (word >> 32) & 0xffff,
        bot: (word & !LISTED) >> 48,
    }
}

impl PendingClicks {
    /// Counts one visit of `kind`.
    pub fn add(&self, kind: VisitKind) -> Added {
        let one = match kind {
            VisitKind::Human => HUMAN,
            VisitKind::Head => HEAD,
            VisitKind::Bot => BOT,
        };
        let before = self.0.fetch_add(one, Ordering::AcqRel);
        let now = unpack(before + one);
        if now.human >= HUMAN_MARK || now.head >= SMALL_MARK || now.bot >= SMALL_MARK {
            Added::Full
        } else if before & LISTED == 0 {
            Added::Unlisted
        } else {
            Added::More
        }
    }

    /// Marks the holder listed; whether it was not (then the caller, holding the list's lock,
    /// puts it on the list).
    fn list(&self) -> bool {
        self.0.fetch_or(LISTED, Ordering::AcqRel) & LISTED == 0
    }

    /// Takes the counts, leaving the holder listed or not as it was.
    fn spill(&self) -> ClickCounts {
        unpack(self.0.fetch_and(LISTED, Ordering::AcqRel))
    }

    /// Takes the counts and the mark of being listed (a flush, after taking the list).
    pub fn take(&self) -> ClickCounts {
        unpack(self.0.swap(0, Ordering::AcqRel))
    }

    /// The counts, left in place.
    pub fn peek(&self) -> ClickCounts {
        unpack(self.0.load(Ordering::Acquire))
    }
}

/// What holds a [`PendingClicks`]: a handle that keeps it alive while listed.
pub trait Holder: Clone + Send + Sync + 'static {
    /// The counts it holds.
    fn pending(&self) -> &PendingClicks;
    /// Heap bytes a handle keeps alive (what a listed holder costs once its owner let go).
    fn bytes(&self) -> usize;
}

/// The listed holders, as the recorder drains them (the holder's type erased).
pub trait TakeHeld: Send + Sync {
    /// Takes the counts of every holder listed under `shard`, handing each to `add` with its
    /// code, and empties the shard's list.
    fn take_shard(&self, shard: usize, add: &mut dyn FnMut(CompactCode, ClickCounts));
    /// Human visits held for `code` and not yet taken. Searches the code's shard list: asked
    /// only when a link with a visit limit is read from the store.
    fn pending_human(&self, code: &str) -> u64;
    /// Bytes the lists hold now (every slot, used or free) and what their holders keep alive:
    /// an upper bound, since a holder still cached is counted by its cache too.
    fn bytes(&self) -> u64;
}

/// One shard's listed holders, and the heap bytes they keep alive.
struct List<H> {
    holders: Vec<(CompactCode, H)>,
    kept: u64,
}

impl<H> Default for List<H> {
    fn default() -> Self {
        Self {
            holders: Vec::new(),
            kept: 0,
        }
    }
}

/// Holders with counts not yet taken, listed by the shard of their code.
pub struct HeldClicks<H> {
    shards: [Mutex<List<H>>; SHARDS],
}

impl<H> Default for HeldClicks<H> {
    fn default() -> Self {
        Self {
            shards: std::array::from_fn(|_| Mutex::new(List::default())),
        }
    }
}

impl<H: Holder> HeldClicks<H> {
    /// Counts one visit of `kind` to `code` in `holder`, listing it on its first count since
    /// the last flush; counts near their width go to `recorder`'s map instead. Asks `recorder`
    /// for an early flush when a shard's list reaches its bound.
    pub fn record(&self, recorder: &ClickRecorder, code: &str, holder: &H, kind: VisitKind) {
        match holder.pending().add(kind) {
            Added::More => {}
            Added::Unlisted => {
                // Listed before this returns, by this visit or by one beside it that holds the
                // lock: a flush begun after a visit was recorded finds its holder on the list.
                let mut list = lock(&self.shards[shard_of(code)]);
                if holder.pending().list() {
                    let before = list.kept;
                    list.kept += holder.bytes() as u64;
                    list.holders.push((CompactCode::new(code), holder.clone()));
                    recorder.listed(list.holders.len(), before, list.kept);
                }
            }
            Added::Full => recorder.add(code, holder.pending().spill()),
        }
    }
}

impl<H: Holder> TakeHeld for HeldClicks<H> {
    fn take_shard(&self, shard: usize, add: &mut dyn FnMut(CompactCode, ClickCounts)) {
        // Swapped under the lock, drained outside it: a visit listed meanwhile goes to the new
        // list, and its count (if it landed before the take below) is taken now and finds
        // nothing then.
        let taken = std::mem::take(&mut *lock(&self.shards[shard]));
        for (code, holder) in taken.holders {
            let counts = holder.pending().take();
            if counts != ClickCounts::default() {
                add(code, counts);
            }
        }
    }

    fn pending_human(&self, code: &str) -> u64 {
        lock(&self.shards[shard_of(code)])
            .holders
            .iter()
            .filter(|(listed, _)| listed.as_str() == code)
            .map(|(_, holder)| holder.pending().peek().human)
            .sum()
    }

    fn bytes(&self) -> u64 {
        let slot = size_of::<(CompactCode, H)>() as u64;
        self.shards
            .iter()
            .map(|shard| {
                let list = lock(shard);
                list.holders.capacity() as u64 * slot + list.kept
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[derive(Clone, Default)]
    struct Counted(Arc<PendingClicks>);

    impl Holder for Counted {
        fn pending(&self) -> &PendingClicks {
            &self.0
        }

        fn bytes(&self) -> usize {
            1000
        }
    }

    #[test]
    fn a_word_counts_each_kind_apart_and_says_when_to_list_and_when_to_spill() {
        let pending = PendingClicks::default();
        assert_eq!(pending.add(VisitKind::Human), Added::Unlisted);
        assert_eq!(
            pending.add(VisitKind::Head),
            Added::Unlisted,
            "until it is listed"
        );
        assert!(pending.list());
        assert!(!pending.list(), "listed once");
        assert_eq!(pending.add(VisitKind::Bot), Added::More);
        assert_eq!(pending.add(VisitKind::Bot), Added::More);
        let counts = pending.take();
        assert_eq!((counts.human, counts.head, counts.bot), (1, 1, 2));
        assert_eq!(pending.peek(), ClickCounts::default());
        assert_eq!(
            pending.add(VisitKind::Bot),
            Added::Unlisted,
            "to be listed again"
        );
        assert!(pending.list());
        for _ in 1..SMALL_MARK - 1 {
            assert_eq!(pending.add(VisitKind::Bot), Added::More);
        }
        assert_eq!(pending.add(VisitKind::Bot), Added::Full);
        assert_eq!(pending.spill().bot, SMALL_MARK);
        assert_eq!(
            pending.add(VisitKind::Bot),
            Added::More,
            "a spill keeps it listed"
        );
        assert_eq!(pending.take().bot, 1);
    }

    #[test]
    fn a_flush_takes_held_counts_with_the_map_in_code_order_and_holders_outlive_their_owner() {
        let recorder = Arc::new(ClickRecorder::default());
        let held = Arc::new(HeldClicks::<Counted>::default());
        recorder.hold(Arc::clone(&held) as Arc<dyn TakeHeld>);
        let (a, b) = (Counted::default(), Counted::default());
        held.record(&recorder, "b", &b, VisitKind::Human);
        held.record(&recorder, "a", &a, VisitKind::Human);
        held.record(&recorder, "a", &a, VisitKind::Head);
        recorder.record("a", VisitKind::Bot);
        recorder.record("c", VisitKind::Human);
        assert_eq!(recorder.pending_human("a"), 1);
        // The owner lets go (the cache evicts the entry): the list keeps the counts.
        drop((a, b));
        assert!(recorder.bytes() > 0);
        let taken = recorder.take();
        let rows: Vec<_> = taken
            .iter()
            .map(|(code, c)| (code.as_str(), c.human, c.head, c.bot))
            .collect();
        assert_eq!(rows, [("a", 1, 1, 1), ("b", 1, 0, 0), ("c", 1, 0, 0)]);
        assert!(recorder.take().is_empty(), "taken once");
    }

    #[test]
    fn counts_spilled_at_their_width_reach_the_map() {
        let recorder = ClickRecorder::default();
        let held = HeldClicks::<Counted>::default();
        let holder = Counted::default();
        let clicks = SMALL_MARK + 5;
        for _ in 0..clicks {
            held.record(&recorder, "x", &holder, VisitKind::Head);
        }
        let mut total = recorder.take().iter().map(|(_, c)| c.head).sum::<u64>();
        held.take_shard(shard_of("x"), &mut |_, c| total += c.head);
        assert_eq!(total, clicks);
    }

    #[tokio::test]
    async fn a_list_keeping_half_its_share_of_the_budget_alive_asks_for_a_flush() {
        // A budget of 2 x 16 x 64 slots; half a shard's share is a few holders of 1000 bytes.
        let recorder = ClickRecorder::new(SHARDS * 64);
        let held = Arc::new(HeldClicks::<Counted>::default());
        recorder.hold(Arc::clone(&held) as Arc<dyn TakeHeld>);
        let half_share = recorder.budget() / (2 * SHARDS as u64);
        let enough = half_share.div_ceil(1000);
        // Codes of one shard (the same first byte): one holder short, no flush asked.
        let holders: Vec<Counted> = (0..enough).map(|_| Counted::default()).collect();
        for (i, holder) in holders.iter().enumerate().skip(1) {
            held.record(&recorder, &format!("a{i}"), holder, VisitKind::Human);
        }
        let asked = tokio::time::timeout(std::time::Duration::from_millis(20), recorder.full());
        assert!(asked.await.is_err(), "asked too early");
        assert!(
            recorder.bytes() >= (enough - 1) * 1000,
            "the gauge counts what is kept"
        );
        held.record(&recorder, "a0", &holders[0], VisitKind::Human);
        tokio::time::timeout(std::time::Duration::from_secs(1), recorder.full())
            .await
            .expect("a flush is asked at half the share");
        assert_eq!(recorder.take().len() as u64, enough, "no visit dropped");
        assert!(recorder.bytes() < 1000, "the holders are let go");
    }

    #[test]
    fn a_spilled_holder_stays_listed_once_so_its_visits_count_once_for_a_limit() {
        let recorder = ClickRecorder::default();
        let held = Arc::new(HeldClicks::<Counted>::default());
        recorder.hold(Arc::clone(&held) as Arc<dyn TakeHeld>);
        let holder = Counted::default();
        for _ in 0..3 {
            held.record(&recorder, "x", &holder, VisitKind::Human);
        }
        for _ in 0..SMALL_MARK {
            held.record(&recorder, "x", &holder, VisitKind::Head);
        }
        for _ in 0..2 {
            held.record(&recorder, "x", &holder, VisitKind::Human);
        }
        assert_eq!(recorder.pending_human("x"), 5);
        assert_eq!(lock(&held.shards[shard_of("x")]).holders.len(), 1);
    }

    /// The totals never drop a visit: threads count while flushes take, and every count
    /// is taken exactly once.
    #[test]
    fn no_visit_is_lost_or_counted_twice_while_flushes_take_beside_redirects() {
        const THREADS: u64 = 4;
        const VISITS: u64 = 50_000;
        let recorder = Arc::new(ClickRecorder::new(64));
        let held = Arc::new(HeldClicks::<Counted>::default());
        recorder.hold(Arc::clone(&held) as Arc<dyn TakeHeld>);
        let holders: Arc<Vec<Counted>> = Arc::new((0..40).map(|_| Counted::default()).collect());
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let taker = {
            let (recorder, done) = (Arc::clone(&recorder), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut taken = 0;
                while !done.load(Ordering::Acquire) {
                    taken += recorder.take().iter().map(|(_, c)| c.human).sum::<u64>();
                }
                taken
            })
        };
        let counters: Vec<_> = (0..THREADS)
            .map(|t| {
                let (recorder, held, holders) = (
                    Arc::clone(&recorder),
                    Arc::clone(&held),
                    Arc::clone(&holders),
                );
                std::thread::spawn(move || {
                    for i in 0..VISITS {
                        let n = ((i * 7 + t) % holders.len() as u64) as usize;
                        held.record(&recorder, &format!("c{n}"), &holders[n], VisitKind::Human);
                    }
                })
            })
            .collect();
        for counter in counters {
            counter.join().expect("a counting thread");
        }
        done.store(true, Ordering::Release);
        let taken = taker.join().expect("the taker");
        let rest: u64 = recorder.take().iter().map(|(_, c)| c.human).sum();
        assert_eq!(taken + rest, THREADS * VISITS);
    }
}
