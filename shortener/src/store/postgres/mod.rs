//! The PostgreSQL backend (deadpool-postgres over tokio-postgres), shared by every node of a
//! distributed deployment.
//!
//! `insert` batches concurrent creates (`batch`), `insert_rows` and `insert_one` are the two
//! ways a row is written (`insert`), reads and the other writes are in `read` and `write`,
//! and [`ChangeFeed`] tells every node what any node changed (`listen`).
//!
//! This file implements the store's interfaces (links, visits, the outbox, the blocklist,
//! domains, API keys, the backend), one short method per operation that picks the connection (primary or
//! replica) and hands the work to the module that holds its SQL; they stay together (about
//! 790 lines) so that routing is visible in one place.

mod api_keys;
mod audit;
mod batch;
mod connect;
mod domains;
mod error;
mod insert;
mod layout;
mod list;
mod listen;
mod read;
mod redeliver;
mod relayout;
mod replica;
mod replica_marks;
mod rollups;
mod send;
mod sessions;
mod tags;
mod update;
mod webhooks;
mod write;

use super::DomainStore;
use super::migrate::ADVISORY_LOCK;
use super::{
    Attempt, Backlog, Delivery, DeliveryRecord, Endpoint, Finished, NewEndpoint, OutboxBound,
};
use super::{AuditEntry, AuditFilter, AuditStore, NewAuditEntry};
use super::{
    BatchMark, BlockedDomain, BlocklistStore, Capabilities, ClickRows, DeleteOutcome, Durability,
    InsertOutcome, LinkStore, NewLink, OutboxStore, RollupOutcome, RollupPlan, RollupRows,
    StoreError, TagOutcome, UpdateOutcome, VisitStore, WriterStats,
};
use super::{HighWater, Mark, SlotBound, undecodable};
use super::{KeyStore, NewApiKey, Retried, StoredApiKey};
use super::{NewSession, SessionStore, StoredSession};
use crate::domain::{
    ClickCounts, History, Link, LinkPatch, ListQuery, Page, PasswordHash, TagChange,
};
use crate::domain::{Domain, DomainSettings};
use crate::domain::{StatsQuery, StatsReport};
use batch::{Batcher, Shape};
use chrono::{DateTime, Utc};
use codespace::CodeSpace;
pub use connect::migrate_database;
use error::pool_error;
use id_client::LeaseSource;
use layout::Layout;
pub use listen::{ChangeFeed, NOTIFY_CHANNEL};
pub use pgtls::pooler::PoolMode;
pub use relayout::{LayoutOptions, LayoutStatus};
pub use replica::{Fallback, ReplicaStats};
use replica::{Replica, Route, Scope};
use send::{Conn, Pooled};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::Row;

/// How to connect and batch.
#[derive(Debug, Clone)]
pub struct PgSettings {
    /// The connection string (`DATABASE_URL`).
    pub url: String,
    /// A streaming replica's connection string (`SHORTENER_DATABASE_READ_URL`), read instead
    /// of the primary where a lagging answer cannot mislead (see [`replica`]).
    pub read_url: Option<String>,
    /// PEM CA bundle trusted besides the system roots, for `sslmode=require`.
    pub ca_file: Option<PathBuf>,
    /// Most connections in the pool.
    pub max_connections: usize,
    /// Bound of connecting, waiting for a pooled connection and recycling one.
    pub timeout: Duration,
    /// Most rows in one batched insert.
    pub write_batch: usize,
    /// Most batched inserts in flight at once.
    pub write_concurrency: usize,
    /// Creates a batch waits for before it starts beside another in flight.
    pub write_fill: usize,
    /// The bound of one statement (`SHORTENER_DATABASE_STATEMENT_TIMEOUT_MS`); migrations and
    /// maintenance lift it for their own statements (an export reads a page per statement,
    /// under it).
    pub statement_timeout: Duration,
    /// The code space: where a code's row is (see [`layout`]).
    pub space: Arc<CodeSpace>,
    /// The mode of a pooler between the node and PostgreSQL (`SHORTENER_DATABASE_POOL_MODE`):
    /// in transaction mode statements are sent unnamed and no session setting is made.
    pub pool_mode: PoolMode,
    /// A connection string that reaches the primary itself (`SHORTENER_DATABASE_DIRECT_URL`),
    /// for what needs a session of its own in transaction mode: the change feed's LISTEN, the
    /// migrations and the layout tool.
    pub direct_url: Option<String>,
}

