//! Webhook endpoints and the outbox on SQLite (see [`crate::store::webhooks`]). Times are Unix
//! milliseconds; every write runs on the writer thread, so a claim needs no row locks.
//!
//! One file of about 620 lines on purpose: endpoints, the outbox's claims, records and
//! releases (fenced by the claim's lease), its bound and its purge are one protocol, read
//! beside its PostgreSQL twin (`store/postgres/webhooks.rs`) statement for statement.

use super::convert::{db_error, from_millis, millis};
use crate::store::StoreError;
use crate::store::webhooks::{
    Attempt, Backlog, Delivery, DeliveryRecord, Endpoint, Finished, NewEndpoint, OutboxBound,
};
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};
use std::time::Duration;

/// Records an event of `tenant` on `conn` (inside the caller's transaction), with a delivery
/// for each enabled endpoint of the tenant; nothing, and `data` is not called, when it has
/// none.
pub(super) fn record(
    conn: &Connection,
    tenant: &str,
    kind: &str,
    data: impl FnOnce() -> String,
    trace: Option<&str>,
) -> Result<(), StoreError> {
    // Most tenants have no endpoint: look first, so that their writes build no event data.
    let wanted = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE tenant = ?1 AND disabled_at IS NULL)",
        )
        .and_then(|mut select| select.query_row(params![tenant], |row| row.get::<_, bool>(0)))
        .map_err(db_error)?;
    if !wanted {
        return Ok(());
    }
    let now = millis(Utc::now());
    let recorded = conn
        .prepare_cached(
            "INSERT INTO webhook_events (tenant, kind, data, created_at, traceparent) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .and_then(|mut insert| insert.execute(params![tenant, kind, data(), now, trace]))
        .map_err(db_error)?;
    // A full outbox drops the event (its trigger ignores the insert): nothing to deliver.
    if recorded == 0 {
        return Ok(());
    }
    let event = conn.last_insert_rowid();
    conn.prepare_cached(
        "INSERT INTO webhook_deliveries (endpoint_id, event_id, next_at) \
         SELECT id, ?2, ?3 FROM webhook_endpoints WHERE tenant = ?1 AND disabled_at IS NULL",
    )
    .and_then(|mut fan| fan.execute(params![tenant, event, now]))
    .map_err(db_error)?;
    Ok(())
}

