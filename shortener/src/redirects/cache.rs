//! The redirect cache in front of the store.
//!
//! Hot codes are answered from memory: found links for up to the positive TTL, unknown codes for
//! a short negative TTL, each kind under its own byte bound (unknown codes in [`Negative`], so
//! a storm of them never evicts a link). Deletes are pushed to every node (PostgreSQL
//! `LISTEN/NOTIFY`, the store's change feed); the TTL bounds staleness when a notification is
//! missed, and a link no reported change can have reached is not read again while the reports
//! are confirmed ([`super::changes`]). A link is one allocation ([`Entry`]: its fields, then
//! its URL, checked as a `Location` header value once when the entry is made), weighed at what
//! it really costs, so the bound is one on memory: see docs/shortener.md, "What a cached link
//! costs".

use super::changes::{Changes, Seen};
use super::entry::{Entry, Fields, Kind, Rare};
use super::negative::Negative;
use super::places::Places;
use super::weigh::{GHOSTS, Held, key_heap, slot_cost};
use crate::domain::CompactCode;
use crate::links::LinkChanges;
use crate::metrics::{Footprint, MemoryGauges};
use chrono::{DateTime, Utc};
use quick_cache::sync::{Cache, DefaultLifecycle};
use quick_cache::{DefaultHashBuilder, OptionsBuilder, Weighter};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub use super::entry::VisitLimit;
use std::time::{Duration, Instant};

/// What the cache knows about a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cached {
    /// A link (live, gone or blocked).
    Found(Entry),
    /// No such code (cached briefly).
    Missing,
}

/// What the store said about a code, as it is handed to the cache.
#[derive(Debug)]
pub enum Answer {
    /// A link.
    Link(NewLink),
    /// A link to a domain on the operator's blocklist, on its branded domain (`None`: the
    /// default domain), of its tenant.
    Blocked {
        /// Its tenant.
        tenant: String,
        /// Its branded domain.
        domain: Option<String>,
    },
    /// No such code.
    Missing,
}

/// A link as read from the store, to be cached.
#[derive(Debug)]
pub struct NewLink {
    /// The target, already checked as a `Location` header value.
    pub url: String,
    /// When it expires, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// Whether it was deleted or disabled.
    pub gone: bool,
    /// Its tenant.
    pub tenant: String,
    /// The branded domain it answers on (`None`: the default domain).
    pub domain: Option<String>,
    /// Its visit limit, password and rules.
    pub rare: Rare,
}

/// Sizes and lifetimes of the cache.
#[derive(Debug, Clone, Copy)]
pub struct CacheConfig {
    /// Upper bound of the memory held by cached links, in bytes.
    pub max_bytes: u64,
    /// Upper bound of the memory held by unknown codes, in bytes.
    pub negative_max_bytes: u64,
    /// How long a found link is kept.
    pub ttl: Duration,
    /// How long an unknown code is remembered.
    pub negative_ttl: Duration,
    /// How long a link with a visit limit is kept (about a click flush interval, so the
    /// visits other nodes served reach it soon).
    pub limited_ttl: Duration,
}

/// A link's key and value.
const LINK_SLOT: usize = size_of::<CompactCode>() + size_of::<Entry>();

/// One link's fixed cost: its slot and its share of the index.
const FIXED: u64 = slot_cost(LINK_SLOT);

/// Nanoseconds from `epoch` to `now` (zero if `now` is earlier).
pub(super) fn nanos_since(epoch: Instant, now: Instant) -> u64 {
    u64::try_from(now.saturating_duration_since(epoch).as_nanos()).unwrap_or(u64::MAX)
}

/// Weighs a link by what it costs: its slot, its block (fields and URL), its rare parts, and
/// its key's own allocation if the code is too long to be held inline.
#[derive(Debug, Clone, Copy)]
struct Bytes;

impl Weighter<CompactCode, Entry> for Bytes {
    fn weight(&self, code: &CompactCode, entry: &Entry) -> u64 {
        FIXED + key_heap(code) + entry.heap_bytes() as u64
    }
}

/// The redirect cache: a sharded, weight-bounded S3-FIFO cache (quick_cache) of links, chosen
/// for cheap reads on the redirect path, beside one of unknown codes; lifetimes are checked on
/// read.
#[derive(Clone)]
pub struct LinkCache {
    entries: Arc<Cache<CompactCode, Entry, Bytes>>,
    negative: Arc<Negative>,
    places: Arc<Places>,
    max_bytes: u64,
    epoch: Instant,
    ttl: u64,
    limited_ttl: u64,
    generation: Arc<AtomicU64>,
    changes: Arc<Changes>,
}

