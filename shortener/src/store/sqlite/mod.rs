//! The embedded SQLite backend: one file holds the links and the lease ledger.
//!
//! rusqlite is synchronous, so nothing here runs on the runtime's threads: every write runs on
//! the store's writer thread (`writer`), which owns the one writer connection (SQLite has one
//! writer at a time anyway), and reads run on the blocking pool. The file runs in WAL mode.
//! Every write returns only after an fsync of the WAL that began after its commit (`walsync`,
//! group commit), which is what lets a create be acknowledged (I3) and a lease be trusted (I1);
//! a read returns only what such an fsync already covers.
//!
//! Reads go through a few read-only connections of their own, so a redirect that misses the
//! cache never waits behind a batch of inserts or a click flush. WAL gives each read a snapshot
//! of what was committed when it began, so a read after an acknowledged write sees that write.
//!
//! Generated links are stored at the rowid of their ID (migration 4): a create appends to the
//! end of the table instead of dirtying a random page of a code index, and a lookup decodes the
//! code to find the row (`rows`). Codes without an ID (aliases, private codes) keep a unique
//! index of their own. The file records the code space (key fingerprint and base length) its
//! generated rows were made in and refuses to open under another (`code_space`), since only
//! that code space finds them. The lease ledger is in `ledger`.
//!
//! This file implements the store's interfaces (links, visits, the outbox, the blocklist,
//! domains, API keys, the backend): each method is the hop from the runtime to the writer thread or a
//! reader, kept together (about 860 lines) so the one threading rule above is visible in one
//! place; the SQL lives in the submodules.

mod api_keys;
mod audit;
mod checks;
mod code_space;
mod convert;
mod domains;
mod exclusive;
mod high_water;
mod ledger;
mod manage;
mod readers;
mod redeliver;
mod rollups;
mod rows;
mod sessions;
mod tags;
mod walsync;
use readers::Readers;
mod webhooks;
mod writer;

use super::DomainStore;
use super::migrate::{SQLITE, VERSION_TABLE};
use super::{
    Attempt, Backlog, Delivery, DeliveryRecord, Endpoint, Finished, NewEndpoint, OutboxBound,
};
use super::{AuditEntry, AuditFilter, AuditStore, NewAuditEntry};
use super::{
    BatchMark, BlockedDomain, BlocklistStore, Capabilities, ChangeFeed, ClickRows, DeleteOutcome,
    InsertOutcome, LinkStore, NewLink, OutboxStore, RollupOutcome, RollupPlan, RollupRows,
    StoreError, TagOutcome, UpdateOutcome, VisitStore, WriterStats,
};
use super::{HighWater, Mark, SlotBound};
use super::{KeyStore, NewApiKey, Retried, StoredApiKey};
use super::{NewSession, SessionStore, StoredSession};
use crate::domain::{Domain, DomainSettings};
use crate::domain::{History, Link, LinkPatch, ListQuery, Page, TagChange};
use crate::domain::{StatsQuery, StatsReport};
use chrono::{DateTime, Utc};
use codespace::CodeSpace;
use convert::{db_error, millis};
use id_client::LeaseSource;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use std::path::Path;
use std::sync::{Arc, Mutex};
pub use walsync::Durability;
use walsync::WalSync;
use writer::Writer;

/// Links (and leases) in a local SQLite file. Cheap to clone.
#[derive(Clone)]
pub struct SqliteStore {
    writer: Writer,
    readers: Arc<Readers>,
    sync: Arc<WalSync>,
    space: Arc<CodeSpace>,
    /// The highest ID a stored code decodes to: loaded by [`migrate`](Capabilities::migrate),
    /// raised by the writer thread before each write commits (docs/design.md, I9). Exact,
    /// because this process is the file's only writer.
    high_water: Arc<HighWater>,
    /// The lock that keeps it so ([`exclusive`]): held until the node lets go of it as it
    /// stops ([`SqliteStore::release`]), or the last clone is dropped.
    exclusive: Arc<Mutex<Option<std::fs::File>>>,
}

/// At most this many read connections (fewer on machines with fewer cores, at least two).
const MAX_READERS: usize = 4;

