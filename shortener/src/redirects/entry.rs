//! A cached link in one allocation: its fields, then its URL.
//!
//! A plain link costs the cache this one block and nothing else: its tenant and domain are one
//! pointer to a value shared by every link of the pair ([`super::places::Places`]), and the
//! rare parts (visit limit, password, compiled rules, a URL over 4 KiB) sit behind one optional
//! box. The block is an `Arc` of the fields followed by the URL's bytes in an array of the
//! smallest of a few sizes that holds it: the sizes are chosen so that the block is exactly one
//! of the allocator's size classes, so a block wastes no more than an allocation of the exact
//! size would. Handing an entry out of the cache costs one atomic increment.

use super::places::Place;
use super::routing::Routing;
use crate::domain::PasswordHash;
use crate::visits::clicks::{Holder, PendingClicks};
use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A link's visit limit as this node enforces it: the human visits counted so far (those
/// stored when the entry was made, this node's not yet flushed, and those served from the entry
/// since) against the limit. Shared by every hit of one cache entry.
#[derive(Debug)]
pub struct VisitLimit {
    max: u64,
    counted: AtomicU64,
}

impl VisitLimit {
    /// A limit of `max` human visits of which `counted` are known to have happened.
    pub fn new(max: u64, counted: u64) -> Self {
        Self {
            max,
            counted: AtomicU64::new(counted),
        }
    }

    /// Counts one human visit: false if the limit was reached before it (the visit is refused).
    pub fn take(&self) -> bool {
        self.counted.fetch_add(1, Ordering::AcqRel) < self.max
    }

    /// Whether the limit is reached (nothing more is served).
    pub fn spent(&self) -> bool {
        self.counted.load(Ordering::Acquire) >= self.max
    }
}

impl PartialEq for VisitLimit {
    fn eq(&self, other: &Self) -> bool {
        self.max == other.max
            && self.counted.load(Ordering::Relaxed) == other.counted.load(Ordering::Relaxed)
    }
}

impl Eq for VisitLimit {}

/// The parts of a link few links have, boxed so the others pay one pointer for them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Rare {
    /// Its visit limit, if it has one.
    pub limit: Option<Arc<VisitLimit>>,
    /// The hash of its password, if it is protected: the target is only ever answered after
    /// the password is checked against it.
    pub password: Option<Arc<PasswordHash>>,
    /// Its redirect rules, compiled.
    pub routing: Option<Arc<Routing>>,
    /// Its URL, when longer than a block holds ([`LONGEST_INLINE`]).
    pub long_url: Option<Box<str>>,
}

impl Rare {
    /// The box, or `None` when the link has none of the rare parts.
    pub fn boxed(self) -> Option<Box<Rare>> {
        (self != Rare::default()).then(|| Box::new(self))
    }

    /// Heap bytes the box holds (itself and what only it points to).
    fn bytes(&self) -> usize {
        size_of::<Rare>()
            + self
                .limit
                .as_ref()
                .map_or(0, |_| 16 + size_of::<VisitLimit>())
            + self
                .password
                .as_ref()
                .map_or(0, |p| 16 + size_of::<PasswordHash>() + p.as_stored().len())
            + self
                .routing
                .as_ref()
                .map_or(0, |r| 16 + size_of::<Routing>() + r.weight())
            + self.long_url.as_ref().map_or(0, |u| u.len())
    }
}

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A link (live, or gone if deleted or disabled).
    Link,
    /// A link to a domain on the operator's blocklist (no URL is kept).
    Blocked,
}

/// An entry's fields, as made (the block adds its reference count and the URL).
#[derive(Debug)]
pub(super) struct Fields {
    /// When it was stored: nanoseconds since the cache's epoch.
    pub(super) at: u64,
    /// The target rules' generation it was made under (its low 32 bits).
    pub(super) generation: u32,
    /// The URL's length, with [`WATCHED`], [`GONE`] and [`BLOCKED`] as its top bits.
    meta: u32,
    /// When it expires, in microseconds since 1970 (`i64::MAX`: never).
    expires_at: i64,
    /// Its tenant and branded domain.
    place: Arc<Place>,
    /// Its visit limit, password and rules, if it has any.
    rare: Option<Box<Rare>>,
    /// Visits served from it that no click flush has taken yet (of a link without a visit
    /// limit: a limited link's are counted by code, where its next read finds them).
    clicks: PendingClicks,
}

