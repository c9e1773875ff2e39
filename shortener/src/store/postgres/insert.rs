//! Inserting links: many rows in one statement (the batched path), or one row in a
//! transaction of its own with its idempotency claim.

use super::error::{after_write, db_error, pool_error};
use super::layout::{Layout, slot_of_new};
use super::send::{Conn, Pooled};
use super::{LINK_COLUMN_COUNT, LINK_COLUMNS, link_from_row};
use crate::domain::Link;
use crate::store::{InsertOutcome, NewAuditEntry, NewLink, StoreError, host_rev, kind_name};
use chrono::{DateTime, Utc};
use codespace::CodeSpace;
use std::collections::HashMap;
use tokio_postgres::types::ToSql;

/// The insert of many rows in one statement: the rows come in as one array per column
/// (tags as a JSON array per row, since arrays of arrays do not unnest), are inserted with
/// `ON CONFLICT DO NOTHING`, and the tags of the rows that went in get their `link_tags` rows
/// in the same statement, as do their `link.created` events for tenants with webhooks (the
/// outbox, see [`crate::store::webhooks`]) and their audit entries (`$19`-`$28`, `NULL` in
/// `$25` for a row without one). Each row's slot is the ID its code decodes to, or (`NULL` in
/// `$15`) the next named slot ([`super::layout`]). Each event keeps the `traceparent` of the
/// request that made its link (`$16`, `NULL` when untraced). Returns the inserted links.
///
/// An inserted row's audit entry is the one of the first input row (in input order) with its
/// key, URL, tenant and owner, the row [`insert_rows`] reports as created; two creates of one
/// alias in one batch get one entry, the winner's.
const INSERT_ROWS: &str = "WITH r AS (\
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::timestamptz[], $6::text[], \
        $7::bytea[], $8::text[], $9::text[], $10::int8[], $11::text[], $12::int8[], $13::timestamptz[], $14::text[], $15::int8[], $16::text[], $17::text[], $18::text[], \
        $19::text[], $20::text[], $21::text[], $22::text[], $23::text[], $24::text[], $25::text[], $26::text[], $27::text[], $28::jsonb[]) \
     WITH ORDINALITY AS r(code, long_url, kind, id, expires_at, owner, dedup_key, tenant, tags, max_visits, host_rev, import_batch, created_at, password_hash, slot, traceparent, domain, routing, \
        a_tenant, a_actor_tenant, a_actor_key, a_actor_subject, a_actor_email, a_address, a_action, a_object_kind, a_object_id, a_change, n)), \
   ins AS (INSERT INTO links (code, long_url, kind, id, expires_at, owner, dedup_key, tenant, tags, max_visits, host_rev, import_batch, created_at, password_hash, slot, domain, routing) \
     SELECT code, long_url, kind, id, expires_at, owner, dedup_key, tenant, \
        ARRAY(SELECT jsonb_array_elements_text(tags::jsonb)), max_visits, host_rev, import_batch, coalesce(created_at, now()), password_hash, \
        coalesce(slot, -nextval('links_named_slot')), domain, routing \
     FROM r ORDER BY n ON CONFLICT DO NOTHING \
     RETURNING code, long_url, created_at, expires_at, deleted_at, tenant, owner, disabled_at, max_visits, tags, import_batch, password_hash, domain, routing), \
   tagged AS (INSERT INTO link_tags (tenant, tag, created_at, code) \
     SELECT ins.tenant, t.tag, ins.created_at, ins.code FROM ins, unnest(ins.tags) AS t(tag) ON CONFLICT DO NOTHING), \
   ev AS (INSERT INTO webhook_events (tenant, kind, data, traceparent) \
     SELECT ins.tenant, 'link.created', json_build_object('code', regexp_replace(ins.code, '^.*/', ''), 'domain', ins.domain, 'tenant', ins.tenant, \
        'url', ins.long_url, 'tags', ins.tags, 'disabled', false, 'deleted', false)::text, \
        (SELECT r.traceparent FROM r WHERE r.code = ins.code LIMIT 1) \
     FROM ins WHERE EXISTS (SELECT 1 FROM webhook_endpoints w WHERE w.tenant = ins.tenant AND w.disabled_at IS NULL) \
     RETURNING id, tenant), \
   fan AS (INSERT INTO webhook_deliveries (endpoint_id, event_id) \
     SELECT w.id, ev.id FROM ev JOIN webhook_endpoints w ON w.tenant = ev.tenant AND w.disabled_at IS NULL), \
   won AS (SELECT DISTINCT ON (ins.code) r.* FROM ins JOIN r ON r.code = ins.code AND r.long_url = ins.long_url \
        AND r.tenant = ins.tenant AND r.owner = ins.owner ORDER BY ins.code, r.n), \
   aud AS (INSERT INTO audit_log (tenant, actor_tenant, actor_key, actor_subject, actor_email, address, action, object_kind, object_id, change) \
     SELECT a_tenant, a_actor_tenant, a_actor_key, a_actor_subject, a_actor_email, a_address, a_action, a_object_kind, a_object_id, a_change \
     FROM won WHERE a_action IS NOT NULL ORDER BY n) \
   SELECT * FROM ins";

