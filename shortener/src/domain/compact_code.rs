//! Codes as compact map keys: the redirect cache's and the pending click counts'.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Bytes of a code kept inside the key itself; generated codes are far shorter.
pub(crate) const INLINE: usize = 22;

/// A code as a map key. Codes of up to `INLINE` (22) bytes are stored in the key, so a lookup
/// compares them without following a pointer to the heap (on a hit for a code outside the
/// hottest few thousand, that pointer is a cache miss) and making one allocates nothing;
/// longer codes (aliases) live on the heap. Hashes and compares as the bytes of the code it
/// holds, so maps keyed by it are searched with `code.as_bytes()`: a lookup never re-checks the
/// stored bytes as UTF-8, which done on every compare and hash is a cost on the hottest path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactCode(Repr);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Repr {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Arc<str>),
}

impl CompactCode {
    /// The key of `code`.
    pub fn new(code: &str) -> CompactCode {
        if code.len() > INLINE {
            return CompactCode(Repr::Heap(Arc::from(code)));
        }
        let mut bytes = [0; INLINE];
        bytes[..code.len()].copy_from_slice(code.as_bytes());
        CompactCode(Repr::Inline {
            len: code.len() as u8,
            bytes,
        })
    }

    /// Heap bytes the key holds besides itself: none for a code kept inline, the shared
    /// string's allocation (its two counts and the bytes, rounded up to the allocator's
    /// 16-byte steps) for a longer one.
    pub fn heap_bytes(&self) -> usize {
        match &self.0 {
            Repr::Inline { .. } => 0,
            Repr::Heap(code) => (16 + code.len()).next_multiple_of(16),
        }
    }

    /// The code's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Repr::Heap(code) => code.as_bytes(),
        }
    }

    /// The code.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline { .. } => std::str::from_utf8(self.as_bytes()).expect("made from a str"),
            Repr::Heap(code) => code,
        }
    }
}

/// Hashes exactly as `[u8]` does, so a lookup by `code.as_bytes()` finds the key.
impl Hash for CompactCode {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state)
    }
}

impl Borrow<[u8]> for CompactCode {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

/// Orders as the codes' text does (byte order is `str` order), without checking the bytes
/// again: sorting a flush's codes compares keys in place, never following a pointer for a
/// short code.
impl Ord for CompactCode {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl PartialOrd for CompactCode {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_and_read_back_as_their_text() {
        let long = "an-alias-longer-than-the-inline-key-holds";
        let mut codes = vec!["b", "a", "", "ab", long, &long[..INLINE], "Z", "aa"];
        let mut keys: Vec<CompactCode> = codes.iter().map(|c| CompactCode::new(c)).collect();
        codes.sort_unstable();
        keys.sort_unstable();
        let sorted: Vec<&str> = keys.iter().map(CompactCode::as_str).collect();
        assert_eq!(sorted, codes);
        let borrowed: &[u8] = keys[1].borrow();
        assert_eq!(borrowed, codes[1].as_bytes());
    }

    /// A map keyed by `CompactCode` is searched with the code's bytes: `Hash`, `Eq` and `Borrow`
    /// agree with `[u8]` for every length around the inline limit and for non-ASCII text.
    #[test]
    fn maps_keyed_by_it_are_searched_by_text() {
        let codes = [
            String::new(),
            "a".repeat(INLINE - 1),
            "a".repeat(INLINE),
            "a".repeat(INLINE + 1),
            "é-ü-ß".to_string(),
            "ü".repeat(INLINE),
        ];
        let map: std::collections::HashMap<CompactCode, usize> = codes
            .iter()
            .enumerate()
            .map(|(i, c)| (CompactCode::new(c), i))
            .collect();
        assert_eq!(map.len(), codes.len(), "no two codes share a key");
        for (i, code) in codes.iter().enumerate() {
            assert_eq!(map.get(code.as_bytes()), Some(&i), "{code:?}");
            assert_eq!(CompactCode::new(code).as_str(), code);
        }
        assert_eq!(map.get("a".repeat(INLINE + 2).as_bytes()), None);
        // A prefix of a stored code is not that code.
        assert_eq!(map.get(&b"a".repeat(INLINE - 2)[..]), None);
    }
}
