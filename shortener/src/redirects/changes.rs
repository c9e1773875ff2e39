//! What the redirect cache has been told of changes, so that a cached link no change can have
//! reached is not read again when its lifetime ends.
//!
//! A cached link goes stale only through a change to it, and every change is reported to the
//! cache (the node's own at once, other nodes' through the store's change feed). The lifetime
//! (`SHORTENER_CACHE_TTL`) bounds how long a *missed* report can leave a stale answer, not how
//! long a link may be trusted. So the cache keeps two facts:
//!
//! - **Which codes were reported changed**, in counters striped by the code's hash, and how often
//!   the cache was cleared. A read of the store takes a [`Seen`] before it starts; if neither its
//!   code's stripe nor the clear count moved by the time its answer is cached (checked before and
//!   after the insert), no change to that code was reported while the read ran, so the answer is
//!   not older than any change the cache was told of: it is *watched*. Otherwise the read's
//!   answer may be older than a change the node knows of: it is answered, and not cached.
//! - **Until when every change is known to have been reported** (`confirmed`): on the embedded
//!   store always (the node is its file's only writer and tells the cache of each change it
//!   makes), on PostgreSQL the time the change feed last sent a probe notification that has come
//!   back: notifications arrive in commit order, so each change committed before the probe was
//!   sent has been reported before it.
//!
//! A watched entry's lifetime then runs from the later of when it was cached and `confirmed`: it
//! is read again only when the reports may have stopped (a feed that went quiet for a lifetime),
//! with the same bound on staleness as before.

use std::sync::atomic::{AtomicU64, Ordering};

/// How many counters the codes' reported changes are spread over: a change to one code makes a
/// concurrent read of another unwatched only if both fall in one stripe.
const STRIPES: usize = 256;

/// The cache's record of reported changes (see the module's documentation).
#[derive(Debug)]
pub struct Changes {
    stripes: Box<[AtomicU64]>,
    cleared: AtomicU64,
    /// Nanoseconds since the cache's epoch before which every change made anywhere has been
    /// reported to the cache; `u64::MAX` when the node makes every change itself.
    confirmed: AtomicU64,
}

/// The reported changes of one code as a read of it began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    stripe: u64,
    cleared: u64,
}

impl Default for Changes {
    fn default() -> Self {
        Self {
            stripes: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
            cleared: AtomicU64::new(0),
            confirmed: AtomicU64::new(0),
        }
    }
}

/// The stripe of `code` (FNV-1a of its bytes; codes are short, and a collision only costs a
/// read its watch).
fn stripe_of(code: &str) -> usize {
    let hash = code.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % STRIPES as u64) as usize
}

impl Changes {
    /// What has been reported of `code` so far: taken before the store is read for it.
    pub fn seen(&self, code: &str) -> Seen {
        Seen {
            stripe: self.stripes[stripe_of(code)].load(Ordering::SeqCst),
            cleared: self.cleared.load(Ordering::SeqCst),
        }
    }

    /// Whether nothing has been reported of `code`, nor a clear, since `seen` was taken.
    pub fn unchanged_since(&self, code: &str, seen: Seen) -> bool {
        self.seen(code) == seen
    }

    /// A change to `code` was reported (counted before its entry is removed).
    pub fn changed(&self, code: &str) {
        self.stripes[stripe_of(code)].fetch_add(1, Ordering::SeqCst);
    }

    /// The cache is being cleared (counted before its entries are removed).
    pub fn cleared(&self) {
        self.cleared.fetch_add(1, Ordering::SeqCst);
    }

    /// Every change made before `nanos` (since the cache's epoch) has been reported.
    pub fn confirm(&self, nanos: u64) {
        self.confirmed.fetch_max(nanos, Ordering::AcqRel);
    }

    /// Every change is reported as it is made (the node makes them all).
    pub fn confirm_always(&self) {
        self.confirmed.store(u64::MAX, Ordering::Release);
    }

    /// Nanoseconds since the cache's epoch before which every change has been reported (0:
    /// nothing confirmed; `u64::MAX`: always).
    pub fn confirmed(&self) -> u64 {
        self.confirmed.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_is_unchanged_until_its_code_is_reported_changed_or_the_cache_cleared() {
        let changes = Changes::default();
        let seen = changes.seen("abc1234");
        assert!(changes.unchanged_since("abc1234", seen));
        changes.changed("abc1234");
        assert!(!changes.unchanged_since("abc1234", seen));

        let seen = changes.seen("abc1234");
        changes.cleared();
        assert!(!changes.unchanged_since("abc1234", seen));
    }

    #[test]
    fn a_change_to_one_code_leaves_reads_of_codes_in_other_stripes_unchanged() {
        let changes = Changes::default();
        let codes: Vec<String> = (0..1000).map(|i| format!("c{i:06}")).collect();
        let seen: Vec<Seen> = codes.iter().map(|c| changes.seen(c)).collect();
        changes.changed("c000042");
        let moved = codes
            .iter()
            .zip(&seen)
            .filter(|(code, seen)| !changes.unchanged_since(code, **seen))
            .count();
        // The code itself, and the few others of its stripe.
        assert!(!changes.unchanged_since("c000042", seen[42]));
        assert!((1..=16).contains(&moved), "{moved} of 1000 reads moved");
    }

    #[test]
    fn confirmation_only_moves_forward() {
        let changes = Changes::default();
        assert_eq!(changes.confirmed(), 0);
        changes.confirm(500);
        changes.confirm(200);
        assert_eq!(changes.confirmed(), 500);
        changes.confirm_always();
        assert_eq!(changes.confirmed(), u64::MAX);
    }
}
