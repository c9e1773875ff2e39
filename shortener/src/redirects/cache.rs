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
                    self.negative.put(code);
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
mod tests {
    use super::*;
    use crate::domain::compact_code::INLINE;

    fn cache(max_bytes: u64, ttl: Duration, negative_ttl: Duration) -> LinkCache {
        LinkCache::new(
            CacheConfig {
                max_bytes,
                negative_max_bytes: 1 << 20,
                ttl,
                negative_ttl,
                limited_ttl: ttl,
            },
            Arc::default(),
        )
    }

    fn link(url: &str) -> Answer {
        Answer::Link(NewLink {
            url: url.to_owned(),
            expires_at: None,
            gone: false,
            tenant: "default".into(),
            domain: None,
            rare: Rare::default(),
        })
    }

    /// The URL a cached answer redirects to (`Some("")` for a blocked link), `None` if the
    /// code is unknown or not cached.
    fn url(cached: Option<Cached>) -> Option<String> {
        match cached? {
            Cached::Found(entry) => Some(entry.url().to_owned()),
            Cached::Missing => None,
        }
    }

    #[test]
    fn found_and_missing_entries_are_kept_apart_and_invalidated() {
        let minute = Duration::from_secs(60);
        let cache = cache(1 << 20, minute, minute);
        cache.put("abc", link("https://example.com/"));
        cache.put("zzz", Answer::Missing);
        assert_eq!(
            url(cache.get("abc", Instant::now())).as_deref(),
            Some("https://example.com/")
        );
        assert_eq!(cache.get("zzz", Instant::now()), Some(Cached::Missing));
        assert_eq!(cache.get("other", Instant::now()), None);
        // A code found after it was unknown (just created) is no longer unknown, and back.
        cache.put("zzz", link("https://example.com/z"));
        assert!(url(cache.get("zzz", Instant::now())).is_some());
        cache.put("zzz", Answer::Missing);
        assert_eq!(cache.get("zzz", Instant::now()), Some(Cached::Missing));
        cache.invalidate("abc");
        cache.invalidate("zzz");
        assert_eq!(cache.get("abc", Instant::now()), None);
        assert_eq!(cache.get("zzz", Instant::now()), None);
    }

