//! The audit log on PostgreSQL: appended on the primary in one statement per batch, read by
//! keyset (newest first) with every filter a parameter that may be null, purged in bounded runs.

use super::error::db_error;
use crate::store::{AuditEntry, AuditFilter, NewAuditEntry, StoreError};
use chrono::{DateTime, Utc};
use tokio_postgres::Row;

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

pub(super) async fn append(
    client: &tokio_postgres::Client,
    entries: &[NewAuditEntry],
) -> Result<(), StoreError> {
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

pub(super) async fn entries(
    client: &tokio_postgres::Client,
    f: &AuditFilter,
    limit: usize,
) -> Result<Vec<AuditEntry>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = client
        .query(
            "SELECT id, at, tenant, actor_tenant, actor_key, actor_subject, actor_email, address, \
             action, object_kind, object_id, change FROM audit_log \
             WHERE ($1::text IS NULL OR tenant = $1) AND ($2::text IS NULL OR action = $2) \
             AND ($3::text IS NULL OR object_kind = $3) AND ($4::text IS NULL OR object_id = $4) \
             AND ($5::text IS NULL OR actor_key = $5 OR actor_subject = $5 OR actor_email = $5) \
             AND ($6::timestamptz IS NULL OR at >= $6) AND ($7::timestamptz IS NULL OR at < $7) \
             AND ($8::bigint IS NULL OR id < $8) \
             ORDER BY id DESC LIMIT $9",
            &[
                &f.tenant,
                &f.action,
                &f.object_kind,
                &f.object_id,
                &f.actor,
                &f.since,
                &f.until,
                &f.before_id,
                &limit,
            ],
        )
        .await
        .map_err(db_error)?;
    Ok(rows.iter().map(entry).collect())
}

pub(super) async fn purge(
    client: &tokio_postgres::Client,
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
