//! The API keys interface: keys tenant admins make through the API, kept by the digest of their
//! secret (the secret itself is never stored). A revoked key keeps its row; only live keys are
//! read back. Every node reads the live keys each reload interval (`crate::keys`).

use super::{Store, StoreError};
use chrono::{DateTime, Utc};
use std::future::Future;

/// A key to store.
#[derive(Debug, Clone)]
pub struct NewApiKey {
    /// The tenant whose links it acts on.
    pub tenant: String,
    /// Its name, unique among the tenant's live keys.
    pub name: String,
    /// The SHA-256 of its secret.
    pub digest: [u8; 32],
    /// Its scopes, by name, comma-separated (`links:create,links:read`).
    pub scopes: String,
    /// The key that made it (`tenant/name`).
    pub created_by: String,
    /// When it stops working, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// The signed-in person who made it, when a person did: whose role caps it.
    pub person: Option<PersonClaims>,
}

/// The person a key was made by, as their latest sign-in knew them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonClaims {
    /// Their subject at the issuer (the ID token's `sub`).
    pub subject: String,
    /// The claims of their latest sign-in that the roles file may name (a JSON object, as a
    /// session keeps them).
    pub claims: String,
}

/// A live key as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredApiKey {
    /// Its row's number (what a note of its last use names).
    pub id: i64,
    /// The tenant whose links it acts on.
    pub tenant: String,
    /// Its name.
    pub name: String,
    /// The SHA-256 of its secret.
    pub digest: [u8; 32],
    /// Its scopes, by name, comma-separated.
    pub scopes: String,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// The key that made it (`tenant/name`).
    pub created_by: String,
    /// When it stops working, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// When some node last accepted it, as last written (notes are written in batches, so this
    /// may be behind by up to the batch interval).
    pub last_used_at: Option<DateTime<Utc>>,
    /// The signed-in person who made it, when a person did.
    pub person: Option<PersonClaims>,
}

/// What a store does with API keys. Both backends implement it; [`Store`] dispatches.
pub trait KeyStore: Send + Sync {
    /// Stores `key` (its `created_at` is the store's time); `None` when its tenant holds a live
    /// key of that name already: nothing is written then. A key with a person takes the claims
    /// of that person's latest session where the store holds one (a sign-in between the
    /// caller's read and this write is not missed), else those `key` carries.
    fn insert_api_key(
        &self,
        key: &NewApiKey,
    ) -> impl Future<Output = Result<Option<StoredApiKey>, StoreError>> + Send;

    /// The live (unrevoked) keys of `tenant` (`None`: of every tenant), by tenant and name.
    /// Expired keys are among them: expiry is checked when a key is used.
    fn api_keys(
        &self,
        tenant: Option<&str>,
    ) -> impl Future<Output = Result<Vec<StoredApiKey>, StoreError>> + Send;

    /// Whether a live (unrevoked, unexpired) key of `digest` is kept: one indexed read, for a
    /// key a node does not hold yet.
    fn api_key_live(
        &self,
        digest: [u8; 32],
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Revokes the live key `name` of `tenant`; false when there is none.
    fn revoke_api_key(
        &self,
        tenant: &str,
        name: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Records when keys were last used (by row number), in one write; a time never moves a
    /// key's last use back.
    fn note_api_key_uses(
        &self,
        uses: Vec<(i64, DateTime<Utc>)>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Gives the live keys person `subject` made, and their open sessions, the claims of their
    /// latest sign-in (the sessions its e-mail and name too), in one transaction; how many keys
    /// it changed.
    fn refresh_person_claims(
        &self,
        person: &Person<'_>,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;
}

/// What a person's latest sign-in says of them: their subject, the claims kept, and the
/// e-mail and name their sessions show.
#[derive(Debug, Clone, Copy)]
pub struct Person<'a> {
    /// The issuer's subject.
    pub subject: &'a str,
    /// The claims kept, as JSON.
    pub claims: &'a str,
    /// The verified e-mail, if any.
    pub email: Option<&'a str>,
    /// The name, if any.
    pub name: Option<&'a str>,
}

impl KeyStore for Store {
    async fn insert_api_key(&self, key: &NewApiKey) -> Result<Option<StoredApiKey>, StoreError> {
        traced!(self, "INSERT", "api_keys", s => s.insert_api_key(key))
    }

    async fn api_keys(&self, tenant: Option<&str>) -> Result<Vec<StoredApiKey>, StoreError> {
        traced!(self, "SELECT", "api_keys", s => s.api_keys(tenant))
    }

    async fn api_key_live(&self, digest: [u8; 32]) -> Result<bool, StoreError> {
        traced!(self, "SELECT", "api_keys", s => s.api_key_live(digest))
    }

    async fn revoke_api_key(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        traced!(self, "UPDATE", "api_keys", s => s.revoke_api_key(tenant, name))
    }

    async fn note_api_key_uses(&self, uses: Vec<(i64, DateTime<Utc>)>) -> Result<(), StoreError> {
        traced!(self, "UPDATE", "api_keys", s => s.note_api_key_uses(uses))
    }

    async fn refresh_person_claims(&self, person: &Person<'_>) -> Result<u64, StoreError> {
        traced!(self, "UPDATE", "api_keys", s => s.refresh_person_claims(person))
    }
}
