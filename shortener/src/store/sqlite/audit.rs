//! The audit log on SQLite: appended on the writer thread in one transaction per batch (made
//! durable like every write), read by keyset (newest first), purged in bounded runs.

use super::convert::{db_error, from_millis, millis};
use crate::store::{AuditEntry, AuditFilter, NewAuditEntry, StoreError};
use chrono::{DateTime, Utc};
use codespace::CodeSpace;
use rusqlite::{Connection, Row, params};

fn entry(row: &Row<'_>) -> rusqlite::Result<AuditEntry> {
    let change: String = row.get(11)?;
    Ok(AuditEntry {
        id: row.get(0)?,
        at: from_millis(row.get(1)?),
        entry: NewAuditEntry {
            tenant: row.get(2)?,
            actor_tenant: row.get(3)?,
            actor_key: row.get(4)?,
            actor_subject: row.get(5)?,
            actor_email: row.get(6)?,
            address: row.get(7)?,
            action: row.get(8)?,
            object_kind: row.get(9)?,
            object_id: row.get(10)?,
            change: serde_json::from_str(&change).unwrap_or(serde_json::Value::Null),
        },
    })
}

pub(super) fn append(
    conn: &mut Connection,
    space: &CodeSpace,
    entries: &[NewAuditEntry],
) -> Result<(), StoreError> {
    let tx = conn.transaction().map_err(db_error)?;
    let at = millis(Utc::now());
    for entry in entries {
        append_one(&tx, entry, at, entry_slot(space, entry, None))?;
    }
    tx.commit().map_err(db_error)
}

/// The ID a link's code decodes to under `space`, which finds the entries of that link
/// (migration 31): `None` for other objects (`kind` given and not a link's) and for codes that
/// do not decode.
fn link_slot(space: &CodeSpace, kind: Option<&str>, object_id: &str) -> Option<i64> {
    if kind.is_some_and(|k| k != LINK) {
        return None;
    }
    super::rows::slot(space, object_id)
}

/// [`link_slot`] of `entry`; `known` is a code and what it decodes to that the caller has
/// already worked out (a create's own), used when it is the entry's object.
pub(super) fn entry_slot(
    space: &CodeSpace,
    entry: &NewAuditEntry,
    known: Option<(&str, Option<i64>)>,
) -> Option<i64> {
    match known {
        Some((code, slot)) if entry.object_kind == LINK && entry.object_id == code => slot,
        _ => link_slot(space, Some(&entry.object_kind), &entry.object_id),
    }
}

/// The object kind of a link's entries.
const LINK: &str = "link";

/// Appends `entry`, written at `at` (milliseconds), in the caller's transaction: what a create
/// does with its own entry ([`crate::store::NewLink::audit`]). A link's entry carries the ID
/// its code decodes to (`slot`, from [`entry_slot`]), so that a new link's entry goes at the
/// end of the index that finds it.
pub(super) fn append_one(
    conn: &Connection,
    entry: &NewAuditEntry,
    at: i64,
    slot: Option<i64>,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO audit_log (at, tenant, actor_tenant, actor_key, actor_subject, \
         actor_email, address, action, object_kind, object_id, change, object_slot) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )
    .and_then(|mut insert| {
        insert.execute(params![
            at,
            entry.tenant,
            entry.actor_tenant,
            entry.actor_key,
            entry.actor_subject,
            entry.actor_email,
            entry.address,
            entry.action,
            entry.object_kind,
            entry.object_id,
            entry.change.to_string(),
            slot
        ])
    })
    .map(|_| ())
    .map_err(db_error)
}

/// The conditions `f` sets and their parameters, numbered from `?1`: only the filters given,
/// so each query is planned for what it asks (an index on the tenant, the object or the time).
/// An object whose ID decodes is looked for by that ID and, for entries written before
/// migration 31, by its text; each is one of the two partial indexes by object.
fn conditions(space: &CodeSpace, f: &AuditFilter) -> (String, Vec<rusqlite::types::Value>) {
    use rusqlite::types::Value;
    let mut sql = Vec::new();
    let mut params = Vec::new();
    let mut add = |condition: &str, value: Value| {
        params.push(value);
        sql.push(condition.replace('?', &format!("?{}", params.len())));
    };
    let text = |v: &String| Value::Text(v.clone());
    // With an object given, its index is the one to use: `+` keeps the planner off the
    // tenant's and the time's (without statistics it takes the tenant's, and walks all of its
    // entries to find one link's few).
    let by_object = f.object_id.is_some();
    if let Some(v) = &f.tenant {
        add(
            if by_object {
                "+tenant = ?"
            } else {
                "tenant = ?"
            },
            text(v),
        );
    }
    if let Some(v) = &f.action {
        add("action = ?", text(v));
    }
    if let Some(v) = &f.object_kind {
        add("object_kind = ?", text(v));
    }
    if let Some(v) = &f.actor {
        add(
            "(actor_key = ? OR actor_subject = ? OR actor_email = ?)",
            text(v),
        );
    }
    if let Some(v) = f.since {
        add(
            if by_object { "+at >= ?" } else { "at >= ?" },
            Value::Integer(millis(v)),
        );
    }
    if let Some(v) = f.until {
        add(
            if by_object { "+at < ?" } else { "at < ?" },
            Value::Integer(millis(v)),
        );
    }
    if let Some(v) = f.before_id {
        add("id < ?", Value::Integer(v));
    }
    // Last: the two parameters of a decoding object are numbered here, past `add`'s.
    if let Some(v) = &f.object_id {
        match link_slot(space, f.object_kind.as_deref(), v) {
            Some(slot) => {
                params.push(Value::Integer(slot));
                params.push(text(v));
                let (s, o) = (params.len() - 1, params.len());
                sql.push(format!(
                    "((object_slot = ?{s} AND object_id = ?{o}) OR (object_slot IS NULL AND object_id = ?{o}))"
                ));
            }
            None => {
                params.push(text(v));
                sql.push(format!(
                    "object_slot IS NULL AND object_id = ?{}",
                    params.len()
                ));
            }
        }
    }
    let clause = if sql.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", sql.join(" AND "))
    };
    (clause, params)
}