/// Links in PostgreSQL. Cheap to clone (a pool handle and a writer handle).
#[derive(Clone)]
pub struct PgStore {
    pool: Pooled,
    /// Sessions of their own (migrations, layout runs): the direct URL's pool in transaction
    /// mode, the main pool otherwise.
    direct: Pooled,
    feed: ChangeFeed,
    batcher: Batcher,
    replica: Option<Arc<Replica>>,
    /// How rows are found (read at migration and every second after).
    layout: Arc<Layout>,
    /// Whether the layout is being read again every second.
    watching: Arc<std::sync::atomic::AtomicBool>,
    /// The days whose rollup partitions are known to exist.
    partitions: Arc<rollups::Partitions>,
    /// The highest slot as last read, or written by this node (docs/design.md, I9): other
    /// nodes write above it, so it only says which codes need a fresh read before refusal.
    high_water: Arc<HighWater>,
    /// The pool's share stats statements run on ([`rollups::StatsShare`]).
    stats_share: Arc<rollups::StatsShare>,
}

/// The columns every read of a link selects, in the order [`link_from_row`] reads them.
const LINK_COLUMNS: &str = "code, long_url, created_at, expires_at, deleted_at, tenant, owner, disabled_at, max_visits, tags, import_batch, password_hash, domain, routing";
/// [`LINK_COLUMNS`] of the table aliased `l`.
const L_LINK_COLUMNS: &str = "l.code, l.long_url, l.created_at, l.expires_at, l.deleted_at, l.tenant, l.owner, l.disabled_at, l.max_visits, l.tags, l.import_batch, l.password_hash, l.domain, l.routing";
/// How many columns [`LINK_COLUMNS`] holds (click counts follow them where a read joins them).
const LINK_COLUMN_COUNT: usize = 14;

fn link_from_row(row: &Row) -> Link {
    Link {
        code: row.get(0),
        url: row.get(1),
        created_at: row.get(2),
        expires_at: row.get(3),
        deleted_at: row.get(4),
        tenant: row.get(5),
        owner: row.get(6),
        disabled_at: row.get(7),
        max_visits: row.get::<_, Option<i64>>(8).map(|n| n.max(0) as u64),
        tags: row.get(9),
        import_batch: row.get(10),
        password: row
            .get::<_, Option<String>>(11)
            .map(PasswordHash::from_stored),
        domain: row.get(12),
        routes: crate::domain::Routes::from_stored(row.get(13)),
        clicks: ClickCounts::default(),
    }
}

/// A link and the click counts that follow its columns in `row`.
fn link_with_clicks(row: &Row) -> Link {
    let mut link = link_from_row(row);
    let count = |i: usize| {
        row.get::<_, Option<i64>>(LINK_COLUMN_COUNT + i)
            .unwrap_or(0)
            .max(0) as u64
    };
    link.clicks = ClickCounts {
        human: count(0),
        head: count(1),
        bot: count(2),
    };
    link
}

