//! Webhook deliveries made due again by hand (`POST /api/v1/webhooks/{id}/deliveries/retry`)
//! on SQLite, on the writer thread like every write.

use super::convert::{db_error, millis};
use crate::store::StoreError;
use chrono::Utc;
use rusqlite::{Connection, params};

pub(super) fn retry(
    conn: &Connection,
    endpoint_id: i64,
    event_id: Option<i64>,
    limit: i64,
) -> Result<u64, StoreError> {
    conn.execute(
        "UPDATE webhook_deliveries SET state = 'pending', attempts = 0, next_at = ?4, \
         failed_at = NULL, leased_until = NULL \
         WHERE endpoint_id = ?1 AND event_id IN (SELECT event_id FROM webhook_deliveries \
           WHERE endpoint_id = ?1 AND CASE WHEN ?2 IS NULL THEN state = 'failed' \
                 ELSE event_id = ?2 AND state <> 'pending' END \
           ORDER BY event_id LIMIT ?3)",
        params![endpoint_id, event_id, limit, millis(Utc::now())],
    )
    .map(|n| n as u64)
    .map_err(db_error)
}