/// Records the `clicks.rollup` events of the hour starting at `hour` (see
/// [`crate::store::OutboxStore::record_rollup_events`]), in one transaction, from the
/// tenant-level totals (one row per tenant and hour): a tenant whose totals differ from what
/// its last event told (`rollup_told`'s row, or for an hour without one its revision 0 event
/// itself) gets the hour's next revision, and the told row is written only for an event that
/// went in (the outbox bound's trigger may drop one).
pub(super) fn record_rollups(conn: &mut Connection, hour: i64) -> Result<u64, StoreError> {
    let name = crate::store::webhooks::hour_name(hour);
    let now = millis(Utc::now());
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    let due: Vec<(String, i64, i64, i64, i64)> = tx
        .prepare_cached(
            "SELECT tenant, human, bot, head, coalesce(told + 1, 0) FROM ( \
               SELECT s.tenant, s.human, s.bot, s.head, \
                 coalesce(t.revision, CASE WHEN e.data IS NOT NULL THEN 0 END) AS told, \
                 coalesce(t.human, e.data ->> '$.human') AS told_human, \
                 coalesce(t.bot, e.data ->> '$.bot') AS told_bot, \
                 coalesce(t.head, e.data ->> '$.head') AS told_head \
               FROM tenant_hourly s \
               LEFT JOIN rollup_told t ON t.hour = ?1 AND t.tenant = s.tenant \
               LEFT JOIN webhook_events e ON t.tenant IS NULL AND e.dedup = 'clicks.rollup/' || ?2 || '/' || s.tenant \
               WHERE s.dim = 'all' AND s.name = '' AND s.bucket = ?1 \
                 AND s.tenant IN (SELECT tenant FROM webhook_endpoints WHERE disabled_at IS NULL)) \
             WHERE told IS NULL OR told_human IS NOT human OR told_bot IS NOT bot OR told_head IS NOT head",
        )
        .and_then(|mut due| {
            due.query_map(params![hour, name], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })?
            .collect()
        })
        .map_err(db_error)?;
    let mut recorded = 0;
    for (tenant, human, bot, head, revision) in due {
        let dedup = match revision {
            0 => format!("clicks.rollup/{name}/{tenant}"),
            n => format!("clicks.rollup/{name}/{tenant}/{n}"),
        };
        let went_in = tx
            .execute(
                "INSERT INTO webhook_events (tenant, kind, data, created_at, dedup) \
                 VALUES (?1, 'clicks.rollup', json_object('tenant', ?1, 'hour', ?2, 'human', ?3, \
                   'bot', ?4, 'head', ?5, 'revision', ?6), ?7, ?8) ON CONFLICT (dedup) DO NOTHING",
                params![tenant, name, human, bot, head, revision, now, dedup],
            )
            .map_err(db_error)?;
        if went_in == 0 {
            continue;
        }
        recorded += 1;
        tx.execute(
            "INSERT INTO rollup_told (hour, tenant, revision, human, bot, head) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (hour, tenant) DO UPDATE SET \
             revision = excluded.revision, human = excluded.human, bot = excluded.bot, head = excluded.head",
            params![hour, tenant, revision, human, bot, head],
        )
        .map_err(db_error)?;
        tx.execute(
            "INSERT INTO webhook_deliveries (endpoint_id, event_id, next_at) \
             SELECT w.id, e.id, ?2 FROM webhook_events e \
             JOIN webhook_endpoints w ON w.tenant = e.tenant AND w.disabled_at IS NULL \
             WHERE e.dedup = ?1",
            params![dedup, now],
        )
        .map_err(db_error)?;
    }
    tx.execute(
        "DELETE FROM rollup_told WHERE hour < ?1",
        params![hour - crate::store::webhooks::ROLLUP_TOLD_KEPT_SECONDS],
    )
    .map_err(db_error)?;
    tx.commit().map_err(db_error)?;
    Ok(recorded)
}

const ENDPOINT_COLUMNS: &str = "id, tenant, url, created_at, created_by, failures, disabled_at";

fn endpoint(row: &Row<'_>) -> rusqlite::Result<Endpoint> {
    Ok(Endpoint {
        id: row.get(0)?,
        tenant: row.get(1)?,
        url: row.get(2)?,
        created_at: from_millis(row.get(3)?),
        created_by: row.get(4)?,
        failures: row.get::<_, i64>(5)?.max(0) as u32,
        disabled_at: row.get::<_, Option<i64>>(6)?.map(from_millis),
    })
}

/// Registers `new` unless its tenant has `new.most` endpoints already (`None`; the writer is
/// the only one, so the count and the insert cannot interleave with another registration).
pub(super) fn create(
    conn: &mut Connection,
    new: &NewEndpoint,
) -> Result<Option<Endpoint>, StoreError> {
    let inserted = conn
        .execute(
            "INSERT INTO webhook_endpoints (tenant, url, secret, created_at, created_by) \
             SELECT ?1, ?2, ?3, ?4, ?5 \
             WHERE (SELECT count(*) FROM webhook_endpoints WHERE tenant = ?1) < ?6",
            params![
                new.tenant,
                new.url,
                new.secret,
                millis(Utc::now()),
                new.created_by,
                new.most
            ],
        )
        .map_err(db_error)?;
    if inserted == 0 {
        return Ok(None);
    }
    let id = conn.last_insert_rowid();
    conn.query_row(
        &format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = ?1"),
        [id],
        endpoint,
    )
    .map(Some)
    .map_err(db_error)
}

