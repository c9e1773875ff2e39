//! The link service: what create, get, delete and resolve mean, shared by every transport.

use crate::auth::Owner;
use crate::cache::{Cached, LinkCache};
use crate::clicks::ClickRecorder;
use crate::domain::{CreateRequest, Error, Link, TargetUrl};
use crate::store::{
    BatchWriter, DeleteOutcome, Idempotency, InsertOutcome, Kind, NewLink, Store, StoreError,
};
use axum::http::HeaderValue;
use chrono::{DateTime, Utc};
use codespace::CodeSpace;
use codespace::shape::{self, CodeKind};
use id_client::{IdError, IdPool};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How many generated IDs one create may skip over planted or unexpected conflicts.
const MAX_GENERATED_ATTEMPTS: usize = 16;
/// How many random private codes one create may try.
const MAX_PRIVATE_ATTEMPTS: usize = 8;
/// The longest idempotency key.
const MAX_IDEMPOTENCY_KEY: usize = 200;

/// A create as it arrives from a transport, before validation.
#[derive(Debug, Clone, Default)]
pub struct CreateInput {
    /// The target URL as given.
    pub url: String,
    /// A custom alias.
    pub alias: Option<String>,
    /// Expiry.
    pub expires_at: Option<DateTime<Utc>>,
    /// Dedup flag.
    pub dedup: bool,
    /// Private flag.
    pub private: bool,
    /// Idempotency key.
    pub idempotency_key: Option<String>,
}

/// What the edge should do with a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Redirect to this URL (the `Location` header value).
    Redirect(HeaderValue),
    /// No such code (or a path that cannot be a code).
    NotFound,
    /// Deleted or expired.
    Gone,
}

/// Counters of the create path, read by the metrics endpoint.
#[derive(Debug, Default)]
pub struct CreateCounters {
    /// Generated codes that were unexpectedly taken (must stay 0: alarm).
    pub generated_conflicts: AtomicU64,
    /// Redirect lookups answered from the cache.
    pub cache_hits: AtomicU64,
    /// Redirect lookups that went to the store.
    pub cache_misses: AtomicU64,
}

/// Settings of the service that come from configuration.
#[derive(Debug, Clone)]
pub struct ServiceSettings {
    /// The public base URL short links start with (ends with `/`).
    pub public_url: String,
    /// The public host, refused as a target.
    pub own_host: Option<String>,
    /// The longest target URL.
    pub max_url_length: usize,
    /// Most rows in one batched insert.
    pub write_batch: usize,
    /// Most batched inserts in flight at once (PostgreSQL).
    pub write_concurrency: usize,
}

/// Creates, reads, deletes and resolves links.
pub struct LinkService {
    store: Store,
    writer: BatchWriter,
    cache: LinkCache,
    clicks: ClickRecorder,
    ids: Arc<IdPool>,
    space: Arc<CodeSpace>,
    settings: ServiceSettings,
    /// Counters for metrics.
    pub counters: CreateCounters,
}

fn store_error(e: StoreError) -> Error {
    match e {
        StoreError::Unavailable(message) | StoreError::Retry(message) => Error::Unavailable {
            message: format!("the store is unavailable: {message}"),
            retry_after: Duration::from_secs(1),
        },
        StoreError::Ambiguous(message) => Error::Unavailable {
            message: format!(
                "the store connection was lost during the commit, so this create may or may not have been stored \
                 ({message}); retry with the same Idempotency-Key to be safe"
            ),
            retry_after: Duration::from_secs(1),
        },
        StoreError::Internal(message) => Error::Internal(message),
    }
}

