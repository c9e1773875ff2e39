//! Webhook deliveries made due again by hand (`POST /api/v1/webhooks/{id}/deliveries/retry`)
//! on PostgreSQL: the rows chosen are locked first, so two nodes retrying at once make each
//! delivery due once.

use super::error::db_error;
use super::send::Conn;
use crate::store::StoreError;

pub(super) async fn retry(
    client: &Conn,
    endpoint_id: i64,
    event_id: Option<i64>,
    limit: i64,
) -> Result<u64, StoreError> {
    client
        .execute(
            "UPDATE webhook_deliveries d SET state = 'pending', attempts = 0, next_at = now(), \
             failed_at = NULL, leased_until = NULL \
             FROM (SELECT event_id FROM webhook_deliveries WHERE endpoint_id = $1 AND \
                   CASE WHEN $2::bigint IS NULL THEN state = 'failed' \
                        ELSE event_id = $2 AND state <> 'pending' END \
                   ORDER BY event_id LIMIT $3 FOR UPDATE) chosen \
             WHERE d.endpoint_id = $1 AND d.event_id = chosen.event_id",
            &[&endpoint_id, &event_id, &limit],
        )
        .await
        .map_err(db_error)
}