impl SqliteStore {
    /// Opens (creating if needed) the database file at `path`, whose generated codes are made
    /// in `space`, with at most `max_batch` creates in one insert transaction.
    /// [`migrate`](Capabilities::migrate) checks that the file agrees.
    pub fn open(path: &Path, space: Arc<CodeSpace>, max_batch: usize) -> Result<Self, StoreError> {
        // Before anything touches the file: a second writer is refused, not raced.
        let exclusive = Arc::new(Mutex::new(Some(exclusive::take(path)?)));
        let open = || open_connection(path);
        let writer = open()?;
        // WAL is a property of the file: set once here, every later connection uses it.
        writer
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(db_error)?;
        writer
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(db_error)?;
        // 64 MiB of page cache: random codes touch B-tree pages all over the index.
        writer
            .pragma_update(None, "cache_size", -65536)
            .map_err(db_error)?;
        let count = std::thread::available_parallelism()
            .map_or(2, usize::from)
            .clamp(2, MAX_READERS);
        let connections = (0..count).map(|_| open()).collect::<Result<Vec<_>, _>>()?;
        let readers = Readers::new(connections, readers::READ_DEADLINE)?;
        let sync = Arc::new(WalSync::start(path)?);
        let high_water = Arc::new(HighWater::unknown());
        let writer = Writer::start(
            writer,
            Arc::clone(&sync),
            Arc::clone(&space),
            Arc::clone(&high_water),
            max_batch,
        )?;
        Ok(Self {
            writer,
            readers: Arc::new(readers),
            sync,
            space,
            high_water,
            exclusive,
        })
    }

    /// Lets go of the file's one-writer lock ([`exclusive`]): the node calls it as it stops,
    /// after its last write, so that a node or tool started next may open the file while tasks
    /// of this one that are still ending hold the store.
    pub fn release(&self) {
        let mut lock = self.exclusive.lock().unwrap_or_else(|p| p.into_inner());
        *lock = None;
    }

    /// Returns once every write handed to the writer before the call has landed (a round of
    /// its own behind them, covered by an fsync); a writer that has stopped has nothing left.
    pub async fn settle(&self) {
        let _ = self.writer.run(|_| Ok(())).await;
    }

    /// Runs `f` on the writer connection, as a transaction of its own on the writer thread;
    /// returns once an fsync covers it.
    async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.writer.run(f).await
    }

    /// Reads from now on run for `limit` at most, past which SQLite interrupts them and they
    /// fail as the store being unavailable (the node sets its statement timeout,
    /// `SHORTENER_DATABASE_STATEMENT_TIMEOUT_MS`; 10 s until then).
    pub fn set_read_deadline(&self, limit: std::time::Duration) {
        self.readers.set_limit(limit);
    }

    /// Runs `f` on a read-only connection (a free one, within its deadline: [`readers`]);
    /// returns once what it read is covered by an fsync.
    async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let value = self.readers.run(f).await?;
        self.sync.reveal().await?;
        Ok(value)
    }
}

impl LinkStore for SqliteStore {
    async fn insert(&self, link: NewLink) -> Result<InsertOutcome, StoreError> {
        if link.idempotency.is_none() {
            // Batched with the other creates of the writer thread's next round.
            return self.writer.insert(link).await;
        }
        let (space, high_water) = (Arc::clone(&self.space), Arc::clone(&self.high_water));
        // Boxed, so that every create's future does not carry the size of this rarer path's.
        Box::pin(self.write(move |conn| insert_idempotent(conn, &space, &high_water, &link))).await
    }

    async fn insert_many(&self, links: Vec<NewLink>) -> Result<Vec<InsertOutcome>, StoreError> {
        let (space, high_water) = (Arc::clone(&self.space), Arc::clone(&self.high_water));
        // Only an import writes many links at once: a bulk write (rows::insert_bulk).
        self.write(move |conn| rows::insert_bulk(conn, &space, &high_water, &links))
            .await
    }

    async fn get(&self, code: &str) -> Result<Option<Link>, StoreError> {
        let (code, space) = (code.to_string(), Arc::clone(&self.space));
        self.read(move |conn| rows::get_link(conn, &space, &code))
            .await
    }

    async fn get_with_clicks(&self, code: &str) -> Result<Option<Link>, StoreError> {
        let (code, space) = (code.to_string(), Arc::clone(&self.space));
        self.read(move |conn| rows::get_with_clicks(conn, &space, &code))
            .await
    }

    async fn stored_visits(&self, code: &str) -> Result<u64, StoreError> {
        let link = self.get_with_clicks(code).await?;
        Ok(link.map_or(0, |l| l.clicks.human))
    }

