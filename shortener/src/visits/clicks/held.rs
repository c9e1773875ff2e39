//! Click counts held by the thing a redirect already has in hand (a cached link), so that
//! counting a visit touches no map of its own.
//!
//! A redirect served from the cache holds the link's entry, which sits in memory the request
//! has just read. Counting the visit in a map keyed by code (the recorder's own) costs a hash
//! and, over many links, a miss in the processor's cache on the map's table and again on its
//! slot. A [`PendingClicks`] in the entry costs one compare-and-swap on a line already loaded
//! (and stands for the visits' rollup counts too while they share one cell; see its module);
//! the first visit since the counts were last taken also lists the entry (a handle, so an
//! entry the cache evicts meanwhile still has its counts taken) in [`HeldClicks`], which the
//! flush drains shard by shard into the same rows as the recorder's map. No visit is dropped:
//! a count is in the entry until a flush takes it, and an entry with counts is listed until
//! then (or listed again).

use super::word::{PendingClicks, RollupTag, Rollups};
use super::{ClickRecorder, SHARDS, lock, shard_of};
use crate::domain::{ClickCounts, CompactCode};
use crate::visits::VisitKind;
use std::sync::{Mutex, OnceLock};

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

/// Where the rollup counts a holder's word stood for go, with its code ([`word`](super::word)):
/// for each holder whose counts a flush takes, and for every listed one when the rollups'
/// flush asks ([`HandOver`]).
pub type HandOverFn<H> = Box<dyn Fn(&str, &H, Rollups) + Send + Sync>;

/// The listed holders, as the rollups' flush asks for the rollup counts their words stand for.
pub trait HandOver: Send + Sync {
    /// How many shards the holders are listed in.
    fn shards(&self) -> usize;
    /// Hands over the rollup counts of the holders listed in `shard` at positions `from` up to
    /// `from + count` (see [`HeldClicks::hand_over_with`]), leaving their click counts and them
    /// listed; whether the list goes on past them. The flush walks a list a part at a time and
    /// lets the requests waiting on its thread run between parts: a list may change meanwhile,
    /// and a holder passed over goes with the next flush (or its word's next take), one handed
    /// over twice gives nothing the second time.
    fn hand_over_listed(&self, shard: usize, from: usize, count: usize) -> bool;
}

/// Holders with counts not yet taken, listed by the shard of their code.
pub struct HeldClicks<H> {
    shards: [Mutex<List<H>>; SHARDS],
    hand_over: OnceLock<HandOverFn<H>>,
}

impl<H> Default for HeldClicks<H> {
    fn default() -> Self {
        Self {
            shards: std::array::from_fn(|_| Mutex::new(List::default())),
            hand_over: OnceLock::new(),
        }
    }
}

impl<H> HeldClicks<H> {
    /// Calls `hand_over` with the rollup counts a holder's word stood for, for each holder a
    /// flush takes and for every listed holder on [`HandOver::hand_over_listed`]. Without it
    /// they are dropped (rollups off). Set once; a second set is ignored.
    pub fn hand_over_with(&self, hand_over: HandOverFn<H>) {
        let _ = self.hand_over.set(hand_over);
    }
}

impl<H: Holder> HandOver for HeldClicks<H> {
    fn shards(&self) -> usize {
        SHARDS
    }

    fn hand_over_listed(&self, shard: usize, from: usize, count: usize) -> bool {
        let (Some(hand_over), Some(list)) = (self.hand_over.get(), self.shards.get(shard)) else {
            return false;
        };
        // Copied out under the lock (a reference count each), handed over outside it.
        let (part, more) = {
            let list = lock(list);
            let end = from.saturating_add(count).min(list.holders.len());
            let part = list.holders.get(from..end).map(<[_]>::to_vec);
            (part.unwrap_or_default(), end < list.holders.len())
        };
        for (code, holder) in &part {
            if let Some(rollups) = holder.pending().take_rollups() {
                hand_over(code.as_str(), holder, rollups);
            }
        }
        more
    }
}

/// What a held visit's count left to its caller for the rollups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The visit's rollup count is in the holder's word.
    pub held: bool,
    /// Rollup counts the word no longer stands for, to be counted in the rollups.
    pub rollups: Option<Rollups>,
}

impl<H: Holder> HeldClicks<H> {
    /// Counts one visit of `kind` to `code` (of the rollup cell `tagged`) in `holder`, listing
    /// it on its first count since the last flush; counts at their field's top go to
    /// `recorder`'s map instead. Asks `recorder` for an early flush when a shard's list reaches
    /// its bound.
    pub fn record(
        &self,
        recorder: &ClickRecorder,
        code: &str,
        holder: &H,
        (kind, tagged): (VisitKind, Option<RollupTag>),
    ) -> Recorded {
        let added = holder.pending().add(kind, tagged);
        match added.clicks {
            Some(clicks) => recorder.add(code, clicks),
            None if !added.listed => {
                // Listed before this returns, by this visit or by one beside it that holds the
                // lock: a flush begun after a visit was recorded finds its holder on the list.
                let mut list = lock(&self.shards[shard_of(code)]);
                if holder.pending().list() {
                    let before = list.kept;
                    let key = CompactCode::new(code);
                    // The holder's heap, and its key's when too long to be held inline.
                    list.kept += (holder.bytes() + key.heap_bytes()) as u64;
                    list.holders.push((key, holder.clone()));
                    recorder.listed(list.holders.len(), before, list.kept);
                }
            }
            None => {}
        }
        Recorded {
            held: added.held,
            rollups: added.rollups,
        }
    }
}

