//! The audit log: who changed what, when, from where, in which tenant.
//!
//! Every service that changes something a tenant owns (links, tags, imports, domains, API keys,
//! webhooks, the blocklist) calls [`AuditLog::record`] once the change has committed, in the
//! same service method that made it, so every transport (JSON API, gRPC, the other shorteners'
//! dialects, the console) is covered by the one call. The entry names the caller's key and
//! tenant, the person when one signed in ([`crate::domain::Person`]), the client address the
//! transport found (the trusted-proxy rules of `SHORTENER_CLIENT_IP_HEADER`), the action, the
//! object and a bounded summary of what changed ([`summary`]), never a secret.
//!
//! Sign-ins and failed sign-ins go through [`AuditLog::record_sign_in`]. Changes of the roles
//! file go through [`AuditLog::record_role_mappings`] ([`Action::RoleMappingChange`] on
//! [`ObjectKind::RoleMapping`]), by each node that reloads it.
//!
//! Entries past `SHORTENER_AUDIT_RETENTION_DAYS` are purged by [`AuditLog::run_purge`], a
//! bounded number per run. docs/audit.md says why entries are written where they are.

mod format;
mod names;
mod query;
mod summary;

/// A stored entry, as [`AuditLog::page`] and [`export_rows`] answer it.
pub use crate::store::AuditEntry as Entry;
pub use format::{CSV_COLUMNS, csv_fields, entry_json};
pub use names::{Action, ObjectKind};
pub use query::{AuditPage, AuditQuery, EXPORT_MAX_ROWS, Format, MAX_LIMIT, export_rows};
pub use summary::{MAX_CHANGE_BYTES, summary};

use crate::domain::{Caller, Error};
use crate::store::{AuditFilter, AuditStore, NewAuditEntry, Store};
use chrono::Utc;
use std::future::Future;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

tokio::task_local! {
    static CLIENT: IpAddr;
}

/// Runs `request` knowing that it came from `client`: what [`client`] answers within it.
/// Transports wrap each request they serve in it.
pub async fn with_client<F: Future>(client: IpAddr, request: F) -> F::Output {
    CLIENT.scope(client, request).await
}

/// The client address of the request being served, if its transport said (see
/// [`with_client`]).
pub fn client() -> Option<IpAddr> {
    CLIENT.try_with(|ip| *ip).ok()
}

/// The actor a change of the roles file is recorded with.
pub const ROLES_FILE_ACTOR: &str = "roles-file";

/// What an entry is about: the tenant whose object it is, the action and the object.
#[derive(Debug, Clone)]
pub struct Subject<'a> {
    /// The tenant whose object changed (who may read the entry).
    pub tenant: &'a str,
    /// What was done.
    pub action: Action,
    /// The object's kind.
    pub kind: ObjectKind,
    /// The object: a code, host, name or number.
    pub id: &'a str,
}

/// A sign-in attempt, as the sign-in flow reports it.
#[derive(Debug, Clone, Default)]
pub struct SignInAttempt<'a> {
    /// The tenant the person signed in to, when one was chosen (empty otherwise).
    pub tenant: &'a str,
    /// The person's subject, when the ID token got as far as naming one.
    pub subject: Option<&'a str>,
    /// Their e-mail, when known.
    pub email: Option<&'a str>,
    /// Where the browser's request came from.
    pub address: Option<IpAddr>,
    /// Whether the sign-in succeeded.
    pub succeeded: bool,
    /// Why a failed one failed (a short machine-readable reason, never a token).
    pub reason: Option<&'a str>,
}

/// How long entries are kept and how the purge runs.
#[derive(Debug, Clone, Copy)]
pub struct AuditSettings {
    /// Entries older than this are purged.
    pub retention: Duration,
    /// How often the purge runs.
    pub purge_every: Duration,
    /// The most entries one purge run removes (the next run takes the rest).
    pub purge_batch: usize,
}

impl Default for AuditSettings {
    /// A year's retention, purged hourly, 10000 entries a run.
    fn default() -> Self {
        Self {
            retention: Duration::from_secs(365 * 86_400),
            purge_every: Duration::from_secs(3600),
            purge_batch: 10_000,
        }
    }
}

/// Records and reads the audit log.
///
/// Entries recorded at once by concurrent requests are written together: [`AuditLog::record`]
/// hands its entry to one writer task, which appends whatever entries are waiting in one
/// store write and then answers each of their callers, so a busy node adds one write per
/// batch rather than per change, and every caller still waits until its entry is durable.
pub struct AuditLog {
    store: Store,
    settings: AuditSettings,
    failed: Arc<AtomicU64>,
    purged: AtomicU64,
    /// The writer task's queue, started by the first entry (in the runtime that records).
    queue: OnceLock<mpsc::Sender<Pending>>,
    /// Places for exports running at once on this node: [`MAX_EXPORTS`], one per tenant.
    exports: crate::limits::Gate,
}

