//! Inserting links: many rows in one statement (the batched path), or one row in a
//! transaction of its own with its idempotency claim.

use super::error::{after_write, db_error};
use super::{LINK_COLUMNS, link_from_row};
use crate::domain::{ClickCounts, Link};
use crate::store::{InsertOutcome, NewLink, StoreError, kind_name};
use chrono::{DateTime, Utc};
use std::collections::HashMap;

/// Inserts `links` (none with an idempotency key) in one statement: one round trip, one commit.
/// Outcomes come back in input order; conflicts are resolved per row.
pub(super) async fn insert_rows(
    client: &deadpool_postgres::Object,
    links: &[NewLink],
) -> Result<Vec<InsertOutcome>, StoreError> {
    let insert = client
        .prepare_cached(&format!(
            "INSERT INTO links (code, long_url, kind, id, expires_at, owner, dedup_key, tenant) \
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::timestamptz[], $6::text[], $7::bytea[], $8::text[]) \
             ON CONFLICT DO NOTHING RETURNING {LINK_COLUMNS}"
        ))
        .await
        .map_err(db_error)?;
    let codes: Vec<&str> = links.iter().map(|l| l.code.as_str()).collect();
    let urls: Vec<&str> = links.iter().map(|l| l.url.as_str()).collect();
    let kinds: Vec<&str> = links.iter().map(|l| kind_name(l.kind)).collect();
    let ids: Vec<Option<i64>> = links.iter().map(|l| l.id.map(|id| id as i64)).collect();
    let expires: Vec<Option<chrono::DateTime<chrono::Utc>>> =
        links.iter().map(|l| l.expires_at).collect();
    let owners: Vec<&str> = links.iter().map(|l| l.owner.as_str()).collect();
    let dedup: Vec<Option<&[u8]>> = links.iter().map(|l| l.dedup_key.as_deref()).collect();
    let tenants: Vec<&str> = links.iter().map(|l| l.tenant.as_str()).collect();
    let rows = client
        .query(
            &insert,
            &[
                &codes, &urls, &kinds, &ids, &expires, &owners, &dedup, &tenants,
            ],
        )
        .await
        .map_err(|e| after_write(db_error(e)))?;
    let mut created: HashMap<String, Link> = rows
        .iter()
        .map(|row| (row.get::<_, String>(0), link_from_row(row)))
        .collect();
    let mut outcomes: Vec<Option<InsertOutcome>> = links
        .iter()
        .map(|l| {
            let ours = created.get(&l.code).is_some_and(|c| c.url == l.url);
            ours.then(|| created.remove(&l.code))
                .flatten()
                .map(InsertOutcome::Created)
        })
        .collect();
    // Rows not inserted: a dedup twin (maybe from this very batch) or a taken code.
    let wanted: Vec<&[u8]> = links
        .iter()
        .zip(&outcomes)
        .filter(|(_, o)| o.is_none())
        .filter_map(|(l, _)| l.dedup_key.as_deref())
        .collect();
    if !wanted.is_empty() {
        let twins = client
            .query(
                &format!("SELECT {LINK_COLUMNS}, dedup_key FROM links WHERE dedup_key = ANY($1)"),
                &[&wanted],
            )
            .await
            .map_err(db_error)?;
        let twins: HashMap<Vec<u8>, Link> = twins
            .iter()
            .map(|row| (row.get::<_, Vec<u8>>(6), link_from_row(row)))
            .collect();
        for (link, outcome) in links.iter().zip(outcomes.iter_mut()) {
            if outcome.is_none()
                && let Some(twin) = link.dedup_key.as_ref().and_then(|k| twins.get(k))
            {
                *outcome = Some(InsertOutcome::Deduplicated(twin.clone()));
            }
        }
    }
    Ok(outcomes
        .into_iter()
        .map(|o| o.unwrap_or(InsertOutcome::CodeTaken))
        .collect())
}