/// What the cache knew when a read of the store for a code began: the target rules'
/// generation and the changes reported of the code ([`LinkCache::ticket`]).
#[derive(Debug, Clone, Copy)]
pub struct Ticket {
    generation: u64,
    seen: Seen,
    /// When it was taken (nanoseconds from the cache's epoch): a "missing" answer is
    /// remembered from then, not from when the read came back, so a slow read does not
    /// lengthen its life past the negative lifetime.
    at: u64,
}

impl LinkCache {
    /// An empty cache whose answers are stale once `generation` (the target rules',
    /// bumped when the blocklist changes) moves past the one they were made under.
    pub fn new(config: CacheConfig, generation: Arc<AtomicU64>) -> Self {
        // An estimate of the entry count sizes the shards and bounds the ghosts: a link with
        // an average URL (60 bytes) weighs about this much.
        let typical = FIXED + Entry::typical_bytes();
        let estimated = usize::try_from(config.max_bytes / typical)
            .unwrap_or(usize::MAX)
            .clamp(16, 1 << 24);
        let options = OptionsBuilder::new()
            .estimated_items_capacity(estimated)
            .weight_capacity(config.max_bytes.max(1))
            .ghost_allocation(GHOSTS)
            .build()
            .expect("valid cache options");
        let epoch = Instant::now();
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Self {
            entries: Arc::new(Cache::with_options(
                options,
                Bytes,
                DefaultHashBuilder::default(),
                DefaultLifecycle::default(),
            )),
            negative: Arc::new(Negative::new(
                config.negative_max_bytes,
                config.negative_ttl,
                epoch,
            )),
            places: Arc::default(),
            max_bytes: config.max_bytes,
            epoch,
            ttl: nanos(config.ttl),
            limited_ttl: nanos(config.limited_ttl.min(config.ttl)),
            generation,
            changes: Arc::default(),
        }
    }

    /// What the cache knows of `code` now: take it before the store is read, and cache the
    /// answer with it ([`LinkCache::put_at`]), so that an answer that raced a blocklist change
    /// is stale, and one that raced a reported change to the code lives its lifetime only.
    pub fn ticket(&self, code: &str) -> Ticket {
        Ticket {
            generation: self.generation.load(Ordering::Acquire),
            seen: self.changes.seen(code),
            at: nanos_since(self.epoch, Instant::now()),
        }
    }

    /// Every change to the store is made by this node and reported to the cache as it is made
    /// (the embedded store: the node is its file's only writer), so a watched link is never
    /// read again for its lifetime alone.
    pub fn sees_every_change(&self) {
        self.changes.confirm_always();
    }

    /// Every change committed anywhere before `through` has been reported to the cache (the
    /// change feed's probe came back): watched links are fresh for a lifetime from then.
    pub fn confirm(&self, through: Instant) {
        self.changes.confirm(nanos_since(self.epoch, through));
    }

    /// How long ago every change was last confirmed reported ([`LinkCache::confirm`]): zero
    /// where the node makes every change, the cache's age before the first confirmation.
    pub fn confirmed_age(&self) -> Duration {
        match self.changes.confirmed() {
            u64::MAX => Duration::ZERO,
            nanos => self
                .epoch
                .elapsed()
                .saturating_sub(Duration::from_nanos(nanos)),
        }
    }

    /// The cached answer for `code`, if any and still fresh at `now` (a time the caller has
    /// already read; entries stored after it count as fresh).
    pub fn get(&self, code: &str, now: Instant) -> Option<Cached> {
        let Some(entry) = self.entries.get(code.as_bytes()) else {
            return self.negative.holds(code, now).then_some(Cached::Missing);
        };
        let fields = entry.fields();
        let lifetime = if entry.rare().limit.is_some() {
            self.limited_ttl
        } else {
            self.ttl
        };
        // A watched link is as fresh as the cache's record of changes, if that is later.
        let since = if fields.watched() {
            fields.at.max(self.changes.confirmed())
        } else {
            fields.at
        };
        if nanos_since(self.epoch, now).saturating_sub(since) < lifetime
            && fields.generation == self.generation.load(Ordering::Acquire) as u32
        {
            Some(Cached::Found(entry))
        } else {
            self.entries.remove(code.as_bytes());
            None
        }
    }

