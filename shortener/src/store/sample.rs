//! The store's part of `/metrics`: what its write batching, its read replica and pool eviction
//! (PostgreSQL) and its group commit (SQLite) have done, read at scrape time.

use super::{Capabilities, Durability, Fallback, ReplicaStats, Store, WriterStats};
use crate::metrics::{Sample, Samples};
use std::fmt;
use std::sync::atomic::Ordering;

impl Sample for Store {
    fn sample(&self, out: &mut Samples<'_, '_>) -> fmt::Result {
        writer(self.writer_stats(), out)?;
        if let Some(replica) = self.replica_stats() {
            self::replica(&replica, out)?;
        }
        if let Some(durability) = self.durability() {
            group_commit(&durability, out)?;
        }
        if let Store::Postgres(store) = self {
            pools(&store.pools(), out)?;
            out.counter(
                "shortener_db_connections_evicted",
                "Pooled PostgreSQL connections discarded instead of reused: made before a statement \
                 was refused as read-only (25006), its session shut down (57P01-57P03) or its \
                 connection failed (class 08)",
                pgtls::evict::evicted(),
            )?;
        }
        Ok(())
    }
}

/// Each PostgreSQL pool's connections: open (made, in use or idle), idle (ready to be taken),
/// the most it makes, and the requests waiting for one (a pool that waits long answers 503).
fn pools(
    pools: &[(&'static str, deadpool_postgres::Status)],
    out: &mut Samples<'_, '_>,
) -> fmt::Result {
    let series = pools.iter().flat_map(|(pool, status)| {
        [
            ([("pool", *pool), ("state", "open")], status.size as f64),
            (
                [("pool", *pool), ("state", "idle")],
                status.available as f64,
            ),
            ([("pool", *pool), ("state", "max")], status.max_size as f64),
            (
                [("pool", *pool), ("state", "waiting")],
                status.waiting as f64,
            ),
        ]
    });
    out.gauges(
        "shortener_db_connections",
        "PostgreSQL pool connections by pool (primary, replica) and state: open (made), idle \
         (ready to be taken), max (the most it makes), waiting (requests not holding one yet: \
         queued on a full pool, or opening a new connection)",
        series,
    )
}

fn writer(stats: &WriterStats, out: &mut Samples<'_, '_>) -> fmt::Result {
    out.counter(
        "shortener_write_batches",
        "Batched inserts committed or attempted (one commit each)",
        stats.batches.load(Ordering::Relaxed),
    )?;
    out.counter(
        "shortener_write_batch_rows",
        "Rows carried by batched inserts (divide by shortener_write_batches for the mean batch size)",
        stats.rows.load(Ordering::Relaxed),
    )
}

fn replica(stats: &ReplicaStats, out: &mut Samples<'_, '_>) -> fmt::Result {
    out.counter(
        "shortener_replica_reads",
        "Reads answered by the read replica",
        stats.reads.load(Ordering::Relaxed),
    )?;
    out.counters(
        "shortener_replica_fallbacks",
        "Reads that could have gone to the read replica and went to the primary, by reason (unknown: the replica lacked the row; fresh: changed and not yet replayed; down; error; refused)",
        Fallback::ALL.map(|reason| ([("reason", reason.label())], stats.fallbacks(reason))),
    )?;
    out.gauge(
        "shortener_replica_available",
        "Whether the read replica answers and is verified (1) or reads go to the primary (0)",
        f64::from(u8::from(stats.available.load(Ordering::Relaxed))),
    )?;
    out.gauge(
        "shortener_replica_lag_bytes",
        "WAL bytes the read replica had not replayed at the last measurement (-1: not measured yet)",
        stats.lag_bytes.load(Ordering::Relaxed) as f64,
    )
}

fn group_commit(durability: &Durability, out: &mut Samples<'_, '_>) -> fmt::Result {
    out.counter(
        "shortener_sqlite_wal_syncs",
        "Fsyncs of the SQLite write-ahead log (each makes every write before it durable)",
        durability.wal_syncs,
    )?;
    out.counter(
        "shortener_sqlite_writes",
        "Rounds of durable writes on the SQLite writer connection (each one or more transactions, one fsync; click-count chunks committed without one are not counted)",
        durability.writes,
    )
}
