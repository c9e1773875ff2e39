//! The branded domains by host, as the public listener reads them: a bounded cache in front of
//! the store, kept fresh the way the redirect cache is. The node that claims, changes or removes
//! a domain drops its entry before it answers; other nodes drop it when the change feed reports
//! the host (PostgreSQL `NOTIFY`), and clear everything when the feed reconnects. Without any
//! notification an entry lives `SHORTENER_CACHE_TTL` (a known domain) or
//! `SHORTENER_NEGATIVE_CACHE_TTL_MS` (a host that is no domain). While the store cannot be
//! read (an outage, a failover), a host whose entry has aged out is answered from it all the
//! same: a domain's settings change only through that store, and every domain redirect failing
//! at once would be worse than one of them answering with what it was a minute ago.

use crate::domain::Domain;
use crate::store::{DomainStore, Store, StoreError};
use quick_cache::Weighter;
use quick_cache::sync::Cache;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The hosts the cache is sized for (found or not); it holds more small ones and fewer large
/// ones, within [`MAX_BYTES`].
pub const MAX_HOSTS: usize = 10_000;

/// The most bytes the cache holds: every cached host weighs what it holds (its name, its slot
/// and, for a known domain, the domain with its fallback URLs and app files, up to 16 KiB
/// each), so that hosts with large app files cannot hold more than this.
pub const MAX_BYTES: u64 = 16 << 20;

/// The cache's shards, fixed rather than by the machine's cores: each holds its part of
/// [`MAX_BYTES`] (1 MiB), and an item heavier than a shard holds is never kept, so the largest
/// domain (two app files and three fallback URLs of up to 64 KiB) fits on any machine.
const SHARDS: usize = 16;

/// What a cached host costs beside its name and its domain: the entry and the cache's index
/// of it.
const SLOT_BYTES: u64 = 2 * std::mem::size_of::<(String, Entry)>() as u64 + 16;

/// Weighs a cached host by what it holds.
#[derive(Debug, Clone, Copy)]
struct Bytes;

impl Weighter<String, Entry> for Bytes {
    fn weight(&self, host: &String, entry: &Entry) -> u64 {
        let domain = entry.domain.as_ref().map_or(0, |d| {
            16 + std::mem::size_of::<Domain>() as u64 + d.heap_bytes() as u64
        });
        SLOT_BYTES + host.capacity() as u64 + domain
    }
}

/// What the cache knows of a host, and until when (`None`: a lifetime past what the clock can
/// count).
#[derive(Clone)]
struct Entry {
    domain: Option<Arc<Domain>>,
    until: Option<Instant>,
}

/// The domains by host, cached. Cheap to share behind an `Arc`.
pub struct DomainCache {
    store: Store,
    entries: Cache<String, Entry, Bytes>,
    ttl: Duration,
    negative_ttl: Duration,
    /// Bumped by every invalidation: a read that started before one is not cached, so an
    /// answer older than a change never outlives it.
    generation: AtomicU64,
}

impl DomainCache {
    /// A cache over `store`; known domains are kept for `ttl`, hosts that are none for
    /// `negative_ttl`.
    pub fn new(store: Store, ttl: Duration, negative_ttl: Duration) -> Self {
        Self {
            store,
            entries: Cache::with_options(
                quick_cache::OptionsBuilder::new()
                    .estimated_items_capacity(MAX_HOSTS)
                    .weight_capacity(MAX_BYTES)
                    .shards(SHARDS)
                    .build()
                    .expect("valid cache options"),
                Bytes,
                quick_cache::DefaultHashBuilder::default(),
                quick_cache::sync::DefaultLifecycle::default(),
            ),
            ttl,
            negative_ttl,
            generation: AtomicU64::new(0),
        }
    }

    /// The domain of `host` (in its normal form), from the cache while it is fresh, else from
    /// the store.
    pub async fn get(&self, host: &str) -> Result<Option<Arc<Domain>>, StoreError> {
        match self.cached(host, Instant::now()) {
            Some(known) => Ok(known),
            None => self.load(host).await,
        }
    }

    /// What the cache knows of `host` while it is fresh as of `now` (a redirect passes its
    /// arrival, so that it reads the clock once): `Some(None)` for a host that is no domain;
    /// `None` when only the store can tell ([`DomainCache::load`]).
    pub fn cached(&self, host: &str, now: Instant) -> Option<Option<Arc<Domain>>> {
        let entry = self.entries.get(host)?;
        entry
            .until
            .is_none_or(|until| now < until)
            .then_some(entry.domain)
    }

    /// The domain of `host` read from the store, and cached.
    pub async fn load(&self, host: &str) -> Result<Option<Arc<Domain>>, StoreError> {
        let generation = self.generation.load(Ordering::Acquire);
        let at = Instant::now();
        let domain = match self.store.domain(host, None).await {
            Ok(found) => found.map(Arc::new),
            Err(StoreError::Unavailable(detail)) => {
                // What was last read of the host, however old, while the store is away.
                return match self.entries.get(host) {
                    Some(stale) => Ok(stale.domain),
                    None => Err(StoreError::Unavailable(detail)),
                };
            }
            Err(error) => return Err(error),
        };
        // The end of its lifetime is worked out once here, not on every read.
        let lifetime = if domain.is_some() {
            self.ttl
        } else {
            self.negative_ttl
        };
        let entry = Entry {
            domain: domain.clone(),
            until: at.checked_add(lifetime),
        };
        self.put(host, entry, generation);
        Ok(domain)
    }