    #[test]
    fn entries_past_their_lifetime_read_as_absent() {
        // Lifetimes are wall-clock durations, so this test lets real time pass.
        let cache = cache(
            1 << 20,
            Duration::from_millis(200),
            Duration::from_millis(20),
        );
        cache.put("abc", link("https://example.com/"));
        cache.put("zzz", Answer::Missing);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(
            cache.get("zzz", Instant::now()),
            None,
            "the negative entry outlived its lifetime"
        );
        assert!(
            url(cache.get("abc", Instant::now())).is_some(),
            "the link expired too early"
        );
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            cache.get("abc", Instant::now()),
            None,
            "the link outlived its lifetime"
        );
    }

    #[test]
    fn lifetimes_are_checked_against_the_callers_clock() {
        let (ttl, negative_ttl) = (Duration::from_secs(60), Duration::from_secs(5));
        let cache = cache(1 << 20, ttl, negative_ttl);
        let before = Instant::now();
        cache.put("abc", link("https://example.com/"));
        cache.put("zzz", Answer::Missing);
        let after = Instant::now();
        // A time read before the entry was stored (a request that raced the insert) is fresh.
        assert!(url(cache.get("abc", before)).is_some());
        assert_eq!(cache.get("zzz", before), Some(Cached::Missing));
        // Each lifetime is its own: the negative one ends first.
        let between = after + negative_ttl;
        assert_eq!(cache.get("zzz", between), None);
        assert!(url(cache.get("abc", between)).is_some());
        assert_eq!(cache.get("abc", after + ttl), None);
        // An expired entry is dropped, not just hidden.
        assert_eq!(cache.get("abc", after), None);
    }

    #[test]
    fn a_link_with_a_visit_limit_is_kept_for_the_shorter_lifetime() {
        let cache = LinkCache::new(
            CacheConfig {
                max_bytes: 1 << 20,
                negative_max_bytes: 1 << 20,
                ttl: Duration::from_secs(60),
                negative_ttl: Duration::from_secs(60),
                limited_ttl: Duration::from_secs(2),
            },
            Arc::default(),
        );
        let Answer::Link(mut limited) = link("https://example.com/limited") else {
            unreachable!()
        };
        limited.rare.limit = Some(Arc::new(VisitLimit::new(5, 0)));
        cache.put("lim", Answer::Link(limited));
        cache.put("abc", link("https://example.com/"));
        let later = Instant::now() + Duration::from_secs(3);
        assert_eq!(cache.get("lim", later), None);
        assert!(url(cache.get("abc", later)).is_some());
    }

    #[test]
    fn short_and_long_codes_are_found_by_their_text() {
        let minute = Duration::from_secs(60);
        let cache = cache(1 << 20, minute, minute);
        let exactly_inline = "a".repeat(INLINE);
        let long = "an-alias-longer-than-the-inline-key-holds";
        for code in ["abc", exactly_inline.as_str(), long] {
            cache.put(code, link(&format!("https://example.com/{code}")));
        }
        for code in ["abc", exactly_inline.as_str(), long] {
            assert_eq!(
                url(cache.get(code, Instant::now())),
                Some(format!("https://example.com/{code}")),
                "{code}"
            );
        }
        // A prefix or an extension of a stored code is a different key.
        assert_eq!(cache.get("ab", Instant::now()), None);
        assert_eq!(cache.get("abc\0", Instant::now()), None);
        assert_eq!(cache.get(&long[..INLINE], Instant::now()), None);
        cache.invalidate(long);
        assert_eq!(cache.get(long, Instant::now()), None);
        assert!(url(cache.get("abc", Instant::now())).is_some());
    }

    #[test]
    fn answers_made_under_an_earlier_generation_are_stale() {
        let generation = Arc::new(AtomicU64::new(0));
        let minute = Duration::from_secs(60);
        let cache = LinkCache::new(
            CacheConfig {
                max_bytes: 1 << 20,
                negative_max_bytes: 1 << 20,
                ttl: minute,
                negative_ttl: minute,
                limited_ttl: minute,
            },
            Arc::clone(&generation),
        );
        let read_before = cache.ticket("raced");
        cache.put("abc", link("https://example.com/"));
        generation.fetch_add(1, Ordering::AcqRel);
        // An answer computed before the change and stored after it.
        cache.put_at("raced", link("https://example.com/"), read_before);
        assert_eq!(cache.get("abc", Instant::now()), None);
        assert_eq!(cache.get("raced", Instant::now()), None);
        let blocked = Answer::Blocked {
            tenant: "default".into(),
            domain: None,
        };
        cache.put("abc", blocked);
        let Some(Cached::Found(entry)) = cache.get("abc", Instant::now()) else {
            panic!("the blocked link is not cached");
        };
        assert_eq!((entry.kind(), entry.domain()), (Kind::Blocked, None));
    }

    /// A link with a visit limit of `max`.
    fn limited(url: &str, max: u64) -> Answer {
        let Answer::Link(mut limited) = link(url) else {
            unreachable!()
        };
        limited.rare.limit = Some(Arc::new(VisitLimit::new(max, 0)));
        Answer::Link(limited)
    }

    #[test]
    fn a_watched_link_outlives_its_lifetime_while_changes_are_confirmed() {
        let ttl = Duration::from_millis(50);
        let cache = cache(1 << 20, ttl, ttl);
        cache.put("abc", link("https://example.com/"));
        cache.put("lim", limited("https://example.com/limited", 10));
        let later = Instant::now() + 2 * ttl;
        // Nothing confirmed: the lifetime runs from when it was cached, as for any link.
        assert_eq!(cache.get("abc", later), None);

        cache.put("abc", link("https://example.com/"));
        cache.put("lim", limited("https://example.com/limited", 10));
        cache.confirm(later - ttl / 2);
        let url = |code| url(cache.get(code, later));
        assert_eq!(url("abc").as_deref(), Some("https://example.com/"));
        // A visit limit is read again at its lifetime, whatever is confirmed.
        assert_eq!(url("lim"), None);
        // Confirmation that stops leaves a lifetime from the last one.
        assert_eq!(cache.get("abc", later + ttl), None);

        let cache = self::cache(1 << 20, ttl, ttl);
        cache.sees_every_change();
        cache.put("abc", link("https://example.com/"));
        let much_later = Instant::now() + 1000 * ttl;
        assert_eq!(
            super::tests::url(cache.get("abc", much_later)).as_deref(),
            Some("https://example.com/")
        );
        // A change the node makes drops it at once.
        cache.invalidate("abc");
        assert_eq!(cache.get("abc", Instant::now()), None);
    }

    #[test]
    fn a_read_that_raced_a_reported_change_is_answered_but_not_kept() {
        let ttl = Duration::from_millis(50);
        let cache = cache(1 << 20, ttl, ttl);
        cache.sees_every_change();
        let later = Instant::now() + 2 * ttl;

        // The store was read before the change was reported, its answer cached after.
        let ticket = cache.ticket("abc");
        cache.invalidate("abc");
        let answered = cache.put_at("abc", link("https://example.com/old"), ticket);
        assert_eq!(url(answered).as_deref(), Some("https://example.com/old"));
        assert_eq!(
            cache.get("abc", Instant::now()),
            None,
            "a read older than a reported change was kept"
        );

        // The same across a clear (the change feed reconnected).
        let ticket = cache.ticket("def");
        cache.clear();
        cache.put_at("def", link("https://example.com/old"), ticket);
        assert_eq!(cache.get("def", Instant::now()), None);

        // A code read as unknown while its create was reported: not remembered as unknown.
        let ticket = cache.ticket("new");
        cache.invalidate("new");
        assert_eq!(
            cache.put_at("new", Answer::Missing, ticket),
            Some(Cached::Missing)
        );
        assert!(
            !cache.negative.holds("new", Instant::now()),
            "a code created during its read was cached as unknown"
        );
        let ticket = cache.ticket("new");
        cache.put_at("new", Answer::Missing, ticket);
        assert!(cache.negative.holds("new", Instant::now()));

        // A change to a code of another stripe leaves a read watched.
        let other = (0..1000)
            .map(|i| format!("x{i}"))
            .find(|code| {
                let scratch = Changes::default();
                let seen = scratch.seen("ghi");
                scratch.changed(code);
                scratch.unchanged_since("ghi", seen)
            })
            .expect("a code of another stripe");
        let ticket = cache.ticket("ghi");
        cache.invalidate(&other);
        cache.put_at("ghi", link("https://example.com/new"), ticket);
        assert_eq!(
            url(cache.get("ghi", later)).as_deref(),
            Some("https://example.com/new")
        );
    }

    #[test]
    fn links_of_one_tenant_and_domain_share_one_place() {
        let minute = Duration::from_secs(60);
        let cache = cache(1 << 20, minute, minute);
        for code in ["a1", "a2"] {
            let Answer::Link(mut branded) = link("https://example.com/") else {
                unreachable!()
            };
            branded.domain = Some("go.example".into());
            cache.put(code, Answer::Link(branded));
        }
        let tenant = |code| match cache.get(code, Instant::now()) {
            Some(Cached::Found(entry)) => Arc::clone(entry.tenant()),
            other => panic!("{other:?}"),
        };
        assert!(Arc::ptr_eq(&tenant("a1"), &tenant("a2")));
        assert_eq!(cache.places.len(), 1);
    }

    #[test]
    fn memory_stays_within_the_bound_and_misses_never_evict_links() {
        let cache = cache(64 * 1024, Duration::from_secs(60), Duration::from_secs(60));
        for i in 0..10_000 {
            cache.put(
                &format!("code{i}"),
                link(&format!("https://example.com/{i}")),
            );
        }
        let links = cache.entries.len();
        assert!(links > 100 && links < 1000, "{links} links kept");
        assert!(cache.entries.weight() <= 64 * 1024);
        let kept: Vec<String> = (0..10_000)
            .map(|i| format!("code{i}"))
            .filter(|code| cache.get(code, Instant::now()).is_some())
            .collect();
        // A storm of unknown codes fills their own cache, and evicts no link.
        for i in 0..100_000 {
            cache.put(&format!("miss{i}"), Answer::Missing);
        }
        assert!(cache.negative.len() > 1000, "{}", cache.negative.len());
        for code in &kept {
            assert!(
                cache.get(code, Instant::now()).is_some(),
                "{code} was evicted"
            );
        }
    }
}
