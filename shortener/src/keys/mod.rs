//! API keys tenant admins make through the API, kept in the store beside the operator's keys
//! file. [`KeyService`] owns them: the rules a new key must pass, the tenant confinement, and
//! keeping them in force on this node.
//!
//! - Who: a caller with `keys:manage` (or `admin`, which grants it) manages its own tenant's
//!   keys only (an `admin` key too: its other tenants are the operator's file's business), and
//!   gives a new key at most the scopes it holds itself.
//! - The secret is made here ([`generate_api_key`]), handed out once in the create's answer,
//!   and only its SHA-256 is stored. It is never logged.
//! - Names: the keys file's names are the operator's. A key of the file and a stored key never
//!   share a (tenant, name): a create of a name the file holds is refused, and a stored key
//!   whose name the file takes later is left out of force (the file wins), with a warning.
//! - Capped by a person's role: a key a signed-in person made carries at most what that person
//!   holds now ([`cap`]), worked out at each reload from the roles file in force and the claims
//!   of the person's latest sign-in.
//! - In force: every node reads the live stored keys each reload interval
//!   (`SHORTENER_RELOAD_INTERVAL_MS`) and replaces its stored set whole, so a revocation stops
//!   the key on every node within that bound; the node that takes a create or revocation puts
//!   it in force at once. A key another node made since the last read is found sooner: a
//!   well-formed key a node holds in neither set is looked up by its digest before it is
//!   refused, and when the store keeps it live the set is read again at once
//!   (`lookup`, bounded in reads and time).
//! - Last use: authentication notes it in memory ([`LastUse`], one atomic store); this service
//!   writes the notes that moved, in one batch, every [`LAST_USE_INTERVAL`] (and when the node
//!   stops), so a request never waits for a write and a key costs at most one row update a
//!   minute. A list shows the later of the stored time and this node's note.

pub mod cap;
mod check;
mod lookup;

use check::invalid;
pub use check::{CheckedKey, check};
pub use lookup::{LOOKUP_DEADLINE, LOOKUP_READ_GAP, LOOKUPS_IN_FLIGHT, LOOKUPS_PER_SECOND};

use crate::access::{
    ApiKeys, Kept, KeyEntry, KeySet, LastUse, check_name, digest, generate_api_key,
};
use crate::audit::{Action, AuditLog, ObjectKind, Subject};
use crate::domain::{Caller, Error, Person, Scopes};
use crate::signin::roles::Roles;
use crate::store::{KeyStore, NewApiKey, PersonClaims, Store, StoreError, StoredApiKey};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How often the keys' last uses are written to the store.
pub const LAST_USE_INTERVAL: Duration = Duration::from_secs(60);

/// A key to make, as the caller asked for it.
#[derive(Debug, Clone, Default)]
pub struct KeyRequest {
    /// Its name (`A-Za-z0-9_.-`, 1 to 64 characters, starting with a letter or digit).
    pub name: String,
    /// Its scopes, by name.
    pub scopes: Vec<String>,
    /// When it stops working (RFC 3339), if ever.
    pub expires_at: Option<String>,
}

/// A key made through the API, as it is shown: never its secret or digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyView {
    /// The tenant whose links it acts on.
    pub tenant: String,
    /// Its name.
    pub name: String,
    /// What it may do.
    pub scopes: Scopes,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// The key that made it (`tenant/name`).
    pub created_by: String,
    /// When it stops working, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was last accepted, as far as this node knows.
    pub last_used_at: Option<DateTime<Utc>>,
    /// What it may do now: `scopes` capped by the role its person holds, when a person made it
    /// ([`cap`]); `None` when it is not in force for that (its person holds no role there).
    pub in_force: Option<Scopes>,
}

/// A key just made: how it is shown, and its secret (shown this once, kept nowhere).
#[derive(Debug, Clone)]
pub struct CreatedKey {
    /// The key.
    pub key: KeyView,
    /// The secret a client sends as `Authorization: Bearer <secret>`.
    pub secret: String,
}

/// A stored key's note of its last use on this node, and the time last written for it.
struct Note {
    used: Arc<LastUse>,
    written: Option<DateTime<Utc>>,
}

