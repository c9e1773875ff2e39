//! The high-water mark of the links table's slots: what lets a redirect refuse a code no row
//! can hold without reading the store (docs/design.md, I9).
//!
//! Every row a code that decodes can be found at is found through the ID it decodes to: on
//! PostgreSQL (slot layout) only at `slot = decode(code)`, on SQLite at the rowid of that ID or
//! in the named-code index (an imported legacy code, or a row another key made). So if every
//! such row's decoded ID is at most `W`, a code that decodes above `W` has no row, and the
//! store would answer "unknown" for it.

use std::sync::atomic::{AtomicI64, Ordering};

/// What this process knows of the highest slot a row holds, for [`SlotBound`].
///
/// Raised, never lowered, by the writes this process makes and by reads of the database's own
/// figure. "Unknown" is `i64::MAX`, which bounds nothing.
#[derive(Debug)]
pub struct HighWater {
    slot: AtomicI64,
}

impl HighWater {
    /// A mark that bounds nothing until [`set`](Self::set) or [`raise`](Self::raise) says more.
    pub fn unknown() -> Self {
        Self {
            slot: AtomicI64::new(i64::MAX),
        }
    }

    /// A mark below every slot: nothing is known to exist yet.
    pub fn empty() -> Self {
        Self {
            slot: AtomicI64::new(-1),
        }
    }

    /// The mark as last raised.
    pub fn get(&self) -> i64 {
        self.slot.load(Ordering::SeqCst)
    }

    /// Raises the mark to `slot` if it is below.
    pub fn raise(&self, slot: i64) {
        self.slot.fetch_max(slot, Ordering::SeqCst);
    }

    /// Sets the mark (when it is read whole, with no write in between).
    pub fn set(&self, slot: i64) {
        self.slot.store(slot, Ordering::SeqCst);
    }
}

/// What bounds the IDs that codes with a row decode to, as this node knows it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotBound {
    /// Nothing: rows are found by their code (PostgreSQL's code layout, or a layout under
    /// another code key), so no code may be refused without the store.
    None,
    /// Every row that decodes is at or below this slot, now: this process is the store's only
    /// writer and raises it before each such write commits (embedded SQLite).
    Exact(i64),
    /// Every row that decodes was at or below this slot when it was last read or written here;
    /// other nodes may have written above it since, so only a fresh read
    /// ([`LinkStore::read_high_water`](super::LinkStore::read_high_water)) can refuse a code
    /// above it (PostgreSQL).
    Stale(i64),
}
