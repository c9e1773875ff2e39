//! Writes other than inserts: deletes, click counts and blocked domains.

use super::error::db_error;
use super::layout::Layout;
use super::send::{Conn, Tx};
use super::{LINK_COLUMNS, NOTIFY_CHANNEL, link_from_row};
use crate::domain::{ClickCounts, CompactCode};
use crate::store::{BatchMark, DeleteOutcome, StoreError};
use chrono::{DateTime, Utc};
use tokio_postgres::types::ToSql;

/// Marks `code` deleted (it keeps its dedup key), if it belongs to `tenant` (any tenant's for
/// `None`), recording the delete by `key` in its history; the change is announced to every
/// node in the same transaction.
pub(super) async fn delete(
    client: &mut Conn,
    layout: &Layout,
    code: &str,
    tenant: Option<&str>,
    key: &str,
) -> Result<DeleteOutcome, StoreError> {
    let find = layout.find(code);
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&code, &tenant];
    params.extend(find.param());
    let tx = client.transaction().await.map_err(db_error)?;
    let deleted = tx
        .query_opt(
            &format!(
                // The link keeps its dedup key: a rerun of the import that made it finds it
                // deleted rather than make it again; a dedup create releases it first.
                "UPDATE links SET deleted_at = now() \
                 WHERE {} AND deleted_at IS NULL AND ($2::text IS NULL OR tenant = $2) \
                 RETURNING {LINK_COLUMNS}",
                find.clause("", 3)
            ),
            &params,
        )
        .await
        .map_err(db_error)?;
    if let Some(row) = deleted {
        let link = link_from_row(&row);
        super::webhooks::record(
            &tx,
            &link.tenant,
            crate::store::webhooks::LINK_DELETED,
            &crate::store::webhooks::link_data(&link),
        )
        .await?;
        tx.execute(
            r#"INSERT INTO link_events (code, key, kind, change) VALUES ($1, $2, 'delete', '{"deleted": {"old": false, "new": true}}')"#,
            &[&code, &key],
        )
        .await
        .map_err(db_error)?;
        // Delivered to every listening node when (and only if) the delete commits.
        tx.execute("SELECT pg_notify($1, $2)", &[&NOTIFY_CHANNEL, &code])
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        return Ok(DeleteOutcome::Deleted);
    }
    let exists = tx
        .query_opt(
            &format!(
                "SELECT 1 FROM links WHERE {} AND ($2::text IS NULL OR tenant = $2)",
                find.clause("", 3)
            ),
            &params,
        )
        .await
        .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    Ok(if exists.is_some() {
        DeleteOutcome::AlreadyDeleted
    } else {
        DeleteOutcome::NotFound
    })
}

/// Deletes idempotency claims made before `expired_before`; returns how many.
pub(super) async fn purge_idempotency(
    client: &Conn,
    expired_before: DateTime<Utc>,
) -> Result<u64, StoreError> {
    client
        .execute(
            "DELETE FROM idempotency_keys WHERE created_at < $1",
            &[&expired_before],
        )
        .await
        .map_err(db_error)
}

/// Merges the trigram index's pending list into the index (`gin_clean_pending_list`); the
/// pages it removed from the list. Its limit (migration 23) is set high enough that no create
/// meets it while the nodes call this every second, so no create's statement does the merge.
/// It gives up after 50 ms waiting for a lock (someone altering the table) rather than queue
/// behind it: the next call comes a second later.
pub(super) async fn clean_search_index(client: &mut Conn) -> Result<u64, StoreError> {
    let tx = client.transaction().await.map_err(db_error)?;
    tx.batch_execute("SET LOCAL lock_timeout = '50ms'")
        .await
        .map_err(db_error)?;
    let row = tx
        .query_one(
            "SELECT gin_clean_pending_list('links_url_trgm'::regclass)",
            &[],
        )
        .await
        .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
}

/// Adds the counts of `rows` with one upsert (every flush, so prepared once), in the statement
/// that advances `mark`'s writer to it: nothing is added when the writer is there or past it
/// already (the batch was sent before, and committed). An earlier send still committing holds
/// the writer's row until it ends, so the two cannot both add the batch.
pub(super) async fn add_clicks(
    client: &Conn,
    mark: BatchMark,
    rows: &[(CompactCode, ClickCounts)],
) -> Result<(), StoreError> {
    let codes: Vec<&str> = rows.iter().map(|(c, _)| c.as_str()).collect();
    let column = |f: fn(&ClickCounts) -> u64| -> Vec<i64> {
        rows.iter().map(|(_, c)| f(c) as i64).collect()
    };
    let (human, head, bot) = (column(|c| c.human), column(|c| c.head), column(|c| c.bot));
    client
        .prepared_execute(
            "WITH mark AS (INSERT INTO flush_marks AS m (writer, stream, seq) VALUES ($5, $6, $7) \
               ON CONFLICT (writer, stream) DO UPDATE SET seq = EXCLUDED.seq, at = now() \
               WHERE m.seq < EXCLUDED.seq RETURNING 1) \
             INSERT INTO link_clicks (code, human, head, bot) \
             SELECT c.code, c.human, c.head, c.bot \
             FROM unnest($1::text[], $2::int8[], $3::int8[], $4::int8[]) AS c (code, human, head, bot) \
             WHERE EXISTS (SELECT FROM mark) \
             ON CONFLICT (code) DO UPDATE SET human = link_clicks.human + EXCLUDED.human, \
             head = link_clicks.head + EXCLUDED.head, bot = link_clicks.bot + EXCLUDED.bot",
            &[
                &codes,
                &human,
                &head,
                &bot,
                &mark.writer,
                &mark.stream.stored(),
                &mark.seq,
            ],
        )
        .await
        .map_err(db_error)?;
    Ok(())
}

/// Advances `mark`'s writer to it in `tx`: false when the writer is there or past it already
/// (the batch was added before), and the batch must add nothing.
pub(super) async fn advance_mark(tx: &Tx<'_>, mark: BatchMark) -> Result<bool, StoreError> {
    let advanced = tx
        .execute(
            "INSERT INTO flush_marks AS m (writer, stream, seq) VALUES ($1, $2, $3) \
             ON CONFLICT (writer, stream) DO UPDATE SET seq = EXCLUDED.seq, at = now() \
             WHERE m.seq < EXCLUDED.seq",
            &[&mark.writer, &mark.stream.stored(), &mark.seq],
        )
        .await
        .map_err(db_error)?;
    Ok(advanced == 1)
}

/// Adds a blocked domain entry on behalf of `key`; false if it was there already.
pub(super) async fn block_domain(
    client: &Conn,
    entry: &str,
    key: &str,
) -> Result<bool, StoreError> {
    client
        .execute(
            "INSERT INTO blocked_domains (entry, added_by) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&entry, &key],
        )
        .await
        .map(|n| n == 1)
        .map_err(db_error)
}

/// Removes a blocked domain entry; false if it was not there.
pub(super) async fn unblock_domain(client: &Conn, entry: &str) -> Result<bool, StoreError> {
    client
        .execute("DELETE FROM blocked_domains WHERE entry = $1", &[&entry])
        .await
        .map(|n| n == 1)
        .map_err(db_error)
}
