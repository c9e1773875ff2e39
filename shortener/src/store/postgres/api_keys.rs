//! API keys on PostgreSQL: one row per key made through the API, the partial unique index
//! deciding between two keys of one name, whichever node makes them. Read on the primary: a
//! revocation must not be missed by a lagging replica.

use super::error::db_error;
use super::send::Conn;
use crate::store::{NewApiKey, PersonClaims, StoreError, StoredApiKey};
use chrono::{DateTime, Utc};
use tokio_postgres::Row;

const COLUMNS: &str = "id, tenant, name, digest, scopes, created_at, created_by, expires_at, \
                       last_used_at, person, person_claims";

fn key(row: &Row) -> StoredApiKey {
    let digest: Vec<u8> = row.get(3);
    StoredApiKey {
        id: row.get(0),
        tenant: row.get(1),
        name: row.get(2),
        // The table's check holds it to 32 bytes.
        digest: digest.try_into().unwrap_or([0; 32]),
        scopes: row.get(4),
        created_at: row.get(5),
        created_by: row.get(6),
        expires_at: row.get(7),
        last_used_at: row.get(8),
        person: person(row.get(9), row.get(10)),
    }
}

/// The person of a row. A person without claims (a hand-edited row) gets claims that give no
/// role, so the key is out of force rather than uncapped.
fn person(subject: Option<String>, claims: Option<String>) -> Option<PersonClaims> {
    Some(PersonClaims {
        subject: subject?,
        claims: claims.unwrap_or_default(),
    })
}

/// The lock that orders a person's key creations and sign-ins (held to the end of the
/// transaction that takes it): a key made while the same person signs in either commits before
/// the sign-in's refresh reads the keys (which then caps it) or reads the claims of the session
/// that sign-in stored (which already cap it). Without it each could miss the other's row, and
/// the key would keep the claims the sign-in took away.
const PERSON_LOCK: &str = "SELECT pg_advisory_xact_lock(hashtextextended('person ' || $1, 0))";

pub(super) async fn insert(
    client: &mut Conn,
    k: &NewApiKey,
) -> Result<Option<StoredApiKey>, StoreError> {
    let subject = k.person.as_ref().map(|p| &p.subject);
    let statement = format!(
        "INSERT INTO api_keys (tenant, name, digest, scopes, created_by, expires_at, \
         person, person_claims) VALUES ($1, $2, $3, $4, $5, $6, $7, \
         coalesce((SELECT claims FROM console_sessions WHERE subject = $7 \
                   ORDER BY created_at DESC, id DESC LIMIT 1), $8)) \
         ON CONFLICT DO NOTHING RETURNING {COLUMNS}"
    );
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 8] = [
        &k.tenant,
        &k.name,
        &k.digest.as_slice(),
        &k.scopes,
        &k.created_by,
        &k.expires_at,
        &subject,
        &k.person.as_ref().map(|p| &p.claims),
    ];
    let Some(subject) = subject else {
        let row = client.query_opt(&statement, &params).await;
        return Ok(row.map_err(db_error)?.as_ref().map(key));
    };
    let tx = client.transaction().await.map_err(db_error)?;
    tx.execute(PERSON_LOCK, &[subject])
        .await
        .map_err(db_error)?;
    // A statement of its own after the lock: its snapshot sees the sign-in that held it.
    let row = tx.query_opt(&statement, &params).await.map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    Ok(row.as_ref().map(key))
}

pub(super) async fn list(
    client: &Conn,
    tenant: Option<&str>,
) -> Result<Vec<StoredApiKey>, StoreError> {
    let rows = client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM api_keys WHERE revoked_at IS NULL \
                 AND ($1::text IS NULL OR tenant = $1) ORDER BY tenant, name"
            ),
            &[&tenant],
        )
        .await
        .map_err(db_error)?;
    Ok(rows.iter().map(key).collect())
}

pub(super) async fn live(client: &Conn, digest: &[u8; 32]) -> Result<bool, StoreError> {
    client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM api_keys WHERE digest = $1 AND revoked_at IS NULL \
             AND (expires_at IS NULL OR expires_at > now()))",
            &[&digest.as_slice()],
        )
        .await
        .map(|row| row.get(0))
        .map_err(db_error)
}

pub(super) async fn revoke(client: &Conn, tenant: &str, name: &str) -> Result<bool, StoreError> {
    client
        .execute(
            "UPDATE api_keys SET revoked_at = now() WHERE tenant = $1 AND name = $2 AND revoked_at IS NULL",
            &[&tenant, &name],
        )
        .await
        .map(|n| n == 1)
        .map_err(db_error)
}

pub(super) async fn note_uses(
    client: &Conn,
    uses: &[(i64, DateTime<Utc>)],
) -> Result<(), StoreError> {
    let ids: Vec<i64> = uses.iter().map(|(id, _)| *id).collect();
    let times: Vec<DateTime<Utc>> = uses.iter().map(|(_, at)| *at).collect();
    client
        .execute(
            "UPDATE api_keys k SET last_used_at = greatest(k.last_used_at, u.at) \
             FROM unnest($1::bigint[], $2::timestamptz[]) AS u(id, at) WHERE k.id = u.id",
            &[&ids, &times],
        )
        .await
        .map(|_| ())
        .map_err(db_error)
}

pub(super) async fn refresh_person_claims(
    client: &mut Conn,
    person: &crate::store::Person<'_>,
) -> Result<u64, StoreError> {
    let (subject, claims) = (person.subject, person.claims);
    let tx = client.transaction().await.map_err(db_error)?;
    tx.execute(PERSON_LOCK, &[&subject])
        .await
        .map_err(db_error)?;
    let keys = tx
        .execute(
            "UPDATE api_keys SET person_claims = $2 \
             WHERE person = $1 AND revoked_at IS NULL AND person_claims IS DISTINCT FROM $2",
            &[&subject, &claims],
        )
        .await
        .map_err(db_error)?;
    tx.execute(
        "UPDATE console_sessions SET claims = $2, email = $3, name = $4 \
         WHERE subject = $1 AND revoked_at IS NULL AND expires_at > now() \
         AND (claims <> $2 OR email IS DISTINCT FROM $3 OR name IS DISTINCT FROM $4)",
        &[&subject, &claims, &person.email, &person.name],
    )
    .await
    .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    Ok(keys)
}
