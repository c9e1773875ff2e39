//! Codes the store recently said it does not hold, in a cache of their own.
//!
//! Kept apart from the links, under their own byte bound (`SHORTENER_NEGATIVE_CACHE_BYTES`),
//! so a storm of unknown codes evicts only other unknown codes, never a link. An entry is the
//! code and when it was stored: nothing on the heap for a code of up to 22 bytes.

use super::cache::nanos_since;
use super::weigh::{GHOSTS, Held, key_heap, slot_cost};
use crate::domain::CompactCode;
use crate::metrics::Footprint;
use quick_cache::OptionsBuilder;
use quick_cache::Weighter;
use quick_cache::sync::Cache;
use quick_cache::sync::DefaultLifecycle;
use std::time::{Duration, Instant};

/// Weighs an unknown code by what it costs: its slot (the key and the time) and, for a code
/// too long to be held in its key, the code's own allocation.
#[derive(Debug, Clone, Copy)]
struct Bytes;

/// An unknown code's key and value.
const SLOT: usize = size_of::<CompactCode>() + size_of::<u64>();

/// One unknown code's fixed cost: its slot in the cache and its share of the index.
const FIXED: u64 = slot_cost(SLOT);

impl Weighter<CompactCode, u64> for Bytes {
    fn weight(&self, code: &CompactCode, _: &u64) -> u64 {
        FIXED + key_heap(code)
    }
}

/// The unknown codes: code -> when it was stored (nanoseconds since the epoch).
pub struct Negative {
    entries: Cache<CompactCode, u64, Bytes>,
    ttl: Duration,
    epoch: Instant,
    max_bytes: u64,
}

impl Negative {
    /// An empty cache of at most `max_bytes`, whose codes are remembered for `ttl`, timed from
    /// `epoch`.
    pub fn new(max_bytes: u64, ttl: Duration, epoch: Instant) -> Self {
        let estimated = usize::try_from(max_bytes / FIXED)
            .unwrap_or(usize::MAX)
            .clamp(16, 1 << 24);
        let options = OptionsBuilder::new()
            .estimated_items_capacity(estimated)
            .weight_capacity(max_bytes.max(1))
            .ghost_allocation(GHOSTS)
            .build()
            .expect("valid cache options");
        Self {
            entries: Cache::with_options(
                options,
                Bytes,
                quick_cache::DefaultHashBuilder::default(),
                DefaultLifecycle::default(),
            ),
            ttl,
            epoch,
            max_bytes,
        }
    }

    /// Whether `code` is known to be unknown as of `now`; a stale entry is dropped.
    pub fn holds(&self, code: &str, now: Instant) -> bool {
        let Some(at) = self.entries.get(code.as_bytes()) else {
            return false;
        };
        let now = nanos_since(self.epoch, now);
        if now.saturating_sub(at) < self.ttl.as_nanos() as u64 {
            return true;
        }
        self.entries.remove(code.as_bytes());
        false
    }

    /// Remembers that the store did not hold `code` as of `at` (nanoseconds from the epoch:
    /// when the read that found it missing began), for the negative lifetime from then.
    pub fn put(&self, code: &str, at: u64) {
        self.entries.insert(CompactCode::new(code), at);
    }

    /// Forgets `code` (it was just created).
    pub fn invalidate(&self, code: &str) {
        self.entries.remove(code.as_bytes());
    }

    /// Forgets every code.
    pub fn clear(&self) {
        self.entries.clear();
    }

    /// Codes held.
    pub fn len(&self) -> u64 {
        self.entries.len() as u64
    }
}

/// Bytes in use: the cache's tables as allocated and the long codes' own allocations.
impl Footprint for Negative {
    fn bytes(&self) -> u64 {
        Held {
            memory: self.entries.memory_used(),
            shards: self.entries.num_shards(),
            weight: self.entries.weight(),
            len: self.entries.len(),
        }
        .bytes(SLOT, FIXED)
    }

    fn budget(&self) -> u64 {
        self.max_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_storm_of_unknown_codes_stays_within_its_own_bound() {
        let negative = Negative::new(64 * 1024, Duration::from_secs(60), Instant::now());
        for i in 0..20_000 {
            negative.put(&format!("u{i:06}"), 0);
        }
        let held = negative.len();
        assert!(held > 100 && held < 1000, "{held} codes held");
        let bytes = Footprint::bytes(&negative);
        assert!(bytes <= negative.budget() * 21 / 20, "{bytes} bytes held");
        assert!(negative.holds("u019999", Instant::now()));
        negative.invalidate("u019999");
        assert!(!negative.holds("u019999", Instant::now()));
    }

    #[test]
    fn a_code_is_remembered_for_its_lifetime_only() {
        let epoch = Instant::now();
        let negative = Negative::new(1 << 20, Duration::from_secs(5), epoch);
        let before = Instant::now();
        negative.put("zzz", 0);
        let after = Instant::now();
        assert!(
            negative.holds("zzz", before),
            "a request that raced the insert"
        );
        assert!(!negative.holds("zzz", after + Duration::from_secs(5)));
        // A stale code is dropped, not just hidden.
        assert!(!negative.holds("zzz", after));
        assert_eq!(negative.len(), 0);
    }
}