impl PgStore {
    /// A pool for `settings` and its batching writer (started on the current tokio runtime).
    /// Connecting is lazy: this succeeds while the database is down, and calls fail fast
    /// (within the timeout) until it is back. TLS follows the URL's `sslmode`; the CA file adds
    /// trusted roots (see [`pgtls::connector`]).
    pub fn connect(settings: &PgSettings) -> Result<Self, StoreError> {
        let pools = connect::Pools::new(settings)?;
        let layout = Arc::new(Layout::new(Arc::clone(&settings.space)));
        let pool = pools.main;
        let replica = pools
            .replica
            .map(|replica| Replica::start(replica, pool.clone()));
        let batcher = Batcher::start(
            pool.clone(),
            Arc::clone(&settings.space),
            Shape {
                max_batch: settings.write_batch,
                max_in_flight: settings.write_concurrency,
                fill: settings.write_fill,
                // The server ends a statement at its timeout; a silent server gets a little
                // longer, so that the server's answer, when there is one, is the one seen.
                deadline: (!settings.statement_timeout.is_zero())
                    .then(|| settings.statement_timeout + std::time::Duration::from_secs(5)),
            },
        );
        Ok(Self {
            pool,
            direct: pools.direct,
            feed: ChangeFeed {
                config: Arc::new(pools.feed_config),
                tls: pools.feed_tls,
                replica: replica.clone(),
            },
            batcher,
            replica,
            layout,
            watching: Arc::default(),
            partitions: Arc::default(),
            high_water: Arc::new(HighWater::empty()),
            stats_share: Arc::new(rollups::StatsShare::of_pool(
                settings.max_connections,
                // As long as the statement itself may run (the pool's wait without a bound).
                if settings.statement_timeout.is_zero() {
                    settings.timeout
                } else {
                    settings.statement_timeout
                },
            )),
        })
    }

    /// Checks the read replica, if one is configured: refuses one that is a primary or
    /// replicates another cluster or database. One that does not answer is not an error:
    /// reads go to the primary until it does.
    pub async fn verify_replica(&self) -> Result<(), StoreError> {
        match &self.replica {
            Some(replica) => replica.verify_at_start().await,
            None => Ok(()),
        }
    }

    /// Marks what a write changed, so reads through this node see it (a no-op without a
    /// replica).
    fn wrote<'a>(&self, codes: impl IntoIterator<Item = &'a str>, tenant: Option<&str>) {
        if let Some(replica) = &self.replica {
            replica.wrote(codes, tenant);
        }
    }

    async fn client(&self) -> Result<Conn, StoreError> {
        self.pool.get().await.map_err(pool_error)
    }
}

/// Runs a read of one row on the replica where [`Replica::route`] allows, and on the primary
/// otherwise, or when the replica has no such row or fails: `$read` is evaluated with `$c`
/// bound to a `&Conn` and must give `Result<Option<_>, StoreError>`.
macro_rules! read_row {
    ($store:expr, $scope:expr, |$c:ident| $read:expr) => {{
        async {
            if let Some(replica) = &$store.replica
                && let Route::Replica(client) = replica.route($scope).await
            {
                let $c: &Conn = &client;
                match $read.await {
                    Ok(Some(found)) => {
                        replica.answered();
                        return Ok(Some(found));
                    }
                    Ok(None) => replica.fell_back(Fallback::Unknown, None),
                    Err(error) => replica.fell_back(Fallback::Error, Some(&error)),
                }
            }
            let primary = $store.client().await?;
            let $c: &Conn = &primary;
            $read.await
        }
        .await
    }};
}

impl LinkStore for PgStore {
    async fn insert(&self, link: NewLink) -> Result<InsertOutcome, StoreError> {
        self.layout.check_writable()?;
        self.layout.record_before_writing(&self.pool).await?;
        let id = link.id.and_then(|id| i64::try_from(id).ok());
        let outcome = if link.idempotency.is_some() {
            // The claim needs the row's own transaction. Boxed: this rare path's future is
            // kilobytes large, and unboxed every create's future would carry its size.
            Box::pin(insert::insert_one_retried(&self.pool, &self.layout, link)).await?
        } else {
            self.batcher.insert(link).await?
        };
        if let InsertOutcome::Created(link) = &outcome {
            // A code the replica does not know is read from the primary anyway; lists are not.
            self.wrote([], Some(&link.tenant));
            // This node's own links need no read of the mark before they are served.
            if let Some(id) = id {
                self.high_water.raise(id);
            } else if undecodable(self.layout.space(), &link.code) {
                self.high_water.note_undecodable();
            }
        }
        Ok(outcome)
    }

