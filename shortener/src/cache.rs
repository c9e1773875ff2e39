//! The redirect cache in front of the store.
//!
//! Hot codes are answered from memory: found links for up to the positive TTL, unknown codes for
//! a short negative TTL. Memory is bounded by the total size of the cached entries. Deletes are
//! pushed to every node (PostgreSQL `LISTEN/NOTIFY`, see [`crate::store::PgStore::listen`]); the
//! TTL bounds staleness when a notification is missed.

use chrono::{DateTime, Utc};
use moka::sync::Cache;
use std::sync::Arc;
use std::time::Duration;

/// What the cache knows about a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cached {
    /// A link: its URL, expiry and whether it is deleted.
    Link {
        /// The target.
        url: Arc<str>,
        /// When it expires, if ever.
        expires_at: Option<DateTime<Utc>>,
        /// Whether it was deleted.
        deleted: bool,
    },
    /// No such code (cached briefly).
    Missing,
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
}

/// Two bounded caches: found links, and recently unknown codes.
#[derive(Clone)]
pub struct LinkCache {
    found: Cache<Arc<str>, Cached>,
    missing: Cache<Arc<str>, ()>,
}

impl LinkCache {
    /// An empty cache.
    pub fn new(config: CacheConfig) -> Self {
        let found = Cache::builder()
            .max_capacity(config.max_bytes)
            .weigher(|code: &Arc<str>, entry: &Cached| {
                let url = match entry {
                    Cached::Link { url, .. } => url.len(),
                    Cached::Missing => 0,
                };
                u32::try_from(code.len() + url + 96).unwrap_or(u32::MAX)
            })
            .time_to_live(config.ttl)
            .build();
        let missing = Cache::builder()
            .max_capacity((config.max_bytes / 128).max(1024))
            .time_to_live(config.negative_ttl)
            .build();
        Self { found, missing }
    }

    /// The cached answer for `code`, if any.
    pub fn get(&self, code: &str) -> Option<Cached> {
        if let Some(entry) = self.found.get(code) {
            return Some(entry);
        }
        self.missing.get(code).map(|()| Cached::Missing)
    }

    /// Remembers what the store said about `code`.
    pub fn put(&self, code: &str, entry: Cached) {
        let key: Arc<str> = Arc::from(code);
        match entry {
            Cached::Missing => self.missing.insert(key, ()),
            link => self.found.insert(key, link),
        }
    }

    /// Forgets `code` (it was created, deleted or changed).
    pub fn invalidate(&self, code: &str) {
        self.found.invalidate(code);
        self.missing.invalidate(code);
    }

    /// Forgets everything (notifications may have been missed).
    pub fn clear(&self) {
        self.found.invalidate_all();
        self.missing.invalidate_all();
    }

    /// Approximate number of cached links.
    pub fn len(&self) -> u64 {
        self.found.entry_count()
    }

    /// Whether the cache holds no link.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> LinkCache {
        LinkCache::new(CacheConfig {
            max_bytes: 1 << 20,
            ttl: Duration::from_secs(60),
            negative_ttl: Duration::from_secs(60),
        })
    }

    #[test]
    fn found_and_missing_entries_are_kept_apart_and_invalidated() {
        let cache = cache();
        let link = Cached::Link {
            url: Arc::from("https://example.com/"),
            expires_at: None,
            deleted: false,
        };
        cache.put("abc", link.clone());
        cache.put("zzz", Cached::Missing);
        assert_eq!(cache.get("abc"), Some(link));
        assert_eq!(cache.get("zzz"), Some(Cached::Missing));
        assert_eq!(cache.get("other"), None);
        cache.invalidate("abc");
        cache.invalidate("zzz");
        assert_eq!(cache.get("abc"), None);
        assert_eq!(cache.get("zzz"), None);
    }

    #[test]
    fn memory_stays_within_the_bound() {
        let cache = LinkCache::new(CacheConfig {
            max_bytes: 64 * 1024,
            ttl: Duration::from_secs(60),
            negative_ttl: Duration::from_secs(1),
        });
        for i in 0..10_000 {
            cache.put(
                &format!("code{i}"),
                Cached::Link {
                    url: Arc::from(format!("https://example.com/{i}")),
                    expires_at: None,
                    deleted: false,
                },
            );
        }
        cache.found.run_pending_tasks();
        assert!(cache.len() < 1000, "{} entries kept", cache.len());
    }
}