/// Inserts `links` (none with an idempotency key) in one statement: one round trip, one commit.
/// Outcomes come back in input order; conflicts are resolved per row.
/// [`insert_rows`] on a pooled connection; a rolled-back attempt (a standby's read-only
/// refusal, a deadlock) wrote nothing and runs once more on a fresh connection.
pub(super) async fn insert_rows_retried(
    pool: &Pooled,
    space: &CodeSpace,
    links: &[NewLink],
) -> Result<Vec<InsertOutcome>, StoreError> {
    let client = pool.get().await.map_err(pool_error)?;
    match insert_rows(&client, space, links).await {
        Err(StoreError::Retry(message)) => {
            drop(client);
            tracing::debug!(%message, "insert rolled back; running it once more");
            let client = pool.get().await.map_err(pool_error)?;
            insert_rows(&client, space, links).await
        }
        other => other,
    }
}

/// [`insert_one`] on a pooled connection; a rolled-back attempt wrote nothing and runs once
/// more on a fresh connection: the code is the arbiter, so a second run cannot create a second
/// link.
pub(super) async fn insert_one_retried(
    pool: &Pooled,
    layout: &Layout,
    link: NewLink,
) -> Result<InsertOutcome, StoreError> {
    let mut client = pool.get().await.map_err(pool_error)?;
    match insert_one(&mut client, layout, link.clone()).await {
        Err(StoreError::Retry(message)) => {
            drop(client);
            tracing::debug!(%message, "create rolled back; running it once more");
            insert_one(&mut pool.get().await.map_err(pool_error)?, layout, link).await
        }
        other => other,
    }
}