pub(super) fn list(conn: &Connection, tenant: Option<&str>) -> Result<Vec<Endpoint>, StoreError> {
    let mut select = conn
        .prepare_cached(&format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE ?1 IS NULL OR tenant = ?1 ORDER BY id"
        ))
        .map_err(db_error)?;
    let rows = select.query_map([tenant], endpoint).map_err(db_error)?;
    rows.collect::<Result<_, _>>().map_err(db_error)
}

pub(super) fn delete(
    conn: &mut Connection,
    id: i64,
    tenant: Option<&str>,
) -> Result<bool, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    let deleted = tx
        .execute(
            "DELETE FROM webhook_endpoints WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2)",
            params![id, tenant],
        )
        .map_err(db_error)?;
    if deleted == 1 {
        // SQLite does not enforce foreign keys here: the cascade is written out.
        tx.execute(
            "DELETE FROM webhook_deliveries WHERE endpoint_id = ?1",
            [id],
        )
        .map_err(db_error)?;
    }
    tx.commit().map_err(db_error)?;
    Ok(deleted == 1)
}

pub(super) fn log(
    conn: &Connection,
    id: i64,
    tenant: Option<&str>,
    limit: i64,
) -> Result<Option<Vec<DeliveryRecord>>, StoreError> {
    let found: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM webhook_endpoints WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2)",
            params![id, tenant],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_error)?;
    if found.is_none() {
        return Ok(None);
    }
    let mut select = conn
        .prepare_cached(
            "SELECT d.event_id, e.kind, d.state, d.attempts, d.last_status, d.last_error, d.delivered_at, \
             d.failed_at \
             FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id \
             WHERE d.endpoint_id = ?1 ORDER BY d.event_id DESC LIMIT ?2",
        )
        .map_err(db_error)?;
    let rows = select
        .query_map(params![id, limit], |r| {
            Ok(DeliveryRecord {
                event_id: r.get(0)?,
                kind: r.get(1)?,
                state: r.get(2)?,
                attempts: r.get::<_, i64>(3)?.max(0) as u32,
                last_status: r.get::<_, Option<i64>>(4)?.map(|s| s.clamp(0, 999) as u16),
                last_error: r.get(5)?,
                delivered_at: r.get::<_, Option<i64>>(6)?.map(from_millis),
                failed_at: r.get::<_, Option<i64>>(7)?.map(from_millis),
            })
        })
        .map_err(db_error)?;
    Ok(Some(rows.collect::<Result<_, _>>().map_err(db_error)?))
}

