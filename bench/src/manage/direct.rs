//! The store read directly by this process, the baselines of the list and the export: the
//! list's keyset `SELECT` and the export's scan, on PostgreSQL (tokio-postgres) or on the
//! node's SQLite file (rusqlite, read-only).

use anyhow::{Context, bail, ensure};
use futures::StreamExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The tenant every bench key belongs to.
const TENANT: &str = "default";

/// The columns the stores' list and export read from `links` (`L_LINK_COLUMNS` in
/// shortener/src/store/postgres/mod.rs, `COLUMNS` in store/sqlite/rows.rs).
const LINK_COLUMNS: &str = "l.code, l.long_url, l.created_at, l.expires_at, l.deleted_at, l.tenant, l.owner, l.disabled_at, l.max_visits, l.tags, l.import_batch, l.password_hash";

/// The export's own `SELECT` (every link of the tenant with its click counts, newest first).
fn export_select(param: &str) -> String {
    format!(
        "SELECT {LINK_COLUMNS}, c.human, c.head, c.bot FROM links l \
         LEFT JOIN link_clicks c ON c.code = l.code WHERE l.tenant = {param} \
         ORDER BY l.created_at DESC, l.code DESC"
    )
}

/// A bare page of the list, without the click counts: `WHERE tenant [AND keyset] ORDER BY ...
/// LIMIT`.
fn page_select(keyset: bool, p: impl Fn(usize) -> String) -> String {
    let after = if keyset {
        format!(" AND (l.created_at, l.code) < ({}, {})", p(2), p(3))
    } else {
        String::new()
    };
    format!(
        "SELECT {LINK_COLUMNS} FROM links l WHERE l.tenant = {}{after} \
         ORDER BY l.created_at DESC, l.code DESC LIMIT {}",
        p(1),
        p(if keyset { 4 } else { 2 })
    )
}

/// The store as this process reads it directly.
pub(super) enum Direct {
    Postgres(tokio_postgres::Client),
    Sqlite(Arc<Mutex<rusqlite::Connection>>),
}

/// A keyset position in the store's own encoding.
#[derive(Clone)]
pub(super) enum Position {
    Postgres(chrono::DateTime<chrono::Utc>, String),
    Sqlite(i64, String),
}

