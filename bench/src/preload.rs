//! Loading many links into an embedded node's SQLite file directly, in one transaction, the way
//! the node itself would record them: a lease of the ID range in the ledger (so the node never
//! hands those IDs out), then one row per ID, at the rowid of its ID, with the code the node's
//! key gives it.

use crate::procs::target_url;
use codespace::{CodeKey, CodeSpace};
use rusqlite::{Connection, TransactionBehavior, params};
use std::path::Path;

/// The SQLite file of a node's data directory (`shortener::setup::DB_FILE`).
pub const DB_FILE: &str = "shortener.db";

/// Inserts `n` generated links into the node database at `data_dir`; returns their codes in ID
/// order (which the keyed permutation makes a random order of codes).
pub fn links(data_dir: &Path, key: &CodeKey, n: u64) -> anyhow::Result<Vec<String>> {
    let space = CodeSpace::new(key, codespace::DEFAULT_LENGTH)?;
    let mut conn = Connection::open(data_dir.join(DB_FILE))?;
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute(
        "INSERT INTO id_namespaces (namespace, next_id) VALUES ('links', 0) ON CONFLICT DO NOTHING",
        [],
    )?;
    let start: i64 = tx.query_row(
        "SELECT next_id FROM id_namespaces WHERE namespace = 'links'",
        [],
        |r| r.get(0),
    )?;
    let end = start + n as i64;
    tx.execute(
        "UPDATE id_namespaces SET next_id = ?1 WHERE namespace = 'links'",
        [end],
    )?;
    let now = chrono_millis();
    tx.execute(
        "INSERT INTO id_leases (namespace, start_id, end_id, holder, leased_at) VALUES ('links', ?1, ?2, 'bench-preload', ?3)",
        params![start, end, now],
    )?;
    let mut codes = Vec::with_capacity(n as usize);
    {
        let mut insert = tx.prepare(
            "INSERT INTO links (slot, code, long_url, kind, id, created_at, expires_at, owner, dedup_key) \
             VALUES (?3, ?1, ?2, 'generated', ?3, ?4, NULL, 'bench', NULL)",
        )?;
        for id in start..end {
            let code = space.encode(id as u64);
            insert.execute(params![code, target_url(id as u64), id, now])?;
            codes.push(code);
        }
    }
    tx.commit()?;
    Ok(codes)
}

fn chrono_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
