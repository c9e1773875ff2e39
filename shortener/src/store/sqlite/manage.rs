//! Link management on the embedded store: updates with their history events, lists by keyset,
//! snapshot exports.
//!
//! A list with `q` (a substring of the target) has no index to use here: it scans the list's
//! order and examines at most [`SCAN_LIMIT`] links per page. A page that reaches that bound
//! comes back short (possibly empty) with a position to continue from, so a search costs a
//! bounded amount per request however rare its matches are.

use super::convert::{db_error, from_millis, millis};
use super::rows::{COLUMNS, find_slot, link_from_row, link_with_clicks};
use crate::domain::{
    DomainFilter, Event, EventKind, Link, LinkPatch, ListQuery, Page, Position, StateFilter,
};
use crate::store::{DeleteOutcome, StoreError, UpdateOutcome, host_rev};
use chrono::Utc;
use codespace::CodeSpace;
use rusqlite::types::Value;
use rusqlite::{Connection, TransactionBehavior, params, params_from_iter};

/// The most links a `q` search examines for one page.
pub const SCAN_LIMIT: usize = 50_000;

/// Applies `patch` to `code` in one immediate transaction with its events.
pub(super) fn update(
    conn: &mut Connection,
    space: &CodeSpace,
    code: &str,
    tenant: Option<&str>,
    patch: &LinkPatch,
    key: &str,
    trace: Option<&str>,
) -> Result<UpdateOutcome, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    let Some(slot) = find_slot(&tx, space, code)? else {
        return Ok(UpdateOutcome::NotFound);
    };
    let old = tx
        .query_row(
            &format!("SELECT {COLUMNS} FROM links WHERE slot = ?1"),
            [slot],
            link_from_row,
        )
        .map_err(db_error)?;
    if tenant.is_some_and(|t| t != old.tenant) {
        return Ok(UpdateOutcome::NotFound);
    }
    if old.deleted_at.is_some() {
        return Ok(UpdateOutcome::Gone);
    }
    let (new, events) = patch.apply(&old, Utc::now());
    if events.is_empty() {
        return Ok(UpdateOutcome::Updated(Box::new(old)));
    }
    // A dedup key names the target, the expiry and (on a branded domain) the domain.
    let retargeted =
        new.url != old.url || new.expires_at != old.expires_at || new.domain != old.domain;
    tx.execute(
        "UPDATE links SET long_url = ?2, expires_at = ?3, tags = ?4, disabled_at = ?5, max_visits = ?6, \
         host_rev = ?7, dedup_key = CASE WHEN ?8 THEN NULL ELSE dedup_key END, password_hash = ?9, domain = ?10, routing = ?11 WHERE slot = ?1",
        params![
            slot,
            new.url,
            new.expires_at.map(millis),
            serde_json::to_string(&new.tags).unwrap_or_else(|_| "[]".into()),
            new.disabled_at.map(millis),
            new.max_visits.map(|n| n as i64),
            host_rev(&new.url),
            retargeted,
            new.password.as_ref().map(|p| p.as_stored()),
            new.domain,
            new.routes.to_stored()
        ],
    )
    .map_err(db_error)?;
    if new.tags != old.tags {
        tx.execute(
            "DELETE FROM link_tags WHERE tenant = ?1 AND code = ?2",
            params![old.tenant, code],
        )
        .map_err(db_error)?;
        for tag in &new.tags {
            tx.execute(
                "INSERT INTO link_tags (tenant, tag, created_at, code) VALUES (?1, ?2, ?3, ?4)",
                params![old.tenant, tag, millis(old.created_at), code],
            )
            .map_err(db_error)?;
        }
    }
    let at = millis(Utc::now());
    for (kind, change) in &events {
        tx.execute(
            "INSERT INTO link_events (code, at, key, kind, change) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![code, at, key, kind.name(), change.to_string()],
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
    tx.commit().map_err(db_error)?;
    Ok(UpdateOutcome::Updated(Box::new(new)))
}

/// The events recorded for `code` after its creation, oldest first.
/// The latest `limit` events of `code`, newest first.
pub(super) fn events(
    conn: &Connection,
    code: &str,
    limit: usize,
) -> Result<Vec<Event>, StoreError> {
    let mut select = conn
        .prepare_cached(
            "SELECT at, key, kind, change FROM link_events WHERE code = ?1 ORDER BY id DESC LIMIT ?2",
        )
        .map_err(db_error)?;
    let rows = select
        .query_map(rusqlite::params![code, limit as i64], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
            ))
        })
        .map_err(db_error)?;
    rows.map(|row| {
        let (at, key, kind, change) = row.map_err(db_error)?;
        Ok(Event {
            at: from_millis(at),
            key,
            kind: EventKind::parse(&kind)
                .ok_or_else(|| StoreError::Internal(format!("unknown event kind {kind:?}")))?,
            change: serde_json::from_str(&change)
                .map_err(|e| StoreError::Internal(format!("a stored event does not parse: {e}")))?,
        })
    })
    .collect()
}