impl LinkService {
    /// A service over `store`, taking IDs from `ids` and codes from `space`.
    pub fn new(
        store: Store,
        cache: LinkCache,
        ids: Arc<IdPool>,
        space: Arc<CodeSpace>,
        settings: ServiceSettings,
    ) -> Self {
        // On SQLite the store's writer thread batches by itself (its batch size was given when
        // the store was opened); these settings shape the PostgreSQL writer task.
        let writer = BatchWriter::start(
            store.clone(),
            settings.write_batch,
            settings.write_concurrency,
        );
        Self {
            store,
            writer,
            cache,
            clicks: ClickRecorder::default(),
            ids,
            space,
            settings,
            counters: CreateCounters::default(),
        }
    }

    /// The base length L of generated codes.
    pub fn code_length(&self) -> usize {
        self.space.length()
    }

    /// The redirect cache.
    pub fn cache(&self) -> &LinkCache {
        &self.cache
    }

    /// The click recorder.
    pub fn clicks(&self) -> &ClickRecorder {
        &self.clicks
    }

    /// The batching writer's counts.
    pub fn writer_stats(&self) -> &crate::store::WriterStats {
        self.writer.stats()
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The ID pool.
    pub fn ids(&self) -> &IdPool {
        &self.ids
    }

    /// The code space.
    pub fn space(&self) -> &CodeSpace {
        &self.space
    }

    /// The full short URL of `code`.
    pub fn short_url(&self, code: &str) -> String {
        format!("{}{code}", self.settings.public_url)
    }

    /// Validates a transport's input into a [`CreateRequest`] (invariant I6: nothing is stored
    /// for a refused request).
    pub fn validate(&self, input: CreateInput, now: DateTime<Utc>) -> Result<CreateRequest, Error> {
        let url = TargetUrl::parse(
            &input.url,
            self.settings.max_url_length,
            self.settings.own_host.as_deref(),
        )
        .map_err(|e| Error::invalid("invalid_url", e.to_string()))?;
        if let Some(alias) = &input.alias {
            shape::validate_alias(alias, self.space.length())
                .map_err(|e| Error::invalid("invalid_alias", e.to_string()))?;
        }
        let options = [input.alias.is_some(), input.dedup, input.private]
            .iter()
            .filter(|&&b| b)
            .count();
        if options > 1 {
            return Err(Error::invalid(
                "conflicting_options",
                "alias, dedup and private cannot be combined",
            ));
        }
        if let Some(expires_at) = input.expires_at
            && expires_at <= now
        {
            return Err(Error::invalid(
                "invalid_expiry",
                "expires_at must be in the future",
            ));
        }
        if let Some(key) = &input.idempotency_key
            && (key.is_empty()
                || key.len() > MAX_IDEMPOTENCY_KEY
                || !key.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Err(Error::bad_request(
                "invalid_idempotency_key",
                format!(
                    "the idempotency key must be 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII characters"
                ),
            ));
        }
        Ok(CreateRequest {
            url,
            alias: input.alias,
            expires_at: input.expires_at,
            dedup: input.dedup,
            private: input.private,
            idempotency_key: input.idempotency_key,
        })
    }

    /// Creates a link; returns it and whether it is new (false for dedup and idempotent replays).
    /// The link is committed before this returns (invariant I3).
    pub async fn create(
        &self,
        owner: &Owner,
        request: CreateRequest,
    ) -> Result<(Link, bool), Error> {
        let result = self.create_uncached(owner, request).await;
        if let Ok((link, true)) = &result {
            // A probe of this code before it existed may have left a negative cache entry.
            self.cache.invalidate(&link.code);
        }
        result
    }

    async fn create_uncached(
        &self,
        owner: &Owner,
        request: CreateRequest,
    ) -> Result<(Link, bool), Error> {
        let idempotency = request.idempotency_key.as_ref().map(|key| Idempotency {
            key: key.clone(),
            fingerprint: fingerprint(&request),
        });
        if let Some(idem) = &idempotency
            && let Some((stored, link)) = self
                .store
                .find_idempotent(&owner.0, &idem.key)
                .await
                .map_err(store_error)?
        {
            return if stored == idem.fingerprint {
                Ok((link, false))
            } else {
                Err(Error::IdempotencyMismatch)
            };
        }
        let dedup_key = request.dedup.then(|| dedup_key(owner, &request));
        if let Some(key) = &dedup_key
            && let Some(link) = self.store.find_dedup(key).await.map_err(store_error)?
        {
            return Ok((link, false));
        }
        let base = NewLink {
            code: String::new(),
            url: request.url.as_str().to_string(),
            kind: Kind::Generated,
            id: None,
            expires_at: request.expires_at,
            owner: owner.0.clone(),
            dedup_key,
            idempotency,
        };
        if let Some(alias) = &request.alias {
            let link = NewLink {
                code: alias.clone(),
                kind: Kind::Alias,
                ..base
            };
            return match self.writer.insert(link).await.map_err(store_error)? {
                InsertOutcome::CodeTaken => Err(Error::AliasTaken(alias.clone())),
                other => settle(other),
            };
        }
        if request.private {
            for _ in 0..MAX_PRIVATE_ATTEMPTS {
                let link = NewLink {
                    code: shape::generate_private_code(),
                    kind: Kind::Private,
                    ..base.clone()
                };
                match self.writer.insert(link).await.map_err(store_error)? {
                    InsertOutcome::CodeTaken => continue,
                    other => return settle(other),
                }
            }
            return Err(Error::Internal(
                "no free private code after several attempts".into(),
            ));
        }
        for _ in 0..MAX_GENERATED_ATTEMPTS {
            let id = self
                .ids
                .next_id()
                .map_err(|IdError::Exhausted { retry_after }| Error::Unavailable {
                    message: "no IDs in hand: the id-service is unreachable; retry shortly".into(),
                    retry_after,
                })?;
            let code = self.space.encode(id);
            let link = NewLink {
                code: code.clone(),
                id: Some(id),
                ..base.clone()
            };
            match self.writer.insert(link).await.map_err(store_error)? {
                InsertOutcome::CodeTaken => {
                    // By construction this cannot happen: an ID is leased once and the
                    // permutation is a bijection. If it does, the ledger or key is wrong.
                    self.counters
                        .generated_conflicts
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::error!(id, code = %code, "generated code already taken; skipping to the next ID (check the lease ledger and key)");
                }
                other => return settle(other),
            }
        }
        Err(Error::Internal(
            "too many conflicts on generated codes".into(),
        ))
    }

    /// Reads a link (including deleted and expired ones).
    pub async fn get(&self, code: &str) -> Result<Link, Error> {
        if shape::classify(code, self.space.length()).is_none() {
            return Err(Error::NotFound(code.to_string()));
        }
        self.store
            .get_with_clicks(code)
            .await
            .map_err(store_error)?
            .ok_or_else(|| Error::NotFound(code.to_string()))
    }

    /// Deletes a link; deleting twice is not an error.
    pub async fn delete(&self, code: &str) -> Result<(), Error> {
        if shape::classify(code, self.space.length()).is_none() {
            return Err(Error::NotFound(code.to_string()));
        }
        let outcome = self.store.delete(code).await.map_err(store_error)?;
        self.cache.invalidate(code);
        match outcome {
            DeleteOutcome::Deleted | DeleteOutcome::AlreadyDeleted => Ok(()),
            DeleteOutcome::NotFound => Err(Error::NotFound(code.to_string())),
        }
    }

    /// Where `segment` redirects, as of `now` (the request's arrival: the cache's lifetimes are
    /// checked against it, so a redirect reads the clock once for both this and its latency),
    /// when that is known without the store: a segment that cannot be a code, or a cached code.
    /// `None` means the store must be asked ([`LinkService::resolve`]).
    pub fn resolve_cached(&self, segment: &str, now: Instant) -> Option<Resolution> {
        let Some(kind) = shape::classify(segment, self.space.length()) else {
            return Some(Resolution::NotFound);
        };
        if let Some(entry) = self.cache.get(segment, now) {
            self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Some(resolution(entry));
        }
        // A generated-shape code that no ID encodes to was never issued. Every L-character code
        // is some ID's code, so only longer ones need the check.
        if kind == CodeKind::Generated
            && segment.len() > self.space.length()
            && self.space.decode(segment).is_err()
        {
            self.counters.cache_misses.fetch_add(1, Ordering::Relaxed);
            self.cache.put(segment, Cached::Missing);
            return Some(Resolution::NotFound);
        }
        None
    }

    /// Where `segment` redirects, as of `now`: [`LinkService::resolve_cached`], else the store
    /// (and the answer is cached).
    pub async fn resolve(&self, segment: &str, now: Instant) -> Result<Resolution, Error> {
        if let Some(resolution) = self.resolve_cached(segment, now) {
            return Ok(resolution);
        }
        self.counters.cache_misses.fetch_add(1, Ordering::Relaxed);
        let entry = match self.store.get(segment).await.map_err(store_error)? {
            Some(link) => Cached::Link {
                location: location(segment, link.url)?,
                expires_at: link.expires_at,
                deleted: link.deleted_at.is_some(),
            },
            None => Cached::Missing,
        };
        self.cache.put(segment, entry.clone());
        Ok(resolution(entry))
    }
}

/// What a cache entry says about a redirect.
fn resolution(entry: Cached) -> Resolution {
    match entry {
        Cached::Missing => Resolution::NotFound,
        Cached::Link { deleted: true, .. } => Resolution::Gone,
        Cached::Link {
            expires_at: Some(t),
            ..
        } if t <= Utc::now() => Resolution::Gone,
        Cached::Link { location, .. } => Resolution::Redirect(location),
    }
}

/// A stored URL as a `Location` header value. Stored URLs are serialized by the URL parser
/// (ASCII, no control characters), so a failure here is a bug or a hand-edited row.
fn location(code: &str, url: String) -> Result<HeaderValue, Error> {
    HeaderValue::try_from(url).map_err(|_| {
        tracing::error!(code, "stored URL is not a valid header value");
        Error::Internal(format!("the stored URL of {code} is not a valid Location"))
    })
}

fn settle(outcome: InsertOutcome) -> Result<(Link, bool), Error> {
    match outcome {
        InsertOutcome::Created(link) => Ok((link, true)),
        InsertOutcome::Deduplicated(link) | InsertOutcome::Replayed(link) => Ok((link, false)),
        InsertOutcome::IdempotencyMismatch => Err(Error::IdempotencyMismatch),
        InsertOutcome::CodeTaken => Err(Error::Internal("code taken".into())),
    }
}

/// SHA-256 over NUL-separated fields, under a domain tag.
fn digest(tag: &[u8], fields: &[&[u8]]) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(tag);
    for field in fields {
        h.update([0]);
        h.update(field);
    }
    h.finalize().to_vec()
}

fn expiry_bytes(request: &CreateRequest) -> [u8; 8] {
    request
        .expires_at
        .map_or(i64::MIN, |t| t.timestamp_millis())
        .to_be_bytes()
}

/// The digest that tells a true retry (same request) from a reused idempotency key.
fn fingerprint(request: &CreateRequest) -> Vec<u8> {
    let flags = [u8::from(request.dedup), u8::from(request.private)];
    let alias = request.alias.as_deref().unwrap_or("");
    digest(
        b"create v1",
        &[
            request.url.as_str().as_bytes(),
            alias.as_bytes(),
            &expiry_bytes(request),
            &flags,
        ],
    )
}

/// The dedup key: one live generated link per (owner, URL, expiry).
fn dedup_key(owner: &Owner, request: &CreateRequest) -> Vec<u8> {
    digest(
        b"dedup v1",
        &[
            owner.0.as_bytes(),
            request.url.as_str().as_bytes(),
            &expiry_bytes(request),
        ],
    )
}
