//! A tag renamed or deleted across a tenant's links: one transaction that locks the links,
//! checks the bounds, and writes every link's change with the history events, webhook events
//! and change-feed announcements a single edit of its tags writes. The links, their tag rows,
//! their events, their webhook events and their announcements are each written by one statement
//! over arrays, so a change of thousands of links is a handful of round trips (10,000 links take
//! about two seconds in a debug build).

use super::error::db_error;
use super::send::{Conn, Tx};
use super::{L_LINK_COLUMNS, NOTIFY_CHANNEL, link_from_row};
use crate::domain::{LinkPatch, TagChange};
use crate::store::{StoreError, TagOutcome};
use chrono::{DateTime, Utc};

/// Applies `change` to the live links of `tenant` in one transaction (see
/// [`crate::store::LinkStore::change_tag`]).
pub(super) async fn change_tag(
    client: &mut Conn,
    tenant: &str,
    change: &TagChange,
    key: &str,
    max_links: usize,
) -> Result<TagOutcome, StoreError> {
    let tx = client.transaction().await.map_err(db_error)?;
    let sought = change.sought();
    // One more than the bound: enough to tell that the bound is passed, never more.
    let limit = i64::try_from(max_links.saturating_add(1)).unwrap_or(i64::MAX);
    let rows = tx
        .query(
            &format!(
                "SELECT {L_LINK_COLUMNS} FROM links l \
                 WHERE (l.tenant, l.created_at, l.code) IN \
                   (SELECT t.tenant, t.created_at, t.code FROM link_tags t \
                    WHERE t.tenant = $1 AND t.tag = ANY($2)) \
                   AND l.deleted_at IS NULL \
                 LIMIT $3 FOR UPDATE OF l"
            ),
            &[&tenant, &sought, &limit],
        )
        .await
        .map_err(db_error)?;
    if rows.is_empty() {
        return Ok(TagOutcome::NotFound);
    }
    if rows.len() > max_links {
        return Ok(TagOutcome::TooMany);
    }
    if let TagChange::Rename { from, to } = change {
        if from == to {
            return Ok(TagOutcome::Changed(Vec::new()));
        }
        let taken: bool = tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM link_tags t JOIN links l \
                   ON l.tenant = t.tenant AND l.created_at = t.created_at AND l.code = t.code \
                 WHERE t.tenant = $1 AND t.tag = $2 AND l.deleted_at IS NULL)",
                &[&tenant, &to],
            )
            .await
            .map_err(db_error)?
            .get(0);
        if taken {
            return Ok(TagOutcome::Conflict);
        }
    }
    let rows = Rows::of(&rows, change);
    write(&tx, tenant, change, key, &rows).await?;
    tx.commit().await.map_err(db_error)?;
    Ok(TagOutcome::Changed(rows.codes))
}

/// What a change writes, column by column (one entry per changed link, or per event).
#[derive(Default)]
struct Rows {
    codes: Vec<String>,
    created: Vec<DateTime<Utc>>,
    /// Each link's new tags, as JSON text.
    tags: Vec<String>,
    event_codes: Vec<String>,
    kinds: Vec<&'static str>,
    changes: Vec<String>,
    /// Each link's webhook data.
    hooks: Vec<String>,
}

impl Rows {
    /// The changes `change` makes to the links of `rows`, as a patch of their tags makes them
    /// (a link it leaves as it was is left out).
    fn of(rows: &[tokio_postgres::Row], change: &TagChange) -> Rows {
        let now = Utc::now();
        let mut out = Rows::default();
        for row in rows {
            let old = link_from_row(row);
            let patch = LinkPatch {
                tags: Some(change.apply(&old.tags)),
                ..LinkPatch::default()
            };
            let (new, events) = patch.apply(&old, now);
            if events.is_empty() {
                continue;
            }
            for (kind, change) in &events {
                out.event_codes.push(new.code.clone());
                out.kinds.push(kind.name());
                out.changes.push(change.to_string());
            }
            out.hooks.push(crate::store::webhooks::link_data(&new));
            out.tags
                .push(serde_json::to_string(&new.tags).unwrap_or_else(|_| "[]".into()));
            out.created.push(new.created_at);
            out.codes.push(new.code);
        }
        out
    }
}

/// Writes `rows` in `tx`: the links, their tag rows, their events, their webhook events and
/// their announcements.
async fn write(
    tx: &Tx<'_>,
    tenant: &str,
    change: &TagChange,
    key: &str,
    rows: &Rows,
) -> Result<(), StoreError> {
    let Rows {
        codes,
        created,
        tags,
        event_codes,
        kinds,
        changes,
        hooks,
    } = rows;
    tx.execute(
        "UPDATE links l SET tags = v.tags FROM \
           (SELECT c, at, ARRAY(SELECT e.x FROM jsonb_array_elements_text(tg::jsonb) \
                                WITH ORDINALITY AS e(x, n) ORDER BY e.n) AS tags \
            FROM unnest($2::text[], $3::timestamptz[], $4::text[]) AS u(c, at, tg)) v \
         WHERE l.tenant = $1 AND l.created_at = v.at AND l.code = v.c",
        &[&tenant, codes, created, tags],
    )
    .await
    .map_err(db_error)?;
    match change {
        TagChange::Rename { from, to } => {
            tx.execute(
                "UPDATE link_tags SET tag = $3 WHERE tenant = $1 AND tag = $2 AND code = ANY($4)",
                &[&tenant, from, to, codes],
            )
            .await
        }
        TagChange::Delete(gone) => {
            tx.execute(
                "DELETE FROM link_tags WHERE tenant = $1 AND tag = ANY($2) AND code = ANY($3)",
                &[&tenant, gone, codes],
            )
            .await
        }
    }
    .map_err(db_error)?;
    tx.execute(
        "INSERT INTO link_events (code, key, kind, change) \
         SELECT c, $1, k, ch::jsonb FROM unnest($2::text[], $3::text[], $4::text[]) \
           WITH ORDINALITY AS u(c, k, ch, n) ORDER BY n",
        &[&key, event_codes, kinds, changes],
    )
    .await
    .map_err(db_error)?;
    // Told to the tenant's webhooks if (and only if) the change commits: what
    // `webhooks::record` writes for one event, for all of them in one statement.
    let trace = otel::current_traceparent();
    tx.execute(
        "WITH ev AS (INSERT INTO webhook_events (tenant, kind, data, traceparent) \
           SELECT $1::text, $2::text, u.d, $4::text FROM unnest($3::text[]) WITH ORDINALITY AS u(d, n) \
           WHERE EXISTS (SELECT 1 FROM webhook_endpoints WHERE tenant = $1::text AND disabled_at IS NULL) \
           ORDER BY u.n \
           RETURNING id, tenant) \
         INSERT INTO webhook_deliveries (endpoint_id, event_id) \
         SELECT w.id, ev.id FROM ev JOIN webhook_endpoints w ON w.tenant = ev.tenant AND w.disabled_at IS NULL",
        &[&tenant, &crate::store::webhooks::LINK_UPDATED, hooks, &trace],
    )
    .await
    .map_err(db_error)?;
    // Delivered to every listening node when (and only if) the change commits.
    tx.execute(
        "SELECT pg_notify($1, c) FROM unnest($2::text[]) AS c",
        &[&NOTIFY_CHANNEL, codes],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}
