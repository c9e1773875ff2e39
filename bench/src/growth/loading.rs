//! Loading one layout's table to a size: `shortener preload` in bounded chunks within the
//! layout's time budget, sampling the codes it writes, then `VACUUM (ANALYZE)`.

use super::cluster::BenchCluster;
use super::sample::Sample;
use super::{GrowthSettings, Layout, Load, Store};
use crate::node::IdService;
use crate::preload;
use anyhow::{Context, bail};
use std::time::Instant;

/// Loads the table at `store` to `target` rows (if it has fewer) in bounded chunks, keeping a
/// sample of the codes; then `VACUUM (ANALYZE)`, as autovacuum would have left an older table.
pub(super) async fn load_to(
    cluster: &BenchCluster,
    store: &Store,
    settings: &GrowthSettings,
    layout: Layout,
    target: u64,
    sample: &mut Sample,
    deadline: Instant,
) -> anyhow::Result<Option<Load>> {
    let from = cluster.links_size(&store.name).await?.rows;
    if from >= target {
        return Ok(None);
    }
    let ids = IdService::start_on(&store.dir, &store.ids_url).await?;
    let started = Instant::now();
    let mut rows = from;
    // Bounded in count (one chunk per million rows) and in time (the layout's budget).
    for _ in 0..(target - from).div_ceil(settings.chunk) {
        let n = (target - rows).min(settings.chunk);
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!(
                "the {} layout's load budget ran out at {rows} of {target} rows ({:.0} rows/s): \
                 raise --load-minutes or lower --sizes",
                layout.label(),
                (rows - from) as f64 / started.elapsed().as_secs_f64()
            );
        }
        let (url, ids_url, key) = (store.url.clone(), ids.url.clone(), store.key.clone());
        let mut taken = std::mem::take(sample);
        let chunk_started = Instant::now();
        let (result, back) = tokio::task::spawn_blocking(move || {
            let r = preload::postgres_links_each(&url, &ids_url, &key, n, left, |code| {
                taken.offer(code)
            });
            (r, taken)
        })
        .await?;
        *sample = back;
        result.with_context(|| format!("load the {} layout to {target} rows", layout.label()))?;
        rows += n;
        eprintln!(
            "growth: {} layout: {rows} of {target} rows, {:.0} rows/s this chunk, {:.0} rows/s so far",
            layout.label(),
            n as f64 / chunk_started.elapsed().as_secs_f64(),
            (rows - from) as f64 / started.elapsed().as_secs_f64()
        );
    }
    let seconds = started.elapsed().as_secs_f64();
    drop(ids);
    let vacuum = Instant::now();
    cluster
        .execute_in(&store.name, "VACUUM (ANALYZE) links")
        .await?;
    Ok(Some(Load {
        layout,
        from,
        to: rows,
        seconds,
        vacuum_seconds: vacuum.elapsed().as_secs_f64(),
    }))
}