/// Inserts one link in a transaction of its own, claiming its idempotency key (if any) in the
/// same transaction.
pub(super) async fn insert_one(
    client: &mut deadpool_postgres::Object,
    link: NewLink,
) -> Result<InsertOutcome, StoreError> {
    let tx = client.transaction().await.map_err(db_error)?;
    // Acknowledge only what is durable, whatever the server's default.
    tx.batch_execute("SET LOCAL synchronous_commit = on")
        .await
        .map_err(db_error)?;
    if let Some(idem) = &link.idempotency {
        // An expired claim frees its key.
        tx.execute(
            "DELETE FROM idempotency_keys WHERE tenant = $1 AND key = $2 AND created_at < $3",
            &[&link.tenant, &idem.key, &idem.expired_before],
        )
        .await
        .map_err(db_error)?;
        let claimed = tx
            .query_opt(
                "INSERT INTO idempotency_keys (tenant, key, fingerprint, code) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT DO NOTHING RETURNING 1",
                &[&link.tenant, &idem.key, &idem.fingerprint, &link.code],
            )
            .await
            .map_err(db_error)?;
        if claimed.is_none() {
            tx.rollback().await.map_err(db_error)?;
            // Reuse this connection: taking a second one while holding the first can exhaust
            // the pool under a burst of retries.
            let found =
                find_idempotent_on(client, &link.tenant, &idem.key, idem.expired_before).await?;
            return replay(found, &idem.key, &idem.fingerprint);
        }
    }
    let id = link.id.map(|id| id as i64);
    let inserted = tx
        .query_opt(
            &format!(
                "INSERT INTO links (code, long_url, kind, id, expires_at, owner, dedup_key, tenant) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING RETURNING {LINK_COLUMNS}"
            ),
            &[
                &link.code,
                &link.url,
                &kind_name(link.kind),
                &id,
                &link.expires_at,
                &link.owner,
                &link.dedup_key,
                &link.tenant,
            ],
        )
        .await
        .map_err(db_error)?;
    if let Some(row) = inserted {
        tx.commit().await.map_err(|e| after_write(db_error(e)))?;
        return Ok(InsertOutcome::Created(link_from_row(&row)));
    }
    // Nothing inserted: a dedup twin (possibly committed a moment ago by a concurrent request)
    // or a taken code.
    if let Some(dedup_key) = &link.dedup_key {
        let twin = tx
            .query_opt(
                &format!("SELECT {LINK_COLUMNS} FROM links WHERE dedup_key = $1"),
                &[dedup_key],
            )
            .await
            .map_err(db_error)?;
        if let Some(row) = twin {
            let twin = link_from_row(&row);
            if let Some(idem) = &link.idempotency {
                tx.execute(
                    "UPDATE idempotency_keys SET code = $3 WHERE tenant = $1 AND key = $2",
                    &[&link.tenant, &idem.key, &twin.code],
                )
                .await
                .map_err(db_error)?;
            }
            tx.commit().await.map_err(db_error)?;
            return Ok(InsertOutcome::Deduplicated(twin));
        }
    }
    tx.rollback().await.map_err(db_error)?;
    Ok(InsertOutcome::CodeTaken)
}

fn replay(
    found: Option<(Vec<u8>, Link)>,
    key: &str,
    fingerprint: &[u8],
) -> Result<InsertOutcome, StoreError> {
    match found {
        Some((stored, link)) if stored == fingerprint => Ok(InsertOutcome::Replayed(link)),
        Some(_) => Ok(InsertOutcome::IdempotencyMismatch),
        None => Err(StoreError::Internal(format!(
            "idempotency key {key:?} vanished"
        ))),
    }
}

/// The fingerprint and link of the idempotency key `key` of `tenant`, unless its claim was
/// made before `expired_before`, on `client`.
pub(super) async fn find_idempotent_on(
    client: &tokio_postgres::Client,
    tenant: &str,
    key: &str,
    expired_before: DateTime<Utc>,
) -> Result<Option<(Vec<u8>, Link)>, StoreError> {
    let row = client
        .query_opt(
            "SELECT i.fingerprint, l.code, l.long_url, l.created_at, l.expires_at, l.deleted_at, l.tenant \
             FROM idempotency_keys i JOIN links l ON l.code = i.code \
             WHERE i.tenant = $1 AND i.key = $2 AND i.created_at >= $3",
            &[&tenant, &key, &expired_before],
        )
        .await
        .map_err(db_error)?;
    Ok(row.map(|r| {
        let link = Link {
            code: r.get(1),
            url: r.get(2),
            created_at: r.get(3),
            expires_at: r.get(4),
            deleted_at: r.get(5),
            tenant: r.get(6),
            clicks: ClickCounts::default(),
        };
        (r.get(0), link)
    }))
}