/// The read of a page: the entries `clause` keeps, newest first, at most parameter `?{limit}`.
fn select(clause: &str, limit: usize) -> String {
    format!(
        "SELECT id, at, tenant, actor_tenant, actor_key, actor_subject, actor_email, address, \
         action, object_kind, object_id, change FROM audit_log {clause} \
         ORDER BY id DESC LIMIT ?{limit}"
    )
}

pub(super) fn entries(
    conn: &Connection,
    space: &CodeSpace,
    f: &AuditFilter,
    limit: usize,
) -> Result<Vec<AuditEntry>, StoreError> {
    let (clause, mut params) = conditions(space, f);
    params.push(rusqlite::types::Value::Integer(
        i64::try_from(limit).unwrap_or(i64::MAX),
    ));
    let sql = select(&clause, params.len());
    let mut select = conn.prepare_cached(&sql).map_err(db_error)?;
    let rows = select
        .query_map(rusqlite::params_from_iter(params), entry)
        .map_err(db_error)?;
    rows.collect::<Result<_, _>>().map_err(db_error)
}

pub(super) fn purge(
    conn: &Connection,
    before: DateTime<Utc>,
    limit: usize,
) -> Result<usize, StoreError> {
    conn.execute(
        "DELETE FROM audit_log WHERE id IN \
         (SELECT id FROM audit_log WHERE at < ?1 ORDER BY at LIMIT ?2)",
        params![millis(before), i64::try_from(limit).unwrap_or(i64::MAX)],
    )
    .map_err(db_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    /// What SQLite plans for the statement [`entries`] runs with `f`: each step's detail.
    fn plan(conn: &Connection, space: &CodeSpace, f: &AuditFilter) -> Vec<String> {
        let (clause, mut params) = conditions(space, f);
        params.push(rusqlite::types::Value::Integer(50));
        let sql = format!("EXPLAIN QUERY PLAN {}", select(&clause, params.len()));
        let mut explain = conn.prepare(&sql).expect("explain");
        explain
            .query_map(rusqlite::params_from_iter(params), |r| {
                r.get::<_, String>(3)
            })
            .expect("plan")
            .collect::<Result<_, _>>()
            .expect("plan rows")
    }

    /// A read by object searches the object's index (both partial ones for a link whose code
    /// decodes), never the tenant's or the time's, and never scans the table: without
    /// statistics SQLite would take the tenant's and walk all of its entries for one link's.
    #[test]
    fn a_read_by_object_uses_the_objects_index() {
        let conn = Connection::open_in_memory().expect("open");
        for sql in [
            include_str!("../../../migrations/sqlite/0022_audit_log.sql"),
            include_str!("../../../migrations/sqlite/0031_audit_link_slots.sql"),
        ] {
            conn.execute_batch(sql).expect("schema");
        }
        let space = CodeSpace::new(&codespace::CodeKey::generate(), codespace::DEFAULT_LENGTH)
            .expect("space");
        let code = space.encode(42);
        let filter = |object: &str, tenant: bool, since: bool, kind: Option<&str>| AuditFilter {
            object_id: Some(object.into()),
            object_kind: kind.map(str::to_string),
            tenant: tenant.then(|| "acme".to_string()),
            since: since.then(|| Utc::now() - Duration::days(1)),
            before_id: Some(1000),
            ..AuditFilter::default()
        };
        let cases = [
            (filter(&code, false, false, None), true),
            (filter(&code, true, false, None), true),
            (filter(&code, true, true, Some(LINK)), true),
            (filter("spring-sale", true, true, None), false),
            (filter(&code, true, false, Some("host")), false),
        ];
        for (f, decodes) in cases {
            let steps = plan(&conn, &space, &f);
            let shown = format!("{f:?}: {steps:?}");
            assert!(steps.iter().all(|s| !s.starts_with("SCAN")), "{shown}");
            assert!(
                steps.iter().all(|s| !s.contains("audit_log_tenant")),
                "{shown}"
            );
            assert!(steps.iter().all(|s| !s.contains("audit_log_at")), "{shown}");
            assert!(
                steps.iter().any(|s| s.contains("INDEX audit_log_object")),
                "{shown}"
            );
            assert_eq!(
                steps.iter().any(|s| s.contains("INDEX audit_log_slot")),
                decodes,
                "{shown}"
            );
        }
    }
}
