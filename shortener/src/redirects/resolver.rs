//! Where a code redirects: the cache first, then the store, and paths that cannot be codes
//! answered without either, nor generated codes above the store's slot high-water mark.

use super::cache::{Answer, Cached, LinkCache, NewLink, VisitLimit};
use super::entry::{Entry, Kind, Rare};
use super::high_water::{Bound, HighWaterReads, bound};
use crate::domain::PasswordHash;
use crate::domain::{Domain, Error};
use crate::metrics::{Sample, Samples};
use crate::store::{LinkStore, Mark, Store};
use crate::targets::TargetRules;
use crate::visits::clicks::{HandOver, HeldClicks, TakeHeld};
use crate::visits::{Classified, VisitKind, Visits};
use axum::http::HeaderValue;
use chrono::Utc;
use codespace::CodeSpace;
use codespace::shape::{self, CodeKind};
use futures::FutureExt;
use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// What the edge should do with a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Redirect to this target (within its visit limit, after its password, if it has them).
    Redirect(Target),
    /// No such code (or a path that cannot be a code).
    NotFound,
    /// Deleted, disabled or expired.
    Gone,
    /// The target's domain is on the operator's blocklist.
    Blocked,
}

/// Where a live link goes, and what must be checked first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The `Location` header value.
    pub location: HeaderValue,
    /// Which of its targets `location` is (the link's URL until the edge routes the request).
    pub route: crate::domain::Route,
    /// The cached link.
    link: Entry,
}

impl Target {
    /// The target of the cached `link`, to its URL; `None` if the URL is not a header value
    /// (never: it was checked when the entry was made).
    fn new(link: Entry) -> Option<Self> {
        // A copy of the URL, checked again as a header value (a vectorized pass over its
        // bytes, not a UTF-8 check): one small allocation per redirect, where sharing one would
        // cost the entry a second allocation.
        let location = HeaderValue::from_bytes(link.url_bytes()).ok()?;
        Some(Self {
            location,
            route: crate::domain::Route::Url,
            link,
        })
    }

    /// Its visit limit, if it has one.
    pub fn limit(&self) -> Option<&Arc<VisitLimit>> {
        self.link.rare().limit.as_ref()
    }

    /// Whether its answer holds for a while only: it expires, or has a visit limit. A
    /// permanent redirect to it would be kept by browsers past its end.
    pub fn transient(&self) -> bool {
        self.limit().is_some() || self.link.expires()
    }

    /// Its password's hash, if it is protected.
    pub fn password(&self) -> Option<&Arc<PasswordHash>> {
        self.link.rare().password.as_ref()
    }

    /// Its tenant.
    pub fn tenant(&self) -> &Arc<str> {
        self.link.tenant()
    }

    /// Its redirect rules, compiled, if it has any: the edge decides per request.
    pub fn routing(&self) -> Option<&Arc<super::routing::Routing>> {
        self.link.rare().routing.as_ref()
    }

    /// Whether the visit may be served under the link's visit limit, counting it if it is a
    /// person's (only people's visits count against the limit).
    pub fn admits(&self, kind: VisitKind) -> bool {
        self.limit().is_none_or(|limit| match kind {
            VisitKind::Human => limit.take(),
            VisitKind::Head | VisitKind::Bot => !limit.spent(),
        })
    }
}

/// Redirect lookups (bumped by the resolver).
#[derive(Debug, Default)]
pub struct LookupCounters {
    /// Lookups answered from the cache.
    pub cache_hits: AtomicU64,
    /// Lookups that went to the store.
    pub cache_misses: AtomicU64,
    /// Generated codes answered "not found" without the store: they decode above every ID a
    /// stored code decodes to (docs/design.md, I9).
    pub refused_impossible: AtomicU64,
}

/// Resolves codes for redirects.
pub struct Resolver {
    store: Store,
    cache: LinkCache,
    space: Arc<CodeSpace>,
    targets: Arc<TargetRules>,
    visits: Arc<Visits>,
    /// Cached links holding click counts a flush has yet to take.
    held: Arc<HeldClicks<Entry>>,
    counters: Arc<LookupCounters>,
    high_water: HighWaterReads<Mark>,
}