/// Audit exports one node streams at once; more answer `429`.
pub const MAX_EXPORTS: usize = 2;

/// An entry waiting for the writer, and who to tell once it is written.
struct Pending {
    /// The entry; `None` for a marker that asks only to be told once everything queued before
    /// it is written ([`AuditLog::settle`]).
    entry: Option<NewAuditEntry>,
    written: oneshot::Sender<()>,
}

/// Attempts at writing one batch before it is given up (and its entries logged as lost).
const ATTEMPTS: u32 = 4;
/// The most entries one write takes.
const MAX_BATCH: usize = 256;
/// Entries that may wait for the writer; past it, recording waits for room.
const QUEUE: usize = 4096;

/// The entry that records that `caller` did `subject`, changing `change` (made safe by
/// [`summary`]), as [`AuditLog::record`] writes it. A change whose store write can carry its
/// entry in the same transaction (a link's create, [`crate::store::NewLink::audit`]) takes it
/// from here instead of recording it afterwards, so the change and its entry commit together.
pub fn entry(caller: &Caller, subject: Subject<'_>, change: serde_json::Value) -> NewAuditEntry {
    let person = caller.person.as_deref();
    NewAuditEntry {
        tenant: subject.tenant.to_string(),
        actor_tenant: caller.tenant.to_string(),
        actor_key: caller.key.to_string(),
        actor_subject: person.map(|p| p.subject.to_string()),
        actor_email: person.and_then(|p| p.email.as_deref().map(str::to_string)),
        address: caller.address.or_else(client).map(|ip| ip.to_string()),
        action: subject.action.name().to_string(),
        object_kind: subject.kind.name().to_string(),
        object_id: subject.id.to_string(),
        change: summary(change),
    }
}

impl AuditLog {
    /// A log kept in `store`.
    pub fn new(store: Store, settings: AuditSettings) -> Self {
        Self {
            store,
            settings,
            failed: Arc::default(),
            purged: AtomicU64::new(0),
            queue: OnceLock::new(),
            exports: crate::limits::Gate::new(
                crate::limits::Places {
                    per_node: std::num::NonZeroUsize::new(MAX_EXPORTS).expect("not zero"),
                    per_tenant: std::num::NonZeroUsize::MIN,
                    per_key: std::num::NonZeroUsize::MIN,
                },
                Duration::from_secs(1),
            ),
        }
    }

    /// Entries that could not be written (after retries) since the node started.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Entries purged since the node started.
    pub fn purged(&self) -> u64 {
        self.purged.load(Ordering::Relaxed)
    }

    /// Records that `caller` did `subject`, changing `change` (made safe by [`summary`]).
    /// Called after the change committed; answers once the entry is durable, retrying a
    /// failed write a few times (the change stands either way: a lost entry is logged and
    /// counted).
    pub async fn record(&self, caller: &Caller, subject: Subject<'_>, change: serde_json::Value) {
        self.append(entry(caller, subject, change)).await;
    }

    /// Records a sign-in ([`Action::SignIn`]) or a refused one ([`Action::SignInFailed`]) on
    /// the person's session: what the sign-in flow calls, once per attempt.
    pub async fn record_sign_in(&self, attempt: SignInAttempt<'_>) {
        let action = if attempt.succeeded {
            Action::SignIn
        } else {
            Action::SignInFailed
        };
        let entry = NewAuditEntry {
            tenant: attempt.tenant.to_string(),
            actor_tenant: attempt.tenant.to_string(),
            actor_key: String::new(),
            actor_subject: attempt.subject.map(str::to_string),
            actor_email: attempt.email.map(str::to_string),
            address: attempt.address.or_else(client).map(|ip| ip.to_string()),
            action: action.name().to_string(),
            object_kind: ObjectKind::Session.name().to_string(),
            object_id: attempt.subject.unwrap_or_default().to_string(),
            change: summary(serde_json::json!({ "reason": attempt.reason })),
        };
        self.append(entry).await;
    }

    /// Records that the roles file changed `tenant`'s mappings as `change` says (the tables
    /// added and removed, and the node that saw it): the actor is the operator's file
    /// ([`ROLES_FILE_ACTOR`]), with no person and no address.
    pub async fn record_role_mappings(&self, tenant: &str, change: serde_json::Value) {
        let entry = NewAuditEntry {
            tenant: tenant.to_string(),
            actor_tenant: String::new(),
            actor_key: ROLES_FILE_ACTOR.to_string(),
            actor_subject: None,
            actor_email: None,
            address: None,
            action: Action::RoleMappingChange.name().to_string(),
            object_kind: ObjectKind::RoleMapping.name().to_string(),
            object_id: tenant.to_string(),
            change: summary(change),
        };
        self.append(entry).await;
    }