    /// Caches what a read that began at `generation` found of `host`, unless an invalidation
    /// came since: checked after the insert, since one that came between a check and the
    /// insert would have removed nothing, and the entry may be older than the change.
    fn put(&self, host: &str, entry: Entry, generation: u64) {
        self.entries.insert(host.to_string(), entry);
        if self.generation.load(Ordering::Acquire) != generation {
            self.entries.remove(host);
        }
    }

    /// Bytes the cache holds now, and at most: each host's slot (its name, the entry and the
    /// cache's index of it) and, for a known domain, the domain with what it points to.
    pub fn memory(&self) -> (u64, u64) {
        (self.entries.weight(), MAX_BYTES)
    }

    /// Forgets `host` (it was claimed, changed or removed).
    pub fn invalidate(&self, host: &str) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.entries.remove(host);
    }

    /// Forgets every host (changes may have been missed).
    pub fn clear(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Capabilities, SqliteStore};

    /// A migrated embedded store in a directory of its own (kept while the directory lives).
    async fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        let space = Arc::new(
            codespace::CodeSpace::new(&codespace::CodeKey::generate(), codespace::DEFAULT_LENGTH)
                .expect("space"),
        );
        let sqlite = SqliteStore::open(&dir.path().join("d.db"), space, 8).expect("open");
        sqlite.migrate().await.expect("migrate");
        (dir, Store::Sqlite(sqlite))
    }

    #[tokio::test]
    async fn an_answer_read_before_an_invalidation_is_not_kept() {
        let (_dir, store) = store().await;
        let minute = Duration::from_secs(60);
        let cache = DomainCache::new(store, minute, minute);
        let entry = || Entry {
            domain: None,
            until: Instant::now().checked_add(minute),
        };
        let began = cache.generation.load(Ordering::Acquire);
        cache.invalidate("go.acme.example");
        cache.put("go.acme.example", entry(), began);
        assert!(cache.cached("go.acme.example", Instant::now()).is_none());
        cache.put(
            "go.acme.example",
            entry(),
            cache.generation.load(Ordering::Acquire),
        );
        assert!(cache.cached("go.acme.example", Instant::now()).is_some());
    }

    /// A domain with app files of 16 KiB each weighs what it holds, so hosts with large files
    /// fill the cache's bytes, not its count: however many are read, it keeps to its bound.
    #[tokio::test]
    async fn domains_with_large_app_files_keep_to_the_bound_in_bytes() {
        use crate::domain::{DomainSettings, MAX_APP_FILE_BYTES};
        let (_dir, store) = store().await;
        let file = format!(
            "{{\"applinks\":\"{}\"}}",
            "a".repeat(MAX_APP_FILE_BYTES - 20)
        );
        let hosts = (MAX_BYTES as usize / (2 * MAX_APP_FILE_BYTES)) * 3 / 2;
        for i in 0..hosts {
            let domain = Domain {
                host: format!("go{i}.acme.example"),
                tenant: "acme".into(),
                created_at: chrono::Utc::now(),
                created_by: "acme/ci".into(),
                settings: DomainSettings {
                    apple_app_site_association: Some(file.clone()),
                    assetlinks: Some(file.clone()),
                    ..DomainSettings::default()
                },
            };
            store
                .insert_domain(&domain)
                .await
                .expect("insert")
                .expect("new");
        }
        let cache = DomainCache::new(store, Duration::from_secs(60), Duration::from_secs(60));
        let first = cache
            .get("go0.acme.example")
            .await
            .expect("read")
            .expect("a domain");
        assert!(
            cache.memory().0 >= 2 * file.len() as u64,
            "a cached domain weighs {} for {} bytes of files",
            cache.memory().0,
            2 * file.len()
        );
        drop(first);
        for i in 0..hosts {
            let host = format!("go{i}.acme.example");
            assert!(cache.get(&host).await.expect("read").is_some());
            let (bytes, budget) = cache.memory();
            assert!(bytes <= budget, "{bytes} past {budget} after {i} hosts");
        }
        assert!(cache.memory().0 > MAX_BYTES / 2, "{}", cache.memory().0);
    }

    #[tokio::test]
    async fn the_cache_keeps_to_its_bound_however_many_hosts_are_asked() {
        let (_dir, store) = store().await;
        let cache = DomainCache::new(store, Duration::from_secs(60), Duration::from_secs(60));
        assert_eq!(cache.memory().0, 0);
        for i in 0..(MAX_HOSTS + MAX_HOSTS / 2) {
            let host = format!("host-{i}.example");
            assert!(cache.get(&host).await.expect("read").is_none());
        }
        let (bytes, budget) = cache.memory();
        assert!(bytes > 0, "the gauge moved");
        assert!(bytes <= budget, "{bytes} past {budget}");
        cache.clear();
        assert_eq!(cache.memory().0, 0, "cleared");
    }
}
