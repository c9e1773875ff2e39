//! Versioned schema migrations, safe to run from several replicas at once.
//!
//! Every replica applies pending migrations at start-up (and `id-service migrate` does only
//! that). All of them run in one transaction that first takes a PostgreSQL advisory lock, so
//! concurrent replicas queue up: the first applies, the others find nothing left to do.

use tokio_postgres::Client;

/// One schema change, applied once, in version order.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Ascending version number; recorded in `id_schema_migrations`.
    pub version: i32,
    /// A short name for logs.
    pub name: &'static str,
    /// The SQL to run.
    pub sql: &'static str,
}

/// Every migration this build knows, oldest first.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "ledger",
        sql: include_str!("../migrations/0001_ledger.sql"),
    },
    Migration {
        version: 2,
        name: "namespaces_timeline",
        sql: include_str!("../migrations/0002_namespaces_timeline.sql"),
    },
    Migration {
        version: 3,
        name: "caller_quotas",
        sql: include_str!("../migrations/0003_caller_quotas.sql"),
    },
];

/// The advisory lock key that serialises migrations ("idsvc" + 1).
const MIGRATION_LOCK: i64 = 0x6964_7376_6300_0001;

/// Applies every pending migration; returns the versions applied by this call.
pub async fn apply(client: &mut Client) -> Result<Vec<i32>, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    // Waiting for another replica's migrations, and a long migration, must not be cut short by
    // a statement_timeout set on the role or the database (with a transaction-mode pooler the
    // serving pool's bound lives there; docs/operations.md, "PgBouncer and HAProxy").
    tx.batch_execute("SET LOCAL statement_timeout = 0").await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS id_schema_migrations (
             version    integer PRIMARY KEY,
             name       text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )
    .await?;
    let applied: Vec<i32> = tx
        .query("SELECT version FROM id_schema_migrations", &[])
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let known_max = MIGRATIONS.iter().map(|m| m.version).max().unwrap_or(0);
    if let Some(newer) = applied.iter().filter(|v| **v > known_max).max() {
        // A newer replica migrated already (a rolling upgrade): migrations only add, so this
        // build can keep serving.
        tracing::warn!(
            database_version = newer,
            known_version = known_max,
            "the database schema is newer than this build"
        );
    }
    let mut done = Vec::new();
    for migration in MIGRATIONS {
        if applied.contains(&migration.version) {
            continue;
        }
        tx.batch_execute(migration.sql).await?;
        tx.execute(
            "INSERT INTO id_schema_migrations (version, name) VALUES ($1, $2)",
            &[&migration.version, &migration.name],
        )
        .await?;
        tracing::info!(
            version = migration.version,
            name = migration.name,
            "applied migration"
        );
        done.push(migration.version);
    }
    tx.commit().await?;
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_ascend_without_gaps() {
        for (i, migration) in MIGRATIONS.iter().enumerate() {
            assert_eq!(migration.version, i as i32 + 1, "{}", migration.name);
        }
    }
}