/// The API keys made through the API: creates, lists and revocations, each confined to the
/// caller's tenant, and keeping them in force on this node.
pub struct KeyService {
    store: Store,
    keys: Arc<ApiKeys>,
    notes: Mutex<HashMap<i64, Note>>,
    /// Held by each read and replacement of the stored set, so an older read never replaces
    /// a newer one (a revocation's own sync racing the periodic one); when reads began.
    syncing: tokio::sync::Mutex<lookup::Reads>,
    /// The lookups of keys this node does not hold: their bounds, and what the last read and
    /// lookups learnt.
    lookups: lookup::Lookups,
    audit: Arc<AuditLog>,
    /// The roles people hold: what caps the keys they made.
    roles: Arc<Roles>,
    /// The scopes in force of each key a person made, as the last read put them (`None`: not
    /// in force), so that a change is logged once.
    capped: Mutex<HashMap<i64, Option<Scopes>>>,
}

/// Logs a change of what the key `key`, made by `person` with `scopes`, may do: `now` in place
/// of `before` (`None` before: the first read of this node, logged only when capped).
fn note_cap(
    key: &StoredApiKey,
    person: &PersonClaims,
    scopes: Scopes,
    now: Option<Scopes>,
    before: Option<Option<Scopes>>,
) {
    let changed = match before {
        Some(before) => before != now,
        None => now != Some(scopes),
    };
    if !changed {
        return;
    }
    match now {
        None => {
            tracing::info!(tenant = %key.tenant, name = %key.name, person = %person.subject, "the person who made this API key holds no role in its tenant now; the key is not in force")
        }
        Some(held) => {
            tracing::info!(tenant = %key.tenant, name = %key.name, person = %person.subject, scopes = %held, "this API key is in force with the scopes its person's role grants")
        }
    }
}

/// The most unrevoked keys (expired ones too) a tenant may make through the API. Every key is in memory on every node
/// and re-read with each sync, and a YOURLS signature names no key (each is tried): the count is
/// bounded so that neither grows with what one tenant asks for.
pub const MAX_KEYS_PER_TENANT: usize = 1000;

fn name_taken(name: &str, by: &str) -> Error {
    Error::conflict(
        "key_name_taken",
        format!(
            "name: {} is taken in this tenant by {by}",
            crate::domain::echo(name)
        ),
    )
}

impl KeyService {
    /// The service over `store`, putting stored keys in force in `keys`, those people made
    /// capped by the role `roles` give them.
    pub fn new(store: Store, keys: Arc<ApiKeys>, audit: Arc<AuditLog>, roles: Arc<Roles>) -> Self {
        Self {
            store,
            keys,
            notes: Mutex::new(HashMap::new()),
            syncing: tokio::sync::Mutex::new(lookup::Reads::default()),
            lookups: lookup::Lookups::default(),
            audit,
            roles,
            capped: Mutex::new(HashMap::new()),
        }
    }

    /// Makes a key for `caller`'s tenant: checked ([`check`]), stored by its digest, in force
    /// on this node at once and on the others within the reload interval.
    pub async fn create(&self, caller: &Caller, request: &KeyRequest) -> Result<CreatedKey, Error> {
        let checked = check(caller, request, Utc::now())?;
        if self.keys.configured(&caller.tenant, &checked.name) {
            return Err(name_taken(&checked.name, "a key of the keys file"));
        }
        // Counted before the insert: creates racing at the bound may pass it by a few. An
        // expired key counts until it is revoked: it is still stored and read by every sync.
        let live = self.store.api_keys(Some(&caller.tenant)).await?.len();
        if live >= MAX_KEYS_PER_TENANT {
            return Err(Error::conflict(
                "too_many_keys",
                format!(
                    "this tenant has {live} keys made through the API, the most it may have \
                     ({MAX_KEYS_PER_TENANT}): revoke one first"
                ),
            ));
        }
        let secret = generate_api_key();
        let new = NewApiKey {
            tenant: caller.tenant.to_string(),
            name: checked.name.clone(),
            digest: digest(&secret),
            scopes: checked.scopes.to_string(),
            created_by: caller.key_id(),
            expires_at: checked.expires_at,
            // The person signed in, or the one who made the key making this one: a key made by
            // a person's key is theirs, capped alike. The store takes the claims of the
            // person's latest sign-in where it holds one; claims no one kept give no role.
            person: caller
                .person
                .as_ref()
                .or(caller.maker.as_ref())
                .map(|p| PersonClaims {
                    subject: p.subject.to_string(),
                    claims: p.claims.as_deref().unwrap_or("{}").to_string(),
                }),
        };
        let Some(stored) = self.store.insert_api_key(&new).await? else {
            return Err(name_taken(&checked.name, "another key"));
        };
        // The key is stored: its secret must reach the caller even if this node cannot put it
        // in force now (the next reload does).
        self.sync_soon().await;
        tracing::info!(tenant = %stored.tenant, name = %stored.name, by = %caller.key_id(), scopes = %new.scopes, "API key created");
        let subject = Subject {
            tenant: &stored.tenant,
            action: Action::KeyCreate,
            kind: ObjectKind::Key,
            id: &stored.name,
        };
        // The secret and its digest are never part of the record.
        let change = serde_json::json!({ "scopes": &new.scopes, "expires_at": new.expires_at });
        self.audit.record(caller, subject, change).await;
        Ok(CreatedKey {
            key: self.view(&stored, checked.scopes, &self.keys.tenants()),
            secret,
        })
    }

