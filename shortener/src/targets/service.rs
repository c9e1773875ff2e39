//! The blocked domains as the admin API changes them: the blocklist file's entries (read-only
//! here) and those added through the API, kept in the store and re-read by every node each
//! reload interval, as the file is (the node that takes a change puts it in force at once).

use super::{Blocklist, TargetRules};
use crate::audit::{Action, AuditLog, ObjectKind, Subject};
use crate::domain::{Caller, Error};
use crate::store::{BlocklistStore, Store, StoreError};
use chrono::{DateTime, Utc};
use std::sync::Arc;

/// Where a blocked domain comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockSource {
    /// The blocklist file.
    File,
    /// The admin API: when and by which key (`tenant/name`) it was added.
    Api {
        /// When it was added.
        added_at: DateTime<Utc>,
        /// The key that added it.
        added_by: String,
    },
}

/// One blocked domain: `example.com`, or `.example.com` with its subdomains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedEntry {
    /// The entry in its canonical form.
    pub domain: String,
    /// Where it comes from.
    pub source: BlockSource,
}

/// What an unblock did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unblocked {
    /// The stored entry was removed, and the list in force no longer holds it.
    Removed,
    /// The entry comes from the blocklist file: it is removed there, not through the API.
    InFile,
    /// No such entry.
    NotFound,
}

/// The blocked domains: the file's and the stored ones, and keeping the stored ones in force.
pub struct BlocklistService {
    store: Store,
    targets: Arc<TargetRules>,
    audit: Arc<AuditLog>,
}

fn invalid_domain(message: String) -> Error {
    Error::invalid("invalid_domain", message)
}

impl BlocklistService {
    /// The service over `store`, putting stored entries in force in `targets`.
    pub fn new(store: Store, targets: Arc<TargetRules>, audit: Arc<AuditLog>) -> Self {
        Self {
            store,
            targets,
            audit,
        }
    }

    /// Records a change of the blocklist, which is the deployment's: filed under the admin's
    /// own tenant.
    async fn audit(&self, caller: &Caller, action: Action, entry: &str) {
        let subject = Subject {
            tenant: &caller.tenant,
            action,
            kind: ObjectKind::Blocklist,
            id: entry,
        };
        self.audit
            .record(caller, subject, serde_json::json!({ "domain": entry }))
            .await;
    }

    /// Every blocked domain: the file's first, then those added through the API.
    pub async fn entries(&self) -> Result<Vec<BlockedEntry>, Error> {
        let stored = self.store.blocked_domains().await?;
        let file = self
            .targets
            .file_entries()
            .into_iter()
            .map(|domain| BlockedEntry {
                domain,
                source: BlockSource::File,
            });
        Ok(file
            .chain(stored.into_iter().map(|e| BlockedEntry {
                domain: e.entry,
                source: BlockSource::Api {
                    added_at: e.added_at,
                    added_by: e.added_by,
                },
            }))
            .collect())
    }

    /// Blocks `domain` (with its subdomains for a leading `.` or `*.`) for `caller`; answers
    /// its canonical form and whether it was added (false: it was blocked already).
    pub async fn block(&self, caller: &Caller, domain: &str) -> Result<(String, bool), Error> {
        let entry = Blocklist::canonical(domain).map_err(invalid_domain)?;
        let added = self.store.block_domain(&entry, &caller.key_id()).await?;
        if added {
            self.audit(caller, Action::BlocklistAdd, &entry).await;
        }
        self.sync().await?;
        tracing::info!(entry = %entry, key = %caller.key_id(), "domain blocked");
        Ok((entry, added))
    }

    /// Unblocks `domain` if it was added through the API; an entry of the file stays.
    pub async fn unblock(&self, caller: &Caller, domain: &str) -> Result<Unblocked, Error> {
        let entry = Blocklist::canonical(domain).map_err(invalid_domain)?;
        if !self.store.unblock_domain(&entry).await? {
            return Ok(if self.targets.file_entries().contains(&entry) {
                Unblocked::InFile
            } else {
                Unblocked::NotFound
            });
        }
        self.audit(caller, Action::BlocklistRemove, &entry).await;
        self.sync().await?;
        tracing::info!(entry = %entry, key = %caller.key_id(), "domain unblocked");
        Ok(Unblocked::Removed)
    }

    /// Puts the blocked domains kept in the store in force (every node re-reads them each
    /// reload interval, as it does the blocklist file; the node that changes them, at once).
    pub async fn sync(&self) -> Result<(), StoreError> {
        let entries = self.store.blocked_domains().await?;
        let text: String = entries.iter().map(|e| format!("{}\n", e.entry)).collect();
        match Blocklist::parse(&text) {
            Ok(list) => self.targets.set_stored(list),
            // Entries are checked before they are stored: this is a hand-edited row.
            Err(error) => {
                tracing::warn!(%error, "a stored blocked domain does not parse; the list in force stays")
            }
        }
        Ok(())
    }
}
