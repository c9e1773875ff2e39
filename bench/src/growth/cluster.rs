//! The growth group's own PostgreSQL server: a throwaway cluster (testkit's, initdb'd in a
//! temporary directory, listening on 127.0.0.1 on a free port) that the group can restart with
//! another `shared_buffers` without touching the machine's shared server; and the figures read
//! from it (WAL position, buffer hits per database, relation sizes, pg_stat_statements).

use anyhow::Context;
use std::time::Duration;
use testkit::cluster::Cluster;
use tokio_postgres::{Client, NoTls};

/// Whether the contrib extension `name` is installed for some server version.
pub fn extension_available(name: &str) -> bool {
    std::fs::read_dir("/usr/share/postgresql")
        .map(|versions| {
            versions
                .filter_map(Result::ok)
                .any(|v| v.path().join(format!("extension/{name}.control")).exists())
        })
        .unwrap_or(false)
}

/// The parts of the links table: all of it, and what a redirect cache miss reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct LinksSize {
    /// Rows.
    pub rows: u64,
    /// Bytes of the table with all its indexes.
    pub total: u64,
    /// Bytes of the table (heap, TOAST, maps) and its primary key: what a lookup of a
    /// generated code reads (in either layout the primary key is the index it searches).
    pub lookup: u64,
}

/// The bench's cluster and a connection to its `postgres` database (kept out of the measured
/// databases, so its own queries do not count in their statistics).
pub struct BenchCluster {
    cluster: Cluster,
    admin: Option<Client>,
    /// Whether pg_stat_statements is loaded.
    pub statements: bool,
    /// The `shared_buffers` it runs with now.
    pub shared_buffers: String,
}

/// Buffer reads of one database: found in shared buffers, and read from the kernel.
#[derive(Debug, Clone, Copy, Default)]
pub struct Blocks {
    /// `blks_hit`.
    pub hit: f64,
    /// `blks_read`.
    pub read: f64,
}

impl Blocks {
    /// The hit ratio of the reads between `before` and `self`.
    pub fn ratio_since(self, before: Blocks) -> f64 {
        let (hit, read) = (self.hit - before.hit, self.read - before.read);
        if hit + read > 0.0 {
            hit / (hit + read)
        } else {
            f64::NAN
        }
    }
}

/// One row of pg_stat_statements.
#[derive(Debug, Clone)]
pub struct Statement {
    /// The normalised query text.
    pub query: String,
    /// Times executed.
    pub calls: i64,
    /// Total execution time, milliseconds.
    pub total_ms: f64,
    /// Mean execution time, milliseconds.
    pub mean_ms: f64,
    /// Rows returned or affected.
    pub rows: i64,
    /// Shared blocks found in the buffer cache.
    pub hit: i64,
    /// Shared blocks read from the kernel.
    pub read: i64,
    /// WAL bytes written.
    pub wal_bytes: f64,
}