    /// The live keys of `caller`'s tenant made through the API, by name.
    pub async fn list(&self, caller: &Caller) -> Result<Vec<KeyView>, Error> {
        let stored = self.store.api_keys(Some(&caller.tenant)).await?;
        let tenants = self.keys.tenants();
        Ok(stored
            .iter()
            .filter_map(|k| Some(self.view(k, Scopes::parse_list(&k.scopes).ok()?, &tenants)))
            .collect())
    }

    /// Revokes the key `name` of `caller`'s tenant: false when the tenant has no live key of
    /// that name made through the API (another tenant's is not seen).
    pub async fn revoke(&self, caller: &Caller, name: &str) -> Result<bool, Error> {
        check_name("name", name, true).map_err(|m| invalid("invalid_name", m))?;
        if !self.store.revoke_api_key(&caller.tenant, name).await? {
            return Ok(false);
        }
        self.sync_soon().await;
        tracing::info!(tenant = %caller.tenant, name = %name, by = %caller.key_id(), "API key revoked");
        let subject = Subject {
            tenant: &caller.tenant,
            action: Action::KeyRevoke,
            kind: ObjectKind::Key,
            id: name,
        };
        self.audit
            .record(caller, subject, serde_json::json!({ "revoked": true }))
            .await;
        Ok(true)
    }

    /// How `stored` (with `scopes`) is shown, in force as the roles give it in `tenants` (those
    /// that exist).
    fn view(&self, stored: &StoredApiKey, scopes: Scopes, tenants: &[String]) -> KeyView {
        let noted = self
            .notes
            .lock()
            .expect("notes")
            .get(&stored.id)
            .and_then(|n| n.used.last());
        KeyView {
            tenant: stored.tenant.clone(),
            name: stored.name.clone(),
            scopes,
            created_at: stored.created_at,
            created_by: stored.created_by.clone(),
            expires_at: stored.expires_at,
            last_used_at: stored.last_used_at.max(noted),
            // A key the keys file shadows is not in force whatever its person holds.
            in_force: (!self.keys.configured(&stored.tenant, &stored.name))
                .then(|| self.in_force(stored, scopes, tenants))
                .flatten(),
        }
    }

    /// What `stored` (with `scopes`) may do under the roles in force now, in `tenants` (those
    /// that exist) ([`cap::in_force`]).
    fn in_force(
        &self,
        stored: &StoredApiKey,
        scopes: Scopes,
        tenants: &[String],
    ) -> Option<Scopes> {
        cap::in_force(
            scopes,
            &stored.tenant,
            stored.person.as_ref(),
            &self.roles.mappings(),
            |t| tenants.iter().any(|known| known == t),
        )
    }

    /// [`KeyService::sync`] after a change: a failure is logged, and the next reload interval
    /// puts the change in force instead.
    async fn sync_soon(&self) {
        if let Err(error) = self.sync().await {
            tracing::warn!(%error, "reading the stored API keys after a change failed; the next reload puts it in force");
        }
    }

    /// Reads the live stored keys and puts them in force in place of the previous ones; returns
    /// how many are in force. A row whose scopes do not parse (a hand-edited one) or whose
    /// name the keys file holds is left out, with a warning.
    pub async fn sync(&self) -> Result<usize, StoreError> {
        let mut reads = self.syncing.lock().await;
        self.read_noted(&mut reads).await
    }

    /// [`KeyService::replace_stored`], noted in `reads` (the lock held): when it began, and if
    /// it put the keys in force, that too.
    async fn read_noted(&self, reads: &mut lookup::Reads) -> Result<usize, StoreError> {
        let began = Instant::now();
        reads.attempted = Some(began);
        let count = self.replace_stored().await?;
        reads.succeeded = Some(began);
        Ok(count)
    }

