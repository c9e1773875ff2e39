//! The PostgreSQL backend (deadpool-postgres over tokio-postgres).

use super::migrate::{ADVISORY_LOCK, POSTGRES, VERSION_TABLE};
use super::{DeleteOutcome, InsertOutcome, NewLink, StoreError};
use crate::code_map_key::CodeMapKey;
use crate::domain::{ClickCounts, Link};
use deadpool_postgres::{GenericClient, Pool, PoolError, Runtime, Timeouts};
use pgtls::MakeRustlsConnect;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::Row;
use tokio_util::sync::CancellationToken;

/// Links in PostgreSQL. Cheap to clone (a pool handle).
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    /// How the change listener connects: the pool's settings and TLS.
    config: Arc<tokio_postgres::Config>,
    tls: MakeRustlsConnect,
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

/// The channel deletes are announced on.
pub const NOTIFY_CHANNEL: &str = "shortener_link_changes";

/// What the change listener reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenEvent {
    /// This code changed (deleted or disabled).
    Changed(String),
    /// Changes may have been missed: forget everything cached.
    Reset,
}

async fn listen_once(
    config: &tokio_postgres::Config,
    tls: &MakeRustlsConnect,
    on_event: &impl Fn(ListenEvent),
    stop: &CancellationToken,
) -> Result<(), tokio_postgres::Error> {
    use futures::StreamExt;
    let (client, mut connection) = config.connect(tls.clone()).await?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                    if tx.send(Some(n.payload().to_string())).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, "link change listener connection failed");
                    break;
                }
            }
        }
        let _ = tx.send(None);
    });
    client
        .batch_execute(&format!("LISTEN {NOTIFY_CHANNEL}"))
        .await?;
    // Anything that changed before LISTEN took effect is unknown to us.
    on_event(ListenEvent::Reset);
    loop {
        tokio::select! {
            message = rx.recv() => match message {
                Some(Some(code)) => on_event(ListenEvent::Changed(code)),
                _ => break,
            },
            () = stop.cancelled() => break,
        }
    }
    driver.abort();
    Ok(())
}

fn replay(
    found: Option<(Vec<u8>, Link)>,
    key: &str,
    fingerprint: &[u8],
) -> Result<InsertOutcome, StoreError> {
    match found {
        Some((stored, link)) if stored == fingerprint => Ok(InsertOutcome::Replayed(link)),
        Some(_) => Ok(InsertOutcome::IdempotencyMismatch),
        None => Err(StoreError::Internal(format!(
            "idempotency key {key:?} vanished"
        ))),
    }
}

async fn find_idempotent_on(
    client: &tokio_postgres::Client,
    owner: &str,
    key: &str,
) -> Result<Option<(Vec<u8>, Link)>, StoreError> {
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

fn db_error(e: tokio_postgres::Error) -> StoreError {
    use tokio_postgres::error::SqlState;
    // The library's text omits the server's message and the cause (a refused connection, an
    // untrusted certificate); keep them for the logs.
    let text = match e.as_db_error() {
        Some(db) => format!("{} ({}): {}", e, db.code().code(), db.message()),
        None => {
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                text.push_str(&format!(": {c}"));
                cause = c.source();
            }
            text
        }
    };
    let code = e.code().map(SqlState::code).unwrap_or("");
    if e.code() == Some(&SqlState::T_R_DEADLOCK_DETECTED)
        || e.code() == Some(&SqlState::T_R_SERIALIZATION_FAILURE)
    {
        // The statement rolled back and can run again at once.
        StoreError::Retry(text)
    } else if e.code().is_none()
        || e.is_closed()
        // connection exceptions, insufficient resources, operator intervention (shutdown, crash
        // recovery, cannot connect now), query cancelled: the database is (for now) not there.
        || code.starts_with("08")
        || code.starts_with("53")
        || code.starts_with("57")
    {
        StoreError::Unavailable(text)
    } else {
        StoreError::Internal(text)
    }
}

