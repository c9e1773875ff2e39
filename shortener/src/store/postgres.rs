//! The PostgreSQL backend (deadpool-postgres over tokio-postgres).

use super::migrate::{ADVISORY_LOCK, POSTGRES, VERSION_TABLE};
use super::{DeleteOutcome, InsertOutcome, NewLink, StoreError};
use crate::domain::{ClickCounts, Link};
use deadpool_postgres::{GenericClient, Pool, PoolError, Runtime, Timeouts};
use std::time::Duration;
use tokio_postgres::{NoTls, Row};

/// Links in PostgreSQL. Cheap to clone (a pool handle).
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
}

const LINK_COLUMNS: &str = "code, long_url, created_at, expires_at, deleted_at";

fn link_from_row(row: &Row) -> Link {
    Link {
        code: row.get(0),
        url: row.get(1),
        created_at: row.get(2),
        expires_at: row.get(3),
        deleted_at: row.get(4),
        clicks: ClickCounts::default(),
    }
}

fn db_error(e: tokio_postgres::Error) -> StoreError {
    // Connection-level failures are transient; anything with a SQLSTATE is a real error.
    if e.code().is_none() || e.is_closed() {
        StoreError::Unavailable(e.to_string())
    } else {
        StoreError::Internal(e.to_string())
    }
}

fn pool_error(e: PoolError) -> StoreError {
    match e {
        PoolError::Backend(e) => db_error(e),
        other => StoreError::Unavailable(other.to_string()),
    }
}

impl PgStore {
    /// Connects a pool of up to `max_connections` to `url`. Connecting is lazy: this succeeds
    /// while the database is down, and calls fail fast (within `timeout`) until it is back.
    pub fn connect(
        url: &str,
        max_connections: usize,
        timeout: Duration,
    ) -> Result<Self, StoreError> {
        let config = deadpool_postgres::Config {
            url: Some(url.to_string()),
            pool: Some(deadpool_postgres::PoolConfig {
                max_size: max_connections,
                timeouts: Timeouts {
                    wait: Some(timeout),
                    create: Some(timeout),
                    recycle: Some(timeout),
                },
                ..Default::default()
            }),
            ..Default::default()
        };
        let pool = config
            .create_pool(Some(Runtime::Tokio1), NoTls)
            .map_err(|e| StoreError::Internal(format!("configure the PostgreSQL pool: {e}")))?;
        Ok(Self { pool })
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(pool_error)
    }

