//! The links interface: creates, reads, edits, deletes, lists and histories of links, and the
//! idempotency claims of creates.

use super::{
    DeleteOutcome, InsertOutcome, Mark, NewLink, SlotBound, Store, StoreError, TagOutcome,
    UpdateOutcome,
};
use crate::domain::{History, Link, LinkPatch, ListQuery, Page, TagChange};
use chrono::{DateTime, Utc};
use std::future::Future;

/// What a store does with links. Both backends implement it with the same signatures and the
/// same guarantees (see the [store](super) docs); [`Store`] dispatches to one of them.
pub trait LinkStore: Send + Sync {
    /// Inserts one link (see [`InsertOutcome`]), batched with concurrent inserts where it can
    /// be (a link with an idempotency key takes a transaction of its own); returns after the
    /// commit is durable.
    fn insert(
        &self,
        link: NewLink,
    ) -> impl Future<Output = Result<InsertOutcome, StoreError>> + Send;

    /// Inserts many links (none with an idempotency key) with one commit; outcomes in input
    /// order, each row's conflicts resolved on its own. A bulk write (a chunk of an import):
    /// the embedded store checkpoints after it less often than after other writes.
    fn insert_many(
        &self,
        links: Vec<NewLink>,
    ) -> impl Future<Output = Result<Vec<InsertOutcome>, StoreError>> + Send;

    /// Reads a link by code (live, deleted or expired), without its click counts.
    fn get(&self, code: &str) -> impl Future<Output = Result<Option<Link>, StoreError>> + Send;

    /// Reads a link with its click counts.
    fn get_with_clicks(
        &self,
        code: &str,
    ) -> impl Future<Output = Result<Option<Link>, StoreError>> + Send;

    /// The human visits stored for `code` (0 for no link), read where writes land (the
    /// primary, never a read replica): a visit limit counts from it, and a replica may not
    /// have replayed the visits this node flushed last.
    fn stored_visits(&self, code: &str) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// The link with this dedup key, if any: a live one, or one that no longer redirects and
    /// keeps its key (deleted, disabled, expired or used up) until a dedup create releases it
    /// ([`Self::release_dedup`]); a rerun of an import finds the links it made this way.
    fn find_dedup(
        &self,
        dedup_key: &[u8],
    ) -> impl Future<Output = Result<Option<Link>, StoreError>> + Send;