/// For a failure after a write was sent: if the connection went away, the commit may or may not
/// have happened.
fn after_write(error: StoreError) -> StoreError {
    match error {
        StoreError::Unavailable(message) => StoreError::Ambiguous(message),
        other => other,
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
    /// TLS follows the URL's `sslmode`; `ca_file` adds trusted roots (see [`pgtls::connector`]).
    pub fn connect(
        url: &str,
        ca_file: Option<&Path>,
        max_connections: usize,
        timeout: Duration,
    ) -> Result<Self, StoreError> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| StoreError::Internal(format!("parse DATABASE_URL: {e}")))?;
        // Every session commits synchronously, whatever the server default: an insert is
        // acknowledged only once it is durable (I3), even as a single autocommit statement.
        let options = match config.get_options() {
            Some(existing) => format!("{existing} -c synchronous_commit=on"),
            None => "-c synchronous_commit=on".to_string(),
        };
        config.options(&options);
        config.connect_timeout(timeout);
        let tls = pgtls::connector(&config, ca_file)
            .map_err(|e| StoreError::Internal(format!("configure TLS to PostgreSQL: {e}")))?;
        let manager = deadpool_postgres::Manager::from_config(
            config.clone(),
            tls.clone(),
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(max_connections)
            .runtime(Runtime::Tokio1)
            .timeouts(Timeouts {
                wait: Some(timeout),
                create: Some(timeout),
                recycle: Some(timeout),
            })
            .build()
            .map_err(|e| StoreError::Internal(format!("configure the PostgreSQL pool: {e}")))?;
        Ok(Self {
            pool,
            config: Arc::new(config),
            tls,
        })
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

    /// Inserts many links in one statement (one round trip, one commit). Items must not carry
    /// idempotency keys. Outcomes come back in input order; conflicts are resolved per row.
    pub(super) async fn insert_many(
        &self,
        links: &[NewLink],
    ) -> Result<Vec<InsertOutcome>, StoreError> {
        let client = self.client().await?;
        let insert = client
            .prepare_cached(&format!(
                "INSERT INTO links (code, long_url, kind, id, expires_at, owner, dedup_key) \
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::timestamptz[], $6::text[], $7::bytea[]) \
                 ON CONFLICT DO NOTHING RETURNING {LINK_COLUMNS}"
            ))
            .await
            .map_err(db_error)?;
        let codes: Vec<&str> = links.iter().map(|l| l.code.as_str()).collect();
        let urls: Vec<&str> = links.iter().map(|l| l.url.as_str()).collect();
        let kinds: Vec<&str> = links.iter().map(|l| l.kind.as_str()).collect();
        let ids: Vec<Option<i64>> = links.iter().map(|l| l.id.map(|id| id as i64)).collect();
        let expires: Vec<Option<chrono::DateTime<chrono::Utc>>> =
            links.iter().map(|l| l.expires_at).collect();
        let owners: Vec<&str> = links.iter().map(|l| l.owner.as_str()).collect();
        let dedup: Vec<Option<&[u8]>> = links.iter().map(|l| l.dedup_key.as_deref()).collect();
        let rows = client
            .query(
                &insert,
                &[&codes, &urls, &kinds, &ids, &expires, &owners, &dedup],
            )
            .await
            .map_err(|e| after_write(db_error(e)))?;
        let mut created: std::collections::HashMap<String, Link> = rows
            .iter()
            .map(|row| (row.get::<_, String>(0), link_from_row(row)))
            .collect();
        let mut outcomes: Vec<Option<InsertOutcome>> = links
            .iter()
            .map(|l| {
                let ours = created.get(&l.code).is_some_and(|c| c.url == l.url);
                ours.then(|| created.remove(&l.code))
                    .flatten()
                    .map(InsertOutcome::Created)
            })
            .collect();
        // Rows not inserted: a dedup twin (maybe from this very batch) or a taken code.
        let wanted: Vec<&[u8]> = links
            .iter()
            .zip(&outcomes)
            .filter(|(_, o)| o.is_none())
            .filter_map(|(l, _)| l.dedup_key.as_deref())
            .collect();
        if !wanted.is_empty() {
            let twins = client
                .query(
                    &format!(
                        "SELECT {LINK_COLUMNS}, dedup_key FROM links WHERE dedup_key = ANY($1)"
                    ),
                    &[&wanted],
                )
                .await
                .map_err(db_error)?;
            let twins: std::collections::HashMap<Vec<u8>, Link> = twins
                .iter()
                .map(|row| (row.get::<_, Vec<u8>>(5), link_from_row(row)))
                .collect();
            for (link, outcome) in links.iter().zip(outcomes.iter_mut()) {
                if outcome.is_none()
                    && let Some(twin) = link.dedup_key.as_ref().and_then(|k| twins.get(k))
                {
                    *outcome = Some(InsertOutcome::Deduplicated(twin.clone()));
                }
            }
        }
        Ok(outcomes
            .into_iter()
            .map(|o| o.unwrap_or(InsertOutcome::CodeTaken))
            .collect())
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
                // Reuse this connection: taking a second one while holding the first can
                // exhaust the pool under a burst of retries.
                let found = find_idempotent_on(&client, &link.owner, &idem.key).await?;
                return replay(found, &idem.key, &idem.fingerprint);
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
            tx.commit().await.map_err(|e| after_write(db_error(e)))?;
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

    pub(super) async fn get_with_clicks(&self, code: &str) -> Result<Option<Link>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT l.code, l.long_url, l.created_at, l.expires_at, l.deleted_at, c.human, c.head, c.bot \
                 FROM links l LEFT JOIN link_clicks c ON c.code = l.code WHERE l.code = $1",
                &[&code],
            )
            .await
            .map_err(db_error)?;
        Ok(row.map(|row| {
            let mut link = link_from_row(&row);
            let count = |i: usize| row.get::<_, Option<i64>>(i).unwrap_or(0).max(0) as u64;
            link.clicks = ClickCounts {
                human: count(5),
                head: count(6),
                bot: count(7),
            };
            link
        }))
    }

    pub(super) async fn add_clicks(
        &self,
        rows: &[(CodeMapKey, ClickCounts)],
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        let codes: Vec<&str> = rows.iter().map(|(c, _)| c.as_str()).collect();
        let column = |f: fn(&ClickCounts) -> u64| -> Vec<i64> {
            rows.iter().map(|(_, c)| f(c) as i64).collect()
        };
        let (human, head, bot) = (column(|c| c.human), column(|c| c.head), column(|c| c.bot));
        client
            .execute(
                "INSERT INTO link_clicks (code, human, head, bot) \
                 SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[], $4::int8[]) \
                 ON CONFLICT (code) DO UPDATE SET human = link_clicks.human + EXCLUDED.human, \
                 head = link_clicks.head + EXCLUDED.head, bot = link_clicks.bot + EXCLUDED.bot",
                &[&codes, &human, &head, &bot],
            )
            .await
            .map_err(db_error)?;
        Ok(())
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
        find_idempotent_on(&client, owner, key).await
    }

    pub(super) async fn delete(&self, code: &str) -> Result<DeleteOutcome, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let updated = tx
            .execute(
                "UPDATE links SET deleted_at = now(), dedup_key = NULL WHERE code = $1 AND deleted_at IS NULL",
                &[&code],
            )
            .await
            .map_err(db_error)?;
        if updated == 1 {
            // Delivered to every listening node when (and only if) the delete commits.
            tx.execute("SELECT pg_notify($1, $2)", &[&NOTIFY_CHANNEL, &code])
                .await
                .map_err(db_error)?;
            tx.commit().await.map_err(db_error)?;
            return Ok(DeleteOutcome::Deleted);
        }
        let exists = tx
            .query_opt("SELECT 1 FROM links WHERE code = $1", &[&code])
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(if exists.is_some() {
            DeleteOutcome::AlreadyDeleted
        } else {
            DeleteOutcome::NotFound
        })
    }

    /// Listens for link changes made by any node and reports them to `on_event` until `stop`:
    /// [`ListenEvent::Changed`] per changed code, and [`ListenEvent::Reset`] whenever the
    /// listening connection is (re)established, since changes may have been missed meanwhile.
    pub async fn listen(
        self,
        on_event: impl Fn(ListenEvent) + Send + 'static,
        stop: CancellationToken,
    ) {
        let mut backoff = Duration::from_millis(100);
        while !stop.is_cancelled() {
            match listen_once(&self.config, &self.tls, &on_event, &stop).await {
                Ok(()) => backoff = Duration::from_millis(100),
                Err(error) => {
                    tracing::warn!(%error, retry_in = ?backoff, "link change listener disconnected")
                }
            }
            on_event(ListenEvent::Reset);
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = stop.cancelled() => return,
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
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
}
