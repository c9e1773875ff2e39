//! The database ceilings: pgbench running the node's exact single-row create statement on the
//! node's schema, and the same single-row insert in its own transaction on SQLite with the
//! node's durability guarantee: WAL, and each commit on disk before it returns
//! (`synchronous=FULL`; the node gets the same guarantee from its group-commit fsync).

use crate::machine::{self, LOAD_CORE};
use crate::preload;
use crate::procs::{PgDatabase, target_url};
use crate::stats::Run;
use anyhow::{Context, bail};
use rusqlite::{Connection, OptionalExtension, params};
use std::path::Path;
use std::time::{Duration, Instant};

/// The row the PostgreSQL store writes for a generated code (`INSERT_ROWS` in
/// shortener/src/store/postgres/insert.rs: every column the node fills, tenant and target host
/// included, and the columns it reads back), as one plain INSERT, with pgbench variables for
/// its parameters: a random ID, a 7-character code derived from it, the row filed under its ID
/// (the slot layout a fresh database starts in).
const PGBENCH_SCRIPT: &str = "\\set id random(1, 9000000000000000000)
INSERT INTO links (slot, code, long_url, kind, id, expires_at, owner, dedup_key, tenant, host_rev) \
VALUES (:id, substr(md5(:id::text), 1, 7), 'https://www.example.com/articles/2026/11/a-typical-article-slug-' || :id || '?utm_source=bench', \
'generated', :id, NULL, 'pgbench', NULL, 'default', 'com.example.www') \
ON CONFLICT DO NOTHING RETURNING code, long_url, created_at, expires_at, deleted_at, tenant, owner, disabled_at, max_visits, tags, import_batch, password_hash;
";

/// A database with the shortener's schema, for pgbench.
pub fn pgbench_database() -> anyhow::Result<PgDatabase> {
    let db = PgDatabase::create("pgbench")?;
    preload::migrate_postgres(&db.url())?;
    Ok(db)
}

fn pgbench_binary() -> String {
    let installed = std::fs::read_dir("/usr/lib/postgresql")
        .ok()
        .and_then(|dirs| {
            let mut found: Vec<_> = dirs
                .filter_map(Result::ok)
                .map(|d| d.path().join("bin/pgbench"))
                .filter(|p| p.exists())
                .collect();
            found.sort();
            found.pop()
        });
    installed.map_or_else(|| "pgbench".into(), |p| p.display().to_string())
}

/// pgbench at `clients` connections for `duration` (prepared statements, one transaction per
/// insert); latencies from its per-transaction log.
pub fn pgbench(
    db: &PgDatabase,
    clients: usize,
    duration: Duration,
    dir: &Path,
) -> anyhow::Result<Run> {
    let script = dir.join("create.sql");
    std::fs::write(&script, PGBENCH_SCRIPT).context("write the pgbench script")?;
    let logs = dir.join(format!("pgbench-{clients}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&logs);
    std::fs::create_dir_all(&logs)?;
    let output = machine::pinned(LOAD_CORE, pgbench_binary())
        .args(["-n", "-M", "prepared", "-l"])
        .arg(format!("--log-prefix={}", logs.join("log").display()))
        .args(["-c", &clients.to_string(), "-j", "1"])
        .args(["-T", &duration.as_secs().max(1).to_string(), "-f"])
        .arg(&script)
        .arg(db.url())
        .output()
        .context("run pgbench")?;
    if !output.status.success() {
        bail!(
            "pgbench failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let mut latencies = Vec::new();
    for entry in std::fs::read_dir(&logs)?.filter_map(Result::ok) {
        let text = std::fs::read_to_string(entry.path())?;
        // client_id transaction_no latency_us script_no epoch_s epoch_us
        latencies.extend(
            text.lines()
                .filter_map(|l| l.split_whitespace().nth(2)?.parse::<u32>().ok()),
        );
    }
    let _ = std::fs::remove_dir_all(&logs);
    let n = latencies.len() as u64;
    Ok(Run::from_latencies(
        latencies,
        n,
        duration.max(Duration::from_secs(1)),
        0,
    ))
}

/// Single-row inserts, each in its own immediate transaction, on a fresh SQLite file in `dir`
/// with the node's settings; one writer (SQLite serialises writers anyway).
pub fn sqlite_single_inserts(dir: &Path, duration: Duration) -> anyhow::Result<Run> {
    let data = dir.join(format!("baseline-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    std::fs::create_dir_all(&data)?;
    let key = codespace::CodeKey::generate();
    let path = preload::migrated_sqlite(&data, &key)?;
    let mut conn = Connection::open(&path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    // Codes as the node makes them (FF1 of sequential IDs), each row at the rowid of its ID as
    // the node's are (migration 4).
    let space = codespace::CodeSpace::new(&key, codespace::DEFAULT_LENGTH)?;
    let started = Instant::now();
    let mut latencies = Vec::new();
    let mut id: i64 = 0;
    while started.elapsed() < duration {
        let t = Instant::now();
        id += 1;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let code: Option<String> = tx
            .query_row(
                "INSERT INTO links (slot, code, long_url, kind, id, created_at, expires_at, owner, dedup_key, tenant, host_rev) \
                 VALUES (?3, ?1, ?2, 'generated', ?3, ?4, NULL, 'baseline', NULL, 'default', 'com.example.www') ON CONFLICT DO NOTHING \
                 RETURNING code, long_url, created_at, expires_at, deleted_at, tenant, owner, disabled_at, max_visits, tags, import_batch, password_hash",
                params![space.encode(id as u64), target_url(id as u64), id, 0i64],
                |r| r.get(0),
            )
            .optional()?;
        tx.commit()?;
        anyhow::ensure!(code.is_some(), "baseline insert conflicted");
        latencies.push(t.elapsed().as_micros() as u32);
    }
    let elapsed = started.elapsed();
    drop(conn);
    let _ = std::fs::remove_dir_all(&data);
    let n = latencies.len() as u64;
    Ok(Run::from_latencies(latencies, n, elapsed, 0))
}
