//! Console sessions on PostgreSQL, read on the primary: a sign-out must not be missed by a
//! lagging replica.

use super::error::db_error;
use super::send::Conn;
use crate::store::{NewSession, StoreError, StoredSession};
use chrono::{DateTime, Utc};

pub(super) async fn insert(client: &Conn, s: &NewSession) -> Result<(), StoreError> {
    client
        .execute(
            "INSERT INTO console_sessions (digest, subject, email, name, claims, tenant, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                &s.digest.as_slice(),
                &s.subject,
                &s.email,
                &s.name,
                &s.claims,
                &s.tenant,
                &s.expires_at,
            ],
        )
        .await
        .map(|_| ())
        .map_err(db_error)
}

pub(super) async fn find(
    client: &Conn,
    digest: [u8; 32],
) -> Result<Option<StoredSession>, StoreError> {
    let row = client
        .query_opt(
            "SELECT subject, email, name, claims, tenant, created_at, last_seen_at, expires_at \
             FROM console_sessions WHERE digest = $1 AND revoked_at IS NULL",
            &[&digest.as_slice()],
        )
        .await
        .map_err(db_error)?;
    Ok(row.map(|r| StoredSession {
        subject: r.get(0),
        email: r.get(1),
        name: r.get(2),
        claims: r.get(3),
        tenant: r.get(4),
        created_at: r.get(5),
        last_seen_at: r.get(6),
        expires_at: r.get(7),
    }))
}

pub(super) async fn touch(
    client: &Conn,
    digest: [u8; 32],
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    client
        .execute(
            "UPDATE console_sessions SET last_seen_at = greatest(last_seen_at, $2) \
             WHERE digest = $1 AND revoked_at IS NULL",
            &[&digest.as_slice(), &at],
        )
        .await
        .map(|_| ())
        .map_err(db_error)
}

pub(super) async fn switch(
    client: &Conn,
    digest: [u8; 32],
    tenant: &str,
) -> Result<bool, StoreError> {
    client
        .execute(
            "UPDATE console_sessions SET tenant = $2 WHERE digest = $1 AND revoked_at IS NULL",
            &[&digest.as_slice(), &tenant],
        )
        .await
        .map(|n| n == 1)
        .map_err(db_error)
}

pub(super) async fn revoke(client: &Conn, digest: [u8; 32]) -> Result<bool, StoreError> {
    client
        .execute(
            "UPDATE console_sessions SET revoked_at = now() WHERE digest = $1 AND revoked_at IS NULL",
            &[&digest.as_slice()],
        )
        .await
        .map(|n| n == 1)
        .map_err(db_error)
}

/// Deletes at most `limit` sessions that expired before `expired_before` or were signed out
/// before `revoked_before`, each found by its index.
pub(super) async fn purge(
    client: &Conn,
    expired_before: DateTime<Utc>,
    revoked_before: DateTime<Utc>,
    limit: usize,
) -> Result<usize, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    client
        .execute(
            "DELETE FROM console_sessions WHERE id IN (SELECT id FROM (\
             (SELECT id FROM console_sessions WHERE expires_at < $1 ORDER BY expires_at LIMIT $3) \
             UNION \
             (SELECT id FROM console_sessions WHERE revoked_at < $2 ORDER BY revoked_at LIMIT $3)\
             ) AS old LIMIT $3)",
            &[&expired_before, &revoked_before, &limit],
        )
        .await
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        .map_err(db_error)
}