    /// Takes `dedup_key` off the link `code`, found holding it and no longer redirecting, so
    /// that a dedup create can make a live link with it; durable when it returns. Only that
    /// link loses it, and only while it may still be dead (deleted, disabled, expired, or with
    /// a visit limit): a concurrent create that took the key for a new link keeps it.
    fn release_dedup(
        &self,
        dedup_key: &[u8],
        code: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The fingerprint and link of an idempotency key claimed by `tenant` at or after
    /// `expired_before` (older claims have expired).
    fn find_idempotent(
        &self,
        tenant: &str,
        key: &str,
        expired_before: DateTime<Utc>,
    ) -> impl Future<Output = Result<Option<(Vec<u8>, Link)>, StoreError>> + Send;

    /// Marks a link deleted (it answers 410 from then on) and records the delete by `key` in
    /// its history; it keeps its dedup key until a dedup create releases it. With a `tenant`, only a link of that tenant: another
    /// tenant's link is [`DeleteOutcome::NotFound`], as an unknown code is.
    fn delete(
        &self,
        code: &str,
        tenant: Option<&str>,
        key: &str,
    ) -> impl Future<Output = Result<DeleteOutcome, StoreError>> + Send;

    /// Applies `patch` to a link (of `tenant`, or any tenant's for `None`) on behalf of `key`:
    /// the change, its history events and (on a shared store) its announcement to the other
    /// nodes commit together. A changed target or expiry frees the dedup key.
    fn update(
        &self,
        code: &str,
        tenant: Option<&str>,
        patch: &LinkPatch,
        key: &str,
    ) -> impl Future<Output = Result<UpdateOutcome, StoreError>> + Send;

    /// Applies `change` to every live (not deleted) link of `tenant` that carries a tag it
    /// seeks, on behalf of `key`, as ONE transaction: each changed link gets the history event,
    /// webhook event and (on a shared store) announcement to the other nodes that an
    /// [`update`](Self::update) of its tags gives it, and all of them commit or none does.
    /// Refused before anything is written when no such link exists, when a rename's new name is
    /// on a live link of the tenant already, or when more than `max_links` links carry the
    /// tags (see [`TagOutcome`]).
    fn change_tag(
        &self,
        tenant: &str,
        change: &TagChange,
        key: &str,
        max_links: usize,
    ) -> impl Future<Output = Result<TagOutcome, StoreError>> + Send;

    /// A link (without click counts) and the latest `max_events` events recorded after its
    /// creation, oldest first; `None` when there is no such link or it is not of `tenant`
    /// (when given), whose events are then not read.
    fn history(
        &self,
        code: &str,
        tenant: Option<&str>,
        max_events: usize,
    ) -> impl Future<Output = Result<Option<History>, StoreError>> + Send;

    /// One page of a list, newest first, continued by keyset (see [`crate::domain::list`]).
    fn list(&self, query: &ListQuery) -> impl Future<Output = Result<Page, StoreError>> + Send;

    /// The links (with click counts) that hold any of `codes`.
    fn get_many(
        &self,
        codes: &[String],
    ) -> impl Future<Output = Result<Vec<Link>, StoreError>> + Send;

    /// Deletes idempotency claims made before `expired_before`; returns how many.
    fn purge_idempotency(
        &self,
        expired_before: DateTime<Utc>,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// How many links exist, of every kind and state (a full count: for tests and tools, never
    /// for a request path).
    fn count_links(&self) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Merges the entries waiting in the URL search index's pending list into the index, off
    /// the create path (PostgreSQL's trigram index on `long_url`; SQLite has none: `0`);
    /// returns the pages the list gave up.
    fn clean_search_index(&self) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// What bounds the IDs that stored codes decode to, as this node knows it now, without a
    /// read (see [`SlotBound`]; docs/design.md, I9).
    fn slot_bound(&self) -> SlotBound;

    /// The highest slot a row holds (`-1` for none) and whether a named row holds an
    /// undecodable code ([`Mark`]), read by statements that start after this call, on the
    /// primary: a row committed before the call is counted. `None` where rows are not found by
    /// slot, so that no bound holds. What it reads also raises what
    /// [`slot_bound`](Self::slot_bound) says.
    fn read_high_water(&self) -> impl Future<Output = Result<Option<Mark>, StoreError>> + Send;
}

impl Store {
    /// A span for a statement on `table` when the current request is traced (see
    /// `otel::db_span`: the operation and table, never the values).
    pub(super) fn statement(&self, operation: &'static str, table: &'static str) -> tracing::Span {
        let system = match self {
            Store::Postgres(_) => "postgresql",
            Store::Sqlite(_) => "sqlite",
        };
        otel::db_span(system, operation, table)
    }
}

impl LinkStore for Store {
    async fn insert(&self, link: NewLink) -> Result<InsertOutcome, StoreError> {
        traced!(self, "INSERT", "links", s => s.insert(link))
    }

    async fn insert_many(&self, links: Vec<NewLink>) -> Result<Vec<InsertOutcome>, StoreError> {
        traced!(self, "INSERT", "links", s => s.insert_many(links))
    }

    async fn get(&self, code: &str) -> Result<Option<Link>, StoreError> {
        traced!(self, "SELECT", "links", s => s.get(code))
    }

    async fn get_with_clicks(&self, code: &str) -> Result<Option<Link>, StoreError> {
        traced!(self, "SELECT", "links", s => s.get_with_clicks(code))
    }

    async fn stored_visits(&self, code: &str) -> Result<u64, StoreError> {
        traced!(self, "SELECT", "link_clicks", s => s.stored_visits(code))
    }

    async fn find_dedup(&self, dedup_key: &[u8]) -> Result<Option<Link>, StoreError> {
        traced!(self, "SELECT", "links", s => s.find_dedup(dedup_key))
    }

    async fn release_dedup(&self, dedup_key: &[u8], code: &str) -> Result<(), StoreError> {
        traced!(self, "UPDATE", "links", s => s.release_dedup(dedup_key, code))
    }

    async fn find_idempotent(
        &self,
        tenant: &str,
        key: &str,
        expired_before: DateTime<Utc>,
    ) -> Result<Option<(Vec<u8>, Link)>, StoreError> {
        traced!(self, "SELECT", "idempotency_keys", s => s.find_idempotent(tenant, key, expired_before))
    }

    async fn delete(
        &self,
        code: &str,
        tenant: Option<&str>,
        key: &str,
    ) -> Result<DeleteOutcome, StoreError> {
        traced!(self, "UPDATE", "links", s => s.delete(code, tenant, key))
    }

    async fn update(
        &self,
        code: &str,
        tenant: Option<&str>,
        patch: &LinkPatch,
        key: &str,
    ) -> Result<UpdateOutcome, StoreError> {
        traced!(self, "UPDATE", "links", s => s.update(code, tenant, patch, key))
    }

    async fn change_tag(
        &self,
        tenant: &str,
        change: &TagChange,
        key: &str,
        max_links: usize,
    ) -> Result<TagOutcome, StoreError> {
        traced!(self, "UPDATE", "links", s => s.change_tag(tenant, change, key, max_links))
    }

    async fn history(
        &self,
        code: &str,
        tenant: Option<&str>,
        max_events: usize,
    ) -> Result<Option<History>, StoreError> {
        traced!(self, "SELECT", "link_events", s => s.history(code, tenant, max_events))
    }

    async fn list(&self, query: &ListQuery) -> Result<Page, StoreError> {
        traced!(self, "SELECT", "links", s => s.list(query))
    }

    async fn get_many(&self, codes: &[String]) -> Result<Vec<Link>, StoreError> {
        traced!(self, "SELECT", "links", s => s.get_many(codes))
    }

    async fn purge_idempotency(&self, expired_before: DateTime<Utc>) -> Result<u64, StoreError> {
        traced!(self, "DELETE", "idempotency_keys", s => s.purge_idempotency(expired_before))
    }

    async fn count_links(&self) -> Result<u64, StoreError> {
        traced!(self, "SELECT", "links", s => s.count_links())
    }

    async fn clean_search_index(&self) -> Result<u64, StoreError> {
        // Untraced: a background chore every second, no request's work.
        dispatch!(self, s => Box::pin(s.clean_search_index()).await)
    }

    fn slot_bound(&self) -> SlotBound {
        dispatch!(self, s => s.slot_bound())
    }

    async fn read_high_water(&self) -> Result<Option<Mark>, StoreError> {
        traced!(self, "SELECT", "links", s => s.read_high_water())
    }
}
