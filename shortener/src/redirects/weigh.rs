//! What an entry of a quick_cache costs beyond what it holds on the heap, and what a cache
//! holds in all: the redirect cache's weights ([`slot_cost`]) and its `/metrics` figures
//! ([`Held::bytes`]), checked against a counting allocator by `shortener/tests/cache_memory.rs`.

use crate::domain::CompactCode;
use crate::domain::compact_code::INLINE;
use quick_cache::MemoryUsed;

/// The bytes of one slot of a quick_cache whose slots hold `key_value` bytes of key and value:
/// the key and value, the entry's state and reference bits with the enum's tag, and the two
/// list links.
pub(super) const fn slot_size(key_value: usize) -> usize {
    (key_value + 8).next_multiple_of(8) + 8
}

/// What one entry costs a quick_cache beyond what it holds on the heap: its slot (of
/// `key_value` bytes of key and value, [`slot_size`]) times 1.5 for the slab's spare capacity
/// (a vector that doubles is between half and fully used), plus its index entry (a 4-byte token
/// and a control byte, at most 7/8 full, in a table that doubles: 8 bytes on average); and a
/// quarter more for the evicted keys the cache remembers once full (ghosts, a slot and an index
/// entry each, at most a quarter of the entries: [`GHOSTS`]). Checked against a counting
/// allocator by `shortener/tests/cache_memory.rs`.
pub(super) const fn slot_cost(key_value: usize) -> u64 {
    ((slot_size(key_value) * 3 / 2 + 8) * 5 / 4) as u64
}

/// Evicted keys remembered, per resident entry (quick_cache's "ghost allocation").
pub(super) const GHOSTS: f64 = 0.25;

/// Heap bytes of a key too long to be held inline (its `Arc<str>`).
pub(super) fn key_heap(code: &CompactCode) -> u64 {
    let len = code.as_bytes().len();
    if len > INLINE {
        (16 + len).next_multiple_of(8) as u64
    } else {
        0
    }
}

/// What a quick_cache holds, as it reports it.
pub(super) struct Held {
    /// Its tables: the slots in use, and the index as allocated.
    pub(super) memory: MemoryUsed,
    /// Its shards.
    pub(super) shards: usize,
    /// Its entries' total weight.
    pub(super) weight: u64,
    /// Its entries.
    pub(super) len: usize,
}

impl Held {
    /// Bytes in use for slots of `key_value` bytes and entries of fixed cost `fixed`: each
    /// shard's slab as allocated (quick_cache reports the slots in use; a slab is a vector that
    /// doubles, so it has room for the next power of two of them), the index, and what the
    /// entries hold on the heap (their weight less their fixed costs).
    pub(super) fn bytes(&self, key_value: usize, fixed: u64) -> u64 {
        let slot = slot_size(key_value);
        let shards = self.shards.max(1);
        let per_shard = (self.memory.entries / slot).div_ceil(shards);
        let slab = if per_shard == 0 {
            0
        } else {
            shards * per_shard.next_power_of_two().max(4) * slot
        };
        let heap = self.weight.saturating_sub(self.len as u64 * fixed);
        (slab + self.memory.map) as u64 + heap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixed costs docs/shortener.md ("What a cached link costs") and the README state.
    #[test]
    fn a_link_and_an_unknown_code_cost_what_the_documents_say() {
        let (key, handle, time) = (24, 16, 8);
        assert_eq!(size_of::<CompactCode>(), key);
        assert_eq!(slot_size(key + handle), 56);
        assert_eq!(slot_cost(key + handle), 115);
        assert_eq!(slot_cost(key + time), 100);
    }
}
