//! The link service: what create, get and delete mean, shared by every transport.
//!
//! A create takes a checked [`CreateRequest`] and an authenticated [`Caller`], replays an
//! idempotent retry or a dedup twin, else writes a new row one of three ways (`create`): an
//! alias as given, a random private code, or the code of the next ID from the node's
//! [`IdPool`]. The store answers only after the commit (invariant I3). Whatever this node
//! changes is told to its [`LinkChanges`] listener (the redirect cache), so a probe of a code
//! before it existed, or a cached copy of a deleted link, is dropped at once.

mod audit;
mod counters;
mod create;
mod cursor;
mod digest;
mod export;
mod import;
mod manage;
mod tags;

pub use crate::limits::{Place, Places};
pub use counters::CreateCounters;
pub use cursor::CursorKey;
pub use export::{BUFFERED_PAGES, EXPORT_PAGE, ExportBatch, ExportLimits, LinkExport};
pub use import::{
    CHUNK_BYTES, CHUNK_ROWS, ImportEvent, ImportSettings, ImportStop, ImportSummary, ImportTotals,
    InputRow, ROW_IDLE, RowResult, RowStatus, import_idle,
};
pub use manage::ListPage;
pub use tags::MAX_TAG_CHANGE_LINKS;

use crate::audit::{Action, AuditLog, AuditSettings};
use crate::domain::{
    Caller, CreateRequest, Error, Link, LinkState, PasswordHash, Scope, ShortCode,
};
use crate::limits::Limits;
use crate::store::{DeleteOutcome, Idempotency, LinkStore, Store};
use chrono::{DateTime, Utc};
use codespace::CodeSpace;
use id_client::IdPool;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Whether an answer to `caller` may show every field of a link (`created`: the caller's own
/// request just made it). A caller that may read links sees every field. One that may not (a
/// `links:write` or `links:create` key without `links:read`) sees every field of a link its
/// request created, all of them its own input or fresh defaults; of any other link (one it
/// changed, or an existing one that a dedup or idempotent create answered) it sees only the
/// code and short URL, which it named or was given: the target, tags, times, state, owner,
/// tenant, flags and click counts are what only a read reveals.
pub fn answers_whole(caller: &Caller, created: bool) -> bool {
    created || caller.may(Scope::LinksRead)
}

/// The Argon2id hash of `password`, made on the blocking pool (it costs tens of milliseconds).
pub(crate) async fn hash_password(password: String) -> Result<PasswordHash, Error> {
    let turn = hashing_turn().await?;
    tokio::task::spawn_blocking(move || {
        // Held by the hash, not the request: a request dropped while it runs (a client gone,
        // a deadline) frees its turn only once the hash it started is done.
        let _turn = turn;
        PasswordHash::hash(&password)
    })
    .await
    .map_err(|e| Error::Internal(format!("password hashing failed: {e}")))?
}

/// Whether `password` is the password of `link` (one that has none has no password to match).
async fn same_password(link: &Link, password: String) -> Result<bool, Error> {
    let Some(hash) = link.password.clone() else {
        return Ok(false);
    };
    let turn = hashing_turn().await?;
    tokio::task::spawn_blocking(move || {
        let _turn = turn;
        hash.verify(&password)
    })
    .await
    .map_err(|e| Error::Internal(format!("password check failed: {e}")))
}

/// A turn at Argon2 for a create or an edit: as many run at once as the machine has cores
/// (each takes ~19 MiB and tens of milliseconds of one core), the rest wait in order, so a
/// batch of protected links cannot take the node's memory or its blocking threads. (A
/// visitor's password check has its own pool, `limits::password_checks`.)
async fn hashing_turn() -> Result<tokio::sync::SemaphorePermit<'static>, Error> {
    hashing_turns()
        .acquire()
        .await
        .map_err(|e| Error::Internal(format!("password hashing is closed: {e}")))
}

