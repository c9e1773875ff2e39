//! The redirect cache in front of the store.
//!
//! Hot codes are answered from memory: found links for up to the positive TTL, unknown codes for
//! a short negative TTL. Memory is bounded by the total size of the cached entries. Deletes are
//! pushed to every node (PostgreSQL `LISTEN/NOTIFY`, the store's change feed); the
//! TTL bounds staleness when a notification is missed. Entries hold the target as the
//! `Location` header value it is sent as, checked once when the entry is made, so a hit costs
//! the edge no validation or copy.

use crate::domain::CompactCode;
use crate::links::LinkChanges;
use axum::http::HeaderValue;
use chrono::{DateTime, Utc};
use quick_cache::Weighter;
use quick_cache::sync::Cache;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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

/// What the cache knows about a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cached {
    /// A link: its URL, expiry, whether it still serves, and its visit limit.
    Link {
        /// The target, as the `Location` header value it is sent as (checked once, when the
        /// entry is made, so a hit costs no validation or copy).
        location: HeaderValue,
        /// When it expires, if ever.
        expires_at: Option<DateTime<Utc>>,
        /// Whether it was deleted or disabled.
        gone: bool,
        /// Its visit limit, if it has one.
        limit: Option<Arc<VisitLimit>>,
        /// The hash of its password, if it is protected: the target is only ever answered
        /// after the password is checked against it.
        password: Option<Arc<crate::domain::PasswordHash>>,
        /// Its tenant (visits are counted under it).
        tenant: Arc<str>,
        /// The branded domain it answers on (`None`: the default domain).
        domain: Option<Arc<str>>,
        /// Its redirect rules, compiled (`None`: a plain link).
        routing: Option<Arc<super::routing::Routing>>,
    },
    /// No such code (cached briefly).
    Missing,
    /// A link to a domain on the operator's blocklist, on its branded domain (`None`: the
    /// default domain).
    Blocked(Option<Arc<str>>),
}

/// Sizes and lifetimes of the cache.
#[derive(Debug, Clone, Copy)]
pub struct CacheConfig {
    /// Upper bound of the memory held by cached links, in bytes (approximate).
    pub max_bytes: u64,
    /// How long a found link is kept.
    pub ttl: Duration,
    /// How long an unknown code is remembered.
    pub negative_ttl: Duration,
    /// How long a link with a visit limit is kept (about a click flush interval, so the
    /// visits other nodes served reach it soon).
    pub limited_ttl: Duration,
}

/// An entry and when it was stored (entries past their lifetime read as absent).
#[derive(Debug, Clone)]
struct Stored {
    entry: Cached,
    at: Instant,
    /// The target rules' generation the answer was made under.
    generation: u64,
}

/// Weighs an entry by the bytes it holds, so the bound is in memory, not in entries.
#[derive(Debug, Clone, Copy)]
struct Bytes;

impl Weighter<CompactCode, Stored> for Bytes {
    fn weight(&self, code: &CompactCode, stored: &Stored) -> u64 {
        let url = match &stored.entry {
            Cached::Link {
                location,
                password,
                tenant,
                domain,
                routing,
                ..
            } => {
                location.len()
                    + password.as_ref().map_or(0, |p| p.as_stored().len())
                    + tenant.len()
                    + domain.as_ref().map_or(0, |d| d.len())
                    + routing.as_ref().map_or(0, |r| r.weight())
            }
            Cached::Blocked(domain) => domain.as_ref().map_or(0, |d| d.len()),
            Cached::Missing => 0,
        };
        (code.as_bytes().len() + url + 96) as u64
    }
}

/// The redirect cache: a sharded, weight-bounded S3-FIFO cache (quick_cache), chosen for cheap
/// reads on the redirect path; lifetimes are checked on read.
#[derive(Clone)]
pub struct LinkCache {
    entries: Arc<Cache<CompactCode, Stored, Bytes>>,
    ttl: Duration,
    negative_ttl: Duration,
    limited_ttl: Duration,
    generation: Arc<AtomicU64>,
}

impl LinkCache {
    /// An empty cache whose answers are stale once `generation` (the target rules',
    /// bumped when the blocklist changes) moves past the one they were made under.
    pub fn new(config: CacheConfig, generation: Arc<AtomicU64>) -> Self {
        // An estimate of the entry count sizes the shards; about 200 bytes per entry.
        let estimated = usize::try_from(config.max_bytes / 200)
            .unwrap_or(usize::MAX)
            .clamp(16, 1 << 24);
        Self {
            entries: Arc::new(Cache::with_weighter(
                estimated,
                config.max_bytes.max(1),
                Bytes,
            )),
            ttl: config.ttl,
            negative_ttl: config.negative_ttl,
            limited_ttl: config.limited_ttl.min(config.ttl),
            generation,
        }
    }

