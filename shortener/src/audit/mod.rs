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

mod query;

/// A stored entry, as [`AuditLog::page`] and [`export_rows`] answer it.
pub use crate::store::AuditEntry as Entry;
pub use query::{AuditPage, AuditQuery, EXPORT_MAX_ROWS, Format, MAX_LIMIT, export_rows};

/// The CSV export's columns, in order.
pub const CSV_COLUMNS: &[&str] = &[
    "id",
    "at",
    "tenant",
    "actor_tenant",
    "actor_key",
    "actor_subject",
    "actor_email",
    "address",
    "action",
    "object_kind",
    "object_id",
    "change",
];

/// An entry as the API answers it: `{"id", "at", "tenant", "actor": {"tenant", "key",
/// "subject", "email"}, "address", "action", "object": {"kind", "id"}, "change"}`.
pub fn entry_json(entry: &Entry) -> serde_json::Value {
    let e = &entry.entry;
    serde_json::json!({
        "id": entry.id,
        "at": entry.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "tenant": &e.tenant,
        "actor": {
            "tenant": &e.actor_tenant,
            "key": &e.actor_key,
            "subject": &e.actor_subject,
            "email": &e.actor_email,
        },
        "address": &e.address,
        "action": &e.action,
        "object": { "kind": &e.object_kind, "id": &e.object_id },
        "change": &e.change,
    })
}

/// An entry's fields in the order of [`CSV_COLUMNS`].
pub fn csv_fields(entry: &Entry) -> [String; 12] {
    let e = &entry.entry;
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    [
        entry.id.to_string(),
        entry
            .at
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        e.tenant.clone(),
        e.actor_tenant.clone(),
        e.actor_key.clone(),
        text(&e.actor_subject),
        text(&e.actor_email),
        text(&e.address),
        e.action.clone(),
        e.object_kind.clone(),
        e.object_id.clone(),
        e.change.to_string(),
    ]
}

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

macro_rules! names {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl $name {
            /// Every value, in the order the API documents them.
            pub const ALL: &[$name] = &[$($name::$variant,)*];

            /// The name the API and the store use.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }

            /// The value named `name`.
            pub fn parse(name: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.name() == name)
            }
        }
    };
}

names! {
    /// What was done.
    Action {
        /// A link was made (over any transport).
        LinkCreate => "link.create",
        /// A link's target, expiry, tags, limits, password, domain or routing changed.
        LinkUpdate => "link.update",
        /// A link was disabled.
        LinkDisable => "link.disable",
        /// A link was enabled again.
        LinkEnable => "link.enable",
        /// A link was deleted.
        LinkDelete => "link.delete",
        /// Links were imported in bulk (one entry per import, with its counts).
        LinkImport => "link.import",
        /// A tag was renamed on every link of a tenant.
        TagRename => "tag.rename",
        /// A tag was removed from every link of a tenant.
        TagDelete => "tag.delete",
        /// A branded domain was claimed.
        DomainClaim => "domain.claim",
        /// A branded domain's settings changed.
        DomainUpdate => "domain.update",
        /// A branded domain was removed.
        DomainDelete => "domain.delete",
        /// An API key was made.
        KeyCreate => "key.create",
        /// An API key was revoked.
        KeyRevoke => "key.revoke",
        /// A webhook endpoint was registered.
        WebhookCreate => "webhook.create",
        /// A webhook endpoint was enabled or disabled.
        WebhookUpdate => "webhook.update",
        /// A webhook endpoint was removed.
        WebhookDelete => "webhook.delete",
        /// A target domain was blocked.
        BlocklistAdd => "blocklist.add",
        /// A target domain was unblocked.
        BlocklistRemove => "blocklist.remove",
        /// A tenant's role mappings changed in the roles file (one entry per tenant and node).
        RoleMappingChange => "role_mapping.change",
        /// A person signed in.
        SignIn => "signin",
        /// A sign-in was refused.
        SignInFailed => "signin_failed",
    }
}

names! {
    /// What kind of object an action was done to.
    ObjectKind {
        /// A link, by its code (as shown, with `@host` on a branded domain).
        Link => "link",
        /// A tag, by name.
        Tag => "tag",
        /// An import, by the number of rows it read.
        Import => "import",
        /// A branded domain, by host.
        Domain => "domain",
        /// An API key, by name.
        Key => "key",
        /// A webhook endpoint, by number.
        Webhook => "webhook",
        /// A blocked domain, by its entry.
        Blocklist => "blocklist",
        /// A tenant's role mappings, by the tenant.
        RoleMapping => "role_mapping",
        /// A console session (sign-ins), by the person's subject.
        Session => "session",
    }
}

/// The actor a change of the roles file is recorded with.
pub const ROLES_FILE_ACTOR: &str = "roles-file";

/// The most bytes a change summary keeps as compact JSON; a larger one is replaced by the
/// names of the fields it changed.
pub const MAX_CHANGE_BYTES: usize = 4096;

/// Fields whose values are never recorded, whatever object they belong to: a present one is
/// recorded as `"(set)"` or `null`.
const SECRET_FIELDS: &[&str] = &["password", "secret", "token", "digest", "client_secret"];

/// `change` made safe and bounded for the log: secret fields masked at any depth, and a
/// summary over [`MAX_CHANGE_BYTES`] replaced by `{"truncated": true, "fields": [...]}`.
pub fn summary(change: serde_json::Value) -> serde_json::Value {
    let masked = mask(change);
    if compact_len_at_most(&masked, MAX_CHANGE_BYTES) {
        return masked;
    }
    let fields: Vec<String> = match &masked {
        serde_json::Value::Object(map) => map.keys().take(64).cloned().collect(),
        _ => Vec::new(),
    };
    serde_json::json!({ "truncated": true, "fields": fields })
}