    async fn find_dedup(&self, dedup_key: &[u8]) -> Result<Option<Link>, StoreError> {
        let key = dedup_key.to_vec();
        self.read(move |conn| rows::find_dedup(conn, &key)).await
    }

    async fn release_dedup(&self, dedup_key: &[u8], code: &str) -> Result<(), StoreError> {
        let (key, code) = (dedup_key.to_vec(), code.to_string());
        let now = millis(Utc::now());
        self.write(move |conn| {
            conn.execute(
                "UPDATE links SET dedup_key = NULL WHERE dedup_key = ?1 AND code = ?2 \
                 AND (deleted_at IS NOT NULL OR disabled_at IS NOT NULL OR expires_at <= ?3 \
                      OR max_visits IS NOT NULL)",
                rusqlite::params![key, code, now],
            )
            .map(drop)
            .map_err(db_error)
        })
        .await
    }

    async fn find_idempotent(
        &self,
        tenant: &str,
        key: &str,
        expired_before: DateTime<Utc>,
    ) -> Result<Option<(Vec<u8>, Link)>, StoreError> {
        let (tenant, key) = (tenant.to_string(), key.to_string());
        let space = Arc::clone(&self.space);
        let since = millis(expired_before);
        self.read(
            move |conn| match idempotency_claim(conn, &tenant, &key, since)? {
                Some((fingerprint, code)) => {
                    Ok(rows::get_link(conn, &space, &code)?.map(|link| (fingerprint, link)))
                }
                None => Ok(None),
            },
        )
        .await
    }

    async fn delete(
        &self,
        code: &str,
        tenant: Option<&str>,
        key: &str,
    ) -> Result<DeleteOutcome, StoreError> {
        let (code, space) = (code.to_string(), Arc::clone(&self.space));
        let (tenant, key) = (tenant.map(str::to_string), key.to_string());
        // Read here, in the request's span: the writer thread has none.
        let trace = otel::current_traceparent();
        self.write(move |conn| {
            manage::delete(
                conn,
                &space,
                &code,
                tenant.as_deref(),
                &key,
                trace.as_deref(),
            )
        })
        .await
    }

    async fn update(
        &self,
        code: &str,
        tenant: Option<&str>,
        patch: &LinkPatch,
        key: &str,
    ) -> Result<UpdateOutcome, StoreError> {
        let (code, space) = (code.to_string(), Arc::clone(&self.space));
        let (tenant, key, patch) = (tenant.map(str::to_string), key.to_string(), patch.clone());
        let trace = otel::current_traceparent();
        self.write(move |conn| {
            manage::update(
                conn,
                &space,
                &code,
                tenant.as_deref(),
                &patch,
                &key,
                trace.as_deref(),
            )
        })
        .await
    }

    async fn change_tag(
        &self,
        tenant: &str,
        change: &TagChange,
        key: &str,
        max_links: usize,
    ) -> Result<TagOutcome, StoreError> {
        let (tenant, change, key) = (tenant.to_string(), change.clone(), key.to_string());
        let trace = otel::current_traceparent();
        self.write(move |conn| {
            tags::change_tag(conn, &tenant, &change, &key, max_links, trace.as_deref())
        })
        .await
    }

    async fn history(
        &self,
        code: &str,
        tenant: Option<&str>,
        max_events: usize,
    ) -> Result<Option<History>, StoreError> {
        let (code, space) = (code.to_string(), Arc::clone(&self.space));
        let tenant = tenant.map(str::to_string);
        self.read(move |conn| match rows::get_link(conn, &space, &code)? {
            Some(link) if tenant.as_ref().is_none_or(|t| *t == link.tenant) => {
                let newest_first = manage::events(conn, &code, max_events + 1)?;
                Ok(Some(History::of(link, newest_first, max_events)))
            }
            _ => Ok(None),
        })
        .await
    }

    async fn list(&self, query: &ListQuery) -> Result<Page, StoreError> {
        let query = query.clone();
        self.read(move |conn| manage::list(conn, &query)).await
    }

    async fn get_many(&self, codes: &[String]) -> Result<Vec<Link>, StoreError> {
        let (codes, space) = (codes.to_vec(), Arc::clone(&self.space));
        self.read(move |conn| manage::get_many(conn, &space, &codes))
            .await
    }