pub(super) fn claim(
    conn: &mut Connection,
    lease: Duration,
    endpoints: i64,
    per_endpoint: i64,
) -> Result<Vec<Delivery>, StoreError> {
    let now = millis(Utc::now());
    let until = now + lease.as_millis() as i64;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    let picked: Vec<(i64, String, String)> = {
        // Each endpoint's first due delivery is found by walking its pending deliveries in
        // order of time (an index), not by grouping the whole outbox. A tenant's endpoints
        // being delivered to count as turns it has had (see the PostgreSQL claim).
        let mut select = tx
            .prepare_cached(
                "SELECT id, url, secret FROM ( \
                   SELECT id, url, secret, first, \
                          busy + row_number() OVER (PARTITION BY tenant ORDER BY first, id) AS turn \
                   FROM (SELECT w.id, w.tenant, w.url, w.secret, \
                           (SELECT count(*) FROM webhook_endpoints b \
                            WHERE b.tenant = w.tenant AND b.disabled_at IS NULL \
                              AND b.leased_until >= ?1) AS busy, \
                           (SELECT d.next_at FROM webhook_deliveries d \
                            WHERE d.endpoint_id = w.id AND d.state = 'pending' \
                              AND (d.leased_until IS NULL OR d.leased_until < ?1) \
                            ORDER BY d.next_at LIMIT 1) AS first \
                         FROM webhook_endpoints w \
                         WHERE w.disabled_at IS NULL AND (w.leased_until IS NULL OR w.leased_until < ?1) \
                           AND (w.held_until IS NULL OR w.held_until <= ?1)) \
                   WHERE first <= ?1) \
                 ORDER BY turn, first, id LIMIT ?2",
            )
            .map_err(db_error)?;
        let rows = select
            .query_map(params![now, endpoints], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .map_err(db_error)?;
        rows.collect::<Result<_, _>>().map_err(db_error)?
    };
    let mut claimed = Vec::new();
    for (endpoint_id, url, secret) in picked {
        tx.execute(
            "UPDATE webhook_endpoints SET leased_until = ?2 WHERE id = ?1",
            params![endpoint_id, until],
        )
        .map_err(db_error)?;
        let mut select = tx
            .prepare_cached(
                "SELECT d.event_id, e.kind, e.data, e.created_at, d.attempts, e.traceparent \
                 FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id \
                 WHERE d.endpoint_id = ?1 AND d.state = 'pending' AND d.next_at <= ?2 \
                   AND (d.leased_until IS NULL OR d.leased_until < ?2) \
                 ORDER BY d.next_at, d.event_id LIMIT ?3",
            )
            .map_err(db_error)?;
        let rows = select
            .query_map(params![endpoint_id, now, per_endpoint], |r| {
                Ok(Delivery {
                    endpoint_id,
                    url: url.clone(),
                    secret: secret.clone(),
                    event_id: r.get(0)?,
                    kind: r.get(1)?,
                    data: r.get(2)?,
                    created_at: from_millis(r.get(3)?),
                    attempts: r.get::<_, i64>(4)?.max(0) as u32,
                    trace: r.get(5)?,
                    // The lease's end in milliseconds: a claim of the endpoint is made only
                    // once the one before ended, so each ends later and the token names one.
                    lease: until,
                })
            })
            .map_err(db_error)?;
        let deliveries = rows.collect::<Result<Vec<_>, _>>().map_err(db_error)?;
        for d in &deliveries {
            tx.execute(
                "UPDATE webhook_deliveries SET leased_until = ?3 WHERE endpoint_id = ?1 AND event_id = ?2",
                params![d.endpoint_id, d.event_id, until],
            )
            .map_err(db_error)?;
        }
        claimed.extend(deliveries);
    }
    tx.commit().map_err(db_error)?;
    Ok(claimed)
}

pub(super) fn finish(conn: &mut Connection, attempt: &Attempt) -> Result<Finished, StoreError> {
    let now = millis(Utc::now());
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    let status = attempt.status.map(i64::from);
    let finished = if attempt.delivered {
        tx.execute(
            "UPDATE webhook_deliveries SET state = 'delivered', attempts = attempts + 1, last_status = ?3, \
             last_error = NULL, delivered_at = ?4, leased_until = NULL WHERE endpoint_id = ?1 AND event_id = ?2",
            params![attempt.endpoint_id, attempt.event_id, status, now],
        )
        .map_err(db_error)?;
        let disabled: Option<bool> = tx
            .query_row(
                "UPDATE webhook_endpoints SET failures = 0 WHERE id = ?1 RETURNING disabled_at IS NOT NULL",
                [attempt.endpoint_id],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_error)?;
        Finished {
            disabled_now: false,
            // A deleted endpoint gets nothing more either.
            stopped: disabled.unwrap_or(true),
            failures: 0,
            given_up: false,
        }
    } else {
        // The last attempt a delivery gets ends it `failed`; a delivery no longer pending
        // (delivered meanwhile by a node that took it over), or claimed again since, stays as
        // it is: its new claim records its own attempt.
        let updated = tx.execute(
            "UPDATE webhook_deliveries SET attempts = attempts + 1, last_status = ?3, last_error = ?4, \
             next_at = ?5, leased_until = NULL, \
             state = CASE WHEN ?6 THEN 'failed' ELSE state END, \
             failed_at = CASE WHEN ?6 THEN ?7 ELSE NULL END \
             WHERE endpoint_id = ?1 AND event_id = ?2 AND state = 'pending' AND leased_until = ?8",
            params![
                attempt.endpoint_id,
                attempt.event_id,
                status,
                attempt.error,
                millis(attempt.retry_at),
                attempt.last,
                now,
                attempt.lease
            ],
        )
        .map_err(db_error)?;
        let was_enabled = tx
            .query_row(
                "SELECT disabled_at IS NULL FROM webhook_endpoints WHERE id = ?1",
                [attempt.endpoint_id],
                |r| r.get::<_, bool>(0),
            )
            .optional()
            .map_err(db_error)?
            .unwrap_or(false);
        // A failure of an endpoint already disabled (by hand, while the attempt was in flight)
        // does not count; nor does one whose delivery was taken over or delivered meanwhile:
        // the endpoint's run of failures is its current claim's to count.
        let counted: Option<(bool, i64)> = if was_enabled && updated == 0 {
            tx.query_row(
                "SELECT disabled_at IS NOT NULL, failures FROM webhook_endpoints WHERE id = ?1",
                [attempt.endpoint_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(db_error)?
        } else if was_enabled {
            tx.query_row(
                "UPDATE webhook_endpoints SET failures = failures + 1, \
                 disabled_at = CASE WHEN failures + 1 >= ?2 THEN coalesce(disabled_at, ?3) ELSE disabled_at END \
                 WHERE id = ?1 RETURNING disabled_at IS NOT NULL, failures",
                params![attempt.endpoint_id, i64::from(attempt.max_failures), now],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(db_error)?
        } else {
            None
        };
        let disabled = counted.map(|(disabled, _)| disabled);
        Finished {
            disabled_now: was_enabled && disabled == Some(true),
            stopped: disabled.unwrap_or(true),
            failures: counted.map_or(0, |(_, n)| n.max(0) as u32),
            given_up: attempt.last && updated == 1,
        }
    };
    tx.commit().map_err(db_error)?;
    Ok(finished)
}

pub(super) fn release(
    conn: &mut Connection,
    endpoint_id: i64,
    lease: i64,
    unsent: &[i64],
    hold: Option<std::time::Duration>,
) -> Result<(), StoreError> {
    let until =
        hold.map(|h| millis(Utc::now() + chrono::Duration::from_std(h).unwrap_or_default()));
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    for event_id in unsent {
        tx.execute(
            "UPDATE webhook_deliveries SET leased_until = NULL \
             WHERE endpoint_id = ?1 AND event_id = ?2 AND state = 'pending' AND leased_until = ?3",
            params![endpoint_id, event_id, lease],
        )
        .map_err(db_error)?;
    }
    tx.execute(
        "UPDATE webhook_endpoints SET leased_until = NULL, held_until = ?2 WHERE id = ?1 AND leased_until = ?3",
        params![endpoint_id, until, lease],
    )
    .map_err(db_error)?;
    tx.commit().map_err(db_error)?;
    Ok(())
}

/// Lists the tenants at `max_pending` in `webhook_full_tenants` (the trigger of migration 13
/// drops their events) and empties `webhook_dropped` into the answer, in one transaction.
pub(super) fn bound(conn: &mut Connection, max_pending: u64) -> Result<OutboxBound, StoreError> {
    let max = i64::try_from(max_pending).unwrap_or(i64::MAX);
    let now = millis(Utc::now());
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    let full: Vec<String> = {
        let mut select = tx
            .prepare_cached(
                "SELECT w.tenant FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id \
                 WHERE d.state = 'pending' AND w.disabled_at IS NULL \
                 GROUP BY w.tenant HAVING count(*) >= ?1 ORDER BY w.tenant",
            )
            .map_err(db_error)?;
        let rows = select.query_map([max], |r| r.get(0)).map_err(db_error)?;
        rows.collect::<Result<_, _>>().map_err(db_error)?
    };
    let listed: Vec<String> = {
        let mut select = tx
            .prepare_cached("SELECT tenant FROM webhook_full_tenants")
            .map_err(db_error)?;
        let rows = select.query_map([], |r| r.get(0)).map_err(db_error)?;
        rows.collect::<Result<_, _>>().map_err(db_error)?
    };
    for tenant in listed.iter().filter(|t| !full.contains(t)) {
        tx.execute(
            "DELETE FROM webhook_full_tenants WHERE tenant = ?1",
            [tenant],
        )
        .map_err(db_error)?;
    }
    for tenant in &full {
        tx.execute(
            "INSERT INTO webhook_full_tenants (tenant, since) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            params![tenant, now],
        )
        .map_err(db_error)?;
    }
    let dropped: Vec<(String, u64)> = {
        let mut select = tx
            .prepare_cached(
                "SELECT tenant, count(*) FROM webhook_dropped GROUP BY tenant ORDER BY tenant",
            )
            .map_err(db_error)?;
        let rows = select
            .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)?.max(0) as u64)))
            .map_err(db_error)?;
        rows.collect::<Result<_, _>>().map_err(db_error)?
    };
    tx.execute("DELETE FROM webhook_dropped", [])
        .map_err(db_error)?;
    tx.commit().map_err(db_error)?;
    Ok(OutboxBound { full, dropped })
}