/// The entry was read with no change to its code reported meanwhile, so every later change
/// is one the cache hears of: it stays fresh while the cache's changes are confirmed
/// (`LinkCache`, "Changes confirmed").
const WATCHED: u32 = 1 << 29;
const GONE: u32 = 1 << 30;
const BLOCKED: u32 = 1 << 31;
const LENGTH: u32 = WATCHED - 1;

impl Fields {
    /// A link's fields (`gone`: deleted or disabled), stored at `at` under `generation`.
    pub(super) fn new(
        kind: Kind,
        gone: bool,
        expires_at: Option<DateTime<Utc>>,
        place: Arc<Place>,
        rare: Option<Box<Rare>>,
    ) -> Self {
        let flags = match kind {
            Kind::Link if gone => GONE,
            Kind::Link => 0,
            Kind::Blocked => BLOCKED,
        };
        Self {
            at: 0,
            generation: 0,
            meta: flags,
            expires_at: expires_at.map_or(i64::MAX, |t| t.timestamp_micros()),
            place,
            rare,
            clicks: PendingClicks::default(),
        }
    }

    /// Marks the entry as read with no change to its code reported meanwhile ([`WATCHED`]).
    pub(super) fn watch(&mut self) {
        self.meta |= WATCHED;
    }

    /// Whether it was read with no change to its code reported meanwhile ([`WATCHED`]).
    pub(super) fn watched(&self) -> bool {
        self.meta & WATCHED != 0
    }

    /// Whether the link has a visit limit.
    pub(super) fn limited(&self) -> bool {
        self.rare.as_ref().is_some_and(|rare| rare.limit.is_some())
    }
}

/// An entry's block: its fields, then its URL's bytes (`url`: an array of one of the sizes in
/// [`block`], of which the first `meta & LENGTH` bytes are the URL).
struct Block<T: ?Sized> {
    fields: Fields,
    url: T,
}

/// A cached link: a shared handle to its one block.
#[derive(Clone)]
pub struct Entry(Arc<Block<[u8]>>);

/// The longest URL a block holds; a longer one is kept in the rare parts' box.
pub const LONGEST_INLINE: usize = 4032;

/// The block of `fields` with `url` in an array of `N` bytes.
fn sized<const N: usize>(fields: Fields, url: &[u8]) -> Arc<Block<[u8]>> {
    let mut bytes = [0; N];
    bytes[..url.len()].copy_from_slice(url);
    Arc::new(Block { fields, url: bytes })
}

/// Picks the smallest array of the listed sizes that holds the URL. Each size makes the whole
/// allocation (two counts, the fields, the array: 64 + N bytes) one of the allocator's size
/// classes: 64, 80, 96, 112, 128, 160, ... 4096 bytes (four classes per doubling).
macro_rules! blocks {
    ($($n:literal),*) => {
        /// The block of `fields` and `url` (at most [`LONGEST_INLINE`] bytes).
        fn block(fields: Fields, url: &[u8]) -> Arc<Block<[u8]>> {
            $(if url.len() <= $n {
                return sized::<$n>(fields, url);
            })*
            unreachable!("a URL over LONGEST_INLINE is kept in the rare parts")
        }
    };
}

blocks!(
    0, 16, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 448, 576, 704, 832, 960, 1216, 1472, 1728,
    1984, 2496, 3008, 3520, 4032
);

impl Entry {
    /// The entry of `fields` and `url`; `None` if the URL is longer than an entry holds (half
    /// a gigabyte: no stored URL comes near it).
    pub(super) fn new(mut fields: Fields, url: &str) -> Option<Entry> {
        let len = u32::try_from(url.len()).ok().filter(|&l| l <= LENGTH)?;
        if url.len() <= LONGEST_INLINE {
            fields.meta |= len;
            return Some(Entry(block(fields, url.as_bytes())));
        }
        let mut rare = fields.rare.take().map_or_else(Rare::default, |r| *r);
        rare.long_url = Some(url.into());
        fields.rare = Some(Box::new(rare));
        Some(Entry(block(fields, &[])))
    }