    async fn purge_idempotency(&self, expired_before: DateTime<Utc>) -> Result<u64, StoreError> {
        let before = millis(expired_before);
        self.write(move |conn| {
            conn.execute(
                "DELETE FROM idempotency_keys WHERE created_at < ?1",
                [before],
            )
            .map(|n| n as u64)
            .map_err(db_error)
        })
        .await
    }

    async fn clean_search_index(&self) -> Result<u64, StoreError> {
        Ok(0)
    }

    async fn count_links(&self) -> Result<u64, StoreError> {
        self.read(|conn| {
            conn.query_row("SELECT count(*) FROM links", [], |r| r.get::<_, i64>(0))
                .map(|n| n as u64)
                .map_err(db_error)
        })
        .await
    }

    fn slot_bound(&self) -> SlotBound {
        match self.high_water.mark() {
            Mark { slot: i64::MAX, .. } => SlotBound::None,
            mark => SlotBound::Exact(mark),
        }
    }

    /// Nothing to read: the mark in memory is exact.
    async fn read_high_water(&self) -> Result<Option<Mark>, StoreError> {
        Ok(match self.slot_bound() {
            SlotBound::Exact(mark) => Some(mark),
            _ => None,
        })
    }
}

impl VisitStore for SqliteStore {
    /// Adds a chunk of click counts in a transaction of its own, answered at its commit: the
    /// flush makes all its chunks durable at once ([`VisitStore::sync_clicks`]).
    async fn add_clicks(&self, mark: BatchMark, rows: ClickRows) -> Result<(), StoreError> {
        self.writer
            .run_unsynced(move |conn| rows::add_clicks(conn, mark, &rows))
            .await
    }

    /// Returns once an fsync covers every click count added before the call.
    async fn sync_clicks(&self) -> Result<(), StoreError> {
        self.write(|_| Ok(())).await
    }

    /// Adds a batch of rollups in a transaction of its own, answered at its commit: the flush
    /// makes all its batches durable at once ([`VisitStore::sync_clicks`]).
    async fn add_rollups(&self, mark: BatchMark, rows: RollupRows) -> Result<(), StoreError> {
        self.writer
            .run_unsynced(move |conn| rollups::add(conn, mark, &rows))
            .await
    }

    async fn stats(&self, query: &StatsQuery) -> Result<StatsReport, StoreError> {
        let query = query.clone();
        // On all connections but one at most: a redirect's cache miss always finds one free.
        let _place = self.readers.heavy_place().await?;
        self.read(move |conn| rollups::stats(conn, &query)).await
    }

    async fn maintain_rollups(&self, plan: RollupPlan) -> Result<RollupOutcome, StoreError> {
        self.write(move |conn| rollups::maintain(conn, &plan)).await
    }

    async fn forget_flush_marks(&self) -> Result<u64, StoreError> {
        self.write(rollups::forget_writers).await
    }
}

impl OutboxStore for SqliteStore {
    async fn retry_deliveries(
        &self,
        endpoint_id: i64,
        event_id: Option<i64>,
        limit: i64,
        max_pending: u64,
    ) -> Result<Retried, StoreError> {
        self.write(move |conn| redeliver::retry(conn, endpoint_id, event_id, limit, max_pending))
            .await
    }

    async fn record_rollup_events(&self, hour: i64) -> Result<u64, StoreError> {
        self.write(move |conn| webhooks::record_rollups(conn, hour))
            .await
    }

    async fn create_endpoint(&self, endpoint: NewEndpoint) -> Result<Option<Endpoint>, StoreError> {
        self.write(move |conn| webhooks::create(conn, &endpoint))
            .await
    }

    async fn endpoints(&self, tenant: Option<&str>) -> Result<Vec<Endpoint>, StoreError> {
        let tenant = tenant.map(str::to_string);
        self.read(move |conn| webhooks::list(conn, tenant.as_deref()))
            .await
    }

    async fn delete_endpoint(&self, id: i64, tenant: Option<&str>) -> Result<bool, StoreError> {
        let tenant = tenant.map(str::to_string);
        self.write(move |conn| webhooks::delete(conn, id, tenant.as_deref()))
            .await
    }

    async fn delivery_log(
        &self,
        id: i64,
        tenant: Option<&str>,
        limit: i64,
    ) -> Result<Option<Vec<DeliveryRecord>>, StoreError> {
        let tenant = tenant.map(str::to_string);
        self.read(move |conn| webhooks::log(conn, id, tenant.as_deref(), limit))
            .await
    }

