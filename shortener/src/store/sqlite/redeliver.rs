//! Webhook deliveries made due again by hand (`POST /api/v1/webhooks/{id}/deliveries/retry`)
//! on SQLite, in one transaction on the writer thread like every write.

use super::convert::{db_error, millis};
use crate::store::{Retried, StoreError};
use chrono::Utc;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

pub(super) fn retry(
    conn: &mut Connection,
    endpoint_id: i64,
    event_id: Option<i64>,
    limit: i64,
    max_pending: u64,
) -> Result<Retried, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    let Some(tenant) = tx
        .query_row(
            "SELECT tenant FROM webhook_endpoints WHERE id = ?1",
            params![endpoint_id],
            |r| r.get::<_, String>(0),
        )
        .optional()
        .map_err(db_error)?
    else {
        return Ok(Retried::default());
    };
    let pending: i64 = tx
        .query_row(
            "SELECT count(*) FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id \
             WHERE w.tenant = ?1 AND d.state = 'pending' AND w.disabled_at IS NULL",
            params![tenant],
            |r| r.get(0),
        )
        .map_err(db_error)?;
    let room = match Retried::room(max_pending, pending) {
        Ok(room) => room,
        Err(full) => return Ok(full),
    };
    let now = millis(Utc::now());
    let retried = tx
        .execute(
            "UPDATE webhook_deliveries SET state = 'pending', attempts = 0, next_at = ?4, \
             failed_at = NULL, delivered_at = NULL, leased_until = NULL \
             WHERE endpoint_id = ?1 AND event_id IN (SELECT event_id FROM webhook_deliveries \
               WHERE endpoint_id = ?1 AND CASE WHEN ?2 IS NULL THEN state = 'failed' \
                     ELSE event_id = ?2 AND state <> 'pending' END \
               ORDER BY event_id LIMIT ?3)",
            params![endpoint_id, event_id, limit.min(room), now],
        )
        .map_err(db_error)?;
    if retried > 0 {
        tx.execute(
            "UPDATE webhook_endpoints SET held_until = NULL, failures = 0 WHERE id = ?1",
            params![endpoint_id],
        )
        .map_err(db_error)?;
    }
    tx.commit().map_err(db_error)?;
    Ok(Retried {
        retried: retried as u64,
        full: false,
    })
}