    /// The target rules' generation now: read it before the store, and store the answer
    /// under it ([`LinkCache::put_at`]), so an answer that raced a blocklist change is stale.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The cached answer for `code`, if any and still fresh at `now` (a time the caller has
    /// already read; entries stored after it count as fresh).
    pub fn get(&self, code: &str, now: Instant) -> Option<Cached> {
        let stored = self.entries.get(code.as_bytes())?;
        let lifetime = match stored.entry {
            Cached::Missing => self.negative_ttl,
            Cached::Link { limit: Some(_), .. } => self.limited_ttl,
            Cached::Link { .. } | Cached::Blocked(_) => self.ttl,
        };
        if now.saturating_duration_since(stored.at) < lifetime
            && stored.generation == self.generation()
        {
            Some(stored.entry)
        } else {
            self.entries.remove(code.as_bytes());
            None
        }
    }

    /// Remembers what the store said about `code`, under the generation in force now.
    pub fn put(&self, code: &str, entry: Cached) {
        self.put_at(code, entry, self.generation());
    }

    /// Remembers what the store said about `code`, under the generation read before the
    /// store was asked.
    pub fn put_at(&self, code: &str, entry: Cached, generation: u64) {
        self.entries.insert(
            CompactCode::new(code),
            Stored {
                entry,
                at: Instant::now(),
                generation,
            },
        );
    }

    /// Forgets `code` (it was created, deleted or changed).
    pub fn invalidate(&self, code: &str) {
        self.entries.remove(code.as_bytes());
    }

    /// Forgets everything (notifications may have been missed).
    pub fn clear(&self) {
        self.entries.clear();
    }

    /// Number of cached entries (links and unknown codes).
    pub fn len(&self) -> u64 {
        self.entries.len() as u64
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
                ttl,
                negative_ttl,
                limited_ttl: ttl,
            },
            Arc::default(),
        )
    }

    fn link(url: &str) -> Cached {
        Cached::Link {
            location: HeaderValue::from_str(url).expect("a valid header value"),
            expires_at: None,
            gone: false,
            limit: None,
            password: None,
            tenant: "default".into(),
            domain: None,
            routing: None,
        }
    }

    #[test]
    fn found_and_missing_entries_are_kept_apart_and_invalidated() {
        let minute = Duration::from_secs(60);
        let cache = cache(1 << 20, minute, minute);
        cache.put("abc", link("https://example.com/"));
        cache.put("zzz", Cached::Missing);
        assert_eq!(
            cache.get("abc", Instant::now()),
            Some(link("https://example.com/"))
        );
        assert_eq!(cache.get("zzz", Instant::now()), Some(Cached::Missing));
        assert_eq!(cache.get("other", Instant::now()), None);
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
        cache.put("zzz", Cached::Missing);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(
            cache.get("zzz", Instant::now()),
            None,
            "the negative entry outlived its lifetime"
        );
        assert_eq!(
            cache.get("abc", Instant::now()),
            Some(link("https://example.com/")),
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
        cache.put("zzz", Cached::Missing);
        let after = Instant::now();
        // A time read before the entry was stored (a request that raced the insert) is fresh.
        assert_eq!(cache.get("abc", before), Some(link("https://example.com/")));
        assert_eq!(cache.get("zzz", before), Some(Cached::Missing));
        // Each lifetime is its own: the negative one ends first.
        let between = after + negative_ttl;
        assert_eq!(cache.get("zzz", between), None);
        assert_eq!(
            cache.get("abc", between),
            Some(link("https://example.com/"))
        );
        assert_eq!(cache.get("abc", after + ttl), None);
        // An expired entry is dropped, not just hidden.
        assert_eq!(cache.get("abc", after), None);
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
                cache.get(code, Instant::now()),
                Some(link(&format!("https://example.com/{code}"))),
                "{code}"
            );
        }
        // A prefix or an extension of a stored code is a different key.
        assert_eq!(cache.get("ab", Instant::now()), None);
        assert_eq!(cache.get("abc\0", Instant::now()), None);
        assert_eq!(cache.get(&long[..INLINE], Instant::now()), None);
        cache.invalidate(long);
        assert_eq!(cache.get(long, Instant::now()), None);
        assert_eq!(
            cache.get("abc", Instant::now()),
            Some(link("https://example.com/abc"))
        );
    }

    #[test]
    fn answers_made_under_an_earlier_generation_are_stale() {
        let generation = Arc::new(AtomicU64::new(0));
        let minute = Duration::from_secs(60);
        let cache = LinkCache::new(
            CacheConfig {
                max_bytes: 1 << 20,
                ttl: minute,
                negative_ttl: minute,
                limited_ttl: minute,
            },
            Arc::clone(&generation),
        );
        let read_before = cache.generation();
        cache.put("abc", link("https://example.com/"));
        generation.fetch_add(1, Ordering::AcqRel);
        // An answer computed before the change and stored after it.
        cache.put_at("raced", link("https://example.com/"), read_before);
        assert_eq!(cache.get("abc", Instant::now()), None);
        assert_eq!(cache.get("raced", Instant::now()), None);
        cache.put("abc", Cached::Blocked(None));
        assert_eq!(
            cache.get("abc", Instant::now()),
            Some(Cached::Blocked(None))
        );
    }

    #[test]
    fn memory_stays_within_the_bound() {
        let cache = cache(64 * 1024, Duration::from_secs(60), Duration::from_secs(1));
        for i in 0..10_000 {
            cache.put(
                &format!("code{i}"),
                link(&format!("https://example.com/{i}")),
            );
        }
        assert!(cache.len() < 1000, "{} entries kept", cache.len());
    }
}