    async fn claim_deliveries(
        &self,
        lease: std::time::Duration,
        endpoints: i64,
        per_endpoint: i64,
    ) -> Result<Vec<Delivery>, StoreError> {
        self.write(move |conn| webhooks::claim(conn, lease, endpoints, per_endpoint))
            .await
    }

    async fn finish_delivery(&self, attempt: Attempt) -> Result<Finished, StoreError> {
        self.write(move |conn| webhooks::finish(conn, &attempt))
            .await
    }

    async fn release_endpoint(
        &self,
        endpoint_id: i64,
        lease: i64,
        unsent: Vec<i64>,
        hold: Option<std::time::Duration>,
    ) -> Result<(), StoreError> {
        self.write(move |conn| webhooks::release(conn, endpoint_id, lease, &unsent, hold))
            .await
    }

    async fn bound_outbox(&self, max_pending: u64) -> Result<OutboxBound, StoreError> {
        self.write(move |conn| webhooks::bound(conn, max_pending))
            .await
    }

    async fn set_endpoint_enabled(
        &self,
        id: i64,
        tenant: Option<&str>,
        enabled: bool,
    ) -> Result<Option<Endpoint>, StoreError> {
        let tenant = tenant.map(str::to_string);
        self.write(move |conn| webhooks::set_enabled(conn, id, tenant.as_deref(), enabled))
            .await
    }

    async fn outbox_backlog(&self) -> Result<Backlog, StoreError> {
        self.read(|conn| webhooks::backlog(conn)).await
    }

    async fn purge_outbox(
        &self,
        before: chrono::DateTime<chrono::Utc>,
        limit: i64,
    ) -> Result<(u64, u64), StoreError> {
        self.write(move |conn| webhooks::purge(conn, before, limit))
            .await
    }
}

impl BlocklistStore for SqliteStore {
    async fn blocked_domains(&self) -> Result<Vec<BlockedDomain>, StoreError> {
        self.read(|conn| {
            let mut select = conn
                .prepare_cached(
                    "SELECT entry, added_at, added_by FROM blocked_domains ORDER BY entry",
                )
                .map_err(db_error)?;
            let rows = select
                .query_map([], |r| {
                    Ok(BlockedDomain {
                        entry: r.get(0)?,
                        added_at: convert::from_millis(r.get(1)?),
                        added_by: r.get(2)?,
                    })
                })
                .map_err(db_error)?;
            rows.collect::<Result<_, _>>().map_err(db_error)
        })
        .await
    }

    async fn block_domain(&self, entry: &str, key: &str) -> Result<bool, StoreError> {
        let (entry, key) = (entry.to_string(), key.to_string());
        self.write(move |conn| {
            conn.execute(
                "INSERT INTO blocked_domains (entry, added_at, added_by) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                params![entry, millis(Utc::now()), key],
            )
            .map(|n| n == 1)
            .map_err(db_error)
        })
        .await
    }

    async fn unblock_domain(&self, entry: &str) -> Result<bool, StoreError> {
        let entry = entry.to_string();
        self.write(move |conn| {
            conn.execute("DELETE FROM blocked_domains WHERE entry = ?1", [entry])
                .map(|n| n == 1)
                .map_err(db_error)
        })
        .await
    }
}

impl DomainStore for SqliteStore {
    async fn insert_domain(&self, domain: &Domain) -> Result<Option<Domain>, StoreError> {
        let domain = domain.clone();
        self.write(move |conn| domains::insert(conn, &domain)).await
    }

    async fn domain(&self, host: &str, tenant: Option<&str>) -> Result<Option<Domain>, StoreError> {
        let (host, tenant) = (host.to_string(), tenant.map(str::to_string));
        self.read(move |conn| domains::get(conn, &host, tenant.as_deref()))
            .await
    }

    async fn domains(
        &self,
        tenant: Option<&str>,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Domain>, StoreError> {
        let (tenant, after) = (tenant.map(str::to_string), after.map(str::to_string));
        self.read(move |conn| domains::list(conn, tenant.as_deref(), after.as_deref(), limit))
            .await
    }

    async fn set_domain_settings(
        &self,
        host: &str,
        tenant: Option<&str>,
        settings: &DomainSettings,
    ) -> Result<Option<Domain>, StoreError> {
        let (host, tenant, settings) = (
            host.to_string(),
            tenant.map(str::to_string),
            settings.clone(),
        );
        self.write(move |conn| domains::set_settings(conn, &host, tenant.as_deref(), &settings))
            .await
    }

    async fn delete_domain(
        &self,
        host: &str,
        tenant: Option<&str>,
    ) -> Result<crate::store::DomainRemoval, StoreError> {
        let (host, tenant) = (host.to_string(), tenant.map(str::to_string));
        self.write(move |conn| domains::delete(conn, &host, tenant.as_deref()))
            .await
    }
}

impl SessionStore for SqliteStore {
    async fn insert_session(&self, session: &NewSession) -> Result<(), StoreError> {
        let session = session.clone();
        self.write(move |conn| sessions::insert(conn, &session))
            .await
    }