impl Resolver {
    /// Whether the blocklist holds the host of any URL `link` may send a visit to: its own,
    /// a rule's, a split's variant's, an app target's. Any of them blocks the whole link, so
    /// that no share of its visits still reaches a blocked host.
    fn blocks(&self, link: &crate::domain::Link) -> bool {
        let routes = &link.routes;
        let rules = routes.rules.0.iter().flat_map(|rule| {
            std::iter::once(rule.url.as_str()).chain(rule.variants.iter().map(|v| v.url.as_str()))
        });
        let apps = [routes.ios.as_deref(), routes.android.as_deref()];
        std::iter::once(link.url.as_str())
            .chain(rules)
            .chain(routes.variants.iter().map(|v| v.url.as_str()))
            .chain(apps.into_iter().flatten())
            .filter(|url| !url.is_empty())
            .any(|url| self.targets.blocks_stored(url))
    }

    /// A resolver over `store` behind `cache`, for codes of `space`, answering links to
    /// domains the `targets` rules block as blocked, and counting a visit limit from the
    /// stored visits and those `visits` has not flushed yet. Where other nodes write the store
    /// too, it reads the slot high-water mark at most `high_water_reads` times a second.
    pub fn new(
        store: Store,
        cache: LinkCache,
        space: Arc<CodeSpace>,
        targets: Arc<TargetRules>,
        visits: Arc<Visits>,
        high_water_reads: u32,
    ) -> Self {
        let reader = store.clone();
        let high_water = HighWaterReads::new(
            move || {
                let store = reader.clone();
                async move {
                    store.read_high_water().await.unwrap_or_else(|error| {
                        tracing::debug!(%error, "could not read the slot high-water mark");
                        None
                    })
                }
                .boxed()
            },
            high_water_reads,
        );
        let held = Arc::new(HeldClicks::default());
        let analytics = Arc::clone(visits.analytics());
        held.hand_over_with(Box::new(move |code, entry: &Entry, rollups| {
            analytics.add_taken(code, entry.tenant(), rollups);
        }));
        visits.clicks().hold(Arc::clone(&held) as Arc<dyn TakeHeld>);
        let handed: Arc<dyn HandOver> = Arc::clone(&held) as Arc<dyn HandOver>;
        visits.analytics().hold(Arc::downgrade(&handed));
        Self {
            store,
            cache,
            space,
            targets,
            visits,
            held,
            counters: Arc::default(),
            high_water,
        }
    }

    /// Counts a served visit of `target`, the link of `key`: its total in the cached link it
    /// was served from (no map to search on the redirect path), or by code for a link with a
    /// visit limit (whose next read from the store must find this node's unflushed visits by
    /// code); its rollups as always.
    pub fn count(&self, key: &str, target: &Target, visit: &Classified<'_>) {
        if target.limit().is_some() {
            self.visits.record(key, target.tenant(), visit);
        } else {
            self.visits
                .record_held(&self.held, &target.link, key, target.tenant(), visit);
        }
    }

    /// The lookup counters (reported in `/metrics` by the resolver's [`Sample`]).
    pub fn counters(&self) -> Arc<LookupCounters> {
        Arc::clone(&self.counters)
    }

    /// How many reads of the store's slot high-water mark refusals have made.
    pub fn high_water_reads(&self) -> u64 {
        self.high_water.reads()
    }