/// The turns [`hashing_turn`] hands out, one per core.
fn hashing_turns() -> &'static tokio::sync::Semaphore {
    static TURNS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    TURNS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        tokio::sync::Semaphore::new(cores)
    })
}

/// Told of every link this node creates or changes.
pub trait LinkChanges: Send + Sync {
    /// `code` was created, changed or deleted: forget what is known of it.
    fn changed(&self, code: &str);
}

/// How long a caller refused an import place is asked to wait.
const IMPORT_RETRY_AFTER: Duration = Duration::from_secs(5);

/// Creates, reads and deletes links.
pub struct LinkService {
    store: Store,
    ids: Arc<IdPool>,
    space: Arc<CodeSpace>,
    changes: Arc<dyn LinkChanges>,
    counters: Arc<CreateCounters>,
    idempotency_ttl: Duration,
    cursors: CursorKey,
    exports: export::ExportGate,
    imports: crate::limits::Gate,
    import_idle: Duration,
    import_max: Duration,
    rates: Arc<Limits>,
    tag_change_links: usize,
    audit: Arc<AuditLog>,
}

/// What bounds a caller's use of the link service beyond admission.
pub struct Budgets {
    /// Exports running at once, and how long they wait on a reader.
    pub exports: ExportLimits,
    /// Imports running at once.
    pub imports: Places,
    /// How long an import waits for its next row.
    pub import_idle: Duration,
    /// The longest one import runs.
    pub import_max: Duration,
    /// The keys' rate limits: each answer an import gives about a code is charged as a read.
    pub rates: Arc<Limits>,
    /// The most links one rename or delete of a tag changes (at most
    /// [`MAX_TAG_CHANGE_LINKS`]); one that would change more is refused, `too_many_links`.
    pub tag_change_links: usize,
}

impl LinkService {
    /// A service over `store`, taking IDs from `ids` and codes from `space`, telling
    /// `changes` what it changes; an idempotency key is remembered for `idempotency_ttl`, and
    /// list cursors are sealed with `cursors`, and callers are held to `budgets`.
    pub fn new(
        store: Store,
        ids: Arc<IdPool>,
        space: Arc<CodeSpace>,
        changes: Arc<dyn LinkChanges>,
        idempotency_ttl: Duration,
        cursors: CursorKey,
        budgets: Budgets,
    ) -> Self {
        let store_for_audit = store.clone();
        Self {
            store,
            ids,
            space,
            changes,
            counters: Arc::default(),
            idempotency_ttl,
            cursors,
            exports: export::ExportGate::new(budgets.exports),
            imports: crate::limits::Gate::new(budgets.imports, IMPORT_RETRY_AFTER),
            import_idle: budgets.import_idle,
            import_max: budgets.import_max,
            rates: budgets.rates,
            tag_change_links: budgets.tag_change_links,
            audit: Arc::new(AuditLog::new(store_for_audit, AuditSettings::default())),
        }
    }

    /// `password` hashed for a link, counted.
    async fn hash(&self, password: String) -> Result<PasswordHash, Error> {
        self.counters
            .password_hashes
            .fetch_add(1, Ordering::Relaxed);
        hash_password(password).await
    }

    /// The service recording its changes in `audit` (the node's one log) rather than the
    /// log of its own it starts with.
    pub fn with_audit(mut self, audit: Arc<AuditLog>) -> Self {
        self.audit = audit;
        self
    }

    /// Claims of idempotency keys made before this have expired.
    pub fn idempotency_cutoff(&self) -> DateTime<Utc> {
        Utc::now()
            - chrono::Duration::from_std(self.idempotency_ttl).unwrap_or(chrono::Duration::MAX)
    }

    /// The create path's counters (a part of `/metrics`).
    pub fn counters(&self) -> Arc<CreateCounters> {
        Arc::clone(&self.counters)
    }