    async fn session(&self, digest: [u8; 32]) -> Result<Option<StoredSession>, StoreError> {
        self.read(move |conn| sessions::find(conn, digest)).await
    }

    async fn touch_session(&self, digest: [u8; 32], at: DateTime<Utc>) -> Result<(), StoreError> {
        self.write(move |conn| sessions::touch(conn, digest, at))
            .await
    }

    async fn switch_session_tenant(
        &self,
        digest: [u8; 32],
        tenant: &str,
    ) -> Result<bool, StoreError> {
        let tenant = tenant.to_string();
        self.write(move |conn| sessions::switch(conn, digest, &tenant))
            .await
    }

    async fn revoke_session(&self, digest: [u8; 32]) -> Result<bool, StoreError> {
        self.write(move |conn| sessions::revoke(conn, digest)).await
    }

    async fn purge_sessions(
        &self,
        expired_before: DateTime<Utc>,
        revoked_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<usize, StoreError> {
        self.write(move |conn| sessions::purge(conn, expired_before, revoked_before, limit))
            .await
    }
}

impl KeyStore for SqliteStore {
    async fn insert_api_key(&self, key: &NewApiKey) -> Result<Option<StoredApiKey>, StoreError> {
        let key = key.clone();
        self.write(move |conn| api_keys::insert(conn, &key)).await
    }

    async fn api_keys(&self, tenant: Option<&str>) -> Result<Vec<StoredApiKey>, StoreError> {
        let tenant = tenant.map(str::to_string);
        self.read(move |conn| api_keys::list(conn, tenant.as_deref()))
            .await
    }

    async fn api_key_live(&self, digest: [u8; 32]) -> Result<bool, StoreError> {
        self.read(move |conn| api_keys::live(conn, &digest)).await
    }

    async fn revoke_api_key(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        let (tenant, name) = (tenant.to_string(), name.to_string());
        self.write(move |conn| api_keys::revoke(conn, &tenant, &name))
            .await
    }

    async fn note_api_key_uses(&self, uses: Vec<(i64, DateTime<Utc>)>) -> Result<(), StoreError> {
        self.write(move |conn| api_keys::note_uses(conn, &uses))
            .await
    }

    async fn refresh_person_claims(
        &self,
        person: &crate::store::Person<'_>,
    ) -> Result<u64, StoreError> {
        let texts = [person.subject, person.claims].map(str::to_string);
        let labels = [person.email, person.name].map(|t| t.map(str::to_string));
        self.write(move |conn| api_keys::refresh_person_claims(conn, &texts, &labels))
            .await
    }
}

impl AuditStore for SqliteStore {
    async fn append_audit(&self, entries: Vec<NewAuditEntry>) -> Result<(), StoreError> {
        let space = Arc::clone(&self.space);
        self.write(move |conn| audit::append(conn, &space, &entries))
            .await
    }

    async fn audit_entries(
        &self,
        filter: &AuditFilter,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let filter = filter.clone();
        let space = Arc::clone(&self.space);
        self.read(move |conn| audit::entries(conn, &space, &filter, limit))
            .await
    }

