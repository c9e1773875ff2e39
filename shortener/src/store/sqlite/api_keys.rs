//! API keys on SQLite: one row per key made through the API, the partial unique index deciding
//! between two keys of one name (all writes go through the one writer thread, in order).

use super::convert::{db_error, from_millis, millis};
use crate::store::{NewApiKey, PersonClaims, StoreError, StoredApiKey};
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, Row, params};

const COLUMNS: &str = "id, tenant, name, digest, scopes, created_at, created_by, expires_at, \
                       last_used_at, person, person_claims";

fn key(row: &Row<'_>) -> rusqlite::Result<StoredApiKey> {
    let digest: Vec<u8> = row.get(3)?;
    Ok(StoredApiKey {
        id: row.get(0)?,
        tenant: row.get(1)?,
        name: row.get(2)?,
        // The table's check holds it to 32 bytes.
        digest: digest.try_into().unwrap_or([0; 32]),
        scopes: row.get(4)?,
        created_at: from_millis(row.get(5)?),
        created_by: row.get(6)?,
        expires_at: row.get::<_, Option<i64>>(7)?.map(from_millis),
        last_used_at: row.get::<_, Option<i64>>(8)?.map(from_millis),
        // A person without claims (a hand-edited row) gets claims that give no role: the key
        // is out of force rather than uncapped.
        person: row
            .get::<_, Option<String>>(9)?
            .map(|subject| -> rusqlite::Result<PersonClaims> {
                Ok(PersonClaims {
                    subject,
                    claims: row.get::<_, Option<String>>(10)?.unwrap_or_default(),
                })
            })
            .transpose()?,
    })
}

pub(super) fn insert(conn: &Connection, k: &NewApiKey) -> Result<Option<StoredApiKey>, StoreError> {
    conn.query_row(
        &format!(
            "INSERT INTO api_keys (tenant, name, digest, scopes, created_at, created_by, expires_at, \
             person, person_claims) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, \
             coalesce((SELECT claims FROM console_sessions WHERE subject = ?8 \
                       ORDER BY created_at DESC, id DESC LIMIT 1), ?9)) \
             ON CONFLICT DO NOTHING RETURNING {COLUMNS}"
        ),
        params![
            k.tenant,
            k.name,
            k.digest.as_slice(),
            k.scopes,
            millis(Utc::now()),
            k.created_by,
            k.expires_at.map(millis),
            k.person.as_ref().map(|p| &p.subject),
            k.person.as_ref().map(|p| &p.claims),
        ],
        key,
    )
    .optional()
    .map_err(db_error)
}

pub(super) fn live(conn: &Connection, digest: &[u8; 32]) -> Result<bool, StoreError> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM api_keys WHERE digest = ?1 AND revoked_at IS NULL \
         AND (expires_at IS NULL OR expires_at > ?2))",
    )
    .and_then(|mut select| {
        select.query_row(params![digest.as_slice(), millis(Utc::now())], |row| {
            row.get(0)
        })
    })
    .map_err(db_error)
}

pub(super) fn list(
    conn: &Connection,
    tenant: Option<&str>,
) -> Result<Vec<StoredApiKey>, StoreError> {
    let mut select = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM api_keys WHERE revoked_at IS NULL \
             AND (?1 IS NULL OR tenant = ?1) ORDER BY tenant, name"
        ))
        .map_err(db_error)?;
    let rows = select.query_map(params![tenant], key).map_err(db_error)?;
    rows.collect::<Result<_, _>>().map_err(db_error)
}

pub(super) fn revoke(conn: &Connection, tenant: &str, name: &str) -> Result<bool, StoreError> {
    conn.execute(
        "UPDATE api_keys SET revoked_at = ?3 WHERE tenant = ?1 AND name = ?2 AND revoked_at IS NULL",
        params![tenant, name, millis(Utc::now())],
    )
    .map(|n| n == 1)
    .map_err(db_error)
}

pub(super) fn note_uses(
    conn: &mut Connection,
    uses: &[(i64, DateTime<Utc>)],
) -> Result<(), StoreError> {
    let tx = conn.transaction().map_err(db_error)?;
    {
        let mut update = tx
            .prepare_cached(
                "UPDATE api_keys SET last_used_at = max(coalesce(last_used_at, 0), ?2) WHERE id = ?1",
            )
            .map_err(db_error)?;
        for (id, at) in uses {
            update.execute(params![id, millis(*at)]).map_err(db_error)?;
        }
    }
    tx.commit().map_err(db_error)
}

/// [`crate::store::KeyStore::refresh_person_claims`]: `[subject, claims]` and `[email, name]`.
pub(super) fn refresh_person_claims(
    conn: &mut Connection,
    [subject, claims]: &[String; 2],
    [email, name]: &[Option<String>; 2],
) -> Result<u64, StoreError> {
    let tx = conn.transaction().map_err(db_error)?;
    let keys = tx
        .execute(
            "UPDATE api_keys SET person_claims = ?2 \
             WHERE person = ?1 AND revoked_at IS NULL AND person_claims IS NOT ?2",
            params![subject, claims],
        )
        .map_err(db_error)?;
    tx.execute(
        "UPDATE console_sessions SET claims = ?2, email = ?4, name = ?5 \
         WHERE subject = ?1 AND revoked_at IS NULL AND expires_at > ?3 \
         AND (claims <> ?2 OR email IS NOT ?4 OR name IS NOT ?5)",
        params![subject, claims, millis(Utc::now()), email, name],
    )
    .map_err(db_error)?;
    tx.commit().map_err(db_error)?;
    Ok(keys as u64)
}
