//! A cached link's pending visits in one word: its click counts, and whether they are also the
//! rollup counts of one cell (a [`RollupTag`]) not yet handed to the rollups.
//!
//! Most visits of a link within a flush interval fall into one rollup cell (no referrer, the
//! link's own URL, one device class and country, one hour). While every count in the word is
//! of the tagged cell, the word stands for those rollup counts too, and a visit costs the
//! rollups nothing but the tag compare. The first visit of another cell (or one no tag can
//! name) hands the counts so far to the rollups and marks the word [`MIXED`]: from then on
//! until a flush takes the word, its counts are click counts only and each visit's rollup
//! count goes to the rollups' aggregator as before. The rollups' flush takes the rollup counts
//! the same way (marking the word mixed), the totals' flush takes both (clearing the word); a
//! count reaching its field's top spills both. Each transition is one compare-and-swap, so
//! each visit's rollup count is handed over exactly once.

use crate::domain::ClickCounts;
use crate::visits::VisitKind;
use std::sync::atomic::{AtomicU64, Ordering};

/// Human visits in the low 21 bits, HEAD requests in the next 8, bots' in the 8 after; then the
/// tag, [`MIXED`] and [`LISTED`].
const HUMAN_BITS: u32 = 21;
const SMALL_BITS: u32 = 8;
const HEAD_SHIFT: u32 = HUMAN_BITS;
const BOT_SHIFT: u32 = HEAD_SHIFT + SMALL_BITS;
const TAG_SHIFT: u32 = BOT_SHIFT + SMALL_BITS;
const COUNTS: u64 = (1 << TAG_SHIFT) - 1;
const TAG: u64 = ((1 << RollupTag::BITS) - 1) << TAG_SHIFT;
/// The counts are not (all) of the tagged cell, or their rollup counts were handed over
/// already: they are click counts only.
const MIXED: u64 = 1 << 62;
/// The holder is on a list no flush has taken yet (set under the list's lock when it is put
/// there; cleared only by a flush's take, after the flush took the list).
pub(super) const LISTED: u64 = 1 << 63;
const _: () = assert!(TAG_SHIFT + RollupTag::BITS <= 62);

/// A rollup cell and hour as the rollups pack them ([`RollupTag::BITS`] bits); opaque here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RollupTag(u32);

impl RollupTag {
    /// How many bits a tag has.
    pub const BITS: u32 = 25;

    /// The tag of these bits; `None` past [`RollupTag::BITS`].
    pub fn new(bits: u32) -> Option<Self> {
        (bits < 1 << Self::BITS).then_some(Self(bits))
    }

    /// Its bits.
    pub fn bits(self) -> u32 {
        self.0
    }
}

/// Rollup counts taken out of a word, with the tag they were counted under.
pub type Rollups = (RollupTag, ClickCounts);

/// One holder's counts not yet taken by a flush, in one word.
#[derive(Debug, Default)]
pub struct PendingClicks(AtomicU64);

/// What [`PendingClicks::add`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Added {
    /// The holder was listed already; otherwise the caller lists it ([`PendingClicks::list`])
    /// before the visit counts as recorded, unless `clicks` took every count.
    pub listed: bool,
    /// The visit's rollup count is in the word.
    pub held: bool,
    /// Rollup counts taken out of the word, for the rollups.
    pub rollups: Option<Rollups>,
    /// Click counts taken out of the word (a field reached its top), for the recorder's map.
    pub clicks: Option<ClickCounts>,
}

fn counts(word: u64) -> ClickCounts {
    let field = |shift: u32, bits: u32| (word >> shift) & ((1 << bits) - 1);
    ClickCounts {
        human: field(0, HUMAN_BITS),
        head: field(HEAD_SHIFT, SMALL_BITS),
        bot: field(BOT_SHIFT, SMALL_BITS),
    }
}

fn tag(word: u64) -> RollupTag {
    RollupTag(((word & TAG) >> TAG_SHIFT) as u32)
}

/// The rollup counts a word stands for, if any.
fn rollups(word: u64) -> Option<Rollups> {
    (word & MIXED == 0 && word & COUNTS != 0).then(|| (tag(word), counts(word)))
}