    async fn purge_audit(&self, before: DateTime<Utc>, limit: usize) -> Result<usize, StoreError> {
        self.write(move |conn| audit::purge(conn, before, limit))
            .await
    }
}

impl Capabilities for SqliteStore {
    async fn migrate(&self) -> Result<usize, StoreError> {
        let (space, high_water) = (Arc::clone(&self.space), Arc::clone(&self.high_water));
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db_error)?;
            tx.execute_batch(&format!(
                "CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
            ))
            .map_err(db_error)?;
            let mut ran = 0;
            for m in SQLITE {
                let done: Option<i64> = tx
                    .query_row(
                        &format!("SELECT version FROM {VERSION_TABLE} WHERE version = ?1"),
                        [m.version],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(db_error)?;
                if done.is_none() {
                    tx.execute_batch(m.sql).map_err(db_error)?;
                    if m.version == manage::HOST_REV_VERSION {
                        manage::fill_host_rev(&tx)?;
                    }
                    if checks::VERSIONS.contains(&m.version) {
                        checks::rewrite(&tx, m.version)?;
                    }
                    tx.execute(
                        &format!("INSERT INTO {VERSION_TABLE} (version, name, applied_at) VALUES (?1, ?2, ?3)"),
                        params![m.version, m.name, millis(Utc::now())],
                    )
                    .map_err(db_error)?;
                    ran += 1;
                }
            }
            code_space::check_code_space(&tx, &space)?;
            // After the code space check, which may move rows another key made to the named
            // placement. On the writer thread, so no insert runs before the mark is set.
            let slot = high_water::load(&tx, &space)?;
            tx.commit().map_err(db_error)?;
            high_water.set(slot);
            Ok(ran)
        })
        .await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.read(|conn| conn.query_row("SELECT 1", [], |_| Ok(())).map_err(db_error))
            .await
    }

    fn writer_stats(&self) -> &WriterStats {
        self.writer.stats()
    }

    fn durability(&self) -> Option<Durability> {
        Some(self.sync.durability())
    }

    fn replica_stats(&self) -> Option<Arc<crate::store::ReplicaStats>> {
        None
    }

    fn change_feed(&self) -> Option<ChangeFeed> {
        // This node is the file's only writer: there is nothing to hear about.
        None
    }

    fn embedded_lease_source(&self, namespace: &str, holder: &str) -> Option<Arc<dyn LeaseSource>> {
        Some(Arc::new(ledger::EmbeddedLeaseSource {
            store: self.clone(),
            namespace: namespace.to_string(),
            holder: holder.to_string(),
        }))
    }
}

/// The fingerprint and code an idempotency key of `tenant` was claimed with, unless the claim
/// is older than `since` (Unix milliseconds).
fn idempotency_claim(
    conn: &Connection,
    tenant: &str,
    key: &str,
    since: i64,
) -> Result<Option<(Vec<u8>, String)>, StoreError> {
    conn.query_row(
        "SELECT fingerprint, code FROM idempotency_keys WHERE tenant = ?1 AND key = ?2 AND created_at >= ?3",
        params![tenant, key, since],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
    .map_err(db_error)
}

/// Inserts `link` and claims its idempotency key in one immediate transaction, or replays the
/// key's first outcome.
fn insert_idempotent(
    conn: &mut Connection,
    space: &CodeSpace,
    high_water: &HighWater,
    link: &NewLink,
) -> Result<InsertOutcome, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    let now = millis(Utc::now());
    let idem = link
        .idempotency
        .as_ref()
        .ok_or_else(|| StoreError::Internal("no idempotency key to claim".into()))?;
    let since = millis(idem.expired_before);
    if let Some((fingerprint, code)) = idempotency_claim(&tx, &link.tenant, &idem.key, since)? {
        if fingerprint != idem.fingerprint {
            return Ok(InsertOutcome::IdempotencyMismatch);
        }
        let first = rows::get_link(&tx, space, &code)?
            .ok_or_else(|| StoreError::Internal(format!("idempotent link {code:?} vanished")))?;
        return Ok(InsertOutcome::Replayed(first));
    }
    let outcome = rows::insert_row(&tx, space, high_water, link, now)?;
    let code = match &outcome {
        InsertOutcome::Created(l) | InsertOutcome::Deduplicated(l) => l.code.clone(),
        _ => return Ok(outcome),
    };
    // An expired claim frees its key.
    tx.execute(
        "DELETE FROM idempotency_keys WHERE tenant = ?1 AND key = ?2",
        params![link.tenant, idem.key],
    )
    .map_err(db_error)?;
    tx.execute(
        "INSERT INTO idempotency_keys (tenant, key, fingerprint, code, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![link.tenant, idem.key, idem.fingerprint, code, now],
    )
    .map_err(db_error)?;
    tx.commit().map_err(db_error)?;
    Ok(outcome)
}

/// A connection to the file at `path`, with the settings every connection of the store has.
fn open_connection(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)
        .map_err(|e| StoreError::Internal(format!("open {}: {e}", path.display())))?;
    conn.set_prepared_statement_cache_capacity(64);
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(db_error)?;
    Ok(conn)
}