/// Whether `value` as compact JSON takes at most `limit` bytes. Most changes are far smaller:
/// a bound from the value's parts (every byte of a string escaped at the most, six bytes)
/// answers them without writing the JSON; the rest are written to a counter that stops at
/// the limit, so no change is ever written out whole to be measured.
fn compact_len_at_most(value: &serde_json::Value, limit: usize) -> bool {
    if json_len_bound(value) <= limit {
        return true;
    }
    struct Counter {
        left: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.left = self
                .left
                .checked_sub(bytes.len())
                .ok_or_else(|| std::io::Error::other("over the limit"))?;
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(Counter { left: limit }, value).is_ok()
}

/// At least as many bytes as `value` takes as compact JSON.
fn json_len_bound(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    let string = |s: &str| s.len() * 6 + 2;
    match value {
        Value::Null | Value::Bool(_) => 5,
        // An f64 or a 64-bit integer is at most 24 characters.
        Value::Number(_) => 24,
        Value::String(s) => string(s),
        Value::Array(items) => 2 + items.iter().map(|v| json_len_bound(v) + 1).sum::<usize>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| string(k) + 2 + json_len_bound(v))
                .sum::<usize>()
        }
    }
}

fn mask(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(name, value)| {
                    if SECRET_FIELDS.contains(&name.as_str()) {
                        let shown = if value.is_null() {
                            Value::Null
                        } else {
                            Value::from("(set)")
                        };
                        (name, shown)
                    } else {
                        (name, mask(value))
                    }
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(mask).collect()),
        other => other,
    }
}

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
    /// Places for exports running at once on this node.
    exports: Arc<tokio::sync::Semaphore>,
}

/// Audit exports one node streams at once; more answer `429`.
pub const MAX_EXPORTS: usize = 2;

/// An entry waiting for the writer, and who to tell once it is written.
struct Pending {
    entry: NewAuditEntry,
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
            exports: Arc::new(tokio::sync::Semaphore::new(MAX_EXPORTS)),
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
        if queue.send(Pending { entry, written }).await.is_err() || done.await.is_err() {
            // The writer is gone (the runtime is shutting down): the entry is not written.
            self.failed.fetch_add(1, Ordering::Relaxed);
            tracing::error!("an audit entry could not be written: the writer stopped");
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

    /// A place for one export, held until the returned permit is dropped; `rate_limited` when
    /// [`MAX_EXPORTS`] are running.
    pub fn export_place(&self) -> Result<tokio::sync::OwnedSemaphorePermit, Error> {
        Arc::clone(&self.exports)
            .try_acquire_owned()
            .map_err(|_| Error::RateLimited {
                retry_after: Duration::from_secs(1),
            })
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
        let entries: Vec<NewAuditEntry> = batch.iter().map(|p| p.entry.clone()).collect();
        let mut delay = Duration::from_millis(50);
        for attempt in 1..=ATTEMPTS {
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
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_at_any_depth_and_large_summaries_cut_to_field_names() {
        let change = serde_json::json!({
            "url": "https://example.com/",
            "password": "hunter2",
            "nested": [{"secret": "s3"}, {"secret": null}],
        });
        let safe = summary(change);
        assert_eq!(safe["password"], "(set)");
        assert_eq!(safe["nested"][0]["secret"], "(set)");
        assert!(safe["nested"][1]["secret"].is_null());
        assert!(!safe.to_string().contains("hunter2"));
        let big = serde_json::json!({ "url": "x".repeat(MAX_CHANGE_BYTES), "tags": [] });
        let cut = summary(big);
        assert_eq!(cut["truncated"], true);
        assert_eq!(cut["fields"], serde_json::json!(["tags", "url"]));
    }

    #[test]
    fn a_summary_is_measured_exactly_at_the_limit() {
        let values = [
            serde_json::json!(null),
            serde_json::json!(-1.2345678901234567e-308),
            serde_json::json!(u64::MAX),
            serde_json::json!({"url": "https://example.com/\u{0}\"\\\n", "tags": ["a", "b"], "n": [1, true]}),
            serde_json::json!({"url": "\u{1}".repeat(700)}),
            serde_json::json!({"url": "x".repeat(MAX_CHANGE_BYTES - 10)}),
        ];
        for value in values {
            let len = value.to_string().len();
            assert!(json_len_bound(&value) >= len, "{value}");
            assert!(compact_len_at_most(&value, len), "{value}");
            assert!(!compact_len_at_most(&value, len - 1), "{value}");
        }
        // Just past the limit: the bound cannot answer, the counter does.
        let edge = serde_json::json!({ "url": "x".repeat(MAX_CHANGE_BYTES - 9) });
        assert_eq!(edge.to_string().len(), MAX_CHANGE_BYTES + 1);
        assert_eq!(summary(edge)["truncated"], true);
    }

    #[test]
    fn every_name_parses_back() {
        for action in Action::ALL {
            assert_eq!(Action::parse(action.name()), Some(*action));
        }
        for kind in ObjectKind::ALL {
            assert_eq!(ObjectKind::parse(kind.name()), Some(*kind));
        }
        assert_eq!(Action::parse("link.explode"), None);
    }
}
