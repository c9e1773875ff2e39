//! Where a code redirects: the cache first, then the store, and paths that cannot be codes
//! answered without either.

use super::cache::{Cached, LinkCache, VisitLimit};
use crate::domain::Error;
use crate::domain::PasswordHash;
use crate::metrics::{Sample, Samples};
use crate::store::{LinkStore, Store};
use crate::targets::TargetRules;
use crate::visits::{VisitKind, Visits};
use axum::http::HeaderValue;
use chrono::Utc;
use codespace::CodeSpace;
use codespace::shape;
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
    /// Its visit limit, if it has one.
    pub limit: Option<Arc<VisitLimit>>,
    /// Its password's hash, if it is protected.
    pub password: Option<Arc<PasswordHash>>,
    /// Its tenant.
    pub tenant: Arc<str>,
}

impl Target {
    /// Whether the visit may be served under the link's visit limit, counting it if it is a
    /// person's (only people's visits count against the limit).
    pub fn admits(&self, kind: VisitKind) -> bool {
        self.limit.as_ref().is_none_or(|limit| match kind {
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
}

/// Resolves codes for redirects.
pub struct Resolver {
    store: Store,
    cache: LinkCache,
    space: Arc<CodeSpace>,
    targets: Arc<TargetRules>,
    visits: Arc<Visits>,
    counters: Arc<LookupCounters>,
}

impl Resolver {
    /// A resolver over `store` behind `cache`, for codes of `space`, answering links to
    /// domains the `targets` rules block as blocked, and counting a visit limit from the
    /// stored visits and those `visits` has not flushed yet.
    pub fn new(
        store: Store,
        cache: LinkCache,
        space: Arc<CodeSpace>,
        targets: Arc<TargetRules>,
        visits: Arc<Visits>,
    ) -> Self {
        Self {
            store,
            cache,
            space,
            targets,
            visits,
            counters: Arc::default(),
        }
    }

    /// The lookup counters (reported in `/metrics` by the resolver's [`Sample`]).
    pub fn counters(&self) -> Arc<LookupCounters> {
        Arc::clone(&self.counters)
    }

    /// Where `segment` redirects, as of `now` (the request's arrival: the cache's lifetimes are
    /// checked against it, so a redirect reads the clock once for both this and its latency),
    /// when that is known without the store: a segment that cannot be a code, or a cached code.
    /// `None` means the store must be asked ([`Resolver::resolve`]).
    pub fn resolve_cached(&self, segment: &str, now: Instant) -> Option<Resolution> {
        if shape::classify(segment, self.space.length()).is_none() {
            return Some(Resolution::NotFound);
        }
        if let Some(entry) = self.cache.get(segment, now) {
            self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Some(resolution(entry));
        }
        // A code of generated shape that no ID encodes to is still asked of the store: an
        // imported legacy code may spell it.
        None
    }

    /// Where `segment` redirects, as of `now`: [`Resolver::resolve_cached`], else the store
    /// (and the answer is cached).
    pub async fn resolve(&self, segment: &str, now: Instant) -> Result<Resolution, Error> {
        if let Some(resolution) = self.resolve_cached(segment, now) {
            return Ok(resolution);
        }
        self.counters.cache_misses.fetch_add(1, Ordering::Relaxed);
        let generation = self.cache.generation();
        let entry = match self.store.get(segment).await? {
            Some(link) if link.deleted_at.is_none() && self.targets.blocks_stored(&link.url) => {
                Cached::Blocked
            }
            Some(link) => {
                let limit = match link.max_visits {
                    None => None,
                    Some(max) => {
                        // Read after the link, so no visit flushed in between is missed.
                        let stored = self
                            .store
                            .get_with_clicks(segment)
                            .await?
                            .map_or(0, |l| l.clicks.human);
                        let pending = self.visits.pending_human(segment);
                        Some(Arc::new(VisitLimit::new(max, stored + pending)))
                    }
                };
                Cached::Link {
                    location: location(segment, link.url)?,
                    expires_at: link.expires_at,
                    gone: link.deleted_at.is_some() || link.disabled_at.is_some(),
                    limit,
                    password: link.password.map(Arc::new),
                    tenant: link.tenant.as_str().into(),
                }
            }
            None => Cached::Missing,
        };
        self.cache.put_at(segment, entry.clone(), generation);
        Ok(resolution(entry))
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
        out.gauge(
            "shortener_cache_entries",
            "Entries held in the redirect cache (links and recently unknown codes)",
            self.cache.len() as f64,
        )
    }
}

/// What a cache entry says about a redirect.
fn resolution(entry: Cached) -> Resolution {
    match entry {
        Cached::Missing => Resolution::NotFound,
        Cached::Blocked => Resolution::Blocked,
        Cached::Link { gone: true, .. } => Resolution::Gone,
        Cached::Link {
            expires_at: Some(t),
            ..
        } if t <= Utc::now() => Resolution::Gone,
        Cached::Link {
            location,
            limit,
            password,
            tenant,
            ..
        } => Resolution::Redirect(Target {
            location,
            limit,
            password,
            tenant,
        }),
    }
}

/// A stored URL as a `Location` header value. Stored URLs are serialized by the URL parser
/// (ASCII, no control characters), so a failure here is a bug or a hand-edited row. A private
/// code is a secret: the log names only its shape.
fn location(code: &str, url: String) -> Result<HeaderValue, Error> {
    HeaderValue::try_from(url).map_err(|_| {
        let shown = if code.len() == shape::PRIVATE_LENGTH
            && code.bytes().all(|b| b.is_ascii_alphanumeric())
        {
            "<a private code>"
        } else {
            code
        };
        Error::Internal(format!("the stored URL of {shown} is not a valid Location"))
    })
}
