//! The high-water mark of the links table's slots: what lets a redirect refuse a code no row
//! can hold without reading the store (docs/design.md, I9).
//!
//! Every row a code that decodes can be found at is found through the ID it decodes to: on
//! PostgreSQL (slot layout) only at `slot = decode(code)`, on SQLite at the rowid of that ID or
//! in the named-code index (an imported legacy code, or a row another key made). So if every
//! such row's decoded ID is at most `W`, a code that decodes above `W` has no row, and the
//! store would answer "unknown" for it.

use codespace::CodeSpace;
use codespace::shape::{CodeKind, classify};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// What this process knows of the highest slot a row holds, for [`SlotBound`], and whether a
/// named row holds a code of generated shape that decodes to no ID ([`undecodable`]).
///
/// Raised, never lowered, by the writes this process makes and by reads of the database's own
/// figures. "Unknown" is `i64::MAX` (and undecodable codes possible), which bounds nothing.
#[derive(Debug)]
pub struct HighWater {
    slot: AtomicI64,
    undecodable: AtomicBool,
}

impl HighWater {
    /// A mark that bounds nothing until [`set`](Self::set) or [`raise`](Self::raise) says more.
    pub fn unknown() -> Self {
        Self {
            slot: AtomicI64::new(i64::MAX),
            undecodable: AtomicBool::new(true),
        }
    }

    /// A mark below every slot: nothing is known to exist yet.
    pub fn empty() -> Self {
        Self {
            slot: AtomicI64::new(-1),
            undecodable: AtomicBool::new(false),
        }
    }

    /// The mark as last raised.
    pub fn get(&self) -> i64 {
        self.slot.load(Ordering::SeqCst)
    }

    /// The mark and what is known of undecodable codes, as last raised.
    pub fn mark(&self) -> Mark {
        Mark {
            slot: self.get(),
            undecodable: self.undecodable.load(Ordering::SeqCst),
        }
    }

    /// Raises the mark to `slot` if it is below.
    pub fn raise(&self, slot: i64) {
        self.slot.fetch_max(slot, Ordering::SeqCst);
    }

    /// Raises the mark to what `mark` says, if it is below (an undecodable code once known
    /// stays known).
    pub fn raise_to(&self, mark: Mark) {
        self.raise(mark.slot);
        if mark.undecodable {
            self.note_undecodable();
        }
    }

    /// Records that a named row holds an undecodable code (before the write that stores it
    /// commits).
    pub fn note_undecodable(&self) {
        self.undecodable.store(true, Ordering::SeqCst);
    }

    /// Sets the mark (when it is read whole, with no write in between).
    pub fn set(&self, mark: Mark) {
        self.slot.store(mark.slot, Ordering::SeqCst);
        self.undecodable.store(mark.undecodable, Ordering::SeqCst);
    }
}

/// Whether `code` has the shape of a generated code in `space` (base62, of the base length up
/// to the longest) yet decodes to no ID a slot can hold: only an imported legacy code can be
/// such a code, found by its text.
pub fn undecodable(space: &CodeSpace, code: &str) -> bool {
    classify(code, space.length()) == Some(CodeKind::Generated)
        && space
            .decode(code)
            .ok()
            .and_then(|id| i64::try_from(id).ok())
            .is_none()
}

/// The highest slot a row holds, and whether any named row holds an [`undecodable`] code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// Every row whose code decodes is at or below this slot.
    pub slot: i64,
    /// Some named row holds a code of generated shape that decodes to no ID; when none does, a
    /// code of that shape that does not decode has no row.
    pub undecodable: bool,
}

/// What bounds the IDs that codes with a row decode to, as this node knows it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotBound {
    /// Nothing: rows are found by their code (PostgreSQL's code layout, or a layout under
    /// another code key), so no code may be refused without the store.
    None,
    /// Every row that decodes is at or below this mark, now: this process is the store's only
    /// writer and raises it before each such write commits (embedded SQLite).
    Exact(Mark),
    /// Every row that decodes was at or below this mark when it was last read or written here;
    /// other nodes may have written above it since, so only a fresh read
    /// ([`LinkStore::read_high_water`](super::LinkStore::read_high_water)) can refuse a code
    /// above it (PostgreSQL), or one that does not decode.
    Stale(Mark),
}
