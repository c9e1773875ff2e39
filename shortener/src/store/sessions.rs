//! The console's sign-in sessions: one row per session, found by the SHA-256 of its cookie
//! (the cookie's value is never stored). A signed-out session keeps its row with `revoked_at`
//! set and is never read back; every node reads the row on every request made with the cookie.

use super::{Store, StoreError};
use chrono::{DateTime, Utc};
use std::future::Future;

/// A session to store.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// The SHA-256 of the cookie's value.
    pub digest: [u8; 32],
    /// The person's subject at the issuer (`sub`).
    pub subject: String,
    /// The person's e-mail address, when the issuer gave one.
    pub email: Option<String>,
    /// The person's name, when the issuer gave one.
    pub name: Option<String>,
    /// The ID token's claims the roles file may name, as a JSON object.
    pub claims: String,
    /// The tenant the person acts in, when the roles give one.
    pub tenant: Option<String>,
    /// When the session ends whatever its use (the absolute timeout).
    pub expires_at: DateTime<Utc>,
}

/// A live (not signed-out) session as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    /// The person's subject at the issuer.
    pub subject: String,
    /// The person's e-mail address.
    pub email: Option<String>,
    /// The person's name.
    pub name: Option<String>,
    /// The ID token's claims, as a JSON object.
    pub claims: String,
    /// The tenant the person acts in.
    pub tenant: Option<String>,
    /// When the session began.
    pub created_at: DateTime<Utc>,
    /// When a request last used it, as last written (written at most once a minute).
    pub last_seen_at: DateTime<Utc>,
    /// When it ends whatever its use.
    pub expires_at: DateTime<Utc>,
}

/// What a store does with sessions. Both backends implement it; [`Store`] dispatches.
pub trait SessionStore: Send + Sync {
    /// Stores `session`; its `created_at` and `last_seen_at` are the store's time.
    fn insert_session(
        &self,
        session: &NewSession,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The live session whose cookie has the digest `digest`, if any (an expired one too: the
    /// caller checks the timeouts).
    fn session(
        &self,
        digest: [u8; 32],
    ) -> impl Future<Output = Result<Option<StoredSession>, StoreError>> + Send;

    /// Records that the live session `digest` was used at `at` (never moving it back).
    fn touch_session(
        &self,
        digest: [u8; 32],
        at: DateTime<Utc>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Makes `tenant` the live session's active tenant; false when there is no live session.
    fn switch_session_tenant(
        &self,
        digest: [u8; 32],
        tenant: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Revokes the live session `digest` (sign-out); false when there is none.
    fn revoke_session(
        &self,
        digest: [u8; 32],
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Deletes at most `limit` sessions past their absolute timeout before `expired_before`, or
    /// signed out before `revoked_before`; how many it deleted.
    fn purge_sessions(
        &self,
        expired_before: DateTime<Utc>,
        revoked_before: DateTime<Utc>,
        limit: usize,
    ) -> impl Future<Output = Result<usize, StoreError>> + Send;
}

impl SessionStore for Store {
    async fn insert_session(&self, session: &NewSession) -> Result<(), StoreError> {
        traced!(self, "INSERT", "console_sessions", s => s.insert_session(session))
    }

    async fn session(&self, digest: [u8; 32]) -> Result<Option<StoredSession>, StoreError> {
        traced!(self, "SELECT", "console_sessions", s => s.session(digest))
    }

    async fn touch_session(&self, digest: [u8; 32], at: DateTime<Utc>) -> Result<(), StoreError> {
        traced!(self, "UPDATE", "console_sessions", s => s.touch_session(digest, at))
    }

    async fn switch_session_tenant(
        &self,
        digest: [u8; 32],
        tenant: &str,
    ) -> Result<bool, StoreError> {
        traced!(self, "UPDATE", "console_sessions", s => s.switch_session_tenant(digest, tenant))
    }

    async fn revoke_session(&self, digest: [u8; 32]) -> Result<bool, StoreError> {
        traced!(self, "UPDATE", "console_sessions", s => s.revoke_session(digest))
    }

    async fn purge_sessions(
        &self,
        expired_before: DateTime<Utc>,
        revoked_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<usize, StoreError> {
        traced!(self, "DELETE", "console_sessions", s => s.purge_sessions(expired_before, revoked_before, limit))
    }
}