    /// The key `segment` is stored under on `site` (the request's branded domain; `None`: the
    /// default domain), and its shape; `None` when it cannot be a code. Only an alias on a
    /// branded domain has a key of its own (`host/alias`), made here; every other code is its
    /// own key ([`crate::domain::link_key`]).
    pub fn key<'a>(&self, site: Option<&Domain>, segment: &'a str) -> Option<Key<'a>> {
        let kind = shape::classify(segment, self.space.length())?;
        let key = crate::domain::link_key(site.map(|d| d.host.as_str()), segment, kind);
        Some(Key { key, kind })
    }

    /// Where `key` redirects on `site`, as of `now` (the request's arrival: the cache's
    /// lifetimes are checked against it, so a redirect reads the clock once for both this and
    /// its latency), when that is known without the store: a cached code. `None` means the
    /// store must be asked ([`Resolver::resolve`]). A link answers only on its own domain, and
    /// on a branded one only while the domain is its tenant's: anywhere else it is not found.
    ///
    /// A generated code that decodes above the slot high-water mark is answered "not found"
    /// here when the mark is exact (this node is the store's only writer); where other nodes
    /// write too, [`Resolver::resolve`] reads the mark first (docs/design.md, I9).
    pub fn resolve_cached(
        &self,
        site: Option<&Domain>,
        key: &Key<'_>,
        now: Instant,
    ) -> Option<Resolution> {
        self.known(site, key, now).ok()
    }

    /// [`Resolver::resolve_cached`], or what the mark says of the code when the store must be
    /// asked otherwise.
    fn known(
        &self,
        site: Option<&Domain>,
        key: &Key<'_>,
        now: Instant,
    ) -> Result<Resolution, Bound> {
        if let Some(entry) = self.cache.get(&key.key, now) {
            self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(resolution(placed(entry, site)));
        }
        match bound(self.store.slot_bound(), &self.space, &key.key, key.kind) {
            Bound::Impossible => Ok(self.refuse()),
            bound => Err(bound),
        }
    }

    /// "Not found" for a code no row can hold, counted.
    fn refuse(&self) -> Resolution {
        self.counters
            .refused_impossible
            .fetch_add(1, Ordering::Relaxed);
        Resolution::NotFound
    }

    /// Where `key` redirects on `site`, as of `now`: [`Resolver::resolve_cached`], else (for a
    /// code above the mark as last read, once a read of the mark that started after `now`
    /// still finds it above) "not found", else the store (and the answer is cached under the
    /// key, for every domain: whether it answers on `site` is decided on each use).
    pub async fn resolve(
        &self,
        site: Option<&Domain>,
        key: &Key<'_>,
        now: Instant,
    ) -> Result<Resolution, Error> {
        let segment: &str = &key.key;
        let bound = match self.known(site, key, now) {
            Ok(resolution) => return Ok(resolution),
            Err(bound) => bound,
        };
        if matches!(bound, Bound::Above(_) | Bound::Undecodable) {
            // A read that started after the request arrived counts every link committed
            // before it arrived (another node's included).
            let arrived = tokio::time::Instant::from_std(now);
            let mark = self.high_water.after(arrived).await;
            let refused = mark.is_some_and(|mark| match bound {
                Bound::Above(id) => id > mark.slot,
                _ => !mark.undecodable,
            });
            if refused {
                return Ok(self.refuse());
            }
        }
        self.counters.cache_misses.fetch_add(1, Ordering::Relaxed);
        let ticket = self.cache.ticket(segment);
        let answer = match self.store.get(segment).await? {
            Some(link) if link.deleted_at.is_none() && self.blocks(&link) => Answer::Blocked {
                tenant: link.tenant,
                domain: link.domain,
            },
            Some(link) => Answer::Link(self.new_link(segment, link).await?),
            None => Answer::Missing,
        };
        let entry = self.cache.put_at(segment, answer, ticket).ok_or_else(|| {
            Error::Internal(format!("the stored URL of {} is too long", shown(segment)))
        })?;
        Ok(resolution(placed(entry, site)))
    }

    /// `link`, read from the store for `segment`, as the cache keeps it: its URL checked as a
    /// `Location`, and its visit limit counted from the stored visits and this node's unflushed
    /// ones.
    async fn new_link(&self, segment: &str, link: crate::domain::Link) -> Result<NewLink, Error> {
        location(segment, &link.url)?;
        let limit = match link.max_visits {
            None => None,
            Some(max) => {
                // Read after the link, so no visit flushed in between is missed, and with no
                // flush running, so none is in neither count (taken from this node's pending
                // counts, not yet committed) or, put back after a failed write, in both.
                // From the primary: a replica may not have replayed this node's last flush.
                let _settled = self.visits.clicks().settled().await;
                let stored = self.store.stored_visits(segment).await?;
                let pending = self.visits.pending_human(segment);
                Some(Arc::new(VisitLimit::new(max, stored + pending)))
            }
        };
        let routing = super::routing::Routing::compile(&link.routes, &link.url);
        Ok(NewLink {
            expires_at: link.expires_at,
            gone: link.deleted_at.is_some() || link.disabled_at.is_some(),
            tenant: link.tenant.as_str().to_owned(),
            domain: link.domain,
            rare: Rare {
                limit,
                password: link.password.map(Arc::new),
                routing: routing.map(Arc::new),
                long_url: None,
            },
            url: link.url,
        })
    }
}