    async fn insert_many(&self, links: Vec<NewLink>) -> Result<Vec<InsertOutcome>, StoreError> {
        self.layout.check_writable()?;
        self.layout.record_before_writing(&self.pool).await?;
        let outcomes = insert::insert_rows_retried(&self.pool, self.layout.space(), &links).await?;
        for (outcome, new) in outcomes.iter().zip(&links) {
            if let InsertOutcome::Created(link) = outcome {
                self.wrote([], Some(&link.tenant));
                if let Some(id) = new.id.and_then(|id| i64::try_from(id).ok()) {
                    self.high_water.raise(id);
                } else if undecodable(self.layout.space(), &link.code) {
                    self.high_water.note_undecodable();
                }
            }
        }
        Ok(outcomes)
    }

    async fn get(&self, code: &str) -> Result<Option<Link>, StoreError> {
        read_row!(self, Scope::Code(code), |c| read::get(
            c,
            &self.layout,
            code
        ))
    }

    async fn get_with_clicks(&self, code: &str) -> Result<Option<Link>, StoreError> {
        read_row!(self, Scope::Code(code), |c| read::get_with_clicks(
            c,
            &self.layout,
            code
        ))
    }

    async fn stored_visits(&self, code: &str) -> Result<u64, StoreError> {
        let client = self.client().await?;
        let link = read::get_with_clicks(&client, &self.layout, code).await?;
        Ok(link.map_or(0, |l| l.clicks.human))
    }

    async fn find_dedup(&self, dedup_key: &[u8]) -> Result<Option<Link>, StoreError> {
        let client = self.client().await?;
        read::find_dedup(&client, dedup_key).await
    }

    async fn release_dedup(&self, dedup_key: &[u8], code: &str) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .prepared_execute(
                "UPDATE links SET dedup_key = NULL WHERE dedup_key = $1 AND code = $2 \
                 AND (deleted_at IS NOT NULL OR disabled_at IS NOT NULL OR expires_at <= now() \
                      OR max_visits IS NOT NULL)",
                &[&dedup_key, &code],
            )
            .await
            .map_err(error::db_error)?;
        Ok(())
    }

    async fn find_idempotent(
        &self,
        tenant: &str,
        key: &str,
        expired_before: DateTime<Utc>,
    ) -> Result<Option<(Vec<u8>, Link)>, StoreError> {
        let client = self.client().await?;
        insert::find_idempotent_on(&client, &self.layout, tenant, key, expired_before).await
    }

    async fn delete(
        &self,
        code: &str,
        tenant: Option<&str>,
        key: &str,
    ) -> Result<DeleteOutcome, StoreError> {
        let outcome =
            write::delete(&mut self.client().await?, &self.layout, code, tenant, key).await?;
        if outcome == DeleteOutcome::Deleted {
            self.wrote([code], tenant);
        }
        Ok(outcome)
    }

    async fn update(
        &self,
        code: &str,
        tenant: Option<&str>,
        patch: &LinkPatch,
        key: &str,
    ) -> Result<UpdateOutcome, StoreError> {
        let outcome = update::update(
            &mut self.client().await?,
            &self.layout,
            code,
            tenant,
            patch,
            key,
        )
        .await?;
        if let UpdateOutcome::Updated(link) = &outcome {
            self.wrote([code], Some(&link.tenant));
        }
        Ok(outcome)
    }

    async fn change_tag(
        &self,
        tenant: &str,
        change: &TagChange,
        key: &str,
        max_links: usize,
    ) -> Result<TagOutcome, StoreError> {
        let outcome =
            tags::change_tag(&mut self.client().await?, tenant, change, key, max_links).await?;
        if let TagOutcome::Changed(codes) = &outcome {
            self.wrote(codes.iter().map(String::as_str), Some(tenant));
        }
        Ok(outcome)
    }

    async fn history(
        &self,
        code: &str,
        tenant: Option<&str>,
        max_events: usize,
    ) -> Result<Option<History>, StoreError> {
        read_row!(self, Scope::Code(code), |c| update::history(
            c,
            &self.layout,
            code,
            tenant,
            max_events
        ))
    }

    async fn list(&self, query: &ListQuery) -> Result<Page, StoreError> {
        if let Some(replica) = &self.replica
            && let Route::Replica(client) =
                replica.route(Scope::Tenant(query.tenant.as_deref())).await
        {
            match list::list(&client, query).await {
                Ok(page) => {
                    replica.answered();
                    return Ok(page);
                }
                Err(error) => replica.fell_back(Fallback::Error, Some(&error)),
            }
        }
        let client = self.client().await?;
        list::list(&client, query).await
    }

    async fn get_many(&self, codes: &[String]) -> Result<Vec<Link>, StoreError> {
        let client = self.client().await?;
        read::get_many(&client, &self.layout, codes).await
    }

    async fn purge_idempotency(&self, expired_before: DateTime<Utc>) -> Result<u64, StoreError> {
        let client = self.client().await?;
        write::purge_idempotency(&client, expired_before).await
    }

    async fn clean_search_index(&self) -> Result<u64, StoreError> {
        let mut client = self.client().await?;
        write::clean_search_index(&mut client).await
    }

    async fn count_links(&self) -> Result<u64, StoreError> {
        let client = self.client().await?;
        read::count(&client).await
    }

    fn slot_bound(&self) -> SlotBound {
        if self.layout.by_slot() {
            SlotBound::Stale(self.high_water.mark())
        } else {
            SlotBound::None
        }
    }

    /// `max(slot)` on the primary (a replica may not have replayed a row yet), in the slot
    /// layout only: in the code layout rows are found by code, and `slot` may not be indexed.
    /// A pooled connection that turns out read-only (a demoted primary's) bounds nothing.
    async fn read_high_water(&self) -> Result<Option<Mark>, StoreError> {
        if !self.layout.by_slot() {
            return Ok(None);
        }
        let client = self.client().await?;
        let Some(mark) = read::high_water(&client, self.layout.space().length()).await? else {
            return Ok(None);
        };
        self.high_water.raise_to(mark);
        // A layout that changed meanwhile finds rows by code: nothing is bounded.
        Ok(self.layout.by_slot().then_some(mark))
    }
}

