//! A leased block of IDs.

/// The half-open ID range `start..end` of one lease, owned by one holder alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Block {
    /// The first ID of the block.
    pub start: u64,
    /// One past the last ID (exclusive).
    pub end: u64,
}

impl Block {
    /// A block of the IDs `start..end`; `None` when the range is empty or inverted.
    pub fn new(start: u64, end: u64) -> Option<Self> {
        (start < end).then_some(Self { start, end })
    }

    /// How many IDs the block holds.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Always false: a block is never empty (see [`Block::new`]).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether `id` lies in this block.
    pub fn contains(&self, id: u64) -> bool {
        (self.start..self.end).contains(&id)
    }

    /// Whether the two blocks share any ID.
    pub fn overlaps(&self, other: &Block) -> bool {
        self.start < other.end && other.start < self.end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_half_open_and_never_empty() {
        assert_eq!(Block::new(5, 5), None);
        assert_eq!(Block::new(6, 5), None);
        let b = Block::new(10, 20).expect("valid");
        assert_eq!(b.len(), 10);
        assert!(b.contains(10) && b.contains(19) && !b.contains(20) && !b.contains(9));
    }

    #[test]
    fn adjacent_blocks_do_not_overlap() {
        let a = Block::new(0, 10).expect("valid");
        let b = Block::new(10, 20).expect("valid");
        let c = Block::new(19, 30).expect("valid");
        assert!(!a.overlaps(&b) && !b.overlaps(&a));
        assert!(b.overlaps(&c) && c.overlaps(&b));
    }
}
