//! Link storage behind a few narrow interfaces, one per concern, with a PostgreSQL and an
//! embedded SQLite backend; [`Store`] holds either and is what the rest of the node uses.
//!
//! The interfaces: [`LinkStore`] (links and the idempotency claims of creates), [`VisitStore`]
//! (click totals and rollups), [`OutboxStore`] (webhook endpoints and the outbox),
//! [`BlocklistStore`] (the blocked domains), [`DomainStore`] (branded domains, each host owned
//! by one tenant), [`KeyStore`] (the API keys tenant admins make), [`AuditStore`] (the audit log) and [`Capabilities`]
//! (migrations, health and capabilities). Each backend
//! implements every one, and [`Store`] has one dispatcher for each, so a part that uses the
//! store names the interfaces it needs in its `use` line.
//!
//! Both backends keep the same guarantees:
//! - a code maps to at most one row, ever (byte-wise comparison), decided by the database's
//!   constraints: a code that decodes sits at the slot it decodes to (PostgreSQL's `slot`
//!   primary key, SQLite's rowid) and any other code has a unique index of its own, see
//!   [`postgres`] and [`sqlite`]; a URL changes only through an explicit edit, which is kept
//!   in the link's history;
//! - [`LinkStore::insert`] returns only after the row is committed and durable, so an
//!   acknowledged create is never lost;
//! - conflicts are reported, never papered over: a taken code is [`InsertOutcome::CodeTaken`],
//!   a dedup or idempotency hit returns the existing link.
//!
//! Each backend batches concurrent creates itself: PostgreSQL through a writer task that sends
//! whatever rows are waiting as one statement ([`postgres`]), SQLite on the writer thread that
//! owns the file's one writer connection and fsyncs each round once ([`sqlite`]).
//!
//! Layout: one file per interface (the trait and its dispatcher on [`Store`]: `links`,
//! `visits`, `outbox`, `blocklist`, `domains`, `api_keys`, `sessions`, `capabilities`), [`model`] (the
//! values that cross the interfaces), `migrate` (the versioned schema of both backends), `reply`
//! (answering the callers of one batch), one folder per backend.

mod high_water;
mod migrate;
pub use high_water::{HighWater, Mark, SlotBound, undecodable};
pub use migrate::sqlite_migrations_after;
pub mod model;
pub mod postgres;
mod reply;
pub mod rollups;
mod sample;
pub mod sqlite;
pub mod webhooks;

use crate::domain::{ClickCounts, CompactCode};
pub use model::{
    BlockedDomain, ChangeEvent, DeleteOutcome, Idempotency, InsertOutcome, NewLink, StoreError,
    TagOutcome, UpdateOutcome, WriterStats, host_rev, kind_name,
};
pub use postgres::{
    ChangeFeed, Fallback, LayoutOptions, LayoutStatus, PgSettings, PgStore, ReplicaStats,
};
pub use rollups::{RollupOutcome, RollupPlan, RollupRow, RollupRows};
pub use sqlite::{Durability, SqliteStore};
use std::sync::Arc;
pub use webhooks::{
    Attempt, Backlog, Delivery, DeliveryRecord, Endpoint, Finished, NewEndpoint, OutboxBound,
    Retried,
};

/// Click counts of several codes, written in one batch. Shared, so the caller keeps the rows to
/// retry with and a backend that writes on another thread needs no copy.
pub type ClickRows = Arc<[(CompactCode, ClickCounts)]>;

/// The store of one node: PostgreSQL (distributed) or SQLite (embedded). Cheap to clone.
#[derive(Clone)]
pub enum Store {
    /// Shared PostgreSQL.
    Postgres(PgStore),
    /// A local SQLite file.
    Sqlite(SqliteStore),
}

impl Store {
    /// Lets go of what keeps other processes from writing beside this one (the embedded
    /// file's lock, [`SqliteStore::release`]); nothing on PostgreSQL, which has many writers.
    /// Called once the node has stopped writing.
    pub fn release(&self) {
        if let Store::Sqlite(sqlite) = self {
            sqlite.release();
        }
    }

    /// Returns once the writes handed to the store before the call have landed (the embedded
    /// writer's queue, [`SqliteStore::settle`]); at once on PostgreSQL, whose writes each caller
    /// waits for on its own connection.
    pub async fn settle(&self) {
        if let Store::Sqlite(sqlite) = self {
            sqlite.settle().await;
        }
    }
}

/// Runs the same call on whichever backend `store` holds: the one place that looks at the
/// variant, used by the dispatcher of every interface.
macro_rules! dispatch {
    ($store:expr, $backend:ident => $call:expr) => {
        match $store {
            Store::Postgres($backend) => $call,
            Store::Sqlite($backend) => $call,
        }
    };
}

/// [`dispatch!`] of an async store call inside a database span (`operation` on `table`, never
/// the values) when the current request is traced; one flag read otherwise.
///
/// A PostgreSQL call's future (a pooled connection, a prepared statement, a round trip) is
/// kilobytes large; it is boxed, so that every future awaiting a store call (a redirect's
/// lookup, a create) stays as small as the SQLite call's, which sends its work to another
/// thread and is small. The future of each request is moved into a box of its own by the HTTP
/// server: a few kilobytes more there are a copy on every request. One allocation per
/// PostgreSQL statement is nothing beside its round trip.
macro_rules! traced {
    ($store:expr, $operation:literal, $table:literal, $backend:ident => $call:expr) => {{
        let span = $store.statement($operation, $table);
        match $store {
            Store::Postgres($backend) => {
                Box::pin(tracing::Instrument::instrument($call, span)).await
            }
            Store::Sqlite($backend) => tracing::Instrument::instrument($call, span).await,
        }
    }};
}

// Declared after `dispatch!` and `traced!`, which their dispatchers use.
mod api_keys;
mod audit;
mod blocklist;
mod capabilities;
mod domains;
mod links;
mod outbox;
mod sessions;
mod visits;

pub use api_keys::{KeyStore, NewApiKey, Person, PersonClaims, StoredApiKey};
pub use audit::{AuditEntry, AuditFilter, AuditStore, NewAuditEntry};
pub use blocklist::BlocklistStore;
pub use capabilities::Capabilities;
pub use domains::{DomainRemoval, DomainStore, LIVE_LINKS_COUNTED};
pub use links::LinkStore;
pub use outbox::OutboxStore;
pub use sessions::{NewSession, SessionStore, StoredSession};
pub use visits::{BatchMark, BatchSequence, FlushStream, MARKS_KEPT_DAYS, VisitStore};