pub(super) async fn connect(url: &str) -> anyhow::Result<Client> {
    let (client, connection) =
        tokio::time::timeout(Duration::from_secs(10), tokio_postgres::connect(url, NoTls))
            .await
            .with_context(|| format!("connect to {url}: timed out"))?
            .with_context(|| format!("connect to {url}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

impl BenchCluster {
    /// initdb's a cluster and starts it with `shared_buffers` and pg_stat_statements (when
    /// installed). Autovacuum stays on, as on a real server.
    pub async fn start(shared_buffers: &str) -> anyhow::Result<BenchCluster> {
        let statements = extension_available("pg_stat_statements");
        if !statements {
            eprintln!(
                "growth: pg_stat_statements is not installed (no /usr/share/postgresql/*/extension/pg_stat_statements.control): no top-queries table"
            );
        }
        let buffers = format!("shared_buffers = '{shared_buffers}'");
        let mut settings = vec![
            buffers.as_str(),
            "max_connections = 100",
            "autovacuum = on",
            "log_min_messages = warning",
        ];
        if statements {
            settings.push("shared_preload_libraries = 'pg_stat_statements'");
            settings.push("pg_stat_statements.track = top");
        }
        let cluster = Cluster::start(&settings).await;
        eprintln!(
            "growth: PostgreSQL on 127.0.0.1:{}, data in {} (stopped and removed at the end)",
            cluster.port(),
            cluster.data_dir().display()
        );
        let mut out = BenchCluster {
            cluster,
            admin: None,
            statements,
            shared_buffers: shared_buffers.into(),
        };
        out.reconnect().await?;
        if statements {
            // In `postgres`, where this connection reads the view; it covers every database.
            out.admin()
                .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                .await
                .context("create extension pg_stat_statements")?;
        }
        Ok(out)
    }

    async fn reconnect(&mut self) -> anyhow::Result<()> {
        self.admin = Some(connect(&self.cluster.url()).await?);
        Ok(())
    }

    fn admin(&self) -> &Client {
        self.admin.as_ref().expect("connected after every start")
    }

    /// Waits (at most 10 s) until no client is connected to database `name` but those still
    /// idle in it: a backend reports its buffer counts when it goes idle or exits, so the
    /// counts read afterwards include the work of every client that has stopped.
    pub async fn settle(&self, name: &str) -> anyhow::Result<()> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let busy: i64 = self
                .admin()
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 \
                     AND backend_type = 'client backend' AND state IS DISTINCT FROM 'idle'",
                    &[&name],
                )
                .await
                .context("read pg_stat_activity")?
                .get(0);
            if busy == 0 || std::time::Instant::now() >= deadline {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// The connection string of database `name`.
    pub fn url(&self, name: &str) -> String {
        self.cluster.database_url(name)
    }

    /// The server log so far (for errors).
    pub fn log(&self) -> String {
        self.cluster.log()
    }

    /// Creates database `name` (dropping any left from before); returns its URL.
    pub async fn create_database(&self, name: &str) -> anyhow::Result<String> {
        self.drop_database(name).await?;
        self.admin()
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .with_context(|| format!("create database {name}"))?;
        Ok(self.url(name))
    }

    /// Drops database `name` if it exists, disconnecting its sessions.
    pub async fn drop_database(&self, name: &str) -> anyhow::Result<()> {
        self.admin()
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await
            .with_context(|| format!("drop database {name}"))
    }

    /// Restarts the server with `shared_buffers` (`ALTER SYSTEM`, then a fast shutdown, which
    /// checkpoints, and a start on the same port). Shared buffers start empty; the kernel's
    /// page cache keeps what it had.
    pub async fn restart_with(&mut self, shared_buffers: &str) -> anyhow::Result<()> {
        self.admin()
            .batch_execute(&format!(
                "ALTER SYSTEM SET shared_buffers = '{shared_buffers}'"
            ))
            .await
            .context("set shared_buffers")?;
        self.admin = None;
        self.cluster.stop().await;
        self.cluster.restart().await;
        self.reconnect().await?;
        let now: String = self
            .admin()
            .query_one("SHOW shared_buffers", &[])
            .await?
            .get(0);
        eprintln!("growth: PostgreSQL restarted with shared_buffers = {now}");
        self.shared_buffers = shared_buffers.into();
        Ok(())
    }

    /// The server's version (`SHOW server_version`).
    pub async fn server_version(&self) -> anyhow::Result<String> {
        Ok(self
            .admin()
            .query_one("SHOW server_version", &[])
            .await?
            .get(0))
    }

    /// The WAL insert position, in bytes from the start.
    pub async fn wal_bytes(&self) -> anyhow::Result<f64> {
        let row = self
            .admin()
            .query_one("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::float8", &[])
            .await
            .context("read the WAL position")?;
        Ok(row.get(0))
    }

    /// Buffer reads of database `name` so far. Backends report their counts when they go
    /// idle (at most once a second) and when they exit, so read this after the clients have
    /// gone.
    pub async fn blocks(&self, name: &str) -> anyhow::Result<Blocks> {
        let row = self
            .admin()
            .query_one(
                "SELECT blks_hit::float8, blks_read::float8 FROM pg_stat_database WHERE datname = $1",
                &[&name],
            )
            .await
            .context("read pg_stat_database")?;
        Ok(Blocks {
            hit: row.get(0),
            read: row.get(1),
        })
    }

    /// A connection to database `name` whose statements pg_stat_statements does not count
    /// (the top-statements table is the node's alone).
    async fn untracked(&self, name: &str) -> anyhow::Result<Client> {
        let client = connect(&self.url(name)).await?;
        if self.statements {
            client
                .batch_execute("SET pg_stat_statements.track = none")
                .await
                .context("stop tracking this session's statements")?;
        }
        Ok(client)
    }

    /// Quiets the server before a read-only measurement: waits (at most `limit`) until no
    /// autovacuum worker is busy in database `name`, then `CHECKPOINT`, so the write-back of
    /// what earlier runs changed (a checkpoint the create runs' WAL started, dirty buffers a
    /// lookup would have to write before reusing) is not timed with the reads.
    pub async fn quiesce(&self, name: &str, limit: Duration) -> anyhow::Result<()> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let vacuuming: i64 = self
                .admin()
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 \
                     AND backend_type = 'autovacuum worker'",
                    &[&name],
                )
                .await
                .context("read pg_stat_activity")?
                .get(0);
            if vacuuming == 0 {
                break;
            }
            if std::time::Instant::now() >= deadline {
                eprintln!(
                    "growth: autovacuum still busy in {name} after {} s; measuring anyway",
                    limit.as_secs()
                );
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.admin()
            .batch_execute("CHECKPOINT")
            .await
            .context("checkpoint")
    }

    /// Runs `sql` in database `name` (no time limit beyond the caller's).
    pub async fn execute_in(&self, name: &str, sql: &str) -> anyhow::Result<()> {
        self.untracked(name)
            .await?
            .batch_execute(sql)
            .await
            .with_context(|| format!("{sql} in {name}"))
    }

    /// Rows of `links` in database `name`, and the bytes of the table: with all its indexes,
    /// and the part a cache miss reads.
    pub async fn links_size(&self, name: &str) -> anyhow::Result<LinksSize> {
        let client = self.untracked(name).await?;
        let row = client
            .query_one(
                "SELECT (SELECT count(*) FROM links), pg_total_relation_size('links'), \
                 pg_table_size('links') + (SELECT pg_relation_size(indexrelid) FROM pg_index \
                 WHERE indrelid = 'links'::regclass AND indisprimary)",
                &[],
            )
            .await
            .context("count links")?;
        let (rows, total, lookup): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
        Ok(LinksSize {
            rows: rows as u64,
            total: total as u64,
            lookup: lookup as u64,
        })
    }

    /// Reads the links table and its primary key in, as a primary that has been answering
    /// cache misses for a while holds them: all of both into the kernel's page cache
    /// (`pg_prewarm(..., 'read')`), then into shared buffers as far as they hold them (the
    /// table, then the primary key, so a key larger than the buffers leaves the key in them).
    /// Returns the bytes read, or `None` when the contrib extension pg_prewarm is not installed.
    pub async fn prewarm_lookups(&self, name: &str) -> anyhow::Result<Option<u64>> {
        if !extension_available("pg_prewarm") {
            return Ok(None);
        }
        let client = self.untracked(name).await?;
        client
            .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
            .await
            .context("create extension pg_prewarm")?;
        let pkey =
            "(SELECT indexrelid FROM pg_index WHERE indrelid = 'links'::regclass AND indisprimary)";
        let row = client
            .query_one(
                &format!(
                    "SELECT pg_prewarm('links', 'read') + pg_prewarm({pkey}, 'read'), \
                     current_setting('block_size')::int8"
                ),
                &[],
            )
            .await
            .context("read the links table and its primary key into the page cache")?;
        let (blocks, block_size): (i64, i64) = (row.get(0), row.get(1));
        client
            .batch_execute(&format!(
                "SELECT pg_prewarm('links', 'buffer'); SELECT pg_prewarm({pkey}, 'buffer')"
            ))
            .await
            .context("read the links table and its primary key into shared buffers")?;
        Ok(Some((blocks * block_size) as u64))
    }

    /// Forgets what pg_stat_statements has seen so far (every database).
    pub async fn reset_statements(&self) -> anyhow::Result<()> {
        if self.statements {
            self.admin()
                .batch_execute("SELECT pg_stat_statements_reset()")
                .await
                .context("reset pg_stat_statements")?;
        }
        Ok(())
    }

    /// The `limit` statements of database `name` with the most total execution time.
    pub async fn top_statements(&self, name: &str, limit: i64) -> anyhow::Result<Vec<Statement>> {
        if !self.statements {
            return Ok(Vec::new());
        }
        let rows = self
            .admin()
            .query(
                "SELECT s.query, s.calls, s.total_exec_time, s.mean_exec_time, s.rows, \
                 s.shared_blks_hit, s.shared_blks_read, s.wal_bytes::float8 \
                 FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid \
                 WHERE d.datname = $1 ORDER BY s.total_exec_time DESC LIMIT $2",
                &[&name, &limit],
            )
            .await
            .context("read pg_stat_statements")?;
        Ok(rows
            .iter()
            .map(|r| Statement {
                query: r.get(0),
                calls: r.get(1),
                total_ms: r.get(2),
                mean_ms: r.get(3),
                rows: r.get(4),
                hit: r.get(5),
                read: r.get(6),
                wal_bytes: r.get(7),
            })
            .collect())
    }
}