impl Direct {
    pub(super) async fn postgres(url: &str) -> anyhow::Result<Direct> {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .context("connect to the links database")?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Direct::Postgres(client))
    }

    pub(super) fn sqlite(path: &Path) -> anyhow::Result<Direct> {
        let conn = rusqlite::Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .context("open the node's SQLite file")?;
        Ok(Direct::Sqlite(Arc::new(Mutex::new(conn))))
    }

    /// The position of the `depth`-th link of the list (the keyset a cursor `depth` links in
    /// continues after).
    pub(super) async fn position(&self, depth: u64) -> anyhow::Result<Position> {
        let offset = depth.saturating_sub(1) as i64;
        match self {
            Direct::Postgres(client) => {
                let row = client
                    .query_one(
                        "SELECT created_at, code FROM links WHERE tenant = $1 \
                         ORDER BY created_at DESC, code DESC OFFSET $2 LIMIT 1",
                        &[&TENANT, &offset],
                    )
                    .await?;
                Ok(Position::Postgres(row.get(0), row.get(1)))
            }
            Direct::Sqlite(conn) => {
                let conn = Arc::clone(conn);
                tokio::task::spawn_blocking(move || {
                    let conn = conn.lock().expect("sqlite connection");
                    let (at, code) = conn.query_row(
                        "SELECT created_at, code FROM links WHERE tenant = ?1 \
                         ORDER BY created_at DESC, code DESC LIMIT 1 OFFSET ?2",
                        rusqlite::params![TENANT, offset],
                        |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)),
                    )?;
                    anyhow::Ok(Position::Sqlite(at, code))
                })
                .await?
            }
        }
    }

    /// `n` timed pages of `limit` links after `after` (none: the first page); microseconds.
    pub(super) async fn pages(
        &self,
        after: Option<&Position>,
        limit: usize,
        n: usize,
    ) -> anyhow::Result<Vec<u32>> {
        let mut latencies = Vec::with_capacity(n);
        let rows_wanted = limit as i64 + 1;
        match self {
            Direct::Postgres(client) => {
                let sql = page_select(after.is_some(), |i| format!("${i}"));
                let statement = client.prepare(&sql).await?;
                for _ in 0..n {
                    let t = Instant::now();
                    let rows = match after {
                        Some(Position::Postgres(at, code)) => {
                            client
                                .query(&statement, &[&TENANT, at, code, &rows_wanted])
                                .await?
                        }
                        None => client.query(&statement, &[&TENANT, &rows_wanted]).await?,
                        Some(Position::Sqlite(..)) => bail!("a SQLite position on PostgreSQL"),
                    };
                    latencies.push(t.elapsed().as_micros() as u32);
                    ensure!(rows.len() as i64 == rows_wanted, "a short page");
                }
            }
            Direct::Sqlite(conn) => {
                let conn = Arc::clone(conn);
                let after = after.cloned();
                latencies = tokio::task::spawn_blocking(move || {
                    let conn = conn.lock().expect("sqlite connection");
                    let sql = page_select(after.is_some(), |i| format!("?{i}"));
                    let mut statement = conn.prepare_cached(&sql)?;
                    let mut latencies = Vec::with_capacity(n);
                    for _ in 0..n {
                        let t = Instant::now();
                        let mut rows = match &after {
                            Some(Position::Sqlite(at, code)) => {
                                statement.query(rusqlite::params![TENANT, at, code, rows_wanted])?
                            }
                            None => statement.query(rusqlite::params![TENANT, rows_wanted])?,
                            Some(Position::Postgres(..)) => {
                                bail!("a PostgreSQL position on SQLite")
                            }
                        };
                        let mut count = 0;
                        while let Some(row) = rows.next()? {
                            read_row(row)?;
                            count += 1;
                        }
                        latencies.push(t.elapsed().as_micros() as u32);
                        ensure!(count == rows_wanted, "a short page");
                    }
                    anyhow::Ok(latencies)
                })
                .await??;
            }
        }
        Ok(latencies)
    }

    /// The export's rows read directly, timed: returns (rows, bytes, elapsed).
    pub(super) async fn scan(&self) -> anyhow::Result<(u64, u64, Duration)> {
        match self {
            Direct::Postgres(client) => {
                let started = Instant::now();
                let copy = format!("COPY ({}) TO STDOUT", export_select(&format!("'{TENANT}'")));
                let stream = client.copy_out(copy.as_str()).await?;
                futures::pin_mut!(stream);
                let (mut rows, mut bytes) = (0u64, 0u64);
                while let Some(chunk) = stream.next().await {
                    let chunk = chunk?;
                    bytes += chunk.len() as u64;
                    rows += chunk.iter().filter(|&&b| b == b'\n').count() as u64;
                }
                Ok((rows, bytes, started.elapsed()))
            }
            Direct::Sqlite(conn) => {
                let conn = Arc::clone(conn);
                tokio::task::spawn_blocking(move || {
                    let conn = conn.lock().expect("sqlite connection");
                    let started = Instant::now();
                    let mut statement = conn.prepare(&export_select("?1"))?;
                    let mut rows = statement.query([TENANT])?;
                    let mut n = 0u64;
                    while let Some(row) = rows.next()? {
                        read_row(row)?;
                        n += 1;
                    }
                    anyhow::Ok((n, 0, started.elapsed()))
                })
                .await?
            }
        }
    }
}

/// Every column of a SQLite row read into an owned value, as the store does for each link.
fn read_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<()> {
    for i in 0..row.as_ref().column_count() {
        std::hint::black_box(row.get::<_, rusqlite::types::Value>(i)?);
    }
    Ok(())
}
