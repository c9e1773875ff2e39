//! Webhook endpoints and the outbox on PostgreSQL (see [`crate::store::webhooks`]).
//!
//! One file of about 540 lines on purpose: endpoints, the outbox's claims, records and
//! releases (fenced by the claim's lease), its bound and its purge are one protocol, read
//! beside its SQLite twin (`store/sqlite/webhooks.rs`) statement for statement.

use super::error::db_error;
use super::send::{Conn, Tx};
use crate::store::StoreError;
use crate::store::webhooks::{
    Attempt, Backlog, Delivery, DeliveryRecord, Endpoint, Finished, NewEndpoint, OutboxBound,
};
use chrono::{DateTime, Utc};
use std::time::Duration;
use tokio_postgres::Row;

/// Records an event of `tenant` in the transaction `tx`, with a delivery for each enabled
/// endpoint of the tenant (nothing when it has none). The event keeps the `traceparent` of the
/// current request when it is traced.
pub(super) async fn record(
    tx: &Tx<'_>,
    tenant: &str,
    kind: &str,
    data: &str,
) -> Result<(), StoreError> {
    let trace = otel::current_traceparent();
    tx.execute(
        "WITH ev AS (INSERT INTO webhook_events (tenant, kind, data, traceparent) \
           SELECT $1::text, $2::text, $3::text, $4::text \
           WHERE EXISTS (SELECT 1 FROM webhook_endpoints WHERE tenant = $1::text AND disabled_at IS NULL) \
           RETURNING id, tenant) \
         INSERT INTO webhook_deliveries (endpoint_id, event_id) \
         SELECT w.id, ev.id FROM ev JOIN webhook_endpoints w ON w.tenant = ev.tenant AND w.disabled_at IS NULL",
        &[&tenant, &kind, &data, &trace],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Records the `clicks.rollup` events of the hour starting at `hour` (see
/// [`crate::store::OutboxStore::record_rollup_events`]), from the tenant-level totals (one row
/// per tenant and hour, found by the `bucket` index), so looking back over many hours stays
/// cheap however many links had clicks; returns how many events went in.
///
/// A tenant whose totals differ from what its last event of the hour told gets the hour's next
/// revision. What was told is `rollup_told`'s row, or for an hour without one (told by a node of
/// the release before, during a rollout) its revision 0 event itself. The told row is written
/// from the events that went in (the outbox bound's trigger may drop one), and two nodes asking
/// at once meet on the event's unique key. Rows of hours long past the look-back are removed
/// first, in a statement of their own that skips rows another node is removing.
pub(super) async fn record_rollups(client: &Conn, hour: i64) -> Result<u64, StoreError> {
    let name = crate::store::webhooks::hour_name(hour);
    let forget_before = hour - crate::store::webhooks::ROLLUP_TOLD_KEPT_SECONDS;
    client
        .execute(
            "DELETE FROM rollup_told WHERE (hour, tenant) IN \
               (SELECT hour, tenant FROM rollup_told WHERE hour < $1 FOR UPDATE SKIP LOCKED)",
            &[&forget_before],
        )
        .await
        .map_err(db_error)?;
    let row = client
        .query_one(
            "WITH sums AS (SELECT s.tenant, s.human, s.bot, s.head, \
                 coalesce(t.revision, CASE WHEN e.data IS NOT NULL THEN 0 END) AS told, \
                 coalesce(t.human, (e.data::jsonb ->> 'human')::bigint) AS told_human, \
                 coalesce(t.bot, (e.data::jsonb ->> 'bot')::bigint) AS told_bot, \
                 coalesce(t.head, (e.data::jsonb ->> 'head')::bigint) AS told_head \
               FROM tenant_hourly s \
               LEFT JOIN rollup_told t ON t.hour = $1 AND t.tenant = s.tenant \
               LEFT JOIN webhook_events e ON t.tenant IS NULL AND e.dedup = 'clicks.rollup/' || $2::text || '/' || s.tenant \
               WHERE s.dim = 'all' AND s.name = '' AND s.bucket = $1 \
                 AND s.tenant IN (SELECT tenant FROM webhook_endpoints WHERE disabled_at IS NULL)), \
             due AS (SELECT tenant, human, bot, head, coalesce(told + 1, 0) AS revision FROM sums \
               WHERE told IS NULL OR (told_human, told_bot, told_head) IS DISTINCT FROM (human, bot, head)), \
             ev AS (INSERT INTO webhook_events (tenant, kind, data, dedup) \
               SELECT tenant, 'clicks.rollup', json_build_object('tenant', tenant, 'hour', $2::text, \
                 'human', human, 'bot', bot, 'head', head, 'revision', revision)::text, \
                 'clicks.rollup/' || $2::text || '/' || tenant || CASE WHEN revision > 0 THEN '/' || revision ELSE '' END \
               FROM due ON CONFLICT (dedup) DO NOTHING RETURNING id, tenant), \
             told AS (INSERT INTO rollup_told (hour, tenant, revision, human, bot, head) \
               SELECT $1, due.tenant, due.revision, due.human, due.bot, due.head FROM due JOIN ev USING (tenant) \
               ON CONFLICT (hour, tenant) DO UPDATE SET revision = EXCLUDED.revision, human = EXCLUDED.human, \
                 bot = EXCLUDED.bot, head = EXCLUDED.head), \
             fan AS (INSERT INTO webhook_deliveries (endpoint_id, event_id) \
               SELECT w.id, ev.id FROM ev JOIN webhook_endpoints w ON w.tenant = ev.tenant AND w.disabled_at IS NULL) \
             SELECT count(*) FROM ev",
            &[&hour, &name],
        )
        .await
        .map_err(db_error)?;
    Ok(row.get::<_, i64>(0).max(0) as u64)
}

const ENDPOINT_COLUMNS: &str = "id, tenant, url, created_at, created_by, failures, disabled_at";

fn endpoint(row: &Row) -> Endpoint {
    Endpoint {
        id: row.get(0),
        tenant: row.get(1),
        url: row.get(2),
        created_at: row.get(3),
        created_by: row.get(4),
        failures: row.get::<_, i32>(5).max(0) as u32,
        disabled_at: row.get(6),
    }
}

/// Registers `new` unless its tenant has `new.most` endpoints already (`None`): the tenant's
/// registrations are taken one at a time (a transaction lock on its name), so two at once
/// cannot both pass the count.
pub(super) async fn create(
    client: &mut Conn,
    new: &NewEndpoint,
) -> Result<Option<Endpoint>, StoreError> {
    let tx = client.transaction().await.map_err(db_error)?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('webhook_endpoints/' || $1, 0))",
        &[&new.tenant],
    )
    .await
    .map_err(db_error)?;
    let row = tx
        .query_opt(
            &format!(
                "INSERT INTO webhook_endpoints (tenant, url, secret, created_by) \
                 SELECT $1, $2, $3, $4 \
                 WHERE (SELECT count(*) FROM webhook_endpoints WHERE tenant = $1) < $5 \
                 RETURNING {ENDPOINT_COLUMNS}"
            ),
            &[
                &new.tenant,
                &new.url,
                &new.secret,
                &new.created_by,
                &i64::from(new.most),
            ],
        )
        .await
        .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    Ok(row.as_ref().map(endpoint))
}

pub(super) async fn list(client: &Conn, tenant: Option<&str>) -> Result<Vec<Endpoint>, StoreError> {
    let rows = client
        .query(
            &format!(
                "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE $1::text IS NULL OR tenant = $1 ORDER BY id"
            ),
            &[&tenant],
        )
        .await
        .map_err(db_error)?;
    Ok(rows.iter().map(endpoint).collect())
}

pub(super) async fn delete(
    client: &Conn,
    id: i64,
    tenant: Option<&str>,
) -> Result<bool, StoreError> {
    client
        .execute(
            "DELETE FROM webhook_endpoints WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)",
            &[&id, &tenant],
        )
        .await
        .map(|n| n == 1)
        .map_err(db_error)
}

pub(super) async fn log(
    client: &Conn,
    id: i64,
    tenant: Option<&str>,
    limit: i64,
) -> Result<Option<Vec<DeliveryRecord>>, StoreError> {
    let found = client
        .query_opt(
            "SELECT 1 FROM webhook_endpoints WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)",
            &[&id, &tenant],
        )
        .await
        .map_err(db_error)?;
    if found.is_none() {
        return Ok(None);
    }
    let rows = client
        .query(
            "SELECT d.event_id, e.kind, d.state, d.attempts, d.last_status, d.last_error, d.delivered_at, \
             d.failed_at \
             FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id \
             WHERE d.endpoint_id = $1 ORDER BY d.event_id DESC LIMIT $2",
            &[&id, &limit],
        )
        .await
        .map_err(db_error)?;
    Ok(Some(
        rows.iter()
            .map(|r| DeliveryRecord {
                event_id: r.get(0),
                kind: r.get(1),
                state: r.get(2),
                attempts: r.get::<_, i32>(3).max(0) as u32,
                last_status: r.get::<_, Option<i32>>(4).map(|s| s.clamp(0, 999) as u16),
                last_error: r.get(5),
                delivered_at: r.get(6),
                failed_at: r.get(7),
            })
            .collect(),
    ))
}

/// `column` holds the lease whose token ([`Delivery::lease`]) is parameter `param`. The token is
/// the end of the lease in microseconds since 1970, exactly as `timestamptz` holds it (the
/// claim returns it); every claim of one endpoint ends later than the one it follows (it is
/// made only once that one ended), so the token names one claim.
fn holds_lease(column: &str, param: u8) -> String {
    format!("(extract(epoch FROM {column}) * 1000000)::bigint = ${param}::bigint")
}

/// Claims endpoints and their due deliveries in one statement: the endpoints are locked with
/// `SKIP LOCKED` and their lease is checked again on the row as it is when locked, so two
/// workers claiming at once never take the same endpoint. Tenants take turns: a tenant's
/// endpoints already being delivered to (by any node) count as turns it has had, so a tenant
/// with a backlog on many endpoints cannot keep every place while another's event waits.
pub(super) async fn claim(
    client: &Conn,
    lease: Duration,
    endpoints: i64,
    per_endpoint: i64,
) -> Result<Vec<Delivery>, StoreError> {
    let lease_ms = lease.as_millis() as f64;
    let rows = client
        .query(
            "WITH due AS ( \
               SELECT w.id, w.tenant, first.next_at FROM webhook_endpoints w \
               CROSS JOIN LATERAL (SELECT d.next_at FROM webhook_deliveries d \
                 WHERE d.endpoint_id = w.id AND d.state = 'pending' \
                   AND (d.leased_until IS NULL OR d.leased_until < now()) \
                 ORDER BY d.next_at LIMIT 1) first \
               WHERE w.disabled_at IS NULL AND (w.leased_until IS NULL OR w.leased_until < now()) \
                 AND (w.held_until IS NULL OR w.held_until <= now()) \
                 AND first.next_at <= now()), \
             busy AS (SELECT tenant, count(*) AS n FROM webhook_endpoints \
               WHERE leased_until >= now() GROUP BY tenant), \
             turns AS (SELECT d.id, d.next_at, coalesce(b.n, 0) \
                 + row_number() OVER (PARTITION BY d.tenant ORDER BY d.next_at, d.id) AS turn \
               FROM due d LEFT JOIN busy b ON b.tenant = d.tenant), \
             picked AS (SELECT w.id FROM webhook_endpoints w JOIN turns t ON t.id = w.id \
               ORDER BY t.turn, t.next_at, t.id LIMIT $2 FOR UPDATE OF w SKIP LOCKED), \
             leased AS (UPDATE webhook_endpoints w SET leased_until = now() + $1 * interval '1 millisecond' \
               FROM picked WHERE w.id = picked.id AND w.disabled_at IS NULL \
                 AND (w.leased_until IS NULL OR w.leased_until < now()) \
               RETURNING w.id, w.url, w.secret, w.leased_until), \
             batch AS (SELECT c.endpoint_id, c.event_id FROM leased l \
               CROSS JOIN LATERAL (SELECT d.endpoint_id, d.event_id FROM webhook_deliveries d \
                 WHERE d.endpoint_id = l.id AND d.state = 'pending' AND d.next_at <= now() \
                   AND (d.leased_until IS NULL OR d.leased_until < now()) \
                 ORDER BY d.next_at, d.event_id LIMIT $3) c), \
             claimed AS (UPDATE webhook_deliveries d SET leased_until = now() + $1 * interval '1 millisecond' \
               FROM batch b WHERE d.endpoint_id = b.endpoint_id AND d.event_id = b.event_id \
               RETURNING d.endpoint_id, d.event_id, d.next_at, d.attempts) \
             SELECT c.endpoint_id, l.url, l.secret, c.event_id, e.kind, e.data, e.created_at, c.attempts, \
               e.traceparent, (extract(epoch FROM l.leased_until) * 1000000)::bigint \
             FROM claimed c JOIN leased l ON l.id = c.endpoint_id JOIN webhook_events e ON e.id = c.event_id \
             ORDER BY c.endpoint_id, c.next_at, c.event_id",
            &[&lease_ms, &endpoints, &per_endpoint],
        )
        .await
        .map_err(db_error)?;
    Ok(rows
        .iter()
        .map(|r| Delivery {
            endpoint_id: r.get(0),
            url: r.get(1),
            secret: r.get(2),
            event_id: r.get(3),
            kind: r.get(4),
            data: r.get(5),
            created_at: r.get(6),
            attempts: r.get::<_, i32>(7).max(0) as u32,
            trace: r.get(8),
            lease: r.get(9),
        })
        .collect())
}

pub(super) async fn finish(client: &mut Conn, attempt: &Attempt) -> Result<Finished, StoreError> {
    let tx = client.transaction().await.map_err(db_error)?;
    let status = attempt.status.map(i32::from);
    let finished = if attempt.delivered {
        tx.execute(
            "UPDATE webhook_deliveries SET state = 'delivered', attempts = attempts + 1, last_status = $3, \
             last_error = NULL, delivered_at = now(), leased_until = NULL WHERE endpoint_id = $1 AND event_id = $2",
            &[&attempt.endpoint_id, &attempt.event_id, &status],
        )
        .await
        .map_err(db_error)?;
        let row = tx
            .query_opt(
                "UPDATE webhook_endpoints SET failures = 0 WHERE id = $1 RETURNING disabled_at IS NOT NULL",
                &[&attempt.endpoint_id],
            )
            .await
            .map_err(db_error)?;
        Finished {
            disabled_now: false,
            // A deleted endpoint gets nothing more either.
            stopped: row.is_none_or(|r| r.get(0)),
            failures: 0,
            given_up: false,
        }
    } else {
        // The last attempt a delivery gets ends it `failed`; a delivery no longer pending
        // (delivered meanwhile by a node that took it over), or claimed again since, stays as
        // it is: its new claim records its own attempt.
        let updated = tx.execute(
            &format!(
                "UPDATE webhook_deliveries SET attempts = attempts + 1, last_status = $3, last_error = $4, \
                 next_at = $5, leased_until = NULL, \
                 state = CASE WHEN $6 THEN 'failed' ELSE state END, \
                 failed_at = CASE WHEN $6 THEN now() END \
                 WHERE endpoint_id = $1 AND event_id = $2 AND state = 'pending' AND {}",
                holds_lease("leased_until", 7)
            ),
            &[
                &attempt.endpoint_id,
                &attempt.event_id,
                &status,
                &attempt.error,
                &attempt.retry_at,
                &attempt.last,
                &attempt.lease,
            ],
        )
        .await
        .map_err(db_error)?;
        // A limit past the column's range (u32::MAX meant as "never") is the most it can count.
        let max = i32::try_from(attempt.max_failures).unwrap_or(i32::MAX);
        // The old row's `disabled_at` is read in the same statement: "now" only for the failure
        // that crossed the limit. A failure of an endpoint already disabled (by hand, while the
        // attempt was in flight) does not count; nor does one whose delivery was taken over or
        // delivered meanwhile: the endpoint's run of failures is its current claim's to count.
        let row = if updated == 0 {
            tx.query_opt(
                "SELECT false, disabled_at IS NOT NULL, failures FROM webhook_endpoints WHERE id = $1",
                &[&attempt.endpoint_id],
            )
            .await
            .map_err(db_error)?
        } else {
            tx.query_opt(
                "UPDATE webhook_endpoints w SET \
                 failures = CASE WHEN old.disabled_at IS NULL THEN w.failures + 1 ELSE w.failures END, \
                 disabled_at = CASE WHEN w.failures + 1 >= $2 THEN coalesce(w.disabled_at, now()) ELSE w.disabled_at END \
                 FROM (SELECT id, disabled_at FROM webhook_endpoints WHERE id = $1 FOR UPDATE) old \
                 WHERE w.id = old.id \
                 RETURNING old.disabled_at IS NULL AND w.disabled_at IS NOT NULL, w.disabled_at IS NOT NULL, \
                   w.failures",
                &[&attempt.endpoint_id, &max],
            )
            .await
            .map_err(db_error)?
        };
        Finished {
            disabled_now: row.as_ref().is_some_and(|r| r.get(0)),
            stopped: row.as_ref().is_none_or(|r| r.get(1)),
            failures: row.map_or(0, |r| r.get::<_, i32>(2).max(0) as u32),
            given_up: attempt.last && updated == 1,
        }
    };
    tx.commit().await.map_err(db_error)?;
    Ok(finished)
}

pub(super) async fn release(
    client: &Conn,
    endpoint_id: i64,
    lease: i64,
    unsent: &[i64],
    hold: Option<Duration>,
) -> Result<(), StoreError> {
    let hold_ms = hold.map(|h| h.as_millis() as f64);
    client
        .execute(
            &format!(
                "WITH unsent AS (UPDATE webhook_deliveries SET leased_until = NULL \
                   WHERE endpoint_id = $1 AND event_id = ANY($2) AND state = 'pending' AND {}) \
                 UPDATE webhook_endpoints SET leased_until = NULL, \
                   held_until = now() + $3 * interval '1 millisecond' WHERE id = $1 AND {}",
                holds_lease("leased_until", 4),
                holds_lease("leased_until", 4)
            ),
            &[&endpoint_id, &unsent, &hold_ms, &lease],
        )
        .await
        .map_err(db_error)?;
    Ok(())
}

/// Lists the tenants at `max_pending` in `webhook_full_tenants` (the trigger of migration 12
/// drops their events) and empties `webhook_dropped` into the answer, in one transaction.
pub(super) async fn bound(client: &mut Conn, max_pending: u64) -> Result<OutboxBound, StoreError> {
    let max = i64::try_from(max_pending).unwrap_or(i64::MAX);
    let tx = client.transaction().await.map_err(db_error)?;
    let full: Vec<String> = tx
        .query(
            "SELECT w.tenant FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id \
             WHERE d.state = 'pending' AND w.disabled_at IS NULL \
             GROUP BY w.tenant HAVING count(*) >= $1 ORDER BY w.tenant",
            &[&max],
        )
        .await
        .map_err(db_error)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    tx.execute(
        "DELETE FROM webhook_full_tenants WHERE NOT (tenant = ANY($1))",
        &[&full],
    )
    .await
    .map_err(db_error)?;
    tx.execute(
        "INSERT INTO webhook_full_tenants (tenant) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING",
        &[&full],
    )
    .await
    .map_err(db_error)?;
    let dropped = tx
        .query(
            "WITH taken AS (DELETE FROM webhook_dropped RETURNING tenant) \
             SELECT tenant, count(*) FROM taken GROUP BY tenant ORDER BY tenant",
            &[],
        )
        .await
        .map_err(db_error)?
        .iter()
        .map(|r| (r.get(0), r.get::<_, i64>(1).max(0) as u64))
        .collect();
    tx.commit().await.map_err(db_error)?;
    Ok(OutboxBound { full, dropped })
}

pub(super) async fn set_enabled(
    client: &mut Conn,
    id: i64,
    tenant: Option<&str>,
    enabled: bool,
) -> Result<Option<Endpoint>, StoreError> {
    let tx = client.transaction().await.map_err(db_error)?;
    let row = if enabled {
        tx.query_opt(
            &format!(
                "UPDATE webhook_endpoints SET failures = 0, disabled_at = NULL, held_until = NULL \
                 WHERE id = $1 AND ($2::text IS NULL OR tenant = $2) RETURNING {ENDPOINT_COLUMNS}"
            ),
            &[&id, &tenant],
        )
        .await
        .map_err(db_error)?
    } else {
        tx.query_opt(
            &format!(
                "UPDATE webhook_endpoints SET disabled_at = coalesce(disabled_at, now()) \
                 WHERE id = $1 AND ($2::text IS NULL OR tenant = $2) RETURNING {ENDPOINT_COLUMNS}"
            ),
            &[&id, &tenant],
        )
        .await
        .map_err(db_error)?
    };
    if row.is_some() && enabled {
        tx.execute(
            "UPDATE webhook_deliveries SET next_at = now() WHERE endpoint_id = $1 AND state = 'pending'",
            &[&id],
        )
        .await
        .map_err(db_error)?;
    }
    tx.commit().await.map_err(db_error)?;
    Ok(row.as_ref().map(endpoint))
}

pub(super) async fn backlog(client: &Conn) -> Result<Backlog, StoreError> {
    let row = client
        .query_one(
            "SELECT count(*), coalesce(extract(epoch FROM now() - min(d.next_at) FILTER (WHERE d.next_at <= now())), 0)::float8 \
             FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id \
             WHERE d.state = 'pending' AND w.disabled_at IS NULL",
            &[],
        )
        .await
        .map_err(db_error)?;
    Ok(Backlog {
        pending: row.get::<_, i64>(0).max(0) as u64,
        oldest_due_seconds: row.get::<_, f64>(1).max(0.0) as u64,
    })
}

pub(super) async fn purge(
    client: &Conn,
    before: DateTime<Utc>,
    limit: i64,
) -> Result<(u64, u64), StoreError> {
    // Delivered and failed deliveries alike, each by the index of when it ended.
    let mut deliveries = 0;
    for (state, at) in [("delivered", "delivered_at"), ("failed", "failed_at")] {
        deliveries += client
            .execute(
                &format!(
                    // The state again outside: a row a retry made pending after the inner
                    // read is re-checked against it and kept.
                    "DELETE FROM webhook_deliveries WHERE (endpoint_id, event_id) IN \
                     (SELECT endpoint_id, event_id FROM webhook_deliveries \
                      WHERE state = '{state}' AND {at} < $1 ORDER BY {at} LIMIT $2) \
                     AND state = '{state}'"
                ),
                &[&before, &limit],
            )
            .await
            .map_err(db_error)?;
    }
    let events = client
        .execute(
            "DELETE FROM webhook_events WHERE id IN \
             (SELECT e.id FROM webhook_events e WHERE e.created_at < $1 \
              AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id) \
              ORDER BY e.id LIMIT $2)",
            &[&before, &limit],
        )
        .await
        .map_err(db_error)?;
    Ok((deliveries, events))
}
