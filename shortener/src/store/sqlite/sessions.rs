//! Console sessions on SQLite (all writes on the one writer thread, in order).

use super::convert::{db_error, from_millis, millis};
use crate::store::{NewSession, StoreError, StoredSession};
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

pub(super) fn insert(conn: &Connection, s: &NewSession) -> Result<(), StoreError> {
    let now = millis(Utc::now());
    conn.execute(
        "INSERT INTO console_sessions (digest, subject, email, name, claims, tenant, created_at, \
         last_seen_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8)",
        params![
            s.digest.as_slice(),
            s.subject,
            s.email,
            s.name,
            s.claims,
            s.tenant,
            now,
            millis(s.expires_at)
        ],
    )
    .map(|_| ())
    .map_err(db_error)
}

pub(super) fn find(
    conn: &Connection,
    digest: [u8; 32],
) -> Result<Option<StoredSession>, StoreError> {
    conn.query_row(
        "SELECT subject, email, name, claims, tenant, created_at, last_seen_at, expires_at \
         FROM console_sessions WHERE digest = ?1 AND revoked_at IS NULL",
        params![digest.as_slice()],
        |r| {
            Ok(StoredSession {
                subject: r.get(0)?,
                email: r.get(1)?,
                name: r.get(2)?,
                claims: r.get(3)?,
                tenant: r.get(4)?,
                created_at: from_millis(r.get(5)?),
                last_seen_at: from_millis(r.get(6)?),
                expires_at: from_millis(r.get(7)?),
            })
        },
    )
    .optional()
    .map_err(db_error)
}

pub(super) fn touch(
    conn: &Connection,
    digest: [u8; 32],
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    conn.execute(
        "UPDATE console_sessions SET last_seen_at = max(last_seen_at, ?2) \
         WHERE digest = ?1 AND revoked_at IS NULL",
        params![digest.as_slice(), millis(at)],
    )
    .map(|_| ())
    .map_err(db_error)
}

pub(super) fn switch(
    conn: &Connection,
    digest: [u8; 32],
    tenant: &str,
) -> Result<bool, StoreError> {
    conn.execute(
        "UPDATE console_sessions SET tenant = ?2 WHERE digest = ?1 AND revoked_at IS NULL",
        params![digest.as_slice(), tenant],
    )
    .map(|n| n == 1)
    .map_err(db_error)
}

pub(super) fn revoke(conn: &Connection, digest: [u8; 32]) -> Result<bool, StoreError> {
    conn.execute(
        "UPDATE console_sessions SET revoked_at = ?2 WHERE digest = ?1 AND revoked_at IS NULL",
        params![digest.as_slice(), millis(Utc::now())],
    )
    .map(|n| n == 1)
    .map_err(db_error)
}

/// Deletes at most `limit` sessions that expired before `expired_before` or were signed out
/// before `revoked_before`, each found by its index.
pub(super) fn purge(
    conn: &Connection,
    expired_before: DateTime<Utc>,
    revoked_before: DateTime<Utc>,
    limit: usize,
) -> Result<usize, StoreError> {
    conn.execute(
        "DELETE FROM console_sessions WHERE id IN (SELECT id FROM (\
         SELECT id FROM (SELECT id FROM console_sessions WHERE expires_at < ?1 \
         ORDER BY expires_at LIMIT ?3) \
         UNION \
         SELECT id FROM (SELECT id FROM console_sessions WHERE revoked_at < ?2 \
         ORDER BY revoked_at LIMIT ?3)) LIMIT ?3)",
        params![
            millis(expired_before),
            millis(revoked_before),
            i64::try_from(limit).unwrap_or(i64::MAX)
        ],
    )
    .map_err(db_error)
}