    async fn append(&self, entry: NewAuditEntry) {
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::channel(QUEUE);
            tokio::spawn(write_batches(
                self.store.clone(),
                rx,
                Arc::clone(&self.failed),
            ));
            tx
        });
        let (written, done) = oneshot::channel();
        let entry = Some(entry);
        if queue.send(Pending { entry, written }).await.is_err() || done.await.is_err() {
            // The writer is gone (the runtime is shutting down): the entry is not written.
            self.failed.fetch_add(1, Ordering::Relaxed);
            tracing::error!("an audit entry could not be written: the writer stopped");
        }
    }

    /// Returns once every entry queued before the call has been written (or given up): what a
    /// request the drain cut short had already handed over lands before the node lets go of
    /// its store. At once when nothing was ever queued.
    pub async fn settle(&self) {
        let Some(queue) = self.queue.get() else {
            return;
        };
        let (written, done) = oneshot::channel();
        if queue
            .send(Pending {
                entry: None,
                written,
            })
            .await
            .is_ok()
        {
            let _ = done.await;
        }
    }

    /// One page of the entries `caller` may read, as `query` asks.
    pub async fn page(&self, caller: &Caller, query: &AuditQuery) -> Result<AuditPage, Error> {
        let filter = query.filter(caller)?;
        let entries = self.store.audit_entries(&filter, query.limit()).await?;
        Ok(AuditPage::new(entries, query.limit()))
    }

    /// The entries matching `filter` older than the filter's keyset, at most `limit`.
    pub(crate) async fn read(
        &self,
        filter: &AuditFilter,
        limit: usize,
    ) -> Result<Vec<crate::store::AuditEntry>, Error> {
        Ok(self.store.audit_entries(filter, limit).await?)
    }

    /// A place for one export by `caller`, held until the returned place is dropped;
    /// `rate_limited` when [`MAX_EXPORTS`] are running, or one of its tenant's is: one tenant
    /// never holds every place.
    pub fn export_place(&self, caller: &Caller) -> Result<crate::limits::Place, Error> {
        self.exports.admit(caller)
    }

    /// Removes entries past the retention, at most one batch; how many it removed.
    pub async fn purge_once(&self) -> Result<usize, Error> {
        let retention =
            chrono::Duration::from_std(self.settings.retention).unwrap_or(chrono::Duration::MAX);
        let before = Utc::now()
            .checked_sub_signed(retention)
            .unwrap_or(chrono::DateTime::<Utc>::MIN_UTC);
        let removed = self
            .store
            .purge_audit(before, self.settings.purge_batch)
            .await?;
        self.purged.fetch_add(removed as u64, Ordering::Relaxed);
        Ok(removed)
    }

    /// Purges past-retention entries every purge interval until `stop`.
    pub async fn run_purge(self: Arc<Self>, stop: CancellationToken) {
        let mut every = tokio::time::interval(self.settings.purge_every);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = every.tick() => {}
            }
            match self.purge_once().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(removed = n, "audit entries past their retention purged"),
                Err(e) => tracing::warn!(error = %e, "audit purge failed; the next run retries"),
            }
        }
    }
}

/// The writer task: appends whatever entries wait (at most [`MAX_BATCH`]) in one store write,
/// retrying a failed write a few times, then tells each caller; until `rx` closes.
async fn write_batches(store: Store, mut rx: mpsc::Receiver<Pending>, failed: Arc<AtomicU64>) {
    let mut waiting = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut waiting, MAX_BATCH).await > 0 {
        let batch: Vec<Pending> = std::mem::take(&mut waiting);
        let entries: Vec<NewAuditEntry> = batch.iter().filter_map(|p| p.entry.clone()).collect();
        let mut delay = Duration::from_millis(50);
        for attempt in (1..=ATTEMPTS).take_while(|_| !entries.is_empty()) {
            match store.append_audit(entries.clone()).await {
                Ok(()) => break,
                Err(e) if attempt == ATTEMPTS => {
                    failed.fetch_add(entries.len() as u64, Ordering::Relaxed);
                    for entry in &entries {
                        tracing::error!(
                            action = %entry.action,
                            kind = %entry.object_kind,
                            object = %entry.object_id,
                            tenant = %entry.tenant,
                            error = %e,
                            "an audit entry could not be written; the change stands"
                        );
                    }
                }
                Err(_) => {
                    tokio::time::sleep(delay).await;
                    delay *= 4;
                }
            }
        }
        for pending in batch {
            let _ = pending.written.send(());
        }
    }
}

impl crate::metrics::Sample for AuditLog {
    fn sample(&self, out: &mut crate::metrics::Samples<'_, '_>) -> std::fmt::Result {
        out.counter(
            "shortener_audit_entries_lost",
            "Audit entries that could not be written after their retries (the change stood).",
            self.failed(),
        )?;
        out.counter(
            "shortener_audit_entries_purged",
            "Audit entries removed past their retention by this node's purge.",
            self.purged(),
        )
    }
}

#[cfg(test)]
mod tests;