    /// Whether `link` redirects now (active: not disabled, expired or past its visit limit,
    /// by the visits the store holds).
    async fn redirects(&self, link: &Link) -> Result<bool, Error> {
        let mut counted = link.clone();
        if link.max_visits.is_some() {
            counted.clicks.human = self.store.stored_visits(&link.code).await?;
        }
        Ok(counted.state(Utc::now()) == LinkState::Active)
    }

    /// Creates a link for `caller`; returns it and whether it is new (false for dedup and
    /// idempotent replays). The link is committed before this returns (invariant I3).
    pub async fn create(
        &self,
        caller: &Caller,
        request: CreateRequest,
    ) -> Result<(Link, bool), Error> {
        let result = self.create_uncached(caller, request).await;
        if let Ok((link, true)) = &result {
            // A probe of this code before it existed may have left a negative cache entry.
            self.changes.changed(&link.code);
        }
        result
    }

    async fn create_uncached(
        &self,
        caller: &Caller,
        request: CreateRequest,
    ) -> Result<(Link, bool), Error> {
        let idempotency = request.idempotency_key.as_ref().map(|key| Idempotency {
            key: key.clone(),
            fingerprint: digest::fingerprint(&request),
            expired_before: self.idempotency_cutoff(),
        });
        if let Some(idem) = &idempotency
            && let Some((stored, link)) = self
                .store
                .find_idempotent(&caller.tenant, &idem.key, idem.expired_before)
                .await?
        {
            // The fingerprint holds only whether a password was given: a retry's password
            // must be the link's.
            let same = stored == idem.fingerprint
                && match &request.password {
                    None => true,
                    Some(password) => same_password(&link, password.clone()).await?,
                };
            return if same {
                Ok((link, false))
            } else {
                Err(Error::IdempotencyMismatch)
            };
        }
        if let Some(host) = &request.domain {
            self.check_domain(caller, host).await?;
        }
        let dedup_key = request
            .dedup
            .then(|| digest::dedup_key(&caller.tenant, &request));
        if let Some(key) = &dedup_key
            && let Some(link) = self.store.find_dedup(key).await?
        {
            if self.redirects(&link).await? {
                return Ok((link, false));
            }
            // Deleted, disabled, expired or used up: answering it would hand out a link that
            // answers 410 (a Bitly or Shlink client sees no state). It gives its key up to a new link.
            self.store.release_dedup(key, &link.code).await?;
        }
        let mut row = create::Row {
            url: request.url.as_str().to_string(),
            expires_at: request.expires_at,
            tenant: caller.tenant.to_string(),
            owner: caller.key.to_string(),
            dedup_key,
            idempotency,
            tags: request.tags,
            max_visits: request.max_visits,
            import_batch: None,
            created_at: None,
            password: match request.password {
                Some(password) => Some(self.hash(password).await?),
                None => None,
            },
            domain: request.domain,
            routes: request.routes,
            audit: None,
        };
        // The entry goes in with the row, in its transaction (the store writes it only for a
        // row it inserted), so a create that committed always has its entry.
        row.audit = Some(audit::created_entry(caller, &row));
        if let Some(alias) = request.alias {
            create::alias(&self.store, row, alias).await
        } else if request.private {
            create::private(&self.store, row).await
        } else {
            create::generated(&self.store, &self.ids, &self.space, &self.counters, row).await
        }
    }

    /// Checks that `host` is a branded domain of the caller's tenant (a link may be put only on
    /// its own tenant's domains, whatever the caller's scopes): another tenant's domain and a
    /// host that is no domain are refused alike, `unknown_domain`, telling nothing of whose it
    /// is.
    pub(crate) async fn check_domain(&self, caller: &Caller, host: &str) -> Result<(), Error> {
        use crate::store::DomainStore;
        match self.store.domain(host, Some(&caller.tenant)).await? {
            Some(_) => Ok(()),
            None => Err(Error::invalid(
                "unknown_domain",
                format!(
                    "{} is not a domain of tenant {}; claim it first (POST /api/v1/domains)",
                    crate::domain::echo(host),
                    caller.tenant
                ),
            )),
        }
    }