/// The SELECT of `query` (without a limit), and its parameters.
fn select(query: &ListQuery) -> (String, Vec<Value>) {
    let mut values: Vec<Value> = Vec::new();
    let mut param = |v: Value| {
        values.push(v);
        format!("?{}", values.len())
    };
    let mut conditions: Vec<String> = Vec::new();
    let from = if let Some(tag) = &query.tag {
        let g = param(Value::Text(tag.clone()));
        match &query.tenant {
            Some(tenant) => {
                let t = param(Value::Text(tenant.clone()));
                conditions.push(format!("t.tenant = {t} AND t.tag = {g}"));
            }
            None => conditions.push(format!("t.tag = {g}")),
        }
        "link_tags t JOIN links l ON l.code = t.code AND l.tenant = t.tenant"
    } else {
        "links l"
    };
    let key = if query.tag.is_some() { "t" } else { "l" };
    if let Some(tenant) = &query.tenant {
        let t = param(Value::Text(tenant.clone()));
        conditions.push(format!("l.tenant = {t}"));
    }
    if let Some(Position { created_at, code }) = &query.after {
        let (at, c) = (
            param(Value::Integer(millis(*created_at))),
            param(Value::Text(code.clone())),
        );
        conditions.push(format!("({key}.created_at, {key}.code) < ({at}, {c})"));
    }
    let now = millis(query.now);
    match query.state {
        StateFilter::Active => conditions.push(format!(
            "l.deleted_at IS NULL AND l.disabled_at IS NULL AND (l.expires_at IS NULL OR l.expires_at > {now}) \
             AND NOT {USED_UP}"
        )),
        StateFilter::UsedUp => conditions.push(format!(
            "l.deleted_at IS NULL AND l.disabled_at IS NULL AND (l.expires_at IS NULL OR l.expires_at > {now}) \
             AND {USED_UP}"
        )),
        StateFilter::Expired => conditions.push(format!(
            "l.deleted_at IS NULL AND l.disabled_at IS NULL AND l.expires_at <= {now}"
        )),
        StateFilter::Disabled => conditions.push("l.deleted_at IS NULL AND l.disabled_at IS NOT NULL".into()),
        StateFilter::Deleted => conditions.push("l.deleted_at IS NOT NULL".into()),
        StateFilter::All => {}
    }
    if let Some(after) = query.created_after {
        let p = param(Value::Integer(millis(after)));
        conditions.push(format!("l.created_at >= {p}"));
    }
    if let Some(before) = query.created_before {
        // Rounded up: at millisecond precision, `< before` is `<` its next whole millisecond.
        let p = param(Value::Integer(millis_up(before)));
        conditions.push(format!("l.created_at < {p}"));
    }
    if let Some(host) = &query.host {
        let exact = param(Value::Text(host.reversed.clone()));
        if host.subdomains {
            // Labels are letters, digits and `-`: no LIKE wildcard can occur in them.
            let prefix = param(Value::Text(format!("{}.%", host.reversed)));
            conditions.push(format!(
                "(l.host_rev = {exact} OR l.host_rev LIKE {prefix})"
            ));
        } else {
            conditions.push(format!("l.host_rev = {exact}"));
        }
    }
    match &query.domain {
        None => {}
        Some(DomainFilter::Default) => conditions.push("l.domain IS NULL".into()),
        Some(DomainFilter::Host(host)) => {
            let p = param(Value::Text(host.clone()));
            conditions.push(format!("l.domain = {p}"));
        }
    }
    let columns: Vec<String> = COLUMNS.split(", ").map(|c| format!("l.{c}")).collect();
    let condition = if conditions.is_empty() {
        "1".to_string()
    } else {
        conditions.join(" AND ")
    };
    (
        format!(
            "SELECT {}, c.human, c.head, c.bot FROM {from} LEFT JOIN link_clicks c ON c.code = l.code \
             WHERE {condition} ORDER BY {key}.created_at DESC, {key}.code DESC",
            columns.join(", ")
        ),
        values,
    )
}

/// Whether a listed link (`l`, its click counts `c`) is past its visit limit.
const USED_UP: &str = "(l.max_visits IS NOT NULL AND coalesce(c.human, 0) >= l.max_visits)";