pub(super) fn set_enabled(
    conn: &mut Connection,
    id: i64,
    tenant: Option<&str>,
    enabled: bool,
) -> Result<Option<Endpoint>, StoreError> {
    let now = millis(Utc::now());
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    let sql = if enabled {
        format!(
            "UPDATE webhook_endpoints SET failures = 0, disabled_at = NULL, held_until = NULL \
             WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2) RETURNING {ENDPOINT_COLUMNS}"
        )
    } else {
        format!(
            "UPDATE webhook_endpoints SET disabled_at = coalesce(disabled_at, ?3) \
             WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2) AND ?3 IS NOT NULL RETURNING {ENDPOINT_COLUMNS}"
        )
    };
    let found = if enabled {
        tx.query_row(&sql, params![id, tenant], endpoint)
    } else {
        tx.query_row(&sql, params![id, tenant, now], endpoint)
    }
    .optional()
    .map_err(db_error)?;
    if found.is_some() && enabled {
        tx.execute(
            "UPDATE webhook_deliveries SET next_at = ?2 WHERE endpoint_id = ?1 AND state = 'pending'",
            params![id, now],
        )
        .map_err(db_error)?;
    }
    tx.commit().map_err(db_error)?;
    Ok(found)
}

pub(super) fn backlog(conn: &Connection) -> Result<Backlog, StoreError> {
    let now = millis(Utc::now());
    let (pending, oldest): (i64, Option<i64>) = conn
        .query_row(
            "SELECT count(*), min(CASE WHEN d.next_at <= ?1 THEN d.next_at END) \
             FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id \
             WHERE d.state = 'pending' AND w.disabled_at IS NULL",
            [now],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(db_error)?;
    Ok(Backlog {
        pending: pending.max(0) as u64,
        oldest_due_seconds: oldest.map_or(0, |at| ((now - at).max(0) / 1000) as u64),
    })
}

pub(super) fn purge(
    conn: &mut Connection,
    before: DateTime<Utc>,
    limit: i64,
) -> Result<(u64, u64), StoreError> {
    let before = millis(before);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    // Delivered and failed deliveries alike, each by the index of when it ended.
    let mut deliveries = 0;
    for (state, at) in [("delivered", "delivered_at"), ("failed", "failed_at")] {
        deliveries += tx
            .execute(
                &format!(
                    "DELETE FROM webhook_deliveries WHERE rowid IN \
                     (SELECT rowid FROM webhook_deliveries \
                      WHERE state = '{state}' AND {at} < ?1 ORDER BY {at} LIMIT ?2)"
                ),
                params![before, limit],
            )
            .map_err(db_error)?;
    }
    let events = tx
        .execute(
            "DELETE FROM webhook_events WHERE id IN \
             (SELECT e.id FROM webhook_events e WHERE e.created_at < ?1 \
              AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id) \
              ORDER BY e.id LIMIT ?2)",
            params![before, limit],
        )
        .map_err(db_error)?;
    tx.commit().map_err(db_error)?;
    Ok((deliveries as u64, events as u64))
}