    /// Checks that the link of `code` may move to `domain` (`None`: the default domain): only a
    /// code of generated or private shape moves (its key is the same on every domain; an alias
    /// is unique per domain, so moving it would make it another link), and only to a domain of
    /// the link's own tenant.
    pub(crate) async fn check_move(
        &self,
        caller: &Caller,
        code: &ShortCode,
        domain: Option<&str>,
    ) -> Result<(), Error> {
        if code.kind() == codespace::shape::CodeKind::Alias {
            return Err(Error::invalid(
                "alias_not_movable",
                "an alias is unique per domain and cannot move: create it on the other domain, then delete this one",
            ));
        }
        let Some(host) = domain else {
            return Ok(());
        };
        let link = self.get(caller, code).await?;
        let owner = Caller {
            tenant: link.tenant.as_str().into(),
            ..caller.clone()
        };
        self.check_domain(&owner, host).await
    }

    /// Reads a link (including deleted and expired ones) with its click counts. Another
    /// tenant's link, and a link on another domain than the one the caller named, are
    /// [`Error::NotFound`], exactly as an unknown code is.
    pub async fn get(&self, caller: &Caller, code: &ShortCode) -> Result<Link, Error> {
        self.store
            .get_with_clicks(code.as_str())
            .await?
            .filter(|link| caller.sees(&link.tenant) && code.names(link))
            .ok_or_else(|| Error::NotFound(code.shown().to_string()))
    }

    /// Deletes a link of the caller's tenant (any tenant's for `admin`); deleting twice is not
    /// an error. Another tenant's link is [`Error::NotFound`] and stays as it is.
    pub async fn delete(&self, caller: &Caller, code: &ShortCode) -> Result<(), Error> {
        // Read first: the audit entry is filed under the link's tenant (an admin may delete
        // another tenant's), and a code found under the same key on every domain is deleted
        // only on the named domain.
        let link = self.get(caller, code).await?;
        let outcome = self
            .store
            .delete(code.as_str(), caller.tenant_scope(), &caller.author())
            .await?;
        if outcome != DeleteOutcome::NotFound {
            self.changes.changed(code.as_str());
        }
        if outcome == DeleteOutcome::Deleted {
            let change = serde_json::json!({ "deleted": true });
            self.audit_link(caller, &link.tenant, &link.code, Action::LinkDelete, change)
                .await;
        }
        match outcome {
            DeleteOutcome::Deleted | DeleteOutcome::AlreadyDeleted => Ok(()),
            DeleteOutcome::NotFound => Err(Error::NotFound(code.shown().to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits up to `within` for `done`, yielding between looks (a hash takes tens of
    /// milliseconds; the first look must come well within one).
    async fn until(what: &str, within: Duration, done: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + within;
        while !done() {
            assert!(tokio::time::Instant::now() < deadline, "{what}");
            tokio::task::yield_now().await;
        }
    }

    /// A create dropped while its password is hashed (a client gone, a deadline) leaves the
    /// hash running on the blocking pool: its turn must stay taken until the hash ends, or
    /// requests dropped one after another would run hashes past one per core.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_hash_keeps_its_turn_until_the_hash_is_done() {
        let turns = hashing_turns();
        let cores = turns.available_permits();
        let hashes: Vec<_> = (0..cores)
            .map(|_| tokio::spawn(hash_password("correct horse battery".into())))
            .collect();
        until("every turn is taken", Duration::from_secs(30), || {
            turns.available_permits() == 0
        })
        .await;
        for hash in &hashes {
            hash.abort();
        }
        for hash in hashes {
            assert!(hash.await.is_err_and(|e| e.is_cancelled()), "dropped");
        }
        assert_eq!(
            turns.available_permits(),
            0,
            "the hashes still run, and still hold their turns"
        );
        until(
            "the hashes give their turns back",
            Duration::from_secs(60),
            || turns.available_permits() == cores,
        )
        .await;
    }
}