    pub(super) fn fields(&self) -> &Fields {
        &self.0.fields
    }

    /// What it is.
    pub fn kind(&self) -> Kind {
        if self.fields().meta & BLOCKED != 0 {
            Kind::Blocked
        } else {
            Kind::Link
        }
    }

    /// Whether it was deleted or disabled.
    pub fn gone(&self) -> bool {
        self.fields().meta & GONE != 0
    }

    /// The target URL (checked as a `Location` header value when the entry was made; empty
    /// for a blocked link).
    pub fn url(&self) -> &str {
        // Made from a `str`'s bytes, so this cannot fail.
        std::str::from_utf8(self.url_bytes()).unwrap_or_default()
    }

    /// The target URL's bytes: what a redirect sends, read without checking them as UTF-8
    /// again (a check that would cost a hit as much as making its `Location` does).
    pub fn url_bytes(&self) -> &[u8] {
        if let Some(long) = self.rare().long_url.as_deref() {
            return long.as_bytes();
        }
        let len = (self.fields().meta & LENGTH) as usize;
        &self.0.url[..len]
    }

    /// Whether it expires at all.
    pub fn expires(&self) -> bool {
        self.fields().expires_at != i64::MAX
    }

    /// Whether it has expired by `now`.
    pub fn expired(&self, now: DateTime<Utc>) -> bool {
        let at = self.fields().expires_at;
        at != i64::MAX && at <= now.timestamp_micros()
    }

    /// When it expires, if ever.
    pub fn expires_at(&self) -> Option<DateTime<Utc>> {
        let at = self.fields().expires_at;
        (at != i64::MAX)
            .then(|| DateTime::from_timestamp_micros(at))
            .flatten()
    }

    /// Its tenant.
    pub fn tenant(&self) -> &Arc<str> {
        &self.fields().place.tenant
    }

    /// The branded domain it answers on (`None`: the default domain).
    pub fn domain(&self) -> Option<&str> {
        self.fields().place.domain.as_deref()
    }

    /// Its visit limit, password and rules (all `None` for a plain link).
    pub fn rare(&self) -> &Rare {
        static NONE: Rare = Rare {
            limit: None,
            password: None,
            routing: None,
            long_url: None,
        };
        self.fields().rare.as_deref().unwrap_or(&NONE)
    }

    /// The block of a plain link with an average URL (60 bytes).
    pub(super) fn typical_bytes() -> u64 {
        (ARC_COUNTS + size_of::<Fields>() + 64) as u64
    }

    /// Heap bytes this entry holds alone: its block and its rare parts' box (the place it
    /// shares with other links is counted once, by [`super::places::Places`]).
    pub fn heap_bytes(&self) -> usize {
        ARC_COUNTS
            + size_of_val::<Block<[u8]>>(&self.0)
            + self.fields().rare.as_ref().map_or(0, |r| r.bytes())
    }
}

/// A cached link holds the click counts of the visits served from it.
impl Holder for Entry {
    fn pending(&self) -> &PendingClicks {
        &self.fields().clicks
    }

    fn bytes(&self) -> usize {
        self.heap_bytes()
    }
}

/// The two counts an `Arc` allocation starts with.
const ARC_COUNTS: usize = 2 * size_of::<usize>();

/// Entries are equal when they say the same thing (when and under which generation they
/// were stored is not part of it).
impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (self.fields(), other.fields());
        a.meta == b.meta
            && a.expires_at == b.expires_at
            && a.place == b.place
            && self.rare() == other.rare()
            && self.url_bytes() == other.url_bytes()
    }
}

impl Eq for Entry {}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("kind", &self.kind())
            .field("url", &self.url())
            .field("gone", &self.gone())
            .field("expires_at", &self.expires_at())
            .field("tenant", self.tenant())
            .field("domain", &self.domain())
            .field("rare", self.rare())
            .finish()
    }
}

#[cfg(test)]
mod tests;