impl VisitStore for PgStore {
    async fn add_clicks(&self, mark: BatchMark, rows: ClickRows) -> Result<(), StoreError> {
        let client = self.client().await?;
        write::add_clicks(&client, mark, &rows).await
    }

    async fn sync_clicks(&self) -> Result<(), StoreError> {
        // Each commit is durable already.
        Ok(())
    }

    async fn add_rollups(&self, mark: BatchMark, rows: RollupRows) -> Result<(), StoreError> {
        rollups::add(&mut self.client().await?, &self.partitions, mark, &rows).await
    }

    async fn stats(&self, query: &StatsQuery) -> Result<StatsReport, StoreError> {
        rollups::stats(&self.pool, &self.stats_share, query).await
    }

    async fn maintain_rollups(&self, plan: RollupPlan) -> Result<RollupOutcome, StoreError> {
        rollups::maintain(&mut self.client().await?, &self.partitions, &plan).await
    }

    async fn forget_flush_marks(&self) -> Result<u64, StoreError> {
        rollups::forget_writers(&self.client().await?).await
    }
}

impl OutboxStore for PgStore {
    async fn retry_deliveries(
        &self,
        endpoint_id: i64,
        event_id: Option<i64>,
        limit: i64,
        max_pending: u64,
    ) -> Result<Retried, StoreError> {
        redeliver::retry(
            &mut self.client().await?,
            endpoint_id,
            event_id,
            limit,
            max_pending,
        )
        .await
    }

    async fn record_rollup_events(&self, hour: i64) -> Result<u64, StoreError> {
        webhooks::record_rollups(&self.client().await?, hour).await
    }

    async fn create_endpoint(&self, endpoint: NewEndpoint) -> Result<Option<Endpoint>, StoreError> {
        webhooks::create(&mut self.client().await?, &endpoint).await
    }

    async fn endpoints(&self, tenant: Option<&str>) -> Result<Vec<Endpoint>, StoreError> {
        webhooks::list(&self.client().await?, tenant).await
    }

    async fn delete_endpoint(&self, id: i64, tenant: Option<&str>) -> Result<bool, StoreError> {
        webhooks::delete(&self.client().await?, id, tenant).await
    }