/// One page of `query`.
pub(super) fn list(conn: &Connection, query: &ListQuery) -> Result<Page, StoreError> {
    let (sql, values) = select(query);
    let Some(q) = &query.q else {
        let sql = format!("{sql} LIMIT {}", query.limit + 1);
        let mut statement = conn.prepare(&sql).map_err(db_error)?;
        let mut links: Vec<Link> = statement
            .query_map(params_from_iter(values), link_with_clicks)
            .map_err(db_error)?
            .collect::<Result<_, _>>()
            .map_err(db_error)?;
        let next = (links.len() > query.limit).then(|| {
            links.truncate(query.limit);
            Position::of(&links[query.limit - 1])
        });
        return Ok(Page { links, next });
    };
    let sql = format!("{sql} LIMIT {SCAN_LIMIT}");
    let mut statement = conn.prepare(&sql).map_err(db_error)?;
    let mut rows = statement
        .query(params_from_iter(values))
        .map_err(db_error)?;
    let (mut links, mut examined, mut last) = (Vec::new(), 0, None);
    while let Some(row) = rows.next().map_err(db_error)? {
        let link = link_with_clicks(row).map_err(db_error)?;
        examined += 1;
        if link.url.contains(q.as_str()) {
            if links.len() == query.limit {
                // One more match exists: the page is full and there is a next one.
                return Ok(Page {
                    next: links.last().map(Position::of),
                    links,
                });
            }
            links.push(link.clone());
        }
        last = Some(Position::of(&link));
    }
    // The scan bound was reached before the page filled: continue after the last link examined.
    let next = if examined == SCAN_LIMIT { last } else { None };
    Ok(Page { links, next })
}

/// The links (with click counts) holding any of `codes`.
pub(super) fn get_many(
    conn: &Connection,
    space: &CodeSpace,
    codes: &[String],
) -> Result<Vec<Link>, StoreError> {
    let mut found = Vec::new();
    for code in codes {
        if let Some(link) = super::rows::get_with_clicks(conn, space, code)? {
            found.push(link);
        }
    }
    Ok(found)
}

/// Marks `code` deleted (if `tenant`'s, or any tenant's for `None`) and records it, in one
/// immediate transaction.
pub(super) fn delete(
    conn: &mut Connection,
    space: &CodeSpace,
    code: &str,
    tenant: Option<&str>,
    key: &str,
    trace: Option<&str>,
) -> Result<DeleteOutcome, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    let Some(slot) = find_slot(&tx, space, code)? else {
        return Ok(DeleteOutcome::NotFound);
    };
    let owner: String = tx
        .query_row("SELECT tenant FROM links WHERE slot = ?1", [slot], |r| {
            r.get(0)
        })
        .map_err(db_error)?;
    if tenant.is_some_and(|t| t != owner) {
        return Ok(DeleteOutcome::NotFound);
    }
    let updated = tx
        .execute(
            // The link keeps its dedup key: a rerun of the import that made it finds it
            // deleted rather than make it again; a dedup create releases it first.
            "UPDATE links SET deleted_at = ?2 WHERE slot = ?1 AND deleted_at IS NULL",
            params![slot, millis(Utc::now())],
        )
        .map_err(db_error)?;
    if updated == 0 {
        return Ok(DeleteOutcome::AlreadyDeleted);
    }
    tx.execute(
        r#"INSERT INTO link_events (code, at, key, kind, change) VALUES (?1, ?2, ?3, 'delete', '{"deleted": {"old": false, "new": true}}')"#,
        params![code, millis(Utc::now()), key],
    )
    .map_err(db_error)?;
    if let Some(link) = super::rows::get_link(&tx, space, code)? {
        super::webhooks::record(
            &tx,
            &link.tenant,
            crate::store::webhooks::LINK_DELETED,
            || crate::store::webhooks::link_data(&link),
            trace,
        )?;
    }
    tx.commit().map_err(db_error)?;
    Ok(DeleteOutcome::Deleted)
}

/// The migration that adds `host_rev`, which [`fill_host_rev`] then fills for the rows that
/// existed before it (SQLite has no function to reverse a host's labels).
pub(super) const HOST_REV_VERSION: i64 = 6;

/// Fills `host_rev` for every row (run once, in the migration's transaction).
pub(super) fn fill_host_rev(tx: &Connection) -> Result<(), StoreError> {
    let mut select = tx
        .prepare("SELECT slot, long_url FROM links")
        .map_err(db_error)?;
    let mut update = tx
        .prepare("UPDATE links SET host_rev = ?2 WHERE slot = ?1")
        .map_err(db_error)?;
    let mut rows = select.query([]).map_err(db_error)?;
    while let Some(row) = rows.next().map_err(db_error)? {
        let (slot, url): (i64, String) =
            (row.get(0).map_err(db_error)?, row.get(1).map_err(db_error)?);
        update
            .execute(params![slot, host_rev(&url)])
            .map_err(db_error)?;
    }
    Ok(())
}

/// `at` in milliseconds since the epoch, rounded up to the next whole one.
fn millis_up(at: chrono::DateTime<Utc>) -> i64 {
    let floor = millis(at);
    if at.timestamp_subsec_nanos().is_multiple_of(1_000_000) {
        floor
    } else {
        floor + 1
    }
}
