//! Changing a link, and reading its history: the change, its event and its announcement to the
//! other nodes commit together.

use super::error::db_error;
use super::layout::Layout;
use super::send::Conn;
use super::{LINK_COLUMNS, NOTIFY_CHANNEL, link_from_row};
use crate::domain::{Event, EventKind, History, LinkPatch};
use crate::store::{StoreError, UpdateOutcome, host_rev};
use chrono::{DateTime, Utc};

use tokio_postgres::types::ToSql;

/// Applies `patch` to `code` (of `tenant`, or any tenant's for `None`) on behalf of `key`.
pub(super) async fn update(
    client: &mut Conn,
    layout: &Layout,
    code: &str,
    tenant: Option<&str>,
    patch: &LinkPatch,
    key: &str,
) -> Result<UpdateOutcome, StoreError> {
    let find = layout.find(code);
    let tx = client.transaction().await.map_err(db_error)?;
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&code, &tenant];
    params.extend(find.param());
    let row = tx
        .query_opt(
            &format!(
                "SELECT {LINK_COLUMNS} FROM links WHERE {} AND ($2::text IS NULL OR tenant = $2) FOR UPDATE",
                find.clause("", 3)
            ),
            &params,
        )
        .await
        .map_err(db_error)?;
    let Some(row) = row else {
        return Ok(UpdateOutcome::NotFound);
    };
    let old = link_from_row(&row);
    if old.deleted_at.is_some() {
        return Ok(UpdateOutcome::Gone);
    }
    let (new, events) = patch.apply(&old, Utc::now());
    if events.is_empty() {
        tx.commit().await.map_err(db_error)?;
        return Ok(UpdateOutcome::Updated(Box::new(old)));
    }
    // A dedup key names the target, the expiry and (on a branded domain) the domain.
    let retargeted =
        new.url != old.url || new.expires_at != old.expires_at || new.domain != old.domain;
    let max_visits = new.max_visits.map(|n| n as i64);
    let host = host_rev(&new.url);
    let password = new.password.as_ref().map(|p| p.as_stored());
    let stored_rules = new.routes.to_stored();
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &code,
        &new.url,
        &new.expires_at,
        &new.tags,
        &new.disabled_at,
        &max_visits,
        &host,
        &retargeted,
        &password,
        &new.domain,
        &stored_rules,
    ];
    params.extend(find.param());
    tx.execute(
        &format!(
            "UPDATE links SET long_url = $2, expires_at = $3, tags = $4, disabled_at = $5, max_visits = $6, \
             host_rev = $7, dedup_key = CASE WHEN $8 THEN NULL ELSE dedup_key END, password_hash = $9, domain = $10, routing = $11 WHERE {}",
            find.clause("", 12)
        ),
        &params,
    )
    .await
    .map_err(db_error)?;
    if new.tags != old.tags {
        tx.execute(
            "DELETE FROM link_tags WHERE tenant = $1 AND code = $2",
            &[&old.tenant, &code],
        )
        .await
        .map_err(db_error)?;
        tx.execute(
            "INSERT INTO link_tags (tenant, tag, created_at, code) SELECT $1, unnest($2::text[]), $3, $4",
            &[&old.tenant, &new.tags, &old.created_at, &code],
        )
        .await
        .map_err(db_error)?;
    }
    for (kind, change) in &events {
        tx.execute(
            "INSERT INTO link_events (code, key, kind, change) VALUES ($1, $2, $3, $4)",
            &[
                &code,
                &key,
                &kind.name(),
                &tokio_postgres::types::Json(change),
            ],
        )
        .await
        .map_err(db_error)?;
    }
    // Told to the tenant's webhooks if (and only if) the change commits.
    super::webhooks::record(
        &tx,
        &new.tenant,
        crate::store::webhooks::LINK_UPDATED,
        &crate::store::webhooks::link_data(&new),
    )
    .await?;
    // Delivered to every listening node when (and only if) the change commits.
    tx.execute("SELECT pg_notify($1, $2)", &[&NOTIFY_CHANNEL, &code])
        .await
        .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    Ok(UpdateOutcome::Updated(Box::new(new)))
}

/// The events recorded for `code` after its creation, oldest first.
/// The latest `limit` events of `code`, newest first.
pub(super) async fn events(
    client: &Conn,
    code: &str,
    limit: i64,
) -> Result<Vec<Event>, StoreError> {
    let rows = client
        .query(
            "SELECT at, key, kind, change FROM link_events WHERE code = $1 ORDER BY id DESC LIMIT $2",
            &[&code, &limit],
        )
        .await
        .map_err(db_error)?;
    rows.iter()
        .map(|r| {
            let kind: String = r.get(2);
            let change: tokio_postgres::types::Json<serde_json::Value> = r.get(3);
            Ok(Event {
                at: r.get::<_, DateTime<Utc>>(0),
                key: r.get(1),
                kind: EventKind::parse(&kind)
                    .ok_or_else(|| StoreError::Internal(format!("unknown event kind {kind:?}")))?,
                change: change.0,
            })
        })
        .collect()
}

/// The link holding `code` and the events recorded after its creation.
pub(super) async fn history(
    client: &Conn,
    layout: &Layout,
    code: &str,
    tenant: Option<&str>,
    max_events: usize,
) -> Result<Option<History>, StoreError> {
    let Some(link) = super::read::get(client, layout, code).await? else {
        return Ok(None);
    };
    if tenant.is_some_and(|tenant| tenant != link.tenant) {
        return Ok(None);
    }
    let newest_first = events(client, code, max_events as i64 + 1).await?;
    Ok(Some(History::of(link, newest_first, max_events)))
}