    async fn delivery_log(
        &self,
        id: i64,
        tenant: Option<&str>,
        limit: i64,
    ) -> Result<Option<Vec<DeliveryRecord>>, StoreError> {
        webhooks::log(&self.client().await?, id, tenant, limit).await
    }

    async fn claim_deliveries(
        &self,
        lease: Duration,
        endpoints: i64,
        per_endpoint: i64,
    ) -> Result<Vec<Delivery>, StoreError> {
        webhooks::claim(&self.client().await?, lease, endpoints, per_endpoint).await
    }

    async fn finish_delivery(&self, attempt: Attempt) -> Result<Finished, StoreError> {
        webhooks::finish(&mut self.client().await?, &attempt).await
    }

    async fn release_endpoint(
        &self,
        endpoint_id: i64,
        lease: i64,
        unsent: Vec<i64>,
        hold: Option<Duration>,
    ) -> Result<(), StoreError> {
        webhooks::release(&self.client().await?, endpoint_id, lease, &unsent, hold).await
    }

    async fn bound_outbox(&self, max_pending: u64) -> Result<OutboxBound, StoreError> {
        webhooks::bound(&mut self.client().await?, max_pending).await
    }

    async fn set_endpoint_enabled(
        &self,
        id: i64,
        tenant: Option<&str>,
        enabled: bool,
    ) -> Result<Option<Endpoint>, StoreError> {
        webhooks::set_enabled(&mut self.client().await?, id, tenant, enabled).await
    }

    async fn outbox_backlog(&self) -> Result<Backlog, StoreError> {
        webhooks::backlog(&self.client().await?).await
    }

    async fn purge_outbox(
        &self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> Result<(u64, u64), StoreError> {
        webhooks::purge(&self.client().await?, before, limit).await
    }
}

impl BlocklistStore for PgStore {
    async fn blocked_domains(&self) -> Result<Vec<BlockedDomain>, StoreError> {
        read::blocked_domains(&self.client().await?).await
    }

    async fn block_domain(&self, entry: &str, key: &str) -> Result<bool, StoreError> {
        write::block_domain(&self.client().await?, entry, key).await
    }

    async fn unblock_domain(&self, entry: &str) -> Result<bool, StoreError> {
        write::unblock_domain(&self.client().await?, entry).await
    }
}

impl DomainStore for PgStore {
    async fn insert_domain(&self, domain: &Domain) -> Result<Option<Domain>, StoreError> {
        domains::insert(&self.client().await?, domain).await
    }

    async fn domain(&self, host: &str, tenant: Option<&str>) -> Result<Option<Domain>, StoreError> {
        domains::get(&self.client().await?, host, tenant).await
    }

    async fn domains(
        &self,
        tenant: Option<&str>,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Domain>, StoreError> {
        domains::list(&self.client().await?, tenant, after, limit).await
    }

    async fn set_domain_settings(
        &self,
        host: &str,
        tenant: Option<&str>,
        settings: &DomainSettings,
    ) -> Result<Option<Domain>, StoreError> {
        domains::set_settings(&self.client().await?, host, tenant, settings).await
    }

    async fn delete_domain(
        &self,
        host: &str,
        tenant: Option<&str>,
    ) -> Result<crate::store::DomainRemoval, StoreError> {
        domains::delete(&self.client().await?, host, tenant).await
    }
}

impl SessionStore for PgStore {
    async fn insert_session(&self, session: &NewSession) -> Result<(), StoreError> {
        sessions::insert(&self.client().await?, session).await
    }

    async fn session(&self, digest: [u8; 32]) -> Result<Option<StoredSession>, StoreError> {
        sessions::find(&self.client().await?, digest).await
    }

    async fn touch_session(&self, digest: [u8; 32], at: DateTime<Utc>) -> Result<(), StoreError> {
        sessions::touch(&self.client().await?, digest, at).await
    }

    async fn switch_session_tenant(
        &self,
        digest: [u8; 32],
        tenant: &str,
    ) -> Result<bool, StoreError> {
        sessions::switch(&self.client().await?, digest, tenant).await
    }

