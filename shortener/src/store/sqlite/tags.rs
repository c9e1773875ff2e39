//! A tag renamed or deleted across a tenant's links on the embedded store: one immediate
//! transaction that finds the links, checks the bounds, and writes each link's change with the
//! history and webhook events a single edit of its tags writes. Every statement finds its rows
//! by a key (a link by its slot, a tag row by its whole primary key), so the work grows with the
//! number of links changed, never with their square.

use super::convert::{db_error, millis};
use super::rows::{COLUMNS, link_from_row};
use crate::domain::{LinkPatch, TagChange};
use crate::store::{StoreError, TagOutcome};
use chrono::Utc;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

/// The live links of tenant `?1` carrying a tag of the JSON list `?2`, by the tag rows (each
/// joined to its link on the columns `links_tenant_created` is ordered by).
const TAGGED_SLOTS: &str = "SELECT l.slot FROM link_tags t JOIN links l \
     ON l.tenant = t.tenant AND l.created_at = t.created_at AND l.code = t.code \
     WHERE t.tenant = ?1 AND t.tag IN (SELECT value FROM json_each(?2)) AND l.deleted_at IS NULL";

/// Applies `change` to the live links of `tenant` in one transaction (see
/// [`crate::store::LinkStore::change_tag`]).
pub(super) fn change_tag(
    conn: &mut Connection,
    tenant: &str,
    change: &TagChange,
    key: &str,
    max_links: usize,
    trace: Option<&str>,
) -> Result<TagOutcome, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    let sought = serde_json::to_string(change.sought())
        .map_err(|e| StoreError::Internal(format!("tags as JSON: {e}")))?;
    // One more than the bound: enough to tell that the bound is passed, never more.
    let limit = i64::try_from(max_links.saturating_add(1)).unwrap_or(i64::MAX);
    let mut select = tx
        .prepare(&format!(
            "SELECT {COLUMNS}, slot FROM links WHERE slot IN ({TAGGED_SLOTS}) LIMIT ?3"
        ))
        .map_err(db_error)?;
    let links = select
        .query_map(params![tenant, sought, limit], |row| {
            Ok((
                link_from_row(row)?,
                row.get::<_, i64>(super::rows::COLUMN_COUNT)?,
            ))
        })
        .map_err(db_error)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(db_error)?;
    drop(select);
    if links.is_empty() {
        return Ok(TagOutcome::NotFound);
    }
    if links.len() > max_links {
        return Ok(TagOutcome::TooMany);
    }
    if let TagChange::Rename { from, to } = change {
        if from == to {
            return Ok(TagOutcome::Changed(Vec::new()));
        }
        let taken = serde_json::to_string(&[to])
            .map_err(|e| StoreError::Internal(format!("tags as JSON: {e}")))?;
        let exists = tx
            .query_row(
                &format!("{TAGGED_SLOTS} LIMIT 1"),
                params![tenant, taken],
                |r| r.get::<_, i64>(0),
            )
            .optional()
            .map_err(db_error)?;
        if exists.is_some() {
            return Ok(TagOutcome::Conflict);
        }
    }
    let now = Utc::now();
    let at = millis(now);
    let mut changed = Vec::with_capacity(links.len());
    for (old, slot) in links {
        let patch = LinkPatch {
            tags: Some(change.apply(&old.tags)),
            ..LinkPatch::default()
        };
        let (new, events) = patch.apply(&old, now);
        if events.is_empty() {
            continue;
        }
        tx.execute(
            "UPDATE links SET tags = ?2 WHERE slot = ?1",
            params![
                slot,
                serde_json::to_string(&new.tags).unwrap_or_else(|_| "[]".into())
            ],
        )
        .map_err(db_error)?;
        // Each tag row by its whole key: a probe, never a scan of the tenant's tag rows.
        let created = millis(old.created_at);
        for tag in old.tags.iter().filter(|t| !new.tags.contains(t)) {
            tx.execute(
                "DELETE FROM link_tags WHERE tenant = ?1 AND tag = ?2 AND created_at = ?3 AND code = ?4",
                params![old.tenant, tag, created, old.code],
            )
            .map_err(db_error)?;
        }
        for tag in new.tags.iter().filter(|t| !old.tags.contains(t)) {
            tx.execute(
                "INSERT INTO link_tags (tenant, tag, created_at, code) VALUES (?1, ?2, ?3, ?4)",
                params![old.tenant, tag, created, old.code],
            )
            .map_err(db_error)?;
        }
        for (kind, change) in &events {
            tx.execute(
                "INSERT INTO link_events (code, at, key, kind, change) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![old.code, at, key, kind.name(), change.to_string()],
            )
            .map_err(db_error)?;
        }
        super::webhooks::record(
            &tx,
            &new.tenant,
            crate::store::webhooks::LINK_UPDATED,
            || crate::store::webhooks::link_data(&new),
            trace,
        )?;
        changed.push(new.code);
    }
    tx.commit().map_err(db_error)?;
    Ok(TagOutcome::Changed(changed))
}
