//! The baseline of the cache-miss runs: the same lookups straight against PostgreSQL, without
//! a node, at the same concurrency. Beside the node's figures it tells how much of a miss's
//! latency, and of its growth with the table, is the database's own primary-key lookup.

use super::Layout;
use super::cluster::connect;
use crate::stats::Run;
use anyhow::{Context, bail};
use codespace::{CodeKey, CodeSpace, DEFAULT_LENGTH};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// The columns a redirect's cache miss reads (the node's own statement's list).
const COLUMNS: &str = "code, long_url, created_at, expires_at, deleted_at, tenant, owner, \
                       disabled_at, max_visits, tags, import_batch, password_hash";

/// Looks up each code once over `connections` connections to `url`, by the key the layout
/// finds it by (the slot its code decodes to under `key`, or the code), with a prepared
/// statement as the node's; every code must be found.
pub async fn each_once(
    url: &str,
    layout: Layout,
    key: &CodeKey,
    codes: Arc<Vec<String>>,
    connections: usize,
) -> anyhow::Result<Run> {
    let space = CodeSpace::new(key, DEFAULT_LENGTH).context("the benchmark's code space")?;
    let slots: Vec<i64> = codes
        .iter()
        .map(|c| space.decode(c).map(|id| id as i64))
        .collect::<Result<_, _>>()
        .context("decode a sampled code")?;
    let slots = Arc::new(slots);
    let sql = match layout {
        Layout::Slot => format!("SELECT {COLUMNS} FROM links WHERE slot = $1 AND code = $2"),
        Layout::Code => {
            format!("SELECT {COLUMNS} FROM links WHERE code = $2 AND $1::int8 IS NOT NULL")
        }
    };
    let mut clients = Vec::new();
    for _ in 0..connections {
        let client = connect(url).await?;
        // Kept out of pg_stat_statements' top list, which is the node's.
        client
            .batch_execute("SET pg_stat_statements.track = none")
            .await
            .context("stop tracking this session's statements")?;
        let statement = client.prepare(&sql).await.context("prepare the lookup")?;
        // A new backend's first lookups load its catalog caches and plan the statement; the
        // node's connections have done that before a run is timed, so these do it too.
        for _ in 0..10 {
            client
                .query_opt(&statement, &[&-1i64, &"-"])
                .await
                .context("warm the connection")?;
        }
        clients.push((client, statement));
    }
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (client, statement) in clients {
        let (codes, slots, next) = (Arc::clone(&codes), Arc::clone(&slots), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            let (mut latencies, mut missing) = (Vec::new(), 0u64);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let (Some(code), Some(slot)) = (codes.get(i), slots.get(i)) else {
                    break;
                };
                let t = Instant::now();
                let row = client.query_opt(&statement, &[slot, code]).await?;
                latencies.push(t.elapsed().as_micros() as u32);
                if row.is_none() {
                    missing += 1;
                }
            }
            anyhow::Ok((latencies, missing))
        }));
    }
    let (all, missing) = crate::load::gather(tasks).await?;
    if missing > 0 {
        bail!("{missing} sampled codes were not found by a direct lookup");
    }
    let n = all.len() as u64;
    Ok(Run::from_latencies(all, n, started.elapsed(), 0))
}