/// The redirect path's part of `/metrics`: its lookups, and what its cache holds.
impl Sample for Resolver {
    fn sample(&self, out: &mut Samples<'_, '_>) -> std::fmt::Result {
        out.counter(
            "shortener_cache_hits",
            "Redirect lookups answered from the cache",
            self.counters.cache_hits.load(Ordering::Relaxed),
        )?;
        out.counter(
            "shortener_cache_misses",
            "Redirect lookups that went to the store",
            self.counters.cache_misses.load(Ordering::Relaxed),
        )?;
        out.counter(
            "shortener_redirects_refused_impossible",
            "Generated codes answered not found without the store: they decode above every stored ID",
            self.counters.refused_impossible.load(Ordering::Relaxed),
        )?;
        out.counter(
            "shortener_high_water_reads",
            "Reads of the store's slot high-water mark made before refusing such codes (PostgreSQL)",
            self.high_water.reads(),
        )?;
        out.gauge(
            "shortener_cache_entries",
            "Entries held in the redirect cache (links and recently unknown codes)",
            self.cache.len() as f64,
        )?;
        out.gauge(
            "shortener_cache_changes_confirmed_age_seconds",
            "Seconds since every change to the store was last confirmed reported to the redirect cache (0 where the node makes every change); past SHORTENER_CACHE_TTL, cached links are read again at the end of their lifetime",
            self.cache.confirmed_age().as_secs_f64(),
        )
    }
}

/// A code as a redirect asks for it: the key it is stored under on the request's domain, and
/// its shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key<'a> {
    /// The key ([`crate::domain::link_key`]).
    pub key: Cow<'a, str>,
    /// The shape of the code.
    pub kind: CodeKind,
}

/// `entry` as it answers on `site`: a link (or a blocked one) of another domain, or of a branded
/// domain that is no longer its tenant's (a link left when its domain was removed and claimed
/// again by another tenant), is not found there.
fn placed(entry: Cached, site: Option<&Domain>) -> Cached {
    let Cached::Found(link) = &entry else {
        return entry;
    };
    let here = site.map(|d| d.host.as_str());
    let answers = link.domain() == here
        && (link.kind() == Kind::Blocked || site.is_none_or(|d| d.tenant == **link.tenant()));
    if answers { entry } else { Cached::Missing }
}

/// What a cache entry says about a redirect.
fn resolution(entry: Cached) -> Resolution {
    let Cached::Found(link) = entry else {
        return Resolution::NotFound;
    };
    match link.kind() {
        Kind::Blocked => Resolution::Blocked,
        Kind::Link if link.gone() => Resolution::Gone,
        Kind::Link if link.expires() && link.expired(Utc::now()) => Resolution::Gone,
        Kind::Link => Target::new(link).map_or(Resolution::Gone, Resolution::Redirect),
    }
}

/// Checks that a stored URL can be sent as a `Location` header value. Stored URLs are
/// serialized by the URL parser (ASCII, no control characters), so a failure here is a bug or a
/// hand-edited row.
fn location(code: &str, url: &str) -> Result<(), Error> {
    HeaderValue::from_str(url).map(drop).map_err(|_| {
        Error::Internal(format!(
            "the stored URL of {} is not a valid Location",
            shown(code)
        ))
    })
}

/// `code` as a log may name it: a private code is a secret, so only its shape is named.
fn shown(code: &str) -> &str {
    if code.len() == shape::PRIVATE_LENGTH && code.bytes().all(|b| b.is_ascii_alphanumeric()) {
        "<a private code>"
    } else {
        code
    }
}
