//! Link storage behind one narrow interface, with a PostgreSQL and an embedded SQLite backend.
//!
//! Both backends keep the same guarantees:
//! - a code maps to at most one row, ever (byte-wise comparison: `PRIMARY KEY(code)` on
//!   PostgreSQL; on SQLite a generated row sits at the rowid of its ID and other codes have a
//!   unique index, see [`SqliteStore`]), and a stored URL never changes (there is no update of
//!   `long_url`);
//! - [`Store::insert`] returns only after the row is committed (synchronous commit), so an
//!   acknowledged create is never lost;
//! - conflicts are reported, never papered over: a taken code is [`InsertOutcome::CodeTaken`],
//!   a dedup or idempotency hit returns the existing link.

mod batch;
mod migrate;
mod postgres;
mod sqlite;
mod sqlite_writer;
mod walsync;

use crate::domain::Link;
pub use batch::{BatchWriter, WriterStats};
use chrono::{DateTime, Utc};
pub use postgres::{ListenEvent, NOTIFY_CHANNEL, PgStore};
pub use sqlite::SqliteStore;
pub use walsync::Durability;

/// What kind of code a row holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Derived from a leased ID.
    Generated,
    /// Random and unguessable.
    Private,
    /// Chosen by the caller.
    Alias,
}

impl Kind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Generated => "generated",
            Kind::Private => "private",
            Kind::Alias => "alias",
        }
    }
}

/// An idempotency key claimed by a create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idempotency {
    /// The caller's key.
    pub key: String,
    /// A digest of the request, to tell a true retry from a reused key.
    pub fingerprint: Vec<u8>,
}

/// A row to insert.
#[derive(Debug, Clone)]
pub struct NewLink {
    /// The code.
    pub code: String,
    /// The serialized target URL.
    pub url: String,
    /// The code's kind.
    pub kind: Kind,
    /// The generated ID, for generated codes; `code` must then be the code space's code for
    /// it (the embedded store files the row under the ID and finds it by decoding the code).
    pub id: Option<u64>,
    /// Expiry.
    pub expires_at: Option<DateTime<Utc>>,
    /// The API key (its id) that created it.
    pub owner: String,
    /// Dedup key, for dedup creates.
    pub dedup_key: Option<Vec<u8>>,
    /// Idempotency claim, if the request carried a key.
    pub idempotency: Option<Idempotency>,
}

/// The result of an insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InsertOutcome {
    /// The row was committed.
    Created(Link),
    /// The code is already taken; nothing was written.
    CodeTaken,
    /// A live link with the same dedup key exists; it is returned and nothing new was written.
    Deduplicated(Link),
    /// The idempotency key was used before for the same request: the first result.
    Replayed(Link),
    /// The idempotency key was used before for a different request; nothing was written.
    IdempotencyMismatch,
}

/// The result of a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// The link was live and is now deleted.
    Deleted,
    /// The link had been deleted before.
    AlreadyDeleted,
    /// No such code.
    NotFound,
}

/// Storage failures.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The statement was rolled back by a deadlock or serialization failure; nothing was
    /// written and it can be run again at once.
    #[error("store conflict, retry: {0}")]
    Retry(String),
    /// The connection failed after a write was sent: it may or may not have been committed.
    #[error("store connection lost during a write; the outcome is unknown: {0}")]
    Ambiguous(String),
    /// The database cannot be reached (or timed out); retrying later may work.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// Anything else (a bug or a schema problem).
    #[error("store error: {0}")]
    Internal(String),
}

/// The store of one node: PostgreSQL (distributed) or SQLite (embedded).
#[derive(Clone)]
pub enum Store {
    /// Shared PostgreSQL.
    Postgres(PgStore),
    /// A local SQLite file.
    Sqlite(SqliteStore),
}

impl Store {
    /// Inserts a link (see [`InsertOutcome`]); returns after commit.
    pub async fn insert(&self, link: NewLink) -> Result<InsertOutcome, StoreError> {
        match self {
            Store::Postgres(s) => s.insert(link).await,
            Store::Sqlite(s) => s.insert(link).await,
        }
    }

    /// Inserts many links (none with an idempotency key) in one round trip and one commit;
    /// outcomes in input order.
    pub async fn insert_many(&self, links: &[NewLink]) -> Result<Vec<InsertOutcome>, StoreError> {
        match self {
            Store::Postgres(s) => s.insert_many(links).await,
            Store::Sqlite(s) => s.insert_many(links.to_vec()).await,
        }
    }

    /// Reads a link by code (live, deleted or expired).
    pub async fn get(&self, code: &str) -> Result<Option<Link>, StoreError> {
        match self {
            Store::Postgres(s) => s.get(code).await,
            Store::Sqlite(s) => s.get(code).await,
        }
    }

    /// Reads a link with its click counts.
    pub async fn get_with_clicks(&self, code: &str) -> Result<Option<Link>, StoreError> {
        match self {
            Store::Postgres(s) => s.get_with_clicks(code).await,
            Store::Sqlite(s) => s.get_with_clicks(code).await,
        }
    }

    /// The live link with this dedup key, if any.
    pub async fn find_dedup(&self, dedup_key: &[u8]) -> Result<Option<Link>, StoreError> {
        match self {
            Store::Postgres(s) => s.find_dedup(dedup_key).await,
            Store::Sqlite(s) => s.find_dedup(dedup_key).await,
        }
    }

    /// The fingerprint and link of an idempotency key already used by `owner`.
    pub async fn find_idempotent(
        &self,
        owner: &str,
        key: &str,
    ) -> Result<Option<(Vec<u8>, Link)>, StoreError> {
        match self {
            Store::Postgres(s) => s.find_idempotent(owner, key).await,
            Store::Sqlite(s) => s.find_idempotent(owner, key).await,
        }
    }

    /// Marks a link deleted (it answers 410 from then on) and frees its dedup key.
    pub async fn delete(&self, code: &str) -> Result<DeleteOutcome, StoreError> {
        match self {
            Store::Postgres(s) => s.delete(code).await,
            Store::Sqlite(s) => s.delete(code).await,
        }
    }

    /// Checks the store answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        match self {
            Store::Postgres(s) => s.ping().await,
            Store::Sqlite(s) => s.ping().await,
        }
    }

    /// Adds batched click counts (one statement or transaction for the whole batch). Shared,
    /// so the caller keeps the rows to retry with and the writer needs no copy. On SQLite the
    /// batch is committed but not yet fsynced when this returns: see [`Store::sync_clicks`].
    pub async fn add_clicks(
        &self,
        rows: std::sync::Arc<[(crate::code_map_key::CodeMapKey, crate::domain::ClickCounts)]>,
    ) -> Result<(), StoreError> {
        match self {
            Store::Postgres(s) => s.add_clicks(&rows).await,
            Store::Sqlite(s) => s.add_clicks(rows).await,
        }
    }

    /// Returns once every click count added so far is durable: one fsync on SQLite (one per
    /// flush instead of one per batch), nothing on PostgreSQL, where each commit is durable.
    pub async fn sync_clicks(&self) -> Result<(), StoreError> {
        match self {
            Store::Postgres(_) => Ok(()),
            Store::Sqlite(s) => s.sync_clicks().await,
        }
    }

    /// How many links exist, of every kind and state.
    pub async fn count_links(&self) -> Result<u64, StoreError> {
        match self {
            Store::Postgres(s) => s.count_links().await,
            Store::Sqlite(s) => s.count_links().await,
        }
    }
}