impl PendingClicks {
    /// Counts one visit of `kind`, whose rollup cell is `tagged` (`None`: one no tag names, or
    /// rollups are off).
    pub fn add(&self, kind: VisitKind, tagged: Option<RollupTag>) -> Added {
        let (shift, bits) = match kind {
            VisitKind::Human => (0, HUMAN_BITS),
            VisitKind::Head => (HEAD_SHIFT, SMALL_BITS),
            VisitKind::Bot => (BOT_SHIFT, SMALL_BITS),
        };
        let top = (1 << bits) - 1;
        let mut word = self.0.load(Ordering::Acquire);
        loop {
            let held = word & COUNTS;
            // The visit's rollup count stays in the word if the word is of its cell (or empty).
            let keeps = tagged.filter(|t| word & MIXED == 0 && (held == 0 || tag(word) == *t));
            let tag_bits = keeps.map_or(word & TAG, |t| u64::from(t.0) << TAG_SHIFT);
            let added = held + (1 << shift);
            let full = (added >> shift) & top == top;
            let next = match (full, keeps) {
                (true, _) => word & LISTED | tag_bits,
                (false, Some(_)) => word & LISTED | tag_bits | added,
                (false, None) => word & (LISTED | TAG) | MIXED | added,
            };
            if let Err(now) =
                self.0
                    .compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire)
            {
                word = now;
                continue;
            }
            let mut done = Added {
                listed: word & LISTED != 0,
                held: keeps.is_some(),
                // Another cell's visit ends the word's stand for its cell: hand over its counts.
                rollups: if keeps.is_none() { rollups(word) } else { None },
                clicks: None,
            };
            if full {
                done.clicks = Some(counts(added));
                if let Some(tag) = keeps {
                    done.rollups = Some((tag, counts(added)));
                }
            }
            return done;
        }
    }

    /// Marks the holder listed; whether it was not (then the caller, holding the list's lock,
    /// puts it on the list).
    pub(super) fn list(&self) -> bool {
        self.0.fetch_or(LISTED, Ordering::AcqRel) & LISTED == 0
    }

    /// Takes the counts and the mark of being listed (a flush, after taking the list): the
    /// click counts, and the rollup counts they stand for if they do.
    pub fn take(&self) -> (ClickCounts, Option<Rollups>) {
        let word = self.0.swap(0, Ordering::AcqRel);
        (counts(word), rollups(word))
    }

    /// Takes the rollup counts the word stands for, leaving the click counts (marked mixed).
    pub fn take_rollups(&self) -> Option<Rollups> {
        let mut word = self.0.load(Ordering::Acquire);
        loop {
            let taken = rollups(word)?;
            match self.0.compare_exchange_weak(
                word,
                word | MIXED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(taken),
                Err(now) => word = now,
            }
        }
    }

    /// The click counts, left in place.
    pub fn peek(&self) -> ClickCounts {
        counts(self.0.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn tag(bits: u32) -> Option<RollupTag> {
        RollupTag::new(bits)
    }

    fn counted(human: u64, head: u64, bot: u64) -> ClickCounts {
        ClickCounts { human, head, bot }
    }

    #[test]
    fn a_word_counts_each_kind_apart_and_says_when_to_list() {
        let word = PendingClicks::default();
        let first = word.add(VisitKind::Human, tag(7));
        assert_eq!(
            (first.listed, first.held, first.rollups),
            (false, true, None)
        );
        assert!(
            !word.add(VisitKind::Head, tag(7)).listed,
            "until it is listed"
        );
        assert!(word.list());
        assert!(!word.list(), "listed once");
        assert!(word.add(VisitKind::Bot, tag(7)).listed);
        assert!(word.add(VisitKind::Bot, tag(7)).listed);
        assert_eq!(word.peek(), counted(1, 1, 2));
        assert_eq!(
            word.take(),
            (counted(1, 1, 2), Some((RollupTag(7), counted(1, 1, 2))))
        );
        assert_eq!(word.peek(), ClickCounts::default());
        assert!(
            !word.add(VisitKind::Bot, tag(9)).listed,
            "to be listed again"
        );
        assert_eq!(
            word.take(),
            (counted(0, 0, 1), Some((RollupTag(9), counted(0, 0, 1))))
        );
        assert_eq!(RollupTag::new(1 << RollupTag::BITS), None);
    }

    #[test]
    fn another_cell_hands_the_rollups_over_and_leaves_click_counts_only() {
        let word = PendingClicks::default();
        word.add(VisitKind::Human, tag(3));
        word.add(VisitKind::Human, tag(3));
        let other = word.add(VisitKind::Bot, tag(4));
        assert!(!other.held, "its rollup goes elsewhere");
        assert_eq!(other.rollups, Some((RollupTag(3), counted(2, 0, 0))));
        // Mixed now: even the first cell's visits go elsewhere, and nothing is handed twice.
        let again = word.add(VisitKind::Human, tag(3));
        assert_eq!((again.held, again.rollups), (false, None));
        let untagged = word.add(VisitKind::Head, None);
        assert_eq!((untagged.held, untagged.rollups), (false, None));
        assert_eq!(word.take(), (counted(3, 1, 1), None));
        // A visit no tag names starts a word that is mixed from the first count.
        assert!(!word.add(VisitKind::Human, None).held);
        assert!(!word.add(VisitKind::Human, tag(3)).held);
        assert_eq!(word.take(), (counted(2, 0, 0), None));
    }

    #[test]
    fn the_rollups_flush_takes_the_rollups_once_and_leaves_the_clicks() {
        let word = PendingClicks::default();
        word.add(VisitKind::Head, tag(5));
        assert_eq!(word.take_rollups(), Some((RollupTag(5), counted(0, 1, 0))));
        assert_eq!(word.take_rollups(), None, "taken once");
        assert!(!word.add(VisitKind::Head, tag(5)).held, "mixed until taken");
        assert_eq!(word.take(), (counted(0, 2, 0), None));
        assert_eq!(word.take_rollups(), None, "nothing held");
    }

    #[test]
    fn a_field_at_its_top_spills_clicks_and_rollups_together() {
        let word = PendingClicks::default();
        assert!(word.list());
        let top = (1u64 << SMALL_BITS) - 1;
        for _ in 1..top {
            let added = word.add(VisitKind::Bot, tag(1));
            assert_eq!((added.clicks, added.rollups), (None, None));
        }
        let spilled = word.add(VisitKind::Bot, tag(1));
        assert_eq!(spilled.clicks, Some(counted(0, 0, top)));
        assert_eq!(spilled.rollups, Some((RollupTag(1), counted(0, 0, top))));
        assert!(spilled.listed && spilled.held);
        assert_eq!(word.peek(), ClickCounts::default());
        assert!(
            word.add(VisitKind::Bot, tag(1)).listed,
            "a spill keeps it listed"
        );
        // A mixed word spills its click counts alone.
        word.add(VisitKind::Bot, None);
        for _ in 3..top {
            word.add(VisitKind::Bot, tag(1));
        }
        let spilled = word.add(VisitKind::Bot, tag(1));
        assert_eq!(
            (spilled.clicks, spilled.rollups),
            (Some(counted(0, 0, top)), None)
        );
    }

    /// Threads count while takers take: every click count and every rollup count is taken
    /// exactly once, whichever way.
    #[test]
    fn concurrent_adds_and_takes_lose_and_double_nothing() {
        const THREADS: u64 = 4;
        const VISITS: u64 = 50_000;
        let word = Arc::new(PendingClicks::default());
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let taker = {
            let (word, done) = (Arc::clone(&word), Arc::clone(&done));
            std::thread::spawn(move || {
                let (mut clicks, mut rollups) = (0, 0);
                let mut round = 0u64;
                while !done.load(Ordering::Acquire) {
                    round += 1;
                    if round.is_multiple_of(2) {
                        let (c, r) = word.take();
                        clicks += c.bot;
                        rollups += r.map_or(0, |(_, r)| r.bot);
                    } else {
                        rollups += word.take_rollups().map_or(0, |(_, r)| r.bot);
                    }
                }
                (clicks, rollups)
            })
        };
        let adders: Vec<_> = (0..THREADS)
            .map(|t| {
                let word = Arc::clone(&word);
                std::thread::spawn(move || {
                    let (mut clicks, mut rollups) = (0, 0);
                    for i in 0..VISITS {
                        // Two cells and untagged visits, interleaved.
                        let tagged = match (i + t) % 5 {
                            4 => None,
                            n => tag(n as u32 % 2),
                        };
                        let added = word.add(VisitKind::Bot, tagged);
                        clicks += added.clicks.map_or(0, |c| c.bot);
                        rollups += added.rollups.map_or(0, |(_, r)| r.bot);
                        if !added.held {
                            rollups += 1;
                        }
                    }
                    (clicks, rollups)
                })
            })
            .collect();
        let (mut clicks, mut rollups) = (0, 0);
        for adder in adders {
            let (c, r) = adder.join().expect("an adder");
            (clicks, rollups) = (clicks + c, rollups + r);
        }
        done.store(true, Ordering::Release);
        let (c, r) = taker.join().expect("the taker");
        let (rest, rest_rollups) = word.take();
        clicks += c + rest.bot;
        rollups += r + rest_rollups.map_or(0, |(_, r)| r.bot);
        assert_eq!(clicks, THREADS * VISITS, "click counts");
        assert_eq!(rollups, THREADS * VISITS, "rollup counts");
    }
}
