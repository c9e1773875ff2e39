//! The audit log interface: entries appended as changes are made, read back newest first by
//! keyset with filters, and purged oldest first in bounded runs once past their retention.

use super::{Store, StoreError};
use chrono::{DateTime, Utc};
use std::future::Future;

/// One entry to append (the store stamps its time and number).
#[derive(Debug, Clone, PartialEq)]
pub struct NewAuditEntry {
    /// The tenant whose object changed (an `admin` acting on another tenant's link writes that
    /// tenant's), which decides who may read the entry.
    pub tenant: String,
    /// The tenant of the key that made the change.
    pub actor_tenant: String,
    /// The name of the key that made it.
    pub actor_key: String,
    /// The signed-in person's subject at the issuer, when a person made it.
    pub actor_subject: Option<String>,
    /// The signed-in person's e-mail, when known.
    pub actor_email: Option<String>,
    /// The client address the request came from, when known.
    pub address: Option<String>,
    /// What was done (`link.update`, `key.create`, ...).
    pub action: String,
    /// What kind of object it was done to (`link`, `domain`, ...).
    pub object_kind: String,
    /// The object: a code, a host, a key or tag name, a webhook's number, a blocked domain.
    pub object_id: String,
    /// A bounded summary of what changed, never holding a secret.
    pub change: serde_json::Value,
}

/// A stored entry.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    /// Its number, increasing with each append.
    pub id: i64,
    /// When the store wrote it.
    pub at: DateTime<Utc>,
    /// Everything else, as appended.
    pub entry: NewAuditEntry,
}

/// Which entries a read returns: every field set narrows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditFilter {
    /// Only this tenant's entries (`None`: every tenant's, for `admin`).
    pub tenant: Option<String>,
    /// Only this action.
    pub action: Option<String>,
    /// Only objects of this kind.
    pub object_kind: Option<String>,
    /// Only this object.
    pub object_id: Option<String>,
    /// Only entries this actor made: its key name, subject or e-mail.
    pub actor: Option<String>,
    /// Only entries written at or after this instant.
    pub since: Option<DateTime<Utc>>,
    /// Only entries written before this instant.
    pub until: Option<DateTime<Utc>>,
    /// Only entries older than this number (the keyset of the next page).
    pub before_id: Option<i64>,
}

/// What a store does with the audit log. Both backends implement it; [`Store`] dispatches.
pub trait AuditStore: Send + Sync {
    /// Appends `entries` in one durable write, answering once they are committed.
    fn append_audit(
        &self,
        entries: Vec<NewAuditEntry>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// At most `limit` entries matching `filter`, newest first.
    fn audit_entries(
        &self,
        filter: &AuditFilter,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<AuditEntry>, StoreError>> + Send;

    /// Removes at most `limit` of the oldest entries written before `before`; how many it
    /// removed.
    fn purge_audit(
        &self,
        before: DateTime<Utc>,
        limit: usize,
    ) -> impl Future<Output = Result<usize, StoreError>> + Send;
}

impl AuditStore for Store {
    async fn append_audit(&self, entries: Vec<NewAuditEntry>) -> Result<(), StoreError> {
        traced!(self, "INSERT", "audit_log", s => s.append_audit(entries))
    }

    async fn audit_entries(
        &self,
        filter: &AuditFilter,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        traced!(self, "SELECT", "audit_log", s => s.audit_entries(filter, limit))
    }

    async fn purge_audit(&self, before: DateTime<Utc>, limit: usize) -> Result<usize, StoreError> {
        traced!(self, "DELETE", "audit_log", s => s.purge_audit(before, limit))
    }
}