    /// Reads the live stored keys and puts them in force (with [`KeyService::syncing`] held).
    async fn replace_stored(&self) -> Result<usize, StoreError> {
        let stored = self.store.api_keys(None).await?;
        let tenants = self.keys.tenants();
        let mut capped = self.capped.lock().expect("capped");
        let mut was = std::mem::take(&mut *capped);
        let mut notes = self.notes.lock().expect("notes");
        let mut kept = HashMap::with_capacity(stored.len());
        let mut entries = Vec::with_capacity(stored.len());
        let live = stored.iter().map(|key| key.digest).collect();
        for key in stored {
            let Ok(scopes) = Scopes::parse_list(&key.scopes) else {
                tracing::warn!(tenant = %key.tenant, name = %key.name, "a stored API key's scopes do not parse; it is not in force");
                continue;
            };
            if self.keys.configured(&key.tenant, &key.name) {
                tracing::warn!(tenant = %key.tenant, name = %key.name, "the keys file holds a key of this stored key's name; the file's is in force, the stored one is not");
                continue;
            }
            let in_force = self.in_force(&key, scopes, &tenants);
            if let Some(person) = &key.person {
                note_cap(&key, person, scopes, in_force, was.remove(&key.id));
                capped.insert(key.id, in_force);
            }
            // A key out of force keeps its note: a use before it went out is still written.
            let note = notes.remove(&key.id).unwrap_or_else(|| Note {
                used: Arc::new(LastUse::default()),
                written: key.last_used_at,
            });
            let used = Arc::clone(&note.used);
            kept.insert(key.id, note);
            let Some(scopes) = in_force else {
                continue;
            };
            let maker = key.person.map(|p| {
                Arc::new(Person {
                    subject: Arc::from(p.subject),
                    email: None,
                    claims: Some(Arc::from(p.claims)),
                })
            });
            entries.push((
                KeyEntry {
                    tenant: key.tenant,
                    name: key.name,
                    digest: key.digest,
                    scopes,
                    expires: key.expires_at,
                },
                Kept {
                    used: Some(used),
                    maker,
                },
            ));
        }
        let count = entries.len();
        // The store's constraints keep names and digests unique among live keys.
        let set = KeySet::noting(entries).map_err(StoreError::Internal)?;
        // Notes of keys no longer live are dropped with the keys: a revoked key's last use
        // after its last batch is not written.
        *notes = kept;
        drop(notes);
        drop(capped);
        self.keys.set_stored(set);
        self.lookups.read(live);
        Ok(count)
    }

    /// Writes the last uses noted since the previous write, in one batch; returns how many.
    pub async fn write_last_uses(&self) -> Result<usize, StoreError> {
        let due: Vec<(i64, DateTime<Utc>)> = self
            .notes
            .lock()
            .expect("notes")
            .iter()
            .filter_map(|(id, note)| {
                let last = note.used.last()?;
                (note.written.is_none_or(|w| w < last)).then_some((*id, last))
            })
            .collect();
        if due.is_empty() {
            return Ok(0);
        }
        self.store.note_api_key_uses(due.clone()).await?;
        let mut notes = self.notes.lock().expect("notes");
        for (id, at) in &due {
            if let Some(note) = notes.get_mut(id) {
                note.written = note.written.max(Some(*at));
            }
        }
        Ok(due.len())
    }

    /// Keeps the stored keys in force (read again every `reload`) and writes their last uses
    /// every [`LAST_USE_INTERVAL`], until `stop`; then writes the last uses once more.
    pub async fn run(self: Arc<Self>, reload: Duration, stop: CancellationToken) {
        let mut last_write = tokio::time::Instant::now();
        while tokio::time::timeout(reload, stop.cancelled())
            .await
            .is_err()
        {
            if let Err(error) = self.sync().await {
                tracing::warn!(%error, "reading the stored API keys failed; the keys in force stay");
            }
            if last_write.elapsed() >= LAST_USE_INTERVAL {
                last_write = tokio::time::Instant::now();
                if let Err(error) = self.write_last_uses().await {
                    tracing::warn!(%error, "writing the API keys' last uses failed; will retry");
                }
            }
        }
        if let Err(error) = self.write_last_uses().await {
            tracing::warn!(%error, "writing the API keys' last uses at shutdown failed");
        }
    }
}

#[cfg(test)]
mod tests;