impl<H: Holder> TakeHeld for HeldClicks<H> {
    fn take_shard(&self, shard: usize, add: &mut dyn FnMut(CompactCode, ClickCounts)) {
        // Swapped under the lock, drained outside it: a visit listed meanwhile goes to the new
        // list, and its count (if it landed before the take below) is taken now and finds
        // nothing then.
        let taken = std::mem::take(&mut *lock(&self.shards[shard]));
        let hand_over = self.hand_over.get();
        for (code, holder) in taken.holders {
            let (counts, rollups) = holder.pending().take();
            if let (Some(hand_over), Some(rollups)) = (hand_over, rollups) {
                hand_over(code.as_str(), &holder, rollups);
            }
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
    use std::sync::atomic::Ordering;

    /// Visits of one kind (HEAD) at which a word spills into the map: its field's top.
    const SPILL: u64 = 255;

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
    fn listed_holders_are_handed_over_a_part_at_a_time_each_once_keeping_their_clicks() {
        let recorder = Arc::new(ClickRecorder::default());
        let held = Arc::new(HeldClicks::<Counted>::default());
        recorder.hold(Arc::clone(&held) as Arc<dyn TakeHeld>);
        let handed = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&handed);
        held.hand_over_with(Box::new(move |code, _, (tag, counts)| {
            lock(&into).push((code.to_string(), tag.bits(), counts.human));
        }));
        let holders: Vec<(String, Counted)> = (0..2000)
            .map(|i| (format!("c{i:04}"), Counted::default()))
            .collect();
        for (code, holder) in &holders {
            held.record(
                &recorder,
                code,
                holder,
                (VisitKind::Human, RollupTag::new(7)),
            );
        }
        let walk = || {
            let mut parts = 0;
            for shard in 0..held.shards() {
                let mut from = 0;
                while held.hand_over_listed(shard, from, 50) {
                    from += 50;
                    parts += 1;
                }
                parts += 1;
            }
            parts
        };
        assert!(walk() > held.shards(), "a shard's list took several parts");
        let mut got = lock(&handed).clone();
        got.sort();
        let want: Vec<_> = holders.iter().map(|(c, _)| (c.clone(), 7, 1)).collect();
        assert_eq!(got, want, "every holder's rollup count, once");
        walk();
        assert_eq!(lock(&handed).len(), holders.len(), "nothing a second time");
        // The click counts stay with the holders for the totals' flush.
        let taken = recorder.take();
        assert_eq!(taken.len(), holders.len());
        assert!(taken.iter().all(|(_, c)| c.human == 1));
    }

    #[test]
    fn a_flush_takes_held_counts_with_the_map_in_code_order_and_holders_outlive_their_owner() {
        let recorder = Arc::new(ClickRecorder::default());
        let held = Arc::new(HeldClicks::<Counted>::default());
        recorder.hold(Arc::clone(&held) as Arc<dyn TakeHeld>);
        let (a, b) = (Counted::default(), Counted::default());
        held.record(&recorder, "b", &b, (VisitKind::Human, None));
        held.record(&recorder, "a", &a, (VisitKind::Human, None));
        held.record(&recorder, "a", &a, (VisitKind::Head, None));
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
        let clicks = SPILL + 5;
        for _ in 0..clicks {
            held.record(&recorder, "x", &holder, (VisitKind::Head, None));
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
            held.record(
                &recorder,
                &format!("a{i}"),
                holder,
                (VisitKind::Human, None),
            );
        }
        let asked = tokio::time::timeout(std::time::Duration::from_millis(20), recorder.full());
        assert!(asked.await.is_err(), "asked too early");
        assert!(
            recorder.bytes() >= (enough - 1) * 1000,
            "the gauge counts what is kept"
        );
        held.record(&recorder, "a0", &holders[0], (VisitKind::Human, None));
        tokio::time::timeout(std::time::Duration::from_secs(1), recorder.full())
            .await
            .expect("a flush is asked at half the share");
        assert_eq!(recorder.take().len() as u64, enough, "no visit dropped");
        assert!(recorder.bytes() < 1000, "the holders are let go");
    }

    /// A holder listed under a key too long to be held inline (a branded host and alias)
    /// counts the key's heap beside its own.
    #[test]
    fn a_long_keys_listing_counts_the_key() {
        let recorder = ClickRecorder::new(SHARDS * 64);
        let held = HeldClicks::<Counted>::default();
        let holder = Counted::default();
        let key = format!("go.brand.example/{}", "a".repeat(300));
        held.record(&recorder, &key, &holder, (VisitKind::Human, None));
        let list = lock(&held.shards[shard_of(&key)]);
        assert_eq!(list.holders.len(), 1);
        assert_eq!(
            list.kept,
            (holder.bytes() + CompactCode::new(&key).heap_bytes()) as u64
        );
        assert!(list.kept > 300, "the key's bytes are counted");
    }

    #[test]
    fn a_spilled_holder_stays_listed_once_so_its_visits_count_once_for_a_limit() {
        let recorder = ClickRecorder::default();
        let held = Arc::new(HeldClicks::<Counted>::default());
        recorder.hold(Arc::clone(&held) as Arc<dyn TakeHeld>);
        let holder = Counted::default();
        for _ in 0..3 {
            held.record(&recorder, "x", &holder, (VisitKind::Human, None));
        }
        for _ in 0..SPILL {
            held.record(&recorder, "x", &holder, (VisitKind::Head, None));
        }
        for _ in 0..2 {
            held.record(&recorder, "x", &holder, (VisitKind::Human, None));
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
                        let visit = (VisitKind::Human, None);
                        held.record(&recorder, &format!("c{n}"), &holders[n], visit);
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
