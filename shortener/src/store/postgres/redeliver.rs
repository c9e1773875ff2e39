//! Webhook deliveries made due again by hand (`POST /api/v1/webhooks/{id}/deliveries/retry`)
//! on PostgreSQL, in one transaction: the endpoint's row is locked first, then the tenant's
//! retry lock (so two retries of any endpoints of one tenant take turns and the room under the
//! tenant's bound is counted once), then the deliveries chosen, so a purge running beside it
//! deletes none it made pending.

use super::error::db_error;
use super::send::Conn;
use crate::store::{Retried, StoreError};

pub(super) async fn retry(
    client: &mut Conn,
    endpoint_id: i64,
    event_id: Option<i64>,
    limit: i64,
    max_pending: u64,
) -> Result<Retried, StoreError> {
    let tx = client.transaction().await.map_err(db_error)?;
    let Some(row) = tx
        .query_opt(
            "SELECT tenant FROM webhook_endpoints WHERE id = $1 FOR UPDATE",
            &[&endpoint_id],
        )
        .await
        .map_err(db_error)?
    else {
        return Ok(Retried::default());
    };
    let tenant: String = row.get(0);
    // Held to the commit: a retry of another of the tenant's endpoints counts the room after
    // this one's deliveries are pending, not beside it.
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('webhook retry ' || $1, 0))",
        &[&tenant],
    )
    .await
    .map_err(db_error)?;
    let pending: i64 = tx
        .query_one(
            "SELECT count(*) FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id \
             WHERE w.tenant = $1 AND d.state = 'pending' AND w.disabled_at IS NULL",
            &[&tenant],
        )
        .await
        .map_err(db_error)?
        .get(0);
    let room = match Retried::room(max_pending, pending) {
        Ok(room) => room,
        Err(full) => return Ok(full),
    };
    let retried = tx
        .execute(
            "UPDATE webhook_deliveries d SET state = 'pending', attempts = 0, next_at = now(), \
             failed_at = NULL, delivered_at = NULL, leased_until = NULL \
             FROM (SELECT event_id FROM webhook_deliveries WHERE endpoint_id = $1 AND \
                   CASE WHEN $2::bigint IS NULL THEN state = 'failed' \
                        ELSE event_id = $2 AND state <> 'pending' END \
                   ORDER BY event_id LIMIT $3 FOR UPDATE) chosen \
             WHERE d.endpoint_id = $1 AND d.event_id = chosen.event_id",
            &[&endpoint_id, &event_id, &limit.min(room)],
        )
        .await
        .map_err(db_error)?;
    if retried > 0 {
        tx.execute(
            "UPDATE webhook_endpoints SET held_until = NULL, failures = 0 WHERE id = $1",
            &[&endpoint_id],
        )
        .await
        .map_err(db_error)?;
    }
    tx.commit().await.map_err(db_error)?;
    Ok(Retried {
        retried,
        full: false,
    })
}