pub(super) async fn insert_rows(
    client: &Conn,
    space: &CodeSpace,
    links: &[NewLink],
) -> Result<Vec<InsertOutcome>, StoreError> {
    // A connection lost while the statement is prepared (a fresh pooled connection prepares
    // it with the write's first use) is reported as one lost while it runs: the caller cannot
    // tell them apart, and a retry with the same Idempotency-Key is right in both cases.
    let codes: Vec<&str> = links.iter().map(|l| l.code.as_str()).collect();
    let urls: Vec<&str> = links.iter().map(|l| l.url.as_str()).collect();
    let kinds: Vec<&str> = links.iter().map(|l| kind_name(l.kind)).collect();
    let ids: Vec<Option<i64>> = links.iter().map(|l| l.id.map(|id| id as i64)).collect();
    let expires: Vec<Option<DateTime<Utc>>> = links.iter().map(|l| l.expires_at).collect();
    let owners: Vec<&str> = links.iter().map(|l| l.owner.as_str()).collect();
    let dedup: Vec<Option<&[u8]>> = links.iter().map(|l| l.dedup_key.as_deref()).collect();
    let tenants: Vec<&str> = links.iter().map(|l| l.tenant.as_str()).collect();
    let tags: Vec<String> = links
        .iter()
        .map(|l| serde_json::to_string(&l.tags).unwrap_or_else(|_| "[]".into()))
        .collect();
    let max_visits: Vec<Option<i64>> = links
        .iter()
        .map(|l| l.max_visits.map(|n| n as i64))
        .collect();
    let hosts: Vec<String> = links.iter().map(|l| host_rev(&l.url)).collect();
    let imported: Vec<Option<i64>> = links.iter().map(|l| l.import_batch).collect();
    let created: Vec<Option<DateTime<Utc>>> = links.iter().map(|l| l.created_at).collect();
    let passwords: Vec<Option<&str>> = links
        .iter()
        .map(|l| l.password.as_ref().map(|p| p.as_stored()))
        .collect();
    let slots: Vec<Option<i64>> = links.iter().map(|l| slot_of_new(space, l)).collect();
    let traces: Vec<Option<&str>> = links.iter().map(|l| l.trace.as_deref()).collect();
    let domains: Vec<Option<&str>> = links.iter().map(|l| l.domain.as_deref()).collect();
    let rules: Vec<Option<String>> = links.iter().map(|l| l.routes.to_stored()).collect();
    let audit = AuditColumns::of(links);
    let rows = client
        .prepared_query(
            INSERT_ROWS,
            &[
                &codes as &(dyn ToSql + Sync),
                &urls,
                &kinds,
                &ids,
                &expires,
                &owners,
                &dedup,
                &tenants,
                &tags,
                &max_visits,
                &hosts,
                &imported,
                &created,
                &passwords,
                &slots,
                &traces,
                &domains,
                &rules,
            ]
            .iter()
            .copied()
            .chain(audit.params())
            .collect::<Vec<_>>(),
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
            // The batch's rows are committed by now: a failure here, of whatever kind, leaves
            // their outcome unknown to the callers, never "not written" nor a plain error.
            .map_err(|e| StoreError::Ambiguous(format!("after the batch's commit: {e}")))?;
        let twins: HashMap<Vec<u8>, Link> = twins
            .iter()
            .map(|row| (row.get::<_, Vec<u8>>(LINK_COLUMN_COUNT), link_from_row(row)))
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
    client: &mut Conn,
    layout: &Layout,
    link: NewLink,
) -> Result<InsertOutcome, StoreError> {
    let tx = client.transaction().await.map_err(db_error)?;
    // Acknowledge only what is durable, whatever the server's default.
    tx.batch_execute("SET LOCAL synchronous_commit = on")
        .await
        .map_err(db_error)?;
    if let Some(idem) = &link.idempotency {
        // An expired claim frees its key.
        tx.prepared_execute(
            "DELETE FROM idempotency_keys WHERE tenant = $1 AND key = $2 AND created_at < $3",
            &[&link.tenant, &idem.key, &idem.expired_before],
        )
        .await
        .map_err(db_error)?;
        let claimed = tx
            .prepared_query_opt(
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
                find_idempotent_on(client, layout, &link.tenant, &idem.key, idem.expired_before)
                    .await?;
            return replay(found, &idem.key, &idem.fingerprint);
        }
    }
    let id = link.id.map(|id| id as i64);
    let tags = serde_json::to_string(&link.tags).unwrap_or_else(|_| "[]".into());
    let max_visits = link.max_visits.map(|n| n as i64);
    let audit = AuditColumns::of(std::slice::from_ref(&link));
    // Prepared once per connection, as the batched insert is (the same statement).
    let inserted = tx
        .prepared_query_opt(
            INSERT_ROWS,
            &[
                &[link.code.as_str()].as_slice() as &(dyn ToSql + Sync),
                &[link.url.as_str()].as_slice(),
                &[kind_name(link.kind)].as_slice(),
                &[id].as_slice(),
                &[link.expires_at].as_slice(),
                &[link.owner.as_str()].as_slice(),
                &[link.dedup_key.as_deref()].as_slice(),
                &[link.tenant.as_str()].as_slice(),
                &[tags.as_str()].as_slice(),
                &[max_visits].as_slice(),
                &[host_rev(&link.url)].as_slice(),
                &[link.import_batch].as_slice(),
                &[link.created_at].as_slice(),
                &[link.password.as_ref().map(|p| p.as_stored())].as_slice(),
                &[slot_of_new(layout.space(), &link)].as_slice(),
                &[link.trace.as_deref()].as_slice(),
                &[link.domain.as_deref()].as_slice(),
                &[link.routes.to_stored()].as_slice(),
            ]
            .iter()
            .copied()
            .chain(audit.params())
            .collect::<Vec<_>>(),
        )
        .await
        .map_err(|e| after_write(db_error(e)))?;
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

/// The audit entries of rows to insert, one array per column of `audit_log` (`NULL`s for a
/// row without one), as [`INSERT_ROWS`] takes them.
struct AuditColumns<'a> {
    tenant: Vec<Option<&'a str>>,
    actor_tenant: Vec<Option<&'a str>>,
    actor_key: Vec<Option<&'a str>>,
    actor_subject: Vec<Option<&'a str>>,
    actor_email: Vec<Option<&'a str>>,
    address: Vec<Option<&'a str>>,
    action: Vec<Option<&'a str>>,
    object_kind: Vec<Option<&'a str>>,
    object_id: Vec<Option<&'a str>>,
    change: Vec<Option<&'a serde_json::Value>>,
}

impl<'a> AuditColumns<'a> {
    /// The columns as statement parameters, in `INSERT_ROWS`' order (`$19` to `$28`).
    fn params(&self) -> [&(dyn ToSql + Sync); 10] {
        [
            &self.tenant,
            &self.actor_tenant,
            &self.actor_key,
            &self.actor_subject,
            &self.actor_email,
            &self.address,
            &self.action,
            &self.object_kind,
            &self.object_id,
            &self.change,
        ]
    }

    fn of(links: &'a [NewLink]) -> Self {
        let column = |f: fn(&'a NewAuditEntry) -> Option<&'a str>| -> Vec<Option<&'a str>> {
            links.iter().map(|l| l.audit.as_ref().and_then(f)).collect()
        };
        Self {
            tenant: column(|e| Some(&e.tenant)),
            actor_tenant: column(|e| Some(&e.actor_tenant)),
            actor_key: column(|e| Some(&e.actor_key)),
            actor_subject: column(|e| e.actor_subject.as_deref()),
            actor_email: column(|e| e.actor_email.as_deref()),
            address: column(|e| e.address.as_deref()),
            action: column(|e| Some(&e.action)),
            object_kind: column(|e| Some(&e.object_kind)),
            object_id: column(|e| Some(&e.object_id)),
            change: links
                .iter()
                .map(|l| l.audit.as_ref().map(|e| &e.change))
                .collect(),
        }
    }
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
    client: &Conn,
    layout: &Layout,
    tenant: &str,
    key: &str,
    expired_before: DateTime<Utc>,
) -> Result<Option<(Vec<u8>, Link)>, StoreError> {
    // Two reads, since the claim holds the code and the link is found by the code's slot.
    let claim = client
        .prepared_query_opt(
            "SELECT code, fingerprint FROM idempotency_keys \
             WHERE tenant = $1 AND key = $2 AND created_at >= $3",
            &[&tenant, &key, &expired_before],
        )
        .await
        .map_err(db_error)?;
    let Some(claim) = claim else {
        return Ok(None);
    };
    let code: &str = claim.get(0);
    let link = super::read::get(client, layout, code).await?;
    Ok(link.map(|link| (claim.get(1), link)))
}
