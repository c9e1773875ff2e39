//! The audit log on PostgreSQL: appended on the primary in one statement per batch, read by
//! keyset (newest first) with every filter a parameter that may be null, purged in bounded runs.

use super::error::db_error;
use super::send::Conn;
use crate::store::{AuditEntry, AuditFilter, NewAuditEntry, StoreError};
use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

fn entry(row: &Row) -> AuditEntry {
    AuditEntry {
        id: row.get(0),
        at: row.get(1),
        entry: NewAuditEntry {
            tenant: row.get(2),
            actor_tenant: row.get(3),
            actor_key: row.get(4),
            actor_subject: row.get(5),
            actor_email: row.get(6),
            address: row.get(7),
            action: row.get(8),
            object_kind: row.get(9),
            object_id: row.get(10),
            change: row.get(11),
        },
    }
}

pub(super) async fn append(client: &Conn, entries: &[NewAuditEntry]) -> Result<(), StoreError> {
    let column = |f: fn(&NewAuditEntry) -> Option<&str>| -> Vec<Option<&str>> {
        entries.iter().map(f).collect()
    };
    let changes: Vec<&serde_json::Value> = entries.iter().map(|e| &e.change).collect();
    client
        .execute(
            "INSERT INTO audit_log (tenant, actor_tenant, actor_key, actor_subject, actor_email, \
             address, action, object_kind, object_id, change) \
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], \
             $6::text[], $7::text[], $8::text[], $9::text[], $10::jsonb[])",
            &[
                &column(|e| Some(&e.tenant)),
                &column(|e| Some(&e.actor_tenant)),
                &column(|e| Some(&e.actor_key)),
                &column(|e| e.actor_subject.as_deref()),
                &column(|e| e.actor_email.as_deref()),
                &column(|e| e.address.as_deref()),
                &column(|e| Some(&e.action)),
                &column(|e| Some(&e.object_kind)),
                &column(|e| Some(&e.object_id)),
                &changes,
            ],
        )
        .await
        .map(|_| ())
        .map_err(db_error)
}

/// The conditions `f` sets and their parameters, numbered from `$1`: only the filters given,
/// so each query is planned for what it asks (an index on the tenant, the object or the time).
fn conditions<'a>(f: &'a AuditFilter) -> (String, Vec<&'a (dyn ToSql + Sync)>) {
    let mut sql = Vec::new();
    let mut params: Vec<&'a (dyn ToSql + Sync)> = Vec::new();
    let mut add = |condition: &str, value: &'a (dyn ToSql + Sync)| {
        params.push(value);
        sql.push(condition.replace('?', &format!("${}", params.len())));
    };
    if let Some(v) = &f.tenant {
        add("tenant = ?", v);
    }
    if let Some(v) = &f.action {
        add("action = ?", v);
    }
    if let Some(v) = &f.object_kind {
        add("object_kind = ?", v);
    }
    if let Some(v) = &f.object_id {
        add("object_id = ?", v);
    }
    if let Some(v) = &f.actor {
        add("(actor_key = ? OR actor_subject = ? OR actor_email = ?)", v);
    }
    if let Some(v) = &f.since {
        add("at >= ?", v);
    }
    if let Some(v) = &f.until {
        add("at < ?", v);
    }
    if let Some(v) = &f.before_id {
        add("id < ?", v);
    }
    let clause = if sql.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", sql.join(" AND "))
    };
    (clause, params)
}

pub(super) async fn entries(
    client: &Conn,
    f: &AuditFilter,
    limit: usize,
) -> Result<Vec<AuditEntry>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let (clause, mut params) = conditions(f);
    params.push(&limit);
    let sql = format!(
        "SELECT id, at, tenant, actor_tenant, actor_key, actor_subject, actor_email, address, \
         action, object_kind, object_id, change FROM audit_log {clause} \
         ORDER BY id DESC LIMIT ${}",
        params.len()
    );
    let rows = client.query(&sql, &params).await.map_err(db_error)?;
    Ok(rows.iter().map(entry).collect())
}

pub(super) async fn purge(
    client: &Conn,
    before: DateTime<Utc>,
    limit: usize,
) -> Result<usize, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    client
        .execute(
            "DELETE FROM audit_log WHERE id IN \
             (SELECT id FROM audit_log WHERE at < $1 ORDER BY at LIMIT $2)",
            &[&before, &limit],
        )
        .await
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        .map_err(db_error)
}