    /// Applies pending migrations under an advisory lock; returns how many ran.
    pub async fn migrate(&self) -> Result<usize, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&ADVISORY_LOCK])
            .await
            .map_err(db_error)?;
        tx.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version bigint PRIMARY KEY, name text NOT NULL, \
             applied_at timestamptz NOT NULL DEFAULT now())"
        ))
        .await
        .map_err(db_error)?;
        let applied: Vec<i64> = tx
            .query(&format!("SELECT version FROM {VERSION_TABLE}"), &[])
            .await
            .map_err(db_error)?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let mut ran = 0;
        for m in POSTGRES.iter().filter(|m| !applied.contains(&m.version)) {
            tx.batch_execute(m.sql).await.map_err(db_error)?;
            tx.execute(
                &format!("INSERT INTO {VERSION_TABLE} (version, name) VALUES ($1, $2)"),
                &[&m.version, &m.name],
            )
            .await
            .map_err(db_error)?;
            ran += 1;
        }
        tx.commit().await.map_err(db_error)?;
        Ok(ran)
    }

    pub(super) async fn insert(&self, link: NewLink) -> Result<InsertOutcome, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // Acknowledge only what is durable, whatever the server's default.
        tx.batch_execute("SET LOCAL synchronous_commit = on")
            .await
            .map_err(db_error)?;
        if let Some(idem) = &link.idempotency {
            let claimed = tx
                .query_opt(
                    "INSERT INTO idempotency_keys (owner, key, fingerprint, code) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT DO NOTHING RETURNING 1",
                    &[&link.owner, &idem.key, &idem.fingerprint, &link.code],
                )
                .await
                .map_err(db_error)?;
            if claimed.is_none() {
                tx.rollback().await.map_err(db_error)?;
                return self.replay(&link.owner, &idem.key, &idem.fingerprint).await;
            }
        }
        let id = link.id.map(|id| id as i64);
        let inserted = tx
            .query_opt(
                &format!(
                    "INSERT INTO links (code, long_url, kind, id, expires_at, owner, dedup_key) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING {LINK_COLUMNS}"
                ),
                &[&link.code, &link.url, &link.kind.as_str(), &id, &link.expires_at, &link.owner, &link.dedup_key],
            )
            .await
            .map_err(db_error)?;
        if let Some(row) = inserted {
            tx.commit().await.map_err(db_error)?;
            return Ok(InsertOutcome::Created(link_from_row(&row)));
        }
        // Nothing inserted: a dedup twin (possibly committed a moment ago by a concurrent
        // request) or a taken code.
        if let Some(dedup_key) = &link.dedup_key {
            let twin = tx
                .query_opt(
                    &format!("SELECT {LINK_COLUMNS} FROM links WHERE dedup_key = $1"),
                    &[dedup_key],
                )
                .await
                .map_err(db_error)?;
            if let Some(row) = twin {
                let twin = link_from_row(&row);
                if let Some(idem) = &link.idempotency {
                    tx.execute(
                        "UPDATE idempotency_keys SET code = $3 WHERE owner = $1 AND key = $2",
                        &[&link.owner, &idem.key, &twin.code],
                    )
                    .await
                    .map_err(db_error)?;
                }
                tx.commit().await.map_err(db_error)?;
                return Ok(InsertOutcome::Deduplicated(twin));
            }
        }
        tx.rollback().await.map_err(db_error)?;
        Ok(InsertOutcome::CodeTaken)
    }

    async fn replay(
        &self,
        owner: &str,
        key: &str,
        fingerprint: &[u8],
    ) -> Result<InsertOutcome, StoreError> {
        match self.find_idempotent(owner, key).await? {
            Some((stored, link)) if stored == fingerprint => Ok(InsertOutcome::Replayed(link)),
            Some(_) => Ok(InsertOutcome::IdempotencyMismatch),
            None => Err(StoreError::Internal(format!(
                "idempotency key {key:?} vanished"
            ))),
        }
    }

    pub(super) async fn get(&self, code: &str) -> Result<Option<Link>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                &format!("SELECT {LINK_COLUMNS} FROM links WHERE code = $1"),
                &[&code],
            )
            .await
            .map_err(db_error)?;
        Ok(row.as_ref().map(link_from_row))
    }

    pub(super) async fn find_dedup(&self, dedup_key: &[u8]) -> Result<Option<Link>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                &format!("SELECT {LINK_COLUMNS} FROM links WHERE dedup_key = $1"),
                &[&dedup_key],
            )
            .await
            .map_err(db_error)?;
        Ok(row.as_ref().map(link_from_row))
    }

    pub(super) async fn find_idempotent(
        &self,
        owner: &str,
        key: &str,
    ) -> Result<Option<(Vec<u8>, Link)>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT i.fingerprint, l.code, l.long_url, l.created_at, l.expires_at, l.deleted_at \
                 FROM idempotency_keys i JOIN links l ON l.code = i.code WHERE i.owner = $1 AND i.key = $2",
                &[&owner, &key],
            )
            .await
            .map_err(db_error)?;
        Ok(row.map(|r| {
            let link = Link {
                code: r.get(1),
                url: r.get(2),
                created_at: r.get(3),
                expires_at: r.get(4),
                deleted_at: r.get(5),
                clicks: ClickCounts::default(),
            };
            (r.get(0), link)
        }))
    }

    pub(super) async fn delete(&self, code: &str) -> Result<DeleteOutcome, StoreError> {
        let client = self.client().await?;
        let updated = client
            .execute(
                "UPDATE links SET deleted_at = now(), dedup_key = NULL WHERE code = $1 AND deleted_at IS NULL",
                &[&code],
            )
            .await
            .map_err(db_error)?;
        if updated == 1 {
            return Ok(DeleteOutcome::Deleted);
        }
        let exists = client
            .query_opt("SELECT 1 FROM links WHERE code = $1", &[&code])
            .await
            .map_err(db_error)?;
        Ok(if exists.is_some() {
            DeleteOutcome::AlreadyDeleted
        } else {
            DeleteOutcome::NotFound
        })
    }

    pub(super) async fn ping(&self) -> Result<(), StoreError> {
        let client = self.client().await?;
        client.simple_query("SELECT 1").await.map_err(db_error)?;
        Ok(())
    }

    pub(super) async fn count_links(&self) -> Result<u64, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_one("SELECT count(*) FROM links", &[])
            .await
            .map_err(db_error)?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    pub(super) async fn count_generated(&self) -> Result<u64, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_one("SELECT count(*) FROM links WHERE kind = 'generated'", &[])
            .await
            .map_err(db_error)?;
        Ok(row.get::<_, i64>(0) as u64)
    }
}