    /// Remembers what the store said about `code`, as if the store had been read just now.
    pub fn put(&self, code: &str, answer: Answer) -> Option<Cached> {
        self.put_at(code, answer, self.ticket(code))
    }

    /// Remembers what the store said about `code`, with the [`Ticket`] taken before the store
    /// was asked, and hands it back as a cache hit would; `None` if it cannot be cached (a URL
    /// over half a gigabyte). A link with a visit limit is never watched: the visits other
    /// nodes count reach it only when it is read again.
    ///
    /// An answer read while a change to its code (or a clear) was reported is handed back but
    /// not kept, found or not found: it may be older than the change, and this node knows of
    /// the change, so it must not answer from it again (a link its own create or delete just
    /// changed included).
    pub fn put_at(&self, code: &str, answer: Answer, ticket: Ticket) -> Option<Cached> {
        let raced = |cache: &Self| !cache.changes.unchanged_since(code, ticket.seen);
        let (fields, url) = match answer {
            Answer::Missing => {
                if !raced(self) {
                    self.entries.remove(code.as_bytes());
                    self.negative.put(code, ticket.at);
                    // A change reported between the check and the put removed nothing.
                    if raced(self) {
                        self.negative.invalidate(code);
                    }
                }
                return Some(Cached::Missing);
            }
            Answer::Blocked { tenant, domain } => {
                let place = self.places.place(&tenant, domain.as_deref());
                let fields = Fields::new(Kind::Blocked, false, None, place, None);
                (fields, String::new())
            }
            Answer::Link(link) => {
                let place = self.places.place(&link.tenant, link.domain.as_deref());
                let rare = link.rare.boxed();
                let fields = Fields::new(Kind::Link, link.gone, link.expires_at, place, rare);
                (fields, link.url)
            }
        };
        let mut fields = fields;
        fields.at = nanos_since(self.epoch, Instant::now());
        fields.generation = ticket.generation as u32;
        if !fields.limited() {
            fields.watch();
        }
        let entry = Entry::new(fields, &url)?;
        if raced(self) {
            return Some(Cached::Found(entry));
        }
        self.negative.invalidate(code);
        self.entries.insert(CompactCode::new(code), entry.clone());
        // A change reported between the check above and the insert removed nothing (the entry
        // was not in yet), so the entry may be older than it: drop it.
        if raced(self) {
            self.entries.remove(code.as_bytes());
        }
        Some(Cached::Found(entry))
    }

    /// Forgets `code` (it was created, deleted or changed).
    pub fn invalidate(&self, code: &str) {
        // Counted first, so that a read that raced the change cannot cache a watched answer.
        self.changes.changed(code);
        self.entries.remove(code.as_bytes());
        self.negative.invalidate(code);
    }

    /// Forgets everything (notifications may have been missed).
    pub fn clear(&self) {
        self.changes.cleared();
        self.entries.clear();
        self.negative.clear();
    }

    /// Number of cached entries (links and unknown codes).
    pub fn len(&self) -> u64 {
        self.entries.len() as u64 + self.negative.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the links hold: the cache's tables as allocated, each link's block, rare parts
    /// and long key, and the places they share.
    pub fn bytes(&self) -> u64 {
        let links = Held {
            memory: self.entries.memory_used(),
            shards: self.entries.num_shards(),
            weight: self.entries.weight(),
            len: self.entries.len(),
        }
        .bytes(LINK_SLOT, FIXED);
        links + self.places.bytes() as u64
    }

    /// Reports the links' and the unknown codes' memory as `redirect_cache` and
    /// `negative_cache` in `gauges`.
    pub fn register_memory(&self, gauges: &MemoryGauges) {
        gauges.register_footprint("redirect_cache", Arc::new(self.clone()));
        gauges.register_footprint("negative_cache", Arc::clone(&self.negative) as _);
    }
}

impl Footprint for LinkCache {
    fn bytes(&self) -> u64 {
        LinkCache::bytes(self)
    }

    fn budget(&self) -> u64 {
        self.max_bytes
    }
}

impl LinkChanges for LinkCache {
    fn changed(&self, code: &str) {
        self.invalidate(code);
    }
}

#[cfg(test)]
mod tests;