    async fn revoke_session(&self, digest: [u8; 32]) -> Result<bool, StoreError> {
        sessions::revoke(&self.client().await?, digest).await
    }

    async fn purge_sessions(
        &self,
        expired_before: DateTime<Utc>,
        revoked_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<usize, StoreError> {
        sessions::purge(&self.client().await?, expired_before, revoked_before, limit).await
    }
}

impl KeyStore for PgStore {
    async fn insert_api_key(&self, key: &NewApiKey) -> Result<Option<StoredApiKey>, StoreError> {
        api_keys::insert(&mut self.client().await?, key).await
    }

    async fn api_keys(&self, tenant: Option<&str>) -> Result<Vec<StoredApiKey>, StoreError> {
        api_keys::list(&self.client().await?, tenant).await
    }

    async fn api_key_live(&self, digest: [u8; 32]) -> Result<bool, StoreError> {
        api_keys::live(&self.client().await?, &digest).await
    }

    async fn revoke_api_key(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        api_keys::revoke(&self.client().await?, tenant, name).await
    }

    async fn note_api_key_uses(&self, uses: Vec<(i64, DateTime<Utc>)>) -> Result<(), StoreError> {
        api_keys::note_uses(&self.client().await?, &uses).await
    }

    async fn refresh_person_claims(
        &self,
        person: &crate::store::Person<'_>,
    ) -> Result<u64, StoreError> {
        api_keys::refresh_person_claims(&mut self.client().await?, person).await
    }
}

impl AuditStore for PgStore {
    async fn append_audit(&self, entries: Vec<NewAuditEntry>) -> Result<(), StoreError> {
        audit::append(&self.client().await?, &entries).await
    }

    /// Read on the primary: an entry a change just wrote is in the next read.
    async fn audit_entries(
        &self,
        filter: &AuditFilter,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        audit::entries(&self.client().await?, filter, limit).await
    }

    async fn purge_audit(&self, before: DateTime<Utc>, limit: usize) -> Result<usize, StoreError> {
        audit::purge(&self.client().await?, before, limit).await
    }
}

impl Capabilities for PgStore {
    /// Applies pending migrations under an advisory lock, so several nodes starting at once
    /// apply each exactly once; then checks the code space and reads the layout, which the
    /// store reads again every second from then on.
    async fn migrate(&self) -> Result<usize, StoreError> {
        let mut direct = self.direct.get().await.map_err(pool_error)?;
        if self.pool.sending.mode() == PoolMode::Transaction {
            connect::check_pooled(&self.client().await?, &direct).await?;
        }
        let ran = connect::migrate(direct.raw_mut()).await?;
        drop(direct);
        let client = self.client().await?;
        let recorded = layout::check_code_space(&client, self.layout.space()).await?;
        self.layout.set_recorded(recorded);
        self.layout.load(&client).await?;
        if self.layout.by_slot() {
            let length = self.layout.space().length();
            if let Some(mark) = read::high_water(&client, length).await? {
                self.high_water.raise_to(mark);
            }
        }
        if !self
            .watching
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            self.layout.watch(self.pool.clone());
        }
        Ok(ran)
    }

    /// Ready when a pooled connection reaches a primary: one that answers read-only (a
    /// standby, or a primary demoted since) is an error, and empties the pool of connections
    /// made before it (see [`pgtls::evict`]).
    async fn ping(&self) -> Result<(), StoreError> {
        let client = self.client().await?;
        pgtls::evict::require_primary(client.raw())
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))
    }

    fn writer_stats(&self) -> &WriterStats {
        self.batcher.stats()
    }

    fn replica_stats(&self) -> Option<Arc<ReplicaStats>> {
        self.replica.as_ref().map(|r| r.stats())
    }

    fn durability(&self) -> Option<Durability> {
        None
    }

    fn change_feed(&self) -> Option<ChangeFeed> {
        Some(self.feed.clone())
    }

    fn embedded_lease_source(&self, _: &str, _: &str) -> Option<Arc<dyn LeaseSource>> {
        None
    }
}
